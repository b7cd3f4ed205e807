# EmbeddingGemma served by the REAL engine: gen-model's tiny-embeddinggemma ($TEST_NGINX_EG_ENGINE, t/run.sh:
# Gemma 3's layers without the causal mask, a symmetric sliding window of 8 positions each side, mean pooling,
# Dense 64 -> 256 -> 64; its vectors against llama.cpp's: tests/parity/embeddinggemma.t). /v1/embeddings gives
# the vector `llm-engine embed` prints ($TEST_NGINX_REF_EMBED_EG) for a text longer than the window; the model
# does not generate (a 400), and "truncate" cuts an input past its 2048 positions.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: one text: the engine's vector (Dense modules applied, made unit length)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_EG_ENGINE;
    llm_model_path $TEST_NGINX_EG_MODEL;
    llm_model_name eg;
}
--- request
POST /v1/embeddings
{"input": "Once upon a time there was a girl named Lily who loved to play in the park with her friends."}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED_EG}\E\}\],"model":"eg","usage":\{"prompt_tokens":\d+,"total_tokens":\d+\}\}$/

=== TEST 2: a completion is a 400: it does not generate
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_EG_ENGINE;
    llm_model_path $TEST_NGINX_EG_MODEL;
}
--- request
POST /v1/completions
{"prompt": "Hi", "max_tokens": 4}
--- error_code: 400
--- response_body_like chomp
"code":"model_not_generative"

=== TEST 3: "truncate": true cuts an input past the 2048 positions to 2047 tokens
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_EG_ENGINE;
    llm_model_path $TEST_NGINX_EG_MODEL;
}
--- request eval
"POST /v1/embeddings\n" . '{"truncate": true, "input": "' . ("cat " x 2500) . '"}'
--- error_code: 200
--- response_body_like chomp
"usage":\{"prompt_tokens":2047,"total_tokens":2047\}
