/* llama.cpp server's /completion bodies -> completions bodies (see llm_lcpp.h). */
#include "llm_lcpp.h"
#include "llm_chat_body.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int l_bad(llm_api_err *e, const char *param, const char *code, const char *msg)
{
    llm_api_seterr(e, 400, param, code, "%s", msg);
    return -1;
}

/* prompt: a string or token ids (one prompt). */
static int l_prompt(cJSON *out, const cJSON *p, llm_api_err *e)
{
    const cJSON *x;
    if (cJSON_IsString(p)) return llm_cb_put_copy(out, "prompt", p, e);
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0) {
        int ids = 1;
        cJSON_ArrayForEach(x, p) ids &= llm_cb_whole(x);
        if (ids) return llm_cb_put_copy(out, "prompt", p, e);
    }
    return l_bad(e, "prompt", p == NULL ? "missing_required_parameter" : "invalid_value",
                 "'prompt' must be a string or an array of token ids (one prompt a request; mixed token ids and "
                 "text, several prompts and multimodal objects are not supported)");
}

/* logit_bias: [[id, bias | false], ...] or {"id": bias | false}; false bans the token (-100). */
static int l_bias(cJSON *out, const cJSON *b, llm_api_err *e)
{
    if (b == NULL) return 0;
    if (!cJSON_IsArray(b) && !cJSON_IsObject(b))
        return l_bad(e, "logit_bias", "invalid_type", "'logit_bias' must be an array of [token id, bias] pairs or an "
                     "object");
    cJSON *o = cJSON_AddObjectToObject(out, "logit_bias");
    if (o == NULL) return llm_cb_oom(e);
    const cJSON *x;
    cJSON_ArrayForEach(x, b) {
        const cJSON *id = cJSON_IsArray(b) ? cJSON_GetArrayItem(x, 0) : NULL, *v = cJSON_IsArray(b) ? cJSON_GetArrayItem(x, 1) : x;
        char key[24];
        if (cJSON_IsArray(b)) {
            if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) != 2 || !llm_cb_whole(id) || id->valuedouble < 0 ||
                id->valuedouble > 2147483647.0)
                return l_bad(e, "logit_bias", "invalid_value", "'logit_bias' entries must be [token id, bias or "
                             "false] (token ids: text is not supported)");
            snprintf(key, sizeof key, "%.0f", id->valuedouble);
        } else {
            snprintf(key, sizeof key, "%.20s", x->string);
        }
        cJSON *val = cJSON_IsFalse(v) ? cJSON_CreateNumber(-LLM_API_BIAS_LIMIT) : cJSON_Duplicate(v, 1);
        if (val == NULL) return llm_cb_oom(e);
        cJSON_DeleteItemFromObjectCaseSensitive(o, key); /* a repeated id: the last one counts */
        cJSON_AddItemToObject(o, key, val);
    }
    return 0;
}

/* What llama.cpp has and this server does not do: refused unless neutral. */
static int l_unsupported(const cJSON *b, llm_api_err *e)
{
    static const char *const zero[] = { "mirostat", "dry_multiplier", "xtc_probability", "dynatemp_range" };
    const cJSON *v;
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        if ((v = llm_api_field(b, zero[i])) != NULL && !(cJSON_IsNumber(v) && v->valuedouble == 0)) {
            llm_api_seterr(e, 400, zero[i], "unsupported_parameter", "'%s' is not supported by this server (only 0, "
                           "its neutral value)", zero[i]);
            return -1;
        }
    if ((v = llm_api_field(b, "n_cmpl")) != NULL && !(llm_cb_whole(v) && v->valuedouble == 1))
        return l_bad(e, "n_cmpl", "unsupported_parameter", "'n_cmpl' other than 1 is not supported (/v1/completions "
                     "takes n)");
    if ((v = llm_api_field(b, "post_sampling_probs")) != NULL && !cJSON_IsFalse(v))
        return l_bad(e, "post_sampling_probs", "unsupported_parameter", "'post_sampling_probs' is not supported (the "
                     "probabilities are the model's, before sampling)");
    if ((v = llm_api_field(b, "lora")) != NULL && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0))
        return l_bad(e, "lora", "unsupported_parameter", "'lora' is not supported per request (the engine applies its "
                     "--lora adapter to every request)");
    return 0;
}

/* A whole number from 0 to hi, or absent (*out 0). */
static int l_count(const cJSON *b, const char *name, double hi, int *out, llm_api_err *e)
{
    const cJSON *v = llm_api_field(b, name);
    *out = 0;
    if (v == NULL) return 0;
    if (!llm_cb_whole(v) || v->valuedouble < 0 || v->valuedouble > hi) {
        llm_api_seterr(e, 400, name, "invalid_value", "'%s' must be a whole number from 0 to %.0f", name, hi);
        return -1;
    }
    *out = (int)v->valuedouble;
    return 0;
}

/* What the editors' code completion (llama.vim, llama.vscode) sends: n_indent, t_max_predict_ms, t_max_prompt_ms
 * (accepted), response_fields. */
static int l_editor(const cJSON *b, llm_api_req *r, llm_api_err *e)
{
    int ignored;
    if (l_count(b, "n_indent", 1e6, &r->n_indent, e) || l_count(b, "t_max_predict_ms", 864e5, &r->t_max_predict_ms, e) ||
        l_count(b, "t_max_prompt_ms", 864e5, &ignored, e))
        return -1;
    const cJSON *f = llm_api_field(b, "response_fields"), *x;
    r->response_fields = NULL;
    if (f == NULL) return 0;
    int ok = cJSON_IsArray(f) && cJSON_GetArraySize(f) <= 256;
    cJSON_ArrayForEach(x, f) ok &= cJSON_IsString(x);
    if (!ok)
        return l_bad(e, "response_fields", "invalid_value", "'response_fields' must be a list of field names (at most "
                     "256; \"a/b\": b of a)");
    r->response_fields = f;
    return 0;
}

/* /infill: input_prefix, input_suffix (strings), input_extra ([{"filename", "text"}]), prompt (a string: after the
 * middle token). */
static int l_infill(cJSON *out, const cJSON *b, llm_api_req *r, llm_api_err *e)
{
    static const char *const names[2] = { "input_prefix", "input_suffix" };
    const char **part[2] = { &r->infill_prefix, &r->infill_suffix };
    size_t *len[2] = { &r->infill_prefix_len, &r->infill_suffix_len };
    for (int i = 0; i < 2; i++) {
        const cJSON *v = llm_api_field(b, names[i]);
        if (v != NULL && !cJSON_IsString(v)) {
            llm_api_seterr(e, 400, names[i], "invalid_type", "'%s' must be a string", names[i]);
            return -1;
        }
        *part[i] = v ? v->valuestring : "";
        *len[i] = strlen(*part[i]);
    }
    const cJSON *x = llm_api_field(b, "input_extra"), *c;
    if (x != NULL) {
        int ok = cJSON_IsArray(x) && cJSON_GetArraySize(x) <= 4096;
        cJSON_ArrayForEach(c, x) {
            const cJSON *fn = llm_api_field(c, "filename");
            ok &= cJSON_IsObject(c) && cJSON_IsString(llm_api_field(c, "text")) && (fn == NULL || cJSON_IsString(fn));
        }
        if (!ok)
            return l_bad(e, "input_extra", "invalid_value", "'input_extra' must be a list of {\"filename\": string, "
                         "\"text\": string} (at most 4096)");
    }
    r->infill_extra = x;
    r->infill = 1;
    const cJSON *p = llm_api_field(b, "prompt");
    if (p != NULL && !cJSON_IsString(p))
        return l_bad(e, "prompt", "invalid_type", "'prompt' must be a string (the text after the middle token)");
    return cJSON_AddStringToObject(out, "prompt", p ? p->valuestring : "") ? 0 : llm_cb_oom(e);
}

cJSON *llm_lcpp_to_body(const cJSON *body, int infill, llm_api_req *r, llm_api_err *e)
{
    static const struct { const char *name, *as; } same[] = {
        { "temperature", "temperature" }, { "top_p", "top_p" }, { "min_p", "min_p" }, { "typical_p", "typical_p" },
        { "repeat_penalty", "repetition_penalty" }, { "presence_penalty", "presence_penalty" },
        { "frequency_penalty", "frequency_penalty" }, { "stop", "stop" }, { "stream", "stream" },
        { "ignore_eos", "ignore_eos" }, { "grammar", "grammar" }, { "json_schema", "json_schema" },
        { "n_probs", "logprobs" },
    };
    const cJSON *v;
    cJSON *out = cJSON_CreateObject();
    if (out == NULL) { llm_cb_oom(e); return NULL; }
    if ((infill ? l_infill(out, body, r, e) : l_prompt(out, llm_api_field(body, "prompt"), e)) ||
        l_unsupported(body, e) || l_editor(body, r, e) || l_bias(out, llm_api_field(body, "logit_bias"), e))
        goto fail;
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (llm_cb_put_copy(out, same[i].as, llm_api_field(body, same[i].name), e)) goto fail;
    /* n_predict: -1 (llama.cpp's "no limit") as many as the server allows; 0 (only fill the cache) is not done */
    r->max_tokens_all = 0;
    if ((v = llm_api_field(body, "n_predict")) != NULL) {
        if (!llm_cb_whole(v) || v->valuedouble < -1 || v->valuedouble == 0 || v->valuedouble > 1e9) {
            l_bad(e, "n_predict", "invalid_value", "'n_predict' must be -1 (as many as the server allows) or a whole "
                  "number of tokens, at least 1");
            goto fail;
        }
        if (v->valuedouble < 0) r->max_tokens_all = 1;
        else if (!cJSON_AddNumberToObject(out, "max_tokens", v->valuedouble)) { llm_cb_oom(e); goto fail; }
    }
    /* top_k: llama.cpp's 0 (or below) is off */
    if ((v = llm_api_field(body, "top_k")) != NULL) {
        if (!llm_cb_whole(v)) {
            l_bad(e, "top_k", "invalid_type", "'top_k' must be a whole number (0: off)");
            goto fail;
        }
        if (!cJSON_AddNumberToObject(out, "top_k", v->valuedouble > 0 ? v->valuedouble : 0)) { llm_cb_oom(e); goto fail; }
    }
    /* seed: -1 (or any negative) is random */
    if ((v = llm_api_field(body, "seed")) != NULL && !(cJSON_IsNumber(v) && v->valuedouble < 0) &&
        llm_cb_put_copy(out, "seed", v, e))
        goto fail;
    /* repeat_last_n: the penalties' window (-1: the whole context; 0: none) */
    r->penalty_last_n = 0;
    if ((v = llm_api_field(body, "repeat_last_n")) != NULL) {
        if (!llm_cb_whole(v) || v->valuedouble < -1 || v->valuedouble > 1e9) {
            l_bad(e, "repeat_last_n", "invalid_value", "'repeat_last_n' must be -1 (the whole context), 0 (no "
                  "penalty) or a number of tokens");
            goto fail;
        }
        if (v->valuedouble == 0) { /* no window: the penalties do nothing */
            cJSON_DeleteItemFromObjectCaseSensitive(out, "repetition_penalty");
            cJSON_DeleteItemFromObjectCaseSensitive(out, "presence_penalty");
            cJSON_DeleteItemFromObjectCaseSensitive(out, "frequency_penalty");
        } else if (v->valuedouble > 0) {
            r->penalty_last_n = (int)v->valuedouble;
        }
    }
    int rt = 0;
    if ((v = llm_api_field(body, "return_tokens")) != NULL) {
        if (!cJSON_IsBool(v)) {
            l_bad(e, "return_tokens", "invalid_type", "'return_tokens' must be a boolean");
            goto fail;
        }
        rt = cJSON_IsTrue(v);
    }
    r->lcpp_tokens = rt;
    return out;
fail:
    cJSON_Delete(out);
    return NULL;
}

void llm_lcpp_param(llm_api_err *e)
{
    static const llm_cb_name names[] = {
        { "max_tokens", "n_predict" }, { "repetition_penalty", "repeat_penalty" }, { "logprobs", "n_probs" },
    };
    (void)llm_cb_rename_in(e, names, sizeof names / sizeof names[0]);
}
