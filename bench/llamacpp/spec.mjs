#!/usr/bin/env node
// llama.cpp's draft-model speculation for bench/spec_draft.sh, written out as llama.cpp's own
// examples/speculative-simple does it, over node-llama-cpp's low-level calls (its ready-made
// DraftSequenceTokenPredictor ran at 1-2 tokens/s on 2 cores here, far below plain decoding, so it would
// not be a fair peer): each round the draft context proposes K tokens greedily (one call each), the target
// context evaluates the last token and the K drafts in one batch with a greedy next token at every position,
// the drafts up to the first disagreement stand with the target's own token after them, and the rejected
// tokens' KV is erased from both contexts.
//
//   node bench/llamacpp/spec.mjs --model TARGET.gguf --draft DRAFT.gguf --prompt TEXT --max-tokens N
//        --threads T --draft-tokens K
//
// Output: one JSON line {"ids": [...], "decode_tps": .., "validated": .., "refuted": .., "rounds": ..};
// decode_tps is wall time from the first round's tokens to the last ones (node-llama-cpp's per-call overhead
// included, as it is in ngx_llm's figure for the ring and the client).
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const a = {};
for (let i = 2; i < process.argv.length; i += 2) a[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
for (const k of ["model", "draft", "prompt", "max-tokens", "threads", "draft-tokens"])
    if (a[k] === undefined) { process.stderr.write(`error: --${k} is required\n`); process.exit(2); }
const N = Number(a["max-tokens"]), K = Number(a["draft-tokens"]), T = Number(a.threads);

const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
                               maxThreads: 0, progressLogs: false, logLevel: LlamaLogLevel.error });
const target = await llama.loadModel({ modelPath: a.model });
const draft = await llama.loadModel({ modelPath: a.draft });
const prompt = Array.from(target.tokenize(a.prompt, false));
if (target.tokens.shouldPrependBosToken && target.tokens.bos != null) prompt.unshift(target.tokens.bos);
const opts = { sequences: 1, contextSize: prompt.length + N + K + 8, batchSize: Math.max(32, prompt.length),
               threads: { ideal: T, min: T } };
const tctx = await target.createContext(opts), dctx = await draft.createContext(opts);
const ts = tctx.getSequence(), ds = dctx.getSequence();
const gen = { generateNext: { token: true, options: { temperature: 0 } } };

// the prompt but its last token into both (its KV); the last one is evaluated with the first drafts
await ts.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1));
await ds.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1));
let last = prompt[prompt.length - 1];
let dPending = [];                  // tokens the draft has not seen yet (besides `last`)
const ids = [];
let validated = 0, refuted = 0, rounds = 0, tFirst = 0, nFirst = 0;
while (ids.length < N) {
    rounds++;
    // K drafts, greedy: the unseen tokens and `last` first, then each draft fed back
    const drafts = [];
    let r = await ds.controlledEvaluate([...dPending, [last, gen]]);
    drafts.push(r[r.length - 1].next.token);
    dPending = [];
    while (drafts.length < K) {
        r = await ds.controlledEvaluate([[drafts[drafts.length - 1], gen]]);
        drafts.push(r[0].next.token);
    }
    // the target on `last` and the drafts at once
    const res = await ts.controlledEvaluate([[last, gen], ...drafts.map((t) => [t, gen])]);
    let i = 0;
    while (i < K && res[i].next.token === drafts[i]) i++;
    validated += i;
    refuted += K - i;
    const took = [...drafts.slice(0, i), res[i].next.token];
    for (const t of took) if (ids.length < N) ids.push(t);
    if (tFirst === 0) { tFirst = performance.now(); nFirst = ids.length; } /* (the prompt's round not timed) */
    // KV: the target holds last, d1..dK: the rejected ones go; the draft holds last, d1..d(K-1)
    const tn = ts.nextTokenIndex;
    if (i < K) await ts.eraseContextTokenRanges([{ start: tn - (K - i), end: tn }]);
    const dn = ds.nextTokenIndex, keep = Math.min(i, K - 1);
    if (keep < K - 1) await ds.eraseContextTokenRanges([{ start: dn - (K - 1 - keep), end: dn }]);
    if (i === K) dPending = [drafts[K - 1]]; // the last draft stood but the draft never computed it
    last = took[took.length - 1];
}
const tEnd = performance.now();
process.stdout.write(JSON.stringify({ ids, decode_tps: Math.round(((ids.length - nFirst) * 1000 / (tEnd - tFirst)) * 100) / 100,
                                      validated, refuted, rounds }) + "\n");
await tctx.dispose(); await dctx.dispose(); await target.dispose(); await draft.dispose(); await llama.dispose();
