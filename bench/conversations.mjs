// A multi-turn conversation load on /v1/completions: CONVERSATIONS conversations, CONCURRENCY of them at
// once, TURNS turns each. A turn's prompt is the conversation so far (a system text shared by all of them, the
// user's turns and the assistant's answers) with a new user turn; streamed, greedy, MAX_TOKENS tokens. Prints
// one JSON line: requests, time to first token (p50, p90, mean, ms), prompt tokens and those the server's
// prefix cache served (usage.prompt_tokens_details.cached_tokens), wall time, and the requests each replica
// (X-Engine) took.
//   node bench/conversations.mjs URL CONVERSATIONS CONCURRENCY TURNS MAX_TOKENS TAG
// TAG starts every conversation's first user turn, so that runs with different tags share only the system text.
const [url, nConv, conc, turns, maxTokens, tag] = process.argv.slice(2);
if (!tag) {
    console.error('usage: node bench/conversations.mjs URL CONVERSATIONS CONCURRENCY TURNS MAX_TOKENS TAG');
    process.exit(2);
}
const WORDS = ('the a little girl boy dog cat bird tree park ball sun moon river house garden flower friend mom dad ' +
    'happy sad big small red blue green jumped ran played saw found wanted liked said looked went came day night ' +
    'morning rain snow box toy cake apple car boat hill road door window').split(' ');
const SYSTEM = 'You are a friendly storyteller. You answer every question with a short, happy story for young ' +
    'children, in simple words, with a kind ending. Keep each answer to a few sentences and never say anything ' +
    'scary or sad for long.';

let seed = 1;
for (const ch of tag) seed = (seed * 31 + ch.charCodeAt(0)) >>> 0;
function rand() { // xorshift32: the same questions for the same tag
    seed ^= seed << 13; seed >>>= 0;
    seed ^= seed >>> 17;
    seed ^= seed << 5; seed >>>= 0;
    return seed / 4294967296;
}
function question(n) {
    const w = [];
    for (let i = 0; i < n; i++) w.push(WORDS[Math.floor(rand() * WORDS.length)]);
    return 'Tell me about ' + w.join(' ') + '?';
}

const ttft = [], engines = {};
let promptTokens = 0, cachedTokens = 0, requests = 0, failed = 0;

async function turn(prompt) {
    const t0 = performance.now();
    const res = await fetch(url + '/v1/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt, max_tokens: Number(maxTokens), temperature: 0, ignore_eos: true, stream: true,
                               stream_options: { include_usage: true } }),
    });
    if (res.status !== 200) { failed++; await res.text(); return ''; }
    const eng = res.headers.get('x-engine') || '-';
    engines[eng] = (engines[eng] || 0) + 1;
    const dec = new TextDecoder();
    let buf = '', text = '', first = 0;
    for await (const chunk of res.body) {
        buf += dec.decode(chunk, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
            const ev = buf.slice(0, i);
            buf = buf.slice(i + 2);
            if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
            const d = JSON.parse(ev.slice(6));
            if (d.choices && d.choices.length && d.choices[0].text) {
                if (!first) first = performance.now();
                text += d.choices[0].text;
            }
            if (d.usage) {
                promptTokens += d.usage.prompt_tokens;
                cachedTokens += (d.usage.prompt_tokens_details || {}).cached_tokens || 0;
            }
        }
    }
    ttft.push((first || performance.now()) - t0);
    requests++;
    return text;
}

async function conversation(c) {
    let prompt = SYSTEM + '\nUser: ' + tag + ' ' + c + '. ' + question(12) + '\nAssistant:';
    for (let t = 0; t < Number(turns); t++) {
        const answer = await turn(prompt);
        prompt += answer + '\nUser: ' + question(12) + '\nAssistant:';
    }
}

const t0 = performance.now();
let next = 0;
await Promise.all(Array.from({ length: Number(conc) }, async () => {
    while (next < Number(nConv)) await conversation(next++);
}));
const wall = (performance.now() - t0) / 1000;
ttft.sort((a, b) => a - b);
const q = p => ttft.length ? ttft[Math.min(ttft.length - 1, Math.floor(p * ttft.length))] : 0;
console.log(JSON.stringify({
    requests, failed, ttft_p50: q(0.5), ttft_p90: q(0.9), ttft_mean: ttft.reduce((a, b) => a + b, 0) / (ttft.length || 1),
    prompt_tokens: promptTokens, cached_tokens: cachedTokens, wall_s: wall, engines,
}));
