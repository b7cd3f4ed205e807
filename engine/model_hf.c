/* Hugging Face directory loader: config.json + safetensors (single or sharded)
 * + tokenizer.json. Q/K stay in HF's rotate-half layout. */
#include "json_file.h"
#include "model.h"
#include "model_priv.h"
#include "safetensors.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int llm_hf_cfg_int(const cJSON *root, const char *key, int *out, int def, int required, const char *path,
                   llm_err *err)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (cJSON_IsArray(j)) /* eos_token_id may be a list: the first one */
        j = cJSON_GetArrayItem(j, 0);
    if (j == NULL || cJSON_IsNull(j)) {
        if (required) {
            llm_seterr(err, "%s: config.json lacks %s", path, key);
            return -1;
        }
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(j) || j->valuedouble < -1 || j->valuedouble > (double)(1 << 30) ||
        j->valuedouble != floor(j->valuedouble)) {
        llm_seterr(err, "%s: config.json %s must be an integer", path, key);
        return -1;
    }
    *out = (int)j->valuedouble;
    return 0;
}

float llm_hf_cfg_float(const cJSON *root, const char *key, float def)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsNumber(j) ? (float)j->valuedouble : def;
}

static int rope_scaling_cfg(llm_config *c, const cJSON *rs, const char *path, llm_err *err);

void llm_hf_exaone_name(char *name, size_t cap)
{
    static const char *const top[][2] = { { "model.embed_tokens.weight", "transformer.wte.weight" },
                                          { "model.norm.weight", "transformer.ln_f.weight" } };
    static const char *const sub[][2] = {
        { "input_layernorm.", "ln_1." }, { "post_attention_layernorm.", "ln_2." },
        { "self_attn.q_proj.", "attn.attention.q_proj." }, { "self_attn.k_proj.", "attn.attention.k_proj." },
        { "self_attn.v_proj.", "attn.attention.v_proj." }, { "self_attn.o_proj.", "attn.attention.out_proj." },
        { "mlp.gate_proj.", "mlp.c_fc_0." }, { "mlp.up_proj.", "mlp.c_fc_1." }, { "mlp.down_proj.", "mlp.c_proj." } };
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (strcmp(name, top[i][0]) == 0) {
            snprintf(name, cap, "%s", top[i][1]);
            return;
        }
    int l, at = 0;
    if (sscanf(name, "model.layers.%d.%n", &l, &at) != 1 || at == 0)
        return;
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++)
        if (strncmp(name + at, sub[i][0], strlen(sub[i][0])) == 0) {
            char rest[128];
            snprintf(rest, sizeof rest, "%s", name + at + strlen(sub[i][0]));
            snprintf(name, cap, "transformer.h.%d.%s%s", l, sub[i][1], rest);
            return;
        }
}

/* Gemma's settings (model_type gemma, gemma2, gemma3_text / gemma3's text_config): GeGLU, the embedding
 * scaled by sqrt(hidden_size) (rounded to the embedding's type when that is 16-bit, as transformers computes
 * it in the model's dtype: see load_tensors), query_pre_attn_scalar, the sliding window on the layers
 * layer_types says (else Gemma 2's even layers, Gemma 3's five of six), its rope base, the soft caps. */
static int gemma_config(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    llm_config *c = &m->cfg;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_activation");
    if (cJSON_IsString(act) && strcmp(act->valuestring, "gelu_pytorch_tanh") != 0 &&
        strcmp(act->valuestring, "gelu") != 0) {
        llm_seterr(err, "%s: hidden_activation '%s' is not supported (gelu_pytorch_tanh)", path, act->valuestring);
        return -1;
    }
    c->act = LLM_ACT_GELU_TANH;
    c->embd_scale = sqrtf((float)c->dim);
    float qs = llm_hf_cfg_float(root, "query_pre_attn_scalar", 0.0f);
    if (qs > 0.0f)
        c->attn_scale = 1.0f / sqrtf(qs);
    if (strcmp(m->arch, "gemma") == 0)
        return 0;
    int gemma2 = strcmp(m->arch, "gemma2") == 0, win = 0;
    if (llm_hf_cfg_int(root, "sliding_window", &win, gemma2 ? 4096 : 0, !gemma2, path, err) != 0)
        return -1;
    c->swa_window = win;
    if (!gemma2)
        c->rope_theta_swa = llm_hf_cfg_float(root, "rope_local_base_freq", 10000.0f);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "use_bidirectional_attention"))) {
        if (gemma2) {
            llm_seterr(err, "%s: use_bidirectional_attention is supported for Gemma 3 (EmbeddingGemma)", path);
            return -1;
        }
        c->bidirectional = 1; /* EmbeddingGemma: llama.cpp's gemma-embedding */
        snprintf(m->arch, sizeof(m->arch), "gemma-embedding");
    }
    const cJSON *cap = cJSON_GetObjectItemCaseSensitive(root, "attn_logit_softcapping");
    c->attn_softcap = cJSON_IsNumber(cap) ? (float)cap->valuedouble : 0.0f;
    cap = cJSON_GetObjectItemCaseSensitive(root, "final_logit_softcapping");
    c->final_softcap = cJSON_IsNumber(cap) ? (float)cap->valuedouble : 0.0f;
    if (win <= 0 || !(c->attn_softcap >= 0.0f) || !(c->final_softcap >= 0.0f)) {
        llm_seterr(err, "%s: bad sliding_window or soft caps", path);
        return -1;
    }
    return 0;
}

/* OLMo 2 and 3 (Olmo2ForCausalLM, Olmo3ForCausalLM): normed after the blocks, q / k norms over whole rows
 * (OLMoE, OlmoeForCausalLM: those q / k norms only, normed before its blocks as a Llama; EXAONE 4,
 * Exaone4ForCausalLM: OLMo 2's norm placement with per-head q / k norms, its windowed model's global layers
 * without rope);
 * OLMo 3's sliding_window on the layers layer_types says (gemma_layers; three of four by default), whose rope
 * is never scaled (rope_scaling is the full-attention layers'). OLMo 1's clip_qkv is refused. */
static int olmo_config(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    llm_config *c = &m->cfg;
    const cJSON *clip = cJSON_GetObjectItemCaseSensitive(root, "clip_qkv");
    if (clip != NULL && !cJSON_IsNull(clip)) {
        llm_seterr(err, "%s: clip_qkv is not supported", path);
        return -1;
    }
    int olmo2 = strcmp(m->arch, "olmo2") == 0, exaone4 = strcmp(m->arch, "exaone4") == 0;
    c->post_norm_only = olmo2 || exaone4;
    c->qk_norm_full = !exaone4; /* (EXAONE 4's are per head, as Qwen 3's) */
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (c->post_norm_only && sw != NULL && !cJSON_IsNull(sw)) {
        if (!cJSON_IsNumber(sw) || sw->valuedouble < 1 || sw->valuedouble > (double)(1 << 30)) {
            llm_seterr(err, "%s: bad sliding_window", path);
            return -1;
        }
        c->swa_window = (int)sw->valuedouble;
        if (olmo2) /* (EXAONE 4's windowed layers rotate as the others would; its global ones do not rotate) */
            c->rope_theta_swa = c->rope_theta;
    }
    return 0;
}

/* Which layers of a Gemma 2 / 3 (or an OLMo 3, EXAONE 4, gpt-oss) slide (layer_types, sliding_window_pattern, or each one's
 * default). */
static int gemma_layers(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    const llm_config *c = &m->cfg;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    int exaone4 = strcmp(m->arch, "exaone4") == 0;
    int pattern = strcmp(m->arch, "gemma2") == 0 || strcmp(m->arch, "gpt-oss") == 0 ? 2
                  : strcmp(m->arch, "olmo2") == 0 || exaone4                           ? 4
                                                                                       : 6;
    llm_hf_cfg_int(root, "sliding_window_pattern", &pattern, pattern, 0, path, err);
    if (lt != NULL && (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers)) {
        llm_seterr(err, "%s: layer_types must list the %d layers", path, c->n_layers);
        return -1;
    }
    for (int l = 0; l < c->n_layers; l++) {
        const cJSON *t = lt != NULL ? cJSON_GetArrayItem(lt, l) : NULL;
        if (t != NULL && (!cJSON_IsString(t) || (strcmp(t->valuestring, "sliding_attention") != 0 &&
                                                 strcmp(t->valuestring, "full_attention") != 0))) {
            llm_seterr(err, "%s: layer_types[%d] is not sliding_attention or full_attention", path, l);
            return -1;
        }
        m->layers[l].swa = t != NULL ? strcmp(t->valuestring, "sliding_attention") == 0
                                     : pattern > 0 && l % pattern < pattern - 1;
        m->layers[l].nope = exaone4 && !m->layers[l].swa; /* EXAONE 4's global layers: no rope */
    }
    return 0;
}

/* Which layers of a SmolLM3 rotate: no_rope_layers (1: rope, 0: none), else every no_rope_layer_interval-th
 * layer (4) without. */
static int smollm3_layers(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    const llm_config *c = &m->cfg;
    const cJSON *nr = cJSON_GetObjectItemCaseSensitive(root, "no_rope_layers");
    int every = 4;
    if (llm_hf_cfg_int(root, "no_rope_layer_interval", &every, 4, 0, path, err) != 0)
        return -1;
    if ((nr != NULL && (!cJSON_IsArray(nr) || cJSON_GetArraySize(nr) != c->n_layers)) || every < 1) {
        llm_seterr(err, "%s: no_rope_layers must list the %d layers (and no_rope_layer_interval be >= 1)", path,
                   c->n_layers);
        return -1;
    }
    for (int l = 0; l < c->n_layers; l++) {
        const cJSON *v = nr != NULL ? cJSON_GetArrayItem(nr, l) : NULL;
        if (v != NULL && (!cJSON_IsNumber(v) || (v->valuedouble != 0 && v->valuedouble != 1))) {
            llm_seterr(err, "%s: no_rope_layers[%d] is not 0 or 1", path, l);
            return -1;
        }
        m->layers[l].nope = v != NULL ? v->valuedouble == 0 : (l + 1) % every == 0;
    }
    return 0;
}

/* Qwen 2 / 3 MoE's experts (num_experts of moe_intermediate_size, num_experts_per_tok, norm_topk_prob, Qwen 2's
 * shared expert of shared_expert_intermediate_size, its width kept as hidden_dim; every layer sparse),
 * Mixtral's (num_local_experts as wide as intermediate_size, always renormalised) or OLMoE's (num_experts as
 * wide as intermediate_size, norm_topk_prob). */
static int moe_config(llm_model *m, const cJSON *root, int mixtral, const char *path, llm_err *err)
{
    llm_config *c = &m->cfg;
    const int olmoe = strcmp(m->arch, "olmoe") == 0;
    int step = 1;
    const cJSON *dense = cJSON_GetObjectItemCaseSensitive(root, "mlp_only_layers");
    if (llm_hf_cfg_int(root, mixtral ? "num_local_experts" : "num_experts", &c->n_expert, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "num_experts_per_tok", &c->n_expert_used, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "moe_intermediate_size", &c->expert_ff, c->hidden_dim, !mixtral && !olmoe, path, err) ||
        llm_hf_cfg_int(root, "decoder_sparse_step", &step, 1, 0, path, err))
        return -1;
    if (mixtral || olmoe)
        c->expert_ff = c->hidden_dim;
    if (strcmp(m->arch, "qwen2moe") == 0 &&
        llm_hf_cfg_int(root, "shared_expert_intermediate_size", &c->hidden_dim, 0, 1, path, err) != 0)
        return -1;
    c->moe_norm_topk = mixtral || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "norm_topk_prob"));
    if (step != 1 || (cJSON_IsArray(dense) && cJSON_GetArraySize(dense) > 0)) {
        llm_seterr(err, "%s: dense layers among the experts (decoder_sparse_step, mlp_only_layers) are not supported",
                   path);
        return -1;
    }
    return 0;
}

/* Granite MoE's (GraniteMoe, GraniteMoeShared): num_local_experts as wide as intermediate_size, the top
 * num_experts_per_tok softmaxed among themselves (renormalised), GraniteMoeShared's shared expert of
 * shared_intermediate_size (0: none) kept as hidden_dim. */
static int granite_moe_config(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    llm_config *c = &m->cfg;
    int shared = 0;
    if (llm_hf_cfg_int(root, "num_local_experts", &c->n_expert, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "num_experts_per_tok", &c->n_expert_used, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "shared_intermediate_size", &shared, 0, 0, path, err))
        return -1;
    c->expert_ff = c->hidden_dim;
    if (shared > 0)
        c->hidden_dim = shared;
    c->moe_norm_topk = 1;
    return 0;
}

/* ERNIE 4.5 MoE's (Ernie4_5_MoeForCausalLM): moe_num_experts of moe_intermediate_size, moe_k per token chosen
 * with moe_statics' bias and renormalised, moe_num_shared_experts shared ones run as one that many times as wide
 * (kept as hidden_dim), the first moe_layer_start_index layers dense (intermediate_size wide, dense_ff); a
 * moe_layer_interval other than 1, or a moe_layer_end_index short of the last layer, is refused (dense layers
 * after the experts: llama.cpp loads no such file either). */
static int ernie_moe_config(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    llm_config *c = &m->cfg;
    int shared = 0, step = 1, end = -1;
    if (llm_hf_cfg_int(root, "moe_num_experts", &c->n_expert, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "moe_k", &c->n_expert_used, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "moe_intermediate_size", &c->expert_ff, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "moe_num_shared_experts", &shared, 0, 0, path, err) ||
        llm_hf_cfg_int(root, "moe_layer_start_index", &c->moe_dense_lead, 0, 0, path, err) ||
        llm_hf_cfg_int(root, "moe_layer_interval", &step, 1, 0, path, err) ||
        llm_hf_cfg_int(root, "moe_layer_end_index", &end, -1, 0, path, err))
        return -1;
    if (step != 1 || (end != -1 && end < c->n_layers - 1) || c->moe_dense_lead < 0 ||
        c->moe_dense_lead >= c->n_layers || shared < 0 || shared > 64) {
        llm_seterr(err, "%s: moe_layer_start_index %d, moe_layer_end_index %d, moe_layer_interval %d, "
                   "moe_num_shared_experts %d: only experts on every layer after the leading dense ones (to the last, "
                   "an interval of 1) are supported", path, c->moe_dense_lead, end, step, shared);
        return -1;
    }
    c->dense_ff = c->moe_dense_lead > 0 ? c->hidden_dim : 0;
    if (shared > 0)
        c->hidden_dim = shared * c->expert_ff;
    c->moe_norm_topk = 1;
    return 0;
}

/* GLM-4.5's (Glm4MoeForCausalLM): n_routed_experts of moe_intermediate_size, num_experts_per_tok per token
 * chosen by the router's sigmoids plus mlp.gate's e_score_correction_bias, renormalised with norm_topk_prob and
 * times routed_scaling_factor; n_shared_experts shared ones as one that many times as wide; the first
 * first_k_dense_replace layers dense (intermediate_size wide); rope on partial_rotary_factor of each head.
 * Groups of experts (n_group, topk_group other than 1) are refused; the num_nextn_predict_layers layers after
 * num_hidden_layers (multi-token prediction) are not read, as transformers does not. */
static int glm_moe_config(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    llm_config *c = &m->cfg;
    int shared = 1, groups = 1, topk_groups = 1;
    if (llm_hf_cfg_int(root, "n_routed_experts", &c->n_expert, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "num_experts_per_tok", &c->n_expert_used, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "moe_intermediate_size", &c->expert_ff, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "n_shared_experts", &shared, 1, 0, path, err) ||
        llm_hf_cfg_int(root, "first_k_dense_replace", &c->moe_dense_lead, 1, 0, path, err) ||
        llm_hf_cfg_int(root, "n_group", &groups, 1, 0, path, err) ||
        llm_hf_cfg_int(root, "topk_group", &topk_groups, 1, 0, path, err))
        return -1;
    if (groups != 1 || topk_groups != 1 || c->moe_dense_lead < 0 || c->moe_dense_lead >= c->n_layers || shared < 0 ||
        shared > 64) {
        llm_seterr(err, "%s: n_group %d, topk_group %d, first_k_dense_replace %d, n_shared_experts %d: experts in one "
                   "group, after at most num_hidden_layers - 1 dense layers, are supported", path, groups, topk_groups,
                   c->moe_dense_lead, shared);
        return -1;
    }
    float prf = llm_hf_cfg_float(root, "partial_rotary_factor", 0.5f), scale = llm_hf_cfg_float(root,
                                                                                                "routed_scaling_factor", 1.0f);
    int hd = c->head_dim > 0 ? c->head_dim : c->n_heads > 0 ? c->dim / c->n_heads : 0, rd = (int)lroundf(prf * (float)hd);
    if (!(prf > 0.0f && prf <= 1.0f) || rd < 2 || rd % 2 != 0 || !(scale > 0.0f && scale <= 1000.0f)) {
        llm_seterr(err, "%s: partial_rotary_factor %g (of head_dim %d) or routed_scaling_factor %g out of range", path,
                   (double)prf, hd, (double)scale);
        return -1;
    }
    c->rope_dims = rd == hd ? 0 : rd;
    c->moe_sigmoid = 1;
    c->moe_w_scale = scale;
    c->dense_ff = c->moe_dense_lead > 0 ? c->hidden_dim : 0;
    c->hidden_dim = shared * c->expert_ff;
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "norm_topk_prob");
    c->moe_norm_topk = norm == NULL || cJSON_IsTrue(norm);
    return 0;
}

/* Phi 3's (Phi3ForCausalLM: Phi-3, Phi-3.5-mini, Phi-4, Phi-4-mini): rope on partial_rotary_factor of each
 * head (Phi-4-mini's 0.75), and LongRoPE (rope_scaling type "longrope", Phi-3's early "su": long_factor /
 * short_factor, one divisor per rotating frequency, over original_max_position_embeddings; the attention factor
 * rope_scaling.attention_factor or, as transformers and llama.cpp's converter compute it, sqrt(1 + ln(s) / ln(
 * orig)) for s = max_position_embeddings / orig > 1). The factors are taken as llama.cpp takes them, by the
 * context the model runs with (transformers picks them by each sequence's length). Its sliding_window is not
 * applied, as llama.cpp does not apply it. 1: LongRoPE read, 0: none, -1 + err. */
static int phi3_config(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    llm_config *c = &m->cfg;
    float prf = llm_hf_cfg_float(root, "partial_rotary_factor", 1.0f);
    int hd = c->head_dim > 0 ? c->head_dim : c->n_heads > 0 ? c->dim / c->n_heads : 0, rd = (int)lroundf(prf * (float)hd);
    if (!(prf > 0.0f && prf <= 1.0f) || rd < 2 || rd % 2 != 0) {
        llm_seterr(err, "%s: partial_rotary_factor %g of head_dim %d is out of range", path, (double)prf, hd);
        return -1;
    }
    c->rope_dims = rd == hd ? 0 : rd;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!cJSON_IsString(ty))
        ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!cJSON_IsObject(rs) || !cJSON_IsString(ty) ||
        (strcmp(ty->valuestring, "longrope") != 0 && strcmp(ty->valuestring, "su") != 0))
        return 0; /* (another scaling: rope_scaling_cfg's) */
    const int rot = rd / 2;
    const cJSON *fac[2] = { cJSON_GetObjectItemCaseSensitive(rs, "long_factor"),
                            cJSON_GetObjectItemCaseSensitive(rs, "short_factor") };
    float *f = malloc(2 * (size_t)rot * sizeof(float));
    if (llm_model_own(m, f, err) != 0)
        return -1;
    for (int k = 0; k < 2; k++) {
        int ok = cJSON_IsArray(fac[k]) && cJSON_GetArraySize(fac[k]) == rot;
        for (int i = 0; ok && i < rot; i++) {
            const cJSON *v = cJSON_GetArrayItem(fac[k], i);
            ok = cJSON_IsNumber(v) && v->valuedouble > 0.0 && v->valuedouble < 1e6;
            if (ok)
                f[k * rot + i] = (float)v->valuedouble;
        }
        if (!ok) {
            llm_seterr(err, "%s: rope_scaling %s must be %d numbers in (0, 1e6) (one per rotating frequency)", path,
                       k == 0 ? "long_factor" : "short_factor", rot);
            return -1;
        }
    }
    int orig = 0;
    if (llm_hf_cfg_int(root, "original_max_position_embeddings", &orig, 0, 0, path, err) != 0 ||
        (orig == 0 && llm_hf_cfg_int(rs, "original_max_position_embeddings", &orig, 0, 1, path, err) != 0))
        return -1;
    float attn = llm_hf_cfg_float(rs, "attention_factor", llm_longrope_mscale(c->seq_len, orig));
    if (orig <= 0 || orig > (1 << 24) || !(attn > 0.0f && attn < 100.0f)) {
        llm_seterr(err, "%s: bad LongRoPE original_max_position_embeddings %d / attention_factor %g", path, orig,
                   (double)attn);
        return -1;
    }
    m->rope_long = f;
    m->rope_short = f + rot;
    c->rope_scaling = LLM_ROPE_SCALING_LONGROPE;
    c->rope_orig_ctx = orig;
    c->rope_mscale = attn;
    return 1;
}

/* A multimodal config's text_config as the whole config, with the checkpoint's quantisation (kept at the top
 * level: RedHatAI's Mistral-Small-3.1 FP8 and W4A16, Gemma 3's GPTQ) moved into it. */
static cJSON *text_config(cJSON *root, cJSON *tc)
{
    static const char *const keys[] = { "quantization_config", "compression_config" };
    cJSON_DetachItemViaPointer(root, tc);
    for (int i = 0; i < 2; i++)
        if (cJSON_GetObjectItemCaseSensitive(tc, keys[i]) == NULL) {
            cJSON *q = cJSON_DetachItemFromObjectCaseSensitive(root, keys[i]);
            if (q != NULL)
                cJSON_AddItemToObject(tc, keys[i], q);
        }
    cJSON_Delete(root);
    return tc;
}

static int parse_config(llm_model *m, const char *dir, cJSON **text_cfg, llm_err *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    cJSON *root = llm_json_read_file(path, err);
    if (root == NULL)
        return -1;
    if (!cJSON_IsObject(root)) {
        llm_seterr(err, "%s: not a JSON object", path);
        cJSON_Delete(root);
        return -1;
    }
    llm_config *c = &m->cfg;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    /* Gemma 3 4B and up (Gemma3ForConditionalGeneration): the language model's config is text_config and its
     * tensors are under language_model; the vision tower is left out */
    cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (cJSON_IsString(mt) && strcmp(mt->valuestring, "gemma3") == 0 && cJSON_IsObject(tc)) {
        root = text_config(root, tc);
        mt = NULL;
        snprintf(m->arch, sizeof(m->arch), "gemma3");
    }
    /* Mistral Small 3.1 / 3.2 (Mistral3ForConditionalGeneration, model_type mistral3): a Mistral in text_config,
     * its tensors under language_model (lm_head too); the vision tower and projector are left out */
    if (cJSON_IsString(mt) && strcmp(mt->valuestring, "mistral3") == 0 && cJSON_IsObject(tc)) {
        const cJSON *tmt = cJSON_GetObjectItemCaseSensitive(tc, "model_type");
        if (tmt != NULL && !(cJSON_IsString(tmt) && strcmp(tmt->valuestring, "mistral") == 0)) {
            llm_seterr(err, "%s: mistral3's text_config.model_type must be mistral", path);
            cJSON_Delete(root);
            return -1;
        }
        root = text_config(root, tc);
        if (tmt == NULL)
            cJSON_AddStringToObject(root, "model_type", "mistral");
        mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    }
    if (cJSON_IsString(mt) && strcmp(mt->valuestring, "gemma3_text") == 0) {
        snprintf(m->arch, sizeof(m->arch), "gemma3");
        mt = NULL;
    }
    /* EXAONE 3.x (ExaoneForCausalLM, remote code): a Llama under GPT-2's names (llm_hf_exaone_name), num_layers,
     * layer_norm_epsilon (its norms are RMSNorms all the same) and activation_function */
    int exaone = cJSON_IsString(mt) && strcmp(mt->valuestring, "exaone") == 0;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "activation_function");
    if (exaone && act != NULL && !(cJSON_IsString(act) && strcmp(act->valuestring, "silu") == 0)) {
        llm_seterr(err, "%s: EXAONE's activation_function must be silu", path);
        cJSON_Delete(root);
        return -1;
    }
    if (cJSON_IsString(mt) && strcmp(mt->valuestring, "olmo3") == 0) { /* OLMo 2's layers, windows on 3 of 4 */
        snprintf(m->arch, sizeof(m->arch), "olmo2");
        mt = NULL;
    }
    if (cJSON_IsString(mt) && (strcmp(mt->valuestring, "granitemoe") == 0 ||
                               strcmp(mt->valuestring, "granitemoeshared") == 0)) {
        snprintf(m->arch, sizeof(m->arch), "granitemoe"); /* (with a shared expert or not: one architecture) */
        mt = NULL;
    }
    if (cJSON_IsString(mt) && strcmp(mt->valuestring, "ernie4_5_moe") == 0) {
        snprintf(m->arch, sizeof(m->arch), "ernie4_5-moe");
        mt = NULL;
    }
    if (cJSON_IsString(mt) && strcmp(mt->valuestring, "glm4_moe") == 0) {
        snprintf(m->arch, sizeof(m->arch), "glm4moe");
        mt = NULL;
    }
    if (cJSON_IsString(mt) && strcmp(mt->valuestring, "gpt_oss") == 0) { /* (model_hf_gptoss.c) */
        snprintf(m->arch, sizeof(m->arch), "gpt-oss");
        mt = NULL;
    }
    if (cJSON_IsString(mt) && (strcmp(mt->valuestring, "qwen3_moe") == 0 || strcmp(mt->valuestring, "qwen2_moe") == 0)) {
        snprintf(m->arch, sizeof(m->arch), "%s", mt->valuestring[4] == '3' ? "qwen3moe" : "qwen2moe");
        mt = NULL;
    }
    /* Mistral's is Llama's graph; only its sliding window (v0.1's 4096) differs, refused below. Mixtral is a
     * llama with experts. */
    int mixtral = cJSON_IsString(mt) && strcmp(mt->valuestring, "mixtral") == 0;
    int mistral = mixtral || (cJSON_IsString(mt) && strcmp(mt->valuestring, "mistral") == 0);
    if (cJSON_IsString(mt) && (strcmp(mt->valuestring, "bert") == 0 || strcmp(mt->valuestring, "xlm-roberta") == 0)) {
        /* an encoder (model_hf_bert.c) */
        int rc = llm_hf_bert_config(m, root, path, err);
        cJSON_Delete(root);
        return rc;
    }
    if (cJSON_IsString(mt) && strcmp(mt->valuestring, "modernbert") == 0) {
        /* a pre-norm encoder on the decoder's path (model_hf_modernbert.c); its config read again for the
         * windowed layers once they exist */
        if (llm_hf_modern_bert_config(m, root, path, err) != 0) {
            cJSON_Delete(root);
            return -1;
        }
        *text_cfg = root;
        return 0;
    }
    if (cJSON_IsString(mt) && !mistral && !llm_model_arch_ok(mt->valuestring)) {
        llm_seterr(err, "%s: unsupported model_type '%s' (llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, "
                   "mistral3, gemma, gemma2, gemma3_text, gemma3, phi3, smollm3, granite, granitemoe, granitemoeshared, olmo2, "
                   "olmo3, olmoe, ernie4_5, ernie4_5_moe, glm4_moe, gpt_oss, seed_oss, exaone, exaone4; bert, xlm-roberta, "
                   "modernbert)",
                   path,
                   mt->valuestring);
        cJSON_Delete(root);
        return -1;
    }
    if (cJSON_IsString(mt))
        snprintf(m->arch, sizeof(m->arch), "%s", mistral ? "llama" : mt->valuestring);
    /* Mistral 7B v0.1's window (4096) on every layer; null in the later ones and in Mixtral's */
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (mistral && sw != NULL && !cJSON_IsNull(sw)) {
        if (!cJSON_IsNumber(sw) || sw->valuedouble < 1 || sw->valuedouble > (double)(1 << 30)) {
            llm_seterr(err, "%s: bad sliding_window", path);
            cJSON_Delete(root);
            return -1;
        }
        c->swa_window = (int)sw->valuedouble;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "mlp_bias")) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "use_sliding_window"))) {
        llm_seterr(err, "%s: mlp_bias and use_sliding_window are not supported", path);
        cJSON_Delete(root);
        return -1;
    }
    int rc = llm_hf_cfg_int(root, "hidden_size", &c->dim, 0, 1, path, err) ||
             llm_hf_cfg_int(root, "intermediate_size", &c->hidden_dim, 0, 1, path, err) ||
             llm_hf_cfg_int(root, exaone ? "num_layers" : "num_hidden_layers", &c->n_layers, 0, 1, path, err) ||
             llm_hf_cfg_int(root, "num_attention_heads", &c->n_heads, 0, 1, path, err) ||
             llm_hf_cfg_int(root, "num_key_value_heads", &c->n_kv_heads, 0, 0, path, err) ||
             llm_hf_cfg_int(root, "head_dim", &c->head_dim, 0, 0, path, err) ||
             llm_hf_cfg_int(root, "vocab_size", &c->vocab_size, 0, 1, path, err) ||
             llm_hf_cfg_int(root, "max_position_embeddings", &c->seq_len, 2048, 0, path, err) ||
             llm_hf_cfg_int(root, "bos_token_id", &c->bos_id, -1, 0, path, err) ||
             llm_hf_cfg_int(root, "eos_token_id", &c->eos_id, -1, 0, path, err);
    c->rope_theta = llm_hf_cfg_float(root, "rope_theta", 10000.0f);
    c->norm_eps = llm_hf_cfg_float(root, exaone ? "layer_norm_epsilon" : "rms_norm_eps", 1e-5f);
    /* (ERNIE 4.5 rotates adjacent pairs in its own checkpoints, as llama.cpp's GGUF llamas do) */
    int ernie = strncmp(m->arch, "ernie4_5", 8) == 0;
    c->rope_layout = ernie ? LLM_ROPE_ADJACENT : LLM_ROPE_HALF;
    if (rc == 0 && ernie && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "use_bias"))) {
        llm_seterr(err, "%s: use_bias is not supported", path);
        rc = -1;
    }
    int gemma = strncmp(m->arch, "gemma", 5) == 0;
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    c->tied_embeddings = cJSON_IsTrue(tie) || (gemma && tie == NULL); /* Gemma's configs tie by default */
    if (rc == 0 && gemma)
        rc = gemma_config(m, root, path, err);
    int granitemoe = strcmp(m->arch, "granitemoe") == 0;
    if (rc == 0 && (granitemoe || strcmp(m->arch, "granite") == 0)) {
        /* its four scales (as llama.cpp's converter reads them) */
        c->embd_scale = llm_hf_cfg_float(root, "embedding_multiplier", 1.0f);
        c->attn_scale = llm_hf_cfg_float(root, "attention_multiplier", 1.0f); /* GraniteConfig's defaults, all 1 */
        c->residual_scale = llm_hf_cfg_float(root, "residual_multiplier", 1.0f);
        c->logit_scale = llm_hf_cfg_float(root, "logits_scaling", 1.0f);
    }
    int olmoe = strcmp(m->arch, "olmoe") == 0;
    if (rc == 0 && (mixtral || olmoe || strcmp(m->arch, "qwen3moe") == 0 || strcmp(m->arch, "qwen2moe") == 0))
        rc = moe_config(m, root, mixtral, path, err);
    if (rc == 0 && granitemoe)
        rc = granite_moe_config(m, root, path, err);
    if (rc == 0 && strcmp(m->arch, "ernie4_5-moe") == 0)
        rc = ernie_moe_config(m, root, path, err);
    int glm = strcmp(m->arch, "glm4moe") == 0, gptoss = strcmp(m->arch, "gpt-oss") == 0;
    if (rc == 0 && glm)
        rc = glm_moe_config(m, root, path, err);
    if (rc == 0 && gptoss)
        rc = llm_hf_gptoss_config(m, root, path, err);
    if (rc == 0)
        rc = llm_hf_quant_config(m, root, path, err);
    int olmo = strcmp(m->arch, "olmo2") == 0 || strcmp(m->arch, "exaone4") == 0;
    if (rc == 0 && (olmo || olmoe))
        rc = olmo_config(m, root, path, err);
    int longrope = 0;
    if (rc == 0 && strcmp(m->arch, "phi3") == 0 && (longrope = phi3_config(m, root, path, err)) < 0)
        rc = -1;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (rc == 0 && cJSON_IsObject(rs) && !longrope)
        rc = rope_scaling_cfg(c, rs, path, err);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "_name_or_path");
    snprintf(m->name, sizeof(m->name), "%s", cJSON_IsString(nm) ? nm->valuestring : "hf model");
    if (rc == 0 && (gemma || granitemoe || strcmp(m->arch, "smollm3") == 0 || (olmo && c->swa_window > 0) ||
                    strcmp(m->arch, "ernie4_5-moe") == 0 || glm || gptoss)) {
        /* for gemma_layers (OLMo 3's windows too) / smollm3_layers / granite_shared / moe_shared, once the layers
         * exist */
        *text_cfg = root;
        return 0;
    }
    cJSON_Delete(root);
    return rc ? -1 : 0;
}

static int rope_scaling_cfg(llm_config *c, const cJSON *rs, const char *path, llm_err *err)
{
    int rc = 0;
    {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
        if (!cJSON_IsString(ty))
            ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
        if (cJSON_IsString(ty) && (strcmp(ty->valuestring, "yarn") == 0 || strcmp(ty->valuestring, "linear") == 0)) {
            int yarn = ty->valuestring[0] == 'y';
            c->rope_scaling = yarn ? LLM_ROPE_SCALING_YARN : LLM_ROPE_SCALING_LINEAR;
            c->rope_factor = llm_hf_cfg_float(rs, "factor", 0.0f);
            /* Hugging Face's attention_factor replaces YaRN's 1 + 0.1 ln factor */
            c->rope_mscale = llm_hf_cfg_float(rs, "attention_factor", llm_yarn_mscale(c->rope_factor));
            c->yarn_beta_fast = llm_hf_cfg_float(rs, "beta_fast", 32.0f);
            c->yarn_beta_slow = llm_hf_cfg_float(rs, "beta_slow", 1.0f);
            rc = llm_hf_cfg_int(rs, "original_max_position_embeddings", &c->rope_orig_ctx, c->seq_len, 0, path, err);
            if (rc == 0 && (cJSON_GetObjectItemCaseSensitive(rs, "mscale") != NULL ||
                            cJSON_GetObjectItemCaseSensitive(rs, "mscale_all_dim") != NULL)) {
                llm_seterr(err, "%s: rope_scaling mscale / mscale_all_dim (DeepSeek's YaRN) are not supported", path);
                rc = -1;
            }
            /* gpt-oss's: the correction range unrounded */
            c->yarn_no_truncate = yarn && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(rs, "truncate"));
            if (rc == 0 && !(c->rope_factor >= 1 && c->rope_orig_ctx > 0 && c->rope_mscale > 0 &&
                             c->yarn_beta_fast > c->yarn_beta_slow && c->yarn_beta_slow > 0)) {
                llm_seterr(err, "%s: bad %s rope_scaling values (factor %g)", path, ty->valuestring,
                           (double)c->rope_factor);
                rc = -1;
            }
        } else if (cJSON_IsString(ty) && strcmp(ty->valuestring, "llama3") == 0) {
            c->rope_scaling = LLM_ROPE_SCALING_LLAMA3;
            c->rope_factor = llm_hf_cfg_float(rs, "factor", 8.0f);
            c->rope_low_freq_factor = llm_hf_cfg_float(rs, "low_freq_factor", 1.0f);
            c->rope_high_freq_factor = llm_hf_cfg_float(rs, "high_freq_factor", 4.0f);
            rc = llm_hf_cfg_int(rs, "original_max_position_embeddings", &c->rope_orig_ctx, 8192, 0, path, err);
            if (rc == 0 && !(c->rope_factor > 0 && c->rope_high_freq_factor > c->rope_low_freq_factor &&
                             c->rope_orig_ctx > 0)) {
                llm_seterr(err, "%s: bad llama3 rope_scaling values", path);
                rc = -1;
            }
        } else if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "default") != 0) {
            llm_seterr(err, "%s: unsupported rope_scaling type '%s' (llama3, yarn, linear)", path,
                       cJSON_IsString(ty) ? ty->valuestring : "?");
            rc = -1;
        }
    }
    return rc ? -1 : 0;
}

/* A language-model tensor by its "model." name, or under Gemma 3's multimodal model ("language_model.model."
 * as transformers saved it before 4.52, "model.language_model." after). */
const st_tensor *llm_hf_find(const st_set *s, const char *name)
{
    /* a multimodal model's text tensors, or a bare *Model's as sentence-transformers saves one (EmbeddingGemma's
     * Gemma3TextModel, Qwen3-Embedding's Qwen3Model: "layers.0...", no "model.") */
    static const char *const under[] = { "language_model.model.", "model.language_model.", "" };
    const st_tensor *t = st_set_find(s, name);
    if (t == NULL && strcmp(name, "lm_head.weight") == 0) /* (Mistral3ForConditionalGeneration's, before 4.52) */
        t = st_set_find(s, "language_model.lm_head.weight");
    for (size_t i = 0; t == NULL && strncmp(name, "model.", 6) == 0 && i < 3; i++) {
        char full[192];
        snprintf(full, sizeof(full), "%s%s", under[i], name + 6);
        t = st_set_find(s, full);
    }
    return t;
}

int llm_hf_take(llm_model *m, const st_set *s, const char *name, llm_tensor *dst, int required, llm_err *err)
{
    const st_tensor *t = llm_hf_find(s, name);
    int intq = m->hfq.method == LLM_HFQ_GPTQ || m->hfq.method == LLM_HFQ_AWQ || m->hfq.method == LLM_HFQ_CT;
    if (intq && (t == NULL || t->kind == ST_I8)) { /* an integer checkpoint's Linear: qweight, weight_packed, ... */
        int rc = llm_hf_intq_take(m, s, name, dst, err);
        if (rc != 0)
            return rc < 0 ? -1 : 0;
    }
    if (t == NULL) {
        size_t n = strlen(name);
        char q[200];
        snprintf(q, sizeof(q), "%.*s.qweight", n > 7 ? (int)(n - 7) : 0, name);
        if (required && !intq && n > 7 && strcmp(name + n - 7, ".weight") == 0 && llm_hf_find(s, q) != NULL)
            llm_seterr(err, "%s: tensor %s is quantised (%s) but config.json has no quantization_config (nor is "
                       "there a quantize_config.json or quant_config.json)", m->path, name, q);
        else if (required)
            llm_seterr(err, "%s: missing tensor %s", m->path, name);
        return required ? -1 : 0;
    }
    if (t->kind == ST_F8_E4M3) { /* an FP8 checkpoint's: dequantised with its scales */
        char sn[200];
        snprintf(sn, sizeof(sn), m->hfq.method == LLM_HFQ_CT ? "%s_scale" : "%s_scale_inv", name);
        return llm_hf_fp8_take(m, name, t, llm_hf_find(s, sn),
                               m->hfq.method == LLM_HFQ_FP8 ? m->hfq.fp8_block : NULL, dst, err);
    }
    if (!st_is_float(t)) {
        llm_seterr(err, "%s: tensor %s holds raw %s (an MXFP4 checkpoint's blocks and scales, or an integer "
                   "checkpoint's parts, are read under their own names)", m->path, name,
                   t->kind == ST_U8 ? "U8 bytes" : "integers");
        return -1;
    }
    if (t->n_dims == 1) {
        dst->ne[0] = (int64_t)t->shape[0];
        dst->ne[1] = 1;
    } else if (t->n_dims == 2) {
        dst->ne[0] = (int64_t)t->shape[1]; /* row-major [out, in]: rows of `in` elements */
        dst->ne[1] = (int64_t)t->shape[0];
    } else {
        llm_seterr(err, "%s: tensor %s must be 1-D or 2-D (has %d dims)", m->path, name, t->n_dims);
        return -1;
    }
    dst->type = t->type;
    dst->data = t->data;
    return 0;
}

int llm_hf_take_norm(llm_model *m, const st_set *s, const char *name, llm_tensor *dst, llm_err *err)
{
    llm_tensor t = { 0 };
    if (llm_hf_take(m, s, name, &t, 1, err) != 0)
        return -1;
    if (t.ne[1] != 1) {
        llm_seterr(err, "%s: norm tensor %s must be 1-D", m->path, name);
        return -1;
    }
    if (llm_model_norm_f32(m, dst, t.type, t.data, t.ne[0], name, err) != 0)
        return -1;
    if (strncmp(m->arch, "gemma", 5) == 0 && strstr(name, "norm") != NULL) { /* Gemma's norms scale by 1 + w */
        float *w = (float *)(uintptr_t)dst->data;
        for (int64_t i = 0; i < dst->ne[0]; i++)
            w[i] += 1.0f;
    }
    return 0;
}

int llm_hf_take_f32(llm_model *m, const st_set *s, const char *name, int64_t cols, int64_t rows, int required,
                    const float **out, llm_err *err)
{
    llm_tensor t = { 0 };
    *out = NULL;
    if (llm_hf_take(m, s, name, &t, required, err) != 0)
        return -1;
    return t.data == NULL ? 0 : llm_model_f32_copy(m, &t, name, cols, rows, out, err);
}

int llm_hf_take_fused(llm_model *m, const st_set *s, const char *name, const int64_t *rows, int n,
                      llm_tensor *const *dst, llm_err *err)
{
    llm_tensor t = { 0 };
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += rows[i];
    if (llm_hf_take(m, s, name, &t, 1, err) != 0)
        return -1;
    if (t.ne[0] != m->cfg.dim || t.ne[1] != total) {
        llm_seterr(err, "%s: tensor %s is [%lld x %lld], the config needs [%lld x %d]", m->path, name,
                   (long long)t.ne[1], (long long)t.ne[0], (long long)total, m->cfg.dim);
        return -1;
    }
    size_t rb = llm_dtype_row_bytes(t.type, (uint64_t)t.ne[0]); /* (safetensors: F32, F16, BF16 rows) */
    int64_t r0 = 0;
    for (int i = 0; i < n; r0 += rows[i], i++)
        *dst[i] = (llm_tensor){ .type = t.type, .ne = { t.ne[0], rows[i] },
                                .data = (const uint8_t *)t.data + (size_t)r0 * rb };
    return 0;
}

/* Granite MoE's experts (JetMoE's parallel experts): input_linear [n_expert][2 ff][dim], each expert's gate
 * rows then its up rows, and output_linear [n_expert][dim][ff], as row views into L->experts. */
static int take_parallel_experts(llm_model *m, const st_set *s, int l, llm_layer *L, llm_err *err)
{
    const llm_config *c = &m->cfg;
    const int64_t E = c->n_expert, ff = c->expert_ff, dim = c->dim;
    static const char *const names[2] = { "input_linear", "output_linear" };
    for (int k = 0; k < 2; k++) {
        char n[160];
        snprintf(n, sizeof(n), "model.layers.%d.block_sparse_moe.%s.weight", l, names[k]);
        const st_tensor *t = llm_hf_find(s, n);
        const int64_t rows = k == 0 ? 2 * ff : dim, cols = k == 0 ? dim : ff;
        if (t == NULL) {
            llm_seterr(err, "%s: missing tensor %s", m->path, n);
            return -1;
        }
        if (t->n_dims != 3 || !st_is_float(t) || t->shape[0] != (uint64_t)E || t->shape[1] != (uint64_t)rows ||
            t->shape[2] != (uint64_t)cols) {
            llm_seterr(err, "%s: tensor %s must be [%lld, %lld, %lld] (num_local_experts, %s)", m->path, n,
                       (long long)E, (long long)rows, (long long)cols,
                       k == 0 ? "2 x intermediate_size, hidden_size" : "hidden_size, intermediate_size");
            return -1;
        }
        const size_t rb = llm_dtype_row_bytes(t->type, (uint64_t)cols);
        for (int64_t e = 0; e < E; e++)
            for (int p = 0; p < (k == 0 ? 2 : 1); p++) { /* gate, up (k 0); down (k 1) */
                const int64_t r = k == 0 ? ff : dim, r0 = e * rows + p * ff;
                L->experts[3 * e + (k == 0 ? p : 2)] =
                    (llm_tensor){ .type = t->type, .ne = { cols, r }, .data = (const uint8_t *)t->data + (size_t)r0 * rb };
            }
    }
    return 0;
}

/* A MoE layer's router and experts, one tensor each: Qwen 3 MoE's mlp.gate and mlp.experts.E.{gate,up,down}_proj,
 * or Mixtral's block_sparse_moe.gate and block_sparse_moe.experts.E.{w1,w3,w2}; Granite MoE's router and its
 * experts three-dimensional (take_parallel_experts). */
static int take_experts(llm_model *m, const st_set *s, int l, llm_layer *L, llm_err *err)
{
    /* (OLMoE and ERNIE 4.5 MoE name their experts as Qwen's) */
    int ernie = strcmp(m->arch, "ernie4_5-moe") == 0, glm = strcmp(m->arch, "glm4moe") == 0;
    int qwen = strncmp(m->arch, "qwen", 4) == 0 || strcmp(m->arch, "olmoe") == 0 || ernie || glm;
    int granite = strcmp(m->arch, "granitemoe") == 0;
    const char *moe = qwen ? "mlp" : "block_sparse_moe";
    static const char *const qn[3] = { "gate_proj", "up_proj", "down_proj" }, *const mn[3] = { "w1", "w3", "w2" };
    char n[160];
    snprintf(n, sizeof(n), "model.layers.%d.%s.%s.weight", l, moe, granite ? "router.layer" : "gate");
    if (llm_hf_take(m, s, n, &L->ffn_gate_inp, 1, err) != 0)
        return -1;
    L->experts = calloc((size_t)m->cfg.n_expert * 3, sizeof(llm_tensor));
    if (llm_model_own(m, L->experts, err) != 0)
        return -1;
    if (granite) /* (its shared expert: granite_shared, with the config) */
        return take_parallel_experts(m, s, l, L, err);
    for (int e = 0; e < m->cfg.n_expert; e++)
        for (int w = 0; w < 3; w++) {
            snprintf(n, sizeof(n), "model.layers.%d.%s.experts.%d.%s.weight", l, moe, e, qwen ? qn[w] : mn[w]);
            if (llm_hf_take(m, s, n, &L->experts[3 * e + w], 1, err) != 0)
                return -1;
        }
    if (ernie || glm) { /* the bias choosing the experts (ERNIE's [1, n_expert]; the shared experts: moe_shared) */
        snprintf(n, sizeof(n), ernie ? "model.layers.%d.mlp.moe_statics.e_score_correction_bias"
                                     : "model.layers.%d.mlp.gate.e_score_correction_bias", l);
        if (llm_hf_find(s, n) != NULL && llm_hf_take_norm(m, s, n, &L->exp_probs_b, err) != 0)
            return -1;
    }
    snprintf(n, sizeof(n), "model.layers.%d.mlp.shared_expert_gate.weight", l);
    if (strcmp(m->arch, "qwen2moe") == 0 && m->cfg.hidden_dim > 0) { /* Qwen 2 MoE's shared expert */
        if (llm_hf_take_norm(m, s, n, &L->shexp_gate, err) != 0)
            return -1;
        static const char *const sn[3] = { "gate_proj", "up_proj", "down_proj" };
        llm_tensor *dst[3] = { &L->w_gate, &L->w_up, &L->w_down };
        for (int w = 0; w < 3; w++) {
            snprintf(n, sizeof(n), "model.layers.%d.mlp.shared_expert.%s.weight", l, sn[w]);
            if (llm_hf_take(m, s, n, dst[w], 1, err) != 0)
                return -1;
        }
    }
    return 0;
}

/* ERNIE 4.5 MoE's and GLM-4.5's shared experts (mlp.shared_experts, run as one expert moe_num_shared_experts /
 * n_shared_experts times as wide) in every layer of experts where config.json has some; refused where it has
 * none. */
static int moe_shared(llm_model *m, const st_set *s, const cJSON *root, llm_err *err)
{
    int shared = 0, glm = strcmp(m->arch, "glm4moe") == 0;
    const char *key = glm ? "n_shared_experts" : "moe_num_shared_experts";
    if (llm_hf_cfg_int(root, key, &shared, glm ? 1 : 0, 0, m->path, err) != 0)
        return -1;
    static const char *const sn[3] = { "gate_proj", "up_proj", "down_proj" };
    for (int l = m->cfg.moe_dense_lead; l < m->cfg.n_layers; l++) {
        llm_layer *L = &m->layers[l];
        llm_tensor *dst[3] = { &L->w_gate, &L->w_up, &L->w_down };
        for (int w = 0; w < 3; w++) {
            char n[128];
            snprintf(n, sizeof(n), "model.layers.%d.mlp.shared_experts.%s.weight", l, sn[w]);
            if (shared <= 0 && llm_hf_find(s, n) != NULL) {
                llm_seterr(err, "%s: tensor %s, and %s 0 in config.json", m->path, n, key);
                return -1;
            }
            if (shared > 0 && llm_hf_take(m, s, n, dst[w], 1, err) != 0)
                return -1;
        }
    }
    return 0;
}

/* GraniteMoeShared's shared expert (shared_mlp: input_linear is gate | up stacked by rows, output_linear the
 * down projection) in every layer where config.json gives it a width; refused where it does not. */
static int granite_shared(llm_model *m, const st_set *s, const cJSON *root, llm_err *err)
{
    int shared = 0;
    if (llm_hf_cfg_int(root, "shared_intermediate_size", &shared, 0, 0, m->path, err) != 0)
        return -1;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        llm_layer *L = &m->layers[l];
        char n[128], o[128];
        snprintf(n, sizeof(n), "model.layers.%d.shared_mlp.input_linear.weight", l);
        snprintf(o, sizeof(o), "model.layers.%d.shared_mlp.output_linear.weight", l);
        if (shared <= 0) {
            if (llm_hf_find(s, n) != NULL || llm_hf_find(s, o) != NULL) {
                llm_seterr(err, "%s: tensor %s without a shared_intermediate_size in config.json", m->path,
                           llm_hf_find(s, n) != NULL ? n : o);
                return -1;
            }
            continue;
        }
        const int64_t rows[2] = { shared, shared };
        llm_tensor *gu[2] = { &L->w_gate, &L->w_up };
        if (llm_hf_take_fused(m, s, n, rows, 2, gu, err) != 0 || llm_hf_take(m, s, o, &L->w_down, 1, err) != 0)
            return -1;
    }
    return 0;
}

static int load_tensors(llm_model *m, const st_set *s, llm_err *err)
{
    llm_config *c = &m->cfg;
    if (c->n_layers <= 0 || c->n_layers > 4096) {
        llm_seterr(err, "%s: bad num_hidden_layers %d", m->path, c->n_layers);
        return -1;
    }
    int exaone = strcmp(m->arch, "exaone") == 0; /* (its own names: llm_hf_exaone_name) */
    char emb[64] = "model.embed_tokens.weight", norm[64] = "model.norm.weight";
    if (exaone) {
        llm_hf_exaone_name(emb, sizeof emb);
        llm_hf_exaone_name(norm, sizeof norm);
    }
    if (llm_hf_take(m, s, emb, &m->tok_embd, 1, err) || llm_hf_take_norm(m, s, norm, &m->out_norm, err) ||
        (!c->tied_embeddings && llm_hf_take(m, s, "lm_head.weight", &m->output, 1, err)))
        return -1;
    m->layers = calloc((size_t)c->n_layers, sizeof(llm_layer));
    if (llm_model_own(m, m->layers, err) != 0)
        return -1;
    int qwen2 = strncmp(m->arch, "qwen2", 5) == 0;
    int qwen3 = strcmp(m->arch, "qwen3") == 0 || strcmp(m->arch, "qwen3moe") == 0;
    int gemma3 = strcmp(m->arch, "gemma3") == 0 || strcmp(m->arch, "gemma-embedding") == 0;
    int gemma23 = gemma3 || strcmp(m->arch, "gemma2") == 0, post_only = c->post_norm_only;
    int gptoss = strcmp(m->arch, "gpt-oss") == 0, phi3 = strcmp(m->arch, "phi3") == 0;
    if (phi3 && c->n_heads > 0) { /* (its fused q|k|v's rows: validation's defaults, now) */
        if (c->n_kv_heads <= 0)
            c->n_kv_heads = c->n_heads;
        if (c->head_dim <= 0 && c->dim % c->n_heads == 0)
            c->head_dim = c->dim / c->n_heads;
    }
    if (c->embd_scale > 0.0f && (m->tok_embd.type == LLM_BF16 || m->tok_embd.type == LLM_F16)) {
        /* transformers multiplies by sqrt(hidden_size) as a tensor of the model's dtype */
        uint16_t h;
        llm_row_from_f32(m->tok_embd.type, &c->embd_scale, &h, 1);
        llm_row_to_f32(m->tok_embd.type, &h, &c->embd_scale, 1);
    }
    for (int l = 0; l < c->n_layers; l++) {
        llm_layer *L = &m->layers[l];
        char n[128];
#define NAME(suffix) snprintf(n, sizeof(n), "model.layers.%d." suffix, l); if (exaone) llm_hf_exaone_name(n, sizeof n);
#define T(suffix, field) NAME(suffix ".weight") if (llm_hf_take(m, s, n, &L->field, 1, err)) return -1;
#define N(suffix, field) NAME(suffix ".weight") if (llm_hf_take_norm(m, s, n, &L->field, err)) return -1;
        if (!post_only) {
            N("input_layernorm", attn_norm)
        }
        if (phi3) { /* q|k|v and gate|up, each one matrix stacked by rows */
            const int64_t qkv[3] = { (int64_t)c->n_heads * c->head_dim, (int64_t)c->n_kv_heads * c->head_dim,
                                     (int64_t)c->n_kv_heads * c->head_dim }, gu[2] = { c->hidden_dim, c->hidden_dim };
            llm_tensor *qd[3] = { &L->wq, &L->wk, &L->wv }, *gd[2] = { &L->w_gate, &L->w_up };
            NAME("self_attn.qkv_proj.weight")
            if (llm_hf_take_fused(m, s, n, qkv, 3, qd, err) != 0)
                return -1;
            NAME("mlp.gate_up_proj.weight")
            if (llm_hf_take_fused(m, s, n, gu, 2, gd, err) != 0)
                return -1;
        } else {
            T("self_attn.q_proj", wq) T("self_attn.k_proj", wk) T("self_attn.v_proj", wv)
        }
        T("self_attn.o_proj", wo)
        if (post_only) { /* OLMo 2, EXAONE 4: norms of the blocks' outputs only */
            N("post_attention_layernorm", post_attn_norm)
            N("post_feedforward_layernorm", post_ffn_norm)
        } else if (gemma23) { /* Gemma 2 / 3: post_attention_layernorm is the norm after attention, not before the FFN */
            N("post_attention_layernorm", post_attn_norm)
            N("pre_feedforward_layernorm", ffn_norm)
            N("post_feedforward_layernorm", post_ffn_norm)
        } else {
            N("post_attention_layernorm", ffn_norm)
        }
        L->dense = l < c->moe_dense_lead; /* (ERNIE 4.5 MoE's first layers: their experts listed, absent) */
        if (phi3) {
            T("mlp.down_proj", w_down)
        } else if (!llm_layer_moe(c, L)) {
            T("mlp.gate_proj", w_gate) T("mlp.up_proj", w_up) T("mlp.down_proj", w_down)
            if (L->dense && llm_model_own(m, L->experts = calloc((size_t)c->n_expert * 3, sizeof(llm_tensor)),
                                          err) != 0)
                return -1;
        } else if (gptoss ? llm_hf_gptoss_experts(m, s, l, L, err) != 0 : take_experts(m, s, l, L, err) != 0) {
            return -1;
        }
#undef T
#undef N
        /* Qwen 2's q/k/v biases (Llama's attention_bias too), Qwen 3's q/k norms: optional here,
         * validation asks for all of a kind or none; an o_proj bias would be left out, so it is refused */
#define V(suffix, field, required) NAME(suffix) \
        if ((required || llm_hf_find(s, n) != NULL) && llm_hf_take_norm(m, s, n, &L->field, err)) return -1;
        V("self_attn.q_proj.bias", bq, qwen2 || gptoss) V("self_attn.k_proj.bias", bk, qwen2 || gptoss)
        V("self_attn.v_proj.bias", bv, qwen2 || gptoss)
        V("self_attn.q_norm.weight", q_norm, qwen3 || gemma3 || post_only || c->qk_norm_full)
        V("self_attn.k_norm.weight", k_norm, qwen3 || gemma3 || post_only || c->qk_norm_full)
        if (gptoss) { /* its output projection's bias and each head's sink */
            V("self_attn.o_proj.bias", bo, 1) V("self_attn.sinks", attn_sinks, 1)
        }
#undef V
        L->swa = strcmp(m->arch, "llama") == 0 && c->swa_window > 0; /* Mistral's window: every layer */
        NAME("self_attn.o_proj.bias")
#undef NAME
        if (!gptoss && llm_hf_find(s, n) != NULL) {
            llm_seterr(err, "%s: tensor %s is not supported", m->path, n);
            return -1;
        }
    }
    return 0;
}

/* One sentence-transformers Dense module (DIR/N_Dense: config.json, model.safetensors' linear.weight [out x
 * in]) as owned F32; no bias and the Identity activation only (EmbeddingGemma's). 1 absent, 0, -1 + err. */
static int dense_dir(llm_model *m, const char *dir, const char *sub, int64_t in, int64_t *out, const float **w,
                     llm_err *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s/model.safetensors", dir, sub);
    if (access(path, R_OK) != 0)
        return 1;
    snprintf(path, sizeof(path), "%s/%s/config.json", dir, sub);
    cJSON *cfg = llm_json_read_file(path, err);
    if (cfg == NULL)
        return -1;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(cfg, "activation_function");
    int ok = !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "bias")) &&
             (act == NULL || (cJSON_IsString(act) && strstr(act->valuestring, "Identity") != NULL));
    cJSON_Delete(cfg);
    if (!ok) {
        llm_seterr(err, "%s: a Dense module with a bias or an activation is not supported (EmbeddingGemma's have "
                   "neither)", path);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%s/model.safetensors", dir, sub);
    st_file *f = st_open(path, err);
    if (f == NULL)
        return -1;
    const st_tensor *t = st_find(f, "linear.weight");
    int rc = -1;
    if (t == NULL || t->n_dims != 2 || !st_is_float(t) || (int64_t)t->shape[1] != in || t->shape[0] < 1 ||
        t->shape[0] > (1u << 20)) {
        llm_seterr(err, "%s: linear.weight must be [out x %lld]", path, (long long)in);
    } else {
        llm_tensor lt = { .type = t->type, .ne = { in, (int64_t)t->shape[0] }, .data = t->data };
        *out = (int64_t)t->shape[0];
        rc = llm_model_f32_copy(m, &lt, "linear.weight", in, *out, w, err);
    }
    st_close(f);
    return rc;
}

/* EmbeddingGemma's 2_Dense (dim -> n) and 3_Dense (n -> dim), or neither. */
static int dense_modules(llm_model *m, const char *dir, llm_err *err)
{
    int64_t n = 0, back = 0;
    int a = dense_dir(m, dir, "2_Dense", m->cfg.dim, &n, &m->dense_up, err);
    if (a < 0)
        return -1;
    int b = a == 0 ? dense_dir(m, dir, "3_Dense", n, &back, &m->dense_down, err) : 1;
    if (b < 0)
        return -1;
    if (a != b || (a == 0 && back != m->cfg.dim)) {
        llm_seterr(err, "%s: 2_Dense and 3_Dense come together (dim -> n -> dim)", m->path);
        return -1;
    }
    m->dense_n = a == 0 ? (int)n : 0;
    if (a != 0)
        m->dense_up = m->dense_down = NULL;
    return 0;
}

/* A sentence-transformers embedding model's pooling (1_Pooling/config.json: Qwen3-Embedding, gte-Qwen2,
 * e5-mistral ship one), if it has one. 0, or -1 when the file is there but unreadable. */
static int parse_pooling(llm_model *m, const char *dir, llm_err *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/1_Pooling/config.json", dir);
    if (access(path, R_OK) != 0)
        return 0;
    cJSON *root = llm_json_read_file(path, err);
    if (root == NULL)
        return -1;
    static const struct { const char *key; int pool; } modes[] = {
        { "pooling_mode_lasttoken", LLM_POOL_LAST }, { "pooling_mode_mean_tokens", LLM_POOL_MEAN },
        { "pooling_mode_cls_token", LLM_POOL_CLS },
    };
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, modes[i].key)) && m->pooling == LLM_POOL_NONE)
            m->pooling = modes[i].pool;
    cJSON_Delete(root);
    return 0;
}

llm_model *llm_model_load_hf(const char *dir, unsigned flags, llm_err *err)
{
    llm_model *m = llm_model_alloc("hf", dir, err);
    if (m == NULL)
        return NULL;
    m->defer_kq = (flags & LLM_LOAD_DEFER_KQ) != 0; /* (gpt-oss's MXFP4 experts) */
    st_set *s = NULL;
    /* a Gemma's, SmolLM3's, Granite MoE's, ERNIE 4.5 MoE's, OLMo 3's, EXAONE 4's or ModernBERT's config, read again
     * for its layers */
    cJSON *text_cfg = NULL;
    if (parse_config(m, dir, &text_cfg, err) != 0 || parse_pooling(m, dir, err) != 0 ||
        (s = st_set_open_dir(dir, err)) == NULL)
        goto fail;
    m->file_bytes = s->total_bytes;
    /* The model keeps the mappings; the parsed headers go. */
    for (size_t i = 0; i < s->n_files; i++) {
        if (llm_model_add_map(m, (void *)s->files[i]->base, s->files[i]->size, err) != 0) {
            s->files[i]->owns_map = 0;
            goto fail;
        }
        s->files[i]->owns_map = 0;
    }
    int smollm3 = strcmp(m->arch, "smollm3") == 0, bert = strcmp(m->arch, "bert") == 0;
    int modern = strcmp(m->arch, "modern-bert") == 0, granitemoe = strcmp(m->arch, "granitemoe") == 0;
    int moe_sh = strcmp(m->arch, "ernie4_5-moe") == 0 || strcmp(m->arch, "glm4moe") == 0; /* (moe_shared) */
    if ((bert     ? llm_hf_bert_tensors(m, s, err)
         : modern ? llm_hf_modern_bert_tensors(m, s, text_cfg, err)
                  : load_tensors(m, s, err)) != 0 ||
        (text_cfg != NULL && !smollm3 && !modern && !granitemoe && !moe_sh &&
         gemma_layers(m, text_cfg, m->path, err) != 0) ||
        (text_cfg != NULL && smollm3 && smollm3_layers(m, text_cfg, m->path, err) != 0) ||
        (text_cfg != NULL && granitemoe && granite_shared(m, s, text_cfg, err) != 0) ||
        (text_cfg != NULL && moe_sh && moe_shared(m, s, text_cfg, err) != 0) ||
        llm_model_partial_rotary(m, err) != 0 || dense_modules(m, dir, err) != 0 || llm_model_validate(m, err) != 0)
        goto fail;
    if (m->cfg.bidirectional && m->pooling == LLM_POOL_NONE)
        m->pooling = LLM_POOL_MEAN;
    cJSON_Delete(text_cfg);
    text_cfg = NULL;
    st_set_close(s);
    s = NULL;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    char spm[PATH_MAX];
    snprintf(spm, sizeof(spm), "%s/tokenizer.model", dir); /* SentencePiece's own, without a tokenizer.json */
    if (access(path, R_OK) == 0 ? (m->tok = llm_tok_load_hf(path, err)) == NULL
                                : access(spm, R_OK) == 0 && (m->tok = llm_tok_load_spm_model(spm, err)) == NULL)
        goto fail;
    if (bert) /* [CLS] / [SEP] are the tokenizer's */
        llm_hf_bert_tokens(m);
    if (modern && m->tok != NULL) /* ... and ModernBERT's are its config's */
        llm_modern_bert_tokens(m);
    return m;
fail:
    cJSON_Delete(text_cfg);
    st_set_close(s);
    llm_model_free(m);
    return NULL;
}
