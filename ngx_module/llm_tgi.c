/* TGI's API bodies -> completions bodies (see llm_tgi.h). */
#include "llm_tgi.h"
#include "llm_chat_body.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_bad(llm_api_err *e, const char *param, const char *code, const char *msg)
{
    llm_api_seterr(e, 400, param, code, "%s", msg);
    return -1;
}

/* A bool parameter (null or absent: 0). */
static int t_bool(const cJSON *ps, const char *name, int *out, llm_api_err *e)
{
    const cJSON *v = llm_api_field(ps, name);
    *out = 0;
    if (v == NULL) return 0;
    if (!cJSON_IsBool(v)) {
        llm_api_seterr(e, 400, name, "invalid_type", "'parameters.%s' must be a boolean", name);
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

/* grammar: {"type": "json" | "regex" | "json_schema", "value": ...} -> guided_json / guided_regex. */
static int t_grammar(cJSON *out, const cJSON *g, llm_api_err *e)
{
    if (g == NULL) return 0;
    const cJSON *v = llm_api_field(g, "value");
    const char *type = llm_cb_type(g);
    if (!cJSON_IsObject(g) || type == NULL || v == NULL)
        return t_bad(e, "grammar", "invalid_value", "'parameters.grammar' must be {\"type\": \"json\", \"regex\" or "
                     "\"json_schema\", \"value\": ...}");
    if (!strcmp(type, "regex")) {
        if (!cJSON_IsString(v)) return t_bad(e, "grammar", "invalid_type", "a regex grammar's 'value' must be a string");
        return llm_cb_put_copy(out, "guided_regex", v, e);
    }
    if (!strcmp(type, "json_schema")) { /* TGI 3's: {"name", "schema"} */
        const cJSON *s = cJSON_IsObject(v) ? llm_api_field(v, "schema") : NULL;
        if (!cJSON_IsObject(s))
            return t_bad(e, "grammar", "invalid_value", "a json_schema grammar's 'value' must be {\"name\", \"schema\": "
                         "{...}}");
        return llm_cb_put_copy(out, "guided_json", s, e);
    }
    if (!strcmp(type, "json")) {
        if (!cJSON_IsObject(v) && !cJSON_IsString(v))
            return t_bad(e, "grammar", "invalid_type", "a json grammar's 'value' must be a JSON Schema (an object or "
                         "its text)");
        return llm_cb_put_copy(out, "guided_json", v, e);
    }
    llm_api_seterr(e, 400, "grammar", "invalid_value", "grammar type '%.32s' is not supported (json, regex or "
                   "json_schema)", type);
    return -1;
}

/* What TGI has and this server does not do: refused unless neutral. */
static int t_unsupported(const cJSON *ps, llm_api_err *e)
{
    const cJSON *v;
    if ((v = llm_api_field(ps, "best_of")) != NULL && !(llm_cb_whole(v) && v->valuedouble == 1))
        return t_bad(e, "best_of", "unsupported_parameter", "'parameters.best_of' other than 1 is not supported");
    if ((v = llm_api_field(ps, "watermark")) != NULL && !cJSON_IsFalse(v))
        return t_bad(e, "watermark", "unsupported_parameter", "'parameters.watermark' is not supported");
    if ((v = llm_api_field(ps, "decoder_input_details")) != NULL && !cJSON_IsFalse(v))
        return t_bad(e, "decoder_input_details", "unsupported_parameter", "'parameters.decoder_input_details' (the "
                     "prompt's logprobs) is not supported here: /v1/completions gives them with echo and logprobs");
    if ((v = llm_api_field(ps, "adapter_id")) != NULL && !(cJSON_IsString(v) && v->valuestring[0] == 0))
        return t_bad(e, "adapter_id", "unsupported_parameter", "'parameters.adapter_id' is not supported (the engine "
                     "applies its --lora adapter to every request)");
    return 0;
}

cJSON *llm_tgi_to_body(const cJSON *body, int kind, llm_api_req *r, llm_api_err *e)
{
    static const struct { const char *name, *as; } same[] = {
        { "max_new_tokens", "max_tokens" }, { "temperature", "temperature" }, { "top_k", "top_k" },
        { "top_p", "top_p" }, { "repetition_penalty", "repetition_penalty" },
        { "frequency_penalty", "frequency_penalty" }, { "seed", "seed" }, { "stop", "stop" },
        { "typical_p", "typical_p" },
    };
    const cJSON *in = llm_api_field(body, "inputs"), *ps = llm_api_field(body, "parameters"), *v;
    if (!cJSON_IsString(in)) {
        t_bad(e, "inputs", "missing_required_parameter", "'inputs' (a string) is required");
        return NULL;
    }
    if (in->valuestring[0] == 0) {
        t_bad(e, "inputs", "invalid_value", "'inputs' cannot be empty");
        return NULL;
    }
    if (ps != NULL && !cJSON_IsObject(ps)) {
        t_bad(e, "parameters", "invalid_type", "'parameters' must be an object");
        return NULL;
    }
    int stream = kind == LLM_API_TGI_STREAM;
    if (kind == LLM_API_TGI && (v = llm_api_field(body, "stream")) != NULL) {
        if (!cJSON_IsBool(v)) {
            t_bad(e, "stream", "invalid_type", "'stream' must be a boolean");
            return NULL;
        }
        stream = cJSON_IsTrue(v);
    }
    cJSON *out = cJSON_CreateObject();
    if (out == NULL || !cJSON_AddStringToObject(out, "prompt", in->valuestring) ||
        !cJSON_AddBoolToObject(out, "stream", stream)) {
        llm_cb_oom(e);
        goto fail;
    }
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (llm_cb_put_copy(out, same[i].as, llm_api_field(ps, same[i].name), e)) goto fail;
    /* TGI's bounds, stricter than the OpenAI API's */
    if ((v = llm_api_field(ps, "temperature")) != NULL && cJSON_IsNumber(v) && v->valuedouble <= 0) {
        t_bad(e, "temperature", "invalid_value", "'parameters.temperature' must be strictly positive");
        goto fail;
    }
    if ((v = llm_api_field(ps, "top_k")) != NULL && cJSON_IsNumber(v) && v->valuedouble <= 0) {
        t_bad(e, "top_k", "invalid_value", "'parameters.top_k' must be strictly positive");
        goto fail;
    }
    int do_sample, full, details;
    if (t_bool(ps, "do_sample", &do_sample, e) || t_bool(ps, "return_full_text", &full, e) ||
        t_bool(ps, "details", &details, e) || t_unsupported(ps, e) || t_grammar(out, llm_api_field(ps, "grammar"), e))
        goto fail;
    /* greedy unless asked to sample or given a way to (TGI: do_sample, or a temperature, top_k, or top_p or
     * typical_p below 1) */
    const cJSON *tp = llm_api_field(ps, "top_p"), *ty = llm_api_field(ps, "typical_p");
    int warps = llm_api_field(ps, "temperature") != NULL || llm_api_field(ps, "top_k") != NULL ||
                (tp != NULL && !(cJSON_IsNumber(tp) && tp->valuedouble >= 1)) ||
                (ty != NULL && !(cJSON_IsNumber(ty) && ty->valuedouble >= 1));
    if (!do_sample && !warps && !cJSON_AddNumberToObject(out, "temperature", 0)) {
        llm_cb_oom(e);
        goto fail;
    }
    if ((v = llm_api_field(ps, "top_n_tokens")) != NULL) {
        if (!llm_cb_whole(v) || v->valuedouble < 0 || v->valuedouble > LLM_API_MAX_LOGPROBS) {
            llm_api_seterr(e, 400, "top_n_tokens", "invalid_value", "'parameters.top_n_tokens' must be a whole number "
                           "from 0 to %d", LLM_API_MAX_LOGPROBS);
            goto fail;
        }
        if (v->valuedouble > 0 && !cJSON_AddNumberToObject(out, "logprobs", v->valuedouble)) {
            llm_cb_oom(e);
            goto fail;
        }
    }
    r->keep_last = 0;
    if ((v = llm_api_field(ps, "truncate")) != NULL) {
        if (!llm_cb_whole(v) || v->valuedouble < 1 || v->valuedouble > 1e9) {
            t_bad(e, "truncate", "invalid_value", "'parameters.truncate' must be a whole number of tokens, at least 1");
            goto fail;
        }
        r->keep_last = (int)v->valuedouble;
    }
    r->tgi_details = details;
    r->tgi_full_text = full;
    return out;
fail:
    cJSON_Delete(out);
    return NULL;
}

void llm_tgi_param(llm_api_err *e)
{
    static const llm_cb_name names[] = {
        { "max_tokens", "parameters.max_new_tokens" }, { "prompt", "inputs" }, { "logprobs", "parameters.top_n_tokens" },
        { "guided_json", "parameters.grammar" }, { "guided_regex", "parameters.grammar" },
    };
    if (llm_cb_rename_in(e, names, sizeof names / sizeof names[0])) return;
    static const char *const under[] = { /* the parameters' own names, as given */
        "temperature", "top_k", "top_p", "repetition_penalty", "frequency_penalty", "seed", "stop", "grammar",
        "best_of", "typical_p", "watermark", "decoder_input_details", "adapter_id", "truncate", "top_n_tokens",
        "details", "return_full_text", "do_sample",
    };
    for (size_t i = 0; i < sizeof under / sizeof under[0]; i++)
        if (!strcmp(e->param, under[i])) {
            char p[sizeof e->param];
            snprintf(p, sizeof p, "parameters.%s", under[i]);
            llm_cb_rename(e, under[i], p);
            return;
        }
}

int llm_tgi_status(int status)
{
    return status == 400 ? 422 : status;
}

char *llm_tgi_error_json(const llm_api_err *e)
{
    const char *type = e->status < 300 ? "" : e->status == 429 || e->status == 503 ? "overloaded"
                     : e->status < 500 ? "validation" : "generation";
    cJSON *root = cJSON_CreateObject();
    if (root == NULL || !cJSON_AddStringToObject(root, "error", e->message) ||
        !cJSON_AddStringToObject(root, "error_type", type)) {
        cJSON_Delete(root);
        return NULL;
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}
