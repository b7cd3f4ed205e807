# Reasoning models (Qwen 3: a chat template that writes <think>): the answer's <think>...</think> part comes
# back as message.reasoning_content (streamed: delta.reasoning_content), the rest as content; vLLM's
# chat_template_kwargs {"enable_thinking": false} puts Qwen 3's empty think block into the prompt. The
# REAL tiny Llama 3 engine of t/085 serves the ids; the workers tokenize with $TEST_NGINX_THINK_TOKENIZER
# (t/run.sh: Llama 3's vocabulary with reserved tokens 128011 / 128012 / 128013 named <think> / </think> /
# <tool_call>). Logit
# biases and a frequency penalty make the random model write only those two tokens, greedily:
# <think> <think> </think> </think> <think> <think> </think> </think>.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: reasoning_content holds what follows <think> up to the first </think>, content what follows that
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Think"}], "max_tokens": 8, "temperature": 0, "logit_bias": {"128011": 100, "128012": 99}, "frequency_penalty": 1}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"</think><think><think></think></think>","reasoning_content":"<think>"\},"logprobs":null,"finish_reason":"length"

=== TEST 2: streamed: the reasoning as delta.reasoning_content, then the content as delta.content, token by token
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Think"}], "max_tokens": 8, "temperature": 0, "logit_bias": {"128011": 100, "128012": 99}, "frequency_penalty": 1, "stream": true}
--- error_code: 200
--- response_body_like eval
qr/"delta":\{"role":"assistant","content":""\}.*\n\ndata: [^\n]*"delta":\{"reasoning_content":"<think>"\}[^\n]*\n\ndata: [^\n]*"delta":\{"content":"<\/think>"\}[^\n]*\n\ndata: [^\n]*"delta":\{"content":"<think>"\}[^\n]*\n\ndata: [^\n]*"delta":\{"content":"<think>"\}[^\n]*\n\ndata: [^\n]*"delta":\{"content":"<\/think>"\}[^\n]*\n\ndata: [^\n]*"delta":\{"content":"<\/think>"\}[^\n]*\n\ndata: [^\n]*"finish_reason":"length"[^\n]*\n\ndata: \[DONE\]\n\n\z/s

=== TEST 3: an answer that does not open with <think> is all content, reasoning_content null
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "temperature": 0, "logit_bias": {"128011": -100}}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"[^"]+","reasoning_content":null\},"logprobs":null,"finish_reason":"length"

=== TEST 4a: the chat prompt (ChatML markers as text in this vocabulary), with the template's own system message (Qwen 2.5's) first: 52 tokens
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
{"messages": [{"role": "user", "content": "Think"}]}
--- error_code: 200
--- response_body_like chomp
"tokens":\[27,91,318,5011,91,29,9125,198,2675,527,1229,17378,11,3549,555,55464,15161,13,1472,527,264,11190,18328,16134,91,318,6345,91,397,27,91,318,5011,91,29,882,198,39787,27,91,318,6345,91,397,27,91,318,5011,91,29,78191,198\],"count":52,"max_model_len"

=== TEST 4b: chat_template_kwargs enable_thinking false: Qwen 3's empty block after it, <think>, two newlines, </think>, two newlines: 4 more tokens
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
{"messages": [{"role": "user", "content": "Think"}], "chat_template_kwargs": {"enable_thinking": false}}
--- error_code: 200
--- response_body_like chomp
"tokens":\[27,91,318,5011,91,29,9125,198,2675,527,1229,17378,11,3549,555,55464,15161,13,1472,527,264,11190,18328,16134,91,318,6345,91,397,27,91,318,5011,91,29,882,198,39787,27,91,318,6345,91,397,27,91,318,5011,91,29,78191,198,128011,271,128012,271\],"count":56,"max_model_len"

=== TEST 4c: a conversation with a system message of its own gets no other
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
{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Think"}]}
--- error_code: 200
--- response_body_like chomp
"tokens":\[27,91,318,5011,91,29,9125,198,3513,10015,16134,91,318,6345,91,397,27,91,318,5011,91,29,882,198,39787,27,91,318,6345,91,397,27,91,318,5011,91,29,78191,198\],"count":\d+,

=== TEST 5: chat_template_kwargs must be an object
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": "no thinking"}
--- error_code: 400
--- response_body_like chomp
"param":"chat_template_kwargs","code":"invalid_type"

=== TEST 6: ChatML tools, auto, streamed: from a <tool_call> on the text is held; not a call, it goes out whole at the end
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Call"}], "max_tokens": 3, "temperature": 0, "logit_bias": {"128013": 100}, "stream": true, "tools": [{"type": "function", "function": {"name": "now"}}]}
--- error_code: 200
--- response_body_like eval
qr/"delta":\{"role":"assistant","content":""\}[^\n]*\n\ndata: [^\n]*"delta":\{"content":"<tool_call><tool_call><tool_call>"\}[^\n]*\n\ndata: [^\n]*"finish_reason":"length"[^\n]*\n\ndata: \[DONE\]\n\n\z/

=== TEST 7: the same, whole: the text is the content, no tool_calls
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Call"}], "max_tokens": 3, "temperature": 0, "logit_bias": {"128013": 100}, "tools": [{"type": "function", "function": {"name": "now"}}]}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"<tool_call><tool_call><tool_call>","reasoning_content":null\},"logprobs":null,"finish_reason":"length"

=== TEST 8: llm_reasoning off: the answer as the model wrote it, tags and all, in content
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_reasoning off;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Think"}], "max_tokens": 8, "temperature": 0, "logit_bias": {"128011": 100, "128012": 99}, "frequency_penalty": 1}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"<think><think></think></think><think><think></think></think>"\},"logprobs":null,"finish_reason":"length"

=== TEST 9: JSON mode on a reasoning model: it thinks first (unmasked), the object comes after </think>
Token 1 may be <think> beside what the mask allows (the bias picks it); tokens 2-3 are unmasked (<think>,
then </think>: the penalty keeps them apart); from there on JSON mode holds ('}' and '"' raised so the random
model closes its object). Without the deferral the biased tags could not be written at all.
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "JSON"}], "max_tokens": 80, "temperature": 0, "logit_bias": {"128011": 100, "128012": 99, "92": 12, "1": 6}, "frequency_penalty": 1, "response_format": {"type": "json_object"}}
--- error_code: 200
--- response_body_like eval
qr/"message":\{"role":"assistant","content":"\{\\n\}","reasoning_content":"<think>"\},"logprobs":null,"finish_reason":"stop"/

=== TEST 10: the same with enable_thinking false: the prompt closed the thinking, the mask holds from the first token
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
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "JSON"}], "max_tokens": 80, "temperature": 0, "logit_bias": {"128011": 100, "128012": 99, "92": 12, "1": 6}, "frequency_penalty": 1, "response_format": {"type": "json_object"}, "chat_template_kwargs": {"enable_thinking": false}}
--- error_code: 200
--- response_body_like eval
qr/"message":\{"role":"assistant","content":"(\\[tnr]| )*\{(\\[tnr]| )*\}","reasoning_content":null\},"logprobs":null,"finish_reason":"stop"/

=== TEST 11: deepseek-r1: the generation prompt opened the reasoning, so the answer starts inside it: its first </think> closes it (no reasoning), the other three are content
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template deepseek-r1;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Think"}], "max_tokens": 4, "temperature": 0, "logit_bias": {"128012": 100}}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"</think></think></think>","reasoning_content":null\}

=== TEST 12: deepseek-r1's prompt: the system text after BOS, <｜User｜> (text in this vocabulary), <｜Assistant｜>, then <think> and a newline; an earlier answer without its reasoning
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template deepseek-r1;
}
--- request
POST /tokenize
{"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>hm</think>Yo"}, {"role": "user", "content": "Think"}]}
--- error_code: 200
--- response_body_like chomp
"tokens":\[[0-9,]*,128011,198\],"count":\d+,

=== TEST 13: deepseek3 (V3): the generation prompt without <think>: the same answer is all content
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template deepseek3;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "Think"}], "max_tokens": 4, "temperature": 0, "logit_bias": {"128012": 100}}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":"</think></think></think></think>","reasoning_content":null\}

=== TEST 14: deepseek-r1 has no thinking switch: enable_thinking false leaves its prompt as it is (ending <think> and a newline)
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_model_name tiny;
    llm_chat_template deepseek-r1;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Think"}], "chat_template_kwargs": {"enable_thinking": false}}
--- error_code: 200
--- response_body_like chomp
"tokens":\[[0-9,]*,128011,198\],"count":\d+,

=== TEST 15: gpt-oss (harmony) JSON mode: its final channel's header first (unmasked), the object after it
$TEST_NGINX_HARMONY_TOKENIZER (t/run.sh): Llama 3's vocabulary with <|channel|> 128011, <|message|> 128012 and
harmony's other tokens, under a template of gpt-oss's format. Token 1 may be <|channel|> beside what the mask
allows; from there on nothing is masked until <|channel|> final (12085) <|message|> has been written (the biases
and a repetition penalty of 2, which halves the logit of a token in the prompt or written, write them in that
order: 60, 54, 100 / 2; then 30, 54, 50; then 30, 27, 50); then JSON mode holds. The answer is the final
channel's: content, no reasoning.
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_HARMONY_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "JSON"}], "max_tokens": 40, "temperature": 0, "logit_bias": {"128011": 60, "12085": 54, "128012": 100, "92": 12, "1": 6}, "repetition_penalty": 2, "response_format": {"type": "json_object"}}
--- error_code: 200
--- response_body_like eval
qr/"message":\{"role":"assistant","content":"(\\[tnr]| )*\{(\\[tnr]| )*\}","reasoning_content":null\},"logprobs":null,"finish_reason":"stop"/

=== TEST 16: the same with llm_reasoning off: the answer as the model wrote it, the header before the object
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_HARMONY_TOKENIZER;
    llm_model_name tiny;
    llm_reasoning off;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "JSON"}], "max_tokens": 40, "temperature": 0, "logit_bias": {"128011": 60, "12085": 54, "128012": 100, "92": 12, "1": 6}, "repetition_penalty": 2, "response_format": {"type": "json_object"}}
--- error_code: 200
--- response_body_like eval
qr/"message":\{"role":"assistant","content":"<\|channel\|>final<\|message\|>(\\[tnr]| )*\{(\\[tnr]| )*\}"\},"logprobs":null,"finish_reason":"stop"/

=== TEST 17: gpt-oss tool_choice required: the JSON array of calls after the final channel's header (as TEST 15), back as tool_calls
The tokens' logprobs show the header before the array (held from the first token, the array would open the answer).
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_HARMONY_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /v1/chat/completions
{"messages": [{"role": "user", "content": "What is the weather in Oslo?"}], "max_tokens": 400, "temperature": 0, "logit_bias": {"128011": 60, "12085": 54, "128012": 100}, "repetition_penalty": 2, "parallel_tool_calls": false, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}, {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}], "tool_choice": "required", "logprobs": true}
--- error_code: 200
--- response_body_like chomp
"message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_[0-9a-f]{24}","type":"function","function":\{"name":"(get_weather","arguments":"\{\\"city\\":\\"[^"]*\\"\}"|now","arguments":"\{\}")\}\}\],"reasoning_content":null\},"logprobs":\{"content":\[\{"token":"<\|channel\|>",[^}]*\},\{"token":"final",[^}]*\},\{"token":"<\|message\|>",[^}]*\},\{"token":"\[

=== TEST 18: a template in chat_template.jinja beside tokenizer.json (none in tokenizer_config.json), as openai/gpt-oss-20b ships it: the prompt is harmony's
$TEST_NGINX_HARMONY_JINJA_TOKENIZER (t/run.sh): the harmony tokenizer above with its template moved to that file.
Rendered as gpt-oss: <|start|> (128013) system ... <|start|> assistant; without the file, Llama 3's format would
open it with <|begin_of_text|><|start_header_id|>.
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_LLAMA3_ENGINE;
    llm_model_path $TEST_NGINX_HARMONY_JINJA_TOKENIZER;
    llm_model_name tiny;
}
--- request
POST /tokenize
{"messages": [{"role": "user", "content": "Think"}]}
--- error_code: 200
--- response_body_like chomp
"tokens":\[(128000,)?128013,9125,128012,[0-9,]*,128013,882,128012,[0-9,]*,128014,128013,78191\],"count":\d+,
