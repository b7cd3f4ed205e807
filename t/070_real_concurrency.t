# Concurrent requests through nginx to the REAL engine ($TEST_NGINX_REAL_ENGINE,
# `llm-engine serve` on stories260K, started by t/run.sh). Each block's --- init
# (run once nginx is up) has t/090_parallel_client.pl send the requests at once
# and count the answers whose text equals the greedy reference from
# `llm-engine generate` (batching must not change greedy text); the count lands
# in the server root, and the block's request reads it back through nginx.
use Test::Nginx::Socket 'no_plan';

# The client's one-line verdict goes to html/result.txt; dies if it cannot run.
sub run_client {
    my ($conc, $mode) = @_;
    my $port = $ENV{TEST_NGINX_SERVER_PORT} || $ENV{TEST_NGINX_PORT} || 1984;
    my $out = "$ENV{TEST_NGINX_SERVROOT}/html/result.txt";
    system('perl', '-e', 'open STDOUT, ">", shift or die "$!\n"; exec @ARGV or die "$!\n"', $out,
           'perl', 't/090_parallel_client.pl', $port, $conc, $mode) == 0
        or die "t/090_parallel_client.pl $port $conc $mode failed: $?\n";
}

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
location = /result.txt {
    root $TEST_NGINX_SERVROOT/html;
}
--- init
main::run_client(1, 'stream');
--- request
GET /result.txt
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
location = /result.txt {
    root $TEST_NGINX_SERVROOT/html;
}
--- init
main::run_client(1, 'chat_stream');
--- request
GET /result.txt
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
location = /result.txt {
    root $TEST_NGINX_SERVROOT/html;
}
--- init
main::run_client(8, 'completions');
--- request
GET /result.txt
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
location = /result.txt {
    root $TEST_NGINX_SERVROOT/html;
}
--- init
main::run_client(8, 'chat');
--- request
GET /result.txt
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
location = /result.txt {
    root $TEST_NGINX_SERVROOT/html;
}
--- init
main::run_client(16, 'stream');
--- request
GET /result.txt
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
location = /result.txt {
    root $TEST_NGINX_SERVROOT/html;
}
--- init
main::run_client(8, 'chat_stream');
--- request
GET /result.txt
--- response_body
8 concurrent chat_stream requests: 8 gave the llm-engine generate text
--- no_error_log
[alert]
[crit]

=== TEST 7: the engine's metrics count every request submitted and finished
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
GET /metrics
--- error_code: 200
--- response_body_like chomp
llm_requests_submitted_total (4[2-9]|[5-9]\d|\d{3,})\n.*llm_requests_finished_total (4[2-9]|[5-9]\d|\d{3,})\n
