#!/usr/bin/env bash
# llm_balance prefix against llm_balance least, on the same replicas in one run: `make serve REPLICAS=2` (one
# engine thread each), then bench/conversations.mjs (multi-turn conversations, each turn's prompt the whole
# conversation so far after a system text they all share) under each, in alternating rounds so that both see
# the same machine load. Each round has conversations of its own (only the system text is shared), so no round
# finds another's in the engines' prefix caches. Prints, for each: time to first token, the prompt tokens the
# replicas' prefix caches served, wall time, and the requests each replica took; then prefix / least.
#   bash bench/replica_balance.sh   # [BUILD=build] [MODEL=path] [CONVERSATIONS=16] [CONCURRENCY=4] [TURNS=4]
#                                   # [MAX_TOKENS=32] [ROUNDS=2] [ENGINE_ARGS="--threads 1"]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
cd "$REPO"
BUILD=${BUILD:-build}
MODEL=${MODEL:-../shared/models/stories260K/stories260K.gguf}
CONVERSATIONS=${CONVERSATIONS:-16}
CONCURRENCY=${CONCURRENCY:-4}
TURNS=${TURNS:-4}
MAX_TOKENS=${MAX_TOKENS:-32}
ROUNDS=${ROUNDS:-2}
ENGINE_ARGS=${ENGINE_ARGS---threads 1}

PORT=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
TMP=$(mktemp -d)
trap 'make -C "$REPO" --no-print-directory BUILD="$BUILD" stop PORT="$PORT" >/dev/null 2>&1 || true; rm -rf "$TMP"' EXIT
make --no-print-directory BUILD="$BUILD" MODEL="$MODEL" REPLICAS=2 ENGINE_ARGS="$ENGINE_ARGS" serve PORT="$PORT"
RUN=$(realpath "$BUILD/serve-$PORT")
# llm_balance after llm_engine (the http level of nginx.conf.example), and which replica took each request
sed -i 's|^\(\s*\)llm_engine \(.*\);|&\n\1llm_balance least;\n\1add_header X-Engine $llm_engine always;|' "$RUN/nginx.conf"
balance() {
    sed -i "s|llm_balance [a-z]*;|llm_balance $1;|" "$RUN/nginx.conf"
    local old
    old=$(pgrep -P "$(cat "$RUN/nginx.pid")" | sort | tr '\n' ' ')
    nginx -p "$RUN" -c "$RUN/nginx.conf" -e "$RUN/logs/error.log" -s reload
    for _ in $(seq 100); do # until the workers are new ones
        now=$(pgrep -P "$(cat "$RUN/nginx.pid")" | sort | tr '\n' ' ')
        [ -n "$now" ] && ! grep -qwF -f <(tr ' ' '\n' <<<"$old" | grep .) <<<"$now" && return 0
        sleep 0.1
    done
    echo "nginx did not reload" >&2
    exit 1
}
echo "# $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); model $MODEL, 2 replicas ($ENGINE_ARGS);" \
     "$CONVERSATIONS conversations of $TURNS turns, $CONCURRENCY at once, $MAX_TOKENS tokens an answer; $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
    for mode in least prefix; do
        balance "$mode"
        node "$HERE/conversations.mjs" "http://127.0.0.1:$PORT" "$CONVERSATIONS" "$CONCURRENCY" "$TURNS" \
             "$MAX_TOKENS" "round $r $mode" >>"$TMP/$mode.jsonl"
    done
done
node - "$TMP" <<'EOF'
const fs = require('fs'), dir = process.argv[2];
const runs = m => fs.readFileSync(`${dir}/${m}.jsonl`, 'utf8').trim().split('\n').map(JSON.parse);
const sum = (a, f) => a.reduce((s, x) => s + f(x), 0);
const row = m => {
    const a = runs(m), n = sum(a, x => x.requests);
    const eng = {};
    for (const x of a) for (const [k, v] of Object.entries(x.engines)) eng[k] = (eng[k] || 0) + v;
    return { m, n, failed: sum(a, x => x.failed), p50: sum(a, x => x.ttft_p50) / a.length,
             p90: sum(a, x => x.ttft_p90) / a.length, mean: sum(a, x => x.ttft_mean * x.requests) / n,
             cached: sum(a, x => x.cached_tokens) / sum(a, x => x.prompt_tokens), wall: sum(a, x => x.wall_s),
             split: Object.values(eng).sort((p, q) => q - p).join(' / ') };
};
const l = row('least'), p = row('prefix');
console.log('| llm_balance | requests (failed) | TTFT p50 / p90 ms | TTFT mean ms | prompt tokens cached | wall s | per replica |');
console.log('| --- | ---: | --- | ---: | ---: | ---: | --- |');
for (const x of [l, p])
    console.log(`| ${x.m} | ${x.n} (${x.failed}) | ${x.p50.toFixed(1)} / ${x.p90.toFixed(1)} | ${x.mean.toFixed(1)} | ` +
                `${(100 * x.cached).toFixed(1)}% | ${x.wall.toFixed(2)} | ${x.split} |`);
console.log(`prefix / least: TTFT mean ${(p.mean / l.mean).toFixed(2)}x, p50 ${(p.p50 / l.p50).toFixed(2)}x, ` +
            `uncached prompt tokens ${((1 - p.cached) / (1 - l.cached)).toFixed(2)}x, wall ${(p.wall / l.wall).toFixed(2)}x`);
EOF
