# OpenAI's Responses API (POST /v1/responses) over the chat path: the body is the chat body it means (input items ->
# messages, instructions -> a system message, flat function tools, text.format -> response_format), the answer comes
# back as output items (reasoning, message, function_call) and, streamed, as typed events (event: <type>) numbered in
# order. Greedy text must be `llm-engine generate`'s on the chat prompt ($TEST_NGINX_REF_CHAT, t/run.sh); tools and
# reasoning run on the real tiny Llama 3 engine as in t/085 and t/087; the echo engine shows the prompt a
# conversation with calls makes.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a greedy response is `llm-engine generate`'s text on the chat prompt, as one message; cut by max_output_tokens: incomplete
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
POST /v1/responses
{"input": "Once upon a time", "max_output_tokens": 20, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/^\{"id":"resp_[0-9a-f]{16}","object":"response","created_at":\d+,"status":"incomplete","background":false,"error":null,"incomplete_details":\{"reason":"max_output_tokens"\},"instructions":null,"max_output_tokens":20,"metadata":\{\},"model":"stories","output":\[\{"id":"msg_[0-9a-f]{16}_1","type":"message","status":"incomplete","role":"assistant","content":\[\{"type":"output_text","text":"\Q$ENV{TEST_NGINX_REF_CHAT}\E","annotations":\[\],"logprobs":\[\]\}\]\}\],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":\{"effort":null,"summary":null\},"store":false,"temperature":0,"text":\{"format":\{"type":"text"\}\},"tool_choice":"auto","tools":\[\],"top_logprobs":0,"top_p":1,"truncation":"disabled","usage":\{"input_tokens":20,"input_tokens_details":\{"cached_tokens":\d+\},"output_tokens":20,"output_tokens_details":\{"reasoning_tokens":0\},"total_tokens":40\},"user":null\}$/

=== TEST 2: input as message items with input_text parts is the same conversation: the same text
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
POST /v1/responses
{"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Once upon "}, {"type": "input_text", "text": "a time"}]}], "max_output_tokens": 20, "temperature": 0, "store": false}
--- error_code: 200
--- response_body_like eval
qr/"output":\[\{"id":"msg_[0-9a-f]{16}_1","type":"message","status":"incomplete","role":"assistant","content":\[\{"type":"output_text","text":"\Q$ENV{TEST_NGINX_REF_CHAT}\E","annotations":\[\],"logprobs":\[\]\}\]\}\].*"usage":\{"input_tokens":20,/

=== TEST 3: streamed: typed events in the API's order, numbered; the deltas make the text; no [DONE]
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
POST /v1/responses
{"input": "Once upon a time", "max_output_tokens": 20, "temperature": 0, "stream": true}
--- error_code: 200
--- response_body_like eval
qr/\Aevent: response.created\ndata: \{"type":"response.created","sequence_number":0,"response":\{[^\n]*"status":"in_progress"[^\n]*"output":\[\][^\n]*"usage":null[^\n]*\}\n\nevent: response.in_progress\ndata: \{"type":"response.in_progress","sequence_number":1,[^\n]*\n\nevent: response.output_item.added\ndata: \{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":\{"id":"(msg_[0-9a-f]{16}_1)","type":"message","status":"in_progress","role":"assistant","content":\[\]\}\}\n\nevent: response.content_part.added\ndata: \{"type":"response.content_part.added","sequence_number":3,"item_id":"\1","output_index":0,"content_index":0,"part":\{"type":"output_text","text":"","annotations":\[\],"logprobs":\[\]\}\}\n\n(event: response.output_text.delta\ndata: \{"type":"response.output_text.delta","sequence_number":\d+,"item_id":"\1","output_index":0,"content_index":0,"delta":"[^\n]*","logprobs":\[\]\}\n\n){20}event: response.output_text.done\ndata: \{"type":"response.output_text.done","sequence_number":24,"item_id":"\1","output_index":0,"content_index":0,"logprobs":\[\],"text":"\Q$ENV{TEST_NGINX_REF_CHAT}\E"\}\n\nevent: response.content_part.done\n[^\n]*\n\nevent: response.output_item.done\ndata: [^\n]*"status":"incomplete"[^\n]*\n\nevent: response.incomplete\ndata: \{"type":"response.incomplete","sequence_number":27,"response":\{[^\n]*"status":"incomplete"[^\n]*"output_tokens":20,[^\n]*\}\n\n\z/s

=== TEST 4a: a chat conversation with a system message, a turn with two calls and their results (ChatML): 304 tokens
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
POST /tokenize
{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}, {"id": "c2", "type": "function", "function": {"name": "now", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "rain"}, {"role": "tool", "tool_call_id": "c2", "content": "noon"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"count":304,

=== TEST 4b: the same conversation as Responses items (instructions, function_call, function_call_output; a reasoning item left out): the same prompt
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
POST /v1/responses
{"instructions": "Be brief.", "input": [{"role": "user", "content": "Weather?"}, {"type": "reasoning", "id": "rs_1", "summary": []}, {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}, {"type": "function_call", "call_id": "c2", "name": "now", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c1", "output": "rain"}, {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "noon"}]}], "tools": [{"type": "function", "name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}, {"type": "function", "name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}], "max_output_tokens": 1}
--- error_code: 200
--- response_body_like chomp
"usage":\{"input_tokens":304,

=== TEST 5: tool_choice required (flat function tools): the answer is a function_call item, status completed
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
POST /v1/responses
{"input": "What is the weather in Oslo?", "max_output_tokens": 300, "temperature": 0.8, "seed": 3, "tools": [{"type": "function", "name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}, {"type": "function", "name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like eval
qr/"status":"completed".*"output":\[\{"id":"fc_[0-9a-f]{16}_1","type":"function_call","status":"completed","call_id":"call_[0-9a-f]{24}","name":"(get_weather","arguments":"\{\\"city\\":\\".*?\\"\}"|now","arguments":"\{\}")\}\]/s

=== TEST 6: a named tool_choice, streamed: the call as an item, its arguments in one delta, then response.completed
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
POST /v1/responses
{"input": "What is the weather in Oslo?", "max_output_tokens": 300, "temperature": 0.8, "seed": 5, "stream": true, "tools": [{"type": "function", "name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}, {"type": "function", "name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}], "tool_choice": {"type": "function", "name": "get_weather"}}
--- error_code: 200
--- response_body_like eval
qr/\Aevent: response.created\n[^\n]*\n\nevent: response.in_progress\n[^\n]*\n\nevent: response.output_item.added\ndata: \{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":\{"id":"(fc_[0-9a-f]{16}_1)","type":"function_call","status":"in_progress","call_id":"(call_[0-9a-f]{24})","name":"get_weather","arguments":""\}\}\n\nevent: response.function_call_arguments.delta\ndata: \{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"\1","output_index":0,"delta":"(\{\\"city\\":\\"[^\n]*\\"\})"\}\n\nevent: response.function_call_arguments.done\ndata: \{"type":"response.function_call_arguments.done","sequence_number":4,"item_id":"\1","output_index":0,"name":"get_weather","arguments":"\3"\}\n\nevent: response.output_item.done\ndata: [^\n]*"status":"completed","call_id":"\2"[^\n]*\n\nevent: response.completed\ndata: \{"type":"response.completed","sequence_number":6,[^\n]*\n\n\z/

=== TEST 7: a reasoning model: the <think> part is a reasoning item before the message; usage counts its tokens
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
POST /v1/responses
{"input": "Think", "max_output_tokens": 8, "temperature": 0, "logit_bias": {"128011": 100, "128012": 99}, "frequency_penalty": 1}
--- error_code: 200
--- response_body_like eval
qr/"output":\[\{"id":"rs_[0-9a-f]{16}_1","type":"reasoning","summary":\[\],"content":\[\{"type":"reasoning_text","text":"<think>"\}\],"status":"completed"\},\{"id":"msg_[0-9a-f]{16}_2","type":"message","status":"incomplete","role":"assistant","content":\[\{"type":"output_text","text":"<\/think><think><think><\/think><\/think>","annotations":\[\],"logprobs":\[\]\}\]\}\].*"output_tokens":8,"output_tokens_details":\{"reasoning_tokens":3\}/s

=== TEST 8: streamed: reasoning_text deltas in the reasoning item, closed before the message opens
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
POST /v1/responses
{"input": "Think", "max_output_tokens": 8, "temperature": 0, "logit_bias": {"128011": 100, "128012": 99}, "frequency_penalty": 1, "stream": true}
--- error_code: 200
--- response_body_like eval
qr/event: response.output_item.added\ndata: [^\n]*"item":\{"id":"(rs_[0-9a-f]{16}_1)","type":"reasoning","summary":\[\],"content":\[\],"status":"in_progress"\}\}\n\nevent: response.content_part.added\ndata: [^\n]*"part":\{"type":"reasoning_text","text":""\}\}\n\nevent: response.reasoning_text.delta\ndata: \{"type":"response.reasoning_text.delta","sequence_number":4,"item_id":"\1","output_index":0,"content_index":0,"delta":"<think>"\}\n\nevent: response.reasoning_text.done\ndata: [^\n]*"text":"<think>"\}\n\nevent: response.content_part.done\n[^\n]*\n\nevent: response.output_item.done\n[^\n]*\n\nevent: response.output_item.added\ndata: [^\n]*"output_index":1,"item":\{"id":"msg_[0-9a-f]{16}_2","type":"message"/

=== TEST 9: reasoning effort "none" turns Qwen 3's thinking off: its empty think block in the prompt (56 tokens, t/087 TEST 4b)
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
POST /v1/responses
{"input": "Think", "max_output_tokens": 1, "reasoning": {"effort": "none"}}
--- error_code: 200
--- response_body_like eval
qr/"reasoning":\{"effort":"none","summary":null\}.*"usage":\{"input_tokens":56,/s

=== TEST 10: text.format json_object: the message is a JSON object
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
POST /v1/responses
{"input": "Once upon a time", "max_output_tokens": 400, "temperature": 0.8, "seed": 2, "logit_bias": {"128": 8, "436": 2, "13": -100, "410": -100, "35": -100, "12": -100, "16": -100}, "text": {"format": {"type": "json_object"}}}
--- error_code: 200
--- response_body_like eval
qr/"type":"output_text","text":"\{/

=== TEST 11: previous_response_id is a 400: this server keeps no responses
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
POST /v1/responses
{"input": "Hi", "previous_response_id": "resp_123"}
--- error_code: 400
--- response_body_like chomp
^\{"error":\{"message":"'previous_response_id' needs responses kept by the server; this one keeps none \(llm_responses_store is off\): send the whole conversation in 'input'","type":"invalid_request_error","param":"previous_response_id","code":"unsupported_parameter"\}\}$

=== TEST 12: no input
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
POST /v1/responses
{"model": "stories"}
--- error_code: 400
--- response_body_like chomp
"param":"input","code":"missing_required_parameter"

=== TEST 13: a hosted tool (web_search) is a 400 naming tools
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
POST /v1/responses
{"input": "Hi", "tools": [{"type": "web_search"}]}
--- error_code: 400
--- response_body_like chomp
"message":"tools\[0\]: only function tools .*?; got web_search","type":"invalid_request_error","param":"tools"

=== TEST 14: max_output_tokens above llm_max_tokens: a 400 naming max_output_tokens
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 64;
}
--- request
POST /v1/responses
{"input": "Hi", "max_output_tokens": 65}
--- error_code: 400
--- response_body_like chomp
"message":"max_output_tokens is 65; this server allows at most 64","type":"invalid_request_error","param":"max_output_tokens"

=== TEST 15: a conversation longer than the context: a 400 naming input
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
POST /v1/responses
{"input": "Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat. Once upon a time there was a cat."}
--- error_code: 400
--- response_body_like chomp
"param":"input","code":"context_length_exceeded"

=== TEST 16: malformed JSON
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
POST /v1/responses
{"input": 
--- error_code: 400
--- response_body_like chomp
"code":"invalid_json"

=== TEST 17: GET /v1/responses is a 405
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
GET /v1/responses
--- error_code: 405
--- response_body_like chomp
"code":"method_not_allowed"

=== TEST 18: GET /v1/responses/<id> without llm_responses_store: 404, nothing is kept
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
GET /v1/responses/resp_0123
--- error_code: 404
--- response_body_like chomp
"code":"not_found"

=== TEST 19: llm_api responses serves a location of its own
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location /ask {
    llm_api responses;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /ask
{"input": "Once upon a time", "max_output_tokens": 20, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/"object":"response".*"text":"\Q$ENV{TEST_NGINX_REF_CHAT}\E"/s

=== TEST 20: a stream that times out ends with an error event and response.failed (no [DONE])
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
POST /v1/responses
{"input": [{"role": "user", "content": "cat cat cat cat cat cat cat cat cat cat"}], "max_output_tokens": 40, "stream": true}
--- error_code: 200
--- response_body_like eval
qr/event: error\ndata: \{"type":"error","sequence_number":\d+,"code":"timeout","message":"the request timed out \(llm_request_timeout\)","param":null\}\n\nevent: response.failed\ndata: \{"type":"response.failed","sequence_number":\d+,"response":\{[^\n]*"status":"failed","background":false,"error":\{"code":"timeout","message":"the request timed out \(llm_request_timeout\)"\}[^\n]*\}\n\n\z/

=== TEST 21: /metrics counts the endpoint
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
qr/llm_http_requests_total\{endpoint="responses"\} \d+/

=== TEST 22: llm_responses_store on: an unknown previous_response_id is a 400 that says so
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
llm_responses_store 1m;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/responses
{"input": "Hi", "previous_response_id": "resp_0123456789abcdef"}
--- error_code: 400
--- response_body_like chomp
^\{"error":\{"message":"previous response with id 'resp_0123456789abcdef' not found \(never stored, deleted, or dropped from a full llm_responses_store\)","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"\}\}$

=== TEST 23: llm_responses_store on: a response says store true (store false: not kept, and says so)
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
llm_responses_store 1m;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/responses
{"input": "Once upon a time", "max_output_tokens": 4, "temperature": 0}
--- error_code: 200
--- response_body_like chomp
"previous_response_id":null,.*"store":true,

=== TEST 24: GET /v1/responses/<id> of an id never stored: 404
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
llm_responses_store 1m;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
DELETE /v1/responses/resp_nothere
--- error_code: 404
--- response_body_like chomp
^\{"error":\{"message":"response 'resp_nothere' not found","type":"not_found_error","param":null,"code":"not_found"\}\}$

=== TEST 25: POST /v1/responses/<id>: 405
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
llm_responses_store 1m;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /v1/responses/resp_x
{}
--- error_code: 405
--- response_body_like chomp
"message":"method POST is not allowed here \(use GET, HEAD, DELETE\)"

=== TEST 26: GET /v1/responses/<id>/input_items of an id never kept: 404
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
llm_responses_store 1m;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
GET /v1/responses/resp_nothere/input_items
--- error_code: 404
--- response_body_like chomp
"message":"response 'resp_nothere' not found"

=== TEST 27: input_items: a bad order or limit is a 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- http_config
llm_responses_store 1m;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
GET /v1/responses/resp_x/input_items?limit=500
--- error_code: 400
--- response_body_like chomp
"message":"limit must be 1 to 100","type":"invalid_request_error","param":"limit"
