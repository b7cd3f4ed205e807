# Endpoints that need only the tokenizer (and the engine's health): models,
# health, tokenize, detokenize, metrics, routing and methods.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: GET /v1/models lists the configured model name
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
GET /v1/models
--- error_code: 200
--- response_headers
Content-Type: application/json
--- response_body_like chomp
^\{"object":"list","data":\[\{"id":"stories","object":"model","created":\d+,"owned_by":"ngx_llm","max_model_len":64\}\]\}$

=== TEST 2: without llm_model_name the model id is the file name
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
GET /v1/models
--- response_body_like chomp
"id":"stories260K.gguf"

=== TEST 3: GET /v1/models/<id> for the served model
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
GET /v1/models/stories
--- error_code: 200
--- response_body_like chomp
^\{"id":"stories","object":"model",

=== TEST 4: GET /v1/models/<unknown> is 404 model_not_found
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
GET /v1/models/gpt-4
--- error_code: 404
--- response_body_like chomp
^\{"error":\{"message":"The model 'gpt-4' does not exist","type":"not_found_error","param":"model","code":"model_not_found"\}\}$

=== TEST 5: /v1/models works with no engine running
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
GET /v1/models
--- error_code: 200
--- response_body_like chomp
"id":"stories"

=== TEST 6: /health is 200 when the engine is ready
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
^\{"status":"ok","model":"echo","generation":"[0-9a-f]{16}"\}$

=== TEST 7: /health is 503 without an engine
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
GET /health
--- error_code: 503
--- response_body_like chomp
^\{"status":"unavailable","reason":"engine not running[^"]*"\}$

=== TEST 8: llm_api health in its own location needs no model path
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location = /ready {
    llm_api health;
    llm_engine ngxtest;
}
--- request
GET /ready
--- error_code: 200
--- response_body_like chomp
"status":"ok"

=== TEST 9: POST /tokenize (SentencePiece, BOS added)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /tokenize
{"prompt": "Once upon a time"}
--- error_code: 200
--- response_body
{"tokens":[1,403,407,261,378],"count":5,"max_model_len":64}

=== TEST 10: POST /tokenize with add_special_tokens false
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /tokenize
{"prompt": "Once upon a time", "add_special_tokens": false}
--- error_code: 200
--- response_body
{"tokens":[403,407,261,378],"count":4}

=== TEST 11: POST /tokenize with messages applies the chat template
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "hi"}]}
--- error_code: 200
--- response_body_like chomp
^\{"tokens":\[1,[0-9,]+\],"count":\d+\}$

=== TEST 12: POST /tokenize with the Llama 3 tokenizer.json
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_LLAMA3_TOKENIZER;
}
--- request
POST /tokenize
{"prompt": "Hello world", "add_special_tokens": false}
--- error_code: 200
--- response_body
{"tokens":[9906,1917],"count":2}

=== TEST 13: Llama 3 chat template: control tokens are single ids
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_LLAMA3_TOKENIZER;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}]}
--- error_code: 200
--- response_body
{"tokens":[128000,128006,882,128007,271,13347,128009,128006,78191,128007,271],"count":11}

=== TEST 14: special-token text in user content stays text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_LLAMA3_TOKENIZER;
}
--- request
POST /tokenize
{"prompt": "<|eot_id|>", "add_special_tokens": false}
--- error_code: 200
--- response_body_unlike
128009
--- response_body_like chomp
^\{"tokens":\[\d+(,\d+)+\],"count":\d+\}$

=== TEST 15: POST /detokenize
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /detokenize
{"tokens": [1, 403, 407, 261, 378]}
--- error_code: 200
--- response_body
{"prompt":"Once upon a time","content":"Once upon a time"}

=== TEST 16: /detokenize with an id outside the vocabulary is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /detokenize
{"tokens": [1, 100000]}
--- error_code: 400
--- response_body_like chomp
"param":"tokens","code":"invalid_value"

=== TEST 17: /detokenize with a negative id is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /detokenize
{"tokens": [1, -3]}
--- error_code: 400
--- response_body_like chomp
"param":"tokens","code":"invalid_type"

=== TEST 18: /detokenize without tokens is 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /detokenize
{"text": "x"}
--- error_code: 400
--- response_body_like chomp
"param":"tokens","code":"missing_required_parameter"

=== TEST 19: unknown path under llm_api is 404 JSON
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
GET /v1/audio/speech
--- error_code: 404
--- response_body_like chomp
^\{"error":\{"message":"no such endpoint: /v1/audio/speech","type":"not_found_error","param":null,"code":"not_found"\}\}$

=== TEST 20: GET on a POST endpoint is 405 with Allow
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
GET /v1/completions
--- error_code: 405
--- response_headers
Allow: POST
Content-Type: application/json
--- response_body_like chomp
"code":"method_not_allowed"

=== TEST 21: POST on /v1/models is 405
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /v1/models
{}
--- error_code: 405
--- response_headers
Allow: GET, HEAD

=== TEST 22: /metrics is Prometheus text with module and engine series
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location = /metrics {
    llm_metrics;
    llm_engine ngxtest;
}
--- request
GET /metrics
--- error_code: 200
--- response_headers
Content-Type: text/plain; version=0.0.4
--- response_body_like chomp
llm_http_requests_total\{endpoint="metrics"\} 1\n.*llm_engine_up 1\n.*llm_requests_submitted_total \d+\n.*llm_oom_shrinks_total 0\n.*llm_mem_cap_tokens 0\n.*llm_time_to_first_token_seconds_bucket\{le="\+Inf"\} \d+\n

=== TEST 23: /metrics without an engine says llm_engine_up 0
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location = /metrics {
    llm_metrics;
    llm_engine no_such_engine;
}
--- request
GET /metrics
--- error_code: 200
--- response_body_like chomp
llm_engine_up 0\n

=== TEST 24: an explicit llm_api kind serves any URI
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location = /tok {
    llm_api tokenize;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /tok
{"prompt": "Once"}
--- error_code: 200
--- response_body
{"tokens":[1,403],"count":2}

=== TEST 25: /detokenize keeps byte tokens: a NUL byte or a lone UTF-8 lead byte becomes U+FFFD
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /detokenize
{"tokens": [1, 3, 400, 200]}
--- error_code: 200
--- response_body
{"prompt":"� do�","content":"� do�"}

=== TEST 30: llm_model_alias: more names the location answers to, listed after the model ("*" is not listed)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_model_alias gpt-4o-mini * claude-sonnet-4-5;
}
--- request
GET /v1/models
--- error_code: 200
--- response_body_like chomp
^\{"object":"list","data":\[\{"id":"stories",[^}]*\},\{"id":"gpt-4o-mini","object":"model",[^}]*\},\{"id":"claude-sonnet-4-5","object":"model",[^}]*\}\]\}$

=== TEST 31: GET /v1/models/<alias>
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
GET /v1/models/gpt-4o-mini
--- error_code: 200
--- response_body_like chomp
^\{"id":"gpt-4o-mini","object":"model",
