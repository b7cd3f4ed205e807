#!/bin/sh
# Builds the dynamic module against the distribution's nginx source tree
# (Debian: nginx-dev ships it configured in /usr/share/nginx/src).
#   ngx_module/build.sh [BUILD_DIR]     -> BUILD_DIR/ngx_http_llm_module.so (default: build)
# Run from anywhere; BUILD_DIR is relative to the repository root.
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
case "$BUILD" in /*) ;; *) BUILD="$REPO/$BUILD" ;; esac
SRC=${NGINX_SRC:-/usr/share/nginx/src}
[ -f "$SRC/conf_flags" ] || { echo "build.sh: $SRC/conf_flags missing (install nginx-dev)" >&2; exit 1; }
mkdir -p "$BUILD"
NS="$BUILD/nginx-src"
# Re-configure when the source tree or our addon script changed.
STAMP="$NS/.llm-configured"
if [ ! -f "$STAMP" ] || [ "$REPO/config" -nt "$STAMP" ] || [ "$SRC/conf_flags" -nt "$STAMP" ] \
   || [ "$(cat "$STAMP")" != "$(ls "$REPO"/ngx_module/*.c "$REPO"/engine/tokenizer*.c "$REPO"/engine/detok.c "$REPO"/shm/*.c 2>/dev/null | tr '\n' ' ')" ]; then
    rm -rf "$NS"
    cp -a "$SRC" "$NS"
    # conf_flags is a bash array; run configure under bash.
    (cd "$NS" && bash -c 'source ./conf_flags && ./configure "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$1"' _ "$REPO" \
        > "$BUILD/nginx-configure.log" 2>&1) || { tail -30 "$BUILD/nginx-configure.log" >&2; exit 1; }
    ls "$REPO"/ngx_module/*.c "$REPO"/engine/tokenizer*.c "$REPO"/engine/detok.c "$REPO"/shm/*.c 2>/dev/null | tr '\n' ' ' > "$STAMP"
fi
make -s -C "$NS" -f objs/Makefile modules -j"$(nproc 2>/dev/null || echo 2)"
# Replaced by a rename, never rewritten in place: a running nginx (another `make serve` port) has the old
# file mapped, and rewriting it under it crashes its workers.
if ! cmp -s "$NS/objs/ngx_http_llm_module.so" "$BUILD/ngx_http_llm_module.so"; then
    cp "$NS/objs/ngx_http_llm_module.so" "$BUILD/.ngx_http_llm_module.so.new"
    mv -f "$BUILD/.ngx_http_llm_module.so.new" "$BUILD/ngx_http_llm_module.so"
fi
echo "built $BUILD/ngx_http_llm_module.so"
