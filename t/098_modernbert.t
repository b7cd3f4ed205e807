# ModernBERT served by the REAL engine: gen-model's tiny-modernbert ($TEST_NGINX_MB_ENGINE, t/run.sh: LayerNorms
# without bias, fused q|k|v and gate|up, GeGLU, a symmetric window of 8 positions each side on two layers of
# three, mean pooling, Llama 3's vocabulary with [CLS] and [SEP] as its BOS and EOS; its vectors against
# llama.cpp's: tests/parity/modernbert.t). /v1/embeddings gives the vector `llm-engine embed` prints
# ($TEST_NGINX_REF_EMBED_MB) for a text longer than the window, the module's tokenizer adding [CLS] and [SEP];
# several inputs come back in order; the model does not generate (a 400), and "truncate" cuts an input past its
# 512 positions. The module reading the model as a Hugging Face directory (written from the GGUF) tokenizes the
# same: its tokenizer.json's post-processor adds [CLS] and [SEP]. A reranker made of it ($TEST_NGINX_MB_RR_ENGINE:
# a classifier head on the tokens' mean, each document paired as [CLS] query [SEP] document [SEP]) ranks with the
# scores `llm-engine embed --query` gives (checked against transformers' definition: tests/parity/modernbert_hf.t).
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: one text: the engine's vector (made unit length), [CLS] + 21 tokens + [SEP]
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_MB_ENGINE;
    llm_model_path $TEST_NGINX_MB_MODEL;
    llm_model_name modernbert;
}
--- request
POST /v1/embeddings
{"input": "Once upon a time there was a girl named Lily who loved to play in the park with her friends."}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED_MB}\E\}\],"model":"modernbert","usage":\{"prompt_tokens":23,"total_tokens":23\}\}$/

=== TEST 2: three inputs: three vectors in order, the first the one above
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_MB_ENGINE;
    llm_model_path $TEST_NGINX_MB_MODEL;
}
--- request
POST /v1/embeddings
{"input": ["Once upon a time there was a girl named Lily who loved to play in the park with her friends.", "Why?", "A cat sat on the mat."]}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED_MB}\E\},\{"object":"embedding","index":1,"embedding":\[[^\]]+\]\},\{"object":"embedding","index":2,"embedding":\[[^\]]+\]\}\],"model":"[^"]+","usage":\{"prompt_tokens":36,"total_tokens":36\}\}$/

=== TEST 3: a completion is a 400: it does not generate
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_MB_ENGINE;
    llm_model_path $TEST_NGINX_MB_MODEL;
}
--- request
POST /v1/completions
{"prompt": "Hi", "max_tokens": 4}
--- error_code: 400
--- response_body_like chomp
"code":"model_not_generative"

=== TEST 4: "truncate": true cuts an input past the 512 positions
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_MB_ENGINE;
    llm_model_path $TEST_NGINX_MB_MODEL;
}
--- request eval
"POST /v1/embeddings\n" . '{"truncate": true, "input": "' . ("cat " x 700) . '"}'
--- error_code: 200
--- response_body_like chomp
"usage":\{"prompt_tokens":511,"total_tokens":511\}

=== TEST 5: the module reading the model's Hugging Face directory (tokenizer.json, "[CLS] $A [SEP]"): the same tokens, the same vector
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_MB_ENGINE;
    llm_model_path $TEST_NGINX_MB_HF;
    llm_model_name modernbert;
}
--- request
POST /v1/embeddings
{"input": "Once upon a time there was a girl named Lily who loved to play in the park with her friends."}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED_MB}\E\}\],"model":"modernbert","usage":\{"prompt_tokens":23,"total_tokens":23\}\}$/

=== TEST 6: a ModernBERT reranker (its Hugging Face directory: a classifier head on the tokens' mean) ranks on /v1/rerank
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_MB_RR_ENGINE;
    llm_model_path $TEST_NGINX_MB_RR_MODEL;
}
--- request
POST /v1/rerank
{"query": "a cat", "documents": ["the cat sat on the mat", "the sun is hot today", "A cat and a dog ran home."], "return_documents": false}
--- error_code: 200
--- response_body_like eval
qr/$ENV{TEST_NGINX_MB_RR_RE}/
