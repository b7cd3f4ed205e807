# Several models behind one location (llm_models @name ...): the request's "model" picks the named location,
# and so the engine, that serves it. Here / serves stories260K ($TEST_NGINX_REAL_ENGINE) and lists @lora
# (stories260K with a LoRA adapter merged, $TEST_NGINX_LORA_ENGINE, also named "tuned") and @bert (an encoder,
# $TEST_NGINX_BERT_ENGINE). Each answer must be its own engine's: the base model's greedy text
# ($TEST_NGINX_REF_COMPLETION), the adapted one's ($TEST_NGINX_REF_LORA), BERT's vector ($TEST_NGINX_REF_EMBED_BERT);
# /v1/models, /api/tags, /api/ps, /health and /metrics (a model label on each series) cover all three; a name
# none serves is a 404 that names them; a list naming a location that is not there, or one without llm_api,
# stops nginx from starting.
use Test::Nginx::Socket 'no_plan';

our $config = <<'_EOC_';
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_models @lora @bert;
}
location @lora {
    llm_api;
    llm_engine $TEST_NGINX_LORA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories-lora;
    llm_model_alias tuned;
}
location @bert {
    llm_api;
    llm_engine $TEST_NGINX_BERT_ENGINE;
    llm_model_path $TEST_NGINX_BERT_MODEL;
    llm_model_name bert;
}
_EOC_

no_shuffle();
run_tests();

__DATA__

=== TEST 1: the adapted model by its name: its engine's greedy text, its name in the answer
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /v1/completions
{"model": "stories-lora", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/^\{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories-lora","choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_LORA}\E","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":40,"total_tokens":45(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}\}$/

=== TEST 2: the location's own model by its name: the base model's text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /v1/completions
{"model": "stories", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/^\{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E","logprobs":null,"finish_reason":"length"\}/

=== TEST 3: no model: the location's own
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/"model":"stories","choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E"/

=== TEST 4: an alias of a listed model: that model's engine
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /v1/completions
{"model": "tuned", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/"text":"\Q$ENV{TEST_NGINX_REF_LORA}\E"/

=== TEST 5: streamed chat on the listed model: SSE chunks under its name, then [DONE]
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /v1/chat/completions
{"model": "stories-lora", "messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 8, "temperature": 0, "stream": true}
--- error_code: 200
--- response_headers
Content-Type: text/event-stream
--- response_body_like eval
qr/^(data: \{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion.chunk","created":\d+,"model":"stories-lora",[^\n]*\n\n)+data: \[DONE\]\n\n$/s

=== TEST 6: embeddings from the encoder's location: its engine's vector
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /v1/embeddings
{"input": "A cat sat on the mat, then it slept.", "model": "bert"}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED_BERT}\E\}\],"model":"bert","usage":\{"prompt_tokens":20,"total_tokens":20\}\}$/

=== TEST 7: the encoder's own refusal of generation (its location answers, not the default's)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /v1/completions
{"model": "bert", "prompt": "Once upon a time", "max_tokens": 4}
--- error_code: 400
--- response_body_like: "code":"model_not_generative"

=== TEST 8: GET /v1/models lists every model and alias
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
GET /v1/models
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"id":"stories","object":"model","created":\d+,"owned_by":"ngx_llm","max_model_len":\d+\},\{"id":"stories-lora","object":"model","created":\d+,"owned_by":"ngx_llm","max_model_len":\d+\},\{"id":"tuned","object":"model","created":\d+,"owned_by":"ngx_llm","max_model_len":\d+\},\{"id":"bert","object":"model","created":\d+,"owned_by":"ngx_llm","max_model_len":\d+\}\]\}$/

=== TEST 9: GET /v1/models/<id> finds a listed model
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
GET /v1/models/bert
--- error_code: 200
--- response_body_like eval
qr/^\{"id":"bert","object":"model","created":\d+,"owned_by":"ngx_llm","max_model_len":\d+\}$/

=== TEST 10: a model none serves: 404 naming the ones served
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /v1/chat/completions
{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
--- error_code: 404
--- response_body_like eval
qr/"message":"The model 'gpt-4o' does not exist \(this server serves 'stories', 'stories-lora', 'bert'\)".*"code":"model_not_found"/

=== TEST 11: malformed JSON: the location's own 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /v1/completions
{"model": "stories-lora", "prompt":
--- error_code: 400
--- response_body_like: "type":"invalid_request_error"

=== TEST 12: Ollama's /api/generate, its ":latest" tag dropped: the listed model's text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /api/generate
{"model": "stories-lora:latest", "prompt": "Once upon a time", "raw": true, "stream": false, "options": {"temperature": 0, "num_predict": 40}}
--- error_code: 200
--- response_body_like eval
qr/^\{"model":"stories-lora","created_at":"[^"]+","response":"\Q$ENV{TEST_NGINX_REF_LORA}\E","done":true/

=== TEST 13: Ollama's /api/tags lists all three, each with its own details
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
GET /api/tags
--- error_code: 200
--- response_body_like eval
qr/^\{"models":\[\{"name":"stories",.*"family":"llama".*\},\{"name":"stories-lora",.*\},\{"name":"tuned",.*\},\{"name":"bert","model":"bert",.*"family":"bert".*\}\]\}$/

=== TEST 14: Ollama's /api/ps: the three are loaded (their engines are up)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
GET /api/ps
--- error_code: 200
--- response_body_like eval
qr/^\{"models":\[\{"name":"stories",.*\{"name":"stories-lora",.*\{"name":"tuned",.*\{"name":"bert",.*"context_length":\d+\}\]\}$/

=== TEST 15: Ollama's /api/show of the encoder: its capabilities (embedding only)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
POST /api/show
{"model": "bert"}
--- error_code: 200
--- response_body_like eval
qr/"family":"bert".*"general.name":"bert".*"capabilities":\["embedding"\]/

=== TEST 16: a listed location taking any name (llm_model_alias *): exact names first, the rest there
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_models @lora;
}
location @lora {
    llm_api;
    llm_engine $TEST_NGINX_LORA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories-lora;
    llm_model_alias *;
}
--- request
POST /v1/completions
{"model": "gpt-4o-mini", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/"model":"stories-lora","choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_LORA}\E"/

=== TEST 17: llm_models at server level: every location's requests pick by name (and a named location's go no further)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
llm_models @lora;
llm_engine $TEST_NGINX_REAL_ENGINE;
llm_model_path $TEST_NGINX_SPM_MODEL;
llm_model_name stories;
location /v1/ {
    llm_api;
}
location @lora {
    llm_api;
    llm_engine $TEST_NGINX_LORA_ENGINE;
    llm_model_name stories-lora;
}
--- request
POST /v1/completions
{"model": "stories-lora", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/"model":"stories-lora","choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_LORA}\E"/

=== TEST 18: a named location that is not there: nginx does not start
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_models @nowhere;
}
--- must_die
--- error_log
llm_models "@nowhere": no such named location in its server

=== TEST 19: a named location without llm_api: nginx does not start
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_models @static;
}
location @static {
    return 204;
}
--- must_die
--- error_log
llm_models "@static": that location serves no model (it needs llm_api)

=== TEST 20: a name that is not a named location: nginx does not start
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_models lora;
}
--- must_die
--- error_log
llm_models "lora": expected a named location (@name)

=== TEST 21: a body too large for memory (written to a temp file) is passed on whole
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request eval
"POST /v1/completions\n{\"model\": \"stories-lora\"," . (" " x 300000) . "\"prompt\": \"Once upon a time\", \"max_tokens\": 40, \"temperature\": 0}"
--- error_code: 200
--- response_body_like eval
qr/"model":"stories-lora","choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_LORA}\E"/
--- error_log
a client request body is buffered to a temporary file

=== TEST 22: /health with several models: 200 when every engine is ready, each listed
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
GET /health
--- error_code: 200
--- response_body_like eval
qr/^\{"status":"ok","model":"[^"]*","generation":"[0-9a-f]{16}","models":\[\{"id":"stories","status":"ok"\},\{"id":"stories-lora","status":"ok","model":"[^"]*","generation":"[0-9a-f]{16}"\},\{"id":"bert","status":"ok","model":"[^"]*","generation":"[0-9a-f]{16}"\}\]\}$/

=== TEST 23: /health with a listed model whose engine is not running: 503, "degraded", that one "unavailable"; the others still serve
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_models @gone;
}
location @gone {
    llm_api;
    llm_engine ngx_llm_no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name gone;
}
--- request
GET /health
--- error_code: 503
--- response_body_like eval
qr/^\{"status":"degraded","model":"[^"]*","generation":"[0-9a-f]{16}","models":\[\{"id":"stories","status":"ok"\},\{"id":"gone","status":"unavailable","reason":"[^"]+"\}\]\}$/

=== TEST 24: a request for the model whose engine is not running: 503 from its location
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_models @gone;
}
location @gone {
    llm_api;
    llm_engine ngx_llm_no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name gone;
}
--- request
POST /v1/completions
{"model": "gone", "prompt": "Once upon a time", "max_tokens": 4}
--- error_code: 503
--- response_body_like: "code":"engine_unavailable"

=== TEST 25: /metrics with several models: each engine's series once per model, labelled model="ID", under one TYPE line
--- main_config
load_module $TEST_NGINX_MODULE;
--- config eval: $::config
--- request
GET /metrics
--- error_code: 200
--- response_body_like eval
qr/^# HELP llm_http_requests_total .*\nllm_engine_up\{model="stories"\} 1\nllm_engine_up\{model="stories-lora"\} 1\nllm_engine_up\{model="bert"\} 1\n.*# TYPE llm_generation_tokens_total counter\nllm_generation_tokens_total\{model="stories"\} \d+\nllm_generation_tokens_total\{model="stories-lora"\} \d+\nllm_generation_tokens_total\{model="bert"\} \d+\n# HELP .*llm_step_seconds_bucket\{model="bert",le="\+Inf"\} \d+\nllm_step_seconds_sum\{model="bert"\} [\d.]+\nllm_step_seconds_count\{model="bert"\} \d+\n# HELP llm_time_to_first_token_seconds .*llm_queue_time_seconds_count\{model="bert"\} \d+\n$/s

=== TEST 26: /metrics with a listed model whose engine is not running: that one's llm_engine_up 0 and no other series
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_models @gone;
}
location @gone {
    llm_api;
    llm_engine ngx_llm_no_such_engine;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name gone;
}
--- request
GET /metrics
--- error_code: 200
--- response_body_like eval
qr/\nllm_engine_up\{model="stories"\} 1\nllm_engine_up\{model="gone"\} 0\n(?!.*model="gone").*llm_requests_submitted_total\{model="stories"\} \d+\n/s

=== TEST 27: /metrics of one model: no labels, as before
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
--- response_body_like eval
qr/\nllm_engine_up 1\n.*\nllm_generation_tokens_total \d+\n.*\nllm_step_seconds_bucket\{le="\+Inf"\} \d+\n/s
