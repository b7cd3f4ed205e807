/* JSON Schema -> the node program of json_schema_priv.h (what is accepted: json_schema.h). */
#include "json_schema_priv.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BYTES (1u << 20) /* enum values and keys, all together */

typedef struct {
    const cJSON *js;
    uint32_t     node;
} memo_entry;

typedef struct {
    llm_schema  *sc;
    const cJSON *root;
    memo_entry  *memo; /* $ref targets already given a node */
    uint32_t     n_memo, cap_memo;
    char        *err;
    size_t       cap;
} compiler;

/* Keywords that constrain values in ways the recogniser does not follow: refused, never ignored. */
static const char *const refused[] = {
    "multipleOf",
    "contains", "minContains", "maxContains", "uniqueItems",
    "unevaluatedItems", "patternProperties", "propertyNames", "minProperties", "maxProperties",
    "unevaluatedProperties", "dependentRequired", "dependentSchemas", "dependencies", "if", "then", "else",
    "not", "$dynamicRef", "$recursiveRef",
};

/* The keywords this compiler reads (beside the annotations it skips). */
static const char *const value_keys[] = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items", "minItems",
    "maxItems", "minLength", "maxLength", "anyOf", "oneOf", "allOf", "nullable", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "prefixItems", "additionalItems",
};

/* String formats followed, as the patterns that say them (RFC 3339 date / time / date-time, RFC 4122
 * UUID, an e-mail address of the usual shape (RFC 5321 allows more), dotted IPv4). Other formats are
 * annotations, as JSON Schema 2020-12 treats every format by default. */
static const struct { const char *name, *re; } formats[] = {
    { "date", "^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])$" },
    { "time", "^([01]\\d|2[0-3]):[0-5]\\d:([0-5]\\d|60)(\\.\\d{1,9})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)$" },
    { "date-time", "^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])T([01]\\d|2[0-3]):[0-5]\\d:([0-5]\\d|60)"
                   "(\\.\\d{1,9})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)$" },
    { "uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$" },
    { "email", "^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)+$" },
    { "ipv4", "^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$" },
};

static int fail(compiler *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(compiler *c, const char *fmt, ...)
{
    if (c->err != NULL && c->cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->cap, fmt, ap);
        va_end(ap);
    }
    return -1;
}


static int new_node(compiler *c, uint32_t *out)
{
    llm_schema *sc = c->sc;
    if (sc->n_nodes >= LLM_SCHEMA_MAX_NODES)
        return fail(c, "schema: more than %d nodes", LLM_SCHEMA_MAX_NODES);
    if (llm_grow((void **)&sc->nodes, &sc->cap_nodes, sc->n_nodes + 1, sizeof(llm_schema_node)) != 0)
        return fail(c, "schema: out of memory");
    memset(&sc->nodes[sc->n_nodes], 0, sizeof(llm_schema_node));
    sc->nodes[sc->n_nodes].max = -1;
    sc->nodes[sc->n_nodes].pattern = -1;
    *out = sc->n_nodes++;
    return 0;
}

/* Append JSON text to bytes[]: its offset in off. */
static int add_bytes(compiler *c, const char *p, size_t n, uint32_t *off)
{
    llm_schema *sc = c->sc;
    if (sc->n_bytes + n > MAX_BYTES)
        return fail(c, "schema: more than %u bytes of keys and enum values", MAX_BYTES);
    if (sc->n_bytes + n > sc->cap_bytes) {
        size_t cap = sc->cap_bytes ? sc->cap_bytes : 256;
        while (cap < sc->n_bytes + n)
            cap *= 2;
        char *q = realloc(sc->bytes, cap);
        if (q == NULL)
            return fail(c, "schema: out of memory");
        sc->bytes = q;
        sc->cap_bytes = cap;
    }
    memcpy(sc->bytes + sc->n_bytes, p, n);
    *off = (uint32_t)sc->n_bytes;
    sc->n_bytes += n;
    return 0;
}

/* v printed the way the output must spell it (unformatted): into bytes[]. */
static int add_json_text(compiler *c, const cJSON *v, llm_schema_text *out)
{
    char *s = cJSON_PrintUnformatted(v);
    if (s == NULL)
        return fail(c, "schema: out of memory");
    size_t n = strlen(s);
    int rc = add_bytes(c, s, n, &out->off);
    out->len = (uint32_t)n;
    cJSON_free(s);
    return rc;
}

static int has_any(const cJSON *js, const char *const *keys, size_t n, const char *except)
{
    for (size_t i = 0; i < n; i++)
        if ((except == NULL || strcmp(keys[i], except) != 0) && cJSON_GetObjectItemCaseSensitive(js, keys[i]))
            return 1;
    return 0;
}

/* A non-negative integer keyword (lengths, item counts), or def when absent. */
static int count_key(compiler *c, const cJSON *js, const char *key, int64_t def, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(js, key);
    *out = def;
    if (v == NULL)
        return 0;
    double d = v->valuedouble;
    if (!cJSON_IsNumber(v) || d < 0 || d > 1e9 || d != floor(d))
        return fail(c, "schema: '%s' must be a whole number 0..1000000000", key);
    *out = (int64_t)d;
    return 0;
}

static int compile_into(compiler *c, const cJSON *js, uint32_t idx);

static int compile_new(compiler *c, const cJSON *js, uint32_t *out)
{
    return new_node(c, out) != 0 ? -1 : compile_into(c, js, *out);
}

static int const_node(compiler *c, uint32_t idx, const cJSON *const *vals, int n);

static int text_cmp(const llm_schema *sc, const llm_schema_text *a, const llm_schema_text *b)
{
    uint32_t m = a->len < b->len ? a->len : b->len;
    int r = memcmp(sc->bytes + a->off, sc->bytes + b->off, m);
    return r != 0 ? r : (a->len > b->len) - (a->len < b->len);
}

/* consts[lo..hi) sorted (shorter first on a common prefix) without duplicates; the count left. */
static uint32_t sort_consts(llm_schema *sc, uint32_t lo, uint32_t hi)
{
    for (uint32_t i = lo + 1; i < hi; i++) { /* insertion sort: enums are short */
        llm_schema_text t = sc->consts[i];
        uint32_t j = i;
        while (j > lo && text_cmp(sc, &sc->consts[j - 1], &t) > 0) {
            sc->consts[j] = sc->consts[j - 1];
            j--;
        }
        sc->consts[j] = t;
    }
    uint32_t w = lo;
    for (uint32_t i = lo; i < hi; i++)
        if (w == lo || text_cmp(sc, &sc->consts[w - 1], &sc->consts[i]) != 0)
            sc->consts[w++] = sc->consts[i];
    return w - lo;
}

static int const_node(compiler *c, uint32_t idx, const cJSON *const *vals, int n)
{
    llm_schema *sc = c->sc;
    if (n <= 0)
        return fail(c, "schema: an enum with no value accepts nothing");
    if (n > LLM_SCHEMA_MAX_ENUM)
        return fail(c, "schema: an enum of more than %d values", LLM_SCHEMA_MAX_ENUM);
    if (llm_grow((void **)&sc->consts, &sc->cap_consts, sc->n_consts + (uint32_t)n, sizeof(llm_schema_text)) != 0)
        return fail(c, "schema: out of memory");
    uint32_t first = sc->n_consts;
    for (int i = 0; i < n; i++)
        if (add_json_text(c, vals[i], &sc->consts[first + (uint32_t)i]) != 0)
            return -1;
    uint32_t kept = sort_consts(sc, first, first + (uint32_t)n);
    sc->n_consts = first + kept;
    llm_schema_node *nd = &sc->nodes[idx];
    nd->kind = SK_CONST;
    nd->first = first;
    nd->n = kept;
    return 0;
}

static int literal_node(compiler *c, uint32_t idx, const char *a, const char *b)
{
    cJSON *x = cJSON_Parse(a), *y = b != NULL ? cJSON_Parse(b) : NULL;
    const cJSON *v[2] = { x, y };
    int rc = x == NULL || (b != NULL && y == NULL) ? fail(c, "schema: out of memory")
                                                   : const_node(c, idx, v, b != NULL ? 2 : 1);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return rc;
}

static int type_matches(const char *type, const cJSON *v)
{
    if (!strcmp(type, "string")) return cJSON_IsString(v);
    if (!strcmp(type, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(type, "null")) return cJSON_IsNull(v);
    if (!strcmp(type, "object")) return cJSON_IsObject(v);
    if (!strcmp(type, "array")) return cJSON_IsArray(v);
    if (!strcmp(type, "number")) return cJSON_IsNumber(v);
    if (!strcmp(type, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    return 0;
}

/* enum / const, kept to the values of the schema's type(s) when it names them. */
static int compile_enum(compiler *c, const cJSON *js, uint32_t idx)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(js, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(js, "const");
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(js, "type");
    if (en != NULL && !cJSON_IsArray(en))
        return fail(c, "schema: 'enum' must be an array");
    int n = en != NULL ? cJSON_GetArraySize(en) : 1;
    if (n == 0)
        return fail(c, "schema: an enum with no value accepts nothing");
    if (n > LLM_SCHEMA_MAX_ENUM)
        return fail(c, "schema: an enum of more than %d values", LLM_SCHEMA_MAX_ENUM);
    const cJSON **vals = malloc((size_t)(n > 0 ? n : 1) * sizeof(*vals));
    if (vals == NULL)
        return fail(c, "schema: out of memory");
    int k = 0;
    const cJSON *v = en != NULL ? en->child : cn;
    for (; v != NULL; v = en != NULL ? v->next : NULL) {
        int ok = ty == NULL;
        if (cJSON_IsString(ty))
            ok = type_matches(ty->valuestring, v);
        for (const cJSON *t = cJSON_IsArray(ty) ? ty->child : NULL; t != NULL; t = t->next)
            ok |= cJSON_IsString(t) && type_matches(t->valuestring, v);
        if (ok && (cn == NULL || en == NULL || cJSON_Compare(v, cn, 1)))
            vals[k++] = v;
    }
    int rc = k == 0 ? fail(c, "schema: no value of the enum / const is of the schema's type")
                    : const_node(c, idx, vals, k);
    free(vals);
    return rc;
}

static int compile_object(compiler *c, const cJSON *js, uint32_t idx)
{
    llm_schema *sc = c->sc;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(js, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(js, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(js, "additionalProperties");
    if (props != NULL && !cJSON_IsObject(props))
        return fail(c, "schema: 'properties' must be an object");
    if (req != NULL && !cJSON_IsArray(req))
        return fail(c, "schema: 'required' must be an array of names");
    for (const cJSON *r = req != NULL ? req->child : NULL; r != NULL; r = r->next)
        if (!cJSON_IsString(r) || cJSON_GetObjectItemCaseSensitive(props, r->valuestring) == NULL)
            return fail(c, "schema: required property %s%.64s%s is not among the 'properties'",
                        cJSON_IsString(r) ? "'" : "", cJSON_IsString(r) ? r->valuestring : "(not a string)",
                        cJSON_IsString(r) ? "'" : "");
    int n = props != NULL ? cJSON_GetArraySize(props) : 0;
    if (n > LLM_SCHEMA_MAX_PROPS)
        return fail(c, "schema: an object with more than %d properties", LLM_SCHEMA_MAX_PROPS);
    if (n == 0) {
        if (addl != NULL && !cJSON_IsBool(addl)) { /* a map: any keys, values of one schema */
            uint32_t item;
            if (compile_new(c, addl, &item) != 0)
                return -1;
            sc->nodes[idx].kind = SK_MAP;
            sc->nodes[idx].item = item;
            if (sc->any_string == UINT32_MAX) {
                uint32_t s;
                if (new_node(c, &s) != 0)
                    return -1;
                sc->nodes[s].kind = SK_STRING;
                sc->any_string = s;
            }
            return 0;
        }
        if (cJSON_IsFalse(addl))
            return literal_node(c, idx, "{}", NULL);
        sc->nodes[idx].kind = SK_ANY;
        sc->nodes[idx].top_object = 1;
        return 0;
    }
    /* every property's node first (they may add properties of their own), then this object's run */
    uint32_t *kid = malloc((size_t)n * sizeof(uint32_t));
    if (kid == NULL)
        return fail(c, "schema: out of memory");
    int i = 0;
    for (const cJSON *p = props->child; p != NULL; p = p->next, i++)
        if (compile_new(c, p, &kid[i]) != 0) {
            free(kid);
            return -1;
        }
    if (llm_grow((void **)&sc->props, &sc->cap_props, sc->n_props + (uint32_t)n, sizeof(llm_schema_prop)) != 0) {
        free(kid);
        return fail(c, "schema: out of memory");
    }
    uint32_t first = sc->n_props;
    i = 0;
    for (const cJSON *p = props->child; p != NULL; p = p->next, i++) {
        llm_schema_prop *pr = &sc->props[first + (uint32_t)i];
        cJSON *name = cJSON_CreateString(p->string);
        llm_schema_text t = { 0, 0 };
        int rc = name == NULL ? fail(c, "schema: out of memory") : add_json_text(c, name, &t);
        cJSON_Delete(name);
        if (rc != 0) {
            free(kid);
            return -1;
        }
        pr->off = t.off;
        pr->len = t.len;
        pr->node = kid[i];
        pr->required = 0;
        for (const cJSON *r = req != NULL ? req->child : NULL; r != NULL; r = r->next)
            if (!strcmp(r->valuestring, p->string))
                pr->required = 1;
    }
    free(kid);
    sc->n_props = first + (uint32_t)n;
    sc->nodes[idx].kind = SK_OBJECT;
    sc->nodes[idx].first = first;
    sc->nodes[idx].n = (uint32_t)n;
    return 0;
}

/* minimum / maximum / exclusiveMinimum / exclusiveMaximum (numbers; draft 4's boolean exclusive* too). */
static int number_bounds(compiler *c, const cJSON *js, int kind, uint32_t idx)
{
    static const char *const keys[4] = { "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum" };
    const cJSON *v[4];
    uint8_t b = 0;
    double lo = 0, hi = 0;
    for (int i = 0; i < 4; i++) {
        v[i] = cJSON_GetObjectItemCaseSensitive(js, keys[i]);
        if (v[i] != NULL && !cJSON_IsNumber(v[i]) && !(i >= 2 && cJSON_IsBool(v[i])))
            return fail(c, "schema: '%s' must be a number", keys[i]);
    }
    if (cJSON_IsNumber(v[0])) { b |= B_LO; lo = v[0]->valuedouble; }
    if (cJSON_IsNumber(v[1])) { b |= B_HI; hi = v[1]->valuedouble; }
    if (cJSON_IsTrue(v[2]) && (b & B_LO)) b |= B_LO_EX;
    if (cJSON_IsTrue(v[3]) && (b & B_HI)) b |= B_HI_EX;
    if (cJSON_IsNumber(v[2]) && (!(b & B_LO) || v[2]->valuedouble >= lo)) { b |= B_LO | B_LO_EX; lo = v[2]->valuedouble; }
    if (cJSON_IsNumber(v[3]) && (!(b & B_HI) || v[3]->valuedouble <= hi)) { b |= B_HI | B_HI_EX; hi = v[3]->valuedouble; }
    const double big = 9e15; /* what 16 digits reach, with room */
    if (((b & B_LO) && lo > big) || ((b & B_HI) && hi < -big))
        return fail(c, "schema: a number bound beyond what 16 digits write");
    if ((b & B_LO) && (b & B_HI) && (lo > hi || (lo == hi && (b & (B_LO_EX | B_HI_EX)))))
        return fail(c, "schema: minimum above maximum accepts nothing");
    if (kind == SK_INTEGER && (b & B_LO) && (b & B_HI) &&
        ((b & B_HI_EX) ? ceil(hi) - 1 : floor(hi)) < ((b & B_LO_EX) ? floor(lo) + 1 : ceil(lo)))
        return fail(c, "schema: no integer between minimum and maximum");
    llm_schema_node *nd = &c->sc->nodes[idx];
    nd->kind = (uint8_t)kind;
    nd->bounds = b;
    nd->lo = lo;
    nd->hi = hi;
    return 0;
}

/* A string's pattern or (known) format as a regex in regexes[]: *out its index, or -1 when none. */
static int string_pattern(compiler *c, const cJSON *js, int has_length, int32_t *out)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(js, "pattern");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(js, "format");
    const char *src = NULL;
    *out = -1;
    if (pat != NULL && !cJSON_IsString(pat))
        return fail(c, "schema: 'pattern' must be a string");
    if (fmt != NULL && !cJSON_IsString(fmt))
        return fail(c, "schema: 'format' must be a string");
    if (fmt != NULL)
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
            if (!strcmp(fmt->valuestring, formats[i].name))
                src = formats[i].re;
    if (pat != NULL && src != NULL)
        return fail(c, "schema: 'pattern' and 'format' %s together are not supported", fmt->valuestring);
    if (pat != NULL)
        src = pat->valuestring;
    if (src == NULL)
        return 0;
    if (has_length) /* a length the pattern cannot reach would leave the output no way to go on */
        return fail(c, "schema: '%s' together with minLength / maxLength is not supported", pat ? "pattern" : "format");
    char why[160];
    llm_regex *re = llm_regex_compile(src, why, sizeof why);
    if (re == NULL)
        return fail(c, "schema: %s", why);
    llm_schema *sc = c->sc;
    if (llm_grow((void **)&sc->regexes, &sc->cap_regexes, sc->n_regexes + 1, sizeof(llm_regex *)) != 0) {
        llm_regex_free(re);
        return fail(c, "schema: out of memory");
    }
    *out = (int32_t)sc->n_regexes;
    sc->regexes[sc->n_regexes++] = re;
    return 0;
}

static int compile_typed(compiler *c, const cJSON *js, const char *type, uint32_t idx)
{
    llm_schema_node *nd = &c->sc->nodes[idx];
    if (!strcmp(type, "object"))
        return compile_object(c, js, idx);
    if (!strcmp(type, "array")) {
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(js, "items");
        const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(js, "prefixItems");
        int64_t lo, hi;
        if (count_key(c, js, "minItems", 0, &lo) != 0 || count_key(c, js, "maxItems", -1, &hi) != 0)
            return -1;
        if (hi >= 0 && lo > hi)
            return fail(c, "schema: minItems %lld above maxItems %lld", (long long)lo, (long long)hi);
        if (prefix == NULL && cJSON_IsArray(items)) { /* draft 7's tuple: items as a list, additionalItems after */
            prefix = items;
            items = cJSON_GetObjectItemCaseSensitive(js, "additionalItems");
        }
        if (prefix != NULL && !cJSON_IsArray(prefix))
            return fail(c, "schema: 'prefixItems' must be an array of schemas");
        if (items != NULL && !cJSON_IsObject(items) && !cJSON_IsBool(items))
            return fail(c, "schema: 'items' must be a schema");
        int k = prefix != NULL ? cJSON_GetArraySize(prefix) : 0;
        if (k > LLM_SCHEMA_MAX_PROPS)
            return fail(c, "schema: a tuple of more than %d items", LLM_SCHEMA_MAX_PROPS);
        uint32_t item, first = c->sc->n_alts;
        if (k > 0) { /* the tuple's nodes, in alts[first .. first + k) */
            uint32_t *kid = malloc((size_t)k * sizeof(uint32_t));
            int i = 0, rc = kid == NULL ? fail(c, "schema: out of memory") : 0;
            for (const cJSON *p = prefix->child; p != NULL && rc == 0; p = p->next)
                rc = compile_new(c, p, &kid[i++]);
            if (rc == 0 && llm_grow((void **)&c->sc->alts, &c->sc->cap_alts, c->sc->n_alts + (uint32_t)k, sizeof(uint32_t)) != 0)
                rc = fail(c, "schema: out of memory");
            if (rc == 0) {
                first = c->sc->n_alts;
                memcpy(c->sc->alts + first, kid, (size_t)k * sizeof(uint32_t));
                c->sc->n_alts += (uint32_t)k;
            }
            free(kid);
            if (rc != 0)
                return -1;
        }
        if (cJSON_IsFalse(items)) { /* nothing after the tuple */
            if (lo > k)
                return fail(c, "schema: minItems %lld above the %d items the array may have", (long long)lo, k);
            hi = hi >= 0 && hi < k ? hi : k;
            items = NULL;
        }
        if (items != NULL ? compile_new(c, items, &item) != 0 : new_node(c, &item) != 0)
            return -1; /* a new node is SK_ANY */
        nd = &c->sc->nodes[idx];
        nd->kind = SK_ARRAY;
        nd->item = item;
        nd->first = first;
        nd->n = (uint32_t)k;
        nd->min = lo;
        nd->max = hi;
        return 0;
    }
    if (!strcmp(type, "string")) {
        int64_t lo, hi;
        if (count_key(c, js, "minLength", 0, &lo) != 0 || count_key(c, js, "maxLength", -1, &hi) != 0)
            return -1;
        if (hi >= 0 && lo > hi)
            return fail(c, "schema: minLength %lld above maxLength %lld", (long long)lo, (long long)hi);
        int32_t pattern = -1;
        if (string_pattern(c, js, lo != 0 || hi >= 0, &pattern) != 0)
            return -1;
        nd = &c->sc->nodes[idx];
        nd->kind = SK_STRING;
        nd->min = lo;
        nd->max = hi;
        nd->pattern = pattern;
        return 0;
    }
    if (!strcmp(type, "number") || !strcmp(type, "integer"))
        return number_bounds(c, js, type[0] == 'n' ? SK_NUMBER : SK_INTEGER, idx);
    if (!strcmp(type, "boolean"))
        return literal_node(c, idx, "false", "true");
    if (!strcmp(type, "null"))
        return literal_node(c, idx, "null", NULL);
    return fail(c, "schema: unknown type '%.40s'", type);
}

/* A node for each of n schemas (or, with types, each type name of js), as one anyOf. */
static int compile_anyof(compiler *c, const cJSON *list, const cJSON *typed_js, uint32_t idx)
{
    llm_schema *sc = c->sc;
    int n = cJSON_GetArraySize(list);
    if (n <= 0)
        return fail(c, "schema: an empty anyOf / oneOf / type list accepts nothing");
    if (n > LLM_SCHEMA_MAX_ENUM)
        return fail(c, "schema: an anyOf of more than %d schemas", LLM_SCHEMA_MAX_ENUM);
    uint32_t *kid = malloc((size_t)n * sizeof(uint32_t));
    if (kid == NULL)
        return fail(c, "schema: out of memory");
    int i = 0, rc = 0;
    for (const cJSON *a = list->child; a != NULL && rc == 0; a = a->next, i++) {
        if (typed_js == NULL) {
            rc = compile_new(c, a, &kid[i]);
        } else if (!cJSON_IsString(a)) {
            rc = fail(c, "schema: 'type' must be a type name or a list of them");
        } else {
            rc = new_node(c, &kid[i]);
            if (rc == 0)
                rc = compile_typed(c, typed_js, a->valuestring, kid[i]);
        }
    }
    if (rc == 0 && llm_grow((void **)&sc->alts, &sc->cap_alts, sc->n_alts + (uint32_t)n, sizeof(uint32_t)) != 0)
        rc = fail(c, "schema: out of memory");
    if (rc == 0) {
        memcpy(sc->alts + sc->n_alts, kid, (size_t)n * sizeof(uint32_t));
        sc->nodes[idx].kind = SK_ANYOF;
        sc->nodes[idx].first = sc->n_alts;
        sc->nodes[idx].n = (uint32_t)n;
        sc->n_alts += (uint32_t)n;
    }
    free(kid);
    return rc;
}

/* "#", "#/a/b" (JSON Pointer, ~0 and ~1 escapes) inside the root schema. */
static const cJSON *resolve_ref(compiler *c, const char *ref)
{
    if (ref[0] != '#' || (ref[1] != '\0' && ref[1] != '/')) {
        fail(c, "schema: $ref '%.80s': only references inside the schema (\"#/...\") are supported", ref);
        return NULL;
    }
    const cJSON *at = c->root;
    const char *p = ref + 1;
    while (*p == '/' && at != NULL) {
        char seg[256];
        size_t k = 0;
        for (p++; *p != '\0' && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1'))
                ch = *++p == '0' ? '~' : '/';
            if (k + 1 >= sizeof(seg)) {
                at = NULL;
                break;
            }
            seg[k++] = ch;
        }
        seg[k] = '\0';
        if (at == NULL)
            break;
        if (cJSON_IsArray(at)) {
            char *end;
            long i = strtol(seg, &end, 10);
            at = *end == '\0' && k > 0 ? cJSON_GetArrayItem(at, (int)i) : NULL;
        } else {
            at = cJSON_GetObjectItemCaseSensitive(at, seg);
        }
    }
    if (at == NULL)
        fail(c, "schema: $ref '%.80s' points at nothing in the schema", ref);
    return at;
}

static int compile_ref(compiler *c, const char *ref, uint32_t idx)
{
    const cJSON *t = resolve_ref(c, ref);
    if (t == NULL)
        return -1;
    uint32_t target = UINT32_MAX;
    for (uint32_t i = 0; i < c->n_memo; i++)
        if (c->memo[i].js == t)
            target = c->memo[i].node;
    if (target == UINT32_MAX) {
        if (new_node(c, &target) != 0 ||
            llm_grow((void **)&c->memo, &c->cap_memo, c->n_memo + 1, sizeof(memo_entry)) != 0)
            return c->err[0] ? -1 : fail(c, "schema: out of memory");
        c->memo[c->n_memo++] = (memo_entry){ t, target }; /* before compiling it: recursion ends here */
        if (compile_into(c, t, target) != 0)
            return -1;
    }
    c->sc->nodes[idx].kind = SK_REF;
    c->sc->nodes[idx].item = target;
    return 0;
}

static int compile_into(compiler *c, const cJSON *js, uint32_t idx)
{
    if (cJSON_IsTrue(js))
        return 0; /* SK_ANY */
    if (cJSON_IsFalse(js))
        return fail(c, "schema: false accepts nothing");
    if (!cJSON_IsObject(js))
        return fail(c, "schema: a schema must be an object or a boolean");
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (cJSON_GetObjectItemCaseSensitive(js, refused[i]) != NULL)
            return fail(c, "schema: '%s' is not supported", refused[i]);
    const size_t nk = sizeof value_keys / sizeof value_keys[0];
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(js, "$ref");
    if (ref != NULL) {
        if (!cJSON_IsString(ref))
            return fail(c, "schema: '$ref' must be a string");
        if (has_any(js, value_keys, nk, NULL))
            return fail(c, "schema: $ref beside other keywords that constrain the value is not supported");
        return compile_ref(c, ref->valuestring, idx);
    }
    const cJSON *nullable = cJSON_GetObjectItemCaseSensitive(js, "nullable");
    if (cJSON_IsTrue(nullable)) { /* OpenAPI's: the schema, or null */
        cJSON *copy = cJSON_Duplicate(js, 1), *list = cJSON_CreateArray(), *null_schema = cJSON_CreateObject();
        int rc = copy == NULL || list == NULL || null_schema == NULL ||
                 cJSON_AddStringToObject(null_schema, "type", "null") == NULL;
        if (!rc) {
            cJSON_DeleteItemFromObjectCaseSensitive(copy, "nullable");
            cJSON_AddItemToArray(list, copy);
            cJSON_AddItemToArray(list, null_schema);
            copy = null_schema = NULL;
            rc = compile_anyof(c, list, NULL, idx);
        } else {
            rc = fail(c, "schema: out of memory");
        }
        cJSON_Delete(copy);
        cJSON_Delete(null_schema);
        cJSON_Delete(list);
        return rc;
    }
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(js, "allOf");
    if (all != NULL) {
        if (!cJSON_IsArray(all) || cJSON_GetArraySize(all) != 1)
            return fail(c, "schema: allOf is supported with one schema only");
        if (has_any(js, value_keys, nk, "allOf"))
            return fail(c, "schema: allOf beside other keywords that constrain the value is not supported");
        return compile_into(c, all->child, idx);
    }
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(js, "anyOf");
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(js, "oneOf");
    if (any != NULL || one != NULL) {
        const cJSON *list = any != NULL ? any : one;
        if (any != NULL && one != NULL)
            return fail(c, "schema: anyOf and oneOf together are not supported");
        if (!cJSON_IsArray(list))
            return fail(c, "schema: '%s' must be an array of schemas", any != NULL ? "anyOf" : "oneOf");
        if (has_any(js, value_keys, nk, any != NULL ? "anyOf" : "oneOf"))
            return fail(c, "schema: %s beside other keywords that constrain the value is not supported",
                        any != NULL ? "anyOf" : "oneOf");
        return compile_anyof(c, list, NULL, idx);
    }
    if (cJSON_GetObjectItemCaseSensitive(js, "enum") != NULL || cJSON_GetObjectItemCaseSensitive(js, "const") != NULL)
        return compile_enum(c, js, idx);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(js, "type");
    if (cJSON_IsArray(type))
        return cJSON_GetArraySize(type) == 1 ? (cJSON_IsString(type->child)
                                                    ? compile_typed(c, js, type->child->valuestring, idx)
                                                    : fail(c, "schema: 'type' must be a type name or a list of them"))
                                             : compile_anyof(c, type, js, idx);
    if (type != NULL)
        return cJSON_IsString(type) ? compile_typed(c, js, type->valuestring, idx)
                                    : fail(c, "schema: 'type' must be a type name or a list of them");
    /* no type: what the keywords describe */
    static const char *const obj_keys[] = { "properties", "required", "additionalProperties" };
    static const char *const arr_keys[] = { "items", "minItems", "maxItems", "prefixItems" };
    static const char *const str_keys[] = { "minLength", "maxLength", "pattern" };
    if (has_any(js, obj_keys, 3, NULL))
        return compile_typed(c, js, "object", idx);
    if (has_any(js, arr_keys, 4, NULL))
        return compile_typed(c, js, "array", idx);
    if (has_any(js, str_keys, 3, NULL))
        return compile_typed(c, js, "string", idx);
    return 0; /* SK_ANY */
}

/* A node that reaches itself through $refs and anyOfs alone would have the recogniser open it forever
 * before any byte: refused. colour: 0 unseen, 1 on the path, 2 done. */
static int left_recursive(const llm_schema *sc, uint32_t i, uint8_t *colour)
{
    if (colour[i] == 1)
        return 1;
    if (colour[i] == 2)
        return 0;
    colour[i] = 1;
    const llm_schema_node *nd = &sc->nodes[i];
    if (nd->kind == SK_REF && left_recursive(sc, nd->item, colour))
        return 1;
    if (nd->kind == SK_ANYOF)
        for (uint32_t k = 0; k < nd->n; k++)
            if (left_recursive(sc, sc->alts[nd->first + k], colour))
                return 1;
    colour[i] = 2;
    return 0;
}

void llm_schema_free(llm_schema *sc)
{
    if (sc == NULL)
        return;
    free(sc->nodes);
    free(sc->props);
    free(sc->consts);
    free(sc->alts);
    free(sc->bytes);
    for (uint32_t i = 0; i < sc->n_regexes; i++) {
        if (sc->memo != NULL && sc->memo->bits != NULL && sc->memo->bits[i] != NULL) {
            for (int k = 0; k < LLM_SCHEMA_MEMO_STATES; k++)
                free(sc->memo->bits[i][k]);
            free(sc->memo->bits[i]);
        }
        llm_regex_free(sc->regexes[i]);
    }
    if (sc->memo != NULL)
        free(sc->memo->bits);
    free(sc->memo);
    free(sc->regexes);
    llm_grammar_free(sc->gram);
    free(sc);
}

/* Room for the mask's kept verdicts of each pattern's DFA states (json_schema_match.c). */
static int memo_new(llm_schema *sc)
{
    if ((sc->memo = calloc(1, sizeof(llm_schema_memo))) == NULL ||
        (sc->memo->bits = calloc(sc->n_regexes, sizeof(uint64_t **))) == NULL)
        return -1;
    for (uint32_t i = 0; i < sc->n_regexes; i++)
        if ((sc->memo->bits[i] = calloc(LLM_SCHEMA_MEMO_STATES, sizeof(uint64_t *))) == NULL)
            return -1;
    return 0;
}

llm_schema *llm_schema_compile(const cJSON *s, char *err, size_t cap)
{
    char dummy[8];
    if (err == NULL || cap == 0) {
        err = dummy;
        cap = sizeof dummy;
    }
    err[0] = '\0';
    compiler c = { .sc = calloc(1, sizeof(llm_schema)), .root = s, .err = err, .cap = cap };
    if (c.sc == NULL) {
        snprintf(err, cap, "schema: out of memory");
        return NULL;
    }
    c.sc->any_string = UINT32_MAX;
    int rc = new_node(&c, &c.sc->root);
    if (rc == 0 && llm_grow((void **)&c.memo, &c.cap_memo, 1, sizeof(memo_entry)) != 0)
        rc = fail(&c, "schema: out of memory");
    if (rc == 0) {
        c.memo[c.n_memo++] = (memo_entry){ s, c.sc->root }; /* "$ref": "#" */
        rc = compile_into(&c, s, c.sc->root);
    }
    if (rc == 0 && c.sc->n_regexes > 0 && memo_new(c.sc) != 0) /* the mask's kept verdicts in pattern strings */
        rc = fail(&c, "schema: out of memory");
    if (rc == 0) {
        uint8_t *colour = calloc(c.sc->n_nodes, 1);
        if (colour == NULL)
            rc = fail(&c, "schema: out of memory");
        for (uint32_t i = 0; rc == 0 && i < c.sc->n_nodes; i++)
            if (left_recursive(c.sc, i, colour))
                rc = fail(&c, "schema: a $ref / anyOf that comes back to itself before any value starts");
        free(colour);
    }
    free(c.memo);
    if (rc != 0) {
        llm_schema_free(c.sc);
        return NULL;
    }
    return c.sc;
}

llm_schema *llm_schema_regex(const char *src, size_t len, char *err, size_t cap)
{
    /* the whole output: anchored at both ends (a '^' / '$' of the pattern's own is the same thing) */
    if (len > 0 && src[0] == '^')
        src++, len--;
    if (len > 0 && src[len - 1] == '$') { /* unless escaped: an even run of backslashes before it */
        size_t bs = 0;
        while (bs + 1 < len && src[len - 2 - bs] == '\\')
            bs++;
        if (bs % 2 == 0)
            len--;
    }
    if (len + 6 > LLM_REGEX_MAX_LEN) {
        snprintf(err, cap, "regex: more than %d bytes", LLM_REGEX_MAX_LEN - 6);
        return NULL;
    }
    if (memchr(src, '\0', len) != NULL) {
        snprintf(err, cap, "regex: a NUL byte");
        return NULL;
    }
    char buf[LLM_REGEX_MAX_LEN + 1];
    snprintf(buf, sizeof buf, "^(?:%.*s)$", (int)len, src);
    llm_schema *sc = calloc(1, sizeof(llm_schema));
    if (sc == NULL || (sc->regexes = calloc(1, sizeof(llm_regex *))) == NULL) {
        free(sc);
        snprintf(err, cap, "regex: out of memory");
        return NULL;
    }
    sc->raw = 1;
    if ((sc->regexes[0] = llm_regex_compile(buf, err, cap)) == NULL) {
        llm_schema_free(sc);
        return NULL;
    }
    sc->n_regexes = 1;
    if (memo_new(sc) != 0) {
        llm_schema_free(sc);
        snprintf(err, cap, "regex: out of memory");
        return NULL;
    }
    return sc;
}

llm_schema *llm_schema_grammar(const char *src, size_t len, char *err, size_t cap)
{
    llm_grammar *g = llm_grammar_parse(src, len, err, cap);
    if (g == NULL)
        return NULL;
    llm_schema *sc = calloc(1, sizeof(llm_schema));
    if (sc == NULL) {
        llm_grammar_free(g);
        snprintf(err, cap, "grammar: out of memory");
        return NULL;
    }
    sc->gram = g;
    return sc;
}

llm_schema *llm_schema_parse(const char *text, size_t len, char *err, size_t cap)
{
    if (len > LLM_SCHEMA_MAX_TEXT) {
        snprintf(err, cap, "schema: more than %d bytes", LLM_SCHEMA_MAX_TEXT);
        return NULL;
    }
    cJSON *js = cJSON_ParseWithLength(text, len);
    if (js == NULL) {
        snprintf(err, cap, "schema: not valid JSON");
        return NULL;
    }
    llm_schema *sc = llm_schema_compile(js, err, cap);
    cJSON_Delete(js);
    return sc;
}
