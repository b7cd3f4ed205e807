# TGI's API (Hugging Face Text Generation Inference) over the completions path: POST /generate, /generate_stream
# and POST / (streamed when the body says so, else a list of one answer), GET /info; TGI's parameters, its
# answers with details, its stream of one event per token ("data: {...}", no [DONE]), its 422 refusals
# {"error", "error_type"}; an explicit `llm_api tgi_*` location. Greedy text must be stories260K's known
# continuation. Hugging Face's JavaScript client runs against make serve in tests/openai_sdk/tgi.test.mjs.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__
=== TEST 1: /generate with details: stories260K's continuation, finish_reason length, each token
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
POST /generate
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 10, "details": true}}
--- error_code: 200
--- response_headers
Content-Type: application/json
--- response_body_like eval
qr/^\{"generated_text":", there was a little girl named Lily","details":\{"finish_reason":"length","generated_tokens":10,"seed":null,"prefill":\[\],"tokens":\[\{"id":432,"text":",","logprob":-[\d.e-]+,"special":false\},\{"id":383,"text":" there",.*"text":" Lily","logprob":-[\d.e-]+,"special":false\}\]\}\}$/

=== TEST 2: /generate without details: the text alone
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
POST /generate
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 3}}
--- error_code: 200
--- response_body
{"generated_text":", there was"}

=== TEST 3: /generate_stream: one event a token (data: only, no [DONE]), the last with generated_text and details
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
POST /generate_stream
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 3, "details": true}}
--- error_code: 200
--- response_headers
Content-Type: text/event-stream
--- response_body_like eval
qr/\Adata: \{"index":1,"token":\{"id":432,"text":",","logprob":-[\d.e-]+,"special":false\},"top_tokens":null,"generated_text":null,"details":null\}\n\ndata: \{"index":2,"token":\{"id":383,"text":" there","logprob":-[\d.e-]+,"special":false\},"top_tokens":null,"generated_text":null,"details":null\}\n\ndata: \{"index":3,"token":\{"id":286,"text":" was","logprob":-[\d.e-]+,"special":false\},"top_tokens":null,"generated_text":", there was","details":\{"finish_reason":"length","generated_tokens":3,"seed":null,"input_length":5\}\}\n\n\z/

=== TEST 4: POST / without stream: a list of one answer
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
POST /
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 3}}
--- error_code: 200
--- response_body
[{"generated_text":", there was"}]

=== TEST 5: POST / with stream true: the same events as /generate_stream; details null unless asked
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
POST /
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 2}, "stream": true}
--- error_code: 200
--- response_headers
Content-Type: text/event-stream
--- response_body_like eval
qr/\Adata: \{"index":1,"token":\{"id":432,"text":",".*\}\n\ndata: \{"index":2,"token":\{"id":383,"text":" there",[^\n]*"generated_text":", there","details":null\}\n\n\z/

=== TEST 6: GET / is still the liveness text
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
--- response_body
ngx_llm is running

=== TEST 7: return_full_text: generated_text starts with the inputs
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
POST /generate
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 3, "return_full_text": true}}
--- error_code: 200
--- response_body
{"generated_text":"Once upon a time, there was"}

=== TEST 8: a stop sequence ends the text before it: finish_reason stop_sequence
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
POST /generate
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 30, "stop": ["Lily"], "details": true}}
--- error_code: 200
--- response_body_like eval
qr/^\{"generated_text":", there was a little girl named ","details":\{"finish_reason":"stop_sequence","generated_tokens":\d+,/

=== TEST 9: streamed with a stop sequence: the held text goes out with a later token, and the texts join into generated_text
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
POST /generate_stream
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 5, "stop": [" a little boy"]}}
--- error_code: 200
--- response_body_like eval
qr/"index":3,"token":\{"id":286,"text":" was",.*"index":4,"token":\{"id":261,"text":"",.*"index":5,"token":\{"id":376,"text":" a little",[^\n]*"generated_text":", there was a little","details":null\}\n\n\z/s

=== TEST 10: truncate: only the inputs' last 2 tokens are read (input_length 2)
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
POST /generate_stream
{"inputs": "One day a big dog and a small cat went to the park", "parameters": {"max_new_tokens": 1, "truncate": 2, "details": true}}
--- error_code: 200
--- response_body_like eval
qr/"details":\{"finish_reason":"length","generated_tokens":1,"seed":null,"input_length":2\}/

=== TEST 11: do_sample with a seed: details.seed is it
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
POST /generate
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 4, "do_sample": true, "seed": 7, "details": true}}
--- error_code: 200
--- response_body_like eval
qr/"details":\{"finish_reason":"(length|eos_token)","generated_tokens":\d+,"seed":7,"prefill":\[\],"tokens":/

=== TEST 12: typical_p samples (TGI: a sampling parameter); details.seed is the request's
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
POST /generate
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 4, "typical_p": 0.95, "seed": 5, "details": true}}
--- error_code: 200
--- response_body_like eval
qr/"details":\{"finish_reason":"(length|eos_token)","generated_tokens":\d+,"seed":5,/

=== TEST 13: top_n_tokens: each token's alternatives in details.top_tokens
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
POST /generate
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 2, "details": true, "top_n_tokens": 2}}
--- error_code: 200
--- response_body_like eval
qr/"tokens":\[\{"id":432,"text":",",[^\]]*\],"top_tokens":\[\[\{"id":432,"text":",","logprob":-[\d.e-]+,"special":false\},\{"id":\d+,[^\]]*\],\[\{"id":383,"text":" there",[^\]]*\]\]\}\}$/

=== TEST 14: a regex grammar holds the text to it; nothing can follow, so it ends as at an end token
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
POST /generate
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 20, "details": true, "grammar": {"type": "regex", "value": "(yes|no)"}}}
--- error_code: 200
--- response_body_like eval
qr/^\{"generated_text":"(yes|no)","details":\{"finish_reason":"eos_token",/

=== TEST 15: a json grammar: the text is JSON of the schema
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
POST /generate
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 60, "grammar": {"type": "json", "value": {"enum": ["red", "green", 7]}}}}
--- error_code: 200
--- response_body_like eval
qr/^\{"generated_text":"(\\"red\\"|\\"green\\"|7)"\}$/

=== TEST 16: refused with TGI's 422: watermark, named
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
POST /generate
{"inputs": "Once", "parameters": {"watermark": true}}
--- error_code: 422
--- response_headers
Content-Type: application/json
--- response_body
{"error":"'parameters.watermark' is not supported","error_type":"validation"}

=== TEST 17: malformed JSON: 422 validation
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
POST /generate_stream
{"inputs": "Once", 
--- error_code: 422
--- response_body_like eval
qr/^\{"error":"request body is not valid JSON[^"]*","error_type":"validation"\}$/

=== TEST 18: max_new_tokens over llm_max_tokens: 422 naming it
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 8;
}
--- request
POST /generate
{"inputs": "Once", "parameters": {"max_new_tokens": 100}}
--- error_code: 422
--- response_body
{"error":"parameters.max_new_tokens is 100; this server allows at most 8","error_type":"validation"}

=== TEST 19: GET /info: the model and the limits
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
GET /info
--- error_code: 200
--- response_body_like eval
qr/^\{"model_id":"stories","model_sha":null,"model_pipeline_tag":"text-generation","max_concurrent_requests":\d+,"max_best_of":1,"max_stop_sequences":16,"max_input_tokens":\d+,"max_total_tokens":\d+,"validation_workers":1,"max_client_batch_size":1,"router":"ngx_llm","sha":null,"docker_label":null\}$/

=== TEST 20: an explicit llm_api tgi_generate location; GET there is a 405
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location = /gen {
    llm_api tgi_generate;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /gen
{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 3}}
--- error_code: 200
--- response_body
{"generated_text":", there was"}

=== TEST 21: the body's model name is not read (TGI serves one model)
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
POST /generate
{"model": "gpt2", "inputs": "Once upon a time", "parameters": {"max_new_tokens": 3}}
--- error_code: 200
--- response_body
{"generated_text":", there was"}
