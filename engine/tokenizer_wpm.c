/* WordPiece (BERT-family embedding models: bge, all-MiniLM, e5, BERT cross-encoders), as llama.cpp's
 * "bert" vocabulary (LLAMA_VOCAB_TYPE_WPM) tokenizes, so that the ids equal its ids on the same GGUF:
 *   - the text is split into words: whitespace (Unicode White_Space) ends a word; NUL, U+FFFD, invalid
 *     UTF-8 and control / format / private-use characters are dropped; a punctuation character (any
 *     general category P*), an ASCII symbol ($ + < = > ^ ` | ~) or a CJK ideograph is a word of its own;
 *     everything is lowercased (BertNormalizer's lowercase, on by default);
 *   - each word, prefixed with '▁' (the GGUF vocabulary spells word-initial pieces so, and continuation
 *     pieces without BERT's "##"), is matched greedily from the left, longest piece first; a word with a
 *     position that no piece matches becomes the single unknown token.
 * Left out: Unicode normalisation. With strip_accents (on by default, as lowercase is) llama.cpp maps each
 * code point to the first of its NFD and drops accent marks (M*); here there is no NFD: precomposed letters
 * stay whole, except those of Latin (U+00C0-U+024F, U+1E00-U+1EFF), Greek and Cyrillic, which
 * strip_accent() maps by table, and marks count only in the Basic Multilingual Plane. So Greek Extended,
 * kana with (han)dakuten, Hangul syllables (llama.cpp keeps their first jamo), CJK compatibility
 * ideographs and the like stay whole where llama.cpp changes them. Lowercasing is by hand-written rules
 * for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; other scripts (Latin Extended-B and
 * Additional, Armenian, Georgian, Cherokee, Glagolitic, fullwidth Latin, Deseret ...) keep their case
 * (strip_accents first folds most accented Latin letters to ASCII ones, which are lowercased). The
 * punctuation and mark tables are Unicode 14's. */
#include "tokenizer_priv.h"

#include <stdlib.h>
#include <string.h>

typedef uint32_t cp_range[2];

static int in_ranges(const cp_range *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0])
            hi = mid;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

/* General category P* above ASCII (Unicode 14). */
static const cp_range punct[] = {
    { 0x00a1, 0x00a1 }, { 0x00a7, 0x00a7 }, { 0x00ab, 0x00ab }, { 0x00b6, 0x00b7 }, { 0x00bb, 0x00bb },
    { 0x00bf, 0x00bf }, { 0x037e, 0x037e }, { 0x0387, 0x0387 }, { 0x055a, 0x055f }, { 0x0589, 0x058a },
    { 0x05be, 0x05be }, { 0x05c0, 0x05c0 }, { 0x05c3, 0x05c3 }, { 0x05c6, 0x05c6 }, { 0x05f3, 0x05f4 },
    { 0x0609, 0x060a }, { 0x060c, 0x060d }, { 0x061b, 0x061b }, { 0x061d, 0x061f }, { 0x066a, 0x066d },
    { 0x06d4, 0x06d4 }, { 0x0700, 0x070d }, { 0x07f7, 0x07f9 }, { 0x0830, 0x083e }, { 0x085e, 0x085e },
    { 0x0964, 0x0965 }, { 0x0970, 0x0970 }, { 0x09fd, 0x09fd }, { 0x0a76, 0x0a76 }, { 0x0af0, 0x0af0 },
    { 0x0c77, 0x0c77 }, { 0x0c84, 0x0c84 }, { 0x0df4, 0x0df4 }, { 0x0e4f, 0x0e4f }, { 0x0e5a, 0x0e5b },
    { 0x0f04, 0x0f12 }, { 0x0f14, 0x0f14 }, { 0x0f3a, 0x0f3d }, { 0x0f85, 0x0f85 }, { 0x0fd0, 0x0fd4 },
    { 0x0fd9, 0x0fda }, { 0x104a, 0x104f }, { 0x10fb, 0x10fb }, { 0x1360, 0x1368 }, { 0x1400, 0x1400 },
    { 0x166e, 0x166e }, { 0x169b, 0x169c }, { 0x16eb, 0x16ed }, { 0x1735, 0x1736 }, { 0x17d4, 0x17d6 },
    { 0x17d8, 0x17da }, { 0x1800, 0x180a }, { 0x1944, 0x1945 }, { 0x1a1e, 0x1a1f }, { 0x1aa0, 0x1aa6 },
    { 0x1aa8, 0x1aad }, { 0x1b5a, 0x1b60 }, { 0x1b7d, 0x1b7e }, { 0x1bfc, 0x1bff }, { 0x1c3b, 0x1c3f },
    { 0x1c7e, 0x1c7f }, { 0x1cc0, 0x1cc7 }, { 0x1cd3, 0x1cd3 }, { 0x2010, 0x2027 }, { 0x2030, 0x2043 },
    { 0x2045, 0x2051 }, { 0x2053, 0x205e }, { 0x207d, 0x207e }, { 0x208d, 0x208e }, { 0x2308, 0x230b },
    { 0x2329, 0x232a }, { 0x2768, 0x2775 }, { 0x27c5, 0x27c6 }, { 0x27e6, 0x27ef }, { 0x2983, 0x2998 },
    { 0x29d8, 0x29db }, { 0x29fc, 0x29fd }, { 0x2cf9, 0x2cfc }, { 0x2cfe, 0x2cff }, { 0x2d70, 0x2d70 },
    { 0x2e00, 0x2e2e }, { 0x2e30, 0x2e4f }, { 0x2e52, 0x2e5d }, { 0x3001, 0x3003 }, { 0x3008, 0x3011 },
    { 0x3014, 0x301f }, { 0x3030, 0x3030 }, { 0x303d, 0x303d }, { 0x30a0, 0x30a0 }, { 0x30fb, 0x30fb },
    { 0xa4fe, 0xa4ff }, { 0xa60d, 0xa60f }, { 0xa673, 0xa673 }, { 0xa67e, 0xa67e }, { 0xa6f2, 0xa6f7 },
    { 0xa874, 0xa877 }, { 0xa8ce, 0xa8cf }, { 0xa8f8, 0xa8fa }, { 0xa8fc, 0xa8fc }, { 0xa92e, 0xa92f },
    { 0xa95f, 0xa95f }, { 0xa9c1, 0xa9cd }, { 0xa9de, 0xa9df }, { 0xaa5c, 0xaa5f }, { 0xaade, 0xaadf },
    { 0xaaf0, 0xaaf1 }, { 0xabeb, 0xabeb }, { 0xfd3e, 0xfd3f }, { 0xfe10, 0xfe19 }, { 0xfe30, 0xfe52 },
    { 0xfe54, 0xfe61 }, { 0xfe63, 0xfe63 }, { 0xfe68, 0xfe68 }, { 0xfe6a, 0xfe6b }, { 0xff01, 0xff03 },
    { 0xff05, 0xff0a }, { 0xff0c, 0xff0f }, { 0xff1a, 0xff1b }, { 0xff1f, 0xff20 }, { 0xff3b, 0xff3d },
    { 0xff3f, 0xff3f }, { 0xff5b, 0xff5b }, { 0xff5d, 0xff5d }, { 0xff5f, 0xff65 }, { 0x10100, 0x10102 },
    { 0x1039f, 0x1039f }, { 0x103d0, 0x103d0 }, { 0x1056f, 0x1056f }, { 0x10857, 0x10857 }, { 0x1091f, 0x1091f },
    { 0x1093f, 0x1093f }, { 0x10a50, 0x10a58 }, { 0x10a7f, 0x10a7f }, { 0x10af0, 0x10af6 }, { 0x10b39, 0x10b3f },
    { 0x10b99, 0x10b9c }, { 0x10ead, 0x10ead }, { 0x10f55, 0x10f59 }, { 0x10f86, 0x10f89 }, { 0x11047, 0x1104d },
    { 0x110bb, 0x110bc }, { 0x110be, 0x110c1 }, { 0x11140, 0x11143 }, { 0x11174, 0x11175 }, { 0x111c5, 0x111c8 },
    { 0x111cd, 0x111cd }, { 0x111db, 0x111db }, { 0x111dd, 0x111df }, { 0x11238, 0x1123d }, { 0x112a9, 0x112a9 },
    { 0x1144b, 0x1144f }, { 0x1145a, 0x1145b }, { 0x1145d, 0x1145d }, { 0x114c6, 0x114c6 }, { 0x115c1, 0x115d7 },
    { 0x11641, 0x11643 }, { 0x11660, 0x1166c }, { 0x116b9, 0x116b9 }, { 0x1173c, 0x1173e }, { 0x1183b, 0x1183b },
    { 0x11944, 0x11946 }, { 0x119e2, 0x119e2 }, { 0x11a3f, 0x11a46 }, { 0x11a9a, 0x11a9c }, { 0x11a9e, 0x11aa2 },
    { 0x11c41, 0x11c45 }, { 0x11c70, 0x11c71 }, { 0x11ef7, 0x11ef8 }, { 0x11fff, 0x11fff }, { 0x12470, 0x12474 },
    { 0x12ff1, 0x12ff2 }, { 0x16a6e, 0x16a6f }, { 0x16af5, 0x16af5 }, { 0x16b37, 0x16b3b }, { 0x16b44, 0x16b44 },
    { 0x16e97, 0x16e9a }, { 0x16fe2, 0x16fe2 }, { 0x1bc9f, 0x1bc9f }, { 0x1da87, 0x1da8b }, { 0x1e95e, 0x1e95f },
};

/* Cc, Cf, Co and Cs: llama.cpp's "control" flag. */
static const cp_range control[] = {
    { 0x0000, 0x001f }, { 0x007f, 0x009f }, { 0x00ad, 0x00ad }, { 0x0600, 0x0605 }, { 0x061c, 0x061c },
    { 0x06dd, 0x06dd }, { 0x070f, 0x070f }, { 0x0890, 0x0891 }, { 0x08e2, 0x08e2 }, { 0x180e, 0x180e },
    { 0x200b, 0x200f }, { 0x202a, 0x202e }, { 0x2060, 0x2064 }, { 0x2066, 0x206f }, { 0xd800, 0xf8ff },
    { 0xfeff, 0xfeff }, { 0xfff9, 0xfffb }, { 0x110bd, 0x110bd }, { 0x110cd, 0x110cd }, { 0x13430, 0x13438 },
    { 0x1bca0, 0x1bca3 }, { 0x1d173, 0x1d17a }, { 0xe0001, 0xe0001 }, { 0xe0020, 0xe007f }, { 0xf0000, 0xffffd },
    { 0x100000, 0x10fffd },
};

static int is_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
           cp == 0x3000;
}

static int is_control(uint32_t cp)
{
    return in_ranges(control, sizeof(control) / sizeof(control[0]), cp);
}

/* A word of its own: punctuation, an ASCII symbol, or a CJK ideograph (BERT's _is_chinese_char ranges,
 * with 2B920 for 2B820 as Hugging Face's Rust code and llama.cpp have it). */
static int stands_alone(uint32_t cp)
{
    if (cp < 0x80)
        return cp > 0x20 && cp < 0x7f && !(cp >= '0' && cp <= '9') && !((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z');
    return in_ranges(punct, sizeof(punct) / sizeof(punct[0]), cp) || (cp >= 0x4e00 && cp <= 0x9fff) ||
           (cp >= 0x3400 && cp <= 0x4dbf) || (cp >= 0x20000 && cp <= 0x2a6df) || (cp >= 0x2a700 && cp <= 0x2b73f) ||
           (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b920 && cp <= 0x2ceaf) || (cp >= 0xf900 && cp <= 0xfaff) ||
           (cp >= 0x2f800 && cp <= 0x2fa1f);
}

/* General category M* in the Basic Multilingual Plane (Unicode 14): the accent marks strip_accents drops. */
static const cp_range marks[] = {
    { 0x0300, 0x036f }, { 0x0483, 0x0489 }, { 0x0591, 0x05bd }, { 0x05bf, 0x05bf }, { 0x05c1, 0x05c2 },
    { 0x05c4, 0x05c5 }, { 0x05c7, 0x05c7 }, { 0x0610, 0x061a }, { 0x064b, 0x065f }, { 0x0670, 0x0670 },
    { 0x06d6, 0x06dc }, { 0x06df, 0x06e4 }, { 0x06e7, 0x06e8 }, { 0x06ea, 0x06ed }, { 0x0711, 0x0711 },
    { 0x0730, 0x074a }, { 0x07a6, 0x07b0 }, { 0x07eb, 0x07f3 }, { 0x07fd, 0x07fd }, { 0x0816, 0x0819 },
    { 0x081b, 0x0823 }, { 0x0825, 0x0827 }, { 0x0829, 0x082d }, { 0x0859, 0x085b }, { 0x0898, 0x089f },
    { 0x08ca, 0x08e1 }, { 0x08e3, 0x0903 }, { 0x093a, 0x093c }, { 0x093e, 0x094f }, { 0x0951, 0x0957 },
    { 0x0962, 0x0963 }, { 0x0981, 0x0983 }, { 0x09bc, 0x09bc }, { 0x09be, 0x09c4 }, { 0x09c7, 0x09c8 },
    { 0x09cb, 0x09cd }, { 0x09d7, 0x09d7 }, { 0x09e2, 0x09e3 }, { 0x09fe, 0x09fe }, { 0x0a01, 0x0a03 },
    { 0x0a3c, 0x0a3c }, { 0x0a3e, 0x0a42 }, { 0x0a47, 0x0a48 }, { 0x0a4b, 0x0a4d }, { 0x0a51, 0x0a51 },
    { 0x0a70, 0x0a71 }, { 0x0a75, 0x0a75 }, { 0x0a81, 0x0a83 }, { 0x0abc, 0x0abc }, { 0x0abe, 0x0ac5 },
    { 0x0ac7, 0x0ac9 }, { 0x0acb, 0x0acd }, { 0x0ae2, 0x0ae3 }, { 0x0afa, 0x0aff }, { 0x0b01, 0x0b03 },
    { 0x0b3c, 0x0b3c }, { 0x0b3e, 0x0b44 }, { 0x0b47, 0x0b48 }, { 0x0b4b, 0x0b4d }, { 0x0b55, 0x0b57 },
    { 0x0b62, 0x0b63 }, { 0x0b82, 0x0b82 }, { 0x0bbe, 0x0bc2 }, { 0x0bc6, 0x0bc8 }, { 0x0bca, 0x0bcd },
    { 0x0bd7, 0x0bd7 }, { 0x0c00, 0x0c04 }, { 0x0c3c, 0x0c3c }, { 0x0c3e, 0x0c44 }, { 0x0c46, 0x0c48 },
    { 0x0c4a, 0x0c4d }, { 0x0c55, 0x0c56 }, { 0x0c62, 0x0c63 }, { 0x0c81, 0x0c83 }, { 0x0cbc, 0x0cbc },
    { 0x0cbe, 0x0cc4 }, { 0x0cc6, 0x0cc8 }, { 0x0cca, 0x0ccd }, { 0x0cd5, 0x0cd6 }, { 0x0ce2, 0x0ce3 },
    { 0x0d00, 0x0d03 }, { 0x0d3b, 0x0d3c }, { 0x0d3e, 0x0d44 }, { 0x0d46, 0x0d48 }, { 0x0d4a, 0x0d4d },
    { 0x0d57, 0x0d57 }, { 0x0d62, 0x0d63 }, { 0x0d81, 0x0d83 }, { 0x0dca, 0x0dca }, { 0x0dcf, 0x0dd4 },
    { 0x0dd6, 0x0dd6 }, { 0x0dd8, 0x0ddf }, { 0x0df2, 0x0df3 }, { 0x0e31, 0x0e31 }, { 0x0e34, 0x0e3a },
    { 0x0e47, 0x0e4e }, { 0x0eb1, 0x0eb1 }, { 0x0eb4, 0x0ebc }, { 0x0ec8, 0x0ecd }, { 0x0f18, 0x0f19 },
    { 0x0f35, 0x0f35 }, { 0x0f37, 0x0f37 }, { 0x0f39, 0x0f39 }, { 0x0f3e, 0x0f3f }, { 0x0f71, 0x0f84 },
    { 0x0f86, 0x0f87 }, { 0x0f8d, 0x0f97 }, { 0x0f99, 0x0fbc }, { 0x0fc6, 0x0fc6 }, { 0x102b, 0x103e },
    { 0x1056, 0x1059 }, { 0x105e, 0x1060 }, { 0x1062, 0x1064 }, { 0x1067, 0x106d }, { 0x1071, 0x1074 },
    { 0x1082, 0x108d }, { 0x108f, 0x108f }, { 0x109a, 0x109d }, { 0x135d, 0x135f }, { 0x1712, 0x1715 },
    { 0x1732, 0x1734 }, { 0x1752, 0x1753 }, { 0x1772, 0x1773 }, { 0x17b4, 0x17d3 }, { 0x17dd, 0x17dd },
    { 0x180b, 0x180d }, { 0x180f, 0x180f }, { 0x1885, 0x1886 }, { 0x18a9, 0x18a9 }, { 0x1920, 0x192b },
    { 0x1930, 0x193b }, { 0x1a17, 0x1a1b }, { 0x1a55, 0x1a5e }, { 0x1a60, 0x1a7c }, { 0x1a7f, 0x1a7f },
    { 0x1ab0, 0x1ace }, { 0x1b00, 0x1b04 }, { 0x1b34, 0x1b44 }, { 0x1b6b, 0x1b73 }, { 0x1b80, 0x1b82 },
    { 0x1ba1, 0x1bad }, { 0x1be6, 0x1bf3 }, { 0x1c24, 0x1c37 }, { 0x1cd0, 0x1cd2 }, { 0x1cd4, 0x1ce8 },
    { 0x1ced, 0x1ced }, { 0x1cf4, 0x1cf4 }, { 0x1cf7, 0x1cf9 }, { 0x1dc0, 0x1dff }, { 0x20d0, 0x20f0 },
    { 0x2cef, 0x2cf1 }, { 0x2d7f, 0x2d7f }, { 0x2de0, 0x2dff }, { 0x302a, 0x302f }, { 0x3099, 0x309a },
    { 0xa66f, 0xa672 }, { 0xa674, 0xa67d }, { 0xa69e, 0xa69f }, { 0xa6f0, 0xa6f1 }, { 0xa802, 0xa802 },
    { 0xa806, 0xa806 }, { 0xa80b, 0xa80b }, { 0xa823, 0xa827 }, { 0xa82c, 0xa82c }, { 0xa880, 0xa881 },
    { 0xa8b4, 0xa8c5 }, { 0xa8e0, 0xa8f1 }, { 0xa8ff, 0xa8ff }, { 0xa926, 0xa92d }, { 0xa947, 0xa953 },
    { 0xa980, 0xa983 }, { 0xa9b3, 0xa9c0 }, { 0xa9e5, 0xa9e5 }, { 0xaa29, 0xaa36 }, { 0xaa43, 0xaa43 },
    { 0xaa4c, 0xaa4d }, { 0xaa7b, 0xaa7d }, { 0xaab0, 0xaab0 }, { 0xaab2, 0xaab4 }, { 0xaab7, 0xaab8 },
    { 0xaabe, 0xaabf }, { 0xaac1, 0xaac1 }, { 0xaaeb, 0xaaef }, { 0xaaf5, 0xaaf6 }, { 0xabe3, 0xabea },
    { 0xabec, 0xabed }, { 0xfb1e, 0xfb1e }, { 0xfe00, 0xfe0f }, { 0xfe20, 0xfe2f },
};

static int is_mark(uint32_t cp)
{
    return in_ranges(marks, sizeof(marks) / sizeof(marks[0]), cp);
}

/* The first code point of a letter's NFD, where it is ASCII (a base letter): U+00C0-U+024F, then Latin
 * Extended Additional U+1E00-U+1EFF; '.' where it is the letter itself or not ASCII. */
static const char latin_base[] = "AAAAAA.CEEEEIIII.NOOOOO..UUUUY..aaaaaa.ceeeeiiii.nooooo..uuuuy.y"
                                 "AaAaAaCcCcCcCcDd..EeEeEeEeEeGgGgGgGgHh..IiIiIiIiI...JjKk.LlLlLl."
                                 "...NnNnNn...OoOoOo..RrRrRrSsSsSsSsTtTt..UuUuUuUuUuUuWwYyYZzZzZz."
                                 "................................Oo.............Uu..............."
                                 ".............AaIiOoUuUuUuUuUu.AaAa....GgKkOoOo..j...Gg..NnAa...."
                                 "AaAaEeEeIiIiOoOoRrRrUuUuSsTt..Hh......AaEeOoOoOoOoYy............"
                                 "................";
static const char latin_add_base[] = "AaBbBbBbCcDdDdDdDdDdEeEeEeEeEeFfGgHhHhHhHhHhIiIiKkKkKkLlLlLlLlMm"
                                     "MmMmNnNnNnNnOoOoOoOoPpPpRrRrRrRrSsSsSsSsSsTtTtTtTtUuUuUuUuUuVvVv"
                                     "WwWwWwWwWwXxXxYyZzZzZzhtwy......AaAaAaAaAaAaAaAaAaAaAaAaEeEeEeEe"
                                     "EeEeEeEeIiIiOoOoOoOoOoOoOoOoOoOoOoOoUuUuUuUuUuUuUuYyYyYyYy......";

/* The first code point of the NFD of the rest of those blocks, and of Greek and Cyrillic (U+0370-U+052F). */
static const uint32_t nfd_first[][2] = {
    { 0x01e2, 0x00c6 }, { 0x01e3, 0x00e6 }, { 0x01ee, 0x01b7 }, { 0x01ef, 0x0292 }, { 0x01fc, 0x00c6 },
    { 0x01fd, 0x00e6 }, { 0x01fe, 0x00d8 }, { 0x01ff, 0x00f8 }, { 0x0374, 0x02b9 }, { 0x037e, 0x003b },
    { 0x0385, 0x00a8 }, { 0x0386, 0x0391 }, { 0x0387, 0x00b7 }, { 0x0388, 0x0395 }, { 0x0389, 0x0397 },
    { 0x038a, 0x0399 }, { 0x038c, 0x039f }, { 0x038e, 0x03a5 }, { 0x038f, 0x03a9 }, { 0x0390, 0x03b9 },
    { 0x03aa, 0x0399 }, { 0x03ab, 0x03a5 }, { 0x03ac, 0x03b1 }, { 0x03ad, 0x03b5 }, { 0x03ae, 0x03b7 },
    { 0x03af, 0x03b9 }, { 0x03b0, 0x03c5 }, { 0x03ca, 0x03b9 }, { 0x03cb, 0x03c5 }, { 0x03cc, 0x03bf },
    { 0x03cd, 0x03c5 }, { 0x03ce, 0x03c9 }, { 0x03d3, 0x03d2 }, { 0x03d4, 0x03d2 }, { 0x0400, 0x0415 },
    { 0x0401, 0x0415 }, { 0x0403, 0x0413 }, { 0x0407, 0x0406 }, { 0x040c, 0x041a }, { 0x040d, 0x0418 },
    { 0x040e, 0x0423 }, { 0x0419, 0x0418 }, { 0x0439, 0x0438 }, { 0x0450, 0x0435 }, { 0x0451, 0x0435 },
    { 0x0453, 0x0433 }, { 0x0457, 0x0456 }, { 0x045c, 0x043a }, { 0x045d, 0x0438 }, { 0x045e, 0x0443 },
    { 0x0476, 0x0474 }, { 0x0477, 0x0475 }, { 0x04c1, 0x0416 }, { 0x04c2, 0x0436 }, { 0x04d0, 0x0410 },
    { 0x04d1, 0x0430 }, { 0x04d2, 0x0410 }, { 0x04d3, 0x0430 }, { 0x04d6, 0x0415 }, { 0x04d7, 0x0435 },
    { 0x04da, 0x04d8 }, { 0x04db, 0x04d9 }, { 0x04dc, 0x0416 }, { 0x04dd, 0x0436 }, { 0x04de, 0x0417 },
    { 0x04df, 0x0437 }, { 0x04e2, 0x0418 }, { 0x04e3, 0x0438 }, { 0x04e4, 0x0418 }, { 0x04e5, 0x0438 },
    { 0x04e6, 0x041e }, { 0x04e7, 0x043e }, { 0x04ea, 0x04e8 }, { 0x04eb, 0x04e9 }, { 0x04ec, 0x042d },
    { 0x04ed, 0x044d }, { 0x04ee, 0x0423 }, { 0x04ef, 0x0443 }, { 0x04f0, 0x0423 }, { 0x04f1, 0x0443 },
    { 0x04f2, 0x0423 }, { 0x04f3, 0x0443 }, { 0x04f4, 0x0427 }, { 0x04f5, 0x0447 }, { 0x04f8, 0x042b },
    { 0x04f9, 0x044b }, { 0x1e9b, 0x017f },
};

/* What NFD's first code point makes of cp (its base letter) in the blocks above; cp elsewhere. */
static uint32_t strip_accent(uint32_t cp)
{
    if (cp >= 0xc0 && cp < 0x250 && latin_base[cp - 0xc0] != '.')
        return (uint32_t)latin_base[cp - 0xc0];
    if (cp >= 0x1e00 && cp < 0x1f00 && latin_add_base[cp - 0x1e00] != '.')
        return (uint32_t)latin_add_base[cp - 0x1e00];
    size_t lo = 0, hi = sizeof(nfd_first) / sizeof(nfd_first[0]);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (nfd_first[mid][0] == cp)
            return nfd_first[mid][1];
        if (nfd_first[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return cp;
}

/* Capital -> small in pair runs: even code points (or odd, with odd set) one below their small letter. */
static uint32_t pair_lower(uint32_t cp, int odd)
{
    return (cp & 1) == (uint32_t)odd ? cp + 1 : cp;
}

static uint32_t greek_lower(uint32_t cp)
{
    if (cp == 0x370 || cp == 0x372 || cp == 0x376)
        return cp + 1;
    if (cp == 0x37f)
        return 0x3f3;
    if (cp == 0x386)
        return 0x3ac;
    if (cp >= 0x388 && cp <= 0x38a)
        return cp + 37;
    if (cp == 0x38c)
        return 0x3cc;
    if (cp == 0x38e || cp == 0x38f)
        return cp + 63;
    if ((cp >= 0x391 && cp <= 0x3a1) || (cp >= 0x3a3 && cp <= 0x3ab))
        return cp + 32;
    if (cp == 0x3cf)
        return 0x3d7;
    if (cp >= 0x3d8 && cp <= 0x3ef)
        return pair_lower(cp, 0);
    if (cp == 0x3f4)
        return 0x3b8;
    if (cp == 0x3f7 || cp == 0x3fa)
        return cp + 1;
    if (cp == 0x3f9)
        return 0x3f2;
    if (cp >= 0x3fd && cp <= 0x3ff)
        return cp - 130;
    return cp;
}

static uint32_t cyrillic_lower(uint32_t cp)
{
    if (cp <= 0x40f)
        return cp + 80;
    if (cp <= 0x42f)
        return cp + 32;
    if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48a && cp <= 0x4bf) || (cp >= 0x4d0 && cp <= 0x52f))
        return pair_lower(cp, 0);
    if (cp == 0x4c0)
        return 0x4cf;
    if (cp >= 0x4c1 && cp <= 0x4ce)
        return pair_lower(cp, 1);
    return cp;
}

/* Unicode's simple lowercase mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic. */
uint32_t tok_wpm_lower(uint32_t cp)
{
    if (cp < 0x80)
        return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    if (cp < 0x100)
        return cp >= 0xc0 && cp <= 0xde && cp != 0xd7 ? cp + 32 : cp;
    if (cp < 0x180) {
        if (cp == 0x130) /* İ */
            return 'i';
        if (cp == 0x178) /* Ÿ */
            return 0xff;
        if ((cp <= 0x137) || (cp >= 0x14a && cp <= 0x177))
            return pair_lower(cp, 0);
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e))
            return pair_lower(cp, 1);
        return cp;
    }
    if (cp >= 0x370 && cp < 0x400)
        return greek_lower(cp);
    if (cp >= 0x400 && cp < 0x530)
        return cyrillic_lower(cp);
    return cp;
}

/* The word being collected: "▁" then its normalised UTF-8. */
typedef struct {
    char  *s;
    size_t n, cap;
} wpm_word;

#define WORD_MARK "\xe2\x96\x81"

static int word_put(wpm_word *w, uint32_t cp)
{
    if (w->n + 4 > w->cap) {
        size_t nc = w->cap * 2;
        char *p = realloc(w->s, nc);
        if (p == NULL)
            return -1;
        w->s = p;
        w->cap = nc;
    }
    unsigned char *o = (unsigned char *)w->s + w->n;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        w->n += 1;
    } else if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        w->n += 2;
    } else if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        w->n += 3;
    } else {
        o[0] = (unsigned char)(0xf0 | cp >> 18);
        o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        o[3] = (unsigned char)(0x80 | (cp & 0x3f));
        w->n += 4;
    }
    return 0;
}

/* Greedy longest match from the left (no piece is longer than the longest spelling); a position that no
 * piece matches takes back the word's pieces and gives one unknown token instead (none without one). */
static int match_word(const llm_tokenizer *t, const char *s, size_t n, tok_vec *out)
{
    size_t start = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = n - i > t->max_text_len ? i + t->max_text_len : n;
        int32_t id = -1;
        for (; j > i && (id = tok_map_get(&t->by_text, s + i, j - i)) < 0; j--)
            ;
        if (id < 0) {
            out->n = start;
            break;
        }
        if (tok_vec_push(out, id))
            return -1;
        i = j;
    }
    return out->n == start && t->unk >= 0 ? tok_vec_push(out, t->unk) : 0;
}

/* Tokenize the collected word, if any, and start the next. */
static int word_end(const llm_tokenizer *t, wpm_word *w, tok_vec *out)
{
    int rc = w->n > 3 ? match_word(t, w->s, w->n, out) : 0;
    w->n = 3;
    return rc;
}

static int put_char(const llm_tokenizer *t, uint32_t cp, wpm_word *w, tok_vec *out)
{
    if (is_space(cp))
        return word_end(t, w, out);
    if (cp == 0 || cp == 0xfffd || is_control(cp))
        return 0;
    if (t->wpm_strip) {
        if (is_mark(cp))
            return 0;
        cp = strip_accent(cp);
    }
    uint32_t c = t->wpm_lower ? tok_wpm_lower(cp) : cp;
    if (!stands_alone(cp))
        return word_put(w, c);
    if (word_end(t, w, out) || word_put(w, c))
        return -1;
    return word_end(t, w, out);
}

static uint32_t utf8_cp(const unsigned char *u, int k)
{
    if (k == 1)
        return u[0];
    if (k == 2)
        return (uint32_t)(u[0] & 0x1f) << 6 | (u[1] & 0x3f);
    if (k == 3)
        return (uint32_t)(u[0] & 0x0f) << 12 | (uint32_t)(u[1] & 0x3f) << 6 | (u[2] & 0x3f);
    return (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3f) << 12 | (uint32_t)(u[2] & 0x3f) << 6 |
           (u[3] & 0x3f);
}

int tok_wpm_encode(const llm_tokenizer *t, const char *s, size_t len, tok_vec *out)
{
    wpm_word w = { malloc(64), 3, 64 };
    if (w.s == NULL)
        return -1;
    memcpy(w.s, WORD_MARK, 3);
    int rc = 0;
    for (size_t i = 0; i < len && rc == 0;) {
        int k = tok_utf8_len((const unsigned char *)s + i, len - i);
        if (k == 0) { /* an invalid byte reads as U+FFFD, which is dropped */
            i++;
            continue;
        }
        rc = put_char(t, utf8_cp((const unsigned char *)s + i, k), &w, out);
        i += (size_t)k;
    }
    if (rc == 0)
        rc = word_end(t, &w, out);
    free(w.s);
    return rc;
}
