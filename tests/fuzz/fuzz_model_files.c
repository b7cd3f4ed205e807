/* libFuzzer entry for the model-file parsers (not built in CI):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iengine tests/fuzz/fuzz_model_files.c \
 *     engine/gguf.c engine/safetensors.c engine/common.c -lcjson -lm -o fuzz_model_files
 *   ./fuzz_model_files -max_len=65536 corpus/   (seed corpus: the head of stories260K.gguf)
 * The first input byte picks the parser: GGUF, safetensors file, or shard index. */
#include "gguf.h"
#include "safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* A private copy, so reads past the end are caught exactly. */
    uint8_t *buf = malloc(size - 1 ? size - 1 : 1);
    memcpy(buf, data + 1, size - 1);
    llm_err err;
    switch (data[0] % 3) {
    case 0: {
        gguf_ctx *g = gguf_open_mem(buf, size - 1, &err);
        if (g != NULL) {
            for (uint64_t i = 0; i < g->n_kv; i++) {
                int64_t v;
                float f;
                gguf_arr_i64(&g->kv[i], 0, &v);
                gguf_arr_f32(&g->kv[i], 0, &f);
            }
            gguf_close(g);
        }
        break;
    }
    case 1:
        st_close(st_open_mem(buf, size - 1, "fuzz", &err));
        break;
    default:
        st_index_free(st_index_parse((const char *)buf, size - 1, "fuzz", &err));
        break;
    }
    free(buf);
    return 0;
}
