# Request lifecycle: a client disconnect cancels the engine request; complete
# responses and plain 400s leave nothing in the error log.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a client that disconnects mid-stream cancels its request in the engine
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest_small;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /v1/completions
{"prompt": [403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403], "max_tokens": 30, "stream": true}
--- timeout: 0.3
--- abort
--- error_code: 200
--- error_log
client went away before the response was complete; cancelling it in the engine

=== TEST 2: a complete response is not counted as an abort
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
{"prompt": "Once upon a time", "stream": true}
--- error_code: 200
--- response_body_like chomp
data: \[DONE\]\n\n$
--- no_error_log
client went away
[alert]
[crit]

=== TEST 3: an engine error is not leaked into the error log for a plain 400
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
{"prompt": "x", "n": 100}
--- error_code: 400
--- no_error_log
[alert]
[error]
