# Function calling in the ChatML format (Hermes 2 Pro, Qwen 2.5, Qwen 3: the tools in the system turn,
# calls as <tool_call>{"name": ..., "arguments": ...}</tool_call>, results as <tool_response> blocks)
# against the REAL engine: the tiny random model of t/085 ($TEST_NGINX_LLAMA3_ENGINE) served with
# "llm_chat_template chatml" (its vocabulary has no ChatML tokens: the markers are text, which is what a
# ChatML model without them gets). The weights are random: what the server makes of the answers is checked.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: tool_choice "required": the prompt opens a <tool_call>, the answer is held to {"name", "arguments"} and comes back as tool_calls
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template chatml;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 300, "temperature": 0.8, "seed": 3, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"(get_weather","arguments":"\{\\"city\\":\\"[^"]*\\"\}"|now","arguments":"\{\}")\}\}\]\},"logprobs":null,"finish_reason":"tool_calls"

=== TEST 2: a named tool_choice, streamed: one chunk with the whole call, then finish "tool_calls"
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template chatml;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 300, "temperature": 0.8, "seed": 5, "stream": true, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
--- error_code: 200
--- response_body_like eval
qr/"delta":\{"tool_calls":\[\{"index":0,"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"get_weather","arguments":"\{\\"city\\":\\"[^\n]*\\"\}"\}\}\]\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{[^\n]*"finish_reason":"tool_calls"\}\]\}\n\ndata: \[DONE\]\n\n\z/

=== TEST 3: "auto": an answer without <tool_call> is content
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template chatml;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"[^"]+"\},"logprobs":null,"finish_reason":"length"

=== TEST 3b: "auto", streamed: text streams as content as it comes (held back only where a <tool_call> may begin)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template chatml;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0, "stream": true, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like eval
qr/"delta":\{"content":"[^"]+"\}.*"delta":\{"content":"[^"]+"\}.*"finish_reason":"length".*data: \[DONE\]\n\n\z/s

=== TEST 4: a history with two parallel calls and their two results (one user turn of <tool_response>s) is served
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template chatml;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Weather in Oslo and Bergen?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}, {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Bergen\"}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "sunny"}, {"role": "tool", "tool_call_id": "c2", "content": "rain"}], "max_tokens": 5, "temperature": 0, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"finish_reason":"length"

=== TEST 5a: the tool prompt: /tokenize with the tools counts the Hermes preamble and the tools' JSON
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template chatml;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"count":(1[5-9]\d|[2-9]\d\d),"max_model_len"

=== TEST 5b: tool_choice "none" leaves the tools out (the plain ChatML prompt)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template chatml;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "none"}
--- error_code: 200
--- response_body_like chomp
"count":(1\d|2\d|3\d),"max_model_len"
