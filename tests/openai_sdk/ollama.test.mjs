// Ollama's JavaScript client (ollama-js, the `ollama` package) against `make serve` (tests/openai_sdk/run.sh
// starts it): /api/chat and /api/generate, plain and streamed, must give `llm-engine generate`'s greedy text on
// the prompt the server renders; /api/embed the vectors of /v1/embeddings; /api/tags, /api/show, /api/version; a conversation with tool calls and their
// results on the tiny Llama 3 model of tools.test.mjs; errors arrive as the client's ResponseError.
//   NGX_LLM_BASE_URL, NGX_LLM_ENGINE, NGX_LLM_MODEL, NGX_LLM_TOOLS_URL (as for sdk.test.mjs, tools.test.mjs)
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { reference } from './reference.mjs';

const baseURL = process.env.NGX_LLM_BASE_URL, toolsURL = process.env.NGX_LLM_TOOLS_URL;
const engine = process.env.NGX_LLM_ENGINE, modelPath = process.env.NGX_LLM_MODEL;
if (!baseURL || !toolsURL || !engine || !modelPath) throw new Error('tests/openai_sdk/run.sh sets the environment');
// the client appends /api/... to its host
const client = new Ollama({ host: baseURL.replace(/\/v1$/, '') });
const tools = new Ollama({ host: toolsURL.replace(/\/v1$/, '') });
const { generate, tokenize } = reference(baseURL, engine, modelPath);
const MESSAGES = [{ role: 'user', content: 'Once upon a time' }];
const TOKENS = 20;
const GREEDY = { temperature: 0, num_predict: TOKENS };

let model, refChat, refRaw, nChat;
before(async () => {
    const res = await fetch(baseURL + '/models');
    model = (await res.json()).data[0].id;
    const chatIds = await tokenize({ messages: MESSAGES });
    nChat = chatIds.length;
    refChat = generate(chatIds, TOKENS);
    refRaw = generate(await tokenize({ prompt: 'Once upon a time', add_special_tokens: true }), TOKENS);
    assert.ok(refChat.length > 0 && refRaw.length > 0);
});

test('version, list, ps and show: the served model, by its name and with the default tag', async () => {
    assert.match((await client.version()).version, /^\d+\.\d+\.\d+$/);
    const list = await client.list();
    assert.equal(list.models[0].name, model);
    assert.equal(list.models[0].details.format, 'gguf');
    assert.equal(list.models[0].details.family, 'llama');
    assert.equal(list.models[0].details.parameter_size, '260K');
    assert.ok(list.models[0].size > 0);
    const show = await client.show({ model: `${model}:latest` });
    assert.ok(show.capabilities.includes('completion'));
    assert.ok(!show.capabilities.includes('tools')); // stories260K's chat format (Llama 2's) has no function calling
    assert.ok(show.model_info['general.context_length'] > 0);
    const ps = await client.ps();
    assert.equal(ps.models[0].name, model);
    assert.equal(ps.models[0].context_length, show.model_info['general.context_length']);
});

test('chat: llm-engine generate\'s text on the chat prompt, done_reason length, the counts', async () => {
    const r = await client.chat({ model, messages: MESSAGES, stream: false, options: GREEDY });
    assert.equal(r.message.role, 'assistant');
    assert.equal(r.message.content, refChat);
    assert.equal(r.done, true);
    assert.equal(r.done_reason, 'length');
    assert.equal(r.eval_count, TOKENS);
    assert.equal(r.prompt_eval_count, nChat);
    assert.ok(r.total_duration >= r.eval_duration && r.eval_duration >= 0);
});

test('chat streamed: the parts join to the same text; the last one is done with the counts', async () => {
    let text = '', last;
    for await (const part of await client.chat({ model: `${model}:latest`, messages: MESSAGES, stream: true, options: GREEDY })) {
        if (!part.done) text += part.message.content;
        last = part;
    }
    assert.equal(text, refChat);
    assert.equal(last.done, true);
    assert.equal(last.done_reason, 'length');
    assert.equal(last.eval_count, TOKENS);
});

test('generate: templated, the chat\'s text; raw, the plain completion\'s; streamed, the same', async () => {
    const t = await client.generate({ model, prompt: 'Once upon a time', stream: false, options: GREEDY });
    assert.equal(t.response, refChat);
    const raw = await client.generate({ model, prompt: 'Once upon a time', raw: true, stream: false, options: GREEDY });
    assert.equal(raw.response, refRaw);
    let text = '';
    for await (const part of await client.generate({ model, prompt: 'Once upon a time', raw: true, stream: true,
        options: GREEDY })) text += part.response;
    assert.equal(text, refRaw);
});

test('generate without a prompt loads the model: done, done_reason load', async () => {
    const r = await client.generate({ model, prompt: '' });
    assert.equal(r.done, true);
    assert.equal(r.done_reason, 'load');
});

test('stop strings and a seed: the text ends before the stop; the same seed gives the same sample', async () => {
    const cut = refChat.slice(4, 9);
    const r = await client.chat({ model, messages: MESSAGES, stream: false, options: { ...GREEDY, stop: [cut] } });
    assert.equal(r.message.content, refChat.slice(0, refChat.indexOf(cut)));
    assert.equal(r.done_reason, 'stop');
    const opts = { temperature: 0.9, top_k: 40, top_p: 0.95, seed: 7, num_predict: TOKENS };
    const a = await client.chat({ model, messages: MESSAGES, stream: false, options: opts });
    const b = await client.chat({ model, messages: MESSAGES, stream: false, options: opts });
    assert.equal(a.message.content, b.message.content);
});

test('embed: the vectors of /v1/embeddings, cut to dimensions; embeddings (the older call): the same direction', async () => {
    const r = await client.embed({ model: `${model}:latest`, input: ['Once upon a time', 'The cat'], dimensions: 8 });
    const res = await fetch(baseURL + '/embeddings', { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input: ['Once upon a time', 'The cat'], dimensions: 8 }) });
    const openai = (await res.json()).data.map((d) => d.embedding);
    assert.deepEqual(r.embeddings, openai);
    assert.equal(r.embeddings[0].length, 8);
    assert.ok(r.prompt_eval_count > 0);
    // the older /api/embeddings: the vector as pooled, not of unit length; made so, /v1/embeddings' one
    const old = (await client.embeddings({ model, prompt: 'Once upon a time' })).embedding;
    const full = await fetch(baseURL + '/embeddings', { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input: 'Once upon a time' }) });
    const unit = (await full.json()).data[0].embedding;
    const norm = Math.hypot(...old);
    assert.equal(old.length, unit.length);
    assert.ok(Math.abs(norm - 1) > 1e-3, `not of unit length (${norm})`);
    assert.ok(old.every((x, k) => Math.abs(x / norm - unit[k]) < 1e-6));
});

test('a conversation with tool calls and their results (tiny Llama 3 model): answered', async () => {
    const weather = { type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
    const show = await tools.show({ model: (await tools.list()).models[0].name });
    assert.ok(show.capabilities.includes('tools'));
    const r = await tools.chat({ model: (await tools.list()).models[0].name, tools: [weather], stream: false,
        options: { temperature: 0, num_predict: 8 }, messages: [
            { role: 'user', content: 'Weather in Paris?' },
            { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
            { role: 'tool', content: '{"temperature": 21}', tool_name: 'get_weather' },
        ] });
    assert.equal(r.done, true);
    assert.equal(r.eval_count, 8);
    // the prompt is the one the same conversation in OpenAI's shape gets (the call's id: call_0)
    const res = await fetch(toolsURL.replace(/\/v1$/, '') + '/tokenize', { method: 'POST',
        headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tools: [weather], messages: [
            { role: 'user', content: 'Weather in Paris?' },
            { role: 'assistant', content: '', tool_calls: [{ id: 'call_0', type: 'function',
                function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
            { role: 'tool', tool_call_id: 'call_0', content: '{"temperature": 21}' },
        ] }) });
    assert.equal(res.status, 200);
    assert.equal(r.prompt_eval_count, (await res.json()).count);
});

test('errors arrive as the client\'s ResponseError: an unknown model, an option this server lacks, tools on a model without function calling', async () => {
    await assert.rejects(client.chat({ model: 'no-such-model', messages: MESSAGES, stream: false }),
        (e) => e.name === 'ResponseError' && e.status_code === 404 && /does not exist/.test(e.error));
    await assert.rejects(client.chat({ model, messages: MESSAGES, stream: false, options: { mirostat: 2 } }),
        (e) => e.status_code === 400 && /mirostat/.test(e.error));
    await assert.rejects(client.chat({ model, messages: MESSAGES, stream: false, tools: [{ type: 'function',
        function: { name: 'f', parameters: { type: 'object', properties: {} } } }] }),
        (e) => e.status_code === 400 && /function calling/.test(e.error));
    await assert.rejects(client.generate({ model, prompt: 'x', images: ['aGVsbG8='], stream: false }),
        (e) => e.status_code === 400 && /images/.test(e.error));
});
