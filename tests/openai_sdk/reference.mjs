// The reference texts the SDK tests compare against: `llm-engine generate`'s greedy text for the prompt tokens
// the server itself makes (its /tokenize renders the chat template the same way as its chat endpoints).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';

export function reference(baseURL, engine, modelPath) {
    // Greedy text from `llm-engine generate` for these prompt token ids (BOS included).
    function generate(ids, maxTokens) {
        const out = execFileSync(engine, ['generate', '--model', modelPath, '--prompt-ids', ids.join(','),
            '--max-tokens', String(maxTokens), '--temperature', '0'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
        return out.replace(/\n$/, ''); // generate ends its output with one newline
    }
    async function tokenize(body) {
        const res = await fetch(new URL('../tokenize', baseURL + '/'), {
            method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
        });
        assert.equal(res.status, 200, 'POST /tokenize');
        return (await res.json()).tokens;
    }
    return { generate, tokenize };
}
