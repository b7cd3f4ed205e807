# Anthropic's Messages API (POST /v1/messages) over the chat path: system, content blocks (text, tool_use,
# tool_result, thinking), stop_sequences, tools with input_schema and tool_choice auto / any / tool / none; the
# answer as content blocks (thinking, text, tool_use) and, streamed, Anthropic's events (message_start,
# content_block_start / _delta / _stop, message_delta, message_stop); errors as {"type": "error", "error": ...}.
# Greedy text must be `llm-engine generate`'s on the chat prompt ($TEST_NGINX_REF_CHAT, t/run.sh); tools and
# reasoning run on the real tiny Llama 3 engine as in t/085 and t/087.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a greedy message is `llm-engine generate`'s text on the chat prompt, one text block; cut by max_tokens
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
POST /v1/messages
{"model": "stories", "max_tokens": 20, "messages": [{"role": "user", "content": "Once upon a time"}], "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/^\{"id":"msg_[0-9a-f]{16}","type":"message","role":"assistant","model":"stories","content":\[\{"type":"text","text":"\Q$ENV{TEST_NGINX_REF_CHAT}\E"\}\],"stop_reason":"max_tokens","stop_sequence":null,"usage":\{"input_tokens":\d+,"cache_creation_input_tokens":0,"cache_read_input_tokens":\d+,"output_tokens":20\}\}$/

=== TEST 2: streamed, content as text blocks: message_start, one text block of text_deltas, message_delta, message_stop
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
POST /v1/messages
{"max_tokens": 20, "messages": [{"role": "user", "content": [{"type": "text", "text": "Once upon "}, {"type": "text", "text": "a time"}]}], "temperature": 0, "stream": true}
--- error_code: 200
--- response_body_like eval
qr/\Aevent: message_start\ndata: \{"type":"message_start","message":\{"id":"msg_[0-9a-f]{16}","type":"message","role":"assistant","model":"stories","content":\[\],"stop_reason":null,"stop_sequence":null,"usage":\{"input_tokens":20,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0\}\}\}\n\nevent: content_block_start\ndata: \{"type":"content_block_start","index":0,"content_block":\{"type":"text","text":""\}\}\n\n(event: content_block_delta\ndata: \{"type":"content_block_delta","index":0,"delta":\{"type":"text_delta","text":"[^\n]*"\}\}\n\n){20}event: content_block_stop\ndata: \{"type":"content_block_stop","index":0\}\n\nevent: message_delta\ndata: \{"type":"message_delta","delta":\{"stop_reason":"max_tokens","stop_sequence":null\},"usage":\{"output_tokens":20\}\}\n\nevent: message_stop\ndata: \{"type":"message_stop"\}\n\n\z/

=== TEST 3: a stop sequence ends the text before it: stop_reason stop_sequence, and which one (the greedy text is ". Every day, ...")
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
POST /v1/messages
{"max_tokens": 20, "messages": [{"role": "user", "content": "Once upon a time"}], "temperature": 0, "stop_sequences": ["zzz", "day"]}
--- error_code: 200
--- response_body_like chomp
"content":\[\{"type":"text","text":"\. Every "\}\],"stop_reason":"stop_sequence","stop_sequence":"day",

=== TEST 4: tool_choice any: the answer is a tool_use block with its input as an object, stop_reason tool_use
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
POST /v1/messages
{"max_tokens": 300, "messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "temperature": 0.8, "seed": 3, "tools": [{"name": "get_weather", "description": "The weather in a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}, {"name": "now", "input_schema": {"type": "object", "properties": {}, "additionalProperties": false}}], "tool_choice": {"type": "any"}}
--- error_code: 200
--- response_body_like eval
qr/"content":\[\{"type":"tool_use","id":"toolu_[0-9a-f]{24}","name":"(get_weather","input":\{"city":"(?:[^"\\]|\\.)*"\}|now","input":\{\})\}\],"stop_reason":"tool_use","stop_sequence":null,/

=== TEST 5: a named tool, streamed: a tool_use block, its input in one input_json_delta, stop_reason tool_use
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
POST /v1/messages
{"max_tokens": 300, "messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "temperature": 0.8, "seed": 5, "stream": true, "tools": [{"name": "get_weather", "description": "The weather in a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}, {"name": "now", "input_schema": {"type": "object", "properties": {}, "additionalProperties": false}}], "tool_choice": {"type": "tool", "name": "get_weather"}}
--- error_code: 200
--- response_body_like eval
qr/\Aevent: message_start\n[^\n]*\n\nevent: content_block_start\ndata: \{"type":"content_block_start","index":0,"content_block":\{"type":"tool_use","id":"toolu_[0-9a-f]{24}","name":"get_weather","input":\{\}\}\}\n\nevent: content_block_delta\ndata: \{"type":"content_block_delta","index":0,"delta":\{"type":"input_json_delta","partial_json":"\{\\"city\\":\\"[^\n]*\\"\}"\}\}\n\nevent: content_block_stop\ndata: \{"type":"content_block_stop","index":0\}\n\nevent: message_delta\ndata: \{"type":"message_delta","delta":\{"stop_reason":"tool_use","stop_sequence":null\},[^\n]*\n\nevent: message_stop\n[^\n]*\n\n\z/

=== TEST 6: a conversation with tool_use and tool_result blocks is the prompt of the same chat conversation (t/089 TEST 4a: 304 tokens)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /v1/messages
{"system": "Be brief.", "max_tokens": 1, "messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "The user wants weather.", "signature": ""}, {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Oslo"}}, {"type": "tool_use", "id": "c2", "name": "now", "input": {}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "rain"}, {"type": "tool_result", "tool_use_id": "c2", "content": [{"type": "text", "text": "noon"}]}]}], "tools": [{"name": "get_weather", "description": "The weather in a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}, {"name": "now", "input_schema": {"type": "object", "properties": {}, "additionalProperties": false}}]}
--- error_code: 200
--- response_body_like eval
qr/"usage":\{"input_tokens":(\d+),"cache_creation_input_tokens":0,"cache_read_input_tokens":(\d+),(??{ $1 + $2 == 304 ? "" : "(?!)" })"output_tokens":1\}/

=== TEST 7: a reasoning model: its <think> part is a thinking block before the text
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /v1/messages
{"max_tokens": 8, "messages": [{"role": "user", "content": "Think"}], "temperature": 0, "logit_bias": {"128011": 100, "128012": 99}, "frequency_penalty": 1}
--- error_code: 200
--- response_body_like chomp
"content":\[\{"type":"thinking","thinking":"<think>","signature":""\},\{"type":"text","text":"</think><think><think></think></think>"\}\],"stop_reason":"max_tokens"

=== TEST 8: streamed: thinking_delta in block 0, text_delta in block 1
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /v1/messages
{"max_tokens": 8, "messages": [{"role": "user", "content": "Think"}], "temperature": 0, "logit_bias": {"128011": 100, "128012": 99}, "frequency_penalty": 1, "stream": true}
--- error_code: 200
--- response_body_like eval
qr/event: content_block_start\ndata: \{"type":"content_block_start","index":0,"content_block":\{"type":"thinking","thinking":"","signature":""\}\}\n\nevent: content_block_delta\ndata: \{"type":"content_block_delta","index":0,"delta":\{"type":"thinking_delta","thinking":"<think>"\}\}\n\nevent: content_block_stop\ndata: \{"type":"content_block_stop","index":0\}\n\nevent: content_block_start\ndata: \{"type":"content_block_start","index":1,"content_block":\{"type":"text","text":""\}\}\n\nevent: content_block_delta\ndata: \{"type":"content_block_delta","index":1,"delta":\{"type":"text_delta","text":"<\/think>"\}\}/

=== TEST 9: errors come in Anthropic's shape: no messages
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
POST /v1/messages
{"max_tokens": 5}
--- error_code: 400
--- response_body_like chomp
^\{"type":"error","error":\{"type":"invalid_request_error","message":"'messages' is required"\}\}$

=== TEST 10: an unknown model: not_found_error
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
POST /v1/messages
{"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}
--- error_code: 404
--- response_body_like chomp
^\{"type":"error","error":\{"type":"not_found_error","message":"The model 'claude-sonnet-4-5' does not exist \(this server serves 'stories'\)"\}\}$

=== TEST 11: an image block is a 400 that names it
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
POST /v1/messages
{"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]}
--- error_code: 400
--- response_body_like chomp
^\{"type":"error","error":\{"type":"invalid_request_error","message":"messages\[0\]\.content\[0\]: blocks of this type are not supported: image"\}\}$

=== TEST 12: a server tool (web search) is a 400
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
POST /v1/messages
{"max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "web_search_20250305", "name": "web_search"}]}
--- error_code: 400
--- response_body_like chomp
"type":"invalid_request_error","message":"tools\[0\]: only client tools .*; got web_search_20250305"

=== TEST 13: GET /v1/messages: 405 in Anthropic's shape
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
GET /v1/messages
--- error_code: 405
--- response_body_like chomp
^\{"type":"error","error":\{"type":"invalid_request_error","message":"method GET is not allowed here \(use POST\)"\}\}$

=== TEST 14: malformed JSON
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
POST /v1/messages
{"messages": [
--- error_code: 400
--- response_body_like chomp
^\{"type":"error","error":\{"type":"invalid_request_error","message":"request body is not valid JSON

=== TEST 15: a stream that times out ends with an error event (timeout_error)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest_small;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_request_timeout 200ms;
}
--- request
POST /v1/messages
{"max_tokens": 40, "messages": [{"role": "user", "content": "cat cat cat cat cat cat cat cat cat cat"}], "stream": true}
--- error_code: 200
--- response_body_like eval
qr/event: error\ndata: \{"type":"error","error":\{"type":"timeout_error","message":"the request timed out \(llm_request_timeout\)"\}\}\n\n\z/

=== TEST 16: llm_api messages serves a location of its own
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location /anthropic {
    llm_api messages;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /anthropic
{"max_tokens": 20, "messages": [{"role": "user", "content": "Once upon a time"}], "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/"type":"message".*"text":"\Q$ENV{TEST_NGINX_REF_CHAT}\E"/s

=== TEST 17: /metrics counts the endpoint
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
}
--- request
GET /metrics
--- error_code: 200
--- response_body_like eval
qr/llm_http_requests_total\{endpoint="messages"\} \d+/

=== TEST 18: count_tokens: the prompt's tokens, as the chat prompt counts them (t/060 TEST 2: 20)
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
POST /v1/messages/count_tokens
{"model": "stories", "messages": [{"role": "user", "content": "Once upon a time"}]}
--- error_code: 200
--- response_body
{"input_tokens":20}

=== TEST 19: count_tokens with tools, a system prompt and tool results: t/089 TEST 4a's 304
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /v1/messages/count_tokens
{"system": "Be brief.", "messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Oslo"}}, {"type": "tool_use", "id": "c2", "name": "now", "input": {}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "rain"}, {"type": "tool_result", "tool_use_id": "c2", "content": "noon"}]}], "tools": [{"name": "get_weather", "description": "The weather in a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}, {"name": "now", "input_schema": {"type": "object", "properties": {}, "additionalProperties": false}}]}
--- error_code: 200
--- response_body
{"input_tokens":304}

=== TEST 20: count_tokens errors in Anthropic's shape
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
POST /v1/messages/count_tokens
{"messages": [{"role": "user", "content": [{"type": "document"}]}]}
--- error_code: 400
--- response_body_like chomp
^\{"type":"error","error":\{"type":"invalid_request_error","message":"messages\[0\]\.content\[0\]: blocks of this type are not supported: document"\}\}$

=== TEST 21: llm_api_key: Anthropic's SDKs send the key as x-api-key
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first "sk second";
}
--- more_headers
x-api-key: sk second
anthropic-version: 2023-06-01
--- request
POST /v1/messages
{"max_tokens": 20, "messages": [{"role": "user", "content": "Once upon a time"}], "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/"text":"\Q$ENV{TEST_NGINX_REF_CHAT}\E"/

=== TEST 22: a wrong x-api-key: 401, authentication_error in Anthropic's shape
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_api_key sk-first;
}
--- more_headers
x-api-key: sk-wrong
--- request
POST /v1/messages
{"max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}
--- error_code: 401
--- response_body_like chomp
^\{"type":"error","error":\{"type":"authentication_error","message":"incorrect API key"\}\}$
