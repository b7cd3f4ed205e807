# A master process with two workers (each its own shm client and wake-up
# socket, running as an unprivileged user when started as root).
use Test::Nginx::Socket 'no_plan';

master_on();
workers(2);
no_shuffle();
run_tests();

__DATA__

=== TEST 1: generation through a worker of a master process
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"\[I"\}
--- no_error_log
[alert]
[emerg]

=== TEST 2: streaming through a worker of a master process
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "stream": true, "stream_options": {"include_usage": true}}
--- error_code: 200
--- response_body_like chomp
"text":" time".*"usage":\{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10\}\}\n\ndata: \[DONE\]\n\n$

=== TEST 3: /health from a worker
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
GET /health
--- error_code: 200
--- response_body_like chomp
"status":"ok"
