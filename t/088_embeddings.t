# POST /v1/embeddings against the REAL engine (stories260K, last-token pooling): the vector is the one
# `llm-engine embed` prints ($TEST_NGINX_REF_EMBED, t/run.sh), for a text and for its token ids, alone or in a
# list; `dimensions` cuts it (then unit length again), `encoding_format: base64` packs float32s; every input
# of a list comes back in order, a window of them in the engine at a time; bad input is a 400, as is an engine
# that serves no embeddings (the echo engine).
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: one text: the engine's vector, as llm-engine embed prints it, and the usage
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
POST /v1/embeddings
{"input": "Once upon a time", "model": "stories"}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED}\E\}\],"model":"stories","usage":\{"prompt_tokens":5,"total_tokens":5\}\}$/

=== TEST 2: a list of a text, its token ids and another text: in order, the first two the same vector
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
POST /v1/embeddings
{"input": [[1, 403, 407, 261, 378], [1, 403, 407, 261, 378], [1, 319]]}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED}\E\},\{"object":"embedding","index":1,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED}\E\},\{"object":"embedding","index":2,"embedding":\[(-?[0-9.e+-]+,){63}-?[0-9.e+-]+\]\}\],"model":"stories","usage":\{"prompt_tokens":12,"total_tokens":12\}\}$/

=== TEST 3: dimensions 4: four floats of unit length
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
POST /v1/embeddings
{"input": "Once upon a time", "dimensions": 4}
--- error_code: 200
--- response_body_like eval
qr/"embedding":\[(-?[0-9.e+-]+),(-?[0-9.e+-]+),(-?[0-9.e+-]+),(-?[0-9.e+-]+)\](?(?{ abs($1*$1 + $2*$2 + $3*$3 + $4*$4 - 1) < 1e-6 })|(*FAIL))/

=== TEST 3b: a model whose tokenizer asks for EOS after a text (add_eos_token): it is appended, as llm-engine embed does
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_EOS_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/embeddings
{"input": "Once upon a time"}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED_EOS}\E\}\],"model":"stories","usage":\{"prompt_tokens":6,"total_tokens":6\}\}$/

=== TEST 4: base64: the 64 float32s (256 bytes) as one string; cut to 4 dimensions, 16 bytes
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
POST /v1/embeddings
{"input": ["Once upon a time", "A cat"], "encoding_format": "base64"}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":"[A-Za-z0-9+\/]{342}=="\},\{"object":"embedding","index":1,"embedding":"[A-Za-z0-9+\/]{342}=="\}\]/

=== TEST 5: 100 inputs (more than the 32 the engine holds for one request at once): all, in order
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"input\": [" . CORE::join(",", map { "\"story $_ about a dog\"" } 0 .. 99) . "]}"
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[(?:\{"object":"embedding","index":(\d+),"embedding":\[[^\]]+\]\},?(?(?{ $^N == ($main::k = ($^N == 0 ? 0 : $main::k + 1)) })|(*FAIL))){100}\],"model":"stories","usage"/

=== TEST 6: bad input, no input: 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{}"
--- error_code: 400
--- response_body_like eval
qr/'input' is required/

=== TEST 7: bad input, an empty string: 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"input\": \"\"}"
--- error_code: 400
--- response_body_like eval
qr/'input' must not be an empty string/

=== TEST 8: bad input, a number: 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"input\": 5}"
--- error_code: 400
--- response_body_like eval
qr/'input' must be a string or an array of token ids/

=== TEST 9: bad input, texts and ids mixed: 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"input\": [\"a\", [1, 2]]}"
--- error_code: 400
--- response_body_like eval
qr/not both \(input 1\)/

=== TEST 10: bad input, more dimensions than the model has: 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"input\": \"a\", \"dimensions\": 65}"
--- error_code: 400
--- response_body_like eval
qr/"message":"dimensions is 65; this model's embeddings have 64","type":"invalid_request_error","param":"dimensions"/

=== TEST 11: bad input, dimensions 0: 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"input\": \"a\", \"dimensions\": 0}"
--- error_code: 400
--- response_body_like eval
qr/'dimensions' must be between 1 and/

=== TEST 12: bad input, an unknown encoding_format: 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"input\": \"a\", \"encoding_format\": \"int8\"}"
--- error_code: 400
--- response_body_like eval
qr/'encoding_format' is \\"float\\" or \\"base64\\"/

=== TEST 13: bad input, a token id outside the vocabulary: 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"input\": [600]}"
--- error_code: 400
--- response_body_like eval
qr/token id 600 at index 0 is outside the vocabulary \(size 512\)","type":"invalid_request_error","param":"input"/

=== TEST 14: bad input, an input longer than the context: 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"input\": \"" . ("dog " x 700) . "\"}"
--- error_code: 400
--- response_body_like eval
qr/input 0 is \d+ tokens; this model's context length is 512 tokens \(\\"truncate\\": true cuts it\)","type":"invalid_request_error","param":"input","code":"context_length_exceeded"/

=== TEST 15: bad input, 2049 inputs: 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"input\": [" . CORE::join(",", ("\"a\"") x 2049) . "]}"
--- error_code: 400
--- response_body_like eval
qr/2049 inputs in one request; at most 2048/

=== TEST 16: bad input, another model: 404
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"input\": \"a\", \"model\": \"gpt-4\"}"
--- error_code: 404
--- response_body_like eval
qr/not_found/

=== TEST 17: bad input, GET: 405
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"GET /v1/embeddings"
--- error_code: 405
--- response_body_like eval
qr/method GET is not allowed here \(use POST\)/

=== TEST 18: llm_api embeddings serves it at any path
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location /embed {
    llm_api embeddings;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /embed
{"input": "Once upon a time"}
--- error_code: 200
--- response_body_like eval
qr/"embedding":\Q$ENV{TEST_NGINX_REF_EMBED}\E/

=== TEST 19: an engine that publishes no hidden size (the echo engine): a 400 that says so
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
POST /v1/embeddings
{"input": "Once upon a time"}
--- error_code: 400
--- response_body_like eval
qr/"message":"the engine \\"ngxtest\\" serves no embeddings","type":"invalid_request_error","param":null,"code":"embeddings_unsupported"/

=== TEST 20: the metrics count the endpoint
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
qr/llm_http_requests_total\{endpoint="embeddings"\} \d+/

=== TEST 22: a request longer than llm_request_timeout: 504, and what the engine still holds of it is cancelled
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_request_timeout 100ms;
}
--- request eval
"POST /v1/embeddings\n{\"input\": [" . CORE::join(",", map { "\"" . ("the dog ran to the park $_ " x 12) . "\"" } 1 .. 2048) . "]}"
--- error_code: 504
--- response_body_like eval
qr/"message":"the request timed out (waiting for the engine \(llm_queue_timeout\)|\(llm_request_timeout\))","type":"[a-z_]+","param":null,"code":"timeout"/

=== TEST 23: after it, the engine serves the next request at once
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
POST /v1/embeddings
{"input": "Once upon a time"}
--- error_code: 200
--- response_body_like eval
qr/"embedding":\Q$ENV{TEST_NGINX_REF_EMBED}\E/

=== TEST 24: "truncate": true: the same input cut to the context's 511 tokens, and a vector of 64 floats
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request eval
"POST /v1/embeddings\n{\"truncate\": true, \"input\": \"" . ("dog " x 700) . "\"}"
--- error_code: 200
--- response_body_like eval
qr/"embedding":\[(-?[0-9.e-]+,){63}-?[0-9.e-]+\]\}\],"model":"stories","usage":\{"prompt_tokens":511,"total_tokens":511\}/

=== TEST 25: "truncate" must be a boolean
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
POST /v1/embeddings
{"truncate": "yes", "input": "dog"}
--- error_code: 400
--- response_body_like chomp
"'truncate' must be a boolean","type":"invalid_request_error","param":"truncate"
