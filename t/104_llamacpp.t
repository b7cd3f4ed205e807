# llama.cpp server's own completion API (POST /completion and /completions, not the OpenAI one; POST /infill;
# GET /props) over the completions path: its request fields, its answer (content, tokens, stop_type, generation_settings, timings,
# completion_probabilities) and, streamed, one "data: {...}" event a token then the last with "stop": true (no
# [DONE]); its /tokenize shape ({"content"}, with_pieces) and /detokenize's "content"; an explicit
# `llm_api llamacpp_completion` location. Greedy text must be stories260K's known continuation.
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__
=== TEST 1: /completion: stories260K's continuation, stop_type limit, the settings and timings
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
POST /completion
{"prompt": "Once upon a time", "n_predict": 10, "temperature": 0}
--- error_code: 200
--- response_headers
Content-Type: application/json
--- response_body_like eval
qr/^\{"index":0,"content":", there was a little girl named Lily","tokens":\[\],"stop":true,"id_slot":-1,"model":"stories","tokens_predicted":10,"tokens_evaluated":5,"generation_settings":\{"stop":\[\],"n_ctx":\d+,"n_predict":10,"model":"stories","seed":4294967295,"temperature":0,.*"prompt":"Once upon a time","has_new_line":false,"truncated":false,"stop_type":"limit","stopping_word":"","tokens_cached":\d+,"timings":\{"prompt_n":\d+,"prompt_ms":[\d.e-]+,"prompt_per_token_ms":[\d.e-]+,"prompt_per_second":[\d.e+-]+,"predicted_n":10,"predicted_ms":[\d.e-]+,"predicted_per_token_ms":[\d.e-]+,"predicted_per_second":[\d.e+-]+\}\}$/

=== TEST 2: return_tokens and n_probs: the ids and each token's probabilities
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
POST /completion
{"prompt": "Once upon a time", "n_predict": 2, "temperature": 0, "return_tokens": true, "n_probs": 2}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":", there","tokens":\[432,383\],.*"completion_probabilities":\[\{"id":432,"token":",","bytes":\[44\],"logprob":-[\d.e-]+,"top_logprobs":\[\{"id":432,"token":",","bytes":\[44\],"logprob":-[\d.e-]+\},\{"id":383,"token":" there","bytes":\[32,116,104,101,114,101\],"logprob":-[\d.e-]+\}\]\},\{"id":383,"token":" there","bytes":\[32,116,104,101,114,101\],"logprob":-[\d.e-]+,"top_logprobs":\[\{"id":383,.*\}\]\}\]\}$/

=== TEST 3: streamed: an event a token with its id, then the last with stop true; no [DONE]
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
POST /completion
{"prompt": "Once upon a time", "n_predict": 2, "temperature": 0, "stream": true}
--- error_code: 200
--- response_headers
Content-Type: text/event-stream
--- response_body_like eval
qr/\Adata: \{"index":0,"content":",","tokens":\[432\],"stop":false,"id_slot":-1,"tokens_predicted":1,"tokens_evaluated":5\}\n\ndata: \{"index":0,"content":" there","tokens":\[383\],"stop":false,"id_slot":-1,"tokens_predicted":2,"tokens_evaluated":5\}\n\ndata: \{"index":0,"content":"","tokens":\[\],"stop":true,"id_slot":-1,"model":"stories","tokens_predicted":2,"tokens_evaluated":5,"generation_settings":\{[^\n]*"stop_type":"limit",[^\n]*\}\n\n\z/

=== TEST 4: a stop word: stop_type word, stopping_word, the text before it
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
POST /completion
{"prompt": "Once upon a time", "n_predict": 30, "temperature": 0, "stop": ["Lily"]}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":", there was a little girl named ",.*"stop_type":"word","stopping_word":"Lily",/

=== TEST 5: /completions (llama.cpp's own too) with token ids as the prompt; n_predict -1 up to llm_max_tokens
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_max_tokens 3;
}
--- request
POST /completions
{"prompt": [1, 403, 407, 261, 378], "n_predict": -1, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":", there was","tokens":\[\],.*"tokens_predicted":3,"tokens_evaluated":5,.*"prompt":"<s>Once upon a time",.*"stop_type":"limit"/

=== TEST 6: /v1/completions stays OpenAI's
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
{"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/^\{"id":"cmpl-[0-9a-f]+","object":"text_completion",.*"text":", there was"/

=== TEST 7: logit_bias as llama.cpp's pairs: false bans the token
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
POST /completion
{"prompt": "Once upon a time", "n_predict": 2, "temperature": 0, "return_tokens": true, "logit_bias": [[432, false]]}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":"[^"]*","tokens":\[(?!432)\d+,\d+\]/

=== TEST 8: a GBNF grammar holds the text; nothing can follow, stop_type eos
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
POST /completion
{"prompt": "Once upon a time", "n_predict": 20, "temperature": 0, "grammar": "root ::= \"yes\" | \"no\""}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":"(yes|no)",.*"stop_type":"eos"/

=== TEST 9: seed and typical_p: the seed in the settings
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
POST /completion
{"prompt": "Once upon a time", "n_predict": 4, "temperature": 0.8, "typical_p": 0.9, "seed": 3}
--- error_code: 200
--- response_body_like eval
qr/"generation_settings":\{.*"seed":3,"temperature":0.8[\d]*,.*"typical_p":0.9[\d]*,/

=== TEST 10: refused, named: mirostat 2
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
POST /completion
{"prompt": "Once", "mirostat": 2}
--- error_code: 400
--- response_body
{"error":{"message":"'mirostat' is not supported by this server (only 0, its neutral value)","type":"invalid_request_error","param":"mirostat","code":"unsupported_parameter"}}

=== TEST 11: refused, named: n_predict 0; a message in llama.cpp's names
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
POST /completion
{"prompt": "Once", "n_predict": 0}
--- error_code: 400
--- response_body_like eval
qr/"message":"'n_predict' must be -1 \(as many as the server allows\) or a whole number of tokens, at least 1","type":"invalid_request_error","param":"n_predict"/

=== TEST 12: /tokenize in llama.cpp's shape: content, no BOS, with_pieces (bytes where a piece is not UTF-8)
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
POST /tokenize
{"content": "Once upon \u00e1", "with_pieces": true}
--- error_code: 200
--- response_body_like eval
qr/^\{"tokens":\[\{"id":403,"piece":" Once"\},\{"id":407,"piece":" upon"\},\{"id":410,"piece":" "\},\{"id":198,"piece":\[195\]\},\{"id":164,"piece":\[161\]\}\],"count":5,/

=== TEST 13: /tokenize {content, add_special: true}: with BOS
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
POST /tokenize
{"content": "Once upon", "add_special": true}
--- error_code: 200
--- response_body_like eval
qr/^\{"tokens":\[1,403,407\],"count":3,/

=== TEST 14: an explicit llm_api llamacpp_completion location
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location = /c {
    llm_api llamacpp_completion;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
}
--- request
POST /c
{"prompt": "Once upon a time", "n_predict": 3, "temperature": 0}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":", there was",/

=== TEST 15: GET /props: this server's defaults, the context, the slots, the model file
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine $TEST_NGINX_REAL_ENGINE;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_model_name stories;
    llm_default_max_tokens 40;
}
--- request
GET /props
--- error_code: 200
--- response_body_like eval
qr/^\{"default_generation_settings":\{"params":\{"n_predict":40,"seed":4294967295,"temperature":1,.*\},"n_ctx":\d+\},"modalities":\{"vision":false,"audio":false\},"total_slots":\d+,"model_path":"[^"]*stories260K[^"]*","chat_template":"[^"]*","build_info":"ngx_llm"\}$/

=== TEST 16: /infill with Qwen 2.5-Coder's repository tokens: <|repo_name|> myproject, each file after <|file_sep|>, then prefix, suffix, middle
The echo engine answers with the prompt's tokens, so the text shows what the model was given (BOS first, not
printed).
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_FIM_TOKENIZER;
    llm_max_tokens 60;
}
--- request
POST /infill
{"input_prefix": "def f(", "input_suffix": "return 1", "input_extra": [{"filename": "a.py", "text": "x = 1\n"}, {"text": "y"}], "prompt": "a", "n_predict": 60}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":"<\|repo_name\|>myproject\\n<\|file_sep\|>a.py\\nx = 1\\n<\|file_sep\|>tmp\\ny<\|file_sep\|>filename\\n<\|fim_prefix\|>def f\(<\|fim_suffix\|>return 1<\|fim_middle\|>a#*",.*"prompt":"<\|begin_of_text\|><\|repo_name\|>myproject\\n/

=== TEST 17: /infill on a model with FIM tokens but no repository ones: the files' texts first, as they are
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_max_tokens 60;
}
--- request
POST /infill
{"input_prefix": "def f(", "input_suffix": "return 1", "input_extra": [{"filename": "a.py", "text": "x = 1\n"}], "n_predict": 60}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":"x = 1\\n<\|fim_prefix\|>def f\(<\|fim_suffix\|>return 1<\|fim_middle\|>#*",/

=== TEST 18: /infill on a model without FIM tokens: a 400 that says so
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
POST /infill
{"input_prefix": "Once", "input_suffix": "end"}
--- error_code: 400
--- response_body_like eval
qr/"message":"\/infill: this model has no fill-in-the-middle tokens \(<\|fim_prefix\|> ...\)","type":"invalid_request_error","param":"input_prefix"/

=== TEST 19: /infill with a bad input_extra: 400 naming it
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_FIM_TOKENIZER;
    llm_max_tokens 60;
}
--- request
POST /infill
{"input_prefix": "a", "input_extra": [{"filename": "a.py"}]}
--- error_code: 400
--- response_body_like eval
qr/"param":"input_extra"/

=== TEST 20: n_indent (llama.vim's): the first line after the code's indentation that is indented less ends the answer, before its first character
The echo engine answers with the prompt's tokens: the blank line is kept, "c" (indented 0) ends it.
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_max_tokens 60;
}
--- request
POST /completion
{"prompt": "if x:\n    a = 1\n\n    b = 2\nc = 3\n", "n_predict": 60, "n_indent": 4}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":"if x:\\n    a = 1\\n\\n    b = 2\\n",.*"stop_type":"limit"/

=== TEST 21: n_indent streamed: the held newline goes out, the line indented less does not
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_THINK_TOKENIZER;
    llm_max_tokens 60;
}
--- request
POST /completion
{"prompt": "if x:\n  a\nb", "n_predict": 60, "n_indent": 2, "stream": true}
--- error_code: 200
--- response_body_like eval
qr/"content":"\\n  a","tokens":\[\d+\],.*"content":"","tokens":\[\d+\],.*"content":"\\n","tokens":\[\d+\],"stop":false[^\n]*\n\ndata: \{"index":0,"content":"","tokens":\[\],"stop":true,.*"stop_type":"limit"/s
--- response_body_unlike
"content":"b"

=== TEST 22: response_fields (llama.vim's): the fields kept, a/b as b of a under that name, a missing one left out
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
POST /completion
{"prompt": "Once upon a time", "n_predict": 3, "temperature": 0, "response_fields": ["content", "timings/predicted_n", "generation_settings/n_predict", "tokens_cached", "nothing/here"]}
--- error_code: 200
--- response_body
{"content":", there was","timings/predicted_n":3,"generation_settings/n_predict":3,"tokens_cached":0}

=== TEST 23: t_max_predict_ms (llama.vim's): once a newline is out, the answer ends when that long has passed since its first token
The slow echo engine makes a token each 40 ms, so 1 ms has passed by the token after the newline (or the newline
itself): the answer ends there, far short of n_predict, stop_type limit.
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest_small;
    llm_model_path $TEST_NGINX_SPM_MODEL;
    llm_max_tokens 60;
}
--- request
POST /completion
{"prompt": "a\nb c d e f g h i j k l m n o p q r s t", "n_predict": 60, "t_max_predict_ms": 1}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":" ?a\\n[^"]{0,8}","tokens":\[\],"stop":true,.*"tokens_predicted":[2-8],.*"stop_type":"limit"/

=== TEST 24: /infill over the context: the last files that fit are kept, the first left out
The echo engine's context is 64 tokens and n_predict 60 leaves the prompt half of it (32): only the last file fits.
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_FIM_TOKENIZER;
    llm_max_tokens 60;
}
--- request
POST /infill
{"input_prefix": "def f(", "input_suffix": "return 1", "input_extra": [{"filename": "first.py", "text": "a = 1\n"}, {"filename": "second.py", "text": "b = 2\n"}, {"filename": "third.py", "text": "c = 3\n"}], "n_predict": 60}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":"<\|repo_name\|>myproject\\n<\|file_sep\|>third.py\\nc = 3\\n<\|file_sep\|>filename\\n<\|fim_prefix\|>def f\(<\|fim_suffix\|>return 1<\|fim_middle\|>#*",.*"tokens_evaluated":(2\d|3[0-2]),/

=== TEST 25: /infill with a prefix and suffix over the context: the prefix keeps its end, the suffix its start, no file fits
--- main_config
load_module $TEST_NGINX_MODULE;
--- config
location / {
    llm_api;
    llm_engine ngxtest;
    llm_model_path $TEST_NGINX_FIM_TOKENIZER;
    llm_max_tokens 60;
}
--- request
POST /infill
{"input_prefix": "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty", "input_suffix": "alpha beta gamma delta epsilon zeta eta theta", "input_extra": [{"filename": "first.py", "text": "a = 1\n"}], "n_predict": 60}
--- error_code: 200
--- response_body_like eval
qr/^\{"index":0,"content":"<\|repo_name\|>myproject\\n<\|file_sep\|>filename\\n<\|fim_prefix\|>[a-z ]* nineteen twenty<\|fim_suffix\|>alpha beta[a-z ]*<\|fim_middle\|>#*",.*"tokens_evaluated":32,/
