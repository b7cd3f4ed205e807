# POST /v1/rerank against the REAL engine: the tiny random model of t/085 ($TEST_NGINX_LLAMA3_ENGINE; Llama 3's
# vocabulary has the "yes" and "no" tokens a Qwen3-Reranker-style model answers with). Each document is one
# scoring request in the engine (the logprobs of "yes" and "no" after the judging prompt); the weights are
# random, so what is checked is the shape, the order, top_n and the refusals. (That a score is P(yes) /
# (P(yes) + P(no)) of the same prompt as a chat request sees it: tests/openai_sdk/rerank.test.mjs.)
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: three documents: each scored, by relevance, with its text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
}
--- request
POST /v1/rerank
{"model": "tiny", "query": "What is the capital of France?", "documents": ["Paris is the capital of France.", "Bananas are yellow.", {"text": "France borders Spain."}]}
--- error_code: 200
--- response_body_like eval
qr/^\{"id":"rerank-[0-9a-f]{16}","model":"tiny","results":\[(\{"index":[0-2],"relevance_score":0\.\d+(e-\d+)?,"document":\{"text":"[^"]+"\}\},?){3}\],"usage":\{"prompt_tokens":\d+,"total_tokens":\d+\}\}$/

=== TEST 2: top_n 1 without the documents: the most relevant one's index and score
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
}
--- request
POST /rerank
{"query": "What is the capital of France?", "documents": ["Paris is the capital of France.", "Bananas are yellow.", "France borders Spain."], "top_n": 1, "return_documents": false}
--- error_code: 200
--- response_body_like eval
qr/"results":\[\{"index":[0-2],"relevance_score":[0-9.e-]+\}\],"usage"/

=== TEST 3: no query is a 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
}
--- request
POST /v1/rerank
{"documents": ["a"]}
--- error_code: 400
--- response_body_like chomp
"param":"query","code":"missing_required_parameter"

=== TEST 4: no documents is a 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
}
--- request
POST /v1/rerank
{"query": "q", "documents": []}
--- error_code: 400
--- response_body_like chomp
'documents' must be an array of 1 to 1024 strings

=== TEST 5: a document that is not text is a 400 naming it
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
}
--- request
POST /v2/rerank
{"query": "q", "documents": ["a", 7]}
--- error_code: 400
--- response_body_like chomp
documents\[1\] must be a string

=== TEST 6: a model without "yes" / "no" tokens (stories260K's 512-token vocabulary) is a 400 that says so
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name tiny;
}
--- request
POST /v1/rerank
{"query": "q", "documents": ["a"]}
--- error_code: 400
--- response_body_like chomp
"code":"rerank_unsupported"

=== TEST 7: llm_api rerank serves it on any URI
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api rerank;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
}
--- request
POST /score-these
{"query": "q", "documents": ["a", "b"]}
--- error_code: 200
--- response_body_like chomp
"results":\[\{"index":[01],

=== TEST 8: a document past the context is a 400 that names "truncate"
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
}
--- request eval
"POST /v1/rerank\n" . '{"query": "q", "documents": ["a", "' . ("cat " x 4200) . '"]}'
--- error_code: 400
--- response_body_like chomp
with the query.*context length is \d+ tokens \(\\"truncate\\": true cuts it\)","type":"invalid_request_error","param":"documents","code":"context_length_exceeded"

=== TEST 9: with "truncate": true the document is cut inside its judging prompt, which then fits
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
}
--- request eval
"POST /v1/rerank\n" . '{"truncate": true, "query": "q", "documents": ["a", "' . ("cat " x 4200) . '"]}'
--- error_code: 200
--- response_body_like chomp
"results":\[\{"index":[01],.*"usage":\{"prompt_tokens":(4[01]\d\d),
