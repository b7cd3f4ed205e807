#!/usr/bin/env node
// The llama.cpp peer of the served benchmark (bench/serve_vs_llamacpp.sh): streaming
// OpenAI-style completions over HTTP from llama.cpp's batched decoding, through
// node-llama-cpp's prebuilt CPU build (the same one the other benchmarks use; no
// llama-server binary can be had here: no network but Debian's and npm's registries).
//
//   node bench/llamacpp/server.mjs --model FILE.gguf --port P --threads T --parallel N
//        [--ctx-per-seq C] [--batch B]
//
// One llama.cpp context with N sequences (llama-server's --parallel N): every request
// in flight holds a sequence, and node-llama-cpp gathers what all of them evaluate in
// one cycle of the event loop into one llama_decode batch (prompts and next tokens
// alike), as llama-server's slots share one batch per step. A request beyond N waits
// for a free sequence. Each sequence holds C tokens (context N x C, as llama-server's
// -c splits its context among its slots).
//
// POST /v1/completions with {"prompt", "max_tokens", "stream": true, "ignore_eos"}:
// greedy (temperature 0, llama.cpp's greedy sampler alone), one SSE event per token
// ({"choices":[{"text","index":0,"finish_reason":null}]}), then a finish event, a usage
// event and "data: [DONE]", in the shape bench/serve_load/serve_load.c reads, over
// HTTP/1.0 (the body ends at close). GET /health answers 200 once the model is loaded; GET /perf gives
// llama.cpp's own decode time since the last reading (see perf below).
// Anything else: 404. Only what the benchmark sends is taken: other sampling
// parameters are refused with 400, so that no figure comes from a request it did not run.

import http from "node:http";
import { existsSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const USAGE = "usage: node bench/llamacpp/server.mjs --model FILE.gguf --port P --threads T --parallel N " +
    "[--ctx-per-seq C] [--batch B]";

function fail(msg) {
    process.stderr.write(`error: ${msg}\n${USAGE}\n`);
    process.exit(2);
}

const args = {};
for (let i = 2; i < process.argv.length; i += 2) {
    const m = /^--(model|port|threads|parallel|ctx-per-seq|batch)$/.exec(process.argv[i]);
    if (!m || process.argv[i + 1] === undefined) fail(`bad argument '${process.argv[i]}'`);
    args[m[1]] = process.argv[i + 1];
}
const int = (name, dflt, min) => {
    const s = args[name] ?? dflt;
    if (s === undefined || !/^\d+$/.test(String(s)) || Number(s) < min) fail(`--${name} must be a number >= ${min}`);
    return Number(s);
};
if (!args.model || !existsSync(args.model)) fail("--model FILE.gguf is required (and must exist)");
const port = int("port", undefined, 1), threads = int("threads", undefined, 1), parallel = int("parallel", undefined, 1);
const ctxPerSeq = int("ctx-per-seq", 512, 16), batch = int("batch", 2048, 32);

// llama.cpp's log: its performance counters are read from it (GET /perf); warnings go to stderr.
let perfLines = [];
const llama = await getLlama({
    gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true, maxThreads: 0,
    progressLogs: false, logLevel: LlamaLogLevel.info,
    logger: (level, message) => {
        perfLines.push(message);
        if (perfLines.length > 200) perfLines = perfLines.slice(-100);
        if (level === LlamaLogLevel.warn || level === LlamaLogLevel.error) process.stderr.write(`llama.cpp: ${message}`);
    },
});
const model = await llama.loadModel({ modelPath: args.model });
const context = await model.createContext({
    sequences: parallel,
    contextSize: ctxPerSeq,    // node-llama-cpp: per sequence (llama.cpp gets n_ctx = sequences x this)
    batchSize: batch,
    threads: { ideal: threads, min: threads },
    flashAttention: "auto",    // llama.cpp's own default (llama-server -fa auto), as bench/llamacpp/run.mjs runs it
    performanceTracking: true, // GET /perf
    // One llama_decode per event-loop cycle for what the sequences queued in it. A schedule that waited
    // for every generating request's token (one batch a step, as llama-server's loop makes) was measured
    // against it at concurrency 32: the same 158-165 tokens/s, llama.cpp in llama_decode ~95% of the time.
    batching: { dispatchSchedule: "nextCycle", itemPrioritizationStrategy: "maximumParallelism" },
});

// Free sequences, and the requests waiting for one (first come, first served).
const free = [];
for (let i = 0; i < parallel; i++) free.push(context.getSequence());
const waiting = [];
const takeSequence = () => free.length > 0 ? Promise.resolve(free.pop()) : new Promise((res) => waiting.push(res));
function giveBack(seq) {
    const next = waiting.shift();
    if (next) next(seq);
    else free.push(seq);
}

function send(res, code, obj) {
    const body = JSON.stringify(obj);
    res.writeHead(code, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
    res.end(body);
}
const sse = (res, obj) => res.write(`data: ${typeof obj === "string" ? obj : JSON.stringify(obj)}\n\n`);

async function complete(req, res, body) {
    let p;
    try {
        p = JSON.parse(body);
    } catch (e) {
        return send(res, 400, { error: { message: `invalid JSON: ${e.message}` } });
    }
    const maxTokens = p.max_tokens ?? 16;
    if (typeof p.prompt !== "string" || !Number.isInteger(maxTokens) || maxTokens < 1 || p.stream !== true ||
        (p.temperature ?? 0) !== 0 || (p.top_p ?? 1) !== 1)
        return send(res, 400, { error: { message: "this peer serves greedy streamed text completions only " +
                                                  "(prompt string, max_tokens >= 1, stream true, temperature 0)" } });
    const tokens = Array.from(model.tokenize(p.prompt, false));
    if (model.tokens.shouldPrependBosToken && model.tokens.bos != null) tokens.unshift(model.tokens.bos);
    if (tokens.length + maxTokens > ctxPerSeq)
        return send(res, 400, { error: { message: `prompt + max_tokens over the ${ctxPerSeq} tokens of a sequence` } });

    const seq = await takeSequence();
    let gone = false;
    res.on("close", () => { gone = true; });
    let n = 0, finish = "length";
    try {
        res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
        const id = `cmpl-${Date.now()}`;
        for await (const tok of seq.evaluate(tokens, { temperature: 0, yieldEogToken: true })) {
            if (gone) break;
            if (!p.ignore_eos && model.isEogToken(tok)) { finish = "stop"; break; }
            sse(res, { id, object: "text_completion", choices: [{ text: model.detokenize([tok]), index: 0,
                                                                  finish_reason: null }] });
            if (++n >= maxTokens) break;
        }
        if (!gone) {
            sse(res, { id, object: "text_completion", choices: [{ text: "", index: 0, finish_reason: finish }] });
            sse(res, { id, object: "text_completion", choices: [],
                       usage: { prompt_tokens: tokens.length, completion_tokens: n,
                                total_tokens: tokens.length + n } });
            sse(res, "[DONE]");
            res.end();
        }
    } finally {
        await seq.clearHistory();
        giveBack(seq);
    }
}

// llama.cpp's own time in llama_decode since the last reading (llama_perf_context; printing its counters
// resets them): batches of several tokens
// ("prompt eval": prompts, and every decode step of two or more sequences) and of one token ("eval").
// Differences of two readings give the rate llama.cpp computes at, without sampling or this server.
async function perf(res) {
    perfLines = [];
    await context.printTimings();
    const text = perfLines.join("");
    const get = (label) => {
        const m = new RegExp(`(?:^|[^a-z ])\\s*${label} time =\\s*([\\d.]+) ms /\\s*(\\d+) (?:tokens|runs)`).exec(text);
        return m ? [Number(m[1]), Number(m[2])] : [0, 0];
    };
    const [bms, btok] = get("prompt eval"), [sms, stok] = get("eval");
    send(res, 200, { batch_ms: bms, batch_tokens: btok, single_ms: sms, single_tokens: stok });
}

const server = http.createServer((req, res) => {
    if (req.method === "GET" && req.url === "/health") return send(res, 200, { status: "ok" });
    if (req.method === "GET" && req.url === "/perf")
        return void perf(res).catch((e) => send(res, 500, { error: { message: String(e.message ?? e) } }));
    if (req.method !== "POST" || req.url !== "/v1/completions") return send(res, 404, { error: { message: "not found" } });
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
        complete(req, res, Buffer.concat(chunks).toString("utf8")).catch((e) => {
            process.stderr.write(`server.mjs: ${e.stack ?? e}\n`);
            if (!res.headersSent) send(res, 500, { error: { message: String(e.message ?? e) } });
            else res.end();
        });
    });
});
server.keepAliveTimeout = 0;
server.listen(port, "127.0.0.1", () => process.stderr.write(`server.mjs: llama.cpp ${llama.llamaCppRelease?.release ?? "?"} ` +
    `(node-llama-cpp, cpu) on 127.0.0.1:${port}: ${parallel} sequences of ${ctxPerSeq} tokens, ${threads} threads\n`));
const stop = () => server.close(async () => { await context.dispose(); await model.dispose(); await llama.dispose(); process.exit(0); });
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
