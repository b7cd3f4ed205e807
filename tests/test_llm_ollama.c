/* Ollama's API (POST /api/chat, /api/generate): bodies turned into the chat / completions bodies they mean
 * (ngx_module/llm_ollama.c) and parsed through llm_api.c, every refusal with the field it names; the output
 * builder (ngx_module/ngx_http_llm_ollama_out.c): the stream's lines and the whole answer, for text, thinking,
 * tool calls and each done reason; the error object. */
#include "tap.h"
#include "../ngx_module/llm_api.c"
#include "../ngx_module/llm_tools.c"
#include "../ngx_module/llm_chat_body.c"
#include "../ngx_module/llm_responses.c"
#include "../ngx_module/llm_messages.c"
#include "../ngx_module/llm_ollama.c"
#include "../ngx_module/llm_tgi.c"
#include "../ngx_module/llm_lcpp.c"
#include "../ngx_module/ngx_http_llm_format.c"
#include "../ngx_module/ngx_http_llm_ollama_out.c"
#include "api_mutate.h"

static int parse(llm_api_kind kind, const char *body, llm_api_req *r, llm_api_err *e)
{
    memset(e, 0, sizeof *e);
    return llm_api_parse_chat(kind, body, strlen(body), LLM_CHAT_CHATML, r, e);
}

static void bad(llm_api_kind kind, const char *body, const char *param, const char *what)
{
    llm_api_req r;
    llm_api_err e;
    int rc = parse(kind, body, &r, &e);
    ok(rc == -1 && e.status == 400 && !strcmp(e.param, param), "%s -> 400 param '%s' (got %d '%s': %s)", what,
       param, e.status, e.param, e.message);
    llm_api_req_free(&r);
}

/* The JSON of v without its created_at and durations (they change from run to run). */
static int same_json(const cJSON *v, const char *want, const char *what)
{
    cJSON *c = v ? cJSON_Duplicate(v, 1) : NULL;
    static const char *const varying[] = { "created_at", "total_duration", "prompt_eval_duration", "eval_duration" };
    for (size_t i = 0; c && i < sizeof varying / sizeof varying[0]; i++)
        cJSON_DeleteItemFromObjectCaseSensitive(c, varying[i]);
    char *s = c ? cJSON_PrintUnformatted(c) : strdup("(none)");
    int same = !strcmp(s, want);
    ok(same, "%s: %s", what, s);
    free(s);
    cJSON_Delete(c);
    return same;
}

static void test_chat(void)
{
    llm_api_req r;
    llm_api_err e;
    const llm_api_kind C = LLM_API_OLLAMA_CHAT;

    is_int(parse(C, "{\"model\":\"m:latest\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &r, &e), 0,
           "a minimal chat body parses (%s)", e.message);
    ok(r.api == C && r.kind == LLM_API_CHAT && r.stream == 1 && r.n_msgs == 1 && !strcmp(r.msgs[0].content, "Hi") &&
       !strcmp(r.model, "m"), "a chat, streamed by default (Ollama's default), the model without :latest");
    llm_api_req_free(&r);

    is_int(parse(C, "{\"model\":\"m\",\"stream\":false,\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                    "{\"role\":\"user\",\"content\":\"Hi\",\"images\":[]}],\"format\":\"json\",\"keep_alive\":\"5m\","
                    "\"options\":{\"temperature\":0.5,\"top_k\":7,\"top_p\":0.9,\"min_p\":0.05,\"seed\":42,"
                    "\"num_predict\":33,\"stop\":[\"END\"],\"repeat_penalty\":1.2,\"presence_penalty\":0.1,"
                    "\"frequency_penalty\":0.2,\"num_ctx\":8192,\"num_gpu\":99,\"mirostat\":0,\"typical_p\":1,"
                    "\"repeat_last_n\":64}}", &r, &e), 0, "options, format json, the deployment's knobs (%s)", e.message);
    ok(!r.stream && !r.max_tokens_all && r.temperature == 0.5 && r.top_k == 7 && r.top_p == 0.9 && r.min_p == 0.05 && r.has_seed &&
       r.seed == 42 && r.max_tokens == 33 && r.n_stop == 1 && !strcmp(r.stop[0], "END") &&
       r.repetition_penalty == 1.2 && r.presence_penalty == 0.1 && r.frequency_penalty == 0.2 && r.json &&
       r.n_msgs == 2 && !strcmp(r.msgs[0].role, "system"),
       "temperature, top_k, top_p, min_p, seed, num_predict, stop, repeat_penalty, penalties, JSON mode");
    llm_api_req_free(&r);

    is_int(parse(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"options\":{\"num_predict\":-1},"
                    "\"format\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}},\"think\":false}",
                 &r, &e), 0, "a JSON Schema format, num_predict -1, think false (%s)", e.message);
    ok(r.max_tokens == 0 && r.max_tokens_all == 1 && r.schema != NULL && strstr(r.schema, "\"integer\"") &&
       r.enable_thinking == 0, "num_predict -1: as many as the server allows; the schema held; enable_thinking false");
    llm_api_req_free(&r);

    is_int(parse(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":\"\","
                    "\"tool_calls\":[{\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}},"
                    "{\"function\":{\"name\":\"now\",\"arguments\":{}}}]},{\"role\":\"tool\",\"content\":\"rain\","
                    "\"tool_name\":\"get_weather\"},{\"role\":\"tool\",\"content\":\"noon\"},{\"role\":\"user\","
                    "\"content\":\"Thanks\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}},{\"type\":"
                    "\"function\",\"function\":{\"name\":\"now\",\"parameters\":{\"type\":\"object\"}}}]}", &r, &e), 0,
           "tool calls and their results (%s)", e.message);
    cJSON *m = cJSON_GetArrayItem(llm_api_field(r.root, "messages"), 1);
    char *calls = cJSON_PrintUnformatted(llm_api_field(m, "tool_calls"));
    const cJSON *t1 = cJSON_GetArrayItem(llm_api_field(r.root, "messages"), 2);
    const cJSON *t2 = cJSON_GetArrayItem(llm_api_field(r.root, "messages"), 3);
    ok(calls && !strcmp(calls, "[{\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"},"
                               "\"id\":\"call_0\",\"type\":\"function\"},{\"function\":{\"name\":\"now\",\"arguments\":"
                               "\"{}\"},\"id\":\"call_1\",\"type\":\"function\"}]"),
       "the calls in OpenAI's shape, ids call_0, call_1: %s", calls);
    ok(!strcmp(llm_api_field(t1, "tool_call_id")->valuestring, "call_0") &&
       !strcmp(llm_api_field(t2, "tool_call_id")->valuestring, "call_1") && r.n_msgs == 5 && r.tool_mode != 0,
       "each tool message answers the next call, in order");
    cJSON_free(calls);
    llm_api_req_free(&r);

    bad(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\",\"images\":[\"aGk=\"]}]}", "messages", "an image");
    bad(C, "{\"messages\":[{\"role\":\"robot\",\"content\":\"Hi\"}]}", "messages", "an unknown role");
    bad(C, "{\"messages\":[{\"role\":\"user\",\"content\":[\"Hi\"]}]}", "messages", "content not a string");
    bad(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\",\"tool_calls\":[]}]}", "messages", "a user's tool_calls");
    bad(C, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"name\":\"f\"}]}]}", "messages",
        "a call without its function object");
    bad(C, "{}", "messages", "no messages");
    bad(C, "{\"messages\":[],\"stream\":\"yes\"}", "stream", "stream not a boolean");
    bad(C, "{\"messages\":[],\"options\":[1]}", "options", "options not an object");
    bad(C, "{\"messages\":[],\"options\":{\"mirostat\":2}}", "options", "mirostat on");
    bad(C, "{\"messages\":[],\"options\":{\"tfs_z\":0.5}}", "options", "tfs_z below 1");
    bad(C, "{\"messages\":[],\"options\":{\"bogus\":1}}", "options", "an unknown option");
    bad(C, "{\"messages\":[],\"options\":{\"num_predict\":-3}}", "options.num_predict", "num_predict -3");
    bad(C, "{\"messages\":[],\"options\":{\"num_predict\":1.5}}", "options.num_predict", "num_predict 1.5");
    bad(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"options\":{\"temperature\":-1}}",
        "options.temperature", "a temperature below 0 (named as Ollama's option)");
    bad(C, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"options\":{\"top_p\":2}}", "options.top_p",
        "top_p above 1");
    bad(C, "{\"messages\":[],\"format\":\"yaml\"}", "format", "format yaml");
    bad(C, "{\"messages\":[],\"think\":\"max\"}", "think", "think max");
}

static void test_generate(void)
{
    llm_api_req r;
    llm_api_err e;
    const llm_api_kind G = LLM_API_OLLAMA_GENERATE;

    is_int(parse(G, "{\"model\":\"m\",\"prompt\":\"Why?\",\"system\":\"Be brief.\"}", &r, &e), 0,
           "a templated prompt parses (%s)", e.message);
    ok(r.kind == LLM_API_CHAT && r.n_msgs == 2 && !strcmp(r.msgs[0].role, "system") &&
       !strcmp(r.msgs[1].role, "user") && !strcmp(r.msgs[1].content, "Why?"), "system then the prompt as the user's");
    llm_api_req_free(&r);

    is_int(parse(G, "{\"model\":\"m\",\"prompt\":\"Once\",\"raw\":true,\"stream\":false,\"options\":{\"num_predict\":5},"
                    "\"think\":true,\"context\":[],\"template\":\"\"}", &r, &e), 0, "raw parses (%s)", e.message);
    ok(r.kind == LLM_API_COMPLETIONS && r.prompt && !strcmp(r.prompt, "Once") && r.max_tokens == 5 && !r.stream,
       "raw: a completion of the prompt as it is");
    llm_api_req_free(&r);

    is_int(parse(G, "{\"model\":\"m\",\"prompt\":\"def f(\",\"suffix\":\"    return x\"}", &r, &e), 0,
           "a suffix parses (%s)", e.message);
    ok(r.kind == LLM_API_COMPLETIONS && r.suffix && !strcmp(r.suffix, "    return x"), "a suffix: fill in the middle");
    llm_api_req_free(&r);

    is_int(parse(G, "{\"model\":\"m:latest\"}", &r, &e), 0, "no prompt parses");
    ok(r.ollama_load == 1 && r.model && !strcmp(r.model, "m"), "no prompt: Ollama's load call, for model m");
    llm_api_req_free(&r);
    is_int(parse(G, "{\"model\":\"m\",\"prompt\":\"\",\"keep_alive\":0}", &r, &e), 0, "an empty prompt parses");
    ok(r.ollama_load == 1, "an empty prompt: the load call");
    llm_api_req_free(&r);

    bad(G, "{\"prompt\":3}", "prompt", "prompt not a string");
    bad(G, "{\"prompt\":\"x\",\"raw\":\"yes\"}", "raw", "raw not a boolean");
    bad(G, "{\"prompt\":\"x\",\"template\":\"{{ .Prompt }}\"}", "template", "a template of its own");
    bad(G, "{\"prompt\":\"x\",\"context\":[1,2,3]}", "context", "a token context");
    bad(G, "{\"prompt\":\"x\",\"images\":[\"aGk=\"]}", "images", "an image");
    bad(G, "{\"prompt\":\"x\",\"raw\":true,\"system\":\"s\"}", "system", "a system message with raw");
    bad(G, "{\"prompt\":\"x\",\"system\":5}", "system", "system not a string");
    bad(G, "{\"prompt\":\"x\",\"raw\":true,\"options\":{\"min_p\":2}}", "options.min_p", "min_p above 1 (raw)");
}

static void test_embed(void)
{
    llm_api_req r;
    llm_api_err e;
    const llm_api_kind M = LLM_API_OLLAMA_EMBED;
    is_int(parse(M, "{\"model\":\"m:latest\",\"input\":[\"a\",\"b c\"],\"dimensions\":8,\"keep_alive\":\"1m\","
                    "\"options\":{\"num_ctx\":512}}", &r, &e), 0, "an embed body parses (%s)", e.message);
    ok(r.api == M && r.kind == LLM_API_EMBEDDINGS && r.n_prompts == 2 && r.dimensions == 8 && r.truncate == 1 &&
       !strcmp(r.model, "m"), "two inputs, dimensions 8, truncated by default (Ollama's), the model without :latest");
    llm_api_req_free(&r);
    is_int(parse(M, "{\"input\":\"a\",\"truncate\":false}", &r, &e), 0, "one input, truncate false");
    ok(r.truncate == 0 && r.prompt && !strcmp(r.prompt, "a"), "truncate false: an input over the context is a 400");
    llm_api_req_free(&r);
    bad(M, "{\"input\":\"a\",\"truncate\":\"no\"}", "truncate", "truncate not a boolean");
    bad(M, "{\"input\":{}}", "input", "input an object");
    bad(M, "{}", "input", "no input");
    bad(M, "{\"input\":\"a\",\"dimensions\":0}", "dimensions", "dimensions 0");

    const llm_api_kind L = LLM_API_OLLAMA_EMBEDDINGS; /* the older endpoint: one prompt */
    is_int(parse(L, "{\"model\":\"m:latest\",\"prompt\":\"a b\",\"options\":{\"temperature\":1}}", &r, &e), 0,
           "an /api/embeddings body parses (%s)", e.message);
    ok(r.api == L && r.kind == LLM_API_EMBEDDINGS && r.prompt && !strcmp(r.prompt, "a b") && r.truncate == 0 &&
       !strcmp(r.model, "m"), "its prompt is the one input, not truncated");
    llm_api_req_free(&r);
    bad(L, "{\"input\":\"a\"}", "prompt", "no prompt");
    bad(L, "{\"prompt\":[\"a\"]}", "prompt", "a list of prompts");
}

static const ngx_http_llm_call_t CALLS[2] = { { "call_0123", "get_weather", "{\"city\":\"Oslo\"}" },
                                              { "call_4567", "now", "not json" } };

static void test_output(void)
{
    ngx_http_llm_resp_t resp;
    ngx_http_llm_resp_init(&resp, LLM_API_CHAT, "tiny");
    const ngx_http_llm_typed_t *ty = &ngx_http_llm_ol_typed;
    ngx_http_llm_ol_t ol;
    ok(ty->ndjson == 1, "the builder's events are lines of JSON");

    /* chat, streamed: thinking, then text, cut by num_predict */
    is_int(ngx_http_llm_ol_init(&ol, &resp, 0), 0, "builder ready");
    cJSON *ev = cJSON_CreateArray(), *whole = NULL;
    ngx_http_llm_end_t end = { "length", NULL, 12, 7, 4, 2 };
    int rc = ty->begin(&ol, ev);
    rc |= ty->text(&ol, ev, 1, "Let me see.", 11, NULL);
    ngx_http_llm_ol_first(&ol);
    rc |= ty->text(&ol, ev, 0, "", 0, cJSON_Parse("{\"content\":[]}"));
    rc |= ty->text(&ol, ev, 0, "Hel", 3, NULL);
    rc |= ty->text(&ol, ev, 0, "lo", 2, NULL);
    rc |= ty->end(&ol, ev, &end, &whole);
    ok(rc == 0 && cJSON_GetArraySize(ev) == 4, "four lines: thinking, two pieces of text, the last (%d)",
       cJSON_GetArraySize(ev));
    same_json(cJSON_GetArrayItem(ev, 0), "{\"model\":\"tiny\",\"message\":{\"role\":\"assistant\",\"content\":\"\","
              "\"thinking\":\"Let me see.\"},\"done\":false}", "a thinking line");
    same_json(cJSON_GetArrayItem(ev, 1), "{\"model\":\"tiny\",\"message\":{\"role\":\"assistant\",\"content\":\"Hel\"},"
              "\"done\":false}", "a text line");
    same_json(cJSON_GetArrayItem(ev, 3), "{\"model\":\"tiny\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},"
              "\"done\":true,\"done_reason\":\"length\",\"load_duration\":0,\"prompt_eval_count\":12,\"eval_count\":7}",
              "the last line: done, length, the counts");
    same_json(whole, "{\"model\":\"tiny\",\"message\":{\"role\":\"assistant\",\"content\":\"Hello\",\"thinking\":"
              "\"Let me see.\"},\"done\":true,\"done_reason\":\"length\",\"load_duration\":0,\"prompt_eval_count\":12,"
              "\"eval_count\":7}", "the whole answer");
    const cJSON *at = cJSON_GetObjectItem(cJSON_GetArrayItem(ev, 0), "created_at");
    const cJSON *td = cJSON_GetObjectItem(whole, "total_duration"), *pd = cJSON_GetObjectItem(whole, "prompt_eval_duration");
    const cJSON *ed = cJSON_GetObjectItem(whole, "eval_duration");
    ok(cJSON_IsString(at) && strlen(at->valuestring) == 30 && at->valuestring[4] == '-' && at->valuestring[10] == 'T' &&
       at->valuestring[29] == 'Z', "created_at in RFC 3339 with nanoseconds: %s", at ? at->valuestring : "(none)");
    ok(cJSON_IsNumber(td) && cJSON_IsNumber(pd) && cJSON_IsNumber(ed) && pd->valuedouble >= 0 &&
       ed->valuedouble >= 0 && td->valuedouble >= pd->valuedouble + ed->valuedouble - 1e3,
       "durations in ns: the prompt's and the output's within the total");
    cJSON_Delete(whole);
    cJSON_Delete(ev);
    ngx_http_llm_ol_free(&ol);

    /* chat: text then tool calls (arguments as objects; {} when they are not one), done_reason stop */
    ngx_http_llm_ol_init(&ol, &resp, 0);
    ev = cJSON_CreateArray();
    end.finish = "tool_calls";
    rc = ty->text(&ol, ev, 0, "Checking.", 9, NULL);
    rc |= ty->calls(&ol, ev, CALLS, 2);
    rc |= ty->end(&ol, ev, &end, &whole);
    same_json(cJSON_GetArrayItem(ev, 1), "{\"model\":\"tiny\",\"message\":{\"role\":\"assistant\",\"content\":\"\","
              "\"tool_calls\":[{\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}},{\"function\":"
              "{\"name\":\"now\",\"arguments\":{}}}]},\"done\":false}", "the calls' line");
    same_json(whole, "{\"model\":\"tiny\",\"message\":{\"role\":\"assistant\",\"content\":\"Checking.\",\"tool_calls\":"
              "[{\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}},{\"function\":{\"name\":\"now\","
              "\"arguments\":{}}}]},\"done\":true,\"done_reason\":\"stop\",\"load_duration\":0,\"prompt_eval_count\":12,"
              "\"eval_count\":7}", "the whole answer with its calls: done_reason stop");
    ok(rc == 0, "no failure");
    cJSON_Delete(whole);
    cJSON_Delete(ev);
    ngx_http_llm_ol_free(&ol);

    /* generate, not streamed (no lines asked for): response, a stop string's end */
    ngx_http_llm_ol_init(&ol, &resp, 1);
    end.finish = "stop";
    end.stop_seq = "END";
    rc = ty->text(&ol, NULL, 0, "Because.", 8, NULL);
    rc |= ty->end(&ol, NULL, &end, &whole);
    same_json(whole, "{\"model\":\"tiny\",\"response\":\"Because.\",\"done\":true,\"done_reason\":\"stop\","
              "\"load_duration\":0,\"prompt_eval_count\":12,\"eval_count\":7}", "generate's whole answer");
    ok(rc == 0, "no failure");
    cJSON_Delete(whole);
    ngx_http_llm_ol_free(&ol);

    ev = cJSON_CreateArray();
    rc = ty->error(&ol, ev, "timeout", "server_error", "the request timed out");
    same_json(cJSON_GetArrayItem(ev, 0), "{\"error\":\"the request timed out\"}", "an error line mid-stream");
    cJSON_Delete(ev);
    whole = ngx_http_llm_ol_load("tiny");
    same_json(whole, "{\"model\":\"tiny\",\"response\":\"\",\"done\":true,\"done_reason\":\"load\"}", "the load answer");
    cJSON_Delete(whole);

    llm_api_err e;
    llm_api_seterr(&e, 404, "model", "model_not_found", "model 'x' not found");
    char *s = llm_ollama_error_json(&e);
    ok(s && !strcmp(s, "{\"error\":\"model 'x' not found\"}"), "Ollama's error object: %s", s);
    cJSON_free(s);
}

static llm_api_kind ollama_kind(int k, int seed) { (void)k; return seed ? LLM_API_OLLAMA_GENERATE : LLM_API_OLLAMA_CHAT; }

/* Mutations of whole bodies (api_mutate.h). */
static void test_mutations(void)
{
    static const char *const seeds[] = {
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":\"w\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"a\":[1]}}}]},"
        "{\"role\":\"tool\",\"content\":\"ok\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
        "\"parameters\":{\"type\":\"object\"}}}],\"options\":{\"num_predict\":9,\"stop\":[\"x\"],\"temperature\":0.1},"
        "\"format\":\"json\",\"stream\":false,\"think\":true}",
        "{\"model\":\"m\",\"prompt\":\"p\",\"system\":\"s\",\"raw\":false,\"format\":{\"type\":\"object\"},"
        "\"options\":{\"seed\":3,\"top_k\":2},\"stream\":true}",
    };
    ok(api_mutate(seeds, 2, 3000, 0x0113a4a1u, ollama_kind, LLM_CHAT_CHATML),
       "3000 mutated bodies: each parsed or refused with a 400");
}

int main(void)
{
    test_chat();
    test_generate();
    test_embed();
    test_output();
    test_mutations();
    return done_testing();
}
