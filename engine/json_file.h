/* Reading a whole JSON file (config.json, tokenizer.json, ...) with cJSON. */
#ifndef LLM_JSON_FILE_H
#define LLM_JSON_FILE_H

#include <cjson/cJSON.h>

#include "common.h"

/* Parse the file at path (at most 512 MiB). NULL + err naming the file when it
 * cannot be opened, read or parsed. The caller owns the result (cJSON_Delete). */
cJSON *llm_json_read_file(const char *path, llm_err *err);

#endif
