#!/bin/sh
# Runs the Test::Nginx suite (t/*.t) against build/ngx_http_llm_module.so.
#   t/run.sh [BUILD_DIR] [prove args...]      (make test-nginx)
# Starts what the tests need: two echo engines (t/echo_engine.c, the real shm
# protocol with a deterministic token source) named ngxtest and ngxtest_small,
# and two real engines (`llm-engine serve`, t/06x-08x) under names unique to
# this run, exported as $TEST_NGINX_REAL_ENGINE (stories260K),
# $TEST_NGINX_CANCEL_ENGINE, $TEST_NGINX_LLAMA3_ENGINE (a tiny random model with Llama 3's tokenizer) and
# $TEST_NGINX_LORA_ENGINE (stories260K with a LoRA adapter merged), and one on the CUDA backend under the CPU
# emulation of CUDA ($TEST_NGINX_CUDA_ENGINE, stories260K, t/067). The second one only serves the cancellation test,
# so its cancelled counter counts nothing else, and it runs a random
# stories110M-shaped model ($TEST_NGINX_CANCEL_MODEL, made once by gen-model):
# stories260K writes 8 x 500 tokens faster than a client can hang up, so the
# cancellation would race the end of the request; this one needs tens of seconds. The greedy reference texts the
# real-engine blocks compare against come from `llm-engine generate`.
# Uses the real Test::Nginx::Socket when installed, else the compatible runner
# in t/lib (needs Debian's libtest-base-perl).
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
BUILD=${1:-build}
[ $# -gt 0 ] && shift
case "$BUILD" in /*) ;; *) BUILD="$REPO/$BUILD" ;; esac
SHARED=$(cd "$REPO/../shared" && pwd)

export TEST_NGINX_MODULE="${TEST_NGINX_MODULE:-$BUILD/ngx_http_llm_module.so}"
export TEST_NGINX_SPM_MODEL="${TEST_NGINX_SPM_MODEL:-$SHARED/models/stories260K/stories260K.gguf}"
export TEST_NGINX_LLAMA3_TOKENIZER="${TEST_NGINX_LLAMA3_TOKENIZER:-$SHARED/tokenizers/llama3/tokenizer.json}"
export TEST_NGINX_SERVROOT="${TEST_NGINX_SERVROOT:-$BUILD/t/servroot}"
export TEST_NGINX_PORT="${TEST_NGINX_PORT:-19841}"
[ -f "$TEST_NGINX_MODULE" ] || { echo "t/run.sh: $TEST_NGINX_MODULE missing (ngx_module/build.sh $BUILD)" >&2; exit 1; }

mkdir -p "$BUILD/t"
ENGINE="$BUILD/t/echo_engine"
SRCS="t/echo_engine.c $(ls shm/*.c) $(ls engine/tokenizer*.c engine/detok.c) engine/gguf.c engine/gguf_quants.c engine/json_file.c engine/common.c"
# headers too: a changed segment layout (shm/llm_shm.h) must rebuild it
if [ ! -x "$ENGINE" ] || [ -n "$(find $SRCS shm/*.h engine/*.h -newer "$ENGINE" 2>/dev/null)" ]; then
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -Iengine -Ishm -o "$ENGINE" $SRCS \
        -lcjson -lpcre2-8 -lpthread -lm
fi

PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
start_engine() { # name, args...
    name=$1; shift
    "$ENGINE" "$name" "$TEST_NGINX_SPM_MODEL" "$@" > "$BUILD/t/$name.log" 2>&1 &
    PIDS="$PIDS $!"
    i=0
    until grep -q ready "$BUILD/t/$name.log" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 200 ] || { echo "t/run.sh: echo engine $name did not start:" >&2; cat "$BUILD/t/$name.log" >&2; exit 1; }
        sleep 0.05
    done
}
start_engine ngxtest --slots 16 --ctx 64
start_engine ngxtest_small --slots 2 --ctx 64 --delay-ms 40

# The real engine: build/llm-engine serve, stopped (SIGTERM) by cleanup.
LLM_ENGINE="$BUILD/llm-engine"
[ -x "$LLM_ENGINE" ] || { echo "t/run.sh: $LLM_ENGINE missing (make BUILD=$BUILD engine)" >&2; exit 1; }
gen_preset() { # model preset dtype seed: gen-model's preset written once (kept between runs)
    [ -s "$1" ] || LLM_SHARED_DIR="$SHARED" "$LLM_ENGINE" gen-model --preset "$2" --dtype "$3" --seed "$4" \
        --out "$1" > /dev/null
}
start_real() { # name model [serve args...]
    name=$1
    model=$2
    shift 2
    rm -f "$BUILD/t/$name.log"
    "$LLM_ENGINE" serve --model "$model" --shm "$name" --slots 64 --threads 1 "$@" \
        > "$BUILD/t/$name.log" 2>&1 &
    PIDS="$PIDS $!"
    i=0
    until grep -q 'ready on' "$BUILD/t/$name.log" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 600 ] || { echo "t/run.sh: llm-engine serve $name did not start:" >&2; cat "$BUILD/t/$name.log" >&2; exit 1; }
        sleep 0.05
    done
}
export TEST_NGINX_REAL_ENGINE="ngxreal$$"
export TEST_NGINX_CANCEL_ENGINE="ngxcancel$$"
export TEST_NGINX_CANCEL_MODEL="$BUILD/t/stories110m-q8_0.gguf"
gen_preset "$TEST_NGINX_CANCEL_MODEL" stories110m q8_0 7
# with n-gram speculation: every greedy answer below must still be `llm-engine generate`'s, token for token
start_real "$TEST_NGINX_REAL_ENGINE" "$TEST_NGINX_SPM_MODEL" --spec-ngram 4
start_real "$TEST_NGINX_CANCEL_ENGINE" "$TEST_NGINX_CANCEL_MODEL"
# A tiny random model with Llama 3's tokenizer and chat template (t/085: function calling, which needs the
# Llama 3 format, and whose prompt stories260K's 512-token context cannot hold).
export TEST_NGINX_LLAMA3_ENGINE="ngxllama3$$"
export TEST_NGINX_LLAMA3_MODEL="$BUILD/t/tiny-llama3-q8_0.gguf"
gen_preset "$TEST_NGINX_LLAMA3_MODEL" tiny-llama3 q8_0 3
start_real "$TEST_NGINX_LLAMA3_ENGINE" "$TEST_NGINX_LLAMA3_MODEL" --kv-blocks 256
# A tiny random BERT encoder (gen-model's tiny-bert: WordPiece vocabulary, mean pooling; t/096): embeddings only
export TEST_NGINX_BERT_ENGINE="ngxbert$$"
export TEST_NGINX_BERT_MODEL="$BUILD/t/tiny-bert-f32.gguf"
gen_preset "$TEST_NGINX_BERT_MODEL" tiny-bert f32 5
start_real "$TEST_NGINX_BERT_ENGINE" "$TEST_NGINX_BERT_MODEL"
# ... a jina-bert-v2 encoder (tiny-jina-bert: ALiBi positions, a GELU-gated FFN; t/096)
export TEST_NGINX_JINA_ENGINE="ngxjina$$"
export TEST_NGINX_JINA_MODEL="$BUILD/t/tiny-jina-bert-f32.gguf"
gen_preset "$TEST_NGINX_JINA_MODEL" tiny-jina-bert f32 5
start_real "$TEST_NGINX_JINA_ENGINE" "$TEST_NGINX_JINA_MODEL"
# ... and a BERT cross-encoder (tiny-bert-rerank: a pooler and a one-output classifier on [CLS]; t/096's rerank)
export TEST_NGINX_BERT_RR_ENGINE="ngxbertrr$$"
export TEST_NGINX_BERT_RR_MODEL="$BUILD/t/tiny-bert-rerank-f32.gguf"
gen_preset "$TEST_NGINX_BERT_RR_MODEL" tiny-bert-rerank f32 13
start_real "$TEST_NGINX_BERT_RR_ENGINE" "$TEST_NGINX_BERT_RR_MODEL"
# ... and an XLM-RoBERTa cross-encoder (tiny-xlm-r-rerank: a Unigram vocabulary, each document paired as
# <s> query </s></s> document </s>): $TEST_NGINX_XLMR_RR_RE ranks the documents by the logits `llm-engine embed
# --query` prints for the same pairs (whose scores tests/parity/bert.t checks against llama.cpp's), each
# relevance_score their sigmoid within 1e-3
export TEST_NGINX_XLMR_RR_ENGINE="ngxxlmrrr$$"
export TEST_NGINX_XLMR_RR_MODEL="$BUILD/t/tiny-xlm-r-rerank-f32.gguf"
gen_preset "$TEST_NGINX_XLMR_RR_MODEL" tiny-xlm-r-rerank f32 13
rerank_re() { # model query, the documents on stdin: /v1/rerank's results as a regex, each score within 1e-3
    "$LLM_ENGINE" embed --model "$1" --query "$2" --input-file /dev/stdin 2> /dev/null | python3 -c '
import math, sys
s = [1 / (1 + math.exp(-float(l.strip("[]\n")))) for l in sys.stdin]
near = lambda v: "0\\.(?:" + "|".join("%04d" % k for k in range(int((v - 1e-3) * 1e4), int((v + 1e-3) * 1e4) + 1)) + ")\\d*"
print("\"results\":\\[" + ",".join("\\{\"index\":%d,\"relevance_score\":%s\\}" % (i, near(s[i]))
      for i in sorted(range(len(s)), key=lambda i: -s[i])) + "\\]")'
}
TEST_NGINX_XLMR_RR_RE=$(printf 'a cat sat on the mat\nthe sun is hot\ncats and dogs \342\221\240\357\274\201\n' |
    rerank_re "$TEST_NGINX_XLMR_RR_MODEL" 'a cat') || { echo "t/run.sh: embed --query failed" >&2; exit 1; }
export TEST_NGINX_XLMR_RR_RE
start_real "$TEST_NGINX_XLMR_RR_ENGINE" "$TEST_NGINX_XLMR_RR_MODEL"
# EmbeddingGemma (gen-model's tiny-embeddinggemma: Gemma 3's layers without the causal mask, a symmetric window,
# mean pooling, Dense modules; t/097)
export TEST_NGINX_EG_ENGINE="ngxeg$$"
export TEST_NGINX_EG_MODEL="$BUILD/t/tiny-embeddinggemma-f32.gguf"
gen_preset "$TEST_NGINX_EG_MODEL" tiny-embeddinggemma f32 3
start_real "$TEST_NGINX_EG_ENGINE" "$TEST_NGINX_EG_MODEL"
# ... and ModernBERT (gen-model's tiny-modernbert: LayerNorms, GeGLU, a symmetric window on two layers of three,
# [CLS] and [SEP] added; t/098)
export TEST_NGINX_MB_ENGINE="ngxmb$$"
export TEST_NGINX_MB_MODEL="$BUILD/t/tiny-modernbert-f32.gguf"
gen_preset "$TEST_NGINX_MB_MODEL" tiny-modernbert f32 3
start_real "$TEST_NGINX_MB_ENGINE" "$TEST_NGINX_MB_MODEL"
# ... and the same model as a Hugging Face directory (its tokenizer.json's post-processor adds [CLS] and [SEP]),
# whose tokenizer the module loads in t/098
export TEST_NGINX_MB_HF="$BUILD/t/tiny-modernbert-hf"
[ -s "$TEST_NGINX_MB_HF/config.json" ] || "$LLM_ENGINE" gen-model --from "$TEST_NGINX_MB_MODEL" --dtype f32 \
    --format hf --out "$TEST_NGINX_MB_HF" > /dev/null 2>&1 || { echo "t/run.sh: writing $TEST_NGINX_MB_HF failed" >&2; exit 1; }
# ... made a reranker (tests/parity/modernbert_ref.py --make-rank: a random classifier head on the tokens' mean,
# whose scores tests/parity/modernbert_hf.t checks against transformers' definition): t/098's /v1/rerank
export TEST_NGINX_MB_RR_ENGINE="ngxmbrr$$"
export TEST_NGINX_MB_RR_MODEL="$BUILD/t/tiny-modernbert-rerank"
[ -s "$TEST_NGINX_MB_RR_MODEL/config.json" ] ||
    python3 tests/parity/modernbert_ref.py --make-rank "$TEST_NGINX_MB_HF" "$TEST_NGINX_MB_RR_MODEL" ||
    { echo "t/run.sh: writing $TEST_NGINX_MB_RR_MODEL failed" >&2; exit 1; }
start_real "$TEST_NGINX_MB_RR_ENGINE" "$TEST_NGINX_MB_RR_MODEL"
TEST_NGINX_MB_RR_RE=$(printf 'the cat sat on the mat\nthe sun is hot today\nA cat and a dog ran home.\n' |
    rerank_re "$TEST_NGINX_MB_RR_MODEL" 'a cat') || { echo "t/run.sh: embed --query failed" >&2; exit 1; }
export TEST_NGINX_MB_RR_RE
# ... and a Hugging Face BertForSequenceClassification directory (tests/parity/make_hf_bert.py, which also
# computes its scores in pure Python: $TEST_NGINX_HF_RR_RE accepts each within 2e-3, in ranked order)
export TEST_NGINX_HF_RR_ENGINE="ngxhfrr$$"
export TEST_NGINX_HF_RR_MODEL="$BUILD/t/hf-bert-rerank"
TEST_NGINX_HF_RR_RE=$(python3 tests/parity/make_hf_bert.py "$TEST_NGINX_HF_RR_MODEL" rerank |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["scores_re"])') ||
    { echo "t/run.sh: make_hf_bert.py failed" >&2; exit 1; }
export TEST_NGINX_HF_RR_RE
start_real "$TEST_NGINX_HF_RR_ENGINE" "$TEST_NGINX_HF_RR_MODEL"
# stories260K with a random LoRA adapter (tests/parity/make_lora.py) merged at start (t/092)
export TEST_NGINX_LORA_ENGINE="ngxlora$$"
TEST_NGINX_LORA="$BUILD/t/lora-adapter"
python3 tests/parity/make_lora.py "$TEST_NGINX_LORA" 64 172 5 8 4 4 8 ||
    { echo "t/run.sh: writing the LoRA adapter failed" >&2; exit 1; }
start_real "$TEST_NGINX_LORA_ENGINE" "$TEST_NGINX_SPM_MODEL" --lora "$TEST_NGINX_LORA.gguf" --lora-scale 0.5
# Tokenizers over the engine's (Llama 3's vocabulary) that the workers load as other models' text sides: reserved
# tokens renamed and a chat template of that model's kind.
# - think (t/087, t/030): <think>, </think> and <tool_call> (and, for t/030's fill in the middle, Qwen
#   2.5-Coder's <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>), not special, so printed, as Qwen's are, and a
#   ChatML template that writes <think> (what marks a reasoning model) and, as Qwen 2.5's does, a system message
#   of its own when the conversation has none.
# - harmony (t/087): gpt-oss's <|channel|>, <|message|>, <|start|>, <|end|>, <|return|>, <|constrain|> and
#   <|call|>, control tokens as gpt-oss's are, under a template that writes the first three (gpt-oss's format).
# - granite (t/093): <|start_of_role|>, <|end_of_role|> and <|tool_call|>, control tokens as Granite's are, and a
#   template cut down from Granite 3.3's that writes its own dated system turn when the conversation has none.
renamed_tokenizer() {
    mkdir -p "$2"
    python3 - "$SHARED/tokenizers/llama3" "$@" <<'PY' || { echo "t/run.sh: writing $2 failed" >&2; exit 1; }
import json, sys
src, kind, dst = sys.argv[1], sys.argv[2], sys.argv[3]
kinds = {
    "think": ({"128011": "<think>", "128012": "</think>", "128013": "<tool_call>", "128014": "<|fim_prefix|>",
               "128015": "<|fim_suffix|>", "128016": "<|fim_middle|>"}, False,
              ("{%- if messages[0].role != 'system' %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba "
               "Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
               "{%- for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
               "{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- if "
               "enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}"
               "{%- endif %}{%- endif %}")),
    "granite": ({"128011": "<|start_of_role|>", "128012": "<|end_of_role|>", "128013": "<|tool_call|>"}, True,
                ("{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}"
                 "{%- else %}{%- set system_message = \"Knowledge Cutoff Date: April 2024.\\nToday's Date: \" + "
                 "strftime_now('%B %d, %Y') + \".\\nYou are Granite, developed by IBM.\" %}{%- endif %}"
                 "{{- '<|start_of_role|>system<|end_of_role|>' + system_message + '<|end_of_text|>\\n' }}"
                 "{%- for message in loop_messages %}{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' "
                 "+ message['content'] + '<|end_of_text|>\\n' }}{%- endfor %}")),
    "harmony": ({"128011": "<|channel|>", "128012": "<|message|>", "128013": "<|start|>", "128014": "<|end|>",
                 "128015": "<|return|>", "128016": "<|constrain|>", "128017": "<|call|>"}, True,
                ("{#- gpt-oss's harmony, cut down: the module renders it #}{%- for m in messages %}"
                 "{{ '<|start|>' + m.role + '<|message|>' + m.content + '<|end|>' }}{%- endfor %}"
                 "{%- if add_generation_prompt %}{{ '<|start|>assistant' }}{%- endif %}"
                 "{# the answer: <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final #}")),
    "fim": ({"128014": "<|fim_prefix|>", "128015": "<|fim_suffix|>", "128016": "<|fim_middle|>",
             "128017": "<|repo_name|>", "128018": "<|file_sep|>"}, False,
            "{#- a code model's tokens (Qwen 2.5-Coder's repository-level FIM) #}{%- for m in messages %}{{ m.content }}{%- endfor %}"),
    "seed": ({"128011": "<seed:think>", "128012": "</seed:think>", "128013": "<seed:bos>", "128014": "<seed:eos>"},
             True,
             ("{%- for m in messages %}{{ '<seed:bos>' + m.role + '\\n' + m.content + '<seed:eos>' }}{%- endfor %}"
              "{%- if add_generation_prompt %}{{ '<seed:bos>assistant\\n' }}{%- endif %}"
              "{# the answer: <seed:think>...</seed:think> #}")),
}
names, special, template = kinds[kind]
t = json.load(open(src + "/tokenizer.json"))
for a in t["added_tokens"]:
    if str(a["id"]) in names:
        a["content"], a["special"] = names[str(a["id"])], special
json.dump(t, open(dst + "/tokenizer.json", "w"))
c = json.load(open(src + "/tokenizer_config.json"))
for i, n in names.items():
    if i in c.get("added_tokens_decoder", {}):
        c["added_tokens_decoder"][i].update({"content": n, "special": special})
c["chat_template"] = template
json.dump(c, open(dst + "/tokenizer_config.json", "w"))
PY
}
renamed_tokenizer think "$BUILD/t/think-tokenizer"
export TEST_NGINX_THINK_TOKENIZER="$BUILD/t/think-tokenizer/tokenizer.json"
renamed_tokenizer seed "$BUILD/t/seed-tokenizer"
renamed_tokenizer fim "$BUILD/t/fim-tokenizer"
export TEST_NGINX_FIM_TOKENIZER="$BUILD/t/fim-tokenizer/tokenizer.json"
export TEST_NGINX_SEED_TOKENIZER="$BUILD/t/seed-tokenizer/tokenizer.json"
renamed_tokenizer granite "$BUILD/t/granite-tokenizer"
renamed_tokenizer harmony "$BUILD/t/harmony-tokenizer"
export TEST_NGINX_HARMONY_TOKENIZER="$BUILD/t/harmony-tokenizer/tokenizer.json"
# ... and the same with its template in chat_template.jinja beside it, none in tokenizer_config.json, as
# openai/gpt-oss-20b ships it (t/087)
mkdir -p "$BUILD/t/harmony-jinja"
python3 - "$BUILD/t/harmony-tokenizer" "$BUILD/t/harmony-jinja" <<'PY' || { echo "t/run.sh: harmony-jinja" >&2; exit 1; }
import json, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
shutil.copy(src + "/tokenizer.json", dst + "/tokenizer.json")
c = json.load(open(src + "/tokenizer_config.json"))
open(dst + "/chat_template.jinja", "w").write(c.pop("chat_template"))
json.dump(c, open(dst + "/tokenizer_config.json", "w"))
PY
export TEST_NGINX_HARMONY_JINJA_TOKENIZER="$BUILD/t/harmony-jinja/tokenizer.json"
export TEST_NGINX_GRANITE_TOKENIZER="$BUILD/t/granite-tokenizer/tokenizer.json"
# The CUDA backend, run by the CPU emulation of CUDA (kernels/cuda_emu.*; no GPU here), serving stories260K
# for t/067: `serve --backend cuda` end to end (decode graphs, on-device argmax and sampling). A small KV pool:
# the emulated device's memory is host memory, and an automatic pool would take 90% of its 16 GiB.
EMU_LIB="$BUILD/emu/libllm_cuda_emu.so"
# (rebuilt when the kernels or a header they read, such as engine/model.h's structs, changed)
if [ ! -f "$EMU_LIB" ] || [ -n "$(find kernels engine shm \( -path 'kernels/*' -o -name '*.h' \) -newer "$EMU_LIB" 2>/dev/null)" ]; then
    tests/gpu/emu_build.sh "$BUILD/emu" || { echo "t/run.sh: building the CUDA emulation failed" >&2; exit 1; }
fi
export TEST_NGINX_CUDA_ENGINE="ngxcuda$$"
LLM_CUDA_LIB="$EMU_LIB" start_real "$TEST_NGINX_CUDA_ENGINE" "$TEST_NGINX_SPM_MODEL" --backend cuda --kv-blocks 128 \
    --max-batch-size 8
grep -q 'backend cuda\|cuda: CPU emulation' "$BUILD/t/$TEST_NGINX_CUDA_ENGINE.log" ||
    { echo "t/run.sh: the emulated CUDA engine is not on the cuda backend:" >&2; cat "$BUILD/t/$TEST_NGINX_CUDA_ENGINE.log" >&2; exit 1; }
# ... with draft-model speculation (stories260K drafting for itself: two CUDA backends in one engine; t/067)
export TEST_NGINX_CUDA_DRAFT_ENGINE="ngxcudadraft$$"
LLM_CUDA_LIB="$EMU_LIB" start_real "$TEST_NGINX_CUDA_DRAFT_ENGINE" "$TEST_NGINX_SPM_MODEL" --backend cuda --kv-blocks 128 \
    --max-batch-size 8 --draft-model "$TEST_NGINX_SPM_MODEL" --draft-tokens 3 --kernel-tune off
grep -q 'serve: draft model' "$BUILD/t/$TEST_NGINX_CUDA_DRAFT_ENGINE.log" ||
    { echo "t/run.sh: the emulated CUDA engine has no draft model:" >&2; cat "$BUILD/t/$TEST_NGINX_CUDA_DRAFT_ENGINE.log" >&2; exit 1; }
# ... and the BERT cross-encoder of t/096 on the emulated CUDA backend (kernels/cuda_encoder.cu)
export TEST_NGINX_BERT_CUDA_ENGINE="ngxbertcuda$$"
LLM_CUDA_LIB="$EMU_LIB" start_real "$TEST_NGINX_BERT_CUDA_ENGINE" "$TEST_NGINX_BERT_RR_MODEL" --backend cuda \
    --kv-blocks 64
grep -q 'cuda: CPU emulation' "$BUILD/t/$TEST_NGINX_BERT_CUDA_ENGINE.log" ||
    { echo "t/run.sh: the emulated CUDA BERT engine is not on the cuda backend:" >&2; exit 1; }
greedy() { "$LLM_ENGINE" generate --model "$TEST_NGINX_SPM_MODEL" --temperature 0 --threads 1 "$@" 2>/dev/null; }
# "Once upon a time", 40 tokens; the chat prompt as the llama2 template renders it, 20 tokens.
TEST_NGINX_REF_COMPLETION=$(greedy --prompt "Once upon a time" --max-tokens 40)
TEST_NGINX_REF_CHAT=$(greedy --prompt "[INST] Once upon a time [/INST]" --max-tokens 20)
# A seeded sample through every filter and a penalty (t/067 asks the emulated CUDA engine for it).
TEST_NGINX_REF_FILTERED=$("$LLM_ENGINE" generate --model "$TEST_NGINX_SPM_MODEL" --threads 1 --prompt "Once upon a time" \
    --max-tokens 24 --temperature 0.8 --top-k 40 --top-p 0.9 --min-p 0.02 --frequency-penalty 0.5 --seed 7 2>/dev/null)
# A seeded sample with logit biases (a ban, raises, a cut) and a presence penalty (t/060 on the CPU, t/067 on the device).
TEST_NGINX_REF_BIASED=$("$LLM_ENGINE" generate --model "$TEST_NGINX_SPM_MODEL" --threads 1 --prompt "Once upon a time" \
    --max-tokens 24 --temperature 0.8 --presence-penalty 0.5 --seed 7 --logit-bias 432=-100,261=1.5,376=-2.25,298=0.75 \
    2>/dev/null)
# JSON mode (`--json`) with biases toward '}' and '"' and against whitespace tokens, so that this story model
# closes its object soon (23 tokens: the emulated CUDA engine of t/067 is slow): the text exactly (the x keeps a
# last newline of the text from $(...), the %? drops generate's own).
TEST_NGINX_REF_JSON=$("$LLM_ENGINE" generate --model "$TEST_NGINX_SPM_MODEL" --threads 1 --prompt "Once upon a time" \
    --max-tokens 400 --temperature 0.8 --seed 2 --logit-bias 128=8,436=2,13=-100,410=-100,35=-100,12=-100,16=-100 \
    --json 2>/dev/null; echo x)
TEST_NGINX_REF_JSON=${TEST_NGINX_REF_JSON%x}
TEST_NGINX_REF_JSON=${TEST_NGINX_REF_JSON%?}
# A JSON Schema (tests/data/story_schema.json, which t/060 and t/067 send inline), whitespace tokens banned.
TEST_NGINX_REF_SCHEMA=$("$LLM_ENGINE" generate --model "$TEST_NGINX_SPM_MODEL" --threads 1 --prompt "Once upon a time" \
    --max-tokens 200 --temperature 0.8 --seed 2 --logit-bias 13=-100,410=-100,35=-100,12=-100,16=-100 \
    --json-schema tests/data/story_schema.json 2>/dev/null)
# The adapted model's greedy text (t/092), and the PEFT directory of the same adapter must give it too
TEST_NGINX_REF_LORA=$(greedy --prompt "Once upon a time" --max-tokens 40 --lora "$TEST_NGINX_LORA.gguf" --lora-scale 0.5)
[ "$(greedy --prompt "Once upon a time" --max-tokens 40 --lora "${TEST_NGINX_LORA}_peft" --lora-scale 0.5)" = \
    "$TEST_NGINX_REF_LORA" ] || { echo "t/run.sh: the PEFT adapter's text is not the GGUF adapter's" >&2; exit 1; }
export TEST_NGINX_REF_LORA
# The embedding of "Once upon a time" (last-token pooling, unit length) as `llm-engine embed` prints it: t/088
# wants the same floats from POST /v1/embeddings on the real engine (one thread, the same sums).
TEST_NGINX_REF_EMBED=$("$LLM_ENGINE" embed --model "$TEST_NGINX_SPM_MODEL" --threads 1 --prompt "Once upon a time" \
    2>/dev/null)
# stories260K re-saved with tokenizer.ggml.add_eos_token (Qwen3-Embedding's GGUF has it): its texts end in EOS
export TEST_NGINX_EOS_MODEL="$BUILD/t/stories260K-add-eos.gguf"
"$LLM_ENGINE" gen-model --from "$TEST_NGINX_SPM_MODEL" --dtype f32 --add-eos --out "$TEST_NGINX_EOS_MODEL" >/dev/null 2>&1
TEST_NGINX_REF_EMBED_EOS=$("$LLM_ENGINE" embed --model "$TEST_NGINX_EOS_MODEL" --threads 1 --prompt "Once upon a time" \
    2>/dev/null)
# The BERT encoder's embedding of a text (t/096), as `llm-engine embed` prints it
TEST_NGINX_REF_EMBED_BERT=$("$LLM_ENGINE" embed --model "$TEST_NGINX_BERT_MODEL" --threads 1 \
    --prompt "A cat sat on the mat, then it slept." 2>/dev/null)
# ... the jina-bert-v2 encoder's (t/096)
TEST_NGINX_REF_EMBED_JINA=$("$LLM_ENGINE" embed --model "$TEST_NGINX_JINA_MODEL" --threads 1 \
    --prompt "A cat sat on the mat, then it slept." 2>/dev/null)
# ... and EmbeddingGemma's (t/097): a text longer than its window of 8 positions each side
TEST_NGINX_REF_EMBED_EG=$("$LLM_ENGINE" embed --model "$TEST_NGINX_EG_MODEL" --threads 1 \
    --prompt "Once upon a time there was a girl named Lily who loved to play in the park with her friends." 2>/dev/null)
# ... and ModernBERT's (t/098), past its window too
TEST_NGINX_REF_EMBED_MB=$("$LLM_ENGINE" embed --model "$TEST_NGINX_MB_MODEL" --threads 1 \
    --prompt "Once upon a time there was a girl named Lily who loved to play in the park with her friends." 2>/dev/null)
export TEST_NGINX_REF_EMBED TEST_NGINX_REF_EMBED_EOS TEST_NGINX_REF_EMBED_BERT TEST_NGINX_REF_EMBED_EG \
    TEST_NGINX_REF_EMBED_JINA TEST_NGINX_REF_EMBED_MB
export TEST_NGINX_REF_COMPLETION TEST_NGINX_REF_CHAT TEST_NGINX_REF_FILTERED TEST_NGINX_REF_BIASED TEST_NGINX_REF_JSON \
    TEST_NGINX_REF_SCHEMA
[ -n "$TEST_NGINX_REF_COMPLETION" ] && [ -n "$TEST_NGINX_REF_CHAT" ] && [ -n "$TEST_NGINX_REF_LORA" ] && [ -n "$TEST_NGINX_REF_EMBED" ] && [ -n "$TEST_NGINX_REF_EMBED_EOS" ] && [ -n "$TEST_NGINX_REF_EMBED_BERT" ] && [ -n "$TEST_NGINX_REF_EMBED_EG" ] && [ -n "$TEST_NGINX_REF_EMBED_JINA" ] && [ -n "$TEST_NGINX_REF_EMBED_MB" ] && [ -n "$TEST_NGINX_REF_FILTERED" ] &&
    [ -n "$TEST_NGINX_REF_BIASED" ] && [ -n "$TEST_NGINX_REF_JSON" ] && [ -n "$TEST_NGINX_REF_SCHEMA" ] ||
    { echo "t/run.sh: llm-engine generate gave no reference text" >&2; exit 1; }

[ $# -gt 0 ] || set -- t/
if perl -MTest::Nginx::Socket -e1 2>/dev/null; then
    prove "$@"
else
    perl -MTest::Base -e1 || { echo "t/run.sh: install libtest-base-perl (or Test::Nginx)" >&2; exit 1; }
    prove -I t/lib "$@"
fi
