#!/usr/bin/env node
// llama.cpp side of the embedding parity test and benchmark, through node-llama-cpp's embedding context
// (llama.cpp with embeddings on: the pooling the GGUF declares, <arch>.pooling_type; none: the last token's
// output-norm row).
//
//   node bench/llamacpp/embed.mjs --model FILE.gguf (--input-file FILE | --input-ids FILE | --prompt-tokens 1,2,3)
//        --threads T [--batch N]
//
// --input-file: one text a line (empty lines skipped), tokenized by the model's tokenizer (BOS, and EOS where
// the model asks for it, as node-llama-cpp adds them); --input-ids: one input a line as comma-separated ids,
// --prompt-tokens: one input; exactly those ids (node-llama-cpp still appends the EOS of a Unigram vocabulary
// when the ids do not end with it). node-llama-cpp never puts BOS in front of a Unigram ("t5") vocabulary's
// text, as T5 has none, although XLM-RoBERTa's GGUFs ask for it (add_bos_token) and llama.cpp adds it: such a
// model's inputs come here as ids.
// Output: one JSON array a line (llama.cpp's vector, not normalised), then
//   {"n":..,"tokens":..,"seconds":..,"inputs_per_s":..,"tokens_per_s":..}
// timed around the getEmbeddingFor calls (one input at a time: node-llama-cpp's embedding context runs one
// sequence), after one throw-away input that pages the weights in.

import { existsSync, readFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function fail(msg) {
    process.stderr.write(`error: ${msg}\nusage: node bench/llamacpp/embed.mjs --model FILE.gguf ` +
        `(--input-file FILE | --input-ids FILE | --prompt-tokens 1,2,3) --threads T [--batch N]\n`);
    process.exit(2);
}

const a = {};
for (let i = 2; i < process.argv.length; i++) {
    const m = /^--([a-z-]+)$/.exec(process.argv[i]);
    if (!m || i + 1 >= process.argv.length) fail(`bad argument ${process.argv[i]}`);
    a[m[1]] = process.argv[++i];
}
if (!a.model || !existsSync(a.model)) fail("--model FILE.gguf is required");
if ([a["input-file"], a["input-ids"], a["prompt-tokens"]].filter((x) => x).length !== 1)
    fail("one of --input-file, --input-ids, --prompt-tokens");
const threads = Number(a.threads ?? 1);

const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: a.model });
const inputs = a["prompt-tokens"]
    ? [a["prompt-tokens"].split(",").map(Number)]
    : a["input-ids"]
    ? readFileSync(a["input-ids"], "utf8").split("\n").filter((l) => l.length > 0).map((l) => l.split(",").map(Number))
    : readFileSync(a["input-file"], "utf8").split("\n").filter((l) => l.length > 0);
const batch = Number(a.batch ?? 2048);
const ctx = await model.createEmbeddingContext({ threads, contextSize: Math.min(model.trainContextSize, 4096),
    batchSize: batch });

await ctx.getEmbeddingFor(inputs[0]); // pages the weights in
let tokens = 0;
const out = [];
const t0 = process.hrtime.bigint();
for (const x of inputs) {
    const e = await ctx.getEmbeddingFor(x);
    out.push(e.vector);
    tokens += ctx.calculateInputLength(x);
}
const dt = Number(process.hrtime.bigint() - t0) / 1e9;
for (const v of out) process.stdout.write(JSON.stringify(Array.from(v)) + "\n");
process.stdout.write(JSON.stringify({ n: inputs.length, tokens, seconds: dt, inputs_per_s: inputs.length / dt,
    tokens_per_s: tokens / dt }) + "\n");
await ctx.dispose();
await model.dispose();
