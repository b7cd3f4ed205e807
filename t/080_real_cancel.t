# Client disconnects against the REAL engine: t/run.sh starts a second
# `llm-engine serve` ($TEST_NGINX_CANCEL_ENGINE) for this file alone, so its
# llm_requests_cancelled_total (GET /metrics, read from the engine's shared
# metrics block) counts exactly the cancellations these blocks cause. The
# engine outlives nginx, which restarts for every block. n=8 x 500 tokens takes
# the engine about a second here, so the 0.3 s abort lands mid-stream.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: before: the engine has cancelled nothing
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CANCEL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
GET /metrics
--- error_code: 200
--- response_body_like chomp
llm_engine_up 1\n.*\nllm_requests_cancelled_total 0\n

=== TEST 2: a client that disconnects mid-stream (n=8, 500 tokens each) is cancelled in the engine
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CANCEL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 500, "ignore_eos": true, "temperature": 0, "stream": true, "n": 8}
--- timeout: 0.3
--- abort
--- error_code: 200
--- response_body_like chomp
^data: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":[0-7],"text":",","logprobs":null,"finish_reason":null\}\]\}\n\n
--- error_log
client went away before the response was complete; cancelling it in the engine

=== TEST 3: after: the engine's cancelled counter shows its 8 sequences cancelled
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CANCEL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
GET /metrics
--- error_code: 200
--- response_body_like chomp
llm_engine_up 1\n.*\nllm_requests_cancelled_total 8\n

=== TEST 4: a chat client that disconnects mid-stream is cancelled too
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CANCEL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 500, "ignore_eos": true, "stream": true, "n": 8}
--- timeout: 0.3
--- abort
--- error_code: 200
--- error_log
cancelling it in the engine

=== TEST 5: after: 16 sequences cancelled
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CANCEL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
GET /metrics
--- error_code: 200
--- response_body_like chomp
llm_engine_up 1\n.*\nllm_requests_cancelled_total 16\n

=== TEST 6: a request that finishes normally is not counted as cancelled
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CANCEL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0, "stream": true}
--- error_code: 200
--- response_body_like chomp
data: \[DONE\]\n\n$
--- no_error_log
client went away

=== TEST 7: after: still 16
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CANCEL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
GET /metrics
--- error_code: 200
--- response_body_like chomp
llm_engine_up 1\n.*\nllm_requests_cancelled_total 16\n
