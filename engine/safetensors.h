/* safetensors files (one, or shards listed by model.safetensors.index.json),
 * memory-mapped read-only; tensors are checked to lie within their file. */
#ifndef LLM_SAFETENSORS_H
#define LLM_SAFETENSORS_H

#include "common.h"

#define ST_MAX_DIMS 4

/* What a tensor's bytes are: a float type (st_tensor.type), or raw values a quantised checkpoint's loader
 * decodes. Integer tensors are kept only under the names such checkpoints give them; the others are buffers
 * (BERT's position_ids), left out of the set. */
typedef enum {
    ST_FLOAT = 0,
    ST_U8,       /* U8 *_blocks / *_scales: an MXFP4 checkpoint's (gpt-oss's experts) */
    ST_F8_E4M3,  /* FP8 weights (model_hf_fp8.c) */
    ST_I8,       /* I8 *.weight / *.weight_zero_point: compressed-tensors' int-quantized (model_hf_intq.c) */
    ST_I32,      /* I32 *.qweight / *.qzeros / *.g_idx (GPTQ, AWQ), *.weight_packed / *.weight_zero_point /
                  * *.weight_g_idx (compressed-tensors' pack-quantized) */
} st_kind;

typedef struct {
    char       *name;
    llm_dtype   type;       /* BF16, F16 or F32 (kind ST_FLOAT only) */
    st_kind     kind;
    int         n_dims;
    uint64_t    shape[ST_MAX_DIMS]; /* as stored: shape[0] outermost (rows), last contiguous */
    const void *data;
    size_t      nbytes;
} st_tensor;

typedef struct {
    const uint8_t *base;
    size_t         size;
    int            owns_map;
    size_t         n;
    st_tensor     *t;
} st_file;

/* Open one file (mmap) / parse a caller-owned buffer (name used in messages). */
st_file *st_open(const char *path, llm_err *err);
st_file *st_open_mem(const void *buf, size_t size, const char *name, llm_err *err);
void     st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);

/* model.safetensors.index.json: weight_map {tensor: shard file}. */
typedef struct {
    size_t  n_shards;
    char  **shards;     /* distinct file names, in first-seen order */
    size_t  n;
    char  **names;      /* tensor names */
    int    *shard_of;   /* index into shards */
} st_index;

st_index *st_index_parse(const char *json, size_t len, const char *name, llm_err *err);
void      st_index_free(st_index *ix);

/* All tensors of a model directory: model.safetensors, or the index and its shards. */
typedef struct {
    size_t    n_files;
    st_file **files;
    size_t    total_bytes;
} st_set;

st_set *st_set_open_dir(const char *dir, llm_err *err);
void    st_set_close(st_set *s);
const st_tensor *st_set_find(const st_set *s, const char *name);
/* 1 for a tensor of a float type (type is then its llm_dtype), 0 for raw bytes (st_kind). */
static inline int st_is_float(const st_tensor *t) { return t->kind == ST_FLOAT; }

#endif
