#!/usr/bin/env node
// llama.cpp's tokenizer (node-llama-cpp's model.tokenize: no BOS / EOS added) on a list of texts.
//
//   node bench/llamacpp/tokenize.mjs --model FILE.gguf --input-file TEXTS.json
//
// TEXTS.json: a JSON array of strings. Output: one line per text, {"ids":[..],"special":[..]}: its ids with
// special-token text left as text, then parsed into the special tokens.

import { existsSync, readFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function fail(msg) {
    process.stderr.write(`error: ${msg}\nusage: node bench/llamacpp/tokenize.mjs --model FILE.gguf ` +
        `--input-file TEXTS.json\n`);
    process.exit(2);
}

const a = {};
for (let i = 2; i < process.argv.length; i++) {
    const m = /^--([a-z-]+)$/.exec(process.argv[i]);
    if (!m || i + 1 >= process.argv.length) fail(`bad argument ${process.argv[i]}`);
    a[m[1]] = process.argv[++i];
}
if (!a.model || !existsSync(a.model)) fail("--model FILE.gguf is required");
if (!a["input-file"] || !existsSync(a["input-file"])) fail("--input-file TEXTS.json is required");

const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0 });
for (const t of JSON.parse(readFileSync(a["input-file"], "utf8"))) {
    process.stdout.write(JSON.stringify({ ids: Array.from(model.tokenize(t, false)),
        special: Array.from(model.tokenize(t, true)) }) + "\n");
}
await model.dispose();
