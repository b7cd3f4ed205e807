# Concurrent requests through nginx to the REAL engine ($TEST_NGINX_REAL_ENGINE,
# `llm-engine serve` on stories260K, started by t/run.sh): t/090_parallel_client.pl
# sends them at once and counts the answers whose text equals the greedy
# reference from `llm-engine generate` (batching must not change greedy text).
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a streamed greedy completion's deltas join to the llm-engine generate text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- exec
perl t/090_parallel_client.pl $TEST_NGINX_SERVER_PORT 1 stream
--- response_body
1 concurrent stream requests: 1 gave the llm-engine generate text
--- no_error_log
[alert]
[crit]

=== TEST 2: a streamed greedy chat's deltas join to the llm-engine generate text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- exec
perl t/090_parallel_client.pl $TEST_NGINX_SERVER_PORT 1 chat_stream
--- response_body
1 concurrent chat_stream requests: 1 gave the llm-engine generate text
--- no_error_log
[alert]
[crit]

=== TEST 3: 8 concurrent greedy completions all equal the generate text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- exec
perl t/090_parallel_client.pl $TEST_NGINX_SERVER_PORT 8 completions
--- response_body
8 concurrent completions requests: 8 gave the llm-engine generate text
--- no_error_log
[alert]
[crit]

=== TEST 4: 8 concurrent greedy chats all equal the generate text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- exec
perl t/090_parallel_client.pl $TEST_NGINX_SERVER_PORT 8 chat
--- response_body
8 concurrent chat requests: 8 gave the llm-engine generate text
--- no_error_log
[alert]
[crit]

=== TEST 5: 16 concurrent streamed completions all join to the generate text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- exec
perl t/090_parallel_client.pl $TEST_NGINX_SERVER_PORT 16 stream
--- response_body
16 concurrent stream requests: 16 gave the llm-engine generate text
--- no_error_log
[alert]
[crit]

=== TEST 6: 8 concurrent streamed chats all join to the generate text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- exec
perl t/090_parallel_client.pl $TEST_NGINX_SERVER_PORT 8 chat_stream
--- response_body
8 concurrent chat_stream requests: 8 gave the llm-engine generate text
--- no_error_log
[alert]
[crit]

=== TEST 7: the engine batched them: its metrics count every request finished
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
GET /metrics
--- error_code: 200
--- response_body_like chomp
llm_requests_submitted_total (4[2-9]|[5-9]\d|\d{3,})\n.*llm_requests_finished_total (4[2-9]|[5-9]\d|\d{3,})\n
