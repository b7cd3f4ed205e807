// Function calling through the official OpenAI Node.js SDK (tests/openai_sdk/run.sh starts the service on
// a tiny random model with Llama 3's tokenizer and chat template): the SDK reads our tool_calls, plain and
// streamed, and its runTools helper calls a function with the arguments it parsed from them. The model's
// weights are random: tool_choice holds its answers to the calls' schema.
//   NGX_LLM_TOOLS_URL  http://127.0.0.1:PORT/v1
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.NGX_LLM_TOOLS_URL;
if (!baseURL) throw new Error('set NGX_LLM_TOOLS_URL (tests/openai_sdk/run.sh does)');
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
const model = 'tiny-llama3-q8_0';
const MESSAGES = [{ role: 'user', content: 'What is the weather in Oslo?' }];
const WEATHER = {
    type: 'function',
    function: {
        name: 'get_weather', description: 'The weather in a city',
        parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'],
            additionalProperties: false },
    },
};
const NOW = { type: 'function', function: { name: 'now', parameters: { type: 'object', properties: {}, additionalProperties: false } } };

test('tool_choice required: message.tool_calls with a call of one of the tools, finish_reason tool_calls', async () => {
    const r = await client.chat.completions.create({ model, messages: MESSAGES, tools: [WEATHER, NOW], tool_choice: 'required',
        max_tokens: 300, temperature: 0.8, seed: 7 });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    assert.match(call.id, /^call_[0-9a-f]{24}$/);
    assert.equal(call.type, 'function');
    assert.ok(['get_weather', 'now'].includes(call.function.name), call.function.name);
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === 'get_weather') assert.equal(typeof args.city, 'string');
    else assert.deepEqual(args, {});
});

test('streamed with a named tool_choice: the SDK\'s stream helper assembles the call', async () => {
    const stream = client.chat.completions.stream({ model, messages: MESSAGES, tools: [WEATHER, NOW],
        tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 300, temperature: 0.8, seed: 9 });
    const done = await stream.finalChatCompletion();
    const call = done.choices[0].message.tool_calls[0];
    assert.equal(done.choices[0].finish_reason, 'tool_calls');
    assert.equal(call.function.name, 'get_weather');
    assert.equal(typeof JSON.parse(call.function.arguments).city, 'string');
});

test('runTools: the SDK calls our function with the arguments it parsed, then the conversation goes on', async () => {
    const seen = [];
    const runner = client.chat.completions.runTools({ model, messages: MESSAGES, max_tokens: 300, temperature: 0.8,
        seed: 11, tool_choice: { type: 'function', function: { name: 'get_weather' } },
        tools: [{ type: 'function', function: { ...WEATHER.function, parse: JSON.parse,
            function: (args) => { seen.push(args); return 'sunny'; } } }] });
    await runner.done();
    assert.equal(seen.length, 1);
    assert.equal(typeof seen[0].city, 'string');
    // the call and its result go back as history (assistant tool_calls, role tool): the server takes them
    const msgs = runner.messages;
    assert.ok(msgs.some((m) => m.role === 'tool' && m.content === 'sunny'), JSON.stringify(msgs));
    const next = await client.chat.completions.create({ model, messages: msgs, tools: [WEATHER], max_tokens: 4,
        temperature: 0 });
    assert.ok(['length', 'stop', 'tool_calls'].includes(next.choices[0].finish_reason));
});

test('a tool whose parameters the server cannot hold a call to: the SDK gets a 400 naming it', async () => {
    const bad = { type: 'function', function: { name: 'd', parameters: { type: 'object',
        properties: { day: { type: 'integer', multipleOf: 7 } } } } };
    await assert.rejects(client.chat.completions.create({ model, messages: MESSAGES, tools: [bad], tool_choice: 'required' }),
        (e) => e.status === 400 && /'multipleOf' is not supported/.test(e.message));
});

test('responses.create with a required tool: a function_call item; its output goes back as input items', async () => {
    const tools = [{ type: 'function', ...WEATHER.function }, { type: 'function', ...NOW.function }];
    const input = [{ role: 'user', content: 'What is the weather in Oslo?' }];
    const r = await client.responses.create({ model, input, tools, tool_choice: 'required', max_output_tokens: 300,
        temperature: 0.8, seed: 7 });
    assert.equal(r.status, 'completed', JSON.stringify(r.output));
    const call = r.output.find((o) => o.type === 'function_call');
    assert.ok(call, JSON.stringify(r.output));
    assert.match(call.call_id, /^call_[0-9a-f]{24}$/);
    assert.ok(['get_weather', 'now'].includes(call.name), call.name);
    JSON.parse(call.arguments);
    // the Responses way of going on: the output items back as input, then the call's output
    const next = await client.responses.create({ model, tools, max_output_tokens: 4, temperature: 0,
        input: [...input, ...r.output, { type: 'function_call_output', call_id: call.call_id, output: 'sunny' }] });
    assert.ok(['completed', 'incomplete'].includes(next.status));
    assert.ok(next.usage.input_tokens > r.usage.input_tokens);
});

test('responses.stream with a named tool: the SDK\'s helper assembles the function_call item', async () => {
    const tools = [{ type: 'function', ...WEATHER.function }];
    const stream = client.responses.stream({ model, input: 'Weather in Oslo?', tools,
        tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 300, temperature: 0.8, seed: 9 });
    let argsDone = null;
    stream.on('response.function_call_arguments.done', (ev) => { argsDone = ev.arguments; });
    const final = await stream.finalResponse();
    const call = final.output.find((o) => o.type === 'function_call');
    assert.equal(call.name, 'get_weather');
    assert.equal(call.arguments, argsDone);
    assert.equal(typeof JSON.parse(call.arguments).city, 'string');
});
