// Hugging Face's JavaScript client (@huggingface/inference 2.x, HfInferenceEndpoint: TGI's own API, what it
// speaks to a Text Generation Inference server) against `make serve` (tests/openai_sdk/run.sh starts it):
// textGeneration and textGenerationStream (POST / with and without "stream") must give `llm-engine generate`'s
// greedy text on the prompt's tokens; the stream's tokens join into its generated_text; details, return_full_text,
// stop sequences; /generate, /generate_stream and /info by fetch; refusals reach the client with TGI's message.
//   NGX_LLM_BASE_URL, NGX_LLM_ENGINE, NGX_LLM_MODEL (as for sdk.test.mjs)
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { HfInferenceEndpoint } from '@huggingface/inference';
import { reference } from './reference.mjs';

const baseURL = process.env.NGX_LLM_BASE_URL;
const engine = process.env.NGX_LLM_ENGINE, modelPath = process.env.NGX_LLM_MODEL;
if (!baseURL || !engine || !modelPath) throw new Error('tests/openai_sdk/run.sh sets the environment');
const root = baseURL.replace(/\/v1$/, '');
const client = new HfInferenceEndpoint(root);
const model = 'tgi'; // the client wants a name beside its URL; the server reads none
const PROMPT = 'Once upon a time';
const TOKENS = 20;

const { generate, tokenize } = reference(baseURL, engine, modelPath);
let ref, nPrompt;
before(async () => {
    const ids = await tokenize({ prompt: PROMPT, add_special_tokens: true });
    nPrompt = ids.length;
    ref = generate(ids, TOKENS);
    assert.ok(ref.length > 0);
});

test('textGeneration: llm-engine generate\'s greedy text (do_sample false)', async () => {
    const r = await client.textGeneration({ model, inputs: PROMPT, parameters: { max_new_tokens: TOKENS } });
    assert.equal(r.generated_text, ref);
});

test('textGeneration with return_full_text: the prompt, then the same text', async () => {
    const r = await client.textGeneration({ model, inputs: PROMPT,
        parameters: { max_new_tokens: TOKENS, return_full_text: true } });
    assert.equal(r.generated_text, PROMPT + ref);
});

test('textGenerationStream: one event a token, their texts join into generated_text, details on the last', async () => {
    const events = [];
    for await (const ev of client.textGenerationStream({ model, inputs: PROMPT,
        parameters: { max_new_tokens: TOKENS, details: true } })) events.push(ev);
    assert.equal(events.length, TOKENS);
    events.forEach((ev, i) => {
        assert.equal(ev.index, i + 1);
        assert.equal(typeof ev.token.id, 'number');
        assert.ok(ev.token.logprob <= 0);
        assert.equal(ev.token.special, false);
        if (i < TOKENS - 1) assert.equal(ev.generated_text, null);
    });
    const last = events[TOKENS - 1];
    assert.equal(events.map((ev) => ev.token.text).join(''), ref);
    assert.equal(last.generated_text, ref);
    assert.deepEqual(last.details, { finish_reason: 'length', generated_tokens: TOKENS, seed: null, input_length: nPrompt });
});

test('a stop sequence: the text ends before it, finish_reason stop_sequence', async () => {
    const cut = ref.indexOf(' named');
    assert.ok(cut > 0, 'the reference text has the stop sequence');
    const events = [];
    for await (const ev of client.textGenerationStream({ model, inputs: PROMPT,
        parameters: { max_new_tokens: TOKENS, stop: [' named'], details: true } })) events.push(ev);
    const last = events[events.length - 1];
    assert.equal(last.generated_text, ref.slice(0, cut));
    assert.equal(events.map((ev) => ev.token.text).join(''), ref.slice(0, cut));
    assert.equal(last.details.finish_reason, 'stop_sequence');
});

test('/generate and /generate_stream by fetch: the same text; details list each token', async () => {
    const res = await fetch(root + '/generate', { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: PROMPT, parameters: { max_new_tokens: TOKENS, details: true } }) });
    assert.equal(res.status, 200);
    const r = await res.json();
    assert.equal(r.generated_text, ref);
    assert.equal(r.details.finish_reason, 'length');
    assert.equal(r.details.tokens.length, TOKENS);
    assert.equal(r.details.tokens.map((t) => t.text).join(''), ref);
    const s = await fetch(root + '/generate_stream', { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: PROMPT, parameters: { max_new_tokens: TOKENS } }) });
    assert.equal(s.headers.get('content-type'), 'text/event-stream');
    const body = await s.text();
    const events = body.split('\n\n').filter((x) => x).map((x) => JSON.parse(x.replace(/^data: ?/, '')));
    assert.equal(events.length, TOKENS);
    assert.equal(events[TOKENS - 1].generated_text, ref);
    assert.deepEqual(events.map((ev) => ev.token.id), r.details.tokens.map((t) => t.id));
});

test('typical_p (LangChain\'s default 0.95) samples; a seed reproduces it', async () => {
    const ask = () => client.textGeneration({ model, inputs: PROMPT,
        parameters: { max_new_tokens: TOKENS, typical_p: 0.95, seed: 11, details: true } });
    const [a, b] = [await ask(), await ask()];
    assert.equal(a.generated_text, b.generated_text);
    assert.ok(a.generated_text.length > 0);
});

test('/info: the model and the context', async () => {
    const info = await (await fetch(root + '/info')).json();
    const models = await (await fetch(baseURL + '/models')).json();
    assert.equal(info.model_id, models.data[0].id);
    assert.equal(info.max_total_tokens, models.data[0].max_model_len);
    assert.ok(info.max_input_tokens < info.max_total_tokens);
});

test('refusals reach the client with the server\'s message (TGI\'s 422)', async () => {
    await assert.rejects(client.textGeneration({ model, inputs: PROMPT, parameters: { watermark: true } }),
        /watermark/);
    await assert.rejects(client.textGeneration({ model, inputs: PROMPT, parameters: { max_new_tokens: 0 } }),
        /max_new_tokens/);
    const res = await fetch(root + '/generate', { method: 'POST', body: '{"inputs": 1}' });
    assert.equal(res.status, 422);
    assert.deepEqual(Object.keys(await res.json()), ['error', 'error_type']);
});
