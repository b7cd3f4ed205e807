/* Function calling: tools into the request, tool calls out of the answer (llm_tools.h). */
#include "llm_tools.h"
#include "json_schema.h"
#include "ngx_http_llm_format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- json.dumps ---- */

/* The module's text buffer; out of memory is sticky, checked once at the end. */
typedef struct {
    ngx_http_llm_text_t t;
    int                 oom;
} buf_t;

static void put(buf_t *b, const char *s, size_t n)
{
    b->oom = b->oom || ngx_http_llm_text_append(&b->t, s, n) != 0;
}

static void puts_(buf_t *b, const char *s) { put(b, s, strlen(s)); }

static void put_string(buf_t *b, const char *s)
{
    put(b, "\"", 1);
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) {
        char esc[8];
        switch (*u) {
        case '"': puts_(b, "\\\""); break;
        case '\\': puts_(b, "\\\\"); break;
        case '\n': puts_(b, "\\n"); break;
        case '\r': puts_(b, "\\r"); break;
        case '\t': puts_(b, "\\t"); break;
        case '\b': puts_(b, "\\b"); break;
        case '\f': puts_(b, "\\f"); break;
        default:
            if (*u < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *u);
                puts_(b, esc);
            } else {
                put(b, (const char *)u, 1);
            }
        }
    }
    put(b, "\"", 1);
}

/* Python prints an integral number as an integer (cJSON keeps no int / float difference) and a float as
 * its shortest round-trip form. */
static void put_number(buf_t *b, double x)
{
    char s[40];
    if (x == floor(x) && fabs(x) < 1e16) {
        snprintf(s, sizeof s, "%.0f", x);
    } else {
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(s, sizeof s, "%.*g", prec, x);
            if (strtod(s, NULL) == x) break;
        }
    }
    puts_(b, s);
}

static void newline(buf_t *b, int indent, int level)
{
    put(b, "\n", 1);
    for (int i = 0; i < indent * level; i++) put(b, " ", 1);
}

static void dump(buf_t *b, const cJSON *v, int indent, int level)
{
    if (cJSON_IsNull(v)) { puts_(b, "null"); return; }
    if (cJSON_IsTrue(v)) { puts_(b, "true"); return; }
    if (cJSON_IsFalse(v)) { puts_(b, "false"); return; }
    if (cJSON_IsNumber(v)) { put_number(b, v->valuedouble); return; }
    if (cJSON_IsString(v)) { put_string(b, v->valuestring); return; }
    int obj = cJSON_IsObject(v);
    if (!obj && !cJSON_IsArray(v)) { puts_(b, "null"); return; }
    if (v->child == NULL) { puts_(b, obj ? "{}" : "[]"); return; }
    put(b, obj ? "{" : "[", 1);
    for (const cJSON *c = v->child; c != NULL; c = c->next) {
        if (indent >= 0) newline(b, indent, level + 1);
        if (obj) {
            put_string(b, c->string);
            puts_(b, ": ");
        }
        dump(b, c, indent, level + 1);
        if (c->next != NULL) puts_(b, indent >= 0 ? "," : ", ");
    }
    if (indent >= 0) newline(b, indent, level);
    put(b, obj ? "}" : "]", 1);
}

char *llm_tools_dumps(const cJSON *v, int indent)
{
    buf_t b = { { NULL, 0, 0 }, 0 };
    dump(&b, v, indent, 0);
    if (b.oom || b.t.data == NULL) { free(b.t.data); return NULL; }
    return b.t.data;
}

/* ---- Python's str() of a JSON value, as a template's `| string` prints it (Qwen3-Coder's) ---- */

static void put_repr(buf_t *b, const cJSON *v, int top)
{
    if (cJSON_IsNull(v)) { puts_(b, "None"); return; }
    if (cJSON_IsTrue(v)) { puts_(b, "True"); return; }
    if (cJSON_IsFalse(v)) { puts_(b, "False"); return; }
    if (cJSON_IsNumber(v)) { put_number(b, v->valuedouble); return; }
    if (cJSON_IsString(v)) {
        if (top) { puts_(b, v->valuestring); return; } /* str(s) is s; inside a container, its repr */
        const char *s = v->valuestring;
        char q = strchr(s, '\'') != NULL && strchr(s, '"') == NULL ? '"' : '\'';
        put(b, &q, 1);
        for (; *s; s++) {
            char esc[8];
            if (*s == '\\' || *s == q) { put(b, "\\", 1); put(b, s, 1); }
            else if (*s == '\n') puts_(b, "\\n");
            else if (*s == '\r') puts_(b, "\\r");
            else if (*s == '\t') puts_(b, "\\t");
            else if ((unsigned char)*s < 0x20 || *s == 0x7f) { snprintf(esc, sizeof esc, "\\x%02x", (unsigned char)*s); puts_(b, esc); }
            else put(b, s, 1);
        }
        put(b, &q, 1);
        return;
    }
    int obj = cJSON_IsObject(v);
    put(b, obj ? "{" : "[", 1);
    for (const cJSON *c = v->child; c != NULL; c = c->next) {
        if (obj) {
            cJSON key = { .type = cJSON_String, .valuestring = c->string };
            put_repr(b, &key, 0);
            puts_(b, ": ");
        }
        put_repr(b, c, 0);
        if (c->next != NULL) puts_(b, ", ");
    }
    put(b, obj ? "}" : "]", 1);
}

/* A value as Qwen3-Coder's template writes it: tojson for a mapping or a list, else `| string`. */
static void put_value(buf_t *b, const cJSON *v)
{
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) dump(b, v, -1, 0);
    else put_repr(b, v, 1);
}

/* ---- the request ---- */


static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

static const char *tool_name(const cJSON *tool)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tool, "function"), "name")->valuestring;
}

/* The tool of the list named name[0..n) (NULL: none). */
static const cJSON *find_tool(const cJSON *tools, const char *name, size_t n)
{
    const cJSON *t = tools != NULL ? tools->child : NULL;
    while (t != NULL && (strlen(tool_name(t)) != n || memcmp(tool_name(t), name, n) != 0)) t = t->next;
    return t;
}

/* A tool's parameters' "properties" (NULL: none). */
static const cJSON *tool_props(const cJSON *t)
{
    return cJSON_GetObjectItemCaseSensitive(llm_api_field(cJSON_GetObjectItemCaseSensitive(t, "function"),
                                                          "parameters"), "properties");
}

/* Each tool {"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}. */
static int check_tools(const cJSON *tools, llm_api_err *e)
{
    if (!cJSON_IsArray(tools)) {
        llm_api_seterr(e, 400, "tools", "invalid_type", "'tools' must be an array of {\"type\": \"function\", \"function\": {...}}");
        return -1;
    }
    int n = cJSON_GetArraySize(tools), i = 0;
    if (n > LLM_API_MAX_TOOLS) {
        llm_api_seterr(e, 400, "tools", "invalid_value", "at most %d tools", LLM_API_MAX_TOOLS);
        return -1;
    }
    for (const cJSON *t = tools->child; t != NULL; t = t->next, i++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *params = llm_api_field(fn, "parameters"), *desc = llm_api_field(fn, "description");
        if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 || !cJSON_IsObject(fn)) {
            llm_api_seterr(e, 400, "tools", "invalid_value", "tools[%d] must be {\"type\": \"function\", \"function\": {...}}", i);
            return -1;
        }
        if (!cJSON_IsString(name) || !name_ok(name->valuestring)) {
            llm_api_seterr(e, 400, "tools", "invalid_value",
                           "tools[%d].function.name must be 1 to 64 letters, digits, '_' or '-'", i);
            return -1;
        }
        if ((params && !cJSON_IsObject(params)) || (desc && !cJSON_IsString(desc))) {
            llm_api_seterr(e, 400, "tools", "invalid_type",
                           "tools[%d].function: 'parameters' must be a JSON Schema object, 'description' a string", i);
            return -1;
        }
        for (const cJSON *u = tools->child; u != t; u = u->next)
            if (!strcmp(tool_name(u), name->valuestring)) {
                llm_api_seterr(e, 400, "tools", "invalid_value", "two tools are named '%.64s'", name->valuestring);
                return -1;
            }
    }
    return 0;
}

static int is_mistral(int chat_format)
{
    return chat_format == LLM_CHAT_MISTRAL_V3 || chat_format == LLM_CHAT_MISTRAL_V3_TEKKEN ||
           chat_format == LLM_CHAT_MISTRAL_V7;
}

/* Mistral's and Granite's answers: a tag, then a JSON array of calls. */
static int calls_in_array(int chat_format)
{
    return is_mistral(chat_format) || chat_format == LLM_CHAT_GRANITE;
}

/* The tag a call opens with, in the formats where text may come before the calls (NULL: Llama 3, whose
 * answer is a call or is not). */
static const char *call_tag(int chat_format)
{
    return chat_format == LLM_CHAT_CHATML || chat_format == LLM_CHAT_SMOLLM3 || chat_format == LLM_CHAT_EXAONE4 ||
                   chat_format == LLM_CHAT_QWEN3_CODER || chat_format == LLM_CHAT_GLM45
               ? "<tool_call>"
           : chat_format == LLM_CHAT_GRANITE  ? "<|tool_call|>"
           : chat_format == LLM_CHAT_SEED_OSS ? "<seed:tool_call>"
           : is_mistral(chat_format)          ? "[TOOL_CALLS]"
           : chat_format == LLM_CHAT_GPT_OSS  ? "<|channel|>commentary" /* (or " to=functions.": harmony_call_at) */
                                              : NULL;
}

/* The tag that closes a call in the formats that close each (ChatML's family, GLM-4.5, Seed-OSS). */
static const char *call_close(int chat_format)
{
    return chat_format == LLM_CHAT_SEED_OSS ? "</seed:tool_call>" : "</tool_call>";
}

/* Calls written as XML: Qwen3-Coder's and Seed-OSS's (<function=NAME><parameter=KEY>VALUE</parameter>...),
 * GLM-4.5's (NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...). */
int llm_tools_supported(int chat_format)
{
    return call_tag(chat_format) != NULL || chat_format == LLM_CHAT_LLAMA3;
}

static int xml_calls(int chat_format)
{
    return chat_format == LLM_CHAT_QWEN3_CODER || chat_format == LLM_CHAT_SEED_OSS || chat_format == LLM_CHAT_GLM45;
}

/* tool_choice required / named: the answer is a JSON array of calls (the prompt opened Mistral's and
 * Granite's tag; the XML formats' calls have no grammar here, so their held answer is the array alone, as
 * vLLM holds any model's: [{"name": ..., "arguments": {...}}]). */
static int held_as_array(int chat_format)
{
    return calls_in_array(chat_format) || xml_calls(chat_format) || chat_format == LLM_CHAT_GPT_OSS;
}

int llm_tools_prompt_opens_call(const llm_api_req *r)
{
    return (r->tool_mode == LLM_TOOLS_REQUIRED || r->tool_mode == LLM_TOOLS_NAMED) && !xml_calls(r->chat_format) &&
           r->chat_format != LLM_CHAT_GPT_OSS;
}

/* The key of a call's arguments: Llama 3.1 writes "parameters", Hermes / Qwen and Mistral "arguments". */
static const char *args_key(const llm_api_req *r)
{
    return r->chat_format == LLM_CHAT_LLAMA3 ? "parameters" : "arguments";
}

/* {"type": "object", "properties": {"name": {"const": N}, KEY: P}, "required": [...]} for a tool. */
static cJSON *call_schema(const cJSON *tool, const char *key)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
    const cJSON *params = llm_api_field(fn, "parameters");
    cJSON *s = cJSON_CreateObject(), *props = cJSON_CreateObject(), *name = cJSON_CreateObject();
    cJSON *p = params ? cJSON_Duplicate(params, 1) : cJSON_CreateObject();
    cJSON *req = cJSON_CreateArray();
    if (!s || !props || !name || !p || !req) {
        cJSON_Delete(s); cJSON_Delete(props); cJSON_Delete(name); cJSON_Delete(p); cJSON_Delete(req);
        return NULL;
    }
    if (!params) cJSON_AddStringToObject(p, "type", "object");
    cJSON_AddStringToObject(s, "type", "object");
    cJSON_AddStringToObject(name, "const", tool_name(tool));
    cJSON_AddItemToObject(props, "name", name);
    cJSON_AddItemToObject(props, key, p);
    cJSON_AddItemToObject(s, "properties", props);
    cJSON_AddItemToArray(req, cJSON_CreateString("name"));
    cJSON_AddItemToArray(req, cJSON_CreateString(key));
    cJSON_AddItemToObject(s, "required", req);
    return s;
}

/* tool_choice required / named: the answer's schema, one call of the tool(s), into r->schema. */
static int hold_to_calls(const cJSON *tools, const char *only, llm_api_req *r, llm_api_err *e)
{
    cJSON *any = cJSON_CreateArray(), *one = NULL;
    int i = 0, rc = 0;
    for (const cJSON *t = tools->child; t != NULL && any != NULL && rc == 0; t = t->next, i++) {
        if (only != NULL && strcmp(tool_name(t), only) != 0) continue;
        cJSON *s = call_schema(t, args_key(r));
        char why[256];
        llm_schema *sc = s ? llm_schema_compile(s, why, sizeof why) : NULL;
        if (sc == NULL) {
            if (s) llm_api_seterr(e, 400, "tools", "invalid_schema", "tools[%d].function.parameters: %s (tool_choice "
                                  "\"required\" or a named function holds the call to it)", i, why);
            else llm_api_seterr(e, 500, NULL, NULL, "out of memory");
            rc = -1;
        }
        llm_schema_free(sc);
        if (s) cJSON_AddItemToArray(any, s);
    }
    cJSON *schema = any;
    if (rc == 0 && any != NULL && cJSON_GetArraySize(any) == 1) { /* one call: its object itself */
        one = cJSON_DetachItemFromArray(any, 0);
        schema = one;
    } else if (rc == 0 && any != NULL) {
        schema = cJSON_CreateObject();
        if (schema) { cJSON_AddItemToObject(schema, "anyOf", any); any = NULL; }
    }
    if (rc == 0 && schema != NULL && held_as_array(r->chat_format)) { /* the answer: [call, ...] */
        cJSON *arr = cJSON_CreateObject();
        if (arr != NULL) {
            cJSON_AddStringToObject(arr, "type", "array");
            cJSON_AddItemToObject(arr, "items", schema);
            cJSON_AddNumberToObject(arr, "minItems", 1);
            cJSON_AddNumberToObject(arr, "maxItems", r->parallel_calls ? LLM_TOOLS_MAX_CALLS : 1);
        } else {
            cJSON_Delete(schema);
        }
        if (schema == any) any = NULL;
        schema = arr;
    }
    if (rc == 0) {
        r->schema = schema ? cJSON_PrintUnformatted(schema) : NULL;
        if (r->schema == NULL) { llm_api_seterr(e, 500, NULL, NULL, "out of memory"); rc = -1; }
        else r->schema_len = strlen(r->schema);
    }
    if (schema != any) cJSON_Delete(schema);
    cJSON_Delete(any);
    return rc;
}

/* Mistral's templates write a tool as {"type": "function", "function": {...}} with every member of the
 * function but "return". */
static char *mistral_def(const cJSON *tool)
{
    cJSON *fn = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(tool, "function"), 1);
    if (fn == NULL) return NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(fn, "return");
    char *f = llm_tools_dumps(fn, -1), *s = f ? malloc(strlen(f) + 40) : NULL;
    if (s != NULL) sprintf(s, "{\"type\": \"function\", \"function\": %s}", f);
    free(f);
    cJSON_Delete(fn);
    return s;
}

static int is_key(const char *k, const char *const *keys)
{
    for (; *keys != NULL; keys++)
        if (strcmp(k, *keys) == 0) return 1;
    return 0;
}

/* Qwen3-Coder's render_extra_keys: "\n<key>value</key>" for each member of obj but those named. */
static void extra_keys(buf_t *b, const cJSON *obj, const char *const *handled)
{
    for (const cJSON *c = cJSON_IsObject(obj) ? obj->child : NULL; c != NULL; c = c->next) {
        if (is_key(c->string, handled)) continue;
        puts_(b, "\n<"), puts_(b, c->string), puts_(b, ">");
        put_value(b, c);
        puts_(b, "</"), puts_(b, c->string), puts_(b, ">");
    }
}

/* |trim: Python's str.strip() on the ASCII whitespace */
static void put_trimmed(buf_t *b, const char *s)
{
    size_t a = 0, e = strlen(s);
    while (a < e && strchr(" \t\n\r\v\f", s[a]) != NULL) a++;
    while (e > a && strchr(" \t\n\r\v\f", s[e - 1]) != NULL) e--;
    put(b, s + a, e - a);
}

/* A tool as Qwen3-Coder's template lists it: <function> with its name, description, each parameter's name, type,
 * description and other keys, the parameters' other keys (required, ...) and the function's. */
static void qwen3_coder_def(buf_t *b, const cJSON *tool)
{
    static const char *const param_keys[] = { "name", "type", "description", NULL };
    static const char *const params_keys[] = { "type", "properties", NULL };
    static const char *const fn_keys[] = { "type", "name", "description", "parameters", NULL };
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
    const cJSON *desc = llm_api_field(fn, "description"), *params = llm_api_field(fn, "parameters");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    puts_(b, "\n<function>\n<name>"), puts_(b, tool_name(tool)), puts_(b, "</name>");
    if (cJSON_IsString(desc)) puts_(b, "\n<description>"), put_trimmed(b, desc->valuestring), puts_(b, "</description>");
    puts_(b, "\n<parameters>");
    for (const cJSON *p = cJSON_IsObject(props) ? props->child : NULL; p != NULL; p = p->next) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type"), *d = cJSON_GetObjectItemCaseSensitive(p, "description");
        puts_(b, "\n<parameter>\n<name>"), puts_(b, p->string), puts_(b, "</name>");
        if (ty != NULL) puts_(b, "\n<type>"), put_repr(b, ty, 1), puts_(b, "</type>");
        if (cJSON_IsString(d)) puts_(b, "\n<description>"), put_trimmed(b, d->valuestring), puts_(b, "</description>");
        extra_keys(b, p, param_keys);
        puts_(b, "\n</parameter>");
    }
    extra_keys(b, params, params_keys);
    puts_(b, "\n</parameters>");
    extra_keys(b, fn, fn_keys);
    puts_(b, "\n</function>");
}

/* Seed-OSS's py_type macro: a JSON Schema type as its template names it in a Python signature. */
static const char *seed_py_type(const cJSON *spec)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(spec, "type");
    const char *s = cJSON_IsString(t) ? t->valuestring : "";
    return !strcmp(s, "string")                             ? "str"
           : !strcmp(s, "number") || !strcmp(s, "integer") ? "int"
           : !strcmp(s, "boolean")                         ? "bool"
           : !strcmp(s, "array")                           ? "list"
                                                           : "Any";
}

/* Jinja's truth of a JSON value: absent, null, false, 0, "", [] and {} are false. */
static int truthy(const cJSON *v)
{
    return v != NULL && !cJSON_IsNull(v) && !cJSON_IsFalse(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0) &&
           !(cJSON_IsString(v) && v->valuestring[0] == 0) && !((cJSON_IsArray(v) || cJSON_IsObject(v)) && v->child == NULL);
}

/* spec.description or "": a string as it is, another value as Python's str() of it, none (or a falsy one) empty */
static void seed_desc(buf_t *b, const cJSON *spec)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(spec, "description");
    if (cJSON_IsString(d)) puts_(b, d->valuestring);
    else if (truthy(d)) put_repr(b, d, 1);
}

/* A tool as Seed-OSS's template lists it: a Python function's signature and docstring, its arguments marked
 * [必填] (required) or [选填] (optional), its "returns" object's properties. */
static void seed_def(buf_t *b, const cJSON *tool)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
    const cJSON *params = llm_api_field(fn, "parameters"), *desc = llm_api_field(fn, "description");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
    const cJSON *ret = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fn, "returns"), "properties");
    puts_(b, "\n\nFunction:\ndef "), puts_(b, tool_name(tool)), puts_(b, "(");
    for (const cJSON *p = cJSON_IsObject(props) ? props->child : NULL; p != NULL; p = p->next)
        puts_(b, p->string), puts_(b, ": "), puts_(b, seed_py_type(p)), puts_(b, p->next ? "," : "");
    puts_(b, "):\n    \"\"\"\n    ");
    if (cJSON_IsString(desc)) put_trimmed(b, desc->valuestring);
    puts_(b, "\n\n");
    if (cJSON_IsObject(props) && props->child != NULL) {
        puts_(b, "    Args:");
        for (const cJSON *p = props->child; p != NULL; p = p->next) {
            int required = 0;
            for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r != NULL && !required; r = r->next)
                required = cJSON_IsString(r) && !strcmp(r->valuestring, p->string);
            puts_(b, "\n    - "), puts_(b, p->string), puts_(b, " ("), puts_(b, seed_py_type(p)), puts_(b, ")");
            puts_(b, required ? " [\u5fc5\u586b]: " : " [\u9009\u586b]: "); /* [必填] / [选填] */
            seed_desc(b, p);
        }
    }
    puts_(b, "\n");
    if (cJSON_IsObject(ret) && ret->child != NULL) {
        puts_(b, "    Returns:");
        for (const cJSON *p = ret->child; p != NULL; p = p->next) {
            puts_(b, "\n    - "), puts_(b, p->string), puts_(b, " ("), puts_(b, seed_py_type(p)), puts_(b, "): ");
            seed_desc(b, p);
        }
    }
    puts_(b, "\n    \"\"\"");
}

/* ---- gpt-oss's tools: a TypeScript namespace, after its template's render_tool_namespace and
 * render_typescript_type macros, their whitespace included (a nested object's members and a oneOf's variants
 * carry the newlines and indentation the Jinja source leaves in them). A template's string concatenation of a
 * value that is not a string (an error there) prints Python's str() of it here. ---- */

static const cJSON *field(const cJSON *o, const char *k)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static int type_is(const cJSON *spec, const char *t)
{
    const cJSON *v = field(spec, "type");
    return cJSON_IsString(v) && !strcmp(v->valuestring, t);
}

/* Characters (code points) of UTF-8 text, as Python's len() counts them. */
static size_t utf8_len(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static void ts_type(buf_t *b, const cJSON *spec)
{
    const cJSON *type = field(spec, "type");
    int nullable = truthy(field(spec, "nullable"));
    if (type_is(spec, "array")) {
        const cJSON *items = field(spec, "items");
        if (items == NULL) {
            puts_(b, "any[]");
        } else if (type_is(items, "string")) {
            puts_(b, "string[]");
        } else if (type_is(items, "number") || type_is(items, "integer")) {
            puts_(b, "number[]");
        } else if (type_is(items, "boolean")) {
            puts_(b, "boolean[]");
        } else {
            buf_t in = { { NULL, 0, 0 }, 0 };
            ts_type(&in, items);
            b->oom |= in.oom;
            size_t n = in.t.len;
            if ((n == 15 && !memcmp(in.t.data, "object | object", 15)) || utf8_len(in.t.data, n) > 50)
                puts_(b, "any[]");
            else
                put(b, in.t.data, n), puts_(b, "[]");
            free(in.t.data);
        }
        if (nullable) puts_(b, " | null");
    } else if (cJSON_IsArray(type) && type->child != NULL) { /* a list of types, joined */
        for (const cJSON *t = type->child; t != NULL; t = t->next) {
            put_repr(b, t, 1);
            if (t->next) puts_(b, " | ");
        }
    } else if (truthy(field(spec, "oneOf"))) {
        const cJSON *one = field(spec, "oneOf");
        for (const cJSON *v = cJSON_IsArray(one) || cJSON_IsObject(one) ? one->child : NULL; v != NULL; v = v->next) {
            ts_type(b, v);
            if (truthy(field(v, "description"))) puts_(b, "// "), put_repr(b, field(v, "description"), 1);
            if (field(v, "default") != NULL) puts_(b, "                    // default: "), dump(b, field(v, "default"), -1, 0);
            if (v->next) puts_(b, " | \n");
        }
    } else if (type_is(spec, "string")) {
        const cJSON *en = field(spec, "enum");
        if (truthy(en)) {
            puts_(b, "\"");
            for (const cJSON *e = cJSON_IsArray(en) ? en->child : NULL; e != NULL; e = e->next) {
                put_repr(b, e, 1);
                if (e->next) puts_(b, "\" | \"");
            }
            puts_(b, "\"");
        } else {
            puts_(b, "string");
            if (nullable) puts_(b, " | null");
        }
    } else if (type_is(spec, "number") || type_is(spec, "integer")) {
        puts_(b, "number");
    } else if (type_is(spec, "boolean")) {
        puts_(b, "boolean");
    } else if (type_is(spec, "object")) {
        const cJSON *props = field(spec, "properties"), *req = field(spec, "required");
        if (!truthy(props)) { puts_(b, "object"); return; }
        puts_(b, "{\n");
        for (const cJSON *p = props->child; p != NULL; p = p->next) {
            int required = 0;
            for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r != NULL && !required; r = r->next)
                required = cJSON_IsString(r) && !strcmp(r->valuestring, p->string);
            puts_(b, p->string), puts_(b, required ? "" : "?"), puts_(b, ": \n                ");
            ts_type(b, p);
            if (p->next) puts_(b, ", ");
        }
        puts_(b, "}");
    } else {
        puts_(b, "any");
    }
}

/* The tools as gpt-oss's template lists them: "## functions", then namespace functions { ... } with each tool's
 * description as a comment and its parameters as the type of its one argument. */
static void gpt_oss_defs(buf_t *b, const cJSON *tools)
{
    puts_(b, "## functions\n\nnamespace functions {\n\n");
    for (const cJSON *t = tools->child; t != NULL; t = t->next) {
        const cJSON *fn = field(t, "function"), *params = field(fn, "parameters"), *desc = field(fn, "description");
        const cJSON *props = field(params, "properties"), *req = field(params, "required");
        puts_(b, "// ");
        if (desc) put_repr(b, desc, 1);
        puts_(b, "\ntype "), puts_(b, tool_name(t)), puts_(b, " = ");
        if (!truthy(params) || !truthy(props)) { puts_(b, "() => any;\n\n"); continue; }
        puts_(b, "(_: {\n");
        for (const cJSON *p = props->child; p != NULL; p = p->next) {
            int required = 0;
            for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r != NULL && !required; r = r->next)
                required = cJSON_IsString(r) && !strcmp(r->valuestring, p->string);
            if (truthy(field(p, "description"))) puts_(b, "// "), put_repr(b, field(p, "description"), 1), puts_(b, "\n");
            puts_(b, p->string), puts_(b, required ? ": " : "?: ");
            ts_type(b, p);
            const cJSON *def = field(p, "default");
            if (def != NULL) {
                if (truthy(field(p, "enum"))) puts_(b, ", // default: "), put_repr(b, def, 1);
                else if (truthy(field(p, "oneOf"))) puts_(b, "// default: "), put_repr(b, def, 1);
                else puts_(b, ", // default: "), dump(b, def, -1, 0);
            }
            puts_(b, ",\n");
        }
        puts_(b, "}) => any;\n\n");
    }
    puts_(b, "} // namespace functions");
}

/* Each tool as the template lists it: Llama 3.1's tojson(indent=4) then a blank line; ChatML's a newline
 * then tojson on one line (SmolLM3's, EXAONE 4's and GLM-4.5's tojson then a newline: the renderer puts EXAONE 4's
 * lines in <tool> tags); Mistral's on one line, joined by ", " (the template adds the brackets); Granite's the whole
 * list as tojson(indent=4). */
static char *tool_defs(const cJSON *tools, int chat_format)
{
    if (chat_format == LLM_CHAT_GRANITE) return llm_tools_dumps(tools, 4);
    buf_t b = { { NULL, 0, 0 }, 0 };
    if (chat_format == LLM_CHAT_GPT_OSS) {
        gpt_oss_defs(&b, tools);
        if (b.oom) { free(b.t.data); return NULL; }
        return b.t.data;
    }
    if (chat_format == LLM_CHAT_QWEN3_CODER || chat_format == LLM_CHAT_SEED_OSS) {
        for (const cJSON *t = tools->child; t != NULL; t = t->next)
            chat_format == LLM_CHAT_SEED_OSS ? seed_def(&b, t) : qwen3_coder_def(&b, t);
        if (b.oom) { free(b.t.data); return NULL; }
        return b.t.data ? b.t.data : strdup("");
    }
    int chatml = chat_format == LLM_CHAT_CHATML;
    int smol = chat_format == LLM_CHAT_SMOLLM3 || chat_format == LLM_CHAT_EXAONE4 || chat_format == LLM_CHAT_GLM45;
    int mistral = is_mistral(chat_format);
    for (const cJSON *t = tools->child; t != NULL; t = t->next) {
        char *s = mistral ? mistral_def(t) : llm_tools_dumps(t, chatml || smol ? -1 : 4);
        if (s == NULL) { b.oom = 1; break; }
        if (chatml) puts_(&b, "\n");
        if (mistral && t != tools->child) puts_(&b, ", ");
        puts_(&b, s);
        if (smol) puts_(&b, "\n");
        else if (!chatml && !mistral) puts_(&b, "\n\n");
        free(s);
    }
    if (b.oom) { free(b.t.data); return NULL; }
    return b.t.data ? b.t.data : strdup("");
}

int llm_tools_parse(const cJSON *root, llm_api_req *r, llm_api_err *e)
{
    const cJSON *tools = llm_api_field(root, "tools"), *tc = llm_api_field(root, "tool_choice"), *ptc = llm_api_field(root, "parallel_tool_calls");
    if (tools && check_tools(tools, e)) return -1;
    if (ptc && !cJSON_IsBool(ptc)) {
        llm_api_seterr(e, 400, "parallel_tool_calls", "invalid_type", "'parallel_tool_calls' must be a boolean");
        return -1;
    }
    if (ptc) r->parallel_calls = cJSON_IsTrue(ptc);
    int have = tools && cJSON_GetArraySize(tools) > 0;
    int mode = have ? LLM_TOOLS_AUTO : LLM_TOOLS_OFF;
    const char *only = NULL;
    if (cJSON_IsString(tc)) {
        const char *c = tc->valuestring;
        if (!strcmp(c, "none")) mode = LLM_TOOLS_OFF;
        else if (!strcmp(c, "required") && have) mode = LLM_TOOLS_REQUIRED;
        else if (!strcmp(c, "auto")) ;
        else {
            llm_api_seterr(e, 400, "tool_choice", "invalid_value", !strcmp(c, "required")
                           ? "tool_choice \"required\" needs 'tools'"
                           : "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                             "\"function\": {\"name\": ...}}");
            return -1;
        }
    } else if (tc) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *t = have && cJSON_IsString(name) ? find_tool(tools, name->valuestring, strlen(name->valuestring))
                                                      : NULL;
        if (t == NULL) {
            llm_api_seterr(e, 400, "tool_choice", "invalid_value",
                           "tool_choice must name one of the 'tools' as {\"type\": \"function\", \"function\": {\"name\": ...}}");
            return -1;
        }
        mode = LLM_TOOLS_NAMED;
        only = name->valuestring;
    }
    r->tool_mode = mode;
    if (mode == LLM_TOOLS_OFF) return 0;
    if (!llm_tools_supported(r->chat_format)) {
        llm_api_seterr(e, 400, "tools", "unsupported_parameter", "function calling needs a model with the Llama 3, "
                       "ChatML (Hermes, Qwen), SmolLM3, Granite, EXAONE 4, Qwen3-Coder, Seed-OSS, GLM-4.5, gpt-oss or Mistral "
                       "(v3, v3-tekken, v7) chat format; this one's is %s", llm_chat_format_name(r->chat_format));
        return -1;
    }
    if (r->stream && r->logprobs) {
        llm_api_seterr(e, 400, "logprobs", "unsupported_parameter",
                       "logprobs are not streamed with tools (a call is sent whole); ask without stream");
        return -1;
    }
    r->tools = tools;
    if ((mode == LLM_TOOLS_REQUIRED || mode == LLM_TOOLS_NAMED) && (r->schema != NULL || r->json)) {
        llm_api_seterr(e, 400, "tool_choice", "invalid_value",
                       "a required or named tool call holds the answer to the call; it cannot take a response_format "
                       "or guided_json as well");
        return -1;
    }
    if ((mode == LLM_TOOLS_REQUIRED || mode == LLM_TOOLS_NAMED) && hold_to_calls(tools, only, r, e)) return -1;
    r->tool_defs = tool_defs(tools, r->chat_format);
    if (r->tool_defs == NULL) { llm_api_seterr(e, 500, NULL, NULL, "out of memory"); return -1; }
    return 0;
}

void llm_tools_calls_free(llm_chat_call *calls, size_t n)
{
    for (size_t k = 0; calls != NULL && k < n; k++) free((char *)calls[k].args);
    free(calls);
}

int llm_tools_history_calls(const cJSON *tool_calls, size_t i, int chat_format, llm_chat_call **calls, size_t *n,
                            llm_api_err *e)
{
    *calls = NULL;
    *n = 0;
    int cnt = cJSON_IsArray(tool_calls) ? cJSON_GetArraySize(tool_calls) : -1;
    int most = chat_format == LLM_CHAT_LLAMA3 ? 1 : LLM_TOOLS_MAX_CALLS;
    if (cnt < 1 || cnt > most) {
        llm_api_seterr(e, 400, "messages", "invalid_value", most == 1
                       ? "messages[%zu].tool_calls: one call a message (the Llama 3 format has no parallel calls)"
                       : "messages[%zu].tool_calls: 1 to %d calls", i, most);
        return -1;
    }
    llm_chat_call *cl = calloc((size_t)cnt, sizeof *cl);
    if (cl == NULL) { llm_api_seterr(e, 500, NULL, NULL, "out of memory"); return -1; }
    size_t k = 0;
    for (const cJSON *c = tool_calls->child; c != NULL; c = c->next, k++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        if (!cJSON_IsString(name) || !name_ok(name->valuestring) || (args && !cJSON_IsString(args) && !cJSON_IsObject(args))) {
            llm_api_seterr(e, 400, "messages", "invalid_value",
                           "messages[%zu].tool_calls[%zu] must be {\"type\": \"function\", \"function\": {\"name\": ..., "
                           "\"arguments\": \"<JSON text>\"}} with a name of letters, digits, '_' or '-'", i, k);
            llm_tools_calls_free(cl, k);
            return -1;
        }
        /* the templates print the arguments as an object, as vLLM hands them to them */
        cJSON *parsed = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
        const cJSON *a = cJSON_IsString(args) ? parsed : args;
        if (cJSON_IsString(args) && !cJSON_IsObject(parsed)) {
            cJSON_Delete(parsed);
            llm_api_seterr(e, 400, "messages", "invalid_value", "messages[%zu].tool_calls[%zu].function.arguments is "
                           "not a JSON object", i, k);
            llm_tools_calls_free(cl, k);
            return -1;
        }
        cJSON *empty = a ? NULL : cJSON_CreateObject();
        cl[k].name = name->valuestring;
        cl[k].id = cJSON_IsString(id) ? id->valuestring : NULL;
        if (xml_calls(chat_format)) { /* Qwen3-Coder's <parameter=key>\nvalue\n</parameter>\n lines (a container's
                                        * JSON), Seed-OSS's <parameter=key>value</parameter>\n (Python's str()),
                                        * GLM-4.5's \n<arg_key>key</arg_key>\n<arg_value>value</arg_value> (a string as
                                        * it is, another value's tojson) */
            int seed = chat_format == LLM_CHAT_SEED_OSS, glm = chat_format == LLM_CHAT_GLM45;
            buf_t b = { { NULL, 0, 0 }, 0 };
            for (const cJSON *v = a ? a->child : NULL; v != NULL; v = v->next) {
                if (glm) {
                    puts_(&b, "\n<arg_key>"), puts_(&b, v->string), puts_(&b, "</arg_key>\n<arg_value>");
                    if (cJSON_IsString(v)) puts_(&b, v->valuestring);
                    else dump(&b, v, -1, 0);
                    puts_(&b, "</arg_value>");
                    continue;
                }
                puts_(&b, "<parameter="), puts_(&b, v->string), puts_(&b, seed ? ">" : ">\n");
                if (seed) put_repr(&b, v, 1);
                else put_value(&b, v);
                puts_(&b, seed ? "</parameter>\n" : "\n</parameter>\n");
            }
            if (b.oom) free(b.t.data);
            cl[k].args = b.oom ? NULL : b.t.data ? b.t.data : strdup("");
        } else {
            cl[k].args = llm_tools_dumps(a ? a : empty, -1);
        }
        cJSON_Delete(parsed);
        cJSON_Delete(empty);
        if (cl[k].args == NULL) {
            llm_api_seterr(e, 500, NULL, NULL, "out of memory");
            llm_tools_calls_free(cl, k);
            return -1;
        }
    }
    *calls = cl;
    *n = k;
    return 0;
}

void llm_tool_call_free(llm_tool_call *c)
{
    free(c->name);
    free(c->args);
    c->name = c->args = NULL;
}

/* JSON's whitespace (a NUL byte in the text is not: strchr would find the terminator) */
static int is_json_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static size_t skip_ws(const char *t, size_t len, size_t k)
{
    while (k < len && is_json_ws(t[k])) k++;
    return k;
}

/* One call's JSON at text[0..len): {"name": one of r's tools, "parameters" / "arguments": object}. Returns
 * the bytes it took (0: not a call) and the call in *c. */
static size_t read_call(const llm_api_req *r, const char *text, size_t len, llm_tool_call *c)
{
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(v, "name");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(v, "parameters");
    if (p == NULL) p = cJSON_GetObjectItemCaseSensitive(v, "arguments");
    const cJSON *t = cJSON_IsObject(v) && cJSON_IsString(n) ? find_tool(r->tools, n->valuestring, strlen(n->valuestring))
                                                             : NULL;
    size_t took = 0;
    if (t != NULL && (p == NULL || cJSON_IsObject(p))) {
        cJSON *empty = p ? NULL : cJSON_CreateObject();
        char *a = cJSON_PrintUnformatted(p ? p : empty);
        c->name = strdup(n->valuestring);
        c->args = a ? strdup(a) : NULL;
        cJSON_free(a);
        cJSON_Delete(empty);
        if (c->name != NULL && c->args != NULL) took = (size_t)(end - text);
        else llm_tool_call_free(c);
    }
    cJSON_Delete(v);
    return took;
}

static int at(const char *t, size_t len, size_t k, const char *tag)
{
    size_t n = strlen(tag);
    return k + n <= len && memcmp(t + k, tag, n) == 0;
}

/* the schema types whose values are strings as written */
static const char *const xml_strs[] = { "string", "str", "text", "varchar", "char", "enum", NULL };

/* A Qwen3-Coder (Seed-OSS, GLM-4.5) parameter's text as the JSON value its schema type makes of it, as vLLM's Qwen3-Coder
 * and Seed-OSS parsers convert it: "null" is null; strings stay strings; integer and number types are numbers, booleans true when
 * the text is "true"; objects, arrays and other types the JSON the text is; a text that does not convert, and a
 * parameter the schema does not name, stays a string. */
static cJSON *xml_value(const char *v, size_t n, const char *type)
{
    char *s = malloc(n + 1), *end = NULL;
    if (s == NULL) return NULL;
    memcpy(s, v, n);
    s[n] = 0;
    cJSON *out = NULL;
    static const char *const bools[] = { "boolean", "bool", "binary", NULL };
    if (strcasecmp(s, "null") == 0) {
        out = cJSON_CreateNull();
    } else if (type == NULL || is_key(type, xml_strs)) {
        out = NULL;
    } else if (!strncmp(type, "int", 3) || !strncmp(type, "uint", 4) || !strncmp(type, "long", 4) ||
               !strncmp(type, "short", 5) || !strncmp(type, "unsigned", 8)) {
        long long x = n > 0 ? strtoll(s, &end, 10) : 0;
        if (end != NULL && *end == 0) out = cJSON_CreateNumber((double)x);
    } else if (!strncmp(type, "num", 3) || !strncmp(type, "float", 5) || !strncmp(type, "double", 6)) {
        double x = n > 0 ? strtod(s, &end) : 0.0;
        if (end != NULL && *end == 0 && isfinite(x)) out = cJSON_CreateNumber(x);
    } else if (is_key(type, bools)) {
        out = cJSON_CreateBool(strcasecmp(s, "true") == 0);
    } else {
        out = cJSON_ParseWithLength(s, n);
    }
    if (out == NULL) out = cJSON_CreateString(s);
    free(s);
    return out;
}

/* args[key] = v, a later value of a key replacing the earlier one; -1 when v is NULL (no memory). */
static int put_arg(cJSON *args, const char *key, cJSON *v)
{
    if (v == NULL) return -1;
    cJSON_DeleteItemFromObjectCaseSensitive(args, key);
    cJSON_AddItemToObject(args, key, v);
    return 0;
}

/* An XML call read whole: tool t's name and args as compact JSON into *c; args deleted. 0, or -1 (no memory). */
static int take_call(llm_tool_call *c, const cJSON *t, cJSON *args)
{
    char *json = args ? cJSON_PrintUnformatted(args) : NULL;
    c->name = strdup(tool_name(t));
    c->args = json ? strdup(json) : NULL;
    cJSON_free(json);
    cJSON_Delete(args);
    if (c->name == NULL || c->args == NULL) {
        llm_tool_call_free(c);
        return -1;
    }
    return 0;
}

/* Qwen3-Coder's (and Seed-OSS's) call at text[0..len): <function=NAME> of one of r's tools,
 * <parameter=KEY>\nVALUE\n</parameter> each (one newline stripped from each end of the value: Seed-OSS writes none),
 * </function>. The bytes it took (0: not a call) and the
 * call, its arguments typed by the tool's parameter schema (xml_value), in *c. */
static size_t read_xml_call(const llm_api_req *r, const char *text, size_t len, llm_tool_call *c)
{
    static const char FN[] = "<function=", PA[] = "<parameter=", PE[] = "</parameter>", FE[] = "</function>";
    size_t k = 0;
    if (!at(text, len, k, FN)) return 0;
    k += sizeof FN - 1;
    const char *gt = memchr(text + k, '>', len - k);
    const cJSON *t = gt ? find_tool(r->tools, text + k, (size_t)(gt - (text + k))) : NULL;
    if (t == NULL) return 0;
    const cJSON *props = tool_props(t);
    cJSON *args = cJSON_CreateObject();
    k = (size_t)(gt - text) + 1;
    for (;;) {
        k = skip_ws(text, len, k);
        if (at(text, len, k, FE)) { k += sizeof FE - 1; break; }
        if (!at(text, len, k, PA) || args == NULL) goto not_call;
        k += sizeof PA - 1;
        const char *kgt = memchr(text + k, '>', len - k);
        if (kgt == NULL || kgt == text + k || kgt - (text + k) > 256 || memchr(text + k, '\n', (size_t)(kgt - (text + k))))
            goto not_call;
        char key[257];
        memcpy(key, text + k, (size_t)(kgt - (text + k)));
        key[kgt - (text + k)] = 0;
        size_t vs = (size_t)(kgt - text) + 1, ve = vs;
        while (ve < len && !at(text, len, ve, PE)) ve++;
        if (ve == len) goto not_call;
        size_t a = vs, e = ve;
        if (a < e && text[a] == '\n') a++;
        if (e > a && text[e - 1] == '\n') e--;
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(props, key), "type");
        if (put_arg(args, key, xml_value(text + a, e - a, cJSON_IsString(ty) ? ty->valuestring : NULL)) != 0)
            goto not_call;
        k = ve + sizeof PE - 1;
    }
    return take_call(c, t, args) == 0 ? k : 0;
not_call:
    cJSON_Delete(args);
    return 0;
}

/* The first tag at or after text[k] (len: none). */
static size_t find_tag(const char *text, size_t len, size_t k, const char *tag)
{
    while (k < len && !at(text, len, k, tag)) k++;
    return k;
}

/* GLM-4.5's call at text[0..len), after its <tool_call>: NAME (up to the first newline, <arg_key> or </tool_call>,
 * around whitespace) of one of r's tools, then <arg_key>KEY</arg_key> <arg_value>VALUE</arg_value> pairs (whitespace
 * between the tags; the key trimmed; the value as it stands for a string parameter, else trimmed, and typed by the
 * tool's parameter schema as Qwen3-Coder's are, xml_value), then </tool_call>. The bytes it took, the closing tag
 * with them (0: not a call: an unknown name, a tag missing or out of place, no </tool_call>), and the call in *c. */
static size_t read_glm_call(const llm_api_req *r, const char *text, size_t len, llm_tool_call *c)
{
    static const char KO[] = "<arg_key>", KC[] = "</arg_key>", VO[] = "<arg_value>", VC[] = "</arg_value>",
                      CE[] = "</tool_call>";
    size_t e = 0, a = 0;
    while (e < len && text[e] != '\n' && !at(text, len, e, KO) && !at(text, len, e, CE)) e++;
    size_t ne = e;
    while (a < ne && is_json_ws(text[a])) a++;
    while (ne > a && is_json_ws(text[ne - 1])) ne--;
    const cJSON *t = ne > a ? find_tool(r->tools, text + a, ne - a) : NULL;
    if (t == NULL) return 0;
    const cJSON *props = tool_props(t);
    cJSON *args = cJSON_CreateObject();
    size_t k = e;
    for (;;) {
        k = skip_ws(text, len, k);
        if (at(text, len, k, CE)) { k += sizeof CE - 1; break; }
        if (!at(text, len, k, KO) || args == NULL) goto not_call;
        size_t ks = k + sizeof KO - 1, ke = find_tag(text, len, ks, KC);
        if (ke == len) goto not_call;
        k = skip_ws(text, len, ke + sizeof KC - 1);
        if (!at(text, len, k, VO)) goto not_call;
        size_t vs = k + sizeof VO - 1, ve = find_tag(text, len, vs, VC);
        if (ve == len) goto not_call;
        while (ks < ke && is_json_ws(text[ks])) ks++;
        while (ke > ks && is_json_ws(text[ke - 1])) ke--;
        if (ke == ks || ke - ks > 256 || memchr(text + ks, '\n', ke - ks)) goto not_call;
        char key[257];
        memcpy(key, text + ks, ke - ks);
        key[ke - ks] = 0;
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(props, key), "type");
        const char *type = cJSON_IsString(ty) ? ty->valuestring : NULL;
        size_t va = vs, vz = ve;
        if (type != NULL && !is_key(type, xml_strs)) {
            while (va < vz && is_json_ws(text[va])) va++;
            while (vz > va && is_json_ws(text[vz - 1])) vz--;
        }
        if (put_arg(args, key, xml_value(text + va, vz - va, type)) != 0)
            goto not_call;
        k = ve + sizeof VC - 1;
    }
    return take_call(c, t, args) == 0 ? k : 0;
not_call:
    cJSON_Delete(args);
    return 0;
}

/* gpt-oss's call (harmony), in the answer's content (the reasoning splitter took its analysis message, a
 * preamble's header and close, and the <|start|>assistant after each; a preamble's text comes first):
 * <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS, or the recipient first,
 * " to=functions.NAME<|channel|>commentary json<|message|>ARGS", ARGS a JSON object to the end (<|call|> ended
 * the answer). Whether the text opens so (a prefix of it counts while partial), and the call in *c when it is
 * one. */
static const char HARMONY_CHANNEL[] = "<|channel|>commentary", HARMONY_TO[] = " to=functions.";

static int harmony_opens_call(const char *text, size_t len)
{
    size_t a = len < sizeof HARMONY_CHANNEL - 1 ? len : sizeof HARMONY_CHANNEL - 1;
    size_t b = len < sizeof HARMONY_TO - 1 ? len : sizeof HARMONY_TO - 1;
    return memcmp(text, HARMONY_CHANNEL, a) == 0 || memcmp(text, HARMONY_TO, b) == 0;
}

static size_t read_harmony_call(const llm_api_req *r, const char *text, size_t len, llm_tool_call *c)
{
    static const char MSG[] = "<|message|>";
    size_t m = find_tag(text, len, 0, MSG), to = find_tag(text, m, 0, HARMONY_TO + 1);
    if (!harmony_opens_call(text, len) || m == len || to == m) return 0;
    size_t n0 = to + sizeof HARMONY_TO - 2, n1 = n0;
    while (n1 < m && text[n1] != ' ' && text[n1] != '<') n1++;
    const cJSON *t = n1 > n0 ? find_tool(r->tools, text + n0, n1 - n0) : NULL;
    size_t a = skip_ws(text, len, m + sizeof MSG - 1);
    const char *end = NULL;
    cJSON *args = t ? cJSON_ParseWithLengthOpts(text + a, len - a, &end, 0) : NULL;
    if (!cJSON_IsObject(args) || skip_ws(text, len, (size_t)(end - text)) != len) {
        cJSON_Delete(args);
        return 0;
    }
    return take_call(c, t, args) == 0 ? len : 0;
}

/* Where the call's opening starts in text (whole: a preamble's text before it), or len. */
static size_t harmony_call_at(const char *text, size_t len)
{
    for (size_t j = 0; j < len; j++)
        if (at(text, len, j, HARMONY_CHANNEL) || at(text, len, j, HARMONY_TO)) return j;
    return len;
}

/* Mistral's and Granite's calls at text[k..len): a JSON array of calls (one object alone taken too) to the end, around
 * whitespace. The number of calls (0: not calls). */
static int read_calls_array(const llm_api_req *r, const char *text, size_t len, size_t k, llm_tool_call *calls)
{
    k = skip_ws(text, len, k);
    if (k < len && text[k] == '{') {
        size_t took = read_call(r, text + k, len - k, &calls[0]);
        if (took == 0) return 0;
        if (skip_ws(text, len, k + took) == len) return 1;
        llm_tool_call_free(&calls[0]);
        return 0;
    }
    if (k == len || text[k] != '[') return 0;
    int n = 0;
    k = skip_ws(text, len, k + 1);
    while (k < len && text[k] != ']') {
        size_t took = n < LLM_TOOLS_MAX_CALLS && text[k] == '{' ? read_call(r, text + k, len - k, &calls[n]) : 0;
        if (took == 0) goto not_calls;
        n++;
        k = skip_ws(text, len, k + took);
        if (k < len && text[k] == ',') k = skip_ws(text, len, k + 1);
        else if (k < len && text[k] != ']') goto not_calls;
    }
    if (n == 0 || k == len || skip_ws(text, len, k + 1) != len) goto not_calls;
    return n;
not_calls:
    while (n > 0) llm_tool_call_free(&calls[--n]);
    return 0;
}

int llm_tools_output(const llm_api_req *r, const char *text, size_t len, llm_tool_call *calls, size_t *content_len)
{
    *content_len = 0;
    if (r->tools == NULL) return 0;
    size_t k = skip_ws(text, len, 0), n = 0;
    const char *tag = call_tag(r->chat_format);
    int held = r->tool_mode == LLM_TOOLS_REQUIRED || r->tool_mode == LLM_TOOLS_NAMED;
    if (held_as_array(r->chat_format) && held) /* the answer is the array (after the tag the prompt opened) */
        return read_calls_array(r, text, len, 0, calls);
    if (r->chat_format == LLM_CHAT_GPT_OSS) { /* harmony: its final message, or one call after any preamble */
        size_t c0 = harmony_call_at(text, len);
        if (c0 == len || !read_harmony_call(r, text + c0, len - c0, &calls[0])) return 0;
        while (c0 > 0 && is_json_ws(text[c0 - 1])) c0--;
        *content_len = c0;
        return 1;
    }
    if (tag == NULL || held) {
        /* the whole answer is one call's JSON (ChatML: the prompt opened the <tool_call>) */
        if (k == len || text[k] != '{') return 0;
        size_t took = read_call(r, text + k, len - k, &calls[0]);
        if (took == 0) return 0;
        size_t j = skip_ws(text, len, k + took);
        const char *close = call_close(r->chat_format);
        if (tag != NULL && at(text, len, j, close)) j = skip_ws(text, len, j + strlen(close));
        if (j != len) { llm_tool_call_free(&calls[0]); return 0; }
        return 1;
    }
    /* auto: text, then the calls to the end (ChatML: <tool_call> JSON </tool_call> blocks; Mistral, Granite:
     * [TOOL_CALLS] / <|tool_call|> and an array) */
    const char *first = NULL;
    for (size_t j = 0; j + strlen(tag) <= len && first == NULL; j++)
        if (at(text, len, j, tag)) first = text + j;
    if (first == NULL) return 0;
    size_t c0 = (size_t)(first - text);
    if (calls_in_array(r->chat_format)) {
        n = (size_t)read_calls_array(r, text, len, c0 + strlen(tag), calls);
        if (n == 0) return 0;
    } else {
        k = c0;
        while (k < len) {
            if (!at(text, len, k, tag) || n == LLM_TOOLS_MAX_CALLS) goto not_calls;
            k = skip_ws(text, len, k + strlen(tag));
            size_t took = r->chat_format == LLM_CHAT_GLM45 ? read_glm_call(r, text + k, len - k, &calls[n])
                          : xml_calls(r->chat_format)     ? read_xml_call(r, text + k, len - k, &calls[n])
                                                          : read_call(r, text + k, len - k, &calls[n]);
            if (took == 0) goto not_calls;
            n++;
            k = skip_ws(text, len, k + took);
            const char *close = call_close(r->chat_format);
            if (at(text, len, k, close)) k = skip_ws(text, len, k + strlen(close));
        }
    }
    while (!r->parallel_calls && n > 1) llm_tool_call_free(&calls[--n]); /* parallel_tool_calls false: the first */
    while (c0 > 0 && is_json_ws(text[c0 - 1])) c0--;
    *content_len = c0;
    return (int)n;
not_calls:
    while (n > 0) llm_tool_call_free(&calls[--n]);
    return 0;
}

const char *llm_tools_call_tag(const llm_api_req *r)
{
    return call_tag(r->chat_format);
}

int llm_tools_text_tags(const llm_api_req *r, const char **tags, int cap)
{
    static const char *const glm[] = { "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>" };
    int n = 0, f = r->chat_format;
    if (f == LLM_CHAT_GPT_OSS) return 0; /* (harmony's control tokens are kept for its reasoning splitter) */
    if (call_tag(f) != NULL && n < cap) tags[n++] = call_tag(f);
    if (call_tag(f) != NULL && !calls_in_array(f) && n < cap) tags[n++] = call_close(f);
    for (size_t i = 0; f == LLM_CHAT_GLM45 && i < sizeof glm / sizeof glm[0] && n < cap; i++) tags[n++] = glm[i];
    return n;
}

size_t llm_tools_content_end(const llm_api_req *r, const char *text, size_t len, size_t sent)
{
    if (r->chat_format == LLM_CHAT_GPT_OSS) { /* a call opens where either of its openings starts */
        for (size_t j = sent; j < len; j++)
            if (harmony_opens_call(text + j, len - j)) return j;
        return len;
    }
    const char *tag = call_tag(r->chat_format);
    size_t n = strlen(tag);
    for (size_t j = sent; j < len; j++) {
        size_t m = len - j < n ? len - j : n;
        if (memcmp(text + j, tag, m) == 0) return j; /* the tag, or what may become it, starts here */
    }
    return len;
}

int llm_tools_may_be_call(const llm_api_req *r, const char *text, size_t len)
{
    if (r->chat_format == LLM_CHAT_GPT_OSS) return harmony_opens_call(text, len);
    const char *tag = call_tag(r->chat_format);
    size_t k = skip_ws(text, len, 0), n = tag ? strlen(tag) : 0;
    if (tag == NULL) return k == len || text[k] == '{';
    size_t m = len - k < n ? len - k : n;
    return m == 0 || memcmp(text + k, tag, m) == 0; /* "<tool" ... or "<tool_call>..." */
}
