/* Reading a whole JSON file with cJSON; shared by the model and tokenizer loaders (and the writers). */
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

int llm_json_write_file(const char *path, const cJSON *j, int formatted, llm_err *err)
{
    char *s = formatted ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    FILE *f = s != NULL ? fopen(path, "w") : NULL;
    int rc = f != NULL && fputs(s, f) >= 0 && fputc('\n', f) != EOF ? 0 : -1;
    if (f != NULL && fclose(f) != 0)
        rc = -1;
    if (rc != 0)
        llm_seterr(err, "%s: cannot write: %s", path, s == NULL ? "out of memory" : strerror(errno));
    free(s);
    return rc;
}
