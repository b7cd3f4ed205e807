/* LoRA adapters merged into the weights at load (lora.h). Why merge rather than run the adapter beside the
 * weights: one adapter for the whole server is the common case (a fine-tune shipped as an adapter), and a
 * merged model runs every kernel, backend and batch size with no code of its own and no work per token;
 * per-request adapters would need the low-rank product in every backend's forward pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "gguf_quants.h"
#include "json_file.h"
#include "lora.h"
#include "model_priv.h"
#include "parallel.h"
#include "safetensors.h"

/* The adaptable matrices of a layer, in llm_layer_mats order: llama.cpp's GGUF names and PEFT's modules. */
static const char *const gguf_names[LLM_LAYER_MATS] = { "attn_q", "attn_k", "attn_v", "attn_output",
                                                        "ffn_gate", "ffn_up", "ffn_down" };
static const char *const peft_names[LLM_LAYER_MATS] = { "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                        "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                                                        "mlp.down_proj" };

/* One adapted matrix: A [r][in] and B [out][r] as floats. */
typedef struct {
    int    r, in, out;
    float *a, *b;
} lora_pair;

/* The adapter's tensors (one of the two formats) and its scale s. */
typedef struct {
    gguf_ctx        *gguf;
    st_file         *st;
    float            alpha;  /* 0: none given (GGUF: B A taken as it is) */
    int              rslora; /* PEFT use_rslora: alpha / sqrt(r) instead of alpha / r */
    llm_rope_layout  layout; /* of its q/k rows: PEFT's are Hugging Face's, a llama GGUF's llama.cpp's */
    const char      *path;
} adapter;

/* Rows x cols of a tensor in any stored type into a new float array (NULL: out of memory, or the type cannot
 * be read). */
static float *to_f32(uint32_t type, const void *data, uint64_t rows, uint64_t cols, int ggml)
{
    size_t rb = ggml ? gguf_qtype_row_bytes(type, cols) : llm_dtype_row_bytes((llm_dtype)type, cols);
    float *f = rb > 0 ? malloc(rows * cols * sizeof(float)) : NULL;
    for (uint64_t r = 0; f != NULL && r < rows; r++) {
        const uint8_t *row = (const uint8_t *)data + r * rb;
        if (ggml)
            gguf_qtype_to_f32(type, row, f + r * cols, cols);
        else
            llm_row_to_f32((llm_dtype)type, row, f + r * cols, cols);
    }
    return f;
}

/* Layer l's matrix k in the adapter: 1 found (p filled), 0 not adapted, -1 + err. */
static int find_pair(const adapter *ad, int l, int k, lora_pair *p, llm_err *err)
{
    char na[160], nb[160];
    uint64_t sa[2], sb[2];
    uint32_t ta, tb;
    const void *da, *db;
    int ggml = ad->gguf != NULL;
    if (ggml) {
        snprintf(na, sizeof(na), "blk.%d.%s.weight.lora_a", l, gguf_names[k]);
        snprintf(nb, sizeof(nb), "blk.%d.%s.weight.lora_b", l, gguf_names[k]);
        const gguf_tensor *a = gguf_find_tensor(ad->gguf, na), *b = gguf_find_tensor(ad->gguf, nb);
        if (a == NULL && b == NULL)
            return 0;
        if (a == NULL || b == NULL || a->ne[2] != 1 || b->ne[2] != 1 || a->ne[3] != 1 || b->ne[3] != 1) {
            llm_seterr(err, "%s: %s needs both 2-D tensors %s and %s", ad->path, gguf_names[k], na, nb);
            return -1;
        }
        sa[0] = a->ne[1], sa[1] = a->ne[0], sb[0] = b->ne[1], sb[1] = b->ne[0];
        ta = a->type, tb = b->type, da = a->data, db = b->data;
    } else {
        snprintf(na, sizeof(na), "base_model.model.model.layers.%d.%s.lora_A.weight", l, peft_names[k]);
        snprintf(nb, sizeof(nb), "base_model.model.model.layers.%d.%s.lora_B.weight", l, peft_names[k]);
        const st_tensor *a = st_find(ad->st, na), *b = st_find(ad->st, nb);
        if (a == NULL && b == NULL)
            return 0;
        if (a == NULL || b == NULL || a->n_dims != 2 || b->n_dims != 2 || !st_is_float(a) || !st_is_float(b)) {
            llm_seterr(err, "%s: %s needs both 2-D float tensors %s and %s", ad->path, peft_names[k], na, nb);
            return -1;
        }
        sa[0] = a->shape[0], sa[1] = a->shape[1], sb[0] = b->shape[0], sb[1] = b->shape[1];
        ta = a->type, tb = b->type, da = a->data, db = b->data;
    }
    /* A is [r][in], B [out][r] */
    if (sa[0] == 0 || sa[0] > 4096 || sb[1] != sa[0] || sa[1] > INT32_MAX || sb[0] > INT32_MAX) {
        llm_seterr(err, "%s: layer %d %s: lora_a is %llux%llu and lora_b %llux%llu (want r x in and out x r, r <= "
                   "4096)", ad->path, l, gguf_names[k], (unsigned long long)sa[0], (unsigned long long)sa[1],
                   (unsigned long long)sb[0], (unsigned long long)sb[1]);
        return -1;
    }
    p->r = (int)sa[0], p->in = (int)sa[1], p->out = (int)sb[0];
    p->a = to_f32(ta, da, sa[0], sa[1], ggml);
    p->b = to_f32(tb, db, sb[0], sb[1], ggml);
    if (p->a == NULL || p->b == NULL) {
        free(p->a);
        free(p->b);
        llm_seterr(err, "%s: layer %d %s: out of memory, or a tensor type that cannot be read", ad->path, l,
                   gguf_names[k]);
        return -1;
    }
    return 1;
}

/* B's rows from the adapter's q/k layout to the model's: per head, Hugging Face's halves (i, i + hd/2) are
 * llama.cpp's pairs (2i, 2i + 1). */
static int permute_heads(float *b, int r, int heads, int hd, int to_adjacent)
{
    size_t bytes = (size_t)hd * (size_t)r * sizeof(float);
    float *tmp = malloc(bytes);
    if (tmp == NULL)
        return -1;
    for (int h = 0; h < heads; h++) {
        float *head = b + (size_t)h * hd * r;
        memcpy(tmp, head, bytes);
        for (int i = 0; i < hd / 2; i++)
            for (int j = 0; j < 2; j++) {
                int adj = 2 * i + j, half = j * (hd / 2) + i;
                memcpy(head + (size_t)(to_adjacent ? adj : half) * r, tmp + (size_t)(to_adjacent ? half : adj) * r,
                       (size_t)r * sizeof(float));
            }
    }
    free(tmp);
    return 0;
}

typedef struct {
    const llm_tensor *w;
    const lora_pair  *p;
    float             s;
    llm_dtype         out_type;
    void             *out;
    size_t            out_rb;
    int               r0, r1, oom;
} merge_job;

/* Rows r0 .. r1 of W + s B A into out. */
static void *merge_rows(void *arg)
{
    merge_job *j = arg;
    const llm_tensor *w = j->w;
    const lora_pair *p = j->p;
    int cols = p->in;
    /* a matrix converted at load (or whose conversion waits) is read from the file's own data: one rounding */
    int from_file = w->src != NULL;
    uint32_t ty = from_file ? w->src_type : (uint32_t)w->type;
    size_t rb = gguf_qtype_row_bytes(ty, (uint64_t)cols);
    const uint8_t *src = from_file ? w->src : w->data;
    float *restrict row = malloc((size_t)cols * sizeof(float));
    if (row == NULL) {
        j->oom = 1;
        return NULL;
    }
    for (int r = j->r0; r < j->r1; r++) {
        gguf_qtype_to_f32(ty, src + (size_t)r * rb, row, (size_t)cols);
        const float *b = p->b + (size_t)r * p->r;
        for (int k = 0; k < p->r; k++) {
            const float f = j->s * b[k];
            const float *restrict a = p->a + (size_t)k * cols;
            for (int c = 0; c < cols; c++) /* (restrict: vectorised) */
                row[c] += f * a[c];
        }
        llm_row_from_f32(j->out_type, row, (uint8_t *)j->out + (size_t)r * j->out_rb, (size_t)cols);
    }
    free(row);
    return NULL;
}

/* W += s B A, W replaced by an owned copy (its own 16/32-bit type, else Q8_0), on the machine's cores. */
static int merge(llm_model *m, llm_tensor *w, const lora_pair *p, float s, const char *what, llm_err *err)
{
    if (w->cpu_packed) {
        llm_seterr(err, "%s: %s is already packed for a backend: apply adapters before preparing the model", m->path,
                   what);
        return -1;
    }
    if (w->data == NULL && w->src == NULL) {
        llm_seterr(err, "%s: the adapter adapts %s, which this model does not have", m->path, what);
        return -1;
    }
    llm_dtype ot = w->data != NULL && (w->type == LLM_F32 || w->type == LLM_F16 || w->type == LLM_BF16)
                       ? w->type : LLM_Q8_0;
    if (ot == LLM_Q8_0 && p->in % LLM_QK != 0) {
        llm_seterr(err, "%s: %s: rows of %d cannot be re-quantised to q8_0", m->path, what, p->in);
        return -1;
    }
    size_t orb = llm_dtype_row_bytes(ot, (uint64_t)p->in);
    void *out = malloc(orb * (size_t)p->out);
    if (out == NULL) {
        llm_seterr(err, "%s: out of memory merging the adapter into %s", m->path, what);
        return -1;
    }
    int n = llm_parallel_jobs((size_t)p->out, 16), oom = 0;
    merge_job jobs[LLM_PARALLEL_MAX];
    for (int i = 0; i < n; i++)
        jobs[i] = (merge_job){ w, p, s, ot, out, orb, (int)((long)p->out * i / n), (int)((long)p->out * (i + 1) / n),
                               0 };
    llm_parallel_run(n, merge_rows, jobs, sizeof(jobs[0]));
    for (int i = 0; i < n; i++)
        oom |= jobs[i].oom;
    if (oom) {
        free(out);
        llm_seterr(err, "%s: out of memory merging the adapter into %s", m->path, what);
        return -1;
    }
    if (w->data != NULL && llm_model_owns(m, w->data))
        llm_model_replace_owned(m, w->data, out);
    else if (llm_model_own(m, out, err) != 0)
        return -1;
    w->type = ot;
    w->data = out;
    w->src = NULL; /* the file's data is not these weights any more */
    w->src_type = 0;
    return 0;
}

static int open_adapter(adapter *ad, const char *path, llm_err *err)
{
    memset(ad, 0, sizeof(*ad));
    ad->path = path;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        llm_seterr(err, "%s: no such adapter file or directory", path);
        return -1;
    }
    if (S_ISDIR(sb.st_mode)) { /* PEFT */
        char p[4096];
        snprintf(p, sizeof(p), "%s/adapter_config.json", path);
        cJSON *cfg = llm_json_read_file(p, err);
        if (cfg == NULL)
            return -1;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(cfg, "r");
        const cJSON *alpha = cJSON_GetObjectItemCaseSensitive(cfg, "lora_alpha");
        const cJSON *rs = cJSON_GetObjectItemCaseSensitive(cfg, "use_rslora");
        const cJSON *fifo = cJSON_GetObjectItemCaseSensitive(cfg, "fan_in_fan_out");
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(cfg, "peft_type");
        const cJSON *save = cJSON_GetObjectItemCaseSensitive(cfg, "modules_to_save");
        const cJSON *apat = cJSON_GetObjectItemCaseSensitive(cfg, "alpha_pattern");
        const cJSON *dora = cJSON_GetObjectItemCaseSensitive(cfg, "use_dora");
        const char *bad = !cJSON_IsNumber(r) || r->valuedouble < 1 ? "\"r\" is missing or not a positive number"
                          : alpha != NULL && !cJSON_IsNumber(alpha) ? "\"lora_alpha\" is not a number"
                          : cJSON_IsTrue(fifo) ? "fan_in_fan_out adapters are not supported"
                          : cJSON_IsString(pt) && strcmp(pt->valuestring, "LORA") != 0 ? "peft_type is not LORA"
                          : cJSON_IsArray(save) && cJSON_GetArraySize(save) > 0
                              ? "modules_to_save (whole modules trained beside the adapter) is not supported"
                          : cJSON_IsTrue(dora) ? "DoRA adapters (use_dora) are not supported"
                          /* (a rank_pattern needs nothing: each pair's own rank divides alpha) */
                          : cJSON_IsObject(apat) && cJSON_GetArraySize(apat) > 0 ? "alpha_pattern is not supported"
                              : NULL;
        if (bad == NULL) {
            ad->alpha = (float)(cJSON_IsNumber(alpha) ? alpha->valuedouble : r->valuedouble);
            ad->rslora = cJSON_IsTrue(rs);
        }
        cJSON_Delete(cfg);
        if (bad != NULL) {
            llm_seterr(err, "%s: adapter_config.json: %s", path, bad);
            return -1;
        }
        snprintf(p, sizeof(p), "%s/adapter_model.safetensors", path);
        ad->st = st_open(p, err);
        ad->layout = LLM_ROPE_HALF;
        return ad->st != NULL ? 0 : -1;
    }
    ad->gguf = gguf_open(path, err);
    if (ad->gguf == NULL)
        return -1;
    char type[32] = "", lt[32] = "", arch[64] = "";
    gguf_get_str(ad->gguf, "general.type", type, sizeof(type));
    gguf_get_str(ad->gguf, "adapter.type", lt, sizeof(lt));
    if (strcmp(type, "adapter") != 0 || strcmp(lt, "lora") != 0) {
        llm_seterr(err, "%s: not a LoRA adapter (general.type \"%s\", adapter.type \"%s\"; want \"adapter\", "
                   "\"lora\")", path, type, lt);
        return -1;
    }
    gguf_get_str(ad->gguf, "general.architecture", arch, sizeof(arch));
    ad->layout = llm_arch_llama_like(arch) ? LLM_ROPE_ADJACENT : LLM_ROPE_HALF; /* as llama.cpp converts */
    float alpha = 0.0f;
    ad->alpha = gguf_get_f32(ad->gguf, "adapter.lora.alpha", &alpha) == 0 && alpha > 0 ? alpha : 0.0f;
    return 0;
}

int llm_lora_apply(llm_model *m, const char *path, float scale, llm_err *err)
{
    const llm_config *c = &m->cfg;
    adapter ad;
    if (open_adapter(&ad, path, err) != 0) {
        gguf_close(ad.gguf);
        return -1;
    }
    int rc = 0, merged = 0;
    float last_s = 0.0f;
    for (int l = 0; l < c->n_layers && rc == 0; l++) {
        llm_tensor *mats[LLM_LAYER_MATS_MAX];
        llm_layer_mats(&m->layers[l], c, mats);
        for (int k = 0; k < LLM_LAYER_MATS && rc == 0; k++) {
            lora_pair p;
            int f = find_pair(&ad, l, k, &p, err);
            if (f <= 0) {
                rc = f;
                continue;
            }
            char what[64];
            snprintf(what, sizeof(what), "layer %d %s", l, gguf_names[k]);
            /* alpha / r as PEFT and llama.cpp scale it; a GGUF without alpha: B A as it is (llama.cpp's 1) */
            float s = scale * (ad.alpha <= 0 ? 1.0f : ad.rslora ? ad.alpha / sqrtf((float)p.r) : ad.alpha / (float)p.r);
            last_s = s;
            if (p.in != mats[k]->ne[0] || p.out != mats[k]->ne[1]) {
                llm_seterr(err, "%s: %s: the adapter is %dx%d, the model's matrix %lldx%lld", path, what, p.out, p.in,
                           (long long)mats[k]->ne[1], (long long)mats[k]->ne[0]);
                rc = -1;
            } else if (k < 2 && ad.layout != c->rope_layout &&
                       permute_heads(p.b, p.r, k == 0 ? c->n_heads : c->n_kv_heads, c->head_dim,
                                     c->rope_layout == LLM_ROPE_ADJACENT) != 0) {
                llm_seterr(err, "%s: out of memory", path);
                rc = -1;
            } else {
                rc = merge(m, mats[k], &p, s, what, err);
                merged += rc == 0;
            }
            free(p.a);
            free(p.b);
        }
    }
    size_t total = ad.gguf != NULL ? (size_t)ad.gguf->n_tensors : ad.st->n;
    if (rc == 0 && (merged == 0 || total != 2 * (size_t)merged)) {
        /* e.g. an adapter of the embeddings or the classifier, or one made for a model with more layers */
        llm_seterr(err, "%s: %zu of the adapter's %zu tensors adapt nothing this model has (adapters of the attention "
                   "q, k, v, o and the FFN gate, up, down of its %d layers are supported)", path,
                   total - 2 * (size_t)merged, total, c->n_layers);
        rc = -1;
    }
    if (rc == 0)
        fprintf(stderr, "lora: %s merged into %d matrices (B A scaled by %g)\n", path, merged, (double)last_s);
    gguf_close(ad.gguf);
    st_close(ad.st);
    return rc;
}
