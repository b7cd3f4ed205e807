/* SentencePiece-style BPE with scores, as llama2.c's encoder does it: an
 * optional dummy-prefix space, one symbol per UTF-8 character (a character
 * missing from the vocabulary falls back to its <0xNN> byte tokens), then
 * repeatedly merge the adjacent pair whose concatenation is the highest-scoring
 * token (leftmost on ties) until no pair is a token. Invalid UTF-8 bytes are
 * byte tokens too (llama2.c would glue a stray continuation byte onto the
 * previous character; SentencePiece does not, and neither do we).
 * A tokenizer.json of this kind (Gemma, Llama 2: model BPE with byte_fallback
 * behind a normalizer that writes spaces as '▁') has merges instead of scores:
 * the same symbols then merge by merge rank, as Hugging Face's BPE does. */
#include "tokenizer_priv.h"

#include <stdlib.h>
#include <string.h>

static int push_byte(const llm_tokenizer *t, tok_work *w, unsigned char b, uint32_t at)
{
    int32_t id = t->byte_id[b] >= 0 ? t->byte_id[b] : t->unk;
    return tok_work_sym(w, id, at, 1, 1);
}

int tok_spm_encode(const llm_tokenizer *t, const char *s, size_t len, int prefix_space, tok_vec *out)
{
    if (len > UINT32_MAX - 2)
        return -1;
    size_t n = len + (prefix_space ? 1 : 0);
    char *work = malloc(n + 1);
    if (work == NULL)
        return -1;
    if (prefix_space)
        work[0] = ' ';
    memcpy(work + (prefix_space ? 1 : 0), s, len);
    tok_work w = { 0 };
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        int k = tok_utf8_len((const unsigned char *)work + i, n - i);
        int32_t id = k > 0 ? tok_map_get(&t->by_raw, work + i, (size_t)k) : -1;
        if (id >= 0) {
            rc = tok_work_sym(&w, id, (uint32_t)i, (uint32_t)k, 0);
            i += (size_t)k;
            continue;
        }
        size_t c = k > 0 ? (size_t)k : 1;
        for (size_t j = 0; j < c && rc == 0; j++)
            rc = push_byte(t, &w, (unsigned char)work[i + j], (uint32_t)(i + j));
        i += c;
    }
    if (rc == 0)
        rc = tok_work_merge(t, &w, work, t->merges.keys == NULL, out);
    tok_work_free(&w);
    free(work);
    return rc;
}
