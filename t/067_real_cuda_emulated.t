# `llm-engine serve --backend cuda` through nginx, with the CUDA backend run by the CPU emulation of CUDA
# (kernels/cuda_emu.*: no GPU in CI). $TEST_NGINX_CUDA_ENGINE is started by t/run.sh on stories260K
# (all-F32: f32 KV cache, GEMV products). Decode steps replay emulated CUDA Graphs, greedy requests take the
# on-device argmax and every other request is sampled on the device (kernels/cuda_sample.cu); the answers
# must be the CPU backend's: the greedy texts of `llm-engine generate`, the seeded samples of t/060, and a
# seeded sample through top-k, top-p, min-p and a frequency penalty ($TEST_NGINX_REF_FILTERED, from
# `generate` on the CPU), and one with logit biases ($TEST_NGINX_REF_BIASED). $TEST_NGINX_CUDA_DRAFT_ENGINE runs
# draft-model speculation (stories260K as its own draft, on a second CUDA backend): the same answers.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: greedy completion on the CUDA backend equals the CPU backend's generate text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/"choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":40,"total_tokens":45(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}\}$/

=== TEST 2: greedy chat completion on the CUDA backend equals the CPU backend's generate text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 20, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/"choices":\[\{"index":0,"message":\{"role":"assistant","content":"\Q$ENV{TEST_NGINX_REF_CHAT}\E"\},"logprobs":null,"finish_reason":"length"\}\]/

=== TEST 3: streamed greedy completion on the CUDA backend: one SSE event per token (t/065's), then [DONE]
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0, "stream": true}
--- error_code: 200
--- response_headers
Content-Type: text/event-stream
--- response_body_like chomp
^data: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":",","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" there","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" was","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" a","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":" little","logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":"","logprobs":null,"finish_reason":"length"\}\]\}\n\ndata: \[DONE\]\n\n$

=== TEST 4: seeded samples drawn on the device: seeds 42, 43, 44 give t/060's texts
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 1, "seed": 42, "n": 3}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"text":", there was a atti","logprobs":null,"finish_reason":"length"\},\{"index":1,"text":", in a small bo","logprobs":null,"finish_reason":"length"\},\{"index":2,"text":", there was a little girl","logprobs":null,"finish_reason":"length"\}\]

=== TEST 5: a seeded sample through top-k, top-p, min-p and a frequency penalty, on the device: the CPU's text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0.8, "top_k": 40, "top_p": 0.9, "min_p": 0.02, "frequency_penalty": 0.5, "seed": 7}
--- error_code: 200
--- response_body_like eval
qr/"choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_FILTERED}\E","logprobs":null,"finish_reason":"length"\}\]/

=== TEST 5b: a seeded sample with logit biases and a presence penalty, on the device: the CPU's text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0.8, "presence_penalty": 0.5, "seed": 7, "logit_bias": {"432": -100, "261": 1.5, "376": -2.25, "298": 0.75}}
--- error_code: 200
--- response_body_like eval
qr/"choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_BIASED}\E","logprobs":null,"finish_reason":"length"\}\]/

=== TEST 5c: greedy with a logit bias goes to the device sampler (not the plain argmax): the ban holds
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "logit_bias": {"432": -100}}
--- error_code: 200
--- response_body_like chomp
"text":" there was a little girl named","logprobs":null,"finish_reason":"length"

=== TEST 5d: JSON mode: its rows come back as logits for the host's mask while the device samples the rest; the CPU's object
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 400, "temperature": 0.8, "seed": 2, "logit_bias": {"128": 8, "436": 2, "13": -100, "410": -100, "35": -100, "12": -100, "16": -100}, "response_format": {"type": "json_object"}}
--- error_code: 200
--- response_body_like eval
do { my $t = $ENV{TEST_NGINX_REF_JSON}; $t =~ s/(["\\])/\\$1/g; $t =~ s/\n/\\n/g; $t =~ s/\r/\\r/g; $t =~ s/\t/\\t/g; qr/"text":"\Q$t\E","logprobs":null,"finish_reason":"stop"\}\],"usage"/ }

=== TEST 5d2: a JSON Schema: host-masked rows beside device-sampled ones, the CPU's value (tests/data/story_schema.json)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 200, "temperature": 0.8, "seed": 2, "logit_bias": {"13": -100, "410": -100, "35": -100, "12": -100, "16": -100}, "response_format": {"type": "json_schema", "json_schema": {"name": "story", "schema": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}, "happy": {"type": "boolean"}, "friends": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 2}}, "required": ["name", "age", "happy"]}}}}
--- error_code: 200
--- response_body_like eval
do { my $t = $ENV{TEST_NGINX_REF_SCHEMA}; $t =~ s/(["\\])/\\$1/g; qr/"text":"\Q$t\E","logprobs":null,"finish_reason":"stop"\}\],"usage"/ }

=== TEST 5e: echo with prompt logprobs: the prompt's logits from the device's prefill, the CPU's values
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": [1, 403, 407, 261, 378, 432], "max_tokens": 0, "echo": true, "logprobs": 2}
--- error_code: 200
--- response_body_like chomp
"text":"Once upon a time,","logprobs":\{"tokens":\["<s>"," Once"," upon"," a"," time",","\],"token_logprobs":\[null,-\d+\.\d+(?:e-?\d+)?,-\d+\.\d+(?:e-?\d+)?,-\d+\.\d+(?:e-?\d+)?,-\d+\.\d+(?:e-?\d+)?,-0\.03\d*\],"top_logprobs":\[null,\{[^{}]*\},\{[^{}]*\},\{[^{}]*\},\{[^{}]*\},\{",":-0\.03\d*," there":-3\.5\d*\}\],"text_offset":\[0,0,4,9,11,16\]\},"finish_reason":"length"\}\],"usage":\{"prompt_tokens":6,"completion_tokens":0,"total_tokens":6(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}

=== TEST 5f: min_tokens on a greedy request: its rows come back for the host's mask, then the device's argmax; the CPU's text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 60, "temperature": 0, "stop_token_ids": [432], "min_tokens": 1}
--- error_code: 200
--- response_body_like chomp
"text":" there was a little girl named Lily\. [^,"]+","logprobs":null,"finish_reason":"stop"

=== TEST 6: logprobs and top alternatives computed on the device: t/060's values
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0, "logprobs": 2}
--- error_code: 200
--- response_body_like chomp
"text":", there was","logprobs":\{"tokens":\[","," there"," was"\],"token_logprobs":\[-0\.03\d*,-0\.06\d*,-0\.01\d*\],"top_logprobs":\[\{",":-0\.03\d*," there":-3\.5\d*\},\{" there":-0\.06\d*," in":-2\.9\d*\},\{" was":-0\.01\d*," we":-4\.8\d*\}\],"text_offset":\[0,1,7\]\},"finish_reason":"length"\}

=== TEST 7: a bad parameter is still refused before it reaches the engine
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 4, "top_p": 1.5}
--- error_code: 400
--- response_body_like chomp
"param":"top_p"

=== TEST 8: draft-model speculation on the CUDA backend (stories260K drafting for itself): the CPU backend's greedy text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_DRAFT_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- timeout: 120
--- response_body_like eval
qr/"choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E","logprobs":null,"finish_reason":"length"\}\]/

=== TEST 9: draft-model speculation on the CUDA backend, a seeded sample through every filter: the CPU backend's draw
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_CUDA_DRAFT_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0.8, "top_k": 40, "top_p": 0.9, "min_p": 0.02, "frequency_penalty": 0.5, "seed": 7}
--- error_code: 200
--- timeout: 120
--- response_body_like eval
qr/"choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_FILTERED}\E","logprobs":null,"finish_reason":"length"\}\]/
