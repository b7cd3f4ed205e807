/* Chat-body building blocks for the API translators (see llm_chat_body.h). */
#include "llm_chat_body.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *llm_cb_type(const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

int llm_cb_oom(llm_api_err *e)
{
    llm_api_seterr(e, 500, NULL, NULL, "out of memory");
    return -1;
}

cJSON *llm_cb_message(cJSON *msgs, const char *role)
{
    cJSON *m = cJSON_CreateObject();
    if (m == NULL || cJSON_AddStringToObject(m, "role", role) == NULL) { cJSON_Delete(m); return NULL; }
    cJSON_AddItemToArray(msgs, m);
    return m;
}

cJSON *llm_cb_last(cJSON *msgs, const char *role)
{
    cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(last, "role");
    return cJSON_IsString(r) && !strcmp(r->valuestring, role) ? last : NULL;
}

int llm_cb_put_copy(cJSON *dst, const char *as, const cJSON *v, llm_api_err *e)
{
    if (v == NULL) return 0;
    cJSON *d = cJSON_Duplicate(v, 1);
    if (d == NULL || !cJSON_AddItemToObject(dst, as, d)) { cJSON_Delete(d); return llm_cb_oom(e); }
    return 0;
}

int llm_cb_copy(cJSON *dst, const cJSON *src, const char *const *names, size_t n, llm_api_err *e)
{
    for (size_t i = 0; i < n; i++)
        if (llm_cb_put_copy(dst, names[i], cJSON_GetObjectItemCaseSensitive(src, names[i]), e)) return -1;
    return 0;
}

int llm_cb_call(cJSON *m, const char *id, const char *name, const char *args, llm_api_err *e)
{
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (calls == NULL && (calls = cJSON_AddArrayToObject(m, "tool_calls")) == NULL) return llm_cb_oom(e);
    cJSON *c = cJSON_CreateObject(), *f = c ? cJSON_AddObjectToObject(c, "function") : NULL;
    if (f == NULL) { cJSON_Delete(c); return llm_cb_oom(e); }
    cJSON_AddItemToArray(calls, c);
    if (!cJSON_AddStringToObject(c, "id", id) || !cJSON_AddStringToObject(c, "type", "function") ||
        !cJSON_AddStringToObject(f, "name", name) || !cJSON_AddStringToObject(f, "arguments", args))
        return llm_cb_oom(e);
    return 0;
}

int llm_cb_tool_result(cJSON *msgs, const char *id, cJSON *text, llm_api_err *e)
{
    cJSON *m = llm_cb_message(msgs, "tool");
    if (m == NULL || !cJSON_AddStringToObject(m, "tool_call_id", id)) { cJSON_Delete(text); return llm_cb_oom(e); }
    cJSON_AddItemToObject(m, "content", text);
    return 0;
}

int llm_cb_tool(cJSON *tools, const cJSON *t, const char *schema_key, llm_api_err *e)
{
    /* the members in the order a chat body has them: the tools' JSON goes into the prompt as it is */
    cJSON *c = cJSON_CreateObject();
    if (c == NULL) return llm_cb_oom(e);
    cJSON_AddItemToArray(tools, c);
    cJSON *f = cJSON_AddStringToObject(c, "type", "function") ? cJSON_AddObjectToObject(c, "function") : NULL;
    if (f == NULL) return llm_cb_oom(e);
    static const char *const keys[] = { "name", "description" };
    if (llm_cb_copy(f, t, keys, sizeof keys / sizeof keys[0], e) ||
        llm_cb_put_copy(f, "parameters", cJSON_GetObjectItemCaseSensitive(t, schema_key), e))
        return -1;
    return llm_cb_put_copy(f, "strict", cJSON_GetObjectItemCaseSensitive(t, "strict"), e);
}

int llm_cb_tools(cJSON *chat, const cJSON *tools, const char *type, int type_optional, const char *schema_key,
                 const char *kind, const char *shape, llm_api_err *e)
{
    if (!cJSON_IsArray(tools)) {
        llm_api_seterr(e, 400, "tools", "invalid_type", "'tools' must be an array of %s", shape);
        return -1;
    }
    cJSON *out = cJSON_AddArrayToObject(chat, "tools");
    if (out == NULL) return llm_cb_oom(e);
    const cJSON *t;
    int k = 0;
    cJSON_ArrayForEach(t, tools) {
        const char *ty = llm_cb_type(t);
        if (!cJSON_IsObject(t) || (ty == NULL ? !type_optional : strcmp(ty, type) != 0)) {
            llm_api_seterr(e, 400, "tools", "invalid_value", "tools[%d]: only %s tools (%s) are supported%s%.40s", k, kind,
                           shape, ty ? "; got " : "", ty ? ty : "");
            return -1;
        }
        if (llm_cb_tool(out, t, schema_key, e)) return -1;
        k++;
    }
    return 0;
}

cJSON *llm_cb_text_parts(const cJSON *c, const char *const *types, int n_types, int *bad, const char **bad_type,
                         llm_api_err *e)
{
    *bad = -2;
    *bad_type = NULL;
    const char *one[1] = { c == NULL || cJSON_IsNull(c) ? "" : cJSON_IsString(c) ? c->valuestring : NULL };
    if (one[0] != NULL) return llm_cb_join(one, 1, e);
    if (!cJSON_IsArray(c)) { *bad = -1; return NULL; }
    int n = cJSON_GetArraySize(c), k = 0;
    const char **texts = malloc((size_t)(n > 0 ? n : 1) * sizeof *texts);
    if (texts == NULL) { llm_cb_oom(e); return NULL; }
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const char *t = llm_cb_type(p);
        int known = 0;
        for (int i = 0; t != NULL && i < n_types; i++) known |= !strcmp(t, types[i]);
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(p, t && !strcmp(t, "refusal") ? "refusal" : "text");
        if (!known || !cJSON_IsString(x)) {
            free(texts);
            *bad = k;
            *bad_type = t;
            return NULL;
        }
        texts[k++] = x->valuestring;
    }
    cJSON *out = llm_cb_join(texts, k, e);
    free(texts);
    return out;
}

cJSON *llm_cb_join(const char *const *texts, int n, llm_api_err *e)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) len += strlen(texts[i]);
    char *s = malloc(len + 1), *at = s;
    if (s == NULL) { llm_cb_oom(e); return NULL; }
    for (int i = 0; i < n; i++) {
        size_t l = strlen(texts[i]);
        memcpy(at, texts[i], l);
        at += l;
    }
    *at = 0;
    cJSON *o = cJSON_CreateString(s);
    free(s);
    if (o == NULL) llm_cb_oom(e);
    return o;
}

void llm_cb_rename(llm_api_err *e, const char *ours, const char *theirs)
{
    char q[64], msg[sizeof e->message];
    snprintf(q, sizeof q, "'%s'", ours);
    const char *at = strstr(e->message, q);
    if (at != NULL) {
        snprintf(msg, sizeof msg, "%.*s'%s'%s", (int)(at - e->message), e->message, theirs, at + strlen(q));
        snprintf(e->message, sizeof e->message, "%s", msg);
    }
    snprintf(e->param, sizeof e->param, "%s", theirs);
}

int llm_cb_whole(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
}

int llm_cb_rename_in(llm_api_err *e, const llm_cb_name *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(e->param, names[i].ours)) {
            llm_cb_rename(e, names[i].ours, names[i].theirs);
            return 1;
        }
    return 0;
}
