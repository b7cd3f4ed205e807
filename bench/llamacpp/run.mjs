#!/usr/bin/env node
// llama.cpp side of the benchmark and greedy parity checks, through
// node-llama-cpp's prebuilt CPU build (pinned in package.json; install with
// `npm ci --prefix bench/llamacpp`; works offline afterwards).
//
//   node bench/llamacpp/run.mjs --model FILE.gguf (--prompt TEXT | --prompt-tokens 1,2,3)
//        --max-tokens N --threads T [--json] [--stop-at-eos] [--no-warmup]
//        [--flash-attn auto|on|off] [--kv-type f16|f32|q8_0] [--probs K] [--grammar json | --json-schema FILE |
//        --grammar-file FILE.gbnf] [--lora ADAPTER.gguf [--lora-scale S]]
//
// --grammar json: generation under llama.cpp's own JSON grammar (grammars/json.gbnf through
// node-llama-cpp's LlamaGrammar.getFor), llama.cpp's counterpart of ngx_llm's JSON mode; it ends at the
// end-of-generation token the grammar allows once the object closes (with --stop-at-eos).
// --json-schema FILE: under the grammar node-llama-cpp builds from that JSON Schema
// (llama.createGrammarForJsonSchema, llama.cpp's grammar sampler), the counterpart of response_format
// json_schema.
// --grammar-file FILE.gbnf: under that GBNF grammar (llama.createGrammar, llama.cpp's grammar sampler), the
// counterpart of ngx_llm's `grammar` / `generate --grammar-file`.
//
// Greedy decoding (temperature 0: node-llama-cpp then builds a chain holding
// only llama.cpp's greedy sampler, no top-k/top-p/penalties).  --prompt
// tokenizes with the model's tokenizer and prepends BOS when the model asks
// for it; --prompt-tokens evaluates exactly the given ids.  The whole prompt
// is one batch (batch size >= prompt length).  Generation goes on through
// end-of-generation tokens (they are fed back like any other) unless
// --stop-at-eos; eos_at reports the first one's index or -1.
//
// --probs K: no generation; the prompt is evaluated teacher-forced and, for
// every position i, the K most probable next tokens after prompt[0..i] are
// printed as one JSON line {"probs": [[id, p, id, p, ...], ...]} (llama.cpp's
// softmax of the raw logits: temperature 0 here means no sampling options).
//
// Timing: prefill_tps / decode_tps come from llama.cpp's own performance
// counters (llama_perf_context: "prompt eval" = the prompt batch, "eval" = the
// n_gen - 1 single-token decodes), so JavaScript overhead is excluded, like
// the engine's own figures.  The *_wall figures are measured here around the
// evaluation calls (they include node-llama-cpp's per-token overhead).
// Before measuring, a separate throw-away context evaluates the prompt once so
// that the memory-mapped weights are paged in (--no-warmup skips it).
//
// Output: the ids and timings on stdout; with --json a single JSON line
//   {"ids":[...],"prefill_tps":..,"decode_tps":..,"n_prompt":..,"n_gen":..,...}
// Diagnostics go to stderr; exit status 2 for usage errors, 1 for failures.

import { existsSync, readFileSync } from "node:fs";
import { getLlama, LlamaGrammarEvaluationState, LlamaLogLevel } from "node-llama-cpp";

const USAGE = "usage: node bench/llamacpp/run.mjs --model FILE.gguf (--prompt TEXT | --prompt-tokens 1,2,3) " +
    "--max-tokens N --threads T [--json] [--stop-at-eos] [--no-warmup] [--flash-attn auto|on|off] [--kv-type f16|f32|q8_0] " +
    "[--probs K] [--grammar json | --json-schema FILE | --grammar-file FILE.gbnf] [--lora ADAPTER.gguf [--lora-scale S]]";

function fail(msg, code = 2) {
    process.stderr.write(`error: ${msg}\n${code === 2 ? USAGE + "\n" : ""}`);
    process.exit(code);
}

function parseArgs(argv) {
    const flags = new Set(["json", "stop-at-eos", "no-warmup", "help"]);
    const valued = new Set(["model", "prompt", "prompt-tokens", "max-tokens", "threads", "flash-attn", "kv-type", "probs",
        "grammar", "json-schema", "grammar-file", "lora", "lora-scale"]);
    const a = {};
    for (let i = 0; i < argv.length; i++) {
        const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
        if (!m) fail(`unexpected argument '${argv[i]}'`);
        const [, name, inline] = m;
        if (flags.has(name)) {
            if (inline !== undefined) fail(`--${name} takes no value`);
            a[name] = true;
        } else if (valued.has(name)) {
            const v = inline !== undefined ? inline : argv[++i];
            if (v === undefined) fail(`--${name} needs a value`);
            a[name] = v;
        } else {
            fail(`unknown option --${name}`);
        }
    }
    return a;
}

function posInt(s, name, min) {
    if (!/^\d+$/.test(String(s))) fail(`--${name} must be a whole number (got '${s}')`);
    const n = Number(s);
    if (!Number.isSafeInteger(n) || n < min) fail(`--${name} must be at least ${min} (got ${s})`);
    return n;
}

const args = parseArgs(process.argv.slice(2));
if (args.help) {
    process.stdout.write(USAGE + "\n");
    process.exit(0);
}
if (!args.model) fail("--model is required");
if ((args.prompt === undefined) === (args["prompt-tokens"] === undefined))
    fail("give exactly one of --prompt and --prompt-tokens");
if (args["max-tokens"] === undefined) fail("--max-tokens is required");
if (args.threads === undefined) fail("--threads is required");
const maxTokens = posInt(args["max-tokens"], "max-tokens", 1);
const threads = posInt(args.threads, "threads", 1);
const flashAttn = args["flash-attn"] ?? "auto";
if (!["auto", "on", "off"].includes(flashAttn)) fail(`--flash-attn must be auto, on or off (got '${flashAttn}')`);
const kvType = (args["kv-type"] ?? "f16").toLowerCase();
if (!["f16", "f32", "q8_0"].includes(kvType)) fail(`--kv-type must be f16, f32 or q8_0 (got '${kvType}')`);
if (!existsSync(args.model)) fail(`model file '${args.model}' not found`, 1);
if (args.grammar !== undefined && args.grammar !== "json") fail(`--grammar must be json (got '${args.grammar}')`);
if ((args.grammar !== undefined) + (args["json-schema"] !== undefined) + (args["grammar-file"] !== undefined) > 1)
    fail("--grammar, --json-schema and --grammar-file: give one");
let gbnf;
if (args["grammar-file"] !== undefined) {
    try {
        gbnf = readFileSync(args["grammar-file"], "utf8");
    } catch (e) {
        fail(`--grammar-file ${args["grammar-file"]}: ${e.message}`, 1);
    }
}
let jsonSchema;
if (args["json-schema"] !== undefined) {
    try {
        jsonSchema = JSON.parse(readFileSync(args["json-schema"], "utf8"));
    } catch (e) {
        fail(`--json-schema ${args["json-schema"]}: ${e.message}`, 1);
    }
}

let promptTokens = null;
if (args["prompt-tokens"] !== undefined) {
    const parts = args["prompt-tokens"].split(",").map((s) => s.trim());
    if (parts.length === 0 || parts.some((p) => !/^\d+$/.test(p)))
        fail(`--prompt-tokens must be a comma-separated list of token ids (got '${args["prompt-tokens"]}')`);
    promptTokens = parts.map(Number);
}

// llama.cpp's log goes through this logger: kept for the perf counters, and
// replayed on stderr if something fails.
const logLines = [];
const llama = await getLlama({
    gpu: false,                // the CPU build only, whatever GPUs exist
    build: "never",            // never compile llama.cpp from source
    skipDownload: true,        // never fetch anything
    usePrebuiltBinaries: true,
    maxThreads: 0,             // no cap: the context's thread count is used as given
    progressLogs: false,
    logLevel: LlamaLogLevel.info,
    logger: (_level, message) => logLines.push(message),
}).catch((e) => fail(`cannot load node-llama-cpp's prebuilt llama.cpp: ${e.message}`, 1));

function dumpLogAndFail(msg) {
    const tail = logLines.slice(-12).map((l) => `llama.cpp: ${l.trimEnd()}`).join("\n");
    process.stderr.write(tail + "\n");
    fail(msg, 1);
}

const model = await llama.loadModel({ modelPath: args.model })
    .catch((e) => dumpLogAndFail(`llama.cpp cannot load '${args.model}': ${e.message}`));

if (promptTokens === null) {
    promptTokens = Array.from(model.tokenize(args.prompt, false));
    if (model.tokens.shouldPrependBosToken && model.tokens.bos != null)
        promptTokens.unshift(model.tokens.bos);
}
if (promptTokens.length === 0) fail("the prompt has no tokens");
const vocab = model.fileInfo?.metadata?.tokenizer?.ggml?.tokens?.length;
const badId = promptTokens.find((t) => vocab != null && t >= vocab);
if (badId !== undefined) fail(`prompt token ${badId} is outside the model's vocabulary (${vocab} tokens)`);
const nPrompt = promptTokens.length;

const ctxOptions = {
    sequences: 1,
    contextSize: nPrompt + maxTokens + 1,       // llama.cpp rounds it up; no context shift can happen
    batchSize: Math.max(32, nPrompt),          // the prompt is one batch (n_ubatch = n_batch here)
    threads: { ideal: threads, min: threads },
    flashAttention: flashAttn === "auto" ? "auto" : flashAttn === "on",
    experimentalKvCacheKeyType: kvType.toUpperCase(),
    experimentalKvCacheValueType: kvType.toUpperCase(),
    performanceTracking: true,
};
if (args.lora !== undefined)   // a LoRA adapter (GGUF) applied by llama.cpp at run time, scaled
    ctxOptions.lora = { adapters: [{ filePath: args.lora, scale: Number(args["lora-scale"] ?? 1) }] };

async function withContext(fn) {
    const ctx = await model.createContext(ctxOptions)
        .catch((e) => dumpLogAndFail(`llama.cpp cannot create a context: ${e.message}`));
    try {
        return await fn(ctx);
    } finally {
        await ctx.dispose();
    }
}

if (args.probs !== undefined) {
    const k = posInt(args.probs, "probs", 1);
    const rows = await withContext(async (ctx) => {
        const input = promptTokens.map((t) => [t, { generateNext: { probabilities: true } }]);
        const res = await ctx.getSequence().controlledEvaluate(input);
        return res.map((r) => {
            const row = [];
            for (const [id, p] of r?.next?.probabilities ?? []) {
                if (row.length >= 2 * k) break;
                row.push(id, p);
            }
            return row;
        });
    }).catch((e) => dumpLogAndFail(`evaluation failed: ${e.message}`));
    process.stdout.write(JSON.stringify({ probs: rows }) + "\n");
    await model.dispose();
    await llama.dispose();
    process.exit(0);
}

if (!args["no-warmup"]) {
    await withContext((ctx) => ctx.getSequence().evaluateWithoutGeneratingNewTokens(promptTokens))
        .catch((e) => dumpLogAndFail(`warm-up evaluation failed: ${e.message}`));
}

const stopAtEos = Boolean(args["stop-at-eos"]);
const run = await withContext(async (ctx) => {
    const ids = [];
    let eosAt = -1;
    const t0 = performance.now();
    let tFirst = t0, tLast = t0;
    const grammar = args.grammar !== undefined ? await llama.getGrammarFor(args.grammar)
        : jsonSchema !== undefined ? await llama.createGrammarForJsonSchema(jsonSchema)
        : gbnf !== undefined ? await llama.createGrammar({ grammar: gbnf }) : undefined;
    const grammarEvaluationState = grammar === undefined ? undefined
        : new LlamaGrammarEvaluationState({ model, grammar });
    const gen = ctx.getSequence().evaluate(promptTokens, { temperature: 0, yieldEogToken: true, grammarEvaluationState });
    for await (const tok of gen) {
        tLast = performance.now();
        if (ids.length === 0) tFirst = tLast;
        if (eosAt < 0 && model.isEogToken(tok)) eosAt = ids.length;
        ids.push(tok);
        if (ids.length >= maxTokens || (stopAtEos && eosAt >= 0)) break;
    }
    logLines.length = 0;
    await ctx.printTimings();
    return { ids, eosAt, t0, tFirst, tLast, threadsUsed: ctx.currentThreads, perf: logLines.join("") };
}).catch((e) => dumpLogAndFail(`evaluation failed: ${e.message}`));

// llama_perf_context_print: "prompt eval time = X ms / N tokens", "eval time = Y ms / M runs"
function perfRate(label) {
    const m = new RegExp(`(?:^|[^a-z ])\\s*${label} time =\\s*([\\d.]+) ms /\\s*(\\d+) (?:tokens|runs)`).exec(run.perf);
    if (!m) return null;
    const ms = Number(m[1]), n = Number(m[2]);
    return n > 0 && ms > 0 ? { n, tps: (n * 1000) / ms } : null;
}
const round = (x) => (x == null ? null : Math.round(x * 100) / 100);
const nGen = run.ids.length;
const prefillWall = (nPrompt * 1000) / (run.tFirst - run.t0);
const decodeWall = nGen > 1 ? ((nGen - 1) * 1000) / (run.tLast - run.tFirst) : null;
const pPerf = perfRate("prompt eval"), dPerf = perfRate("eval");
// A one-token prompt is counted by llama.cpp as an "eval" run, so fall back to wall time then.
const prefill = pPerf && pPerf.n === nPrompt ? pPerf.tps : null;
const decode = prefill != null && dPerf && dPerf.n === nGen - 1 ? dPerf.tps : null;

const out = {
    ids: run.ids,
    prefill_tps: round(prefill ?? prefillWall),
    decode_tps: round(decode ?? decodeWall),
    n_prompt: nPrompt,
    n_gen: nGen,
    eos_at: run.eosAt,
    prefill_tps_wall: round(prefillWall),
    decode_tps_wall: round(decodeWall),
    timing_source: prefill != null && (decode != null || nGen < 2) ? "llama.cpp" : "wall",
    threads: run.threadsUsed,
    llama_cpp: `node-llama-cpp ${llama.llamaCppRelease?.release ?? "?"} (${llama.buildType}, cpu)`,
};
if (args.json) {
    process.stdout.write(JSON.stringify(out) + "\n");
} else {
    process.stdout.write(`ids: ${run.ids.join(" ")}\n`);
    process.stdout.write(`prompt: ${nPrompt} tokens, ${out.prefill_tps} tokens/s (wall ${out.prefill_tps_wall})\n`);
    process.stdout.write(`generated: ${nGen} tokens, ${out.decode_tps} tokens/s (wall ${out.decode_tps_wall})` +
        `${run.eosAt >= 0 ? `, first end-of-generation token at ${run.eosAt}` : ""}\n`);
    process.stdout.write(`threads: ${out.threads}, timing from ${out.timing_source}\n`);
}
await model.dispose();
await llama.dispose();
