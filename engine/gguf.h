/* GGUF v3 reader (memory-mapped, bounds-checked) and writer.
 * Spec: every metadata value type, tensor infos, general.alignment. */
#ifndef LLM_GGUF_H
#define LLM_GGUF_H

#include "common.h"

typedef enum {
    GGUF_TYPE_UINT8 = 0, GGUF_TYPE_INT8 = 1, GGUF_TYPE_UINT16 = 2, GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4, GGUF_TYPE_INT32 = 5, GGUF_TYPE_FLOAT32 = 6, GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8, GGUF_TYPE_ARRAY = 9, GGUF_TYPE_UINT64 = 10, GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
} gguf_type;

typedef struct {
    uint64_t    len;
    const char *ptr; /* points into the mapping; NOT NUL-terminated */
} gguf_str;

typedef struct {
    gguf_str    key;
    gguf_type   type;      /* value type; GGUF_TYPE_ARRAY for arrays */
    gguf_type   arr_type;  /* element type when type == ARRAY */
    uint64_t    arr_n;     /* element count when type == ARRAY */
    const void *data;      /* scalar value, or first array element, inside the mapping (may be unaligned) */
    gguf_str   *strs;      /* for string scalars (1 entry) and string arrays (arr_n entries) */
} gguf_kv;

typedef struct {
    gguf_str    name;
    uint32_t    n_dims;
    uint64_t    ne[4];     /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    uint32_t    type;      /* ggml type id: an llm_dtype, or a read-only type of gguf_quants.h */
    uint64_t    offset;    /* relative to the data section */
    const void *data;      /* inside the mapping, checked to lie within the file */
    size_t      nbytes;
} gguf_tensor;

typedef struct gguf_ctx {
    uint32_t     version;
    uint64_t     n_kv;
    gguf_kv     *kv;
    uint64_t     n_tensors;
    gguf_tensor *tensors;
    size_t       alignment;
    const uint8_t *base;   /* start of the file bytes */
    size_t       size;     /* file size */
    int          owns_map; /* 1 when opened from a path (munmap on close) */
} gguf_ctx;

/* Open and validate a file (mmap, read-only). NULL + err on any malformation:
 * bad magic, unsupported version, truncation, absurd counts, bad types,
 * tensors out of bounds / misaligned / overlapping the header, duplicate names. */
gguf_ctx *gguf_open(const char *path, llm_err *err);
/* Same over a caller-owned buffer (fuzzing, tests). The buffer must outlive ctx. */
gguf_ctx *gguf_open_mem(const void *buf, size_t size, llm_err *err);
void      gguf_close(gguf_ctx *ctx);

const gguf_kv     *gguf_find_kv(const gguf_ctx *ctx, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_ctx *ctx, const char *name);

/* Typed getters; integer getters accept any integer type whose value fits.
 * Return 0 on success, -1 if missing or wrong type (out untouched). */
int gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out);
int gguf_get_i64(const gguf_ctx *ctx, const char *key, int64_t *out);
int gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out);  /* F32 or F64 */
int gguf_get_bool(const gguf_ctx *ctx, const char *key, int *out);
/* Copy a string value into buf (NUL-terminated, truncated to cap-1). */
int gguf_get_str(const gguf_ctx *ctx, const char *key, char *buf, size_t cap);
/* Array element access (bounds-checked; i < arr_n). */
int gguf_arr_i64(const gguf_kv *kv, uint64_t i, int64_t *out);  /* any integer element type */
int gguf_arr_f32(const gguf_kv *kv, uint64_t i, float *out);    /* F32 or F64 elements */

/* Writer: collects metadata and tensors (data borrowed until gguf_writer_write). */
typedef struct gguf_writer gguf_writer;
gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);
void gguf_w_u8(gguf_writer *w, const char *key, uint8_t v);
void gguf_w_i8(gguf_writer *w, const char *key, int8_t v);
void gguf_w_u16(gguf_writer *w, const char *key, uint16_t v);
void gguf_w_i16(gguf_writer *w, const char *key, int16_t v);
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_w_u64(gguf_writer *w, const char *key, uint64_t v);
void gguf_w_i64(gguf_writer *w, const char *key, int64_t v);
void gguf_w_f32(gguf_writer *w, const char *key, float v);
void gguf_w_f64(gguf_writer *w, const char *key, double v);
void gguf_w_bool(gguf_writer *w, const char *key, int v);
void gguf_w_str(gguf_writer *w, const char *key, const char *v);
/* Arrays: elements copied. For strings, n NUL-terminated strings, or explicit lengths when lens != NULL. */
void gguf_w_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *elems, uint64_t n);
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *strs, const size_t *lens, uint64_t n);
/* Tensor: ne[0] contiguous; data must hold gguf_qtype_row_bytes(type, ne[0]) * ne[1] * ne[2] * ne[3] bytes.
 * type: an llm_dtype, or GGML_Q4_K / GGML_Q5_K (gguf_quants.h: what gen-model --dtype q4_K / q5_K writes). */
void gguf_w_tensor(gguf_writer *w, const char *name, llm_dtype type, uint32_t n_dims, const uint64_t *ne, const void *data);
/* Additions (model files helper): */
/* Copy one metadata entry from a reader (any type, nested arrays included). */
void gguf_w_kv_copy(gguf_writer *w, const gguf_kv *kv);
/* Tensor whose bytes are produced while writing (streams large files): fill
 * writes rows [row0, row0 + n) (a row = ne[0] elements in type) into dst. 0 ok, -1 + err. */
typedef int (*gguf_fill_fn)(void *user, uint64_t row0, uint64_t n, void *dst, llm_err *err);
void gguf_w_tensor_fill(gguf_writer *w, const char *name, llm_dtype type, uint32_t n_dims, const uint64_t *ne,
                        gguf_fill_fn fill, void *user);
/* Writes the file (alignment from general.alignment if set, else 32). 0 ok, -1 + err. */
int  gguf_writer_write(gguf_writer *w, const char *path, llm_err *err);

#endif
