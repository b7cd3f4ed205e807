/* Reading (and writing) a whole JSON file (config.json, tokenizer.json, ...) with cJSON. */
#ifndef LLM_JSON_FILE_H
#define LLM_JSON_FILE_H

#include <cjson/cJSON.h>

#include "common.h"

/* Parse the file at path (at most 512 MiB). NULL + err naming the file when it
 * cannot be opened, read or parsed. The caller owns the result (cJSON_Delete). */
cJSON *llm_json_read_file(const char *path, llm_err *err);
/* Write j to path (formatted: indented, else on one line, as a large tokenizer.json). 0, or -1 + err naming
 * the file. */
int llm_json_write_file(const char *path, const cJSON *j, int formatted, llm_err *err);

#endif
