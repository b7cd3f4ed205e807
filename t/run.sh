#!/bin/sh
# Runs the Test::Nginx suite (t/*.t) against build/ngx_http_llm_module.so.
#   t/run.sh [BUILD_DIR] [prove args...]      (make test-nginx)
# Starts what the tests need: two echo engines (t/echo_engine.c, the real shm
# protocol with a deterministic token source) named ngxtest and ngxtest_small.
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
SRCS="t/echo_engine.c $(ls shm/*.c) $(ls engine/tokenizer*.c engine/detok.c) engine/gguf.c engine/common.c"
if [ ! -x "$ENGINE" ] || [ -n "$(find $SRCS -newer "$ENGINE" 2>/dev/null)" ]; then
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

[ $# -gt 0 ] || set -- t/
if perl -MTest::Nginx::Socket -e1 2>/dev/null; then
    prove "$@"
else
    perl -MTest::Base -e1 || { echo "t/run.sh: install libtest-base-perl (or Test::Nginx)" >&2; exit 1; }
    prove -I t/lib "$@"
fi
