# Generation through the shared-memory ring against t/echo_engine.c, which
# returns the prompt's tokens then EOS (so every answer follows from its prompt).
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: completion echoes the prompt and stops at EOS
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time"}
--- error_code: 200
--- response_body_like chomp
^\{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" Once upon a time","logprobs":null,"finish_reason":"stop"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10\}\}$

=== TEST 2: max_tokens cuts with finish_reason length
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 2}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"text":" Once upon","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7\}

=== TEST 3: llm_default_max_tokens applies when max_tokens is absent
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_default_max_tokens 3;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time"}
--- error_code: 200
--- response_body_like chomp
"text":" Once upon a","logprobs":null,"finish_reason":"length"

=== TEST 4: a stop string cuts the text before it
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "stop": " a"}
--- error_code: 200
--- response_body_like chomp
"text":" Once upon","logprobs":null,"finish_reason":"stop"

=== TEST 5: the earliest of several stop strings wins
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "stop": ["time", "pon"]}
--- error_code: 200
--- response_body_like chomp
"text":" Once u","logprobs":null,"finish_reason":"stop"

=== TEST 6: n=2 gives two independent choices
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon", "n": 2}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"text":" Once upon","logprobs":null,"finish_reason":"stop"\},\{"index":1,"text":" Once upon","logprobs":null,"finish_reason":"stop"\}\],"usage":\{"prompt_tokens":3,"completion_tokens":6,"total_tokens":9\}

=== TEST 7: a prompt of token ids
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": [1, 403, 407]}
--- error_code: 200
--- response_body_like chomp
"text":" Once upon","logprobs":null,"finish_reason":"stop"\}\],"usage":\{"prompt_tokens":3,

=== TEST 8: a nested token-id prompt
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": [[1, 403, 407]]}
--- error_code: 200
--- response_body_like chomp
"text":" Once upon"

=== TEST 9: a prompt in a one-element list
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": ["Once upon"]}
--- error_code: 200
--- response_body_like chomp
"text":" Once upon"

=== TEST 10: max_tokens is clamped to the context left
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": [403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403], "max_tokens": 32}
--- error_code: 200
--- response_body_like chomp
"finish_reason":"length"\}\],"usage":\{"prompt_tokens":60,"completion_tokens":4,"total_tokens":64\}

=== TEST 11: UTF-8 through byte-fallback tokens
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "café ✓ ok"}
--- error_code: 200
--- response_body_like chomp
"text":" café ✓ ok","logprobs":null,"finish_reason":"stop"

=== TEST 12: ignore_eos generates past EOS up to max_tokens
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once", "ignore_eos": true, "max_tokens": 4}
--- error_code: 200
--- response_body_like chomp
"text":" Once","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":2,"completion_tokens":4,

=== TEST 13: sampling parameters, seed and user are accepted
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon", "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "presence_penalty": 0.5, "frequency_penalty": 0.5, "repetition_penalty": 1.1, "seed": 42, "user": "u1"}
--- error_code: 200
--- response_body_like chomp
"text":" Once upon"

=== TEST 14: completions logprobs: tokens, token_logprobs, top_logprobs, text_offset
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon", "logprobs": 2, "max_tokens": 2}
--- error_code: 200
--- response_body_like chomp
"text":" Once upon","logprobs":\{"tokens":\[" Once"," upon"\],"token_logprobs":\[-0.5,-0.5\],"top_logprobs":\[\{"<unk>":-0.5,"<s>":-1.5\},\{"<unk>":-0.5,"<s>":-1.5\}\],"text_offset":\[0,5\]\},"finish_reason":"length"

=== TEST 15: stream: one event per token, a final finish_reason, then [DONE]
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "stream": true}
--- error_code: 200
--- response_headers
Content-Type: text/event-stream
Cache-Control: no-cache
--- response_body_like chomp
^data: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" Once","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" upon","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" a","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" time","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":"","logprobs":null,"finish_reason":"stop"\}\]\}\n\ndata: \[DONE\]\n\n$

=== TEST 16: stream_options.include_usage adds a usage chunk before [DONE]
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon", "stream": true, "stream_options": {"include_usage": true}}
--- error_code: 200
--- response_body_like chomp
data: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\],"usage":\{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6\}\}\n\ndata: \[DONE\]\n\n$

=== TEST 17: stream with a stop string never sends the stop text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "stream": true, "stop": "on a"}
--- error_code: 200
--- response_body_like chomp
"text":" Once".*"text":" up".*"finish_reason":"stop"\}\]\}\n\ndata: \[DONE\]\n\n$

=== TEST 18: stream n=2 ends both choices
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once", "stream": true, "n": 2}
--- error_code: 200
--- response_body_like chomp
"index":0,"text":"","logprobs":null,"finish_reason":"stop".*"index":1,"text":"","logprobs":null,"finish_reason":"stop".*data: \[DONE\]\n\n$

=== TEST 19: chat completion with the model's template (Llama 2 for this SentencePiece model)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "hi"}]}
--- error_code: 200
--- response_body_like chomp
^\{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion","created":\d+,"model":"stories","choices":\[\{"index":0,"message":\{"role":"assistant","content":"\[INST\] hi \[/INST\]"\},"logprobs":null,"finish_reason":"stop"\}\],"usage":\{"prompt_tokens":\d+,"completion_tokens":\d+,"total_tokens":\d+\}\}$

=== TEST 20: chat: a system message folds into the first Llama 2 turn
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}
--- error_code: 200
--- response_body_like chomp
"content":"\[INST\] <<SYS>>\\nBe b"\},"logprobs":null,"finish_reason":"length"

=== TEST 21: chat: developer role is the system role
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]}
--- error_code: 200
--- response_body_like chomp
"content":"\[INST\] <<SYS>>\\nBe b"

=== TEST 22: chat: text content parts are joined
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": [{"type": "text", "text": "h"}, {"type": "text", "text": "i"}]}]}
--- error_code: 200
--- response_body_like chomp
"content":"\[INST\] hi \[/INST\]"

=== TEST 23: chat: llm_chat_template chatml overrides the model's
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_chat_template chatml;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "hi"}]}
--- error_code: 200
--- response_body_like chomp
"content":"<\|im_start\|>user\\nhi<\|im_end\|>"\},"logprobs":null,"finish_reason":"length"

=== TEST 24: chat: max_completion_tokens
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 3}
--- error_code: 200
--- response_body_like chomp
"content":"\[I"\},"logprobs":null,"finish_reason":"length"

=== TEST 25: chat stream: role first, then content deltas, then finish_reason
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "hi"}], "stream": true, "max_tokens": 3}
--- error_code: 200
--- response_headers
Content-Type: text/event-stream
--- response_body_like chomp
^data: \{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion.chunk","created":\d+,"model":"stories","choices":\[\{"index":0,"delta":\{"role":"assistant","content":""\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion.chunk","created":\d+,"model":"stories","choices":\[\{"index":0,"delta":\{"content":"\["\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion.chunk","created":\d+,"model":"stories","choices":\[\{"index":0,"delta":\{"content":"I"\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion.chunk","created":\d+,"model":"stories","choices":\[\{"index":0,"delta":\{\},"logprobs":null,"finish_reason":"length"\}\]\}\n\ndata: \[DONE\]\n\n$

=== TEST 26: chat logprobs with top_logprobs
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 1, "max_tokens": 2}
--- error_code: 200
--- response_body_like chomp
"logprobs":\{"content":\[\{"token":" ","logprob":-0.5,"bytes":\[32\],"top_logprobs":\[\{"token":"<unk>","logprob":-0.5,"bytes":\[60,117,110,107,62\]\}\]\},\{"token":"\[","logprob":-0.5,"bytes":\[91\],"top_logprobs":\[\{"token":"<unk>","logprob":-0.5,"bytes":\[60,117,110,107,62\]\}\]\}\]\}

=== TEST 27: queue full is 429 with Retry-After
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest_small;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon", "n": 3}
--- error_code: 429
--- response_headers
Retry-After: 1
--- response_body_like chomp
^\{"error":\{"message":"the engine\'s queue is full; retry later \([^)]*\)","type":"rate_limit_error","param":null,"code":"queue_full"\}\}$

=== TEST 28: llm_request_timeout ends a slow request with 504
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest_small;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_request_timeout 200ms;
}
--- request
POST /v1/completions
{"prompt": [403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403], "max_tokens": 40}
--- error_code: 504
--- response_body_like chomp
^\{"error":\{"message":"the request timed out \(llm_request_timeout\)","type":"timeout_error","param":null,"code":"timeout"\}\}$

=== TEST 29: a stream that times out ends with an error event and [DONE]
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest_small;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_request_timeout 200ms;
}
--- request
POST /v1/completions
{"prompt": [403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403,403], "max_tokens": 40, "stream": true}
--- error_code: 200
--- response_body_like chomp
data: \{"error":\{"message":"the request timed out \(llm_request_timeout\)","type":"timeout_error","param":null,"code":"timeout"\}\}\n\ndata: \[DONE\]\n\n$

=== TEST 30: a list of prompts: one choice per prompt and n, in OpenAI's order (prompt i, then its n)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": ["Once upon", "a time"], "n": 2}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"text":" Once upon","logprobs":null,"finish_reason":"stop"\},\{"index":1,"text":" Once upon","logprobs":null,"finish_reason":"stop"\},\{"index":2,"text":" a time","logprobs":null,"finish_reason":"stop"\},\{"index":3,"text":" a time","logprobs":null,"finish_reason":"stop"\}\],"usage":\{"prompt_tokens":6,"completion_tokens":12,"total_tokens":18\}

=== TEST 31: a list of token-id prompts
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": [[1, 403, 407], [1, 261, 378]]}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"text":" Once upon","logprobs":null,"finish_reason":"stop"\},\{"index":1,"text":" a time","logprobs":null,"finish_reason":"stop"\}\],"usage":\{"prompt_tokens":6,

=== TEST 32: a streamed list of prompts: each event names its choice, each choice finishes, then [DONE] (the choices' events interleave in any order)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": ["Once upon", "a time"], "stream": true}
--- error_code: 200
--- response_body_like chomp
(?s)^(?=.*"choices":\[\{"index":0,"text":" Once".*"choices":\[\{"index":0,"text":"","logprobs":null,"finish_reason":"stop"\}\]\})(?=.*"choices":\[\{"index":1,"text":" a".*"choices":\[\{"index":1,"text":"","logprobs":null,"finish_reason":"stop"\}\]\}).*"finish_reason":"stop"\}\]\}\n\ndata: \[DONE\]\n\n$

=== TEST 33: a list mixing texts and token ids is refused
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": ["Once upon", [1, 2]]}
--- error_code: 400
--- response_body_like chomp
"param":"prompt","code":"invalid_type"

=== TEST 34: more than 64 choices (9 prompts x n 8) are refused
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": ["a", "b", "c", "d", "e", "f", "g", "h", "i"], "n": 8}
--- error_code: 400
--- response_body_like chomp
"message":"9 prompts x n = 72 choices; at most 64 in one request","type":"invalid_request_error","param":"n"

=== TEST 35: a token id outside the vocabulary names its prompt
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": [[1, 2], [1, 99999]]}
--- error_code: 400
--- response_body_like chomp
"message":"token id 99999 at index 1 is outside the vocabulary \(size 512\) \(prompt 1\)"

=== TEST 36: suffix (fill in the middle): the prompt is <|fim_prefix|> prompt <|fim_suffix|> suffix <|fim_middle|>
The echo engine answers with the prompt's 18 tokens, so the text shows what the model was given (BOS first, not
printed).
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "def add(a, b):", "suffix": "print(add(1, 2))", "max_tokens": 18}
--- error_code: 200
--- response_body_like eval
qr/"text":"<\|fim_prefix\|>def add\(a, b\):<\|fim_suffix\|>print\(add\(1, 2\)\)<\|fim_middle\|>","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":18,/

=== TEST 37: suffix on a model without fill-in-the-middle tokens is a 400 that says so
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "Once", "suffix": "the end"}
--- error_code: 400
--- response_body_like eval
qr/"message":"'suffix': this model has no fill-in-the-middle tokens \(<\|fim_prefix\|> ...\)","type":"invalid_request_error","param":"suffix"/

=== TEST 38: a request naming an llm_model_alias is served
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_model_alias gpt-4o-mini;
}
--- request
POST /v1/chat/completions
{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Once"}], "max_tokens": 3}
--- error_code: 200
--- response_body_like chomp
"object":"chat.completion"

=== TEST 39: llm_model_alias *: any model name is served (clients that send their own, such as Claude clients)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_model_alias *;
}
--- request
POST /v1/messages
{"model": "claude-3-5-haiku-20241022", "messages": [{"role": "user", "content": "Once"}], "max_tokens": 3}
--- error_code: 200
--- response_body_like chomp
"type":"message"

=== TEST 40: an alias list without the name sent: still a 404
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_model_alias gpt-4o-mini;
}
--- request
POST /v1/chat/completions
{"model": "gpt-4o", "messages": [{"role": "user", "content": "Once"}], "max_tokens": 3}
--- error_code: 404
--- response_body_like chomp
"code":"model_not_found"

=== TEST 41: chat: llm_chat_template mistral-v3-tekken (Mistral Nemo's: no spaces inside the turn)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_chat_template mistral-v3-tekken;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "system", "content": "be"}, {"role": "user", "content": "hi"}]}
--- error_code: 200
--- response_body_like chomp
"content":"\[INST\]be\\n\\nhi\[/INST\]"\}
