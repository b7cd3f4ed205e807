# Server-sent events with the REAL engine (`llm-engine serve` on stories260K,
# $TEST_NGINX_REAL_ENGINE, started by t/run.sh): the exact SSE framing of
# completions and chat chunks as the model streams them.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: streamed greedy completion: one SSE event per token, then the finish, then [DONE]
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0, "stream": true}
--- error_code: 200
--- response_headers
Content-Type: text/event-stream
--- response_body_like chomp
^data: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":",","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" there","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" was","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" a","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" little","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":"","logprobs":null,"finish_reason":"length"\}\]\}\n\ndata: \[DONE\]\n\n$

=== TEST 2: a 40-token stream: 40 token events, the length finish, [DONE]
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stream": true}
--- error_code: 200
--- response_body_like eval
my $t = ''; qr/^(?:data: \{[^\n]*"finish_reason":null\}\]\}\n\n){40}data: \{[^\n]*"text":"","logprobs":null,"finish_reason":"length"\}\]\}\n\ndata: \[DONE\]\n\n$/

=== TEST 3: streamed chat: the role first, then content deltas, the finish, usage, [DONE]
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 3, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}
--- error_code: 200
--- response_body_like chomp
^data: \{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion.chunk","created":\d+,"model":"stories","choices":\[\{"index":0,"delta":\{"role":"assistant","content":""\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion.chunk","created":\d+,"model":"stories","choices":\[\{"index":0,"delta":\{"content":"\."\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion.chunk","created":\d+,"model":"stories","choices":\[\{"index":0,"delta":\{"content":" "\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion.chunk","created":\d+,"model":"stories","choices":\[\{"index":0,"delta":\{"content":"E"\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion.chunk","created":\d+,"model":"stories","choices":\[\{"index":0,"delta":\{\},"logprobs":null,"finish_reason":"length"\}\]\}\n\ndata: \{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion.chunk","created":\d+,"model":"stories","choices":\[\],"usage":\{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}\}\n\ndata: \[DONE\]\n\n$

=== TEST 4: a streamed stop string: text up to it, finish_reason stop
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 20, "temperature": 0, "stream": true, "stop": "little"}
--- error_code: 200
--- response_body_like chomp
^data: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":",","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" there","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" was","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" a","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" ","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":"","logprobs":null,"finish_reason":"stop"\}\]\}\n\ndata: \[DONE\]\n\n$

=== TEST 5: streamed n=2: each choice's events carry its index
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 2, "temperature": 0, "stream": true, "n": 2}
--- error_code: 200
--- response_body_like chomp
^(?:data: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":[01],"text":"(?:,| there)","logprobs":null,"finish_reason":null\}\]\}\n\n){4}(?:data: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":[01],"text":"","logprobs":null,"finish_reason":"length"\}\]\}\n\n){2}data: \[DONE\]\n\n$

=== TEST 6: streamed completion with usage: the last chunk before [DONE] counts the tokens
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}
--- error_code: 200
--- response_body_like chomp
"text":"","logprobs":null,"finish_reason":"length"\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\],"usage":\{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}\}\n\ndata: \[DONE\]\n\n$

=== TEST 7: streamed logprobs ride on each token's event
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 1, "temperature": 0, "stream": true, "logprobs": 1}
--- error_code: 200
--- response_body_like chomp
^data: \{[^\n]*"choices":\[\{"index":0,"text":",","logprobs":\{"tokens":\[","\],"token_logprobs":\[-0\.03\d*\],"top_logprobs":\[\{",":-0\.03\d*\}\],"text_offset":\[0\]\},"finish_reason":null\}\]\}\n\n
