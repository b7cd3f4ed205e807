# Ollama's API over the chat, completions and embeddings paths (POST /api/chat, /api/generate, /api/embed; GET /api/tags, /api/ps,
# /api/version; POST /api/show): Ollama's request bodies and options, its answers and, streamed, its lines of
# JSON (application/x-ndjson); errors as {"error": message}; an explicit `llm_api ollama_*` location. Greedy
# text must be `llm-engine generate`'s on the chat prompt ($TEST_NGINX_REF_CHAT, t/run.sh) and the known-good
# stories260K continuation of the raw prompt. Ollama's own client runs against make serve in
# tests/openai_sdk/ollama.test.mjs.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: /api/chat, not streamed: `llm-engine generate`'s text on the chat prompt, done_reason length, the counts
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
POST /api/chat
{"model": "stories:latest", "messages": [{"role": "user", "content": "Once upon a time"}], "stream": false, "options": {"temperature": 0, "num_predict": 20}}
--- error_code: 200
--- response_headers
Content-Type: application/json
--- response_body_like eval
qr/^\{"model":"stories","created_at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z","message":\{"role":"assistant","content":"\Q$ENV{TEST_NGINX_REF_CHAT}\E"\},"done":true,"done_reason":"length","total_duration":\d+,"load_duration":0,"prompt_eval_count":\d+,"prompt_eval_duration":\d+,"eval_count":20,"eval_duration":\d+\}$/

=== TEST 2: /api/generate raw, streamed (the default): one line a piece of stories260K's known continuation, then the last line
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
POST /api/generate
{"model": "stories", "prompt": "Once upon a time", "raw": true, "options": {"temperature": 0, "num_predict": 3}}
--- error_code: 200
--- response_headers
Content-Type: application/x-ndjson
--- response_body_like eval
qr/\A\{"model":"stories","created_at":"[^"]+","response":",","done":false\}\n\{"model":"stories","created_at":"[^"]+","response":" there","done":false\}\n\{"model":"stories","created_at":"[^"]+","response":" was","done":false\}\n\{"model":"stories","created_at":"[^"]+","response":"","done":true,"done_reason":"length","total_duration":\d+,"load_duration":0,"prompt_eval_count":5,"prompt_eval_duration":\d+,"eval_count":3,"eval_duration":\d+\}\n\z/

=== TEST 3: num_predict -1: as many tokens as llm_max_tokens allows (here 7), done_reason length
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 7;
}
--- request
POST /api/generate
{"model": "stories", "prompt": "Once upon a time", "raw": true, "stream": false, "options": {"temperature": 0, "num_predict": -1}}
--- error_code: 200
--- response_body_like eval
qr/^\{"model":"stories","created_at":"[^"]+","response":", there was a little gir","done":true,"done_reason":"length",.*"eval_count":7,/

=== TEST 4: /api/generate without a prompt is Ollama's call that loads the model: done_reason load
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
POST /api/generate
{"model": "stories"}
--- error_code: 200
--- response_body_like
^\{"model":"stories","created_at":"[^"]+","response":"","done":true,"done_reason":"load"\}$

=== TEST 5: GET /api/tags lists the model and its aliases, with the GGUF header's architecture and size (stories260K's names no file type)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_model_alias tales;
}
--- request
GET /api/tags
--- error_code: 200
--- response_body_like eval
qr/^\{"models":\[\{"name":"stories","model":"stories","modified_at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ","size":\d+,"digest":"","details":\{"parent_model":"","format":"gguf","family":"llama","families":\["llama"\],"parameter_size":"260K","quantization_level":""\}\},\{"name":"tales","model":"tales",.*\]\}$/

=== TEST 6: GET /api/ps: the served model, loaded while the engine is up, with its context
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
GET /api/ps
--- error_code: 200
--- response_body_like eval
qr/^\{"models":\[\{"name":"stories","model":"stories",.*"details":\{[^}]*\},"expires_at":"9999-12-31T23:59:59Z","size_vram":0,"context_length":512\}\]\}$/

=== TEST 7: GET /api/version
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
GET /api/version
--- error_code: 200
--- response_body_like eval
qr/^\{"version":"\d+\.\d+\.\d+"\}$/

=== TEST 8: POST /api/show: the model's details and capabilities (stories260K's chat format has no function calling)
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
POST /api/show
{"model": "stories"}
--- error_code: 200
--- response_body_like eval
qr/^\{"modelfile":"","parameters":"","template":"","details":\{[^}]*\},"model_info":\{"general.name":"stories","general.context_length":512\},"capabilities":\["completion","embedding"\],"modified_at":"[^"]+"\}$/

=== TEST 9: POST /api/show of an unknown model (Ollama's older field, name): a 404 in Ollama's shape
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
POST /api/show
{"name": "nope"}
--- error_code: 404
--- response_body_like eval
qr/^\{"error":"The model 'nope' does not exist \(this server serves 'stories'\)"\}$/

=== TEST 10: POST /api/show without a JSON body: a 400
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
POST /api/show
not json
--- error_code: 400
--- response_body_like eval
qr/^\{"error":"a JSON body with 'model' \(a string\) is required"\}$/

=== TEST 11: an option this server lacks: a 400 naming it
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
POST /api/chat
{"messages": [{"role": "user", "content": "Hi"}], "options": {"mirostat": 2}}
--- error_code: 400
--- response_body_like eval
qr/^\{"error":"option 'mirostat' is not supported by this server \(only 0, its neutral value\)"\}$/

=== TEST 12: malformed JSON: a 400 in Ollama's shape
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
POST /api/chat
{"messages": [
--- error_code: 400
--- response_body_like eval
qr/^\{"error":"request body is not valid JSON \(error near byte \d+\)"\}$/

=== TEST 13: an image: a 400
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
POST /api/generate
{"prompt": "Hi", "images": ["aGk="]}
--- error_code: 400
--- response_body_like eval
qr/^\{"error":"images are not supported by this server"\}$/

=== TEST 14: GET on /api/chat: a 405
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
GET /api/chat
--- error_code: 405
--- response_body_like eval
qr/^\{"error":"method GET is not allowed here \(use POST\)"\}$/

=== TEST 15: an explicit `llm_api ollama_chat` location; a JSON Schema format holds the answer to it (it opens with the object and its one property)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location = /ollama/chat {
    llm_api ollama_chat;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /ollama/chat
{"messages": [{"role": "user", "content": "Once upon a time"}], "stream": false, "format": {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}, "options": {"temperature": 0, "num_predict": 12}}
--- error_code: 200
--- response_body_like eval
qr/^\{"model":"stories","created_at":"[^"]+","message":\{"role":"assistant","content":"\{ .{0,4}.age.{1,40}"\},"done":true,"done_reason":"length",/

=== TEST 16: POST /api/embed: the vectors of /v1/embeddings (unit length, cut to dimensions), in Ollama's shape
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
POST /api/embed
{"model": "stories:latest", "input": ["Once upon a time", "The cat"], "dimensions": 4}
--- error_code: 200
--- response_body_like eval
qr/^\{"model":"stories","embeddings":\[\[-?[\d.e-]+(,-?[\d.e-]+){3}\],\[-?[\d.e-]+(,-?[\d.e-]+){3}\]\],"total_duration":\d+,"load_duration":0,"prompt_eval_count":9\}$/

=== TEST 17: POST /api/embeddings (Ollama's older call): one prompt, the vector as the engine pooled it
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
POST /api/embeddings
{"model": "stories", "prompt": "Once upon a time"}
--- error_code: 200
--- response_body_like eval
qr/^\{"embedding":\[-?[\d.e-]+(,-?[\d.e-]+){63}\]\}$/

=== TEST 18: /metrics counts the Ollama endpoints by name
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
qr/llm_http_requests_total\{endpoint="ollama_chat"\} \d+\n.*llm_http_requests_total\{endpoint="ollama_version"\} \d+\n/s

=== TEST 19: GET / answers that the server runs (the liveness check Ollama's CLI makes)
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
GET /
--- error_code: 200
--- response_headers
Content-Type: text/plain
--- response_body
ngx_llm is running
