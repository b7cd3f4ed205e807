#!/usr/bin/env bash
# make serve / make stop: run the whole service on 127.0.0.1 in the background:
# `llm-engine serve` plus nginx with the module, configured from
# nginx.conf.example. Waits until GET /health answers 200, then prints the URL.
#   tools/serve.sh start BUILD PORT MODEL [BACKEND]
#   tools/serve.sh stop  BUILD PORT
# Environment: MODELS (more model paths, each on an engine of its own behind the same
# URL, picked by the request's "model": llm_models), ENGINE_ARGS (more `llm-engine serve`
# options, for every engine), REPLICAS (engines of the main model, default 1: llm_engine lists them and
# requests go to the least busy; with BACKEND=cuda each on its own GPU, --device 0, 1, ...), TP (with BACKEND=cuda:
# the main model split over that many GPUs, --tensor-parallel-size; with REPLICAS, replica r on GPUs r*TP ...
# r*TP+TP-1), NGINX_CMD (the nginx
# command, default nginx: tests/gpu/serve_gpu.sh runs a carried one),
# SERVE_WAIT_S (how long to wait for /health, default 30).
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=$1 build=$(realpath -m "$2") port=$3
run="$build/serve-$port"
name="serve-$port"

# engine.pid holds one pid a line (the main engine's, then those of MODELS, then the main model's other
# replicas'), engine.logs each one's log on the same line
stop() {
    [ -f "$run/nginx.pid" ] && kill -QUIT "$(cat "$run/nginx.pid")" 2>/dev/null || true
    # shellcheck disable=SC2046 # one pid a word
    [ -f "$run/engine.pid" ] && kill -TERM $(cat "$run/engine.pid") 2>/dev/null || true
    for _ in $(seq 50); do
        # shellcheck disable=SC2046
        { [ -f "$run/engine.pid" ] && kill -0 $(cat "$run/engine.pid") 2>/dev/null; } || break
        sleep 0.1
    done
    rm -f "$run/nginx.pid" "$run/engine.pid" "$run/engine.logs"
}

if [ "$cmd" = stop ]; then
    stop
    echo "stopped the service on port $port"
    exit 0
fi

model=$(realpath "$4")
backend=${5:-cpu}
mkdir -p "$run/logs"
stop

# On the GPU the engine times its kernels at start (kernel tuning); the file keeps the choice, so a restart
# (make serve again, or the supervisor restarting a worker) reads it instead of timing again.
tune=()
[ "$backend" = cuda ] && tune=(--kernel-tune-file "$run/kernel-tune.txt")
replicas=${REPLICAS:-1}
[[ "$replicas" =~ ^[1-9][0-9]*$ ]] && [ "$replicas" -le 16 ] || { echo "REPLICAS: 1 to 16" >&2; exit 1; }
# One engine in the background: its pid into engine.pid, its log's name into engine.logs (the same line).
engine() { # MODEL SHM LOG [more serve options]
    local m=$1 shm=$2 log=$3
    shift 3
    # shellcheck disable=SC2086 # ENGINE_ARGS is a list of options (the first of a repeated option wins)
    "$build/llm-engine" serve --model "$m" --shm "$shm" --backend "$backend" --shm-mode 0600 ${ENGINE_ARGS:-} \
        "${tune[@]}" "$@" >"$run/logs/$log" 2>&1 &
    echo $! >>"$run/engine.pid"
    echo "$run/logs/$log" >>"$run/engine.logs"
}
tp=${TP:-1}
[[ "$tp" =~ ^[1-8]$ ]] || { echo "TP: 1 to 8" >&2; exit 1; }
[ "$tp" -eq 1 ] || [ "$backend" = cuda ] || { echo "TP=$tp splits the model over GPUs: BACKEND=cuda" >&2; exit 1; }
split=()
[ "$tp" -gt 1 ] && split=(--tensor-parallel-size "$tp")
dev=()
[ "$backend" = cuda ] && [ "$replicas" -gt 1 ] && dev=(--device 0)
engine "$model" "$name" engine.log "${dev[@]}" "${split[@]}"

# MODELS: an engine each (segment serve-PORT-i), a named location each (@model_i), listed by llm_models in
# the main location; the model id is the file's name without its extension.
routes="" locations=""
i=0
for m in ${MODELS:-}; do
    i=$((i + 1))
    m=$(realpath "$m")
    engine "$m" "$name-$i" "engine-$i.log"
    routes="$routes @model_$i"
    locations="$locations        location @model_$i {\n            llm_api;\n            llm_engine $name-$i;\n            llm_model_path $m;\n            llm_model_name $(basename "$m" | sed 's/\.[^.]*$//');\n        }\n"
done

# REPLICAS: the main model's other engines (segment serve-PORT-rN), listed by its llm_engine
engines="$name"
for r in $(seq 2 "$replicas"); do
    [ "$backend" = cuda ] && dev=(--device $(((r - 1) * tp)))
    engine "$model" "$name-r$r" "engine-r$r.log" "${dev[@]}" "${split[@]}"
    engines="$engines $name-r$r"
done

# nginx.conf.example with this run's paths, port and model.
sed -e "s|^load_module .*|load_module $build/ngx_http_llm_module.so;|" \
    -e "s|^\(\s*\)llm_engine main;|\1llm_engine $engines;|" \
    -e "s|^\(\s*\)llm_model_path [^;]*;|\1llm_model_path $model;|" \
    -e "s|^\(\s*\)llm_model_name [^;]*;|\1llm_model_name $(basename "$model" | sed 's/\.[^.]*$//');|" \
    -e "s|^\(\s*\)listen 8080;|\1listen 127.0.0.1:$port;|" \
    -e "s|^\(\s*\)llm_api;\(\s*\)# = llm_api auto;|\1llm_api;${routes:+\n\1llm_models$routes;}|" \
    -e "s|^\(\s*\)# One endpoint per location works too|$locations\1# One endpoint per location works too|" \
    -e "s|^\(\s*\)alias /usr/share/ngx_llm/dashboard/;|\1alias $build/dashboard/;|" \
    -e "s|^user root;|user $(id -un);|" \
    -e "s|^worker_processes auto;|worker_processes 2;\npid $run/nginx.pid;\nerror_log $run/logs/error.log;|" \
    -e "s|^\(\s*\)access_log /var/log/nginx/access.log llm;|\1access_log $run/logs/access.log llm;|" \
    -e "s|^http {|http {\n    client_body_temp_path $run/body;\n    proxy_temp_path $run/proxy;\n    fastcgi_temp_path $run/fastcgi;\n    uwsgi_temp_path $run/uwsgi;\n    scgi_temp_path $run/scgi;|" \
    nginx.conf.example >"$run/nginx.conf"
# shellcheck disable=SC2086 # NGINX_CMD may be a loader plus the binary
${NGINX_CMD:-nginx} -p "$run" -c "$run/nginx.conf" -e "$run/logs/error.log"

# GET /health's status code; plain bash where curl is missing (a bare GPU machine).
health() {
    if command -v curl >/dev/null; then
        curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" || true
    else
        { exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3 &&
          head -1 <&3 | cut -d' ' -f2; exec 3>&-; } 2>/dev/null || true
    fi
}

# Every engine of MODELS is up when GET /api/ps lists it (the main one's answers /health); every replica when
# /health says "ok" (not "degraded").
loaded() {
    command -v curl >/dev/null || return 0
    [ "$replicas" = 1 ] || curl -s "http://127.0.0.1:$port/health" | grep -q '^{"status":"ok"' || return 1
    [ "$i" = 0 ] && return 0
    [ "$(curl -s "http://127.0.0.1:$port/api/ps" | grep -o '"context_length"' | wc -l)" -gt "$i" ]
}

wait_s=${SERVE_WAIT_S:-30}
for _ in $(seq $((wait_s * 10))); do
    code=$(health)
    if [ "$code" = 200 ] && loaded; then
        echo "ngx_llm is serving $model${MODELS:+ and $MODELS}$([ "$replicas" = 1 ] || echo " ($replicas engines)") at http://127.0.0.1:$port/v1 (logs: $run/logs; stop: make stop PORT=$port)"
        exit 0
    fi
    while read -r pid log; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "the engine exited:" >&2
            cat "$log" >&2
            stop
            exit 1
        fi
    done < <(paste -d' ' "$run/engine.pid" "$run/engine.logs")
    sleep 0.1
done
echo "no 200 from /health after $wait_s s; see $run/logs" >&2
stop
exit 1
