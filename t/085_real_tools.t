# Function calling (tools, tool_choice) against the REAL engine on a tiny random model with Llama 3's
# tokenizer and chat template ($TEST_NGINX_LLAMA3_ENGINE, started by t/run.sh): the tool prompt of
# Llama 3.1, answers held to the calls' schema with tool_choice "required" or a named function, and
# answers read as calls or content with "auto". The model's weights are random: what it says is noise,
# what the server makes of it is what is checked.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: tool_choice "required": the answer is a call of one of the tools, as tool_calls, finish "tool_calls"
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 300, "temperature": 0.8, "seed": 3, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"(get_weather","arguments":"\{\\"city\\":\\"[^"]*\\"\}"|now","arguments":"\{\}")\}\}\]\},"logprobs":null,"finish_reason":"tool_calls"

=== TEST 2: a named tool_choice, streamed: the role, one chunk with the whole call, then finish "tool_calls" and [DONE]
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 300, "temperature": 0.8, "seed": 5, "stream": true, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
--- error_code: 200
--- response_body_like eval
qr/\Adata: \{[^\n]*"delta":\{"role":"assistant","content":""\}[^\n]*\n\ndata: \{[^\n]*"choices":\[\{"index":0,"delta":\{"tool_calls":\[\{"index":0,"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"get_weather","arguments":"\{\\"city\\":\\"[^\n]*\\"\}"\}\}\]\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{[^\n]*"finish_reason":"tool_calls"\}\]\}\n\ndata: \[DONE\]\n\n\z/

=== TEST 3: tool_choice "auto" (the default with tools): an answer that is not a call comes as content
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
POST /v1/chat/completions
{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"[^"]+"\},"logprobs":null,"finish_reason":"length"

=== TEST 4: "auto", streamed: text that is not a call streams as content
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0, "stream": true, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like eval
qr/"delta":\{"content":"[^"]+"\}.*"finish_reason":"length".*data: \[DONE\]\n\n\z/s

=== TEST 5: a conversation with an earlier call and its result (role "tool") is served
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}], "max_tokens": 5, "temperature": 0, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"finish_reason":"length"

=== TEST 6a: the tool prompt: /tokenize with the tools counts the Llama 3.1 tool preamble and the tools' JSON
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
POST /tokenize
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"count":(1[5-9]\d|[2-9]\d\d),"max_model_len"

=== TEST 6b: tool_choice "none" leaves the tools out of the prompt (the plain Llama 3 chat prompt)
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
POST /tokenize
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "none"}
--- error_code: 200
--- response_body_like chomp
"count":(1\d|2\d),"max_model_len"

=== TEST 7: function calling with logprobs, streamed, is refused (a call is sent whole)
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "hi"}], "stream": true, "logprobs": true, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 400
--- response_body_like chomp
"param":"logprobs","code":"unsupported_parameter"
