// Anthropic's TypeScript SDK against `make serve` (tests/openai_sdk/run.sh starts it): POST /v1/messages.
// Greedy text must equal `llm-engine generate`'s on the chat prompt, plain and streamed (the SDK's
// MessageStream); tool use on the tiny Llama 3 model of tools.test.mjs, its results sent back as tool_result
// blocks; errors arrive as the SDK's typed errors.
//   NGX_LLM_BASE_URL, NGX_LLM_ENGINE, NGX_LLM_MODEL, NGX_LLM_TOOLS_URL (as for sdk.test.mjs, tools.test.mjs)
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { reference } from './reference.mjs';

const baseURL = process.env.NGX_LLM_BASE_URL, toolsURL = process.env.NGX_LLM_TOOLS_URL;
const engine = process.env.NGX_LLM_ENGINE, modelPath = process.env.NGX_LLM_MODEL;
if (!baseURL || !toolsURL || !engine || !modelPath) throw new Error('tests/openai_sdk/run.sh sets the environment');
// the SDK appends /v1/messages to its base URL
const client = new Anthropic({ baseURL: baseURL.replace(/\/v1$/, ''), apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
const tools = new Anthropic({ baseURL: toolsURL.replace(/\/v1$/, ''), apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
const { generate, tokenize } = reference(baseURL, engine, modelPath);
const MESSAGES = [{ role: 'user', content: 'Once upon a time' }];
const TOKENS = 20;

let model, refChat;
before(async () => {
    const res = await fetch(baseURL + '/models');
    model = (await res.json()).data[0].id;
    refChat = generate(await tokenize({ messages: MESSAGES }), TOKENS);
    assert.ok(refChat.length > 0);
});

test('messages.create: one text block, llm-engine generate\'s text, stop_reason max_tokens', async () => {
    const m = await client.messages.create({ model, max_tokens: TOKENS, messages: MESSAGES, temperature: 0 });
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.match(m.id, /^msg_[0-9a-f]{16}$/);
    assert.equal(m.content.length, 1);
    assert.equal(m.content[0].type, 'text');
    assert.equal(m.content[0].text, refChat);
    assert.equal(m.stop_reason, 'max_tokens');
    assert.equal(m.usage.output_tokens, TOKENS);
});

test('messages.stream: the text events join to the same text; finalMessage agrees', async () => {
    const stream = client.messages.stream({ model, max_tokens: TOKENS, messages: MESSAGES, temperature: 0 });
    let text = '';
    stream.on('text', (t) => { text += t; });
    const final = await stream.finalMessage();
    assert.equal(text, refChat);
    assert.equal(final.content[0].text, refChat);
    assert.equal(final.stop_reason, 'max_tokens');
});

test('stop_sequences: stop_reason stop_sequence names the one that matched', async () => {
    const cut = refChat.slice(4, 9); // a piece of the greedy text: the answer ends right before it
    const m = await client.messages.create({ model, max_tokens: TOKENS, messages: MESSAGES, temperature: 0,
        stop_sequences: ['no such text', cut] });
    assert.equal(m.stop_reason, 'stop_sequence');
    assert.equal(m.stop_sequence, cut);
    assert.equal(m.content[0].text, refChat.slice(0, refChat.indexOf(cut)));
});

test('errors arrive as the SDK\'s typed errors: an unknown model, an image block', async () => {
    await assert.rejects(client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 4, messages: MESSAGES }),
        (e) => e instanceof Anthropic.NotFoundError && e.error.error.type === 'not_found_error');
    await assert.rejects(client.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image',
        source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }),
        (e) => e instanceof Anthropic.BadRequestError && /image/.test(e.message));
});

const WEATHER = { name: 'get_weather', description: 'The weather in a city',
    input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] } };

test('tool use: a tool_use block with its input; the result goes back as a tool_result block', async () => {
    const q = [{ role: 'user', content: 'What is the weather in Oslo?' }];
    const m = await tools.messages.create({ model: 'tiny-llama3-q8_0', max_tokens: 300, messages: q, tools: [WEATHER],
        tool_choice: { type: 'tool', name: 'get_weather' }, temperature: 0.8, seed: 7 });
    assert.equal(m.stop_reason, 'tool_use');
    const use = m.content.find((b) => b.type === 'tool_use');
    assert.ok(use, JSON.stringify(m.content));
    assert.match(use.id, /^toolu_[0-9a-f]{24}$/);
    assert.equal(use.name, 'get_weather');
    assert.equal(typeof use.input.city, 'string');
    const next = await tools.messages.create({ model: 'tiny-llama3-q8_0', max_tokens: 4, tools: [WEATHER], temperature: 0,
        messages: [...q, { role: 'assistant', content: m.content },
            { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] }] });
    assert.ok(['max_tokens', 'end_turn', 'tool_use'].includes(next.stop_reason));
    assert.ok(next.usage.input_tokens + (next.usage.cache_read_input_tokens ?? 0) >
              m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0));
});

test('tool use streamed: the SDK assembles the input from input_json_delta', async () => {
    const stream = tools.messages.stream({ model: 'tiny-llama3-q8_0', max_tokens: 300, tools: [WEATHER],
        messages: [{ role: 'user', content: 'Weather in Oslo?' }], tool_choice: { type: 'any' }, temperature: 0.8, seed: 9 });
    const final = await stream.finalMessage();
    const use = final.content.find((b) => b.type === 'tool_use');
    assert.equal(final.stop_reason, 'tool_use');
    assert.equal(use.name, 'get_weather');
    assert.equal(typeof use.input.city, 'string');
});

test('messages.countTokens: the prompt tokens of the body, as the server would take it', async () => {
    const r = await client.messages.countTokens({ model, messages: MESSAGES });
    assert.equal(r.input_tokens, (await tokenize({ messages: MESSAGES })).length);
});
