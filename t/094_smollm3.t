# SmolLM3's chat format (its template's system turn: "## Metadata" with the date and the reasoning mode,
# "## Custom Instructions", "## Tools" in XML; /no_think answers behind empty think blocks) against the REAL
# engine: the tiny random model of t/085 ($TEST_NGINX_LLAMA3_ENGINE; SmolLM3's vocabulary is Llama 3's) served
# with "llm_chat_template smollm3" (its vocabulary has no <|im_start|>: the markers are text, so counts are larger). The weights are random: the prompts and what the server makes of the
# answers are checked.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: no system message: the metadata with "Reasoning Mode: /think" and SmolLM's own instructions for thinking (a long system turn)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template smollm3;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}]}
--- error_code: 200
--- response_body_like chomp
"count":(2[4-9]\d|3\d\d),"max_model_len"

=== TEST 2: enable_thinking false: "/no_think", SmolLM's short instructions, the answer opened by an empty think block
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template smollm3;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"enable_thinking": false}}
--- error_code: 200
--- response_body_like chomp
"count":(1[01]\d),"max_model_len"

=== TEST 3: a system message with /system_override is the whole system turn
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template smollm3;
}
--- request
POST /tokenize
{"messages": [{"role": "system", "content": "Be brief. /system_override"}, {"role": "user", "content": "Hi"}]}
--- error_code: 200
--- response_body_like chomp
"count":(3\d|4\d),"max_model_len"

=== TEST 4: tool_choice required: the tools in XML, the prompt opens a <tool_call>, the answer comes back as tool_calls
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template smollm3;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 300, "temperature": 0.8, "seed": 3, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"(get_weather|now)".*"finish_reason":"tool_calls"

=== TEST 5: "auto": an answer without <tool_call> is content (its reasoning, if any, apart)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_LLAMA3_MODEL;
    llm_model_name tiny;
    llm_chat_template smollm3;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}]}
--- error_code: 200
--- response_body_like chomp
"finish_reason":"length"
