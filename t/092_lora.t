# A LoRA adapter served through nginx: t/run.sh starts `llm-engine serve --lora` on stories260K with a random
# adapter (tests/parity/make_lora.py) at scale 0.5 as $TEST_NGINX_LORA_ENGINE; its greedy completion is
# `llm-engine generate --lora`'s ($TEST_NGINX_REF_LORA, which the PEFT directory of the same adapter also gives),
# not the base model's; and it streams.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: greedy completion on the adapted model equals llm-engine generate --lora
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LORA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories-lora;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/^\{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories-lora","choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_LORA}\E","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":40,"total_tokens":45(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}\}$/

=== TEST 2: the adapter changes the text: not the base model's
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LORA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories-lora;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_unlike eval
qr/\Q$ENV{TEST_NGINX_REF_COMPLETION}\E/

=== TEST 3: streamed: completion chunks, then [DONE]
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LORA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories-lora;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stream": true}
--- error_code: 200
--- response_body_like eval
qr/^(data: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories-lora","choices":\[\{"index":0,"text":"[^\n]*","logprobs":null,"finish_reason":(null|"length")\}\]\}\n\n)+data: \[DONE\]\n\n$/s
