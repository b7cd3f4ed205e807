/* Reading a whole JSON file with cJSON; shared by the model and tokenizer loaders. */
#include "json_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *llm_json_read_file(const char *path, llm_err *err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        llm_seterr(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (512L << 20) && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    cJSON *j = buf && got == (size_t)n ? cJSON_ParseWithLength(buf, got) : NULL;
    free(buf);
    if (j == NULL)
        llm_seterr(err, "%s: cannot read or parse JSON", path);
    return j;
}
