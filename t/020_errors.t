# Request validation: every 400 / 404 path answers OpenAI-shaped JSON with
# the offending parameter (an engine runs, so nothing is refused for lack of one).
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: malformed JSON is 400 invalid_json
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": 
--- error_code: 400
--- response_body_like chomp
^\{"error":\{"message":"request body is not valid JSON \(error near byte \d+\)","type":"invalid_request_error","param":null,"code":"invalid_json"\}\}$

=== TEST 2: a JSON array body is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
[1, 2]
--- error_code: 400
--- response_body_like chomp
"message":"request body must be a JSON object"

=== TEST 3: an empty body is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/chat/completions

--- error_code: 400
--- response_body_like chomp
"code":"invalid_json"

=== TEST 4: missing prompt is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"max_tokens": 3}
--- error_code: 400
--- response_body_like chomp
"param":"prompt","code":"missing_required_parameter"

=== TEST 5: prompt of the wrong type is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": {"a": 1}}
--- error_code: 400
--- response_body_like chomp
"param":"prompt","code":"invalid_type"

=== TEST 6: empty prompt array is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": []}
--- error_code: 400
--- response_body_like chomp
"param":"prompt","code":"invalid_value"

=== TEST 7: a list of prompts holding a number is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": ["a", 5]}
--- error_code: 400
--- response_body_like chomp
'prompt' as a list holds strings or arrays of token ids, not both \(prompt 1\)

=== TEST 8: token-id prompt with a float is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": [1, 2.5]}
--- error_code: 400
--- response_body_like chomp
"param":"prompt","code":"invalid_type"

=== TEST 9: token-id prompt outside the vocabulary is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": [1, 9999]}
--- error_code: 400
--- response_body_like chomp
token id 9999 at index 1 is outside the vocabulary \(size 512\)

=== TEST 10: temperature out of range is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "temperature": 2.5}
--- error_code: 400
--- response_body_like chomp
"message":"\'temperature\' must be between 0 and 2, got 2.5","type":"invalid_request_error","param":"temperature","code":"invalid_value"

=== TEST 11: temperature as a string is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "temperature": "hot"}
--- error_code: 400
--- response_body_like chomp
"param":"temperature","code":"invalid_type"

=== TEST 12: top_p of 0 is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "top_p": 0}
--- error_code: 400
--- response_body_like chomp
"param":"top_p"

=== TEST 13: top_k as a float is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "top_k": 1.5}
--- error_code: 400
--- response_body_like chomp
"param":"top_k","code":"invalid_type"

=== TEST 14: min_p above 1 is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "min_p": 1.5}
--- error_code: 400
--- response_body_like chomp
"param":"min_p","code":"invalid_value"

=== TEST 15: presence_penalty out of range is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "presence_penalty": -3}
--- error_code: 400
--- response_body_like chomp
"param":"presence_penalty"

=== TEST 16: frequency_penalty out of range is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "frequency_penalty": 2.01}
--- error_code: 400
--- response_body_like chomp
"param":"frequency_penalty"

=== TEST 17: repetition_penalty of 0 is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "repetition_penalty": 0}
--- error_code: 400
--- response_body_like chomp
"param":"repetition_penalty"

=== TEST 18: max_tokens of 0 is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "max_tokens": 0}
--- error_code: 400
--- response_body_like chomp
"param":"max_tokens","code":"invalid_value"

=== TEST 19: max_tokens above llm_max_tokens is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "max_tokens": 33}
--- error_code: 400
--- response_body_like chomp
"message":"max_tokens is 33; this server allows at most 32","type":"invalid_request_error","param":"max_tokens"

=== TEST 20: max_completion_tokens is checked too
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1}
--- error_code: 400
--- response_body_like chomp
"param":"max_completion_tokens"

=== TEST 21: n above 8 is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "n": 9}
--- error_code: 400
--- response_body_like chomp
"param":"n","code":"invalid_value"

=== TEST 22: seed as a string is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "seed": "42"}
--- error_code: 400
--- response_body_like chomp
"param":"seed","code":"invalid_type"

=== TEST 23: stop as a number is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "stop": 5}
--- error_code: 400
--- response_body_like chomp
"param":"stop","code":"invalid_type"

=== TEST 24: stop list with a number is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "stop": ["a", 1]}
--- error_code: 400
--- response_body_like chomp
"param":"stop","code":"invalid_type"

=== TEST 25: more than 16 stop strings is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}
--- error_code: 400
--- response_body_like chomp
at most 16 stop sequences

=== TEST 26: stream as a string is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "stream": "yes"}
--- error_code: 400
--- response_body_like chomp
"param":"stream","code":"invalid_type"

=== TEST 27: stream_options without stream is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "stream_options": {"include_usage": true}}
--- error_code: 400
--- response_body_like chomp
"param":"stream_options"

=== TEST 28: completions logprobs above 20 is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "logprobs": 21}
--- error_code: 400
--- response_body_like chomp
"param":"logprobs","code":"invalid_value"

=== TEST 29: chat logprobs must be a boolean
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "x"}], "logprobs": 3}
--- error_code: 400
--- response_body_like chomp
"param":"logprobs","code":"invalid_type"

=== TEST 30: top_logprobs without logprobs is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}
--- error_code: 400
--- response_body_like chomp
"param":"top_logprobs"

=== TEST 31: user must be a string
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "user": 7}
--- error_code: 400
--- response_body_like chomp
"param":"user","code":"invalid_type"

=== TEST 32: missing messages is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/chat/completions
{"prompt": "x"}
--- error_code: 400
--- response_body_like chomp
"param":"messages","code":"missing_required_parameter"

=== TEST 33: messages not an array is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/chat/completions
{"messages": "hi"}
--- error_code: 400
--- response_body_like chomp
"param":"messages","code":"invalid_type"

=== TEST 34: empty messages is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/chat/completions
{"messages": []}
--- error_code: 400
--- response_body_like chomp
"param":"messages","code":"invalid_value"

=== TEST 35: unknown role is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "wizard", "content": "x"}]}
--- error_code: 400
--- response_body_like chomp
messages\[0\].role must be one of

=== TEST 36: image content parts are 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}
--- error_code: 400
--- response_body_like chomp
only text parts

=== TEST 37: llama2 template refuses two user turns in a row
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}
--- error_code: 400
--- response_body_like chomp
roles must alternate

=== TEST 38: unknown model is 404
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "model": "gpt-4o"}
--- error_code: 404
--- response_body_like chomp
^\{"error":\{"message":"The model \'gpt-4o\' does not exist \(this server serves \'stories\'\)","type":"not_found_error","param":"model","code":"model_not_found"\}\}$

=== TEST 39: model of the wrong type is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": "x", "model": 3}
--- error_code: 400
--- response_body_like chomp
"param":"model","code":"invalid_type"

=== TEST 40: prompt longer than the context is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 32;
}
--- request
POST /v1/completions
{"prompt": [300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300,300]}
--- error_code: 400
--- response_body_like chomp
"message":"the prompt is 70 tokens; this model\'s context length is 64 tokens[^"]*","type":"invalid_request_error","param":"prompt","code":"context_length_exceeded"
=== TEST 41: body over llm_max_body_size is 413 (Content-Length)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_max_body_size 64;
}
--- request
POST /v1/completions
{"prompt": "this body is longer than sixty-four bytes, which the location refuses"}
--- error_code: 413
--- response_body_like chomp
^\{"error":\{"message":"request body of \d+ bytes exceeds the limit of 64 bytes","type":"request_too_large","param":null,"code":"body_too_large"\}\}$

=== TEST 42: chunked body over llm_max_body_size is 413
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_max_body_size 16;
}
--- more_headers
Transfer-Encoding: chunked
--- request eval
my $b = '{"prompt": "more than sixteen bytes"}'; "POST /v1/completions\n" . sprintf("%x\r\n%s\r\n0\r\n\r\n", length $b, $b)
--- error_code: 413
--- response_body_like chomp
"code":"body_too_large"

=== TEST 43: no engine running is 503 engine_unavailable
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /v1/completions
{"prompt": "x"}
--- error_code: 503
--- response_headers
Retry-After: 1
--- response_body_like chomp
^\{"error":\{"message":"the engine \\"no_such_engine\\" is not ready: engine not running[^"]*","type":"server_error","param":null,"code":"engine_unavailable"\}\}$

=== TEST 44: unknown fields are ignored
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
{"prompt": "Once upon", "max_tokens": 8, "best_of_the_rest": [1, {"x": null}], "logit_bias": {}}
--- error_code: 200
--- response_body_like chomp
"text":" Once upon"

=== TEST 45: null means absent
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
{"prompt": "Once upon", "max_tokens": null, "temperature": null, "stop": null, "model": null, "seed": null}
--- error_code: 200
--- response_body_like chomp
"finish_reason":"stop"

=== TEST 46: llm_api_key: no Authorization header is 401 in OpenAI's shape, with WWW-Authenticate
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first "sk second";
}
location /open/ {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key off;
}
--- request
POST /v1/completions
{"prompt": "Once upon"}
--- error_code: 401
--- response_headers
WWW-Authenticate: Bearer
--- response_body_like chomp
^\{"error":\{"message":"missing API key: send \\"Authorization: Bearer <key>\\" \(or \\"x-api-key: <key>\\"\)","type":"invalid_request_error","param":null,"code":"invalid_api_key"\}\}$

=== TEST 47: llm_api_key: a wrong key is 401
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first "sk second";
}
location /open/ {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key off;
}
--- request
POST /v1/completions
{"prompt": "Once upon"}
--- more_headers
Authorization: Bearer sk-firs
--- error_code: 401
--- response_body_like chomp
"message":"incorrect API key"

=== TEST 48: llm_api_key: another scheme is 401
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first "sk second";
}
location /open/ {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key off;
}
--- request
POST /v1/completions
{"prompt": "Once upon"}
--- more_headers
Authorization: Basic c2stZmlyc3Q=
--- error_code: 401
--- response_body_like chomp
"message":"the Authorization header must be \\"Bearer <key>\\""

=== TEST 49: llm_api_key: the first key is let through (scheme in any case)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first "sk second";
}
location /open/ {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key off;
}
--- request
POST /v1/completions
{"prompt": "Once upon"}
--- more_headers
Authorization: bearer sk-first
--- error_code: 200
--- response_body_like chomp
"text":" Once upon"

=== TEST 50: llm_api_key: the second key is let through
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first "sk second";
}
location /open/ {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key off;
}
--- request
GET /v1/models
--- more_headers
Authorization: Bearer sk second
--- error_code: 200
--- response_body_like chomp
"object":"list"

=== TEST 51: llm_api_key: /v1/models needs the key too
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first "sk second";
}
location /open/ {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key off;
}
--- request
GET /v1/models
--- error_code: 401
--- response_body_like chomp
"code":"invalid_api_key"

=== TEST 52: llm_api_key: /health is open (load balancers probe it)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first "sk second";
}
location /open/ {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key off;
}
--- request
GET /health
--- error_code: 200
--- response_body_like chomp
"status":"ok"

=== TEST 53: llm_api_key off in a nested location: no check there
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first "sk second";
}
location /open/ {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key off;
}
--- request
POST /open/v1/completions
{"prompt": "Once upon"}
--- error_code: 200
--- response_body_like chomp
"text":" Once upon"

=== TEST 54: nginx.conf.example's CORS block: the preflight is answered by nginx before the module
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first;
    if ($request_method = OPTIONS) {
        add_header Access-Control-Allow-Origin "https://app.example.com";
        add_header Access-Control-Allow-Headers "Authorization, Content-Type";
        add_header Access-Control-Allow-Methods "GET, POST, OPTIONS";
        add_header Access-Control-Max-Age 86400;
        return 204;
    }
    add_header Access-Control-Allow-Origin "https://app.example.com" always;
}
--- request
OPTIONS /v1/chat/completions
--- error_code: 204
--- response_headers
Access-Control-Allow-Origin: https://app.example.com
Access-Control-Allow-Headers: Authorization, Content-Type
Access-Control-Allow-Methods: GET, POST, OPTIONS
--- response_body_like chomp
^$

=== TEST 55: nginx.conf.example's CORS block: an answer (a 401 here) carries Access-Control-Allow-Origin
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first;
    if ($request_method = OPTIONS) {
        add_header Access-Control-Allow-Origin "https://app.example.com";
        return 204;
    }
    add_header Access-Control-Allow-Origin "https://app.example.com" always;
}
--- request
POST /v1/completions
{"prompt": "Once upon"}
--- error_code: 401
--- response_headers
Access-Control-Allow-Origin: https://app.example.com
--- response_body_like chomp
"code":"invalid_api_key"

=== TEST 56: function calling on a model with neither the Llama 3 nor the ChatML chat format is a clear 400, not ignored
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
{"messages": [{"role": "user", "content": "weather?"}], "tools": [{"type": "function", "function": {"name": "get_weather"}}]}
--- error_code: 400
--- response_body_like chomp
"message":"function calling needs a model with the Llama 3, ChatML \(Hermes, Qwen\), SmolLM3, Granite, EXAONE 4, Qwen3-Coder, Seed-OSS, GLM-4.5, gpt-oss or Mistral \(v3, v3-tekken, v7\) chat format; this one's is llama2","type":"invalid_request_error","param":"tools","code":"unsupported_parameter"
