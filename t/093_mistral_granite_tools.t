# Function calling in Mistral's formats (v3: Mistral 7B v0.3, Mixtral 8x22B; v3-tekken: Nemo; v7: Small 3.1):
# the tools as [AVAILABLE_TOOLS] before the last user turn, calls as [TOOL_CALLS] and a JSON array, results
# as [TOOL_RESULTS] with the last 9 characters of the call's id; and in Granite 3.3's (an available_tools
# turn, calls as <|tool_call|> and a JSON array), against the REAL engine: the tiny random model of t/085
# ($TEST_NGINX_LLAMA3_ENGINE) served with "llm_chat_template mistral-*" / "granite" (its vocabulary has no
# Mistral or Granite control tokens: the markers are text). The weights are random: what the server makes of
# the answers is checked. (Reading [TOOL_CALLS] when it is a control token is tests/test_tokenizer_llama3's
# detok check and tests/test_llm_api's.)
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: tool_choice "required" (v3-tekken): the prompt opens [TOOL_CALLS], the answer is held to an array of calls (one: parallel_tool_calls false; the random weights would wander through 8) and comes back as tool_calls
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template mistral-v3-tekken;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 400, "temperature": 0.8, "seed": 3, "parallel_tool_calls": false, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"(get_weather","arguments":"\{\\"city\\":\\"[^"]*\\"\}"|now","arguments":"\{\}")\}\}.*\]\},"logprobs":null,"finish_reason":"tool_calls"

=== TEST 2: a named tool_choice with parallel_tool_calls false (v7), streamed: one chunk with the one call, then finish "tool_calls"
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template mistral-v7;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 300, "temperature": 0.8, "seed": 5, "stream": true, "parallel_tool_calls": false, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
--- error_code: 200
--- response_body_like eval
qr/"delta":\{"tool_calls":\[\{"index":0,"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"get_weather","arguments":"\{\\"city\\":\\"[^\n]*\\"\}"\}\}\]\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{[^\n]*"finish_reason":"tool_calls"\}\]\}\n\ndata: \[DONE\]\n\n\z/

=== TEST 3: "auto" (v3): an answer without [TOOL_CALLS] is content
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template mistral-v3;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"[^"]+"\},"logprobs":null,"finish_reason":"length"

=== TEST 4: a history with two parallel calls and their results (ids longer than 9: the last 9 are the model's) is served
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template mistral-v3-tekken;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Weather in Oslo and Bergen?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0123456789abcdef", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}, {"id": "call_fedcba9876543210", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Bergen\"}"}}]}, {"role": "tool", "tool_call_id": "call_0123456789abcdef", "content": "sunny"}, {"role": "tool", "tool_call_id": "call_fedcba9876543210", "content": "rain"}], "max_tokens": 5, "temperature": 0, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"finish_reason":"length"

=== TEST 5: a call id shorter than 9 characters is a 400 that says so
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template mistral-v3;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "now", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "12:00"}], "max_tokens": 5, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 400
--- response_body_like chomp
message 1: Mistral's format needs each tool call's id \(9 or more characters; the model sees the last 9\)

=== TEST 6a: the tool prompt: /tokenize with the tools counts [AVAILABLE_TOOLS] and the tools' JSON
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template mistral-v3-tekken;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"count":([6-9]\d|1\d\d),"max_model_len"

=== TEST 6b: tool_choice "none" leaves the tools out (the plain prompt)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template mistral-v3-tekken;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "none"}
--- error_code: 200
--- response_body_like chomp
"count":(1\d|2\d),"max_model_len"

=== TEST 7: mistral-v1 (7B v0.1 / v0.2: no tool tokens) refuses tools
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template mistral-v1;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 400
--- response_body_like chomp
Mistral \(v3, v3-tekken, v7\) chat format; this one's is mistral-v1

=== TEST 8: Granite, tool_choice "required": the prompt opens <|tool_call|>, the answer is held to an array of one call
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template granite;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 400, "temperature": 0.8, "seed": 3, "parallel_tool_calls": false, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"(get_weather|now)".*\]\},"logprobs":null,"finish_reason":"tool_calls"

=== TEST 9: Granite, "auto": an answer without <|tool_call|> is content
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template granite;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"[^"]+"\},"logprobs":null,"finish_reason":"length"

=== TEST 10: Granite, a history with a call and its result is served; the tool prompt (system turn, tools) is counted
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template granite;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "sunny"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"count":(2\d\d|3\d\d),"max_model_len"

=== TEST 11: /v1/messages on a Mistral format: tool_choice any (no parallel use) is a tool_use block
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template mistral-v7;
}
--- request
POST /v1/messages
{"max_tokens": 400, "messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "temperature": 0.8, "seed": 3, "tools": [{"name": "get_weather", "description": "The weather in a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}, {"name": "now", "input_schema": {"type": "object", "properties": {}, "additionalProperties": false}}], "tool_choice": {"type": "any", "disable_parallel_tool_use": true}}
--- error_code: 200
--- response_body_like eval
qr/"content":\[\{"type":"tool_use","id":"toolu_[0-9a-f]{24}","name":"(get_weather","input":\{"city":"(?:[^"\\]|\\.)*"\}|now","input":\{\})\}\],"stop_reason":"tool_use"/

=== TEST 12: /v1/messages on a Mistral format: a history of tool_use / tool_result blocks with Anthropic's ids is served
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template mistral-v3-tekken;
}
--- request
POST /v1/messages
{"max_tokens": 3, "temperature": 0, "messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"city": "Oslo"}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "rain"}]}], "tools": [{"name": "get_weather", "description": "The weather in a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}, {"name": "now", "input_schema": {"type": "object", "properties": {}, "additionalProperties": false}}]}
--- error_code: 200
--- response_body_like chomp
"stop_reason":"max_tokens"

=== TEST 13: /v1/responses on Granite: tool_choice required (one call) is a function_call item
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template granite;
}
--- request
POST /v1/responses
{"input": "What is the weather in Oslo?", "max_output_tokens": 400, "temperature": 0.8, "seed": 3, "parallel_tool_calls": false, "tools": [{"type": "function", "name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}, {"type": "function", "name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like eval
qr/"status":"completed".*"output":\[\{"id":"fc_[0-9a-f]{16}_1","type":"function_call","status":"completed","call_id":"call_[0-9a-f]{24}","name":"(get_weather|now)"/s

=== TEST 14: a Granite 3.3-style template (t/run.sh's granite tokenizer): its own dated system turn when the conversation has none
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_GRANITE_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}]}
--- error_code: 200
--- response_body_like chomp
^\{"tokens":\[128011,9125,128012,81434,356,28540,2696,25,5936,220,2366,19,627,15724,596,2696,25,[^\]]*,2675,527,65594,11,8040,555,29022,13,1472,527,264,11190,15592,18328,13,128001,198,128011,882,128012,13347,128001,198,128011,78191,128012\],"count":[4-6]\d,"max_model_len"

=== TEST 15: ... a system message given takes its place
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_GRANITE_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /tokenize
{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}
--- error_code: 200
--- response_body_like chomp
^\{"tokens":\[128011,9125,128012,3513,10015,13,128001,198,128011,882,128012,13347,128001,198,128011,78191,128012\],"count":17,"max_model_len"

=== TEST 16: ... with tools, its system turn with the tool instruction (<|tool_call|> one control token) and the available_tools turn
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_GRANITE_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
^\{"tokens":\[128011,9125,128012,81434,356,[^\]]*,6013,1193,449,220,128013,[^\]]*\],"count":(2\d\d),"max_model_len"

=== TEST 17: ... tool_choice required: the prompt opens the <|tool_call|> control token, the answer is the array of one call
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_GRANITE_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 400, "temperature": 0.8, "seed": 3, "parallel_tool_calls": false, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"finish_reason":"tool_calls"
