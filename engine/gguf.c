/* GGUF reader (bounds-checked parse over a read-only mapping) and writer. */
#include "gguf.h"
#include "gguf_quants.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC          0x46554747u /* "GGUF" little-endian */
#define GGUF_DEFAULT_ALIGN  32
#define GGUF_MAX_DEPTH      8           /* nesting of arrays of arrays */
#define GGUF_MAX_DIMS       4

/* ---------- reader ---------- */

typedef struct {
    const uint8_t *p;
    size_t size, pos;
    const char *name;
    llm_err *err;
} rd;

static int rd_need(rd *r, uint64_t n, const char *what)
{
    if (n > r->size - r->pos) {
        llm_seterr(r->err, "%s: truncated file: %s needs %llu bytes at offset %zu, only %zu left",
                   r->name, what, (unsigned long long)n, r->pos, r->size - r->pos);
        return -1;
    }
    return 0;
}

static int rd_u32(rd *r, uint32_t *v, const char *what)
{
    if (rd_need(r, 4, what))
        return -1;
    memcpy(v, r->p + r->pos, 4);
    r->pos += 4;
    return 0;
}

static int rd_u64(rd *r, uint64_t *v, const char *what)
{
    if (rd_need(r, 8, what))
        return -1;
    memcpy(v, r->p + r->pos, 8);
    r->pos += 8;
    return 0;
}

static int rd_str(rd *r, gguf_str *s, const char *what)
{
    uint64_t n;
    if (rd_u64(r, &n, what) || rd_need(r, n, what))
        return -1;
    s->len = n;
    s->ptr = (const char *)r->p + r->pos;
    r->pos += n;
    return 0;
}

static size_t type_size(uint32_t t)
{
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0; /* STRING, ARRAY: variable; others invalid */
    }
}

static int type_known(uint32_t t) { return t <= GGUF_TYPE_FLOAT64; }

/* Skip (or record) one value of type t. strs: where string values go (NULL: skip). */
static int rd_value(rd *r, uint32_t t, int depth, const char *key, gguf_str *str_out);

static int rd_array(rd *r, int depth, const char *key, uint32_t *et, uint64_t *n,
                    const void **first, gguf_str **strs_out)
{
    if (depth >= GGUF_MAX_DEPTH) {
        llm_seterr(r->err, "%s: key '%s': arrays nested deeper than %d", r->name, key, GGUF_MAX_DEPTH);
        return -1;
    }
    if (rd_u32(r, et, "array element type") || rd_u64(r, n, "array length"))
        return -1;
    if (!type_known(*et)) {
        llm_seterr(r->err, "%s: key '%s': unknown array element type %u", r->name, key, *et);
        return -1;
    }
    *first = r->p + r->pos;
    size_t es = type_size(*et);
    if (es != 0) {
        if (*n > (r->size - r->pos) / es)
            return rd_need(r, (uint64_t)-1, "array data");
        r->pos += (size_t)*n * es;
        return 0;
    }
    /* Variable-size elements: each needs at least 8 (string) or 12 (array) bytes, which bounds n. */
    size_t min = *et == GGUF_TYPE_STRING ? 8 : 12;
    if (*n > (r->size - r->pos) / min) {
        llm_seterr(r->err, "%s: key '%s': array of %llu elements does not fit in the file",
                   r->name, key, (unsigned long long)*n);
        return -1;
    }
    gguf_str *strs = NULL;
    if (*et == GGUF_TYPE_STRING && strs_out != NULL && *n > 0) {
        strs = calloc((size_t)*n, sizeof(*strs));
        if (strs == NULL) {
            llm_seterr(r->err, "%s: out of memory", r->name);
            return -1;
        }
    }
    for (uint64_t i = 0; i < *n; i++) {
        if (rd_value(r, *et, depth + 1, key, strs ? &strs[i] : NULL)) {
            free(strs);
            return -1;
        }
    }
    if (strs_out != NULL)
        *strs_out = strs;
    return 0;
}

static int rd_value(rd *r, uint32_t t, int depth, const char *key, gguf_str *str_out)
{
    if (t == GGUF_TYPE_STRING) {
        gguf_str s;
        if (rd_str(r, &s, "string value"))
            return -1;
        if (str_out)
            *str_out = s;
        return 0;
    }
    if (t == GGUF_TYPE_ARRAY) {
        uint32_t et; uint64_t n; const void *first;
        return rd_array(r, depth, key, &et, &n, &first, NULL);
    }
    size_t es = type_size(t);
    if (es == 0) {
        llm_seterr(r->err, "%s: key '%s': unknown value type %u", r->name, key, t);
        return -1;
    }
    if (rd_need(r, es, "scalar value"))
        return -1;
    r->pos += es;
    return 0;
}

static void keyname(const gguf_str *s, char *buf, size_t cap)
{
    size_t n = s->len < cap - 1 ? (size_t)s->len : cap - 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = (s->ptr[i] >= 32 && s->ptr[i] < 127) ? s->ptr[i] : '?';
    buf[n] = 0;
}

static int str_cmp(const gguf_str *a, const gguf_str *b)
{
    size_t n = a->len < b->len ? (size_t)a->len : (size_t)b->len;
    int c = memcmp(a->ptr, b->ptr, n);
    return c != 0 ? c : (a->len < b->len ? -1 : a->len > b->len);
}

static int cmp_kv(const void *a, const void *b)
{
    return str_cmp(&(*(const gguf_kv *const *)a)->key, &(*(const gguf_kv *const *)b)->key);
}

static int cmp_tensor(const void *a, const void *b)
{
    return str_cmp(&(*(const gguf_tensor *const *)a)->name, &(*(const gguf_tensor *const *)b)->name);
}

/* Reject duplicate keys / tensor names (sort pointers, compare neighbours). */
static int check_dups(gguf_ctx *c, const char *name, llm_err *err)
{
    uint64_t n = c->n_kv > c->n_tensors ? c->n_kv : c->n_tensors;
    if (n < 2)
        return 0;
    const void **v = malloc((size_t)n * sizeof(*v));
    if (v == NULL) {
        llm_seterr(err, "%s: out of memory", name);
        return -1;
    }
    int rc = 0;
    char buf[128];
    for (uint64_t i = 0; i < c->n_kv; i++)
        v[i] = &c->kv[i];
    qsort(v, (size_t)c->n_kv, sizeof(*v), cmp_kv);
    for (uint64_t i = 1; i < c->n_kv && rc == 0; i++) {
        if (cmp_kv(&v[i - 1], &v[i]) == 0) {
            keyname(&((const gguf_kv *)v[i])->key, buf, sizeof(buf));
            llm_seterr(err, "%s: duplicate metadata key '%s'", name, buf);
            rc = -1;
        }
    }
    for (uint64_t i = 0; i < c->n_tensors && rc == 0; i++)
        v[i] = &c->tensors[i];
    if (rc == 0)
        qsort(v, (size_t)c->n_tensors, sizeof(*v), cmp_tensor);
    for (uint64_t i = 1; i < c->n_tensors && rc == 0; i++) {
        if (cmp_tensor(&v[i - 1], &v[i]) == 0) {
            keyname(&((const gguf_tensor *)v[i])->name, buf, sizeof(buf));
            llm_seterr(err, "%s: duplicate tensor name '%s'", name, buf);
            rc = -1;
        }
    }
    free(v);
    return rc;
}

static int parse(gguf_ctx *c, const char *name, llm_err *err)
{
    rd r = { c->base, c->size, 0, name, err };
    uint32_t magic;
    if (c->size < 4 || (memcpy(&magic, c->base, 4), magic != GGUF_MAGIC)) {
        llm_seterr(err, "%s: not a GGUF file (bad magic)", name);
        return -1;
    }
    r.pos = 4;
    if (rd_u32(&r, &c->version, "version"))
        return -1;
    if (c->version != 2 && c->version != 3) {
        llm_seterr(err, "%s: unsupported GGUF version %u (need 2 or 3)", name, c->version);
        return -1;
    }
    if (rd_u64(&r, &c->n_tensors, "tensor count") || rd_u64(&r, &c->n_kv, "metadata count"))
        return -1;
    /* Each kv needs >= 13 bytes (key length, type, 1-byte value), each tensor info >= 24. */
    size_t left = c->size - r.pos;
    if (c->n_kv > left / 13 || c->n_tensors > left / 24) {
        llm_seterr(err, "%s: absurd counts (%llu tensors, %llu metadata keys) for a %zu-byte file",
                   name, (unsigned long long)c->n_tensors, (unsigned long long)c->n_kv, c->size);
        return -1;
    }
    c->kv = calloc(c->n_kv ? (size_t)c->n_kv : 1, sizeof(gguf_kv));
    c->tensors = calloc(c->n_tensors ? (size_t)c->n_tensors : 1, sizeof(gguf_tensor));
    if (c->kv == NULL || c->tensors == NULL) {
        llm_seterr(err, "%s: out of memory", name);
        return -1;
    }
    c->alignment = GGUF_DEFAULT_ALIGN;
    char key[128];
    for (uint64_t i = 0; i < c->n_kv; i++) {
        gguf_kv *kv = &c->kv[i];
        uint32_t t;
        if (rd_str(&r, &kv->key, "metadata key") || rd_u32(&r, &t, "metadata value type"))
            return -1;
        keyname(&kv->key, key, sizeof(key));
        if (!type_known(t)) {
            llm_seterr(err, "%s: key '%s': unknown value type %u", name, key, t);
            return -1;
        }
        kv->type = (gguf_type)t;
        if (t == GGUF_TYPE_ARRAY) {
            uint32_t et;
            if (rd_array(&r, 0, key, &et, &kv->arr_n, &kv->data, &kv->strs))
                return -1;
            kv->arr_type = (gguf_type)et;
        } else if (t == GGUF_TYPE_STRING) {
            kv->strs = calloc(1, sizeof(gguf_str));
            if (kv->strs == NULL) {
                llm_seterr(err, "%s: out of memory", name);
                return -1;
            }
            kv->data = c->base + r.pos;
            if (rd_str(&r, kv->strs, "string value"))
                return -1;
        } else {
            kv->data = c->base + r.pos;
            if (rd_value(&r, t, 0, key, NULL))
                return -1;
        }
        if (kv->key.len == 17 && memcmp(kv->key.ptr, "general.alignment", 17) == 0) {
            uint32_t a;
            if (t != GGUF_TYPE_UINT32) {
                llm_seterr(err, "%s: general.alignment must be a uint32 (type %u)", name, t);
                return -1;
            }
            memcpy(&a, kv->data, 4);
            if (a == 0 || (a & (a - 1)) != 0) {
                llm_seterr(err, "%s: general.alignment %u is not a power of two", name, a);
                return -1;
            }
            c->alignment = a;
        }
    }
    for (uint64_t i = 0; i < c->n_tensors; i++) {
        gguf_tensor *t = &c->tensors[i];
        uint32_t type;
        if (rd_str(&r, &t->name, "tensor name") || rd_u32(&r, &t->n_dims, "tensor dimension count"))
            return -1;
        keyname(&t->name, key, sizeof(key));
        if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS) {
            llm_seterr(err, "%s: tensor '%s': %u dimensions (1..%d supported)", name, key, t->n_dims, GGUF_MAX_DIMS);
            return -1;
        }
        for (int d = 0; d < GGUF_MAX_DIMS; d++)
            t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if (rd_u64(&r, &t->ne[d], "tensor shape"))
                return -1;
            if (t->ne[d] == 0 || t->ne[d] > ((uint64_t)1 << 48)) {
                llm_seterr(err, "%s: tensor '%s': bad dimension %u size %llu", name, key, d,
                           (unsigned long long)t->ne[d]);
                return -1;
            }
        }
        if (rd_u32(&r, &type, "tensor type") || rd_u64(&r, &t->offset, "tensor offset"))
            return -1;
        if (!gguf_qtype_known(type)) {
            llm_seterr(err, "%s: tensor '%s' has unsupported type id %u (supported: f32, f16, bf16, q8_0, q4_0; "
                       "q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, mxfp4 converted to q8_0 at load)", name, key,
                       type);
            return -1;
        }
        t->type = type;
    }
    /* The data section starts at the next multiple of the alignment. */
    size_t a = c->alignment;
    size_t data_start = (r.pos + a - 1) / a * a;
    if (data_start < r.pos || (data_start > c->size && c->n_tensors > 0)) {
        llm_seterr(err, "%s: truncated file: no data section after the header", name);
        return -1;
    }
    for (uint64_t i = 0; i < c->n_tensors; i++) {
        gguf_tensor *t = &c->tensors[i];
        keyname(&t->name, key, sizeof(key));
        size_t row = gguf_qtype_row_bytes(t->type, t->ne[0]);
        if (row == 0) {
            llm_seterr(err, "%s: tensor '%s': row of %llu elements is not a multiple of the %s block size",
                       name, key, (unsigned long long)t->ne[0], gguf_qtype_name(t->type));
            return -1;
        }
        uint64_t nb = row;
        for (int d = 1; d < GGUF_MAX_DIMS; d++) {
            if (t->ne[d] > UINT64_MAX / nb) {
                llm_seterr(err, "%s: tensor '%s': size overflows", name, key);
                return -1;
            }
            nb *= t->ne[d];
        }
        if (t->offset % a != 0) {
            llm_seterr(err, "%s: tensor '%s': offset %llu not aligned to %zu", name, key,
                       (unsigned long long)t->offset, a);
            return -1;
        }
        if (t->offset > c->size - data_start || nb > c->size - data_start - t->offset) {
            llm_seterr(err, "%s: tensor '%s': data [%llu, +%llu) lies outside the file (%zu bytes of data)",
                       name, key, (unsigned long long)t->offset, (unsigned long long)nb, c->size - data_start);
            return -1;
        }
        t->nbytes = (size_t)nb;
        t->data = c->base + data_start + t->offset;
    }
    return check_dups(c, name, err);
}

static gguf_ctx *open_common(const void *buf, size_t size, int owns, const char *name, llm_err *err)
{
    gguf_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        llm_seterr(err, "%s: out of memory", name);
        if (owns)
            munmap((void *)buf, size);
        return NULL;
    }
    c->base = buf;
    c->size = size;
    c->owns_map = owns;
    if (parse(c, name, err) != 0) {
        gguf_close(c);
        return NULL;
    }
    return c;
}

gguf_ctx *gguf_open_mem(const void *buf, size_t size, llm_err *err)
{
    return open_common(buf, size, 0, "<memory>", err);
}

gguf_ctx *gguf_open(const char *path, llm_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        llm_seterr(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        llm_seterr(err, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if (st.st_size < 24) {
        llm_seterr(err, "%s: truncated file: %lld bytes is too small for a GGUF header", path, (long long)st.st_size);
        close(fd);
        return NULL;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        llm_seterr(err, "%s: mmap failed: %s", path, strerror(errno));
        return NULL;
    }
    return open_common(m, (size_t)st.st_size, 1, path, err);
}

void gguf_close(gguf_ctx *c)
{
    if (c == NULL)
        return;
    if (c->kv != NULL)
        for (uint64_t i = 0; i < c->n_kv; i++)
            free(c->kv[i].strs);
    free(c->kv);
    free(c->tensors);
    if (c->owns_map)
        munmap((void *)c->base, c->size);
    free(c);
}

static int str_is(const gguf_str *s, const char *z)
{
    size_t n = strlen(z);
    return s->len == n && memcmp(s->ptr, z, n) == 0;
}

const gguf_kv *gguf_find_kv(const gguf_ctx *c, const char *key)
{
    for (uint64_t i = 0; i < c->n_kv; i++)
        if (str_is(&c->kv[i].key, key))
            return &c->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_ctx *c, const char *name)
{
    for (uint64_t i = 0; i < c->n_tensors; i++)
        if (str_is(&c->tensors[i].name, name))
            return &c->tensors[i];
    return NULL;
}

/* Integer of any integer type at p; 0 ok. Unsigned 64-bit values above INT64_MAX fail. */
static int int_at(gguf_type t, const void *p, int64_t *out)
{
    switch (t) {
    case GGUF_TYPE_UINT8:  { uint8_t v;  memcpy(&v, p, 1); *out = v; return 0; }
    case GGUF_TYPE_INT8:   { int8_t v;   memcpy(&v, p, 1); *out = v; return 0; }
    case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case GGUF_TYPE_INT16:  { int16_t v;  memcpy(&v, p, 2); *out = v; return 0; }
    case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case GGUF_TYPE_INT32:  { int32_t v;  memcpy(&v, p, 4); *out = v; return 0; }
    case GGUF_TYPE_INT64:  { int64_t v;  memcpy(&v, p, 8); *out = v; return 0; }
    case GGUF_TYPE_UINT64: {
        uint64_t v; memcpy(&v, p, 8);
        if (v > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)v;
        return 0;
    }
    default: return -1;
    }
}

static int float_at(gguf_type t, const void *p, float *out)
{
    if (t == GGUF_TYPE_FLOAT32) { memcpy(out, p, 4); return 0; }
    if (t == GGUF_TYPE_FLOAT64) { double d; memcpy(&d, p, 8); *out = (float)d; return 0; }
    return -1;
}

int gguf_get_i64(const gguf_ctx *c, const char *key, int64_t *out)
{
    const gguf_kv *kv = gguf_find_kv(c, key);
    int64_t v;
    if (kv == NULL || int_at(kv->type, kv->data, &v) != 0)
        return -1;
    *out = v;
    return 0;
}

int gguf_get_u32(const gguf_ctx *c, const char *key, uint32_t *out)
{
    int64_t v;
    if (gguf_get_i64(c, key, &v) != 0 || v < 0 || v > (int64_t)UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int gguf_get_f32(const gguf_ctx *c, const char *key, float *out)
{
    const gguf_kv *kv = gguf_find_kv(c, key);
    return kv == NULL ? -1 : float_at(kv->type, kv->data, out);
}

int gguf_get_bool(const gguf_ctx *c, const char *key, int *out)
{
    const gguf_kv *kv = gguf_find_kv(c, key);
    if (kv == NULL || kv->type != GGUF_TYPE_BOOL)
        return -1;
    *out = *(const uint8_t *)kv->data != 0;
    return 0;
}

int gguf_get_str(const gguf_ctx *c, const char *key, char *buf, size_t cap)
{
    const gguf_kv *kv = gguf_find_kv(c, key);
    if (kv == NULL || kv->type != GGUF_TYPE_STRING || cap == 0)
        return -1;
    size_t n = kv->strs[0].len < cap - 1 ? (size_t)kv->strs[0].len : cap - 1;
    memcpy(buf, kv->strs[0].ptr, n);
    buf[n] = 0;
    return 0;
}

int gguf_arr_i64(const gguf_kv *kv, uint64_t i, int64_t *out)
{
    if (kv == NULL || kv->type != GGUF_TYPE_ARRAY || i >= kv->arr_n)
        return -1;
    size_t es = type_size(kv->arr_type);
    int64_t v;
    if (es == 0 || int_at(kv->arr_type, (const uint8_t *)kv->data + i * es, &v) != 0)
        return -1;
    *out = v;
    return 0;
}

int gguf_arr_f32(const gguf_kv *kv, uint64_t i, float *out)
{
    if (kv == NULL || kv->type != GGUF_TYPE_ARRAY || i >= kv->arr_n)
        return -1;
    size_t es = type_size(kv->arr_type);
    if (es == 0)
        return -1;
    return float_at(kv->arr_type, (const uint8_t *)kv->data + i * es, out);
}

/* ---------- writer ---------- */

typedef struct {
    char       *name;
    llm_dtype   type;
    uint32_t    n_dims;
    uint64_t    ne[4];
    const void *data;          /* borrowed, or NULL when produced by fill */
    gguf_fill_fn fill;
    void       *user;
    uint64_t    nbytes, offset;
} w_tensor;

struct gguf_writer {
    uint8_t  *kv; size_t kv_len, kv_cap;  /* serialised metadata */
    uint64_t  n_kv;
    w_tensor *t;  size_t n_t, cap_t;
    uint32_t  alignment;
    int       oom;  /* an allocation failed while collecting: reported by write */
    int       bad;  /* a tensor was malformed */
    char      bad_msg[256];
};

gguf_writer *gguf_writer_new(void)
{
    gguf_writer *w = calloc(1, sizeof(*w));
    if (w != NULL)
        w->alignment = GGUF_DEFAULT_ALIGN;
    return w;
}

void gguf_writer_free(gguf_writer *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->t);
    free(w->kv);
    free(w);
}

static void put(gguf_writer *w, const void *p, size_t n)
{
    if (w->oom)
        return;
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap < w->kv_len + n)
            cap *= 2;
        uint8_t *nb = realloc(w->kv, cap);
        if (nb == NULL) {
            w->oom = 1;
            return;
        }
        w->kv = nb;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}

static void put_u32(gguf_writer *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(gguf_writer *w, uint64_t v) { put(w, &v, 8); }
static void put_str(gguf_writer *w, const char *s, size_t n) { put_u64(w, n); put(w, s, n); }

static void put_key(gguf_writer *w, const char *key, gguf_type t)
{
    put_str(w, key, strlen(key));
    put_u32(w, t);
    w->n_kv++;
}

#define W_SCALAR(fn, ctype, gt)                                        \
    void fn(gguf_writer *w, const char *key, ctype v)                  \
    { put_key(w, key, gt); put(w, &v, sizeof(v)); }

W_SCALAR(gguf_w_u8, uint8_t, GGUF_TYPE_UINT8)
W_SCALAR(gguf_w_i8, int8_t, GGUF_TYPE_INT8)
W_SCALAR(gguf_w_u16, uint16_t, GGUF_TYPE_UINT16)
W_SCALAR(gguf_w_i16, int16_t, GGUF_TYPE_INT16)
W_SCALAR(gguf_w_i32, int32_t, GGUF_TYPE_INT32)
W_SCALAR(gguf_w_u64, uint64_t, GGUF_TYPE_UINT64)
W_SCALAR(gguf_w_i64, int64_t, GGUF_TYPE_INT64)
W_SCALAR(gguf_w_f32, float, GGUF_TYPE_FLOAT32)
W_SCALAR(gguf_w_f64, double, GGUF_TYPE_FLOAT64)

void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v)
{
    if (strcmp(key, "general.alignment") == 0) {
        if (v == 0 || (v & (v - 1)) != 0) {
            w->bad = 1;
            snprintf(w->bad_msg, sizeof(w->bad_msg), "general.alignment %u is not a power of two", v);
            return;
        }
        w->alignment = v;
    }
    put_key(w, key, GGUF_TYPE_UINT32);
    put(w, &v, 4);
}

void gguf_w_bool(gguf_writer *w, const char *key, int v)
{
    uint8_t b = v != 0;
    put_key(w, key, GGUF_TYPE_BOOL);
    put(w, &b, 1);
}

void gguf_w_str(gguf_writer *w, const char *key, const char *v)
{
    put_key(w, key, GGUF_TYPE_STRING);
    put_str(w, v, strlen(v));
}

void gguf_w_arr(gguf_writer *w, const char *key, gguf_type et, const void *elems, uint64_t n)
{
    size_t es = type_size(et);
    if (es == 0) {
        w->bad = 1;
        snprintf(w->bad_msg, sizeof(w->bad_msg), "key '%s': gguf_w_arr needs a fixed-size element type", key);
        return;
    }
    put_key(w, key, GGUF_TYPE_ARRAY);
    put_u32(w, et);
    put_u64(w, n);
    put(w, elems, (size_t)n * es);
}

void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *strs, const size_t *lens, uint64_t n)
{
    put_key(w, key, GGUF_TYPE_ARRAY);
    put_u32(w, GGUF_TYPE_STRING);
    put_u64(w, n);
    for (uint64_t i = 0; i < n; i++)
        put_str(w, strs[i], lens ? lens[i] : strlen(strs[i]));
}

/* Raw bytes of one value (any type, nested arrays included) as they appear in a file. */
static size_t value_extent(gguf_type t, const uint8_t *p, int depth)
{
    if (t == GGUF_TYPE_STRING) {
        uint64_t n; memcpy(&n, p, 8);
        return 8 + (size_t)n;
    }
    if (t == GGUF_TYPE_ARRAY) {
        uint32_t et; uint64_t n; memcpy(&et, p, 4); memcpy(&n, p + 4, 8);
        size_t off = 12, es = type_size(et);
        if (es != 0)
            return off + (size_t)n * es;
        for (uint64_t i = 0; i < n && depth < GGUF_MAX_DEPTH; i++)
            off += value_extent((gguf_type)et, p + off, depth + 1);
        return off;
    }
    return type_size(t);
}

void gguf_w_kv_copy(gguf_writer *w, const gguf_kv *kv)
{
    char key[512];
    size_t n = kv->key.len < sizeof(key) - 1 ? (size_t)kv->key.len : sizeof(key) - 1;
    memcpy(key, kv->key.ptr, n);
    key[n] = 0;
    if (strcmp(key, "general.alignment") == 0) {
        uint32_t a; memcpy(&a, kv->data, 4);
        gguf_w_u32(w, key, a);
        return;
    }
    put_key(w, key, kv->type);
    if (kv->type == GGUF_TYPE_STRING) {
        put_str(w, kv->strs[0].ptr, (size_t)kv->strs[0].len);
    } else if (kv->type == GGUF_TYPE_ARRAY) {
        /* data points at the first element, just after the 12-byte (type, count) prefix. */
        const uint8_t *p = (const uint8_t *)kv->data - 12;
        put(w, p, value_extent(GGUF_TYPE_ARRAY, p, 0));
    } else {
        put(w, kv->data, type_size(kv->type));
    }
}

static void add_tensor(gguf_writer *w, const char *name, llm_dtype type, uint32_t n_dims,
                       const uint64_t *ne, const void *data, gguf_fill_fn fill, void *user)
{
    if (w->bad || w->oom)
        return;
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS ||
        !(llm_dtype_valid(type) || gguf_kq_written((uint32_t)type))) {
        w->bad = 1;
        snprintf(w->bad_msg, sizeof(w->bad_msg), "tensor '%s': bad type or dimension count", name);
        return;
    }
    w_tensor t = { 0 };
    t.type = type; t.n_dims = n_dims; t.data = data; t.fill = fill; t.user = user;
    for (int d = 0; d < 4; d++)
        t.ne[d] = d < (int)n_dims ? ne[d] : 1;
    t.nbytes = gguf_qtype_row_bytes((uint32_t)type, t.ne[0]);
    if (t.nbytes == 0) {
        w->bad = 1;
        snprintf(w->bad_msg, sizeof(w->bad_msg), "tensor '%s': row length %llu is not a multiple of the %s block",
                 name, (unsigned long long)t.ne[0], gguf_qtype_name((uint32_t)type));
        return;
    }
    t.nbytes *= t.ne[1] * t.ne[2] * t.ne[3];
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 64;
        w_tensor *nt = realloc(w->t, cap * sizeof(*nt));
        if (nt == NULL) { w->oom = 1; return; }
        w->t = nt;
        w->cap_t = cap;
    }
    t.name = strdup(name);
    if (t.name == NULL) { w->oom = 1; return; }
    w->t[w->n_t++] = t;
}

void gguf_w_tensor(gguf_writer *w, const char *name, llm_dtype type, uint32_t n_dims, const uint64_t *ne, const void *data)
{
    add_tensor(w, name, type, n_dims, ne, data, NULL, NULL);
}

void gguf_w_tensor_fill(gguf_writer *w, const char *name, llm_dtype type, uint32_t n_dims, const uint64_t *ne,
                        gguf_fill_fn fill, void *user)
{
    add_tensor(w, name, type, n_dims, ne, NULL, fill, user);
}

/* Output goes through one background thread so that producing tensor bytes
 * (conversion, quantisation, random generation) overlaps the disk writes.
 * Every write is handed over in order; the producer reuses a buffer only
 * after the thread has finished with it. */
typedef struct {
    FILE           *f;
    pthread_t       th;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    const void     *p;
    size_t          n;
    int             busy, quit, err_no;
} out_q;

static void *out_thread(void *arg)
{
    out_q *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->busy && !q->quit)
            pthread_cond_wait(&q->cv, &q->mu);
        if (q->busy) {
            const void *p = q->p;
            size_t n = q->n;
            pthread_mutex_unlock(&q->mu);
            size_t got = q->err_no ? n : fwrite(p, 1, n, q->f);
            pthread_mutex_lock(&q->mu);
            if (got != n && q->err_no == 0)
                q->err_no = errno ? errno : EIO;
            q->busy = 0;
            pthread_cond_broadcast(&q->cv);
        } else {
            break;
        }
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Wait until the previous buffer is written; 0 ok, -1 + err. */
static int out_drain(out_q *q, const char *path, llm_err *err)
{
    pthread_mutex_lock(&q->mu);
    while (q->busy)
        pthread_cond_wait(&q->cv, &q->mu);
    int e = q->err_no;
    pthread_mutex_unlock(&q->mu);
    if (e != 0) {
        llm_seterr(err, "%s: write failed: %s", path, strerror(e));
        return -1;
    }
    return 0;
}

/* Queue p (which must stay untouched until the next out_drain / out_put). */
static int out_put(out_q *q, const void *p, size_t n, const char *path, llm_err *err)
{
    if (out_drain(q, path, err) != 0)
        return -1;
    if (n == 0)
        return 0;
    pthread_mutex_lock(&q->mu);
    q->p = p;
    q->n = n;
    q->busy = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

/* Synchronous write of small pieces: waits for the queue first, keeping order. */
static int write_all(out_q *q, const void *p, size_t n, const char *path, llm_err *err)
{
    if (out_drain(q, path, err) != 0)
        return -1;
    if (n > 0 && fwrite(p, 1, n, q->f) != n) {
        llm_seterr(err, "%s: write failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_pad(out_q *q, uint64_t pos, size_t a, const char *path, llm_err *err)
{
    static const uint8_t zeros[4096];
    size_t pad = (size_t)((a - pos % a) % a);
    while (pad > 0) {
        size_t n = pad < sizeof(zeros) ? pad : sizeof(zeros);
        if (write_all(q, zeros, n, path, err))
            return -1;
        pad -= n;
    }
    return 0;
}

#define FILL_CHUNK ((size_t)8 << 20)

/* bufs: two chunk buffers of *cap bytes each, grown as needed. */
static int write_tensor_data(out_q *q, const w_tensor *t, uint8_t *bufs[2], size_t *cap, int *next_buf,
                             const char *path, llm_err *err)
{
    if (t->fill == NULL)
        return write_all(q, t->data, (size_t)t->nbytes, path, err);
    uint64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    size_t row_bytes = (size_t)(t->nbytes / rows);
    uint64_t per = FILL_CHUNK / row_bytes ? FILL_CHUNK / row_bytes : 1;
    size_t need = (size_t)per * row_bytes;
    if (need > *cap) {
        if (out_drain(q, path, err) != 0)
            return -1;
        for (int i = 0; i < 2; i++) {
            free(bufs[i]);
            bufs[i] = malloc(need);
        }
        if (bufs[0] == NULL || bufs[1] == NULL) {
            *cap = 0;
            llm_seterr(err, "%s: out of memory", path);
            return -1;
        }
        *cap = need;
    }
    /* Buffers alternate across tensors too: bufs[k] was queued two chunks ago,
     * and queueing the chunk after it waited until it was written. */
    for (uint64_t r0 = 0; r0 < rows; r0 += per, *next_buf ^= 1) {
        uint64_t n = rows - r0 < per ? rows - r0 : per;
        if (t->fill(t->user, r0, n, bufs[*next_buf], err) != 0 ||
            out_put(q, bufs[*next_buf], (size_t)(n * row_bytes), path, err) != 0)
            return -1;
    }
    return 0;
}

int gguf_writer_write(gguf_writer *w, const char *path, llm_err *err)
{
    if (w->oom) {
        llm_seterr(err, "%s: out of memory while collecting GGUF contents", path);
        return -1;
    }
    if (w->bad) {
        llm_seterr(err, "%s: %s", path, w->bad_msg);
        return -1;
    }
    size_t a = w->alignment;
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        off += (w->t[i].nbytes + a - 1) / a * a;
    }
    out_q q = { 0 };
    q.f = fopen(path, "wb");
    if (q.f == NULL) {
        llm_seterr(err, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    setvbuf(q.f, NULL, _IOFBF, 1 << 20);
    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.cv, NULL);
    if (pthread_create(&q.th, NULL, out_thread, &q) != 0) {
        llm_seterr(err, "%s: cannot start the writer thread", path);
        fclose(q.f);
        unlink(path);
        return -1;
    }
    uint8_t *bufs[2] = { NULL, NULL };
    size_t cap = 0;
    int next_buf = 0;
    uint32_t hdr32[2] = { GGUF_MAGIC, 3 };
    uint64_t hdr64[2] = { w->n_t, w->n_kv };
    int rc = write_all(&q, hdr32, 8, path, err) || write_all(&q, hdr64, 16, path, err) ||
             write_all(&q, w->kv, w->kv_len, path, err);
    uint64_t pos = 24 + w->kv_len;
    for (size_t i = 0; i < w->n_t && rc == 0; i++) {
        const w_tensor *t = &w->t[i];
        uint64_t len = strlen(t->name);
        uint32_t type = t->type;
        rc = write_all(&q, &len, 8, path, err) || write_all(&q, t->name, len, path, err) ||
             write_all(&q, &t->n_dims, 4, path, err) || write_all(&q, t->ne, 8 * (size_t)t->n_dims, path, err) ||
             write_all(&q, &type, 4, path, err) || write_all(&q, &t->offset, 8, path, err);
        pos += 8 + len + 4 + 8 * t->n_dims + 4 + 8;
    }
    if (rc == 0)
        rc = write_pad(&q, pos, a, path, err);
    for (size_t i = 0; i < w->n_t && rc == 0; i++) {
        rc = write_tensor_data(&q, &w->t[i], bufs, &cap, &next_buf, path, err);
        if (rc == 0)
            rc = write_pad(&q, w->t[i].nbytes, a, path, err);
    }
    if (out_drain(&q, path, err) != 0)
        rc = -1;
    pthread_mutex_lock(&q.mu);
    q.quit = 1;
    pthread_cond_broadcast(&q.cv);
    pthread_mutex_unlock(&q.mu);
    pthread_join(q.th, NULL);
    pthread_mutex_destroy(&q.mu);
    pthread_cond_destroy(&q.cv);
    free(bufs[0]);
    free(bufs[1]);
    if (fclose(q.f) != 0 && rc == 0) {
        llm_seterr(err, "%s: write failed: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc != 0)
        unlink(path);
    return rc ? -1 : 0;
}
