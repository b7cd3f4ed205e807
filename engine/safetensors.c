/* safetensors parser: 8-byte little-endian header length, JSON header
 * {name: {dtype, shape, data_offsets}}, then the data. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER ((uint64_t)100 << 20) /* the format's own limit */

static int map_file(const char *path, const uint8_t **base, size_t *size, llm_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        llm_seterr(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 8) {
        llm_seterr(err, "%s: not a safetensors file (too small or not a regular file)", path);
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        llm_seterr(err, "%s: mmap failed: %s", path, strerror(errno));
        return -1;
    }
    *base = m;
    *size = (size_t)st.st_size;
    return 0;
}

void st_close(st_file *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->n; i++)
        free(f->t[i].name);
    free(f->t);
    if (f->owns_map)
        munmap((void *)f->base, f->size);
    free(f);
}

/* A name ending in suffix. */
static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The raw kind of an integer or FP8 tensor a quantised checkpoint stores under this name (st_kind), or -1 for
 * a buffer to leave out (any other integer or boolean tensor: BERT's embeddings.position_ids / token_type_ids). */
static int raw_kind(const char *dtype, const char *name)
{
    static const char *const i32[] = { ".qweight", ".qzeros", ".g_idx", ".weight_packed", ".weight_zero_point",
                                       ".weight_g_idx" };
    if (strcmp(dtype, "F8_E4M3") == 0)
        return ST_F8_E4M3;
    if (strcmp(dtype, "U8") == 0 && (ends_with(name, "_blocks") || ends_with(name, "_scales")))
        return ST_U8;
    if (strcmp(dtype, "I8") == 0 && (ends_with(name, ".weight") || ends_with(name, ".weight_zero_point")))
        return ST_I8;
    for (size_t i = 0; strcmp(dtype, "I32") == 0 && i < sizeof(i32) / sizeof(i32[0]); i++)
        if (ends_with(name, i32[i]))
            return ST_I32;
    return -1;
}

static int dtype_is_buffer(const char *s, const char *name)
{
    static const char *const ints[] = { "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL" };
    if (raw_kind(s, name) >= 0)
        return 0;
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        if (strcmp(s, ints[i]) == 0)
            return 1;
    return 0;
}

static int dtype_of(const char *s, llm_dtype *t)
{
    if (strcmp(s, "BF16") == 0) { *t = LLM_BF16; return 0; }
    if (strcmp(s, "F16") == 0)  { *t = LLM_F16; return 0; }
    if (strcmp(s, "F32") == 0)  { *t = LLM_F32; return 0; }
    return -1;
}

/* A JSON number that is a non-negative integer below 2^53 (exactly representable). */
static int json_u64(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j))
        return -1;
    double d = j->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != (double)(uint64_t)d)
        return -1;
    *out = (uint64_t)d;
    return 0;
}

static int parse_tensor(const cJSON *e, st_tensor *t, const uint8_t *data, size_t data_len,
                        const char *name, llm_err *err)
{
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(of) ||
        cJSON_GetArraySize(of) != 2) {
        llm_seterr(err, "%s: tensor '%s': needs dtype, shape and data_offsets [begin, end]", name, e->string);
        return -1;
    }
    int rk = raw_kind(dt->valuestring, e->string);
    t->kind = rk < 0 ? ST_FLOAT : (st_kind)rk;
    if (rk < 0 && dtype_of(dt->valuestring, &t->type) != 0) {
        llm_seterr(err, "%s: tensor '%s': unsupported dtype %s (supported: BF16, F16, F32; F8_E4M3, and the "
                   "integer parts of GPTQ, AWQ and compressed-tensors checkpoints)", name, e->string, dt->valuestring);
        return -1;
    }
    int nd = cJSON_GetArraySize(sh);
    if (nd > ST_MAX_DIMS) {
        llm_seterr(err, "%s: tensor '%s': %d dimensions (at most %d supported)", name, e->string, nd, ST_MAX_DIMS);
        return -1;
    }
    t->n_dims = nd;
    uint64_t count = 1;
    for (int d = 0; d < nd; d++) {
        uint64_t v;
        if (json_u64(cJSON_GetArrayItem(sh, d), &v) != 0 || v > ((uint64_t)1 << 40)) {
            llm_seterr(err, "%s: tensor '%s': bad shape entry %d", name, e->string, d);
            return -1;
        }
        t->shape[d] = v;
        if (v != 0 && count > UINT64_MAX / v / 4) {
            llm_seterr(err, "%s: tensor '%s': size overflows", name, e->string);
            return -1;
        }
        count *= v;
    }
    uint64_t b, en;
    if (json_u64(cJSON_GetArrayItem(of, 0), &b) != 0 || json_u64(cJSON_GetArrayItem(of, 1), &en) != 0 ||
        en < b || en > data_len) {
        llm_seterr(err, "%s: tensor '%s': data_offsets outside the file's %zu data bytes", name, e->string, data_len);
        return -1;
    }
    uint64_t want = count * (t->kind == ST_I32 ? 4 : t->kind != ST_FLOAT ? 1 : llm_dtype_block_bytes(t->type));
    if (en - b != want) {
        llm_seterr(err, "%s: tensor '%s': data_offsets span %llu bytes, shape needs %llu", name, e->string,
                   (unsigned long long)(en - b), (unsigned long long)want);
        return -1;
    }
    t->data = data + b;
    t->nbytes = (size_t)want;
    t->name = strdup(e->string);
    if (t->name == NULL) {
        llm_seterr(err, "%s: out of memory", name);
        return -1;
    }
    return 0;
}

static int parse_file(st_file *f, const char *name, llm_err *err)
{
    uint64_t hl;
    if (f->size < 8) {
        llm_seterr(err, "%s: truncated safetensors file", name);
        return -1;
    }
    memcpy(&hl, f->base, 8);
    if (hl > ST_MAX_HEADER || hl > f->size - 8) {
        llm_seterr(err, "%s: header length %llu exceeds the file (%zu bytes)", name, (unsigned long long)hl, f->size);
        return -1;
    }
    cJSON *root = cJSON_ParseWithLength((const char *)f->base + 8, (size_t)hl);
    if (root == NULL || !cJSON_IsObject(root)) {
        llm_seterr(err, "%s: header is not a JSON object", name);
        cJSON_Delete(root);
        return -1;
    }
    size_t n = 0;
    for (const cJSON *e = root->child; e != NULL; e = e->next)
        n++;
    f->t = calloc(n ? n : 1, sizeof(st_tensor));
    if (f->t == NULL) {
        llm_seterr(err, "%s: out of memory", name);
        cJSON_Delete(root);
        return -1;
    }
    const uint8_t *data = f->base + 8 + hl;
    size_t data_len = f->size - 8 - (size_t)hl;
    int rc = 0;
    for (const cJSON *e = root->child; e != NULL && rc == 0; e = e->next) {
        if (e->string == NULL || strcmp(e->string, "__metadata__") == 0)
            continue;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        if (cJSON_IsString(dt) && dtype_is_buffer(dt->valuestring, e->string))
            continue;
        rc = parse_tensor(e, &f->t[f->n], data, data_len, name, err);
        if (rc == 0)
            f->n++;
    }
    cJSON_Delete(root);
    return rc;
}

st_file *st_open_mem(const void *buf, size_t size, const char *name, llm_err *err)
{
    st_file *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        llm_seterr(err, "%s: out of memory", name);
        return NULL;
    }
    f->base = buf;
    f->size = size;
    if (parse_file(f, name, err) != 0) {
        st_close(f);
        return NULL;
    }
    return f;
}

st_file *st_open(const char *path, llm_err *err)
{
    const uint8_t *base;
    size_t size;
    if (map_file(path, &base, &size, err) != 0)
        return NULL;
    st_file *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        munmap((void *)base, size);
        llm_seterr(err, "%s: out of memory", path);
        return NULL;
    }
    f->base = base;
    f->size = size;
    f->owns_map = 1;
    if (parse_file(f, path, err) != 0) {
        st_close(f);
        return NULL;
    }
    return f;
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0)
            return &f->t[i];
    return NULL;
}

/* ---------- sharded index ---------- */

void st_index_free(st_index *ix)
{
    if (ix == NULL)
        return;
    for (size_t i = 0; i < ix->n_shards; i++)
        free(ix->shards[i]);
    for (size_t i = 0; i < ix->n; i++)
        free(ix->names[i]);
    free(ix->shards);
    free(ix->names);
    free(ix->shard_of);
    free(ix);
}

/* A shard name must be a plain file name inside the model directory. */
static int shard_name_ok(const char *s)
{
    return s[0] != 0 && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
           strlen(s) < 256;
}

st_index *st_index_parse(const char *json, size_t len, const char *name, llm_err *err)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (root == NULL || !cJSON_IsObject(wm)) {
        llm_seterr(err, "%s: not a safetensors index (needs a JSON object with weight_map)", name);
        cJSON_Delete(root);
        return NULL;
    }
    size_t n = 0;
    for (const cJSON *e = wm->child; e != NULL; e = e->next)
        n++;
    st_index *ix = calloc(1, sizeof(*ix));
    if (ix != NULL) {
        ix->names = calloc(n ? n : 1, sizeof(char *));
        ix->shard_of = calloc(n ? n : 1, sizeof(int));
        ix->shards = calloc(n ? n : 1, sizeof(char *));
    }
    if (ix == NULL || ix->names == NULL || ix->shard_of == NULL || ix->shards == NULL) {
        llm_seterr(err, "%s: out of memory", name);
        goto fail;
    }
    for (const cJSON *e = wm->child; e != NULL; e = e->next) {
        if (!cJSON_IsString(e) || e->string == NULL || !shard_name_ok(e->valuestring)) {
            llm_seterr(err, "%s: weight_map entry '%s' must name a shard file in the same directory", name,
                       e->string ? e->string : "?");
            goto fail;
        }
        size_t s = 0;
        while (s < ix->n_shards && strcmp(ix->shards[s], e->valuestring) != 0)
            s++;
        if (s == ix->n_shards) {
            if ((ix->shards[s] = strdup(e->valuestring)) == NULL)
                goto oom;
            ix->n_shards++;
        }
        if ((ix->names[ix->n] = strdup(e->string)) == NULL)
            goto oom;
        ix->shard_of[ix->n++] = (int)s;
    }
    if (ix->n == 0) {
        llm_seterr(err, "%s: weight_map is empty", name);
        goto fail;
    }
    cJSON_Delete(root);
    return ix;
oom:
    llm_seterr(err, "%s: out of memory", name);
fail:
    cJSON_Delete(root);
    st_index_free(ix);
    return NULL;
}

void st_set_close(st_set *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n_files; i++)
        st_close(s->files[i]);
    free(s->files);
    free(s);
}

st_set *st_set_open_dir(const char *dir, llm_err *err)
{
    char path[PATH_MAX];
    st_set *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        llm_seterr(err, "%s: out of memory", dir);
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    if (access(path, F_OK) == 0) {
        s->files = calloc(1, sizeof(st_file *));
        if (s->files == NULL || (s->files[0] = st_open(path, err)) == NULL) {
            if (s->files == NULL)
                llm_seterr(err, "%s: out of memory", dir);
            st_set_close(s);
            return NULL;
        }
        s->n_files = 1;
        s->total_bytes = s->files[0]->size;
        return s;
    }
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    size_t len;
    char *json = llm_read_file(path, (64u << 20) - 1, &len, err); /* (an index under 64 MiB) */
    if (json == NULL) {
        llm_seterr(err, "%s: no model.safetensors or model.safetensors.index.json", dir);
        st_set_close(s);
        return NULL;
    }
    st_index *ix = st_index_parse(json, len, path, err);
    free(json);
    if (ix == NULL) {
        st_set_close(s);
        return NULL;
    }
    s->files = calloc(ix->n_shards, sizeof(st_file *));
    int rc = s->files != NULL ? 0 : -1;
    if (rc != 0)
        llm_seterr(err, "%s: out of memory", dir);
    for (size_t i = 0; i < ix->n_shards && rc == 0; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, ix->shards[i]);
        if ((s->files[i] = st_open(path, err)) == NULL)
            rc = -1;
        else {
            s->n_files++;
            s->total_bytes += s->files[i]->size;
        }
    }
    /* Every tensor the index names must be in the shard it names. */
    for (size_t i = 0; i < ix->n && rc == 0; i++) {
        if (st_find(s->files[ix->shard_of[i]], ix->names[i]) == NULL) {
            llm_seterr(err, "%s: index maps tensor '%s' to %s, which does not contain it", dir, ix->names[i],
                       ix->shards[ix->shard_of[i]]);
            rc = -1;
        }
    }
    st_index_free(ix);
    if (rc != 0) {
        st_set_close(s);
        return NULL;
    }
    return s;
}

const st_tensor *st_set_find(const st_set *s, const char *name)
{
    for (size_t i = 0; i < s->n_files; i++) {
        const st_tensor *t = st_find(s->files[i], name);
        if (t != NULL)
            return t;
    }
    return NULL;
}
