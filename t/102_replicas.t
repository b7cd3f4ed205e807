# Replicas of one model (llm_engine A B ...): here stories260K's engine ($TEST_NGINX_REAL_ENGINE) beside one
# that is not running. Requests go to the one that serves ($llm_engine names it), /health is 200 "degraded"
# with both listed, /metrics labels each engine; a name given twice or more than 16 stops nginx from starting.
# (tests/serve/replicas.t runs two live replicas: turns, a busy one passed over, one stopped.) The request's
# variables ($llm_engine, $llm_model, $llm_*_tokens, $llm_ttft, $llm_finish_reason) as headers.
use Test::Nginx::Socket 'no_plan';

our $config = <<'_EOC_';
location / {
    llm_api;
    llm_engine ngx_llm_no_such_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    add_header X-Engine $llm_engine always;
}
_EOC_

no_shuffle();
run_tests();

__DATA__

=== TEST 1: the replica that serves takes the request, whichever is listed first; $llm_engine names it
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_headers_like
X-Engine: ngxreal\d+
--- response_body_like eval
qr/"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E"/

=== TEST 2: streamed, the same
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 8, "stream": true}
--- error_code: 200
--- response_headers_like
X-Engine: ngxreal\d+
--- response_body_like: data: \[DONE\]

=== TEST 3: /health: 200 while one replica serves, "degraded", each listed
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
GET /health
--- error_code: 200
--- response_body_like eval
qr/^\{"status":"degraded","model":"[^"]*","generation":"[0-9a-f]{16}","engines":\[\{"engine":"ngx_llm_no_such_engine","status":"unavailable","reason":"[^"]+"\},\{"engine":"ngxreal\d+","status":"ok","model":"[^"]*","generation":"[0-9a-f]{16}"\}\]\}$/

=== TEST 4: /metrics: each replica's series labelled engine="NAME"
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
GET /metrics
--- error_code: 200
--- response_body_like eval
qr/\nllm_engine_up\{engine="ngx_llm_no_such_engine"\} 0\nllm_engine_up\{engine="ngxreal\d+"\} 1\n(?!.*engine="ngx_llm_no_such_engine").*\nllm_generation_tokens_total\{engine="ngxreal\d+"\} \d+\n/s

=== TEST 5: no replica serves: 503
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngx_llm_no_such_engine ngx_llm_no_such_engine2;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 4}
--- error_code: 503
--- response_body_like: "code":"engine_unavailable"

=== TEST 6: a name given twice: nginx does not start
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine a b a;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- must_die
--- error_log
llm_engine "a" named twice

=== TEST 7: more than 16 replicas: nginx does not start
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine e1 e2 e3 e4 e5 e6 e7 e8 e9 e10 e11 e12 e13 e14 e15 e16 e17;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- must_die
--- error_log
"llm_engine" directive takes at most 16 engines

=== TEST 8: the request's variables: engine, model, prompt / completion / cached tokens, time to first token, finish
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    add_header X-Engine $llm_engine always;
    add_header X-Model $llm_model always;
    add_header X-Tokens "$llm_prompt_tokens $llm_completion_tokens $llm_cached_tokens" always;
    add_header X-TTFT $llm_ttft always;
    add_header X-Finish $llm_finish_reason always;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_headers_like
X-Engine: ngxreal\d+
X-Model: stories
X-Tokens: 5 40 \d+
X-TTFT: \d+\.\d{3}
X-Finish: length

=== TEST 9: an embedding's: its prompt tokens, none generated
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    add_header X-Tokens "$llm_prompt_tokens $llm_completion_tokens" always;
}
--- request
POST /v1/embeddings
{"input": "Once upon a time"}
--- error_code: 200
--- response_headers_like
X-Tokens: 5 0

=== TEST 10: a request refused before the engine (a bad parameter): nothing to say ("-" in a log)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    add_header X-Tokens "[$llm_engine|$llm_prompt_tokens|$llm_ttft]" always;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": -3}
--- error_code: 400
--- response_headers_like
X-Tokens: \[\|\|\]

=== TEST 11: llm_balance least: the replica that serves takes the request
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngx_llm_no_such_engine $TEST_NGINX_REAL_ENGINE;
    llm_balance least;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    add_header X-Engine $llm_engine always;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_headers_like
X-Engine: ngxreal\d+
--- response_body_like eval
qr/"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E"/

=== TEST 12: llm_balance prefix (the default, named), a prompt of several blocks: the replica that serves
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngx_llm_no_such_engine $TEST_NGINX_REAL_ENGINE;
    llm_balance prefix;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    add_header X-Engine $llm_engine always;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. One day, she saw a big red ball under a tall tree and wanted to play with it.", "max_tokens": 8, "temperature": 0}
--- error_code: 200
--- response_headers_like
X-Engine: ngxreal\d+

=== TEST 13: llm_balance takes least or prefix
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine a b;
    llm_balance random;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- must_die
--- error_log
invalid value "random"
