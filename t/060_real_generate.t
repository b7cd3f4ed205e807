# Generation against the REAL engine: t/run.sh starts `llm-engine serve` on
# stories260K as $TEST_NGINX_REAL_ENGINE and exports the greedy reference texts
# of `llm-engine generate` ($TEST_NGINX_REF_COMPLETION: "Once upon a time",
# 40 tokens; $TEST_NGINX_REF_CHAT: the llama2-rendered chat prompt, 20 tokens).
# Seeded samples and logprobs are stories260K's own values (deterministic).
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: greedy completion equals the llm-engine generate text
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/^\{"id":"cmpl-[0-9a-f]{16}","object":"text_completion","created":\d+,"model":"stories","choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":40,"total_tokens":45(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}\}$/

=== TEST 2: greedy chat completion equals generate on the llama2-rendered prompt
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 20, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/^\{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion","created":\d+,"model":"stories","choices":\[\{"index":0,"message":\{"role":"assistant","content":"\Q$ENV{TEST_NGINX_REF_CHAT}\E"\},"logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":20,"completion_tokens":20,"total_tokens":40(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}\}$/

=== TEST 3: the known-good stories260K greedy continuation (models/README.md)
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 10, "temperature": 0}
--- error_code: 200
--- response_body_like chomp
"text":", there was a little girl named Lily","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":10,"total_tokens":15(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}

=== TEST 4: a prompt of token ids (with BOS) gives the same greedy text
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
POST /v1/completions
{"prompt": [1, 403, 407, 261, 378], "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":40,"total_tokens":45(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}/

=== TEST 5: greedy is the default when temperature is 0 whatever the seed
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "seed": 1234}
--- error_code: 200
--- response_body_like eval
qr/"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E","logprobs":null,"finish_reason":"length"/

=== TEST 6: max_tokens 1 ends with finish_reason length after one token
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 1, "temperature": 0}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"text":",","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}\}$

=== TEST 7: llm_default_max_tokens applies when the request has no max_tokens
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_default_max_tokens 4;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "temperature": 0}
--- error_code: 200
--- response_body_like chomp
"text":", there was a","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}

=== TEST 8: a stop string ends the text before it with finish_reason stop
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stop": "Lily"}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"text":", there was a little girl named ","logprobs":null,"finish_reason":"stop"\}\]

=== TEST 9: the earliest of several stop strings wins
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stop": ["park", "girl", "Lily"]}
--- error_code: 200
--- response_body_like chomp
"text":", there was a little ","logprobs":null,"finish_reason":"stop"\}\]

=== TEST 10: a stop string that spans several tokens
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stop": ["e girl na"]}
--- error_code: 200
--- response_body_like chomp
"text":", there was a littl","logprobs":null,"finish_reason":"stop"\}\]

=== TEST 11: a stop string that never occurs leaves the length finish
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stop": ["dragon", "###"]}
--- error_code: 200
--- response_body_like eval
qr/"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E","logprobs":null,"finish_reason":"length"/

=== TEST 12: stop strings in chat
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 20, "temperature": 0, "stop": "day"}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"\. Every "\},"logprobs":null,"finish_reason":"stop"\}

=== TEST 13: n=2 greedy gives the reference text twice
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "n": 2}
--- error_code: 200
--- response_body_like eval
qr/"choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E","logprobs":null,"finish_reason":"length"\},\{"index":1,"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":80,"total_tokens":85(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}/

=== TEST 14: n=8 sampled choices, indexed 0..7, all cut by length
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 1, "seed": 5, "n": 8}
--- error_code: 200
--- response_body_like eval
qr/"choices":\[\{"index":0,[^{}]*"finish_reason":"length"\}(?:,\{"index":[1-7],"text":"[^"]*","logprobs":null,"finish_reason":"length"\}){7}\],"usage":\{"prompt_tokens":5,"completion_tokens":64,"total_tokens":69(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}\}$/

=== TEST 15: n=3 in chat
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 4, "temperature": 0, "n": 3}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"message":\{"role":"assistant","content":"\. Every"\},"logprobs":null,"finish_reason":"length"\},\{"index":1,"message":\{"role":"assistant","content":"\. Every"\},"logprobs":null,"finish_reason":"length"\},\{"index":2,"message":\{"role":"assistant","content":"\. Every"\},"logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":20,"completion_tokens":12,"total_tokens":32(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}

=== TEST 16: a seed reproduces its sample (seed 42)
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 1, "seed": 42}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"text":", there was a atti","logprobs":null,"finish_reason":"length"\}\]

=== TEST 17: the same seed again gives the same sample
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 1, "seed": 42}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"text":", there was a atti","logprobs":null,"finish_reason":"length"\}\]

=== TEST 18: choice i of n samples with seed + i (seed 42, n 3 == seeds 42, 43, 44)
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 1, "seed": 42, "n": 3}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"text":", there was a atti","logprobs":null,"finish_reason":"length"\},\{"index":1,"text":", in a small bo","logprobs":null,"finish_reason":"length"\},\{"index":2,"text":", there was a little girl","logprobs":null,"finish_reason":"length"\}\]

=== TEST 19: seed 43 alone gives choice 1 of the seed 42 n=3 request
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 1, "seed": 43}
--- error_code: 200
--- response_body_like chomp
"choices":\[\{"index":0,"text":", in a small bo","logprobs":null,"finish_reason":"length"\}\]

=== TEST 20: completion logprobs: tokens, their logprobs, top alternatives, offsets
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0, "logprobs": 2}
--- error_code: 200
--- response_body_like chomp
"text":", there was","logprobs":\{"tokens":\[","," there"," was"\],"token_logprobs":\[-0\.03\d*,-0\.06\d*,-0\.01\d*\],"top_logprobs":\[\{",":-0\.03\d*," there":-3\.5\d*\},\{" there":-0\.06\d*," in":-2\.9\d*\},\{" was":-0\.01\d*," we":-4\.8\d*\}\],"text_offset":\[0,1,7\]\},"finish_reason":"length"\}

=== TEST 21: completion logprobs 0: the chosen tokens and their logprobs
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 2, "temperature": 0, "logprobs": 0}
--- error_code: 200
--- response_body_like chomp
"logprobs":\{"tokens":\[","," there"\],"token_logprobs":\[-0\.03\d*,-0\.06\d*\],"top_logprobs":\[[^\]]*\],"text_offset":\[0,1\]\}

=== TEST 22: chat logprobs with top_logprobs
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 2, "temperature": 0, "logprobs": true, "top_logprobs": 2}
--- error_code: 200
--- response_body_like chomp
"logprobs":\{"content":\[\{"token":"\.","logprob":-2\.03\d*,"bytes":\[46\],"top_logprobs":\[\{"token":"\.","logprob":-2\.03\d*,"bytes":\[46\]\},\{"token":" was","logprob":-2\.58\d*,"bytes":\[32,119,97,115\]\}\]\},\{"token":" ","logprob":-0\.97\d*,"bytes":\[32\],"top_logprobs":\[\{"token":" ","logprob":-0\.97\d*,"bytes":\[32\]\},\{"token":" I","logprob":-1\.39\d*,"bytes":\[32,73\]\}\]\}\]\},"finish_reason":"length

=== TEST 23: max_tokens above llm_max_tokens is refused
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 9}
--- error_code: 400
--- response_body_like chomp
"type":"invalid_request_error"

=== TEST 24: /health reports the real engine attached
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
GET /health
--- error_code: 200
--- response_body_like chomp
"status":"ok"

=== TEST 25: /metrics carries the real engine's counters after the blocks above; its KV pool is back to no block used, and it has no window pool
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
--- response_body_like chomp
llm_engine_up 1\n.*llm_requests_submitted_total [1-9]\d*\n.*llm_requests_finished_total [1-9]\d*\n.*llm_generation_tokens_total [1-9]\d*\n.*llm_kv_blocks_used 0\n.*llm_kv_blocks_free [1-9]\d*\n.*llm_kv_blocks_cached \d+\n.*llm_kv_window_blocks_used 0\n.*llm_kv_window_blocks_free 0\n.*llm_prompt_tokens_cached_total \d+\n

=== TEST 26: logit_bias -100 bans the greedy first token (",", id 432): the next best follows
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "logit_bias": {"432": -100}}
--- error_code: 200
--- response_body_like chomp
"text":" there was a little girl named","logprobs":null,"finish_reason":"length"

=== TEST 27: a seeded sample with logit biases and a presence penalty: `llm-engine generate --logit-bias`'s text
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0.8, "presence_penalty": 0.5, "seed": 7, "logit_bias": {"432": -100, "261": 1.5, "376": -2.25, "298": 0.75}}
--- error_code: 200
--- response_body_like eval
qr/"choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_BIASED}\E","logprobs":null,"finish_reason":"length"\}\]/

=== TEST 28: a logit_bias token id outside the vocabulary is refused with the vocabulary's size
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"7": 1, "512": -100}}
--- error_code: 400
--- response_body_like chomp
"message":"logit_bias: token id 512 is outside this model's vocabulary of 512 tokens","type":"invalid_request_error","param":"logit_bias","code":"invalid_value"

=== TEST 29: JSON mode (response_format json_object): `llm-engine generate --json`'s object, ended as "stop" when it closes
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 400, "temperature": 0.8, "seed": 2, "logit_bias": {"128": 8, "436": 2, "13": -100, "410": -100, "35": -100, "12": -100, "16": -100}, "response_format": {"type": "json_object"}}
--- error_code: 200
--- response_body_like eval
do { my $t = $ENV{TEST_NGINX_REF_JSON}; $t =~ s/(["\\])/\\$1/g; $t =~ s/\n/\\n/g; $t =~ s/\r/\\r/g; $t =~ s/\t/\\t/g; qr/"text":"\Q$t\E","logprobs":null,"finish_reason":"stop"\}\],"usage"/ }

=== TEST 30: JSON mode in a chat: the message is one object, the request ends as "stop" when it closes
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Tell me a story as JSON"}], "max_tokens": 400, "temperature": 0.8, "seed": 3, "logit_bias": {"128": 10, "436": 5, "13": -100}, "response_format": {"type": "json_object"}}
--- error_code: 200
--- response_body_like chomp
"content":" *\{ *\\".*\\" *\}[ \\nrt]*"\},"logprobs":null,"finish_reason":"stop"

=== TEST 31: response_format json_schema: `llm-engine generate --json-schema`'s value (tests/data/story_schema.json), ended as "stop"
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 200, "temperature": 0.8, "seed": 2, "logit_bias": {"13": -100, "410": -100, "35": -100, "12": -100, "16": -100}, "response_format": {"type": "json_schema", "json_schema": {"name": "story", "strict": true, "schema": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}, "happy": {"type": "boolean"}, "friends": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 2}}, "required": ["name", "age", "happy"]}}}}
--- error_code: 200
--- response_body_like eval
do { my $t = $ENV{TEST_NGINX_REF_SCHEMA}; $t =~ s/(["\\])/\\$1/g; qr/"text":"\Q$t\E","logprobs":null,"finish_reason":"stop"\}\],"usage"/ }

=== TEST 31a: vLLM's guided_json in a chat: the message is the schema's value (an enum), "stop"
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Is the sky blue?"}], "max_tokens": 50, "temperature": 0.8, "seed": 4, "guided_json": {"enum": ["yes", "no", "maybe"]}}
--- error_code: 200
--- response_body_like chomp
"content":"\\"(yes|no|maybe)\\""\},"logprobs":null,"finish_reason":"stop"

=== TEST 31a2: a format and bounds: a date, and an integer the digits of which stay within its range
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 100, "temperature": 0.9, "seed": 6, "logit_bias": {"13": -100, "410": -100, "35": -100, "12": -100, "16": -100}, "guided_json": {"type": "array", "prefixItems": [{"type": "string", "format": "date"}, {"type": "integer", "minimum": 18, "maximum": 120}], "items": false, "minItems": 2}}
--- error_code: 200
--- response_body_like chomp
"text":"\[ *\\"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])\\" *, *(1[89]|[2-9]\d|1[01]\d|120) *\]","logprobs":null,"finish_reason":"stop"

=== TEST 31b: a schema with a keyword the server cannot follow is a 400 that names it
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 5}}}}}}
--- error_code: 400
--- response_body_like chomp
"message":"schema: 'multipleOf' is not supported","type":"invalid_request_error","param":"response_format","code":"invalid_schema"

=== TEST 31c: vLLM's guided_choice in a chat: the message is one of the strings as it is (no JSON), "stop"
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Is the sky blue?"}], "max_tokens": 50, "temperature": 0.8, "seed": 4, "guided_choice": ["yes", "no", "maybe (a.k.a. perhaps)"]}
--- error_code: 200
--- response_body_like chomp
"content":"(yes|no|maybe \(a\.k\.a\. perhaps\))"\},"logprobs":null,"finish_reason":"stop"

=== TEST 31d: vLLM's guided_regex: the whole completion matches it; it ends ("stop") when it is whole, by the
end-of-generation token where it could go on or when nothing can follow
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 60, "temperature": 0.9, "seed": 3, "guided_regex": "^[A-Z][a-z]{1,8} (is|was) [0-9]{1,3}( years old)?$"}
--- error_code: 200
--- response_body_like chomp
"text":"[A-Z][a-z]{1,8} (is|was) [0-9]{1,3}( years old)?","logprobs":null,"finish_reason":"stop"

=== TEST 31e: vLLM's newer structured_outputs with a regex: a whole match, ended when nothing can follow
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 1.0, "seed": 9, "structured_outputs": {"regex": "\\d{3}-[a-z]{2,4}-\\d{2}"}}
--- error_code: 200
--- response_body_like chomp
"text":"\d{3}-[a-z]{2,4}-\d{2}","logprobs":null,"finish_reason":"stop"

=== TEST 31f: a regular expression the server cannot follow (a backreference) is a 400 that names it
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
POST /v1/completions
{"prompt": "hi", "guided_regex": "(a)\\1"}
--- error_code: 400
--- response_body_like chomp
"message":"pattern: [^"]*not supported[^"]*","type":"invalid_request_error","param":"guided_regex"

=== TEST 31g: two constraints at once are a 400
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
POST /v1/completions
{"prompt": "hi", "guided_regex": "a+", "guided_json": {"type": "string"}}
--- error_code: 400
--- response_body_like chomp
"message":"give one of 'response_format', 'guided_json', 'guided_regex', 'guided_choice', 'guided_grammar', 'structured_outputs', 'json_schema' and 'grammar'"

=== TEST 31h: an empty choice list is a 400
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "hi"}], "guided_choice": []}
--- error_code: 400
--- response_body_like chomp
"message":"'guided_choice' must be a list of 1 to 256 strings"

=== TEST 31i: structured_outputs with two kinds is a 400
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
POST /v1/completions
{"prompt": "hi", "structured_outputs": {"regex": "a", "choice": ["b"]}}
--- error_code: 400
--- response_body_like chomp
"message":"'structured_outputs' must be an object with one of 'json', 'regex', 'choice' or 'grammar'"

=== TEST 31j: llama.cpp's grammar (GBNF): the whole completion is a text of it, ended ("stop") when it is whole
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 60, "temperature": 0.9, "seed": 3, "grammar": "root ::= (\"Lily\" | \"Tom\") \" \" (\"was\" | \"saw\") \" \" [a-z]+ (\" \" [a-z]+){0,4} \".\""}
--- error_code: 200
--- response_body_like chomp
"text":"(Lily|Tom) (was|saw) [a-z]+( [a-z]+){0,4}\.","logprobs":null,"finish_reason":"stop"

=== TEST 31j2: vLLM's guided_grammar in a chat: the message is a text of the grammar, "stop"
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 60, "temperature": 0.9, "seed": 5, "guided_grammar": "root ::= name \" \" verb \" \" word (\" \" word){0,4} \".\"\nname ::= \"Lily\" | \"Tom\"\nverb ::= \"was\" | \"saw\"\nword ::= [a-z]+"}
--- error_code: 200
--- response_body_like chomp
"content":"(Lily|Tom) (was|saw) [a-z]+( [a-z]+){0,4}\."\},"logprobs":null,"finish_reason":"stop"

=== TEST 31j3: a grammar with a rule used but not defined is a 400 that names it
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
POST /v1/completions
{"prompt": "hi", "grammar": "root ::= x"}
--- error_code: 400
--- response_body_like chomp
"message":"grammar: rule 'x' is used but not defined","type":"invalid_request_error","param":"grammar","code":"invalid_value"

=== TEST 31j4: a grammar with characters past ASCII, streamed: the model writes them in byte tokens, each chunk
holds whole characters (no U+FFFD), and the last chunk says "stop"
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 30, "temperature": 0.9, "seed": 3, "stream": true, "grammar": "root ::= \"caf\\u00e9 \" [a-z]+ \" \" [\\u03b1-\\u03c9]{2} \".\""}
--- error_code: 200
--- response_body_like chomp
^(?![\s\S]*(?:\\ufffd|\xef\xbf\xbd))(?=[\s\S]*"text":"[^"]*\xc3\xa9)(?=[\s\S]*"text":"[^"]*[\xce\xcf][\x80-\xbf][^"]*")(data: \{[^\n]*\}\n\n)+data: \{[^\n]*"finish_reason":"stop"\}\]\}\n\ndata: \[DONE\]\n\n$

=== TEST 31k: llama.cpp server's json_schema: held to it as guided_json
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Is the sky blue?"}], "max_tokens": 50, "temperature": 0.8, "seed": 4, "json_schema": {"enum": ["yes", "no", "maybe"]}}
--- error_code: 200
--- response_body_like chomp
"content":"\\"(yes|no|maybe)\\""\},"logprobs":null,"finish_reason":"stop"

=== TEST 32: a response_format that is not an object with a type is refused
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
POST /v1/completions
{"prompt": "hi", "response_format": "json"}
--- error_code: 400
--- response_body_like chomp
"param":"response_format","code":"invalid_type"

=== TEST 33: a list of two prompts, greedy: each choice is `llm-engine generate`'s text
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
POST /v1/completions
{"prompt": ["Once upon a time", "Once upon a time"], "max_tokens": 40, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/"choices":\[\{"index":0,"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E","logprobs":null,"finish_reason":"length"\},\{"index":1,"text":"\Q$ENV{TEST_NGINX_REF_COMPLETION}\E","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":10,"completion_tokens":80,"total_tokens":90(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}/

=== TEST 34: echo: the prompt's text, then the greedy completion
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 10, "temperature": 0, "echo": true}
--- error_code: 200
--- response_body_like chomp
"text":"Once upon a time, there was a little girl named Lily","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":10,"total_tokens":15(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}

=== TEST 35: echo with logprobs and max_tokens 0: the prompt tokens' logprobs (the first null); "," as when it is generated (TEST 21)
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
POST /v1/completions
{"prompt": [1, 403, 407, 261, 378, 432], "max_tokens": 0, "echo": true, "logprobs": 2}
--- error_code: 200
--- response_body_like chomp
"text":"Once upon a time,","logprobs":\{"tokens":\["<s>"," Once"," upon"," a"," time",","\],"token_logprobs":\[null,-\d+\.\d+(?:e-?\d+)?,-\d+\.\d+(?:e-?\d+)?,-\d+\.\d+(?:e-?\d+)?,-\d+\.\d+(?:e-?\d+)?,-0\.03\d*\],"top_logprobs":\[null,\{[^{}]*\},\{[^{}]*\},\{[^{}]*\},\{[^{}]*\},\{",":-0\.03\d*," there":-3\.5\d*\}\],"text_offset":\[0,0,4,9,11,16\]\},"finish_reason":"length"\}\],"usage":\{"prompt_tokens":6,"completion_tokens":0,"total_tokens":6(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}

=== TEST 36: streamed echo with logprobs: the prompt's tokens come first, one chunk each, then the completion's
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 2, "temperature": 0, "echo": true, "logprobs": 0, "stream": true}
--- error_code: 200
--- response_body_like chomp
^data: \{[^\n]*"text":"","logprobs":\{"tokens":\["<s>"\],"token_logprobs":\[null\],"top_logprobs":\[null\],"text_offset":\[0\]\}[^\n]*\n\ndata: \{[^\n]*"text":"Once","logprobs":\{"tokens":\[" Once"\][^\n]*\n\ndata: \{[^\n]*"text":" upon"[^\n]*\n\ndata: \{[^\n]*"text":" a"[^\n]*\n\ndata: \{[^\n]*"text":" time"[^\n]*\n\ndata: \{[^\n]*"text":",","logprobs":\{"tokens":\[","\],"token_logprobs":\[-0\.03\d*\][^\n]*\n\ndata: \{[^\n]*"text":" there"[^\n]*\n\ndata: \{[^\n]*"finish_reason":"length"\}\]\}\n\ndata: \[DONE\]\n\n$

=== TEST 37: max_tokens 0 without echo is refused
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 0}
--- error_code: 400
--- response_body_like chomp
"message":"'max_tokens' must be between 1 and 1000000000, got 0","type":"invalid_request_error","param":"max_tokens"

=== TEST 38: llm_priority and a request's priority (vLLM's: lower first; here it may only wait longer): served
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_priority -5;
}
--- request
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 10, "temperature": 0, "priority": -100}
--- error_code: 200
--- response_body_like chomp
"text":", there was a little girl named Lily","logprobs":null,"finish_reason":"length"

=== TEST 39: a priority out of range is refused
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
POST /v1/completions
{"prompt": "Once upon a time", "priority": 5000000}
--- error_code: 400
--- response_body_like chomp
"param":"priority","code":"invalid_value"

=== TEST 40: stop_token_ids: the greedy first token (",", 432) ends the completion at once, without its text
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stop_token_ids": [432]}
--- error_code: 200
--- response_body_like chomp
"text":"","logprobs":null,"finish_reason":"stop"\}\],"usage":\{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6(,"prompt_tokens_details":\{"cached_tokens":\d+\})?\}

=== TEST 41: min_tokens 1 with that stop id: the first token cannot be ","; the next "," ends it
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 60, "temperature": 0, "stop_token_ids": [432], "min_tokens": 1}
--- error_code: 200
--- response_body_like chomp
"text":" there was a little girl named Lily\. [^,"]+","logprobs":null,"finish_reason":"stop"

=== TEST 42: min_tokens above max_tokens is refused
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
POST /v1/completions
{"prompt": "Once upon a time", "max_tokens": 4, "min_tokens": 5}
--- error_code: 400
--- response_body_like chomp
"message":"min_tokens \(5\) is more than max_tokens \(4\)","type":"invalid_request_error","param":"min_tokens"

=== TEST 43: a prompt the engine has not seen: no prompt_tokens_details in usage
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
POST /v1/completions
{"prompt": "The small brown dog ran all the way to the big red barn to look at the cows", "max_tokens": 2, "temperature": 0}
--- error_code: 200
--- response_body_like chomp
"usage":\{"prompt_tokens":(\d+),"completion_tokens":2,"total_tokens":\d+\}\}$

=== TEST 44: the same prompt again: the prefix cache served its full blocks, usage.prompt_tokens_details.cached_tokens says how many
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
POST /v1/completions
{"prompt": "The small brown dog ran all the way to the big red barn to look at the cows", "max_tokens": 2, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}
--- error_code: 200
--- response_body_like chomp
"usage":\{"prompt_tokens":\d+,"completion_tokens":2,"total_tokens":\d+,"prompt_tokens_details":\{"cached_tokens":(16|32|48)\}\}\}\n\ndata: \[DONE\]

=== TEST 45: the engine serves with n-gram speculation (t/run.sh): /metrics counts its drafts and the confirmed ones
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
qr/\nllm_spec_draft_tokens_total [1-9]\d*\n.*\nllm_spec_accepted_tokens_total \d+\n/s
