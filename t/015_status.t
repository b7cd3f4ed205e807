# llm_status: the dashboard's JSON (engine state, counters, latency, history).
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: GET /status: engine state, current counters and a history column set
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location = /status {
    llm_status;
    llm_engine ngxtest;
}
--- request
GET /status
--- error_code: 200
--- response_headers
Content-Type: application/json
--- response_body_like chomp
^\{"time":[\d.]+,"sample_period_s":1,"engine":\{"up":true,"state":"ready","generation":"[0-9a-f]{16}",.*"current":\{"submitted":\d+,.*"oom_shrinks":0,"oom_recoveries":0,"mem_cap_tokens":0,"mem_cap_batch":0,.*"kv_blocks_cached":\d+,"kv_window_blocks_used":0,"kv_window_blocks_free":0,"tokens_cached":\d+,.*"latency_ms":\{"ttft":\{"count":\d+.*"history":\{"t":\[.*\],"up":\[.*"tokens_out_per_s":\[.*"tokens_cached_per_s":\[.*"kv_blocks_used":\[.*"kv_window_blocks_used":\[.*"mem_cap_tokens":\[.*"ttft_p99_ms":\[.*\]\}\}$

=== TEST 2: without an engine: up false, state unavailable, still a history
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location = /status {
    llm_status;
    llm_engine no_such_engine;
}
--- request
GET /status
--- error_code: 200
--- response_body_like chomp
"engine":\{"up":false,"state":"unavailable","reason":"[^"]+"\},"history":\{"t":\[

=== TEST 3: POST /status is refused
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location = /status {
    llm_status;
    llm_engine ngxtest;
}
--- request
POST /status
{}
--- error_code: 405
--- response_body_like chomp
"code":"method_not_allowed"
