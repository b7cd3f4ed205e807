/* A generated token as the generation path hands it to TGI's and llama.cpp's builders (ngx_http_llm_tg_token's
 * shape: {"id", "text", "logprob", "special": false}), for the builder tests (test_llm_tgi.c, test_llm_lcpp.c). */
#ifndef TESTS_TOKEN_JSON_H
#define TESTS_TOKEN_JSON_H

#include <cjson/cJSON.h>

static cJSON *tok(int id, const char *text, double lp)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", id);
    cJSON_AddStringToObject(o, "text", text);
    cJSON_AddNumberToObject(o, "logprob", lp);
    cJSON_AddBoolToObject(o, "special", 0);
    return o;
}

#endif
