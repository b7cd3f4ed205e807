/* Model loading by format sniffing, validation, description and freeing. */
#include "model.h"
#include "chat_template.h"
#include "model_priv.h"
#include "gguf.h"
#include "gguf_quants.h"
#include "tokenizer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

llm_model *llm_model_alloc(const char *format, const char *path, llm_err *err)
{
    llm_model *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        llm_seterr(err, "%s: out of memory", path);
        return NULL;
    }
    snprintf(m->format, sizeof(m->format), "%s", format);
    snprintf(m->path, sizeof(m->path), "%s", path);
    snprintf(m->arch, sizeof(m->arch), "llama");
    m->cfg.bos_id = m->cfg.eos_id = -1;
    return m;
}

int llm_model_own(llm_model *m, void *p, llm_err *err)
{
    void **no = p != NULL ? realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof(void *)) : NULL;
    if (no == NULL) {
        free(p);
        llm_seterr(err, "%s: out of memory", m->path);
        return -1;
    }
    m->owned = no;
    m->owned[m->n_owned++] = p;
    return 0;
}

int llm_model_owns(const llm_model *m, const void *p)
{
    for (int i = 0; i < m->n_owned; i++)
        if (m->owned[i] == p)
            return 1;
    return 0;
}

void llm_model_replace_owned(llm_model *m, const void *old, void *p)
{
    for (int i = 0; i < m->n_owned; i++)
        if (m->owned[i] == old) {
            free(m->owned[i]);
            m->owned[i] = p != NULL ? p : m->owned[--m->n_owned]; /* NULL: out of the list */
            return;
        }
}

int llm_model_cpu_packed(const llm_model *m, int by_fmt[LLM_CPU_PK_KINDS])
{
    int n = 0, count[LLM_CPU_PK_KINDS + 1] = { 0 };
    for (int l = 0; l < m->cfg.n_layers; l++) {
        llm_tensor *mats[LLM_LAYER_MATS_MAX];
        llm_layer_mats(&m->layers[l], &m->cfg, mats);
        for (int i = 0; i < llm_layer_n_mats(&m->cfg); i++)
            if (mats[i]->cpu_packed) {
                n++;
                count[mats[i]->cpu_packed]++;
            }
    }
    if (m->tok_embd.cpu_packed || m->output.cpu_packed) { /* the classifier (and a tied embedding) */
        n++;
        count[m->output.cpu_packed ? m->output.cpu_packed : m->tok_embd.cpu_packed]++;
    }
    for (int f = 0; by_fmt != NULL && f < LLM_CPU_PK_KINDS; f++)
        by_fmt[f] = count[f + 1];
    return n;
}

int llm_model_add_map(llm_model *m, void *base, size_t size, llm_err *err)
{
    void **nm = realloc(m->maps, (size_t)(m->n_maps + 1) * sizeof(void *));
    if (nm != NULL)
        m->maps = nm;
    size_t *ns = nm != NULL ? realloc(m->map_sizes, (size_t)(m->n_maps + 1) * sizeof(size_t)) : NULL;
    if (ns == NULL) {
        munmap(base, size);
        llm_seterr(err, "%s: out of memory", m->path);
        return -1;
    }
    m->map_sizes = ns;
    m->maps[m->n_maps] = base;
    m->map_sizes[m->n_maps++] = size;
    return 0;
}

const uint8_t *llm_model_map_file(llm_model *m, const char *path, size_t *size, llm_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        llm_seterr(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        llm_seterr(err, "%s: not a regular non-empty file", path);
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        llm_seterr(err, "%s: mmap failed: %s", path, strerror(errno));
        return NULL;
    }
    if (llm_model_add_map(m, p, (size_t)st.st_size, err) != 0)
        return NULL;
    *size = (size_t)st.st_size;
    return p;
}

int llm_model_norm_f32(llm_model *m, llm_tensor *dst, llm_dtype type, const void *data, int64_t n,
                       const char *what, llm_err *err)
{
    if (data == NULL) {
        llm_seterr(err, "%s: missing tensor %s", m->path, what);
        return -1;
    }
    if (n <= 0 || llm_dtype_block_elems(type) != 1) {
        llm_seterr(err, "%s: norm tensor %s must be f32/f16/bf16 with a positive length (got %s, %lld)", m->path,
                   what, llm_dtype_name(type), (long long)n);
        return -1;
    }
    float *f = malloc((size_t)n * sizeof(float));
    if (llm_model_own(m, f, err) != 0)
        return -1;
    llm_row_to_f32(type, data, f, (size_t)n);
    dst->type = LLM_F32;
    dst->ne[0] = n;
    dst->ne[1] = 1;
    dst->data = f;
    return 0;
}

int llm_model_f32_copy(llm_model *m, const llm_tensor *t, const char *name, int64_t cols, int64_t rows,
                       const float **out, llm_err *err)
{
    if (t->data == NULL || t->ne[0] != cols || t->ne[1] != rows || !llm_dtype_valid(t->type)) {
        llm_seterr(err, "%s: tensor %s must be %lld x %lld (got %lld x %lld)", m->path, name, (long long)rows,
                   (long long)cols, (long long)t->ne[1], (long long)t->ne[0]);
        return -1;
    }
    float *f = malloc((size_t)(rows * cols) * sizeof(float));
    if (llm_model_own(m, f, err) != 0)
        return -1;
    size_t rb = llm_dtype_row_bytes(t->type, (uint64_t)cols);
    for (int64_t r = 0; r < rows; r++)
        llm_row_to_f32(t->type, (const uint8_t *)t->data + (size_t)r * rb, f + (size_t)(r * cols), (size_t)cols);
    *out = f;
    return 0;
}

int llm_encoder_embeddings(llm_model *m, llm_err *err)
{
    llm_config *c = &m->cfg;
    int learned = m->pos_embd.data != NULL; /* (nomic-bert has no position rows: it rotates) */
    if (m->tok_embd.ne[1] > (1 << 24) || m->type_embd.ne[1] > 1024 || (learned && m->pos_embd.ne[1] < c->seq_len)) {
        llm_seterr(err, "%s: bad bert embeddings: %lld tokens, %lld types, %lld positions for a context of %d",
                   m->path, (long long)m->tok_embd.ne[1], (long long)m->type_embd.ne[1],
                   (long long)m->pos_embd.ne[1], c->seq_len);
        return -1;
    }
    c->vocab_size = (int)m->tok_embd.ne[1];
    c->n_types = (int)m->type_embd.ne[1];
    if (learned)
        m->pos_embd.ne[1] = c->seq_len; /* rows past the context are never read */
    return 0;
}

void llm_model_free(llm_model *m)
{
    if (m == NULL)
        return;
    if (m->tok != NULL)
        llm_tok_free(m->tok);
    for (int i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    for (int i = 0; i < m->n_maps; i++)
        munmap(m->maps[i], m->map_sizes[i]);
    free(m->maps);
    free(m->map_sizes);
    gguf_close(m->gguf);
    free(m);
}

llm_model *llm_model_load(const char *path, const char *tokenizer_path, llm_err *err)
{
    return llm_model_load_ex(path, tokenizer_path, 0, err);
}

llm_model *llm_model_load_ex(const char *path, const char *tokenizer_path, unsigned flags, llm_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        llm_seterr(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    llm_model *m;
    if (S_ISDIR(st.st_mode)) {
        m = llm_model_load_hf(path, flags, err);
    } else {
        char magic[4] = { 0 };
        FILE *f = fopen(path, "rb");
        if (f == NULL) {
            llm_seterr(err, "%s: cannot open: %s", path, strerror(errno));
            return NULL;
        }
        size_t got = fread(magic, 1, 4, f);
        fclose(f);
        m = (got == 4 && memcmp(magic, "GGUF", 4) == 0) ? llm_model_load_gguf(path, flags, err)
                                                         : llm_model_load_llama2c(path, err);
    }
    if (m == NULL || tokenizer_path == NULL)
        return m;
    llm_tokenizer *t = llm_tok_load(tokenizer_path, err);
    if (t == NULL) {
        llm_model_free(m);
        return NULL;
    }
    if (m->tok != NULL)
        llm_tok_free(m->tok);
    m->tok = t;
    snprintf(m->tok_path, sizeof(m->tok_path), "%s", tokenizer_path);
    if (strcmp(m->arch, "modern-bert") == 0) /* [CLS] and [SEP] are the model's, whatever the vocabulary */
        llm_modern_bert_tokens(m);
    return m;
}

static int check_tensor(const llm_model *m, const llm_tensor *t, const char *what, int64_t ne0, int64_t ne1,
                        int norm, llm_err *err)
{
    if (t->data == NULL && t->src == NULL) { /* src alone: conversion deferred (LLM_LOAD_DEFER_KQ) */
        llm_seterr(err, "%s: missing tensor %s", m->path, what);
        return -1;
    }
    if (!llm_dtype_valid(t->type) || (norm && t->type != LLM_F32)) {
        llm_seterr(err, "%s: tensor %s has unsupported type %s", m->path, what, llm_dtype_name(t->type));
        return -1;
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1) {
        llm_seterr(err, "%s: tensor %s has shape [%lld x %lld], config needs [%lld x %lld] (rows x cols: %lld x %lld)",
                   m->path, what, (long long)t->ne[1], (long long)t->ne[0], (long long)ne1, (long long)ne0,
                   (long long)ne1, (long long)ne0);
        return -1;
    }
    if (llm_dtype_row_bytes(t->type, (uint64_t)ne0) == 0) {
        llm_seterr(err, "%s: tensor %s: row of %lld is not a multiple of the %s block size", m->path, what,
                   (long long)ne0, llm_dtype_name(t->type));
        return -1;
    }
    return 0;
}

/* The architectures the loaders take (GGUF general.architecture; a HF model_type maps to one of them). */
static const char *const arch_names[] = {
    "llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "gemma", "gemma2", "gemma3", "gemma-embedding", "phi3",
    "smollm3", "granite", "granitemoe", "olmo2", "olmoe", "ernie4_5", "ernie4_5-moe", "glm4moe", "gpt-oss", "exaone", "exaone4", "seed_oss",
    "bert",
    "nomic-bert", "jina-bert-v2", "modern-bert",
};

int llm_model_arch_ok(const char *arch)
{
    for (size_t i = 0; i < sizeof(arch_names) / sizeof(arch_names[0]); i++)
        if (strcmp(arch, arch_names[i]) == 0)
            return 1;
    return 0;
}

void llm_model_arch_list(char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(arch_names) / sizeof(arch_names[0]) && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", arch_names[i]);
}

int llm_arch_llama_like(const char *arch)
{
    /* (ERNIE 4.5's checkpoints rotate pairs themselves; llama.cpp's converter keeps them) */
    return strcmp(arch, "llama") == 0 || strcmp(arch, "smollm3") == 0 || strncmp(arch, "granite", 7) == 0 ||
           strncmp(arch, "ernie4_5", 8) == 0;
}

/* An optional per-layer vector (bias, q/k norm): absent, or F32 of length n. */
static int check_optional(const llm_model *m, const llm_tensor *t, const char *what, int64_t n, llm_err *err)
{
    return t->data == NULL && t->src == NULL ? 0 : check_tensor(m, t, what, n, 1, 1, err);
}

static size_t tensor_bytes(const llm_tensor *t)
{
    return llm_dtype_row_bytes(t->type, (uint64_t)t->ne[0]) * (size_t)t->ne[1];
}

int llm_model_validate(llm_model *m, llm_err *err)
{
    llm_config *c = &m->cfg;
    if (c->encoder)
        c->bidirectional = 1;
    if (c->dim <= 0 || c->hidden_dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->vocab_size <= 0 ||
        c->dim > (1 << 20) || c->hidden_dim > (1 << 22) || c->n_layers > 4096 || c->n_heads > 4096 ||
        c->vocab_size > (1 << 24)) {
        llm_seterr(err, "%s: bad config: dim %d, hidden %d, layers %d, heads %d, vocab %d", m->path, c->dim,
                   c->hidden_dim, c->n_layers, c->n_heads, c->vocab_size);
        return -1;
    }
    if (c->n_expert != 0 && (c->n_expert < 2 || c->n_expert > LLM_MAX_EXPERTS || c->n_expert_used < 1 ||
                             c->n_expert_used > c->n_expert || c->expert_ff <= 0 || c->expert_ff > (1 << 22))) {
        llm_seterr(err, "%s: bad mixture of experts: %d experts, %d used per token, width %d (2 to %d experts)",
                   m->path, c->n_expert, c->n_expert_used, c->expert_ff, LLM_MAX_EXPERTS);
        return -1;
    }
    if (c->moe_w_scale < 0.0f || c->moe_w_scale > 1000.0f || c->moe_w_scale != c->moe_w_scale ||
        ((c->moe_sigmoid || c->moe_w_scale > 0.0f) && c->n_expert == 0)) {
        llm_seterr(err, "%s: bad router: sigmoid %d, weight scale %g (%d experts)", m->path, c->moe_sigmoid,
                   (double)c->moe_w_scale, c->n_expert);
        return -1;
    }
    if (c->moe_dense_lead < 0 || c->moe_dense_lead > c->n_layers || c->dense_ff < 0 || c->dense_ff > (1 << 22) ||
        (c->moe_dense_lead > 0 && (c->n_expert == 0 || c->dense_ff == 0))) {
        llm_seterr(err, "%s: bad dense layers in a mixture of experts: %d leading layers %d wide (%d experts)",
                   m->path, c->moe_dense_lead, c->dense_ff, c->n_expert);
        return -1;
    }
    if (c->n_kv_heads <= 0)
        c->n_kv_heads = c->n_heads;
    if (c->head_dim <= 0) {
        if (c->dim % c->n_heads != 0) {
            llm_seterr(err, "%s: dim %d is not a multiple of %d heads", m->path, c->dim, c->n_heads);
            return -1;
        }
        c->head_dim = c->dim / c->n_heads;
    }
    if (c->n_heads % c->n_kv_heads != 0 || c->head_dim % 2 != 0 || c->head_dim > 4096) {
        llm_seterr(err, "%s: bad attention config: %d heads, %d kv heads, head_dim %d", m->path, c->n_heads,
                   c->n_kv_heads, c->head_dim);
        return -1;
    }
    if (c->seq_len <= 0)
        c->seq_len = 2048;
    if (c->rope_theta <= 0)
        c->rope_theta = 10000.0f;
    if (c->norm_eps <= 0)
        c->norm_eps = 1e-5f;
    if (m->output.data == NULL) {
        m->output = m->tok_embd;
        c->tied_embeddings = 1;
    }
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    if (check_tensor(m, &m->tok_embd, "token embedding", c->dim, c->vocab_size, 0, err) ||
        (!c->encoder && check_tensor(m, &m->out_norm, "output norm", c->dim, 1, 1, err)) ||
        check_tensor(m, &m->output, "output (classifier)", c->dim, c->vocab_size, 0, err))
        return -1;
    /* an encoder's positions: learned rows (BERT), rope on every layer (nomic-bert), or ALiBi (jina-bert-v2) */
    int enc_rope = c->encoder && m->pos_embd.data == NULL && c->alibi_max_bias == 0.0f;
    for (int l = 0; enc_rope && m->layers != NULL && l < c->n_layers; l++)
        if (m->layers[l].nope) {
            llm_seterr(err, "%s: an encoder without position embeddings must rotate every layer (layer %d does not)",
                       m->path, l);
            return -1;
        }
    if (c->encoder &&
        (c->n_types < 1 || c->n_types > 1024 || c->n_expert != 0 || c->seq_len > (1 << 20) ||
         (m->pos_embd.data != NULL &&
          check_tensor(m, &m->pos_embd, "position embedding", c->dim, c->seq_len, 0, err)) ||
         check_tensor(m, &m->type_embd, "token type embedding", c->dim, c->n_types, 0, err) ||
         check_tensor(m, &m->embd_norm, "embedding norm", c->dim, 1, 1, err) ||
         check_tensor(m, &m->embd_norm_b, "embedding norm bias", c->dim, 1, 1, err))) {
        if (err->msg[0] == '\0')
            llm_seterr(err, "%s: bad encoder: %d token types, %d experts", m->path, c->n_types, c->n_expert);
        return -1;
    }
    /* ModernBERT: the embedding's LayerNorm (no bias), on the decoder's path */
    if (c->layer_norm && (c->encoder || check_tensor(m, &m->embd_norm, "embedding norm", c->dim, 1, 1, err))) {
        if (err->msg[0] == '\0')
            llm_seterr(err, "%s: LayerNorms without a bias are a pre-norm model's (not an encoder's)", m->path);
        return -1;
    }
    if (m->layers == NULL) {
        llm_seterr(err, "%s: no layers", m->path);
        return -1;
    }
    size_t wb = tensor_bytes(&m->tok_embd) + tensor_bytes(&m->out_norm) +
                (c->tied_embeddings ? 0 : tensor_bytes(&m->output));
    if (c->encoder)
        wb += (m->pos_embd.data == NULL ? 0 : tensor_bytes(&m->pos_embd)) + tensor_bytes(&m->type_embd) +
              tensor_bytes(&m->embd_norm) +
              tensor_bytes(&m->embd_norm_b);
    else if (c->layer_norm)
        wb += tensor_bytes(&m->embd_norm);
    for (int l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &m->layers[l];
        char w[64];
#define CHK(field, a, b, norm)                                                 \
        snprintf(w, sizeof(w), "layer %d " #field, l);                         \
        if (check_tensor(m, &L->field, w, a, b, norm, err)) return -1;         \
        wb += tensor_bytes(&L->field);
        if (c->post_norm_only) { /* OLMo 2: none before the blocks, both after */
            if (L->attn_norm.data != NULL || L->ffn_norm.data != NULL || L->post_attn_norm.data == NULL ||
                L->post_ffn_norm.data == NULL) {
                llm_seterr(err, "%s: layer %d: a model normed after its blocks needs both post norms and no "
                           "attention or FFN norm before them", m->path, l);
                return -1;
            }
        } else if (c->layer_norm && l == 0 && L->attn_norm.data == NULL) { /* ModernBERT's first layer has none */
        } else {
            CHK(attn_norm, c->dim, 1, 1)
        }
        CHK(wq, c->dim, q, 0)
        CHK(wk, c->dim, kv, 0)
        CHK(wv, c->dim, kv, 0)
        CHK(wo, q, c->dim, 0)
        if (!c->post_norm_only) {
            CHK(ffn_norm, c->dim, 1, 1)
        }
        if (c->encoder) {
            CHK(w_up, c->dim, c->hidden_dim, 0)
            CHK(w_down, c->hidden_dim, c->dim, 0)
            /* BERT: a bias on every projection, up -> GELU -> down; nomic-bert: no biases, SwiGLU (gate, up) */
            int glu = L->w_gate.data != NULL || L->w_gate.src != NULL;
            if (glu) {
                CHK(w_gate, c->dim, c->hidden_dim, 0)
            } else if (L->bq.data == NULL || L->bo.data == NULL || L->b_up.data == NULL || L->b_down.data == NULL) {
                llm_seterr(err, "%s: layer %d: a BERT encoder without its projections' biases", m->path, l);
                return -1;
            }
            if (L->bo.data != NULL) {
                CHK(bo, c->dim, 1, 1)
            }
            if (L->b_up.data != NULL) {
                CHK(b_up, c->hidden_dim, 1, 1)
            }
            if (L->b_down.data != NULL) {
                CHK(b_down, c->dim, 1, 1)
            }
            CHK(attn_norm_b, c->dim, 1, 1) CHK(ffn_norm_b, c->dim, 1, 1)
        } else if (!llm_layer_moe(c, L)) {
            int ff = llm_layer_ff(c, L);
            if (L->dense != (l < c->moe_dense_lead)) {
                llm_seterr(err, "%s: layer %d: dense where the model's first %d layers are", m->path, l,
                           c->moe_dense_lead);
                return -1;
            }
            CHK(w_gate, c->dim, ff, 0)
            CHK(w_up, c->dim, ff, 0)
            CHK(w_down, ff, c->dim, 0)
        } else {
            const llm_layer *L0 = llm_moe_layer0(m);
            if (l < c->moe_dense_lead) {
                llm_seterr(err, "%s: layer %d: experts where the model's first %d layers are dense", m->path, l,
                           c->moe_dense_lead);
                return -1;
            }
            if (L->exp_probs_b.data != NULL) {
                CHK(exp_probs_b, c->n_expert, 1, 1)
            }
            if ((L->exp_probs_b.data != NULL) != (L0->exp_probs_b.data != NULL)) {
                llm_seterr(err, "%s: layer %d: a bias choosing experts in some layers and not in others", m->path, l);
                return -1;
            }
            CHK(ffn_gate_inp, c->dim, c->n_expert, 0)
            /* gpt-oss: the router's and the experts' biases, in every such layer or none */
            int eb = L->exp_b[0].data != NULL;
            if (eb != (L->exp_b[1].data != NULL) || eb != (L->exp_b[2].data != NULL) ||
                eb != (L->ffn_gate_inp_b.data != NULL) || eb != (L0->exp_b[0].data != NULL)) {
                llm_seterr(err, "%s: layer %d: the router's and the experts' biases are all there or none", m->path,
                           l);
                return -1;
            }
            if (eb) {
                CHK(ffn_gate_inp_b, c->n_expert, 1, 1)
                CHK(exp_b[0], c->expert_ff, c->n_expert, 1)
                CHK(exp_b[1], c->expert_ff, c->n_expert, 1)
                CHK(exp_b[2], c->dim, c->n_expert, 1)
            }
            if (L->post_ffn_norm.data != NULL) {
                llm_seterr(err, "%s: layer %d: a norm after a mixture of experts is not supported", m->path, l);
                return -1;
            }
            if (L->experts == NULL) {
                llm_seterr(err, "%s: layer %d: a mixture of experts without experts", m->path, l);
                return -1;
            }
            if (llm_layer_has_shared(L) || L->shexp_gate.data != NULL) { /* shared expert (gated or not) */
                CHK(w_gate, c->dim, c->hidden_dim, 0)
                CHK(w_up, c->dim, c->hidden_dim, 0)
                CHK(w_down, c->hidden_dim, c->dim, 0)
                if (L->shexp_gate.data != NULL) {
                    CHK(shexp_gate, c->dim, 1, 1)
                }
            }
            if (llm_layer_has_shared(L) != llm_layer_has_shared(L0) ||
                (L->shexp_gate.data != NULL) != (L0->shexp_gate.data != NULL)) {
                llm_seterr(err, "%s: layer %d: a shared expert (or its gate) in some layers and not in others",
                           m->path, l);
                return -1;
            }
            for (int e = 0; e < c->n_expert; e++)
                for (int i = 0; i < 3; i++) {
                    snprintf(w, sizeof(w), "layer %d expert %d %s", l, e, i == 0 ? "gate" : i == 1 ? "up" : "down");
                    const llm_tensor *t = &L->experts[3 * e + i];
                    if (check_tensor(m, t, w, i < 2 ? c->dim : c->expert_ff, i < 2 ? c->expert_ff : c->dim, 0, err))
                        return -1;
                    wb += tensor_bytes(t);
                }
        }
#undef CHK
#define OPT(field, n)                                                          \
        snprintf(w, sizeof(w), "layer %d " #field, l);                         \
        if (check_optional(m, &L->field, w, n, err)) return -1;                \
        wb += L->field.data != NULL ? tensor_bytes(&L->field) : 0;
        OPT(bq, q) OPT(bk, kv) OPT(bv, kv)
        OPT(q_norm, c->qk_norm_full ? q : c->head_dim) OPT(k_norm, c->qk_norm_full ? kv : c->head_dim)
        OPT(post_attn_norm, c->dim) OPT(post_ffn_norm, c->dim) OPT(attn_sinks, c->n_heads)
        if (!c->encoder) {
            OPT(bo, c->dim)
        }
#undef OPT
        if ((L->attn_sinks.data != NULL) != (m->layers[0].attn_sinks.data != NULL)) {
            llm_seterr(err, "%s: layer %d: attention sinks in some layers and not in others", m->path, l);
            return -1;
        }
        if ((L->bq.data != NULL) != (L->bk.data != NULL) || (L->bk.data != NULL) != (L->bv.data != NULL) ||
            (L->q_norm.data != NULL) != (L->k_norm.data != NULL) ||
            (L->post_attn_norm.data != NULL) != (L->post_ffn_norm.data != NULL)) {
            llm_seterr(err, "%s: layer %d has some of the q/k/v biases, q/k norms or post norms but not all", m->path,
                       l);
            return -1;
        }
    }
    m->weight_bytes = wb;
    if ((c->act != LLM_ACT_SILU && c->act != LLM_ACT_GELU_TANH && c->act != LLM_ACT_GELU_ERF &&
         c->act != LLM_ACT_SWIGLU_OAI) ||
        (c->act == LLM_ACT_GELU_ERF && !c->encoder && !c->layer_norm) ||
        (c->act == LLM_ACT_SWIGLU_OAI && c->n_expert == 0)) {
        llm_seterr(err, "%s: unknown activation %d", m->path, c->act);
        return -1;
    }
    if (!(c->alibi_max_bias >= 0.0f && c->alibi_max_bias <= 64.0f) || (c->alibi_max_bias > 0.0f && !c->encoder)) {
        llm_seterr(err, "%s: bad ALiBi maximum bias %g (an encoder's, 0 to 64)", m->path, (double)c->alibi_max_bias);
        return -1;
    }
    if (!(c->embd_scale >= 0.0f) || !(c->attn_scale >= 0.0f) || c->swa_window < 0 || !(c->rope_theta_swa >= 0.0f) ||
        !(c->attn_softcap >= 0.0f) || !(c->final_softcap >= 0.0f)) {
        llm_seterr(err, "%s: bad Gemma settings (embedding scale, attention scale, window, rope base, soft caps)",
                   m->path);
        return -1;
    }
    if (!(c->residual_scale >= 0.0f && c->residual_scale < 1e6f) ||
        !(c->logit_scale >= 0.0f && c->logit_scale < 1e6f) || !(c->embd_scale < 1e6f) || !(c->attn_scale < 1e6f)) {
        llm_seterr(err, "%s: bad Granite scales (residual %g, logit %g, embedding %g, attention %g)", m->path,
                   (double)c->residual_scale, (double)c->logit_scale, (double)c->embd_scale, (double)c->attn_scale);
        return -1;
    }
    if (c->bos_id >= c->vocab_size || c->eos_id >= c->vocab_size) {
        llm_seterr(err, "%s: bos/eos id (%d/%d) outside the vocabulary of %d", m->path, c->bos_id, c->eos_id,
                   c->vocab_size);
        return -1;
    }
    return 0;
}

static void describe_tensor(FILE *f, const char *what, const llm_tensor *t)
{
    fprintf(f, "  %-14s %-5s [%lld x %lld]\n", what, llm_dtype_name(t->type), (long long)t->ne[1],
            (long long)t->ne[0]);
}

void llm_model_rank_apply(const llm_model *m, const float *h, float *out)
{
    int d = m->cfg.dim;
    float pooled[LLM_MODEL_MAX_POOLER];
    const float *p = h;
    if (m->cls_dense != NULL && d <= LLM_MODEL_MAX_POOLER) {
        for (int r = 0; r < d; r++) {
            double acc = m->cls_dense_b != NULL ? m->cls_dense_b[r] : 0.0;
            for (int i = 0; i < d; i++)
                acc += (double)m->cls_dense[(size_t)r * (size_t)d + (size_t)i] * h[i];
            pooled[r] = m->cls_norm != NULL ? (float)(0.5 * acc * (1.0 + erf(acc * 0.70710678118654752)))
                                            : tanhf((float)acc);
        }
        if (m->cls_norm != NULL) { /* ModernBERT's: LayerNorm without bias after the GELU */
            double sum = 0.0, sq = 0.0;
            for (int r = 0; r < d; r++)
                sum += pooled[r];
            double mean = sum / d;
            for (int r = 0; r < d; r++)
                sq += (pooled[r] - mean) * (pooled[r] - mean);
            double inv = 1.0 / sqrt(sq / d + m->cfg.norm_eps);
            for (int r = 0; r < d; r++)
                pooled[r] = (float)((pooled[r] - mean) * inv * m->cls_norm[r]);
        }
        p = pooled;
    }
    for (int k = 0; k < m->n_cls; k++) {
        double acc = m->cls_b != NULL ? m->cls_b[k] : 0.0;
        for (int i = 0; i < d; i++)
            acc += (double)m->cls[(size_t)k * (size_t)d + (size_t)i] * p[i];
        out[k] = (float)acc;
    }
}

void llm_model_dense_apply(const llm_model *m, float *v)
{
    int d = m->cfg.dim, n = m->dense_n;
    float *mid = m->dense_up != NULL ? malloc((size_t)n * sizeof(float)) : NULL;
    if (mid == NULL)
        return; /* (an allocation failure leaves the pooled vector as it is) */
    for (int r = 0; r < n; r++) {
        double acc = 0.0;
        for (int i = 0; i < d; i++)
            acc += (double)m->dense_up[(size_t)r * (size_t)d + (size_t)i] * v[i];
        mid[r] = (float)acc;
    }
    for (int r = 0; r < d; r++) {
        double acc = 0.0;
        for (int i = 0; i < n; i++)
            acc += (double)m->dense_down[(size_t)r * (size_t)n + (size_t)i] * mid[i];
        v[r] = (float)acc;
    }
    free(mid);
}

static void describe_tokenizer(const llm_model *m, FILE *f)
{
    if (m->tok == NULL) {
        fprintf(f, "tokenizer: none\n");
        return;
    }
    llm_tok_kind k = llm_tok_kind_of(m->tok);
    fprintf(f, "tokenizer: %s, vocab %d, bos %d, eos %d%s\n",
            k == LLM_TOK_SPM ? "sentencepiece (llama)" : k == LLM_TOK_WPM ? "WordPiece (bert)" : k == LLM_TOK_UGM ? "sentencepiece unigram (t5)" : "byte-level BPE (gpt2)",
            llm_tok_vocab_size(m->tok), llm_tok_bos(m->tok), llm_tok_eos(m->tok),
            llm_tok_add_eos(m->tok) ? ", eos appended to texts" : "");
    const char *tmpl = llm_tok_chat_template(m->tok);
    if (tmpl != NULL) /* the built-in format the server renders it with (llm_chat_template auto) */
        fprintf(f, "chat template: %zu bytes, rendered as %s\n", strlen(tmpl),
                llm_chat_format_name(llm_chat_detect(tmpl, (int)k)));
}

static void describe_encoder(const llm_model *m, FILE *f)
{
    const llm_config *c = &m->cfg;
    static const char *const pools[] = { "none", "mean", "cls", "last" };
    const llm_layer *L = &m->layers[0];
    int glu = L->w_gate.data != NULL || L->w_gate.src != NULL;
    char pos[64];
    if (m->pos_embd.data != NULL)
        snprintf(pos, sizeof(pos), "learned positions (%d)", c->seq_len);
    else if (c->alibi_max_bias > 0.0f)
        snprintf(pos, sizeof(pos), "ALiBi (context %d)", c->seq_len);
    else
        snprintf(pos, sizeof(pos), "rope positions (theta %g, context %d)", (double)c->rope_theta, c->seq_len);
    fprintf(f, "encoder: every token sees its whole input; %s and %d token types; post-norm blocks (LayerNorm eps "
               "%g)%s; FFN %s; no language-model head (embeddings only)\nembeddings pooling: %s\n", pos, c->n_types,
            (double)c->norm_eps, L->bq.data != NULL ? " with biases" : "", glu ? (c->act == LLM_ACT_GELU_ERF ? "gate|up, GELU(gate) * up, down" : "gate|up, SwiGLU, down") : "up, GELU, down",
            m->pooling > 0 && m->pooling < 4 ? pools[m->pooling] : "cls");
    if (m->n_cls > 0)
        fprintf(f, "cross-encoder: %s a classifier of %d output%s on [CLS], /v1/rerank's scores (%s)\n",
                m->cls_dense != NULL ? "a pooler (tanh) and" : "", m->n_cls, m->n_cls > 1 ? "s" : "",
                c->n_types > 1 ? "a pair's second text is token type 1" : "one token type: a pair as RoBERTa's");
    if (m->n_converted)
        fprintf(f, "converted at load: %d tensors of type %s re-quantised to q8_0\n", m->n_converted,
                m->converted_from);
    fprintf(f, "tensors (per kind, layer 0 shown; rows x cols):\n");
    describe_tensor(f, "token_embd", &m->tok_embd);
    if (m->pos_embd.data != NULL)
        describe_tensor(f, "position_embd", &m->pos_embd);
    describe_tensor(f, "token_types", &m->type_embd);
    describe_tensor(f, "attn_q", &L->wq);
    describe_tensor(f, "attn_k", &L->wk);
    describe_tensor(f, "attn_v", &L->wv);
    describe_tensor(f, "attn_output", &L->wo);
    if (glu)
        describe_tensor(f, "ffn_gate", &L->w_gate);
    describe_tensor(f, "ffn_up", &L->w_up);
    describe_tensor(f, "ffn_down", &L->w_down);
    describe_tokenizer(m, f);
}

void llm_model_describe(const llm_model *m, void *FILE_stream)
{
    FILE *f = FILE_stream;
    const llm_config *c = &m->cfg;
    fprintf(f, "model:        %s\n", m->path);
    fprintf(f, "format:       %s\n", m->format);
    fprintf(f, "architecture: %s%s%s\n", m->arch, m->name[0] ? "  name: " : "", m->name);
    fprintf(f, "file size:    %zu bytes (%.2f MiB), weights %zu bytes\n", m->file_bytes,
            m->file_bytes / 1048576.0, m->weight_bytes);
    fprintf(f, "dim %d, hidden %d, layers %d, heads %d, kv heads %d, head_dim %d, vocab %d, context %d\n", c->dim,
            c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->vocab_size, c->seq_len);
    if (c->encoder) {
        describe_encoder(m, f);
        return;
    }
    fprintf(f, "rope: theta %g, layout %s", c->rope_theta, c->rope_layout == LLM_ROPE_HALF ? "half (rotate_half)"
                                                                                          : "adjacent pairs");
    if (c->rope_scaling == LLM_ROPE_SCALING_LLAMA3)
        fprintf(f, ", llama3 scaling factor %g low %g high %g orig ctx %d", c->rope_factor, c->rope_low_freq_factor,
                c->rope_high_freq_factor, c->rope_orig_ctx);
    else if (c->rope_scaling == LLM_ROPE_SCALING_YARN)
        fprintf(f, ", yarn scaling factor %g orig ctx %d attention factor %g beta %g/%g", c->rope_factor,
                c->rope_orig_ctx, c->rope_mscale, c->yarn_beta_fast, c->yarn_beta_slow);
    if (c->rope_scaling == LLM_ROPE_SCALING_YARN && c->yarn_no_truncate)
        fprintf(f, ", correction range not truncated");
    else if (c->rope_scaling == LLM_ROPE_SCALING_LINEAR)
        fprintf(f, ", linear scaling factor %g", c->rope_factor);
    else if (c->rope_scaling == LLM_ROPE_SCALING_LONGROPE)
        fprintf(f, ", longrope orig ctx %d attention factor %g (%s factors at context %d)", c->rope_orig_ctx,
                c->rope_mscale, c->seq_len > c->rope_orig_ctx ? "long" : "short", c->seq_len);
    if (m->rope_freqs != NULL)
        fprintf(f, ", rope_freqs tensor");
    if (c->rope_dims > 0 && c->rope_dims != c->head_dim)
        fprintf(f, ", rotating %d of %d dims", c->rope_dims, c->head_dim);
    fprintf(f, "\nnorm eps %g, embeddings %s, bos %d, eos %d\n", c->norm_eps, c->tied_embeddings ? "tied" : "separate",
            c->bos_id, c->eos_id);
    int n_nope = 0;
    for (int l = 0; m->layers != NULL && l < c->n_layers; l++)
        n_nope += m->layers[l].nope;
    if (n_nope > 0)
        fprintf(f, "no rope (NoPE) on %d of %d layers\n", n_nope, c->n_layers);
    if (c->residual_scale > 0.0f || c->logit_scale > 0.0f)
        fprintf(f, "residual scale %g, logit scale %g\n", (double)c->residual_scale, (double)c->logit_scale);
    if (m->n_cls > 0 && m->cls_norm != NULL)
        fprintf(f, "reranker: ModernBERT's classifier head (dense, GELU, LayerNorm, %d output%s) on the %s, "
                   "/v1/rerank's scores of each [CLS] query [SEP] document [SEP]\n", m->n_cls, m->n_cls > 1 ? "s" : "",
                m->pooling == LLM_POOL_MEAN ? "tokens' mean" : "[CLS] token");
    else if (m->n_cls > 0)
        fprintf(f, "reranker: a classifier head of %d outputs (\"yes\", \"no\") on the last token, /v1/rerank's "
                   "scores\n", m->n_cls);
    if (c->bidirectional)
        fprintf(f, "bidirectional attention (sliding windows symmetric, %d each side): an embedding model, inputs "
                   "whole in one step\n", c->swa_window / 2);
    if (c->alibi_max_bias > 0.0f)
        fprintf(f, "positions: ALiBi (maximum bias %g, symmetric), a GELU-gated FFN\n", (double)c->alibi_max_bias);
    if (m->dense_up != NULL)
        fprintf(f, "after pooling: Dense %d -> %d -> %d (sentence-transformers' dense_2, dense_3)\n", c->dim,
                m->dense_n, c->dim);
    if (c->layer_norm)
        fprintf(f, "norms: LayerNorm without bias (the embedding's, each layer's%s, the final one)\n",
                m->layers != NULL && m->layers[0].attn_norm.data == NULL ? " but layer 0's attention norm" : "");
    if (c->act != LLM_ACT_SILU || c->embd_scale > 0.0f || c->attn_scale > 0.0f || c->layer_norm) {
        int n_swa = 0;
        for (int l = 0; m->layers != NULL && l < c->n_layers; l++)
            n_swa += m->layers[l].swa;
        fprintf(f, "ffn %s, embedding scale %g, attention scale %g",
                c->act == LLM_ACT_GELU_TANH  ? "geglu"
                : c->act == LLM_ACT_GELU_ERF ? "geglu (exact erf gelu)"
                : c->act == LLM_ACT_SWIGLU_OAI ? "swiglu-oai (min(g, 7) sigmoid(1.702 g) (clamp(u, -7, 7) + 1))"
                                               : "swiglu",
                (double)c->embd_scale, (double)llm_attn_scale(c));
        if (n_swa > 0)
            fprintf(f, ", sliding window %d on %d of %d layers (rope theta there %g)", c->swa_window, n_swa,
                    c->n_layers, (double)(c->rope_theta_swa > 0.0f ? c->rope_theta_swa : c->rope_theta));
        if (c->attn_softcap > 0.0f || c->final_softcap > 0.0f)
            fprintf(f, ", soft caps: attention %g, logits %g", (double)c->attn_softcap, (double)c->final_softcap);
        if (m->layers != NULL && m->layers[0].attn_sinks.data != NULL)
            fprintf(f, ", attention sinks");
        if (m->layers != NULL && m->layers[0].bo.data != NULL && !c->encoder)
            fprintf(f, ", output projection bias");
        fprintf(f, "\n");
    }
    if (c->post_norm_only || c->qk_norm_full) { /* OLMo 2 / 3 */
        int n_swa = 0;
        for (int l = 0; m->layers != NULL && l < c->n_layers; l++)
            n_swa += m->layers[l].swa;
        fprintf(f, "%s%s", c->post_norm_only ? "norms after attention and ffn only" : "norms before the blocks",
                c->qk_norm_full ? ", q/k norms over whole rows" : "");
        if (n_swa > 0)
            fprintf(f, ", sliding window %d on %d of %d layers%s", c->swa_window, n_swa, c->n_layers,
                    c->rope_theta_swa > 0.0f ? " (rope unscaled there)" : "");
        fprintf(f, "\n");
    }
    const llm_layer *L0 = llm_moe_layer0(m);
    if (c->n_expert > 0 && L0 != NULL) {
        fprintf(f, "mixture of experts: %d experts of width %d, %d per token, %s weights %s", c->n_expert,
                c->expert_ff, c->n_expert_used, c->moe_sigmoid ? "sigmoid" : "softmax",
                c->moe_norm_topk ? "renormalised over those chosen" : "as routed");
        if (c->moe_w_scale > 0.0f && c->moe_w_scale != 1.0f)
            fprintf(f, " times %g", (double)c->moe_w_scale);
        fprintf(f, "%s%s%s\n", L0->exp_probs_b.data != NULL ? ", chosen with a bias" : "",
                L0->exp_b[0].data != NULL ? ", with biases" : "",
                !llm_layer_has_shared(L0)           ? ""
                : L0->shexp_gate.data != NULL ? ", and a gated shared expert"
                                              : ", and a shared expert");
        if (c->moe_dense_lead > 0)
            fprintf(f, "dense layers: the first %d of %d, FFN width %d\n", c->moe_dense_lead, c->n_layers,
                    c->dense_ff);
    }
    if (m->pooling != LLM_POOL_NONE) {
        static const char *const pools[] = { "none", "mean", "cls", "last" };
        fprintf(f, "embeddings pooling: %s (what the model declares)\n", pools[m->pooling]);
    }
    if (m->n_converted)
        fprintf(f, "converted at load: %d tensors of type %s re-quantised to q8_0\n", m->n_converted,
                m->converted_from);
    if (m->hfq.n_fp8 && m->hfq.fp8_block[0] > 0)
        fprintf(f, "converted at load: %d FP8 (e4m3) matrices dequantised to bf16 with their %d x %d blocks' scales\n",
                m->hfq.n_fp8, m->hfq.fp8_block[0], m->hfq.fp8_block[1]);
    else if (m->hfq.n_fp8)
        fprintf(f, "converted at load: %d FP8 (e4m3) matrices dequantised to bf16 with their scales (%s)\n",
                m->hfq.n_fp8, llm_hfq_name(m->hfq.method));
    if (m->hfq.n_q4_0 + m->hfq.n_q8_0 > 0) {
        fprintf(f, "converted at load: %d %s matrices of %d-bit integers repacked: %d as q4_0, %d as q8_0; ",
                m->hfq.n_q4_0 + m->hfq.n_q8_0, llm_hfq_name(m->hfq.method), m->hfq.bits, m->hfq.n_q4_0, m->hfq.n_q8_0);
        if (m->hfq.n_requant == 0)
            fprintf(f, "all %lld 32-weight blocks exact\n", m->hfq.n_blocks);
        else
            fprintf(f, "%lld of %lld 32-weight blocks re-quantised (their weights do not share one fp16 scale)\n",
                    m->hfq.n_requant, m->hfq.n_blocks);
    }
    if (m->hfq.act_quant)
        fprintf(f, "the checkpoint quantises activations too: run weight-only, activations in float\n");
    fprintf(f, "tensors (per kind, layer 0 shown; rows x cols):\n");
    describe_tensor(f, "token_embd", &m->tok_embd);
    if (m->layers != NULL) {
        const llm_layer *L = &m->layers[0];
        describe_tensor(f, "attn_norm", &L->attn_norm);
        describe_tensor(f, "attn_q", &L->wq);
        describe_tensor(f, "attn_k", &L->wk);
        describe_tensor(f, "attn_v", &L->wv);
        describe_tensor(f, "attn_output", &L->wo);
        describe_tensor(f, "ffn_norm", &L->ffn_norm);
        if (!llm_layer_moe(c, L)) {
            describe_tensor(f, "ffn_gate", &L->w_gate);
            describe_tensor(f, "ffn_up", &L->w_up);
            describe_tensor(f, "ffn_down", &L->w_down);
        }
        const llm_layer *E = L0 != NULL && L0->experts != NULL ? L0 : NULL; /* (ERNIE's: layer 1's) */
        if (E != NULL) {
            describe_tensor(f, "ffn_gate_inp", &E->ffn_gate_inp);
            if (E->exp_probs_b.data != NULL)
                describe_tensor(f, "exp_probs_b", &E->exp_probs_b);
            describe_tensor(f, "expert gate", &E->experts[0]);
            describe_tensor(f, "expert up", &E->experts[1]);
            describe_tensor(f, "expert down", &E->experts[2]);
            if (llm_layer_has_shared(E)) {
                describe_tensor(f, "shared expert gate", &E->w_gate);
                describe_tensor(f, "shared expert up", &E->w_up);
                describe_tensor(f, "shared expert down", &E->w_down);
            }
        }
        if (L->bq.data != NULL) {
            describe_tensor(f, "attn_q.bias", &L->bq);
            describe_tensor(f, "attn_k.bias", &L->bk);
            describe_tensor(f, "attn_v.bias", &L->bv);
        }
        if (L->q_norm.data != NULL) {
            describe_tensor(f, "attn_q_norm", &L->q_norm);
            describe_tensor(f, "attn_k_norm", &L->k_norm);
        }
        if (L->post_attn_norm.data != NULL) {
            describe_tensor(f, "post_attn_norm", &L->post_attn_norm);
            describe_tensor(f, "post_ffw_norm", &L->post_ffn_norm);
        }
    }
    describe_tensor(f, "output_norm", &m->out_norm);
    describe_tensor(f, c->tied_embeddings ? "output(tied)" : "output", &m->output);
    describe_tokenizer(m, f);
}
