// The official OpenAI Node.js SDK against `make serve` (tests/openai_sdk/run.sh
// starts it): greedy completions and chat completions, plain and streamed, must
// give exactly the text `llm-engine generate` gives for the same prompt tokens.
//   NGX_LLM_BASE_URL  http://127.0.0.1:PORT/v1
//   NGX_LLM_ENGINE    path to llm-engine (for the reference text)
//   NGX_LLM_MODEL     the model file the server was started with
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import OpenAI from 'openai';
import { reference } from './reference.mjs';

const baseURL = process.env.NGX_LLM_BASE_URL;
const engine = process.env.NGX_LLM_ENGINE;
const modelPath = process.env.NGX_LLM_MODEL;
if (!baseURL || !engine || !modelPath) {
    throw new Error('set NGX_LLM_BASE_URL, NGX_LLM_ENGINE and NGX_LLM_MODEL (tests/openai_sdk/run.sh does)');
}

const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
const { generate, tokenize } = reference(baseURL, engine, modelPath);
const PROMPT = 'Once upon a time';
const MESSAGES = [{ role: 'user', content: PROMPT }];
const COMPLETION_TOKENS = 40;
const CHAT_TOKENS = 20;

let model, refCompletion, refChat;
before(async () => {
    const models = await client.models.list();
    assert.equal(models.data.length, 2); // stories260K, and tiny-llama3-q8_0 (make serve MODELS=...)
    model = models.data[0].id;
    refCompletion = generate(await tokenize({ prompt: PROMPT }), COMPLETION_TOKENS);
    refChat = generate(await tokenize({ messages: MESSAGES }), CHAT_TOKENS);
    assert.ok(refCompletion.length > 0 && refChat.length > 0, 'llm-engine generate gave text');
});

test('two models behind one URL: the second listed, and a request naming it is answered by its engine', async () => {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), [model, 'tiny-llama3-q8_0']);
    assert.equal((await client.models.retrieve('tiny-llama3-q8_0')).id, 'tiny-llama3-q8_0');
    // the same model served alone (the tools service) gives the same greedy text
    const alone = new OpenAI({ baseURL: process.env.NGX_LLM_TOOLS_URL, apiKey: 'unused', maxRetries: 0 });
    const ask = (c) => c.chat.completions.create({ model: 'tiny-llama3-q8_0', messages: MESSAGES, max_tokens: 12,
                                                   temperature: 0 });
    const [here, there] = await Promise.all([ask(client), ask(alone)]);
    assert.equal(here.model, 'tiny-llama3-q8_0');
    assert.equal(here.choices[0].message.content, there.choices[0].message.content);
    assert.equal(here.usage.prompt_tokens, there.usage.prompt_tokens);
    // and the first model is still the default's
    const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 8, temperature: 0 });
    assert.equal(r.model, model);
    await assert.rejects(client.completions.create({ model: 'nope', prompt: PROMPT, max_tokens: 1 }),
                         (e) => e.status === 404 && /serves 'stories260K', 'tiny-llama3-q8_0'/.test(e.message));
});

test('completions.create: greedy text equals llm-engine generate', async () => {
    const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: COMPLETION_TOKENS, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].text, refCompletion);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, COMPLETION_TOKENS);
});

test('completions.create stream: the deltas join to the same text', async () => {
    const stream = await client.completions.create({
        model, prompt: PROMPT, max_tokens: COMPLETION_TOKENS, temperature: 0, stream: true,
        stream_options: { include_usage: true },
    });
    let text = '', finish = null, usage = null, chunks = 0;
    for await (const c of stream) {
        chunks++;
        if (c.usage) usage = c.usage;
        for (const ch of c.choices) {
            text += ch.text;
            if (ch.finish_reason) finish = ch.finish_reason;
        }
    }
    assert.equal(text, refCompletion);
    assert.equal(finish, 'length');
    assert.ok(chunks > COMPLETION_TOKENS / 2, `streamed in pieces (${chunks} chunks)`);
    assert.equal(usage?.completion_tokens, COMPLETION_TOKENS);
});

test('chat.completions.create: greedy content equals llm-engine generate', async () => {
    const r = await client.chat.completions.create({ model, messages: MESSAGES, max_tokens: CHAT_TOKENS, temperature: 0 });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(r.choices[0].message.content, refChat);
    assert.equal(r.choices[0].finish_reason, 'length');
});

test('chat.completions.create stream: the deltas join to the same content', async () => {
    const stream = await client.chat.completions.create({
        model, messages: MESSAGES, max_tokens: CHAT_TOKENS, temperature: 0, stream: true,
    });
    let text = '', role = null, finish = null;
    for await (const c of stream) {
        const d = c.choices[0];
        if (!d) continue;
        if (d.delta.role) role = d.delta.role;
        text += d.delta.content ?? '';
        if (d.finish_reason) finish = d.finish_reason;
    }
    assert.equal(role, 'assistant');
    assert.equal(text, refChat);
    assert.equal(finish, 'length');
});

test('chat.completions.stream helper: finalChatCompletion has the same content', async () => {
    const runner = client.chat.completions.stream({ model, messages: MESSAGES, max_tokens: CHAT_TOKENS, temperature: 0 });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].message.content, refChat);
});

test('a stop string cuts the greedy text where generate has it', async () => {
    // Four characters from the middle of the reference (stories260K: "Lily" style words).
    const stop = refCompletion.slice(Math.floor(refCompletion.length / 2), Math.floor(refCompletion.length / 2) + 4);
    const cut = refCompletion.indexOf(stop);
    const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: COMPLETION_TOKENS, temperature: 0, stop: [stop] });
    assert.equal(r.choices[0].text, refCompletion.slice(0, cut), `stop ${JSON.stringify(stop)}`);
    assert.equal(r.choices[0].finish_reason, 'stop');
});

test('n=2 greedy: both choices equal the reference', async () => {
    const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: COMPLETION_TOKENS, temperature: 0, n: 2 });
    assert.deepEqual(r.choices.map((c) => [c.index, c.text]), [[0, refCompletion], [1, refCompletion]]);
});

test('errors arrive as the SDK typed errors', async () => {
    await assert.rejects(client.completions.create({ model, prompt: PROMPT, n: 100 }),
        (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
});

test('logit_bias as the SDK sends it: -100 on the greedy first token (",", 432 in stories260K) changes the text', async () => {
    assert.equal(refCompletion.slice(0, 1), ',');
    const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 8, temperature: 0,
        logit_bias: { 432: -100 } });
    assert.equal(r.choices[0].text, ' there was a little girl named');
});

test('response_format json_object: chat content that JSON.parse reads as an object, finish_reason stop', async () => {
    // stories260K writes stories: biases toward '}' and '"', against newlines, so that it closes in time.
    const r = await client.chat.completions.create({ model, messages: MESSAGES, max_tokens: 400, temperature: 0.8,
        seed: 2, logit_bias: { 128: 10, 436: 5, 13: -100 }, response_format: { type: 'json_object' } });
    const content = r.choices[0].message.content;
    assert.equal(r.choices[0].finish_reason, 'stop', content);
    const v = JSON.parse(content);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v), content);
});

test('response_format json_schema (structured outputs): an object with the schema\'s properties, in order', async () => {
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' },
        happy: { type: 'boolean' } }, required: ['name', 'age', 'happy'], additionalProperties: false };
    const r = await client.chat.completions.create({ model, messages: MESSAGES, max_tokens: 200, temperature: 0.8,
        seed: 5, logit_bias: { 13: -100, 410: -100, 35: -100, 12: -100, 16: -100 },
        response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } } });
    const content = r.choices[0].message.content;
    assert.equal(r.choices[0].finish_reason, 'stop', content);
    const v = JSON.parse(content);
    assert.deepEqual(Object.keys(v), ['name', 'age', 'happy'], content);
    assert.ok(typeof v.name === 'string' && [...v.name].length <= 12, content);
    assert.ok(Number.isInteger(v.age) && typeof v.happy === 'boolean', content);
});

test('a schema keyword the server cannot follow: a 400 naming it', async () => {
    await assert.rejects(client.chat.completions.create({ model, messages: MESSAGES, response_format: {
        type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } } }),
    (e) => e.status === 400 && /'uniqueItems' is not supported/.test(e.message));
});

test('usage.prompt_tokens_details.cached_tokens: a repeated prompt is served from the prefix cache', async () => {
    const messages = [{ role: 'user', content: 'Tell me about the cat that sat on the warm mat in the sun' }];
    await client.chat.completions.create({ model, messages, max_tokens: 2, temperature: 0 });
    const r = await client.chat.completions.create({ model, messages, max_tokens: 2, temperature: 0 });
    const cached = r.usage.prompt_tokens_details?.cached_tokens;
    assert.ok(cached > 0 && cached % 16 === 0 && cached < r.usage.prompt_tokens, JSON.stringify(r.usage));
});

test('a list of prompts: one choice per prompt, in order', async () => {
    const r = await client.completions.create({ model, prompt: [PROMPT, PROMPT], max_tokens: COMPLETION_TOKENS,
        temperature: 0 });
    assert.deepEqual(r.choices.map((c) => [c.index, c.text]), [[0, refCompletion], [1, refCompletion]]);
});

test('echo with logprobs and max_tokens 0: the prompt scored, its first token null', async () => {
    const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 0, echo: true, logprobs: 1 });
    const c = r.choices[0];
    assert.equal(c.text, PROMPT);
    assert.equal(c.logprobs.token_logprobs[0], null);
    assert.ok(c.logprobs.token_logprobs.slice(1).every((x) => typeof x === 'number' && x <= 0), JSON.stringify(c.logprobs));
    assert.equal(c.logprobs.tokens.length, r.usage.prompt_tokens);
    assert.equal(r.usage.completion_tokens, 0);
});

// The SDK asks for base64 when no encoding_format is given and decodes it to numbers itself; the vectors must
// be llm-engine embed's (the same floats: the engine pools, the server makes them unit length).
function embed(text, extra = []) {
    const out = execFileSync(engine, ['embed', '--model', modelPath, '--prompt', text, ...extra],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return JSON.parse(out);
}

test('embeddings.create (base64 under the hood): llm-engine embed\'s vector, unit length', async () => {
    const r = await client.embeddings.create({ model, input: [PROMPT, 'A cat sat on the mat'] });
    assert.equal(r.object, 'list');
    assert.deepEqual(r.data.map((d) => d.index), [0, 1]);
    const ref = embed(PROMPT);
    const v = r.data[0].embedding;
    assert.equal(v.length, ref.length);
    assert.ok(v.every((x, i) => Math.abs(x - ref[i]) < 1e-6), 'the engine\'s vector');
    const norm = Math.sqrt(r.data[1].embedding.reduce((s, x) => s + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5, `unit length (${norm})`);
    assert.equal(r.usage.prompt_tokens, r.usage.total_tokens);
});

test('embeddings.create with dimensions and encoding_format float', async () => {
    const r = await client.embeddings.create({ model, input: PROMPT, dimensions: 8, encoding_format: 'float' });
    const v = r.data[0].embedding;
    assert.equal(v.length, 8);
    const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-6, `unit length (${norm})`);
});

test('responses.create: output_text (the SDK joins the message\'s text) equals llm-engine generate', async () => {
    const r = await client.responses.create({ model, input: PROMPT, max_output_tokens: CHAT_TOKENS, temperature: 0 });
    assert.equal(r.object, 'response');
    assert.match(r.id, /^resp_[0-9a-f]{16}$/);
    assert.equal(r.output_text, refChat);
    assert.equal(r.status, 'incomplete');
    assert.equal(r.incomplete_details.reason, 'max_output_tokens');
    assert.equal(r.usage.output_tokens, CHAT_TOKENS);
    assert.equal(r.output[0].type, 'message');
});

test('responses.create stream: output_text.delta events join to the same text; the SDK\'s stream helper agrees', async () => {
    const stream = await client.responses.create({ model, input: MESSAGES, max_output_tokens: CHAT_TOKENS, temperature: 0,
        stream: true });
    let text = '', last = -1, completed = null;
    for await (const ev of stream) {
        assert.equal(ev.sequence_number, last + 1, 'events numbered in order');
        last = ev.sequence_number;
        if (ev.type === 'response.output_text.delta') text += ev.delta;
        if (ev.type === 'response.incomplete' || ev.type === 'response.completed') completed = ev.response;
    }
    assert.equal(text, refChat);
    assert.equal(completed.output[0].content[0].text, refChat);
    const helper = client.responses.stream({ model, input: PROMPT, max_output_tokens: CHAT_TOKENS, temperature: 0 });
    const final = await helper.finalResponse(); // built from the events (the SDK adds no output_text here)
    assert.equal(final.output[0].content[0].text, refChat);
});

test('responses.create: text.format json_schema gives the schema\'s object; previous_response_id is a typed 400', async () => {
    // as the chat test above: the same prompt, seed and biases against whitespace tokens
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' },
        happy: { type: 'boolean' } }, required: ['name', 'age', 'happy'], additionalProperties: false };
    const r = await client.responses.create({ model, input: PROMPT, max_output_tokens: 200, temperature: 0.8, seed: 5,
        logit_bias: { 13: -100, 410: -100, 35: -100, 12: -100, 16: -100 },
        text: { format: { type: 'json_schema', name: 'person', strict: true, schema } } });
    assert.equal(r.status, 'completed', JSON.stringify(r.output));
    const v = JSON.parse(r.output_text);
    assert.deepEqual(Object.keys(v), ['name', 'age', 'happy'], r.output_text);
    await assert.rejects(client.responses.create({ model, input: 'Hi', previous_response_id: 'resp_0' }),
        (e) => e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id');
});

test('responses kept (llm_responses_store in make serve\'s config): retrieve, previous_response_id, delete', async () => {
    const r1 = await client.responses.create({ model, input: PROMPT, max_output_tokens: 8, temperature: 0 });
    assert.equal(r1.store, true);
    const got = await client.responses.retrieve(r1.id);
    assert.equal(got.id, r1.id);
    assert.equal(got.output[0].content[0].text, r1.output_text);
    // the next turn: the stored conversation goes before the new input, as the same chat would have it
    const r2 = await client.responses.create({ model, input: 'And then', previous_response_id: r1.id,
        max_output_tokens: 8, temperature: 0 });
    assert.equal(r2.previous_response_id, r1.id);
    const chat = await tokenize({ messages: [...MESSAGES, { role: 'assistant', content: r1.output_text },
        { role: 'user', content: 'And then' }] });
    assert.equal(r2.usage.input_tokens, chat.length);
    // a third turn: the chain back to r1, oldest first
    const r3 = await client.responses.create({ model, input: 'The end', previous_response_id: r2.id,
        max_output_tokens: 4, temperature: 0 });
    const chat3 = await tokenize({ messages: [...MESSAGES, { role: 'assistant', content: r1.output_text },
        { role: 'user', content: 'And then' }, { role: 'assistant', content: r2.output_text }, { role: 'user', content: 'The end' }] });
    assert.equal(r3.usage.input_tokens, chat3.length);
    assert.equal(r3.output_text, generate(chat3, 4)); // the same prompt, in the same order: the same greedy text
    // r2's input items: its one message (a string input is kept as a user message)
    const inputs = [];
    for await (const item of client.responses.inputItems.list(r2.id)) inputs.push(item);
    assert.equal(inputs.length, 1);
    assert.equal(inputs[0].role, 'user');
    assert.equal(inputs[0].content[0].text, 'And then');
    // three input items, one a page: the SDK follows the pages (newest first by default, then asc)
    const items = ['a', 'b', 'c'].map((t, i) => ({ role: i % 2 ? 'assistant' : 'user', content: t })); // (llama2: alternating)
    const r5 = await client.responses.create({ model, input: items, max_output_tokens: 1 });
    const seen = [];
    for await (const item of client.responses.inputItems.list(r5.id, { limit: 1 })) seen.push(item.content[0].text);
    assert.deepEqual(seen, ['c', 'b', 'a']);
    const asc = await client.responses.inputItems.list(r5.id, { order: 'asc' });
    assert.deepEqual(asc.data.map((i) => i.content[0].text), ['a', 'b', 'c']);
    const del = await client.responses.delete(r1.id);
    assert.equal(del?.deleted ?? true, true); // (the SDK may return nothing for a DELETE)
    await assert.rejects(client.responses.retrieve(r1.id), (e) => e instanceof OpenAI.NotFoundError);
    // r2's conversation started at r1, which is gone
    await assert.rejects(client.responses.create({ model, input: 'x', previous_response_id: r2.id, max_output_tokens: 2 }),
        (e) => e instanceof OpenAI.BadRequestError && e.code === 'previous_response_not_found');
    const r4 = await client.responses.create({ model, input: PROMPT, max_output_tokens: 2, store: false });
    assert.equal(r4.store, false);
    await assert.rejects(client.responses.retrieve(r4.id), (e) => e instanceof OpenAI.NotFoundError);
});
