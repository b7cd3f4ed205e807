/* safetensors files (one, or shards listed by model.safetensors.index.json),
 * memory-mapped read-only; tensors are checked to lie within their file. */
#ifndef LLM_SAFETENSORS_H
#define LLM_SAFETENSORS_H

#include "common.h"

#define ST_MAX_DIMS 4

typedef struct {
    char       *name;
    llm_dtype   type;       /* BF16, F16 or F32 (unless u8) */
    int         u8;         /* 1: raw bytes (dtype U8), kept only under an MXFP4 checkpoint's names (*_blocks,
                             * *_scales: gpt-oss's experts); type is then meaningless */
    int         f8;         /* 1: FP8 E4M3 bytes (dtype F8_E4M3: an FP8 checkpoint's weights); type meaningless */
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
/* 1 for a tensor of a float type (type is then its llm_dtype), 0 for raw U8 / F8_E4M3 bytes. */
static inline int st_is_float(const st_tensor *t) { return !t->u8 && !t->f8; }

#endif
