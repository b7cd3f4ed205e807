/* Reading a whole JSON file with cJSON; shared by the model and tokenizer loaders (and the writers). */
#include "json_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *llm_json_read_file(const char *path, llm_err *err)
{
    size_t n = 0;
    char *buf = llm_read_file(path, (512u << 20) - 1, &n, err);
    if (buf == NULL)
        return NULL;
    cJSON *j = cJSON_ParseWithLength(buf, n);
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
