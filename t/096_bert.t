# A BERT encoder served by the REAL engine: gen-model's tiny-bert ($TEST_NGINX_BERT_ENGINE, t/run.sh: random
# weights, a WordPiece vocabulary, mean pooling). /v1/embeddings gives the vector `llm-engine embed` prints
# ($TEST_NGINX_REF_EMBED_BERT), the text wrapped in [CLS] ... [SEP] by the module's tokenizer; generation and
# rerank are a clear 400 (an encoder has no language-model head); an input past the 128-token context is a 400.
# A BERT cross-encoder ($TEST_NGINX_BERT_RR_ENGINE: tiny-bert-rerank) ranks on /v1/rerank, each document as the
# pair [CLS] query [SEP] document [SEP] (its score against a reference forward: tests/test_bert.c); the same
# model served by `serve --backend cuda` ($TEST_NGINX_BERT_CUDA_ENGINE: the CUDA emulation) ranks the documents
# in the same order with scores within 1.1e-4 of the CPU's (the tensor-core attention's half products;
# tests/gpu/embed_check.sh checks the hidden states to 1e-7 with the scalar kernels).
# A Hugging Face BertForSequenceClassification directory ($TEST_NGINX_HF_RR_ENGINE, engine/model_hf_bert.c)
# ranks with the scores tests/parity/make_hf_bert.py computes in pure Python. An XLM-RoBERTa cross-encoder
# ($TEST_NGINX_XLMR_RR_ENGINE: tiny-xlm-r-rerank, a Unigram vocabulary) ranks with the scores `llm-engine embed
# --query` gives the same pairs, and the module's /tokenize applies its precompiled charsmap. A jina-bert-v2
# encoder ($TEST_NGINX_JINA_ENGINE: tiny-jina-bert, ALiBi; its vectors against llama.cpp: tests/parity/bert.t)
# gives the vector `llm-engine embed` prints.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: one text: the engine's vector and the usage ([CLS] + 18 WordPiece tokens + [SEP])
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_ENGINE;
    llm_model_path $TEST_NGINX_BERT_MODEL;
    llm_model_name bert;
}
--- request
POST /v1/embeddings
{"input": "A cat sat on the mat, then it slept.", "model": "bert"}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED_BERT}\E\}\],"model":"bert","usage":\{"prompt_tokens":20,"total_tokens":20\}\}$/

=== TEST 2: the text's token ids ([CLS] ... [SEP]), twice in one list: its vector twice
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_ENGINE;
    llm_model_path $TEST_NGINX_BERT_MODEL;
    llm_model_name bert;
}
--- request
POST /v1/embeddings
{"input": [[2,7,25,38,40,146,62,11,29,38,230,11,149,54,8,48,160,146,232,3], [2,7,25,38,40,146,62,11,29,38,230,11,149,54,8,48,160,146,232,3]]}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED_BERT}\E\},\{"object":"embedding","index":1,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED_BERT}\E\}\],"model":"bert","usage":\{"prompt_tokens":40,"total_tokens":40\}\}$/

=== TEST 3: a completion is a 400: an encoder does not generate
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_ENGINE;
    llm_model_path $TEST_NGINX_BERT_MODEL;
}
--- request
POST /v1/completions
{"prompt": "A cat", "max_tokens": 4}
--- error_code: 400
--- response_body_like chomp
"code":"model_not_generative"

=== TEST 4: so is a chat completion
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_ENGINE;
    llm_model_path $TEST_NGINX_BERT_MODEL;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "stream": true}
--- error_code: 400
--- response_body_like chomp
it serves /v1/embeddings and does not generate text

=== TEST 5: and a rerank: an embedding model is not a reranker
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_ENGINE;
    llm_model_path $TEST_NGINX_BERT_MODEL;
}
--- request
POST /v1/rerank
{"query": "a cat", "documents": ["a cat sat", "the sun"]}
--- error_code: 400
--- response_body_like chomp
"code":"rerank_unsupported"

=== TEST 6: an input past the model's 128 positions is a 400; the engine serves on
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_ENGINE;
    llm_model_path $TEST_NGINX_BERT_MODEL;
}
--- request eval
"POST /v1/embeddings\n" . '{"input": "' . ("a cat sat. " x 60) . '"}'
--- error_code: 400
--- response_body_like chomp
context

=== TEST 7: /tokenize splits WordPiece: lowercased words, punctuation on its own
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_ENGINE;
    llm_model_path $TEST_NGINX_BERT_MODEL;
}
--- request
POST /tokenize
{"prompt": "A cat sat on the mat, then it slept."}
--- error_code: 200
--- response_body_like chomp
7,25,38,40,146,62,11,29,38,230,11,149,54,8,48,160,146,232

=== TEST 8: a cross-encoder: three documents ranked, each scored as the pair [CLS] query [SEP] document [SEP]
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_RR_ENGINE;
    llm_model_path $TEST_NGINX_BERT_RR_MODEL;
    llm_model_name rr;
}
--- request
POST /v1/rerank
{"query": "a cat", "documents": ["a cat sat on the mat", "the sun is hot", "cats and dogs"]}
--- error_code: 200
--- response_body_like eval
qr/^\{"id":"rerank-[0-9a-f]{16}","model":"rr","results":\[(\{"index":[0-2],"relevance_score":[0-9.e-]+,"document":\{"text":"[a-z ]+"\}\},?){3}\],"usage":\{"prompt_tokens":41,"total_tokens":41\}\}$/

=== TEST 9: the same document twice gets the same score; top_n 1
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_RR_ENGINE;
    llm_model_path $TEST_NGINX_BERT_RR_MODEL;
}
--- request
POST /v1/rerank
{"query": "a cat", "documents": ["the sun is hot", "the sun is hot"], "return_documents": false}
--- error_code: 200
--- response_body_like eval
qr/"results":\[\{"index":0,"relevance_score":([0-9.e-]+)\},\{"index":1,"relevance_score":\1\}\]/

=== TEST 10: the cross-encoder on the CPU backend: the three documents' order and scores (2 digits)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_RR_ENGINE;
    llm_model_path $TEST_NGINX_BERT_RR_MODEL;
}
--- request
POST /v1/rerank
{"query": "a cat", "documents": ["a cat sat on the mat", "the sun is hot", "cats and dogs"], "return_documents": false}
--- error_code: 200
--- response_body_like eval
qr/"results":\[\{"index":2,"relevance_score":0\.87\d*\},\{"index":1,"relevance_score":0\.76\d*\},\{"index":0,"relevance_score":0\.73\d*\}\]/

=== TEST 11: the same on the CUDA backend (emulated; kernels/cuda_encoder.cu): the same order and scores
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_BERT_RR_MODEL;
}
--- request
POST /v1/rerank
{"query": "a cat", "documents": ["a cat sat on the mat", "the sun is hot", "cats and dogs"], "return_documents": false}
--- error_code: 200
--- response_body_like eval
qr/"results":\[\{"index":2,"relevance_score":0\.87\d*\},\{"index":1,"relevance_score":0\.76\d*\},\{"index":0,"relevance_score":0\.73\d*\}\]/

=== TEST 12: a Hugging Face cross-encoder directory (BertForSequenceClassification): Python's scores and order
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_HF_RR_ENGINE;
    llm_model_path $TEST_NGINX_HF_RR_MODEL;
}
--- request
POST /v1/rerank
{"query": "a cat", "documents": ["a cat sat on the mat", "the sun is hot", "cats and dogs"], "return_documents": false}
--- error_code: 200
--- response_body_like eval
qr/$ENV{TEST_NGINX_HF_RR_RE}/

=== TEST 13: an XLM-RoBERTa cross-encoder (Unigram vocabulary): each document as <s> query </s></s> document </s>
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_XLMR_RR_ENGINE;
    llm_model_path $TEST_NGINX_XLMR_RR_MODEL;
}
--- request
POST /v1/rerank
{"query": "a cat", "documents": ["a cat sat on the mat", "the sun is hot", "cats and dogs \u2460\uff01"], "return_documents": false}
--- error_code: 200
--- response_body_like eval
qr/$ENV{TEST_NGINX_XLMR_RR_RE}/

=== TEST 14: the module's Unigram tokenizer: <s>, then the charsmap's fullwidth letters, circled digit and ligature normalised
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_XLMR_RR_ENGINE;
    llm_model_path $TEST_NGINX_XLMR_RR_MODEL;
}
--- request
POST /tokenize
{"prompt": "\uff28\uff25\uff2c\uff2c\uff2f \u2460 \ufb01ne"}
--- error_code: 200
--- response_body_like chomp
^\{"tokens":\[0,65,204,183,183,186,155,220,17,16,156\],

=== TEST 15: "truncate": true cuts an input past the 128 positions to 127 tokens ([CLS] ... [SEP] kept)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_BERT_ENGINE;
    llm_model_path $TEST_NGINX_BERT_MODEL;
}
--- request eval
"POST /v1/embeddings\n" . '{"truncate": true, "input": "' . ("a cat sat. " x 60) . '"}'
--- error_code: 200
--- response_body_like chomp
"embedding":\[(-?[0-9.e-]+,){63}-?[0-9.e-]+\]\}\],"model":"[^"]*","usage":\{"prompt_tokens":127,"total_tokens":127\}

=== TEST 16: a cross-encoder's document past the context is a 400 that names "truncate"
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_XLMR_RR_ENGINE;
    llm_model_path $TEST_NGINX_XLMR_RR_MODEL;
}
--- request eval
"POST /v1/rerank\n" . '{"query": "a cat", "documents": ["a cat", "' . ("the sun is hot. " x 40) . '"]}'
--- error_code: 400
--- response_body_like chomp
with the query.*context length is \d+ tokens \(\\"truncate\\": true cuts it\)","type":"invalid_request_error","param":"documents","code":"context_length_exceeded"

=== TEST 17: with "truncate": true it is cut to fit (127 tokens: the query whole, the closing </s> kept)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_XLMR_RR_ENGINE;
    llm_model_path $TEST_NGINX_XLMR_RR_MODEL;
}
--- request eval
"POST /v1/rerank\n" . '{"truncate": true, "query": "a cat", "documents": ["a cat", "' . ("the sun is hot. " x 40) . '"], "return_documents": false}'
--- error_code: 200
--- response_body_like chomp
"results":\[\{"index":[01],"relevance_score":[0-9.e-]+\},\{"index":[01],"relevance_score":[0-9.e-]+\}\],"usage":\{"prompt_tokens":137,"total_tokens":137\}

=== TEST 18: a jina-bert-v2 encoder (ALiBi positions, a GELU-gated FFN): the engine's vector
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_JINA_ENGINE;
    llm_model_path $TEST_NGINX_JINA_MODEL;
    llm_model_name jina;
}
--- request
POST /v1/embeddings
{"input": "A cat sat on the mat, then it slept."}
--- error_code: 200
--- response_body_like eval
qr/^\{"object":"list","data":\[\{"object":"embedding","index":0,"embedding":\Q$ENV{TEST_NGINX_REF_EMBED_JINA}\E\}\],"model":"jina","usage":\{"prompt_tokens":20,"total_tokens":20\}\}$/
