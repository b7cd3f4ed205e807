// POST /v1/rerank against the tiny random Llama 3-vocabulary model (tests/openai_sdk/run.sh's second service):
// each document's relevance_score must be P(yes) / (P(yes) + P(no)) of the next token after the same judging
// prompt as a chat completion sees it (Qwen3-Reranker's system instruction and user turn, no thinking), read
// here from that completion's logprobs with "yes" and "no" lifted to the top by logit_bias (a bias moves both
// logprobs by the same amount's share, so their difference, and the score, stay the model's).
// And a reranker GGUF as llama.cpp converts one (a "yes" / "no" classifier head, its language-model head left
// out) scores as the model it came from does through its language-model head.
//   NGX_LLM_TOOLS_URL  http://127.0.0.1:PORT/v1
//   NGX_LLM_HEAD_URL, NGX_LLM_RANK_URL  a model with an untied head, and its rank conversion
import { test } from 'node:test';
import assert from 'node:assert/strict';

const base = process.env.NGX_LLM_TOOLS_URL;
if (!base) throw new Error('set NGX_LLM_TOOLS_URL (tests/openai_sdk/run.sh does)');
const root = base.replace(/\/v1$/, '');
const SYSTEM = 'Judge whether the Document meets the requirements based on the Query and the Instruct provided. ' +
    'Note that the answer can only be "yes" or "no".';
const INSTRUCT = 'Given a web search query, retrieve relevant passages that answer the query';

async function post(url, body) {
    const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const j = await r.json();
    assert.equal(r.status, 200, JSON.stringify(j));
    return j;
}

async function tokenId(text) {
    const j = await post(`${root}/tokenize`, { prompt: text, add_special_tokens: false });
    assert.equal(j.tokens.length, 1, `"${text}" is one token`);
    return j.tokens[0];
}

test('each relevance_score is P(yes) / (P(yes) + P(no)) after the judging prompt, highest first', async () => {
    const query = 'What is the capital of France?';
    const docs = ['Paris is the capital of France.', 'Bananas are yellow.', 'France borders Spain.'];
    const rr = await post(`${base}/rerank`, { query, documents: docs });
    assert.equal(rr.results.length, 3);
    for (let k = 1; k < 3; k++) assert.ok(rr.results[k - 1].relevance_score >= rr.results[k].relevance_score);
    const yes = await tokenId('yes'), no = await tokenId('no');
    for (const res of rr.results) {
        const c = await post(`${base}/chat/completions`, {
            messages: [{ role: 'system', content: SYSTEM },
                { role: 'user', content: `<Instruct>: ${INSTRUCT}\n<Query>: ${query}\n<Document>: ${docs[res.index]}` }],
            chat_template_kwargs: { enable_thinking: false }, max_tokens: 1, temperature: 0, logprobs: true,
            top_logprobs: 2, logit_bias: { [yes]: 30, [no]: 30 } });
        const top = c.choices[0].logprobs.content[0].top_logprobs;
        const lp = Object.fromEntries(top.map((t) => [t.token, t.logprob]));
        assert.ok('yes' in lp && 'no' in lp, JSON.stringify(top));
        const want = 1 / (1 + Math.exp(lp.no - lp.yes));
        assert.ok(Math.abs(res.relevance_score - want) < 1e-4,
            `document ${res.index}: ${res.relevance_score} against ${want} from the chat completion`);
        assert.equal(res.document.text, docs[res.index]);
    }
});

test('a rank GGUF (classifier head, no language-model head) gives the scores of the model it came from', async () => {
    const head = process.env.NGX_LLM_HEAD_URL, rank = process.env.NGX_LLM_RANK_URL;
    if (!head || !rank) throw new Error('set NGX_LLM_HEAD_URL and NGX_LLM_RANK_URL (tests/openai_sdk/run.sh does)');
    const body = { query: 'Which fruit is yellow?', documents: ['Bananas are yellow.', 'The sky is blue.', 'Lemons.'] };
    const a = await post(`${head}/rerank`, body), b = await post(`${rank}/rerank`, body);
    const score = (r) => Object.fromEntries(r.results.map((x) => [x.index, x.relevance_score]));
    const sa = score(a), sb = score(b);
    for (let i = 0; i < 3; i++)
        assert.ok(Math.abs(sa[i] - sb[i]) < 1e-5, `document ${i}: ${sb[i]} by the classifier head, ${sa[i]} by the logits`);
    assert.deepEqual(b.results.map((x) => x.index), a.results.map((x) => x.index));
    // the control: the rank file's logits (its embedding as the head) would not give those scores
    assert.ok(new Set([sa[0], sa[1], sa[2]]).size === 3, 'three different scores');
});
