# Client disconnects against the REAL engine: t/run.sh starts a second
# `llm-engine serve` ($TEST_NGINX_CANCEL_ENGINE) for this file alone, so its
# llm_requests_cancelled_total (GET /metrics, read from the engine's shared
# metrics block) counts exactly the cancellations these blocks cause. The
# engine outlives nginx, which restarts for every block. It runs a random
# stories110M-shaped model with one thread, so n=8 x 500 tokens takes it tens
# of seconds and the 1.5 s abort always lands mid-stream. The engine counts a
# cancellation at its next step, so an "after" block first waits (up to 10 s)
# for the count it expects; a count that never comes fails the block.
use Test::Nginx::Socket 'no_plan';
use IO::Socket::INET;

sub main::wait_cancelled {
    my $want = shift;
    for (1 .. 200) {
        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$ENV{TEST_NGINX_SERVER_PORT}", Timeout => 2);
        if ($s) {
            print $s "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
            local $/;
            my $r = <$s> // '';
            return if $r =~ /\nllm_requests_cancelled_total (\d+)\n/ && $1 >= $want;
        }
        select(undef, undef, undef, 0.05);
    }
}

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
    llm_model_path $TEST_NGINX_CANCEL_MODEL;
    llm_model_name stories110m;
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
    llm_model_path $TEST_NGINX_CANCEL_MODEL;
    llm_model_name stories110m;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 500, "ignore_eos": true, "temperature": 0, "stream": true, "n": 8}
--- timeout: 1.5
--- abort
--- error_code: 200
--- response_body_like chomp
^data: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories110m","choices":\[\{"index":[0-7],"text":"(\\.|[^"\\])*","logprobs":null,"finish_reason":null\}\]\}\n\n
--- error_log
client went away before the response was complete; cancelling it in the engine

=== TEST 3: after: the engine's cancelled counter shows its 8 sequences cancelled
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CANCEL_ENGINE;
    llm_model_path $TEST_NGINX_CANCEL_MODEL;
    llm_model_name stories110m;
}
--- init
main::wait_cancelled(8);
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
    llm_model_path $TEST_NGINX_CANCEL_MODEL;
    llm_model_name stories110m;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 500, "ignore_eos": true, "stream": true, "n": 8}
--- timeout: 1.5
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
    llm_model_path $TEST_NGINX_CANCEL_MODEL;
    llm_model_name stories110m;
}
--- init
main::wait_cancelled(16);
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
    llm_model_path $TEST_NGINX_CANCEL_MODEL;
    llm_model_name stories110m;
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
    llm_model_path $TEST_NGINX_CANCEL_MODEL;
    llm_model_name stories110m;
}
--- request
GET /metrics
--- error_code: 200
--- response_body_like chomp
llm_engine_up 1\n.*\nllm_requests_cancelled_total 16\n
