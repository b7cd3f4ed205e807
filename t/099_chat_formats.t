# The EXAONE 3 / 4, ERNIE 4.5, Tulu (OLMo 2 Instruct) and Seed-OSS chat formats (llm_chat_template exaone3, exaone4,
# ernie, tulu, seed-oss; the renderings themselves are checked against the models' Jinja templates in
# tests/test_chat_template.c) through nginx: the prompt each makes, EXAONE 4's thinking switch (off unless
# chat_template_kwargs enable_thinking is true, which opens the reasoning in the prompt) and its function calling;
# Qwen3-Coder's XML tools (llm_chat_template qwen3-coder); tool_choice required / named with those XML formats held
# to a JSON array of calls (TEST 19, 22, 24: after Seed-OSS's reasoning); Seed-OSS's tools as Python function docs and its
# <seed:tool_call> history calls (TEST 20, 21: the very ids of its Jinja template's rendering, run by Python's Jinja2
# as transformers runs it, tokenized with control tokens parsed), its thinking budget (TEST 23, the same way);
# GLM-4.5's prompt with enable_thinking false (llm_chat_template glm4.5; TEST 25, the same way).
# The REAL tiny Llama 3 engine of t/085 serves the ids; the workers tokenize with $TEST_NGINX_THINK_TOKENIZER
# (t/087: Llama 3's vocabulary with <think> 128011, </think> 128012 and <tool_call> 128013; "\n" is 198, "\n\n"
# 271), so the formats' other markers are text here; Seed-OSS's reasoning with $TEST_NGINX_SEED_TOKENIZER (t/run.sh:
# <seed:think> 128011, </seed:think> 128012, <seed:bos> 128013, <seed:eos> 128014 as control tokens, under a template
# that writes <seed:bos>).
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: exaone4: thinking is off by default, the generation prompt ends with an empty think block
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template exaone4;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Think"}]}
--- error_code: 200
--- response_body_like chomp
"tokens":\[[0-9,]*,128011,271,128012,271\],"count":\d+,

=== TEST 2: exaone4 with enable_thinking true: the generation prompt opens <think> and a newline
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template exaone4;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Think"}], "chat_template_kwargs": {"enable_thinking": true}}
--- error_code: 200
--- response_body_like chomp
"tokens":\[[0-9,]*,128011,198\],"count":\d+,

=== TEST 3: exaone4 thinking: the answer starts inside the reasoning, its first </think> closes it (no reasoning), the rest is content
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template exaone4;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Think"}], "max_tokens": 4, "temperature": 0, "logit_bias": {"128012": 100}, "chat_template_kwargs": {"enable_thinking": true}}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"</think></think></think>","reasoning_content":null\}

=== TEST 4: exaone4 not thinking (the default): the same answer is all content
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template exaone4;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Think"}], "max_tokens": 4, "temperature": 0, "logit_bias": {"128012": 100}}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"</think></think></think></think>","reasoning_content":null\}

=== TEST 5a: Anthropic's Messages API without thinking: EXAONE 4's empty think block (4 tokens)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template exaone4;
}
--- request
POST /v1/messages/count_tokens
{"model": "tiny", "messages": [{"role": "user", "content": "Think"}]}
--- error_code: 200
--- response_body_like chomp
^\{"input_tokens":22\}$

=== TEST 5b: its thinking enabled turns EXAONE 4's thinking on: <think> and a newline (2 tokens fewer)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template exaone4;
}
--- request
POST /v1/messages/count_tokens
{"model": "tiny", "messages": [{"role": "user", "content": "Think"}], "thinking": {"type": "enabled", "budget_tokens": 1024}}
--- error_code: 200
--- response_body_like chomp
^\{"input_tokens":20\}$

=== TEST 6: exaone4 tools, tool_choice required: the tools in the system turn, the prompt opens <tool_call> after the empty think block
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template exaone4;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"tokens":\[[0-9,]*,128011,271,128012,271,128013\],"count":(1[5-9]\d|2\d\d),

=== TEST 7: exaone4 tools: the answer to a required call comes back as tool_calls
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template exaone4;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 300, "temperature": 0.8, "seed": 3, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"get_weather".*"finish_reason":"tool_calls"

=== TEST 8: exaone3: a role its vocabulary has no marker for (tool) is a 400
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template exaone3;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}, {"role": "tool", "content": "x"}]}
--- error_code: 400
--- response_body_like chomp
exaone3 chat format: message 1 has role 'tool'

=== TEST 9: tulu: BOS first, the earlier answer closed by EOS (this tokenizer's <|end_of_text|>, 128001) and a newline
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template tulu;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Again"}]}
--- error_code: 200
--- response_body_like chomp
"tokens":\[128000,[0-9,]*,65825,128001,198,[0-9,]*\],"count":28,

=== TEST 10: tulu: function calling is a 400 naming the formats that have it
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template tulu;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
--- error_code: 400
--- response_body_like chomp
EXAONE 4, Qwen3-Coder, Seed-OSS, GLM-4.5, gpt-oss or Mistral .* this one's is tulu

=== TEST 11a: seed-oss: <seed:bos>role\ntext<seed:eos> turns (markers as text here)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template seed-oss;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}]}
--- error_code: 200
--- response_body_like chomp
"count":19,

=== TEST 11b: seed-oss with enable_thinking false (its thinking budget 0): the budget system turn and a closed think block
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template seed-oss;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"enable_thinking": false}}
--- error_code: 200
--- response_body_like chomp
"count":117,

=== TEST 12a: exaone3 serves a chat answer
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template exaone3;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}
--- error_code: 200
--- response_body_like chomp
"finish_reason":"length"

=== TEST 12b: exaone3's prompt: the empty system turn, [|user|]Hi\n, [|assistant|]
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template exaone3;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}]}
--- error_code: 200
--- response_body_like chomp
"count":23,

=== TEST 13: ernie's prompt: <|begin_of_sentence|>User: Hi\nAssistant: 
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template ernie;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}]}
--- error_code: 200
--- response_body_like chomp
"count":14,

=== TEST 14: seed-oss found in the template: <seed:bos>user\nThink<seed:eos><seed:bos>assistant\n
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_SEED_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Think"}]}
--- error_code: 200
--- response_body_like chomp
^\{"tokens":\[128013,882,198,\d+,128014,128013,78191,198\],

=== TEST 15: seed-oss reasoning: what follows <seed:think> up to the first </seed:think> (control tokens) is reasoning_content
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_SEED_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Think"}], "max_tokens": 8, "temperature": 0, "logit_bias": {"128011": 100, "128012": 99}, "frequency_penalty": 1}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"</seed:think><seed:think><seed:think></seed:think></seed:think>","reasoning_content":"<seed:think>"\},"logprobs":null,"finish_reason":"length"

=== TEST 16: llm_reasoning off: the answer as the model wrote it, its control-token tags and all
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_SEED_TOKENIZER;
    llm_model_name tiny;
    llm_reasoning off;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Think"}], "max_tokens": 8, "temperature": 0, "logit_bias": {"128011": 100, "128012": 99}, "frequency_penalty": 1}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"<seed:think><seed:think></seed:think></seed:think><seed:think><seed:think></seed:think></seed:think>"\},"logprobs":null,"finish_reason":"length"

=== TEST 17: qwen3-coder: the tools in XML in the system turn (Qwen's own line, there being no system message)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template qwen3-coder;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]}
--- error_code: 200
--- response_body_like chomp
"count":(2[5-9]\d|3\d\d),

=== TEST 18: qwen3-coder: an earlier call in the history as its XML, tool results as <tool_response>s
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template qwen3-coder;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}], "max_tokens": 3, "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]}
--- error_code: 200
--- response_body_like chomp
"finish_reason":"(length|stop)"

=== TEST 19: qwen3-coder: tool_choice required: the answer held to a JSON array of calls (its XML has no grammar here; vLLM holds any model's so), back as tool_calls
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template qwen3-coder;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 400, "temperature": 0.8, "seed": 3, "parallel_tool_calls": false, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"(get_weather","arguments":"\{\\"city\\":\\"[^"]*\\"\}"|now","arguments":"\{\}")\}\}\],"reasoning_content":null\},"logprobs":null,"finish_reason":"tool_calls"

=== TEST 20: seed-oss: the tools as Python function docs in the system turn (its "You are Doubao" line, there being no system message), the call format
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_SEED_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City"}}, "required": ["city"]}}}]}
--- error_code: 200
--- response_body_like chomp
^\{"tokens":\[128013,9125,198,2675,527,55964,3524,.*,128014,128013,78191,198\],"count":141,

=== TEST 21: seed-oss: an earlier call in the history as its <seed:tool_call> XML, a tool result as a tool turn
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_SEED_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]}
--- error_code: 200
--- response_body_like chomp
^\{"tokens":\[128013,9125,198,2675,.*,128013,78191,198,27,23425,25,14506,13735,397,27,1723,29380,70464,397,.*,128013,14506,198,82,28397,128014,128013,78191,198\],"count":199,

=== TEST 22: seed-oss: a named tool_choice, streamed, thinking_budget 0: the answer held to a JSON array of one call of it, sent as one chunk, finish "tool_calls"
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_SEED_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 300, "temperature": 0.8, "seed": 5, "stream": true, "parallel_tool_calls": false, "chat_template_kwargs": {"thinking_budget": 0}, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
--- error_code: 200
--- response_body_like eval
qr/"delta":\{"tool_calls":\[\{"index":0,"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"get_weather","arguments":"\{\\"city\\":\\"[^\n]*\\"\}"\}\}\]\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{[^\n]*"finish_reason":"tool_calls"\}\]\}\n\ndata: \[DONE\]\n\n\z/

=== TEST 23: seed-oss: chat_template_kwargs.thinking_budget 600: its template's system turn naming the budget and reflections every 256 tokens
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_SEED_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"thinking_budget": 600}}
--- error_code: 200
--- response_body_like chomp
^\{"tokens":\[128013,9125,198,2675,527,459,25530,18328,.*,220,5067,13,.*,220,4146,11460,.*,128014,128013,882,198,13347,128014,128013,78191,198\],"count":89,

=== TEST 24: seed-oss, thinking: tool_choice required lets it reason first (the mask holds from </seed:think> on: logit_bias opens and closes its thinking), the call's array after it
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_SEED_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 300, "temperature": 0.8, "seed": 3, "parallel_tool_calls": false, "logit_bias": {"128011": 100, "128012": 99}, "frequency_penalty": 2, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"(get_weather","arguments":"\{\\"city\\":\\"[^"]*\\"\}"|now","arguments":"\{\}")\}\}\],"reasoning_content":"[^"]*"\},"logprobs":null,"finish_reason":"tool_calls"

=== TEST 25: glm4.5 with enable_thinking false: /nothink after each user message, an earlier answer's reasoning left out behind an empty think block, the prompt's own empty think block (no Qwen one after it): the very ids of its Jinja template's rendering tokenized with control tokens parsed
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template glm4.5;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>hm</think>Hello"}, {"role": "user", "content": "Again"}], "chat_template_kwargs": {"enable_thinking": false}}
--- error_code: 200
--- response_body_like chomp
^\{"tokens":\[33612,50963,35239,82,454,1822,91,882,91,397,13347,34200,27963,27,91,78191,91,397,128011,128012,198,9906,27,91,882,91,397,31485,34200,27963,27,91,78191,91,397,128011,128012\],"count":37,

=== TEST 26: glm4.5: the tools in its own system turn (each tool's whole JSON on a line), the call format, an earlier answer's reasoning, text and two calls as its <tool_call> XML, two tool results behind one <|observation|>: the very ids of its Jinja template's rendering (Python's Jinja2 as transformers runs it, arguments as objects) tokenized with control tokens parsed (build/llm-engine tokenize --tokenizer $TEST_NGINX_THINK_TOKENIZER --special; <tool_call> is 128013 there)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template glm4.5;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": "<think>Ask the tool.</think>Checking.", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}}, {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}, {"role": "tool", "tool_call_id": "call_2", "content": "noon"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}]}
--- error_code: 200
--- response_body_like chomp
^\{"tokens":\[33612,50963,35239,82,454,1822,91,9125,91,397,2,14173,271,2675,1253,1650,832,477,810,5865,311,7945,449,279,1217,3319,382,2675,527,3984,449,734,33728,2949,366,16297,1500,16297,29,12138,9681,512,27,16297,397,5018,1337,794,330,1723,498,330,1723,794,5324,609,794,330,456,70464,498,330,4789,794,330,791,9282,498,330,14105,794,5324,1337,794,330,1735,498,330,13495,794,5324,9103,794,5324,1337,794,330,928,14682,330,14097,794,5324,1337,794,330,11924,9388,2186,330,6413,794,4482,9103,1365,3500,534,5018,1337,794,330,1723,498,330,1723,794,5324,609,794,330,3409,498,330,14105,794,5324,1337,794,330,1735,498,330,13495,794,314,3500,11498,524,16297,1363,2520,1855,734,1650,11,2612,279,734,836,323,6105,2949,279,2768,12138,3645,512,128013,90,1723,11753,534,27,867,3173,7457,867,16569,12,16,5474,867,3173,397,27,867,3220,7457,867,19625,12,16,5474,867,3220,397,27,867,3173,7457,867,16569,12,17,5474,867,3173,397,27,867,3220,7457,867,19625,12,17,5474,867,3220,397,9522,524,14506,13735,1822,91,882,91,397,30081,304,58958,76514,91,78191,91,397,128011,27264,279,5507,13,128012,198,41229,627,128013,456,70464,198,27,867,3173,29,9103,524,867,3173,397,27,867,3220,29,29967,385,524,867,3220,397,27,867,3173,29,14097,524,867,3173,397,27,867,3220,29,17,524,867,3220,397,524,14506,13735,397,128013,3409,198,524,14506,13735,1822,91,79060,91,397,27,14506,9852,397,82,28397,198,524,14506,9852,397,27,14506,9852,397,12684,198,524,14506,9852,1822,91,78191,91,29\],"count":317,

=== TEST 27: glm4.5: tool_choice required: the answer held to a JSON array of calls (its XML has no grammar here; vLLM holds any model's so), no tag opened, back as tool_calls
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template glm4.5;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 400, "temperature": 0.8, "seed": 3, "parallel_tool_calls": false, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"(get_weather","arguments":"\{\\"city\\":\\"[^"]*\\"\}"|now","arguments":"\{\}")\}\}\],"reasoning_content":null\},"logprobs":null,"finish_reason":"tool_calls"

=== TEST 28: glm4.5, thinking (its default): tool_choice required lets it reason first (the mask holds from </think> on: logit_bias opens and closes its thinking), the call's array after it
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template glm4.5;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 300, "temperature": 0.8, "seed": 3, "parallel_tool_calls": false, "logit_bias": {"128011": 100, "128012": 99}, "frequency_penalty": 2, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "required"}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"(get_weather","arguments":"\{\\"city\\":\\"[^"]*\\"\}"|now","arguments":"\{\}")\}\}\],"reasoning_content":"[^"]*"\},"logprobs":null,"finish_reason":"tool_calls"
