/* The Responses API (POST /v1/responses): bodies turned into the chat bodies they mean
 * (ngx_module/llm_responses.c) and parsed through llm_api.c, every refusal with the field it names; the
 * output builder (ngx_module/ngx_http_llm_responses_out.c): the whole response object and the stream's
 * events, their order and numbering, for text, reasoning, logprobs and tool calls. */
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
#include "../ngx_module/ngx_http_llm_responses_out.c"
#include "api_mutate.h"

static int parse(const char *body, llm_api_req *r, llm_api_err *e)
{
    memset(e, 0, sizeof *e);
    return llm_api_parse_chat(LLM_API_RESPONSES, body, strlen(body), LLM_CHAT_CHATML, r, e);
}

static void bad(const char *body, const char *param, const char *what)
{
    llm_api_req r;
    llm_api_err e;
    int rc = parse(body, &r, &e);
    ok(rc == -1 && e.status == 400 && !strcmp(e.param, param), "%s -> 400 param '%s' (got %d '%s': %s)", what,
       param, e.status, e.param, e.message);
    llm_api_req_free(&r);
}

/* The types of the events in ev, joined by spaces. */
static void types(const cJSON *ev, char *out, size_t cap)
{
    out[0] = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, ev) {
        const char *t = cJSON_GetObjectItem(o, "type")->valuestring;
        size_t l = strlen(out);
        snprintf(out + l, cap - l, "%s%s", l ? " " : "", t + (strncmp(t, "response.", 9) ? 0 : 9));
    }
}

/* Every event numbered 0, 1, 2, ... in order. */
static int numbered(const cJSON *ev)
{
    int i = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, ev) {
        const cJSON *n = cJSON_GetObjectItem(o, "sequence_number");
        if (!cJSON_IsNumber(n) || n->valueint != i++) return 0;
    }
    return 1;
}

static char *print_at(const cJSON *o, const char *path0, const char *path1)
{
    const cJSON *v = cJSON_GetObjectItem(o, path0);
    if (path1) v = cJSON_GetObjectItem(v, path1);
    return v ? cJSON_PrintUnformatted(v) : strdup("(none)");
}

static void test_requests(void)
{
    llm_api_req r;
    llm_api_err e;

    is_int(parse("{\"input\":\"Hi\"}", &r, &e), 0, "a string input parses");
    ok(r.api == LLM_API_RESPONSES && r.kind == LLM_API_CHAT && r.n_msgs == 1 && !strcmp(r.msgs[0].role, "user") &&
       !strcmp(r.msgs[0].content, "Hi") && r.n == 1 && r.max_tokens == 0, "it is one user message (kind chat, n 1)");
    ok(r.body != NULL && cJSON_IsString(cJSON_GetObjectItem(r.body, "input")), "the Responses body is kept for the echo");
    llm_api_req_free(&r);
    is_int(parse("{\"input\":\"Hi\",\"prompt_cache_key\":\"team\"}", &r, &e), 0, "with prompt_cache_key");
    ok(r.cache_key != NULL && !strcmp(r.cache_key, "team"), "... which the request carries");
    llm_api_req_free(&r);

    const char *conv =
        "{\"model\":\"m\",\"instructions\":\"Be brief.\",\"max_output_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,"
        "\"seed\":3,\"store\":false,\"metadata\":{\"a\":\"b\"},\"include\":[\"reasoning.encrypted_content\"],"
        "\"input\":[{\"role\":\"developer\",\"content\":\"Use tools.\"},"
        "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"Weather \"},"
        "{\"type\":\"input_text\",\"text\":\"in Oslo?\"}]},"
        "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Checking.\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"},"
        "{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"now\",\"arguments\":\"{}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"rain\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":[{\"type\":\"input_text\",\"text\":\"noon\"}]},"
        "{\"role\":\"user\",\"content\":\"Thanks\"}],"
        "\"tools\":[{\"type\":\"function\",\"name\":\"get_weather\",\"description\":\"d\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"city\":{\"type\":\"string\"}}}},{\"type\":\"function\",\"name\":\"now\"}],"
        "\"tool_choice\":{\"type\":\"function\",\"name\":\"now\"}}";
    is_int(parse(conv, &r, &e), 0, "a conversation with calls, their outputs, reasoning and tools parses (%s)", e.message);
    ok(r.n_msgs == 7, "instructions + 6 messages (the reasoning item left out, two calls in one turn): %zu", r.n_msgs);
    static const char *const roles[] = { "system", "system", "user", "assistant", "tool", "tool", "user" };
    static const char *const texts[] = { "Be brief.", "Use tools.", "Weather in Oslo?", "Checking.", "rain", "noon", "Thanks" };
    int same = r.n_msgs == 7;
    for (size_t i = 0; same && i < 7; i++) same = !strcmp(r.msgs[i].role, roles[i]) && !strcmp(r.msgs[i].content, texts[i]);
    ok(same, "roles and texts in order (developer -> system, parts joined)");
    ok(r.msgs[3].n_calls == 2 && !strcmp(r.msgs[3].calls[0].name, "get_weather") && !strcmp(r.msgs[3].calls[1].name, "now"),
       "both function_call items are the assistant turn's calls, beside its text");
    ok(r.max_tokens == 7 && r.temperature == 0.5 && r.top_p == 0.9 && r.has_seed && r.seed == 3 && !r.logprobs,
       "max_output_tokens, temperature, top_p, seed; an unknown include asks for nothing");
    ok(r.tool_mode == LLM_TOOLS_NAMED && r.schema != NULL && strstr(r.schema, "\"now\"") != NULL,
       "flat function tools and a named tool_choice: the answer is held to now's call");
    llm_api_req_free(&r);

    is_int(parse("{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"{}\"},"
                 "{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"1\"}]}", &r, &e), 0,
           "a call with no assistant message before it parses");
    ok(r.n_msgs == 2 && !strcmp(r.msgs[0].role, "assistant") && r.msgs[0].n_calls == 1 && !strcmp(r.msgs[0].content, ""),
       "it is an assistant turn of its own, without text");
    llm_api_req_free(&r);

    is_int(parse("{\"input\":\"Hi\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"x\",\"strict\":true,"
                 "\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}}}",
                 &r, &e), 0, "text.format json_schema parses");
    ok(r.schema != NULL && strstr(r.schema, "\"integer\"") != NULL, "the schema is the response_format's");
    llm_api_req_free(&r);
    is_int(parse("{\"input\":\"Hi\",\"text\":{\"format\":{\"type\":\"json_object\"}}}", &r, &e), 0, "json_object parses");
    ok(r.json && r.schema == NULL, "JSON mode");
    llm_api_req_free(&r);
    is_int(parse("{\"input\":\"Hi\",\"text\":{\"format\":{\"type\":\"text\"},\"verbosity\":\"low\"}}", &r, &e), 0, "text parses");
    ok(!r.json && r.schema == NULL, "plain text");
    llm_api_req_free(&r);

    is_int(parse("{\"input\":\"Hi\",\"include\":[\"message.output_text.logprobs\"],\"top_logprobs\":3}", &r, &e), 0,
           "logprobs through include parse");
    ok(r.logprobs && r.top_logprobs == 3, "logprobs on, 3 alternatives");
    llm_api_req_free(&r);
    is_int(parse("{\"input\":\"Hi\",\"top_logprobs\":2}", &r, &e), 0, "top_logprobs alone parses");
    ok(r.logprobs && r.top_logprobs == 2, "and turns logprobs on");
    llm_api_req_free(&r);

    is_int(parse("{\"input\":\"Hi\",\"reasoning\":{\"effort\":\"none\"}}", &r, &e), 0, "reasoning effort none parses");
    ok(!r.enable_thinking, "it turns thinking off (Qwen 3's switch)");
    llm_api_req_free(&r);
    is_int(parse("{\"input\":\"Hi\",\"reasoning\":{\"effort\":\"high\",\"summary\":\"auto\"}}", &r, &e), 0, "effort high parses");
    ok(r.enable_thinking == 1, "and turns thinking on (EXAONE 4's switch; Qwen 3 thinks anyway)");
    llm_api_req_free(&r);
    is_int(parse("{\"input\":\"Hi\",\"stream\":true,\"truncation\":\"disabled\",\"background\":false,"
                 "\"previous_response_id\":null}", &r, &e), 0, "stream, truncation disabled, background false, null ids");
    ok(r.stream, "streamed");
    llm_api_req_free(&r);

    /* previous_response_id: the stored conversation (the module's) goes after the instructions, before the input */
    {
        cJSON *body = cJSON_Parse("{\"instructions\":\"S\",\"input\":\"C\",\"previous_response_id\":\"resp_1\"}");
        cJSON *past = cJSON_Parse("[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                                  "\"text\":\"A\"}]},{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[]},{\"id\":"
                                  "\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":"
                                  "[{\"type\":\"output_text\",\"text\":\"B\",\"annotations\":[],\"logprobs\":[]}]}]");
        cJSON *chat = llm_responses_to_chat(body, past, &e);
        char *s = chat ? cJSON_PrintUnformatted(cJSON_GetObjectItem(chat, "messages")) : NULL;
        ok(s && !strcmp(s, "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"A\"},{\"role\":"
                          "\"assistant\",\"content\":\"B\"},{\"role\":\"user\",\"content\":\"C\"}]"),
           "stored items (their own output as written back) between the instructions and the input: %s", s ? s : "NULL");
        free(s);
        cJSON_Delete(chat);
        ok(llm_responses_to_chat(body, NULL, &e) == NULL && !strcmp(e.param, "previous_response_id"),
           "without a store previous_response_id is refused");
        cJSON_Delete(body);
        cJSON_Delete(past);
    }

    bad("{}", "input", "no input");
    bad("{\"input\":7}", "input", "a number as input");
    bad("{\"input\":[]}", "input", "an empty input (no messages)");
    bad("{\"input\":[7]}", "input", "an item that is not an object");
    bad("{\"input\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "input", "an unknown role");
    bad("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"x\"}]}]}", "input", "an image");
    bad("{\"input\":[{\"role\":\"user\",\"content\":{\"a\":1}}]}", "input", "content an object");
    bad("{\"input\":[{\"type\":\"item_reference\",\"id\":\"msg_1\"}]}", "input", "an item reference");
    bad("{\"input\":[{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}]}", "input", "a call without call_id");
    bad("{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}", "input", "an output without output");
    bad("{\"input\":[{\"type\":7,\"role\":\"user\",\"content\":\"x\"}]}", "input", "a type that is not a string");
    bad("{\"input\":\"Hi\",\"previous_response_id\":\"resp_1\"}", "previous_response_id", "previous_response_id");
    bad("{\"input\":\"Hi\",\"conversation\":\"conv_1\"}", "conversation", "a conversation");
    bad("{\"input\":\"Hi\",\"prompt\":{\"id\":\"p\"}}", "prompt", "a stored prompt");
    bad("{\"input\":\"Hi\",\"background\":true}", "background", "background");
    bad("{\"input\":\"Hi\",\"truncation\":\"auto\"}", "truncation", "truncation auto");
    bad("{\"input\":\"Hi\",\"n\":2}", "n", "n");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "messages", "a chat body");
    bad("{\"input\":\"Hi\",\"instructions\":5}", "instructions", "instructions a number");
    bad("{\"input\":\"Hi\",\"max_output_tokens\":0}", "max_output_tokens", "max_output_tokens 0 (named as the body names it)");
    bad("{\"input\":\"Hi\",\"max_output_tokens\":\"x\"}", "max_output_tokens", "max_output_tokens a string");
    bad("{\"input\":\"Hi\",\"tools\":[{\"type\":\"web_search\"}]}", "tools", "a hosted tool");
    bad("{\"input\":\"Hi\",\"tools\":{}}", "tools", "tools an object");
    bad("{\"input\":\"Hi\",\"tools\":[{\"type\":\"function\"}]}", "tools", "a function tool without a name");
    bad("{\"input\":\"Hi\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],\"tool_choice\":{\"type\":\"function\","
        "\"name\":\"g\"}}", "tool_choice", "tool_choice naming no tool");
    bad("{\"input\":\"Hi\",\"tool_choice\":{\"type\":\"allowed_tools\"}}", "tool_choice", "allowed_tools");
    bad("{\"input\":\"Hi\",\"text\":{\"format\":{\"type\":\"xml\"}}}", "text.format", "an unknown format");
    bad("{\"input\":\"Hi\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"x\"}}}", "text.format", "a json_schema without schema");
    bad("{\"input\":\"Hi\",\"text\":{\"format\":{\"type\":\"json_schema\",\"schema\":{\"type\":\"object\",\"uniqueItems\":true}}}}",
        "text.format", "a schema keyword the server cannot follow");
    bad("{\"input\":\"Hi\",\"text\":\"x\"}", "text", "text a string");
    bad("{\"input\":\"Hi\",\"include\":\"x\"}", "include", "include a string");
    bad("{\"input\":\"Hi\",\"include\":[1]}", "include", "include with a number");
    bad("{\"input\":\"Hi\",\"reasoning\":\"high\"}", "reasoning", "reasoning a string");
    bad("{\"input\":\"Hi\",\"temperature\":3}", "temperature", "temperature out of range");
    bad("{\"input\":\"Hi\",\"top_logprobs\":21}", "top_logprobs", "top_logprobs out of range");
    bad("{\"input\":\"Hi\",\"model\":1}", "model", "model a number");
    bad("[1]", "", "not an object");
    bad("{\"input\":", "", "malformed JSON");
}

static llm_api_kind responses_kind(int k, int seed) { (void)k; (void)seed; return LLM_API_RESPONSES; }

/* Mutations of whole bodies (api_mutate.h). */
static void test_mutations(void)
{
    static const char *const seeds[] = {
        "{\"instructions\":\"s\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"x\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"{}\"},{\"type\":"
        "\"function_call_output\",\"call_id\":\"c\",\"output\":\"ok\"}],\"tools\":[{\"type\":\"function\",\"name\":"
        "\"f\",\"parameters\":{\"type\":\"object\"}}],\"tool_choice\":{\"type\":\"function\",\"name\":\"f\"}}",
        "{\"input\":\"hi\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"n\",\"schema\":{\"type\":"
        "\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}},\"include\":[\"message.output_text.logprobs\"],"
        "\"top_logprobs\":2,\"reasoning\":{\"effort\":\"none\"},\"max_output_tokens\":9,\"stream\":true}",
    };
    ok(api_mutate(seeds, 2, 3000, 0x9e3779b9u, responses_kind, LLM_CHAT_CHATML),
       "3000 mutated bodies: each parsed or refused with a 400");
}

static const ngx_http_llm_call_t CALLS[2] = { { "call_1", "get_weather", "{\"city\":\"Oslo\"}" },
                                              { "call_2", "now", "{}" } };

static void test_output(void)
{
    ngx_http_llm_resp_t resp;
    ngx_http_llm_resp_init(&resp, LLM_API_CHAT, "tiny");
    snprintf(resp.id, sizeof resp.id, "resp_0123456789abcdef");
    cJSON *req = cJSON_Parse("{\"input\":\"x\",\"instructions\":\"Be brief.\",\"max_output_tokens\":9,"
                             "\"metadata\":{\"k\":\"v\"},\"temperature\":0.2,\"tools\":[{\"type\":\"function\",\"name\":\"now\"}],"
                             "\"reasoning\":{\"effort\":\"low\"}}");
    ngx_http_llm_end_t u = { "length", NULL, 12, 9, 4, 3 }, calls_end = u, stop_end = u;
    calls_end.finish = "tool_calls";
    stop_end.finish = "stop";
    char ty[2048];

    /* streamed: reasoning, then text with logprobs, cut by max_output_tokens */
    ngx_http_llm_rs_t rs;
    is_int(ngx_http_llm_rs_init(&rs, &resp, req, 1, 0), 0, "builder ready");
    cJSON *ev = cJSON_CreateArray();
    int rc = ngx_http_llm_rs_begin(&rs, ev);
    rc |= ngx_http_llm_rs_text(&rs, ev, 1, "I should ", 9, NULL);
    rc |= ngx_http_llm_rs_text(&rs, ev, 1, "answer.", 7, NULL);
    rc |= ngx_http_llm_rs_text(&rs, ev, 0, "", 0, cJSON_Parse("{\"content\":[{\"token\":\"</think>\",\"logprob\":-1}]}"));
    rc |= ngx_http_llm_rs_text(&rs, ev, 0, "Hel", 3, cJSON_Parse("{\"content\":[{\"token\":\"Hel\",\"logprob\":-0.5}]}"));
    rc |= ngx_http_llm_rs_text(&rs, ev, 0, "lo", 2, cJSON_Parse("{\"content\":[{\"token\":\"lo\",\"logprob\":-0.25}]}"));
    cJSON *whole = NULL;
    rc |= ngx_http_llm_rs_end(&rs, ev, &u, &whole);
    is_int(rc, 0, "the stream's events made");
    types(ev, ty, sizeof ty);
    ok(!strcmp(ty, "created in_progress output_item.added content_part.added reasoning_text.delta reasoning_text.delta "
                   "reasoning_text.done content_part.done output_item.done output_item.added content_part.added "
                   "output_text.delta output_text.delta output_text.done content_part.done output_item.done incomplete"),
       "events in the API's order: %s", ty);
    ok(numbered(ev), "sequence_number 0, 1, 2, ... in order");
    const cJSON *created = cJSON_GetArrayItem(ev, 0);
    char *s = print_at(cJSON_GetObjectItem(created, "response"), "status", NULL);
    ok(!strcmp(s, "\"in_progress\""), "created: in progress (%s)", s);
    free(s);
    s = print_at(cJSON_GetArrayItem(ev, 4), "delta", NULL);
    char *s2 = print_at(cJSON_GetArrayItem(ev, 4), "item_id", NULL);
    ok(!strcmp(s, "\"I should \"") && !strcmp(s2, "\"rs_0123456789abcdef_1\""), "reasoning delta %s of item %s", s, s2);
    free(s);
    free(s2);
    s = print_at(cJSON_GetArrayItem(ev, 12), "logprobs", NULL);
    ok(!strcmp(s, "[{\"token\":\"lo\",\"logprob\":-0.25}]"), "a delta carries its token's logprobs: %s", s);
    free(s);
    s = print_at(cJSON_GetArrayItem(ev, 13), "text", NULL);
    ok(!strcmp(s, "\"Hello\""), "output_text.done has the whole text: %s", s);
    free(s);
    s = cJSON_PrintUnformatted(cJSON_GetObjectItem(whole, "output"));
    ok(!strcmp(s, "[{\"id\":\"rs_0123456789abcdef_1\",\"type\":\"reasoning\",\"summary\":[],\"content\":[{\"type\":"
                  "\"reasoning_text\",\"text\":\"I should answer.\"}],\"status\":\"completed\"},{\"id\":"
                  "\"msg_0123456789abcdef_2\",\"type\":\"message\",\"status\":\"incomplete\",\"role\":\"assistant\","
                  "\"content\":[{\"type\":\"output_text\",\"text\":\"Hello\",\"annotations\":[],\"logprobs\":[{\"token\":"
                  "\"Hel\",\"logprob\":-0.5},{\"token\":\"lo\",\"logprob\":-0.25}]}]}]"),
       "output: the reasoning item, then the message (the reasoning token's logprob dropped): %s", s);
    free(s);
    s = cJSON_PrintUnformatted(cJSON_GetObjectItem(whole, "usage"));
    ok(!strcmp(s, "{\"input_tokens\":12,\"input_tokens_details\":{\"cached_tokens\":4},\"output_tokens\":9,"
                  "\"output_tokens_details\":{\"reasoning_tokens\":3},\"total_tokens\":21}"), "usage: %s", s);
    free(s);
    s = print_at(whole, "incomplete_details", NULL);
    s2 = print_at(whole, "status", NULL);
    ok(!strcmp(s, "{\"reason\":\"max_output_tokens\"}") && !strcmp(s2, "\"incomplete\""), "incomplete: %s %s", s2, s);
    free(s);
    free(s2);
    s = print_at(whole, "instructions", NULL);
    s2 = print_at(whole, "reasoning", NULL);
    char *s3 = print_at(whole, "metadata", NULL), *s4 = print_at(whole, "tools", NULL);
    ok(!strcmp(s, "\"Be brief.\"") && !strcmp(s2, "{\"effort\":\"low\",\"summary\":null}") &&
       !strcmp(s3, "{\"k\":\"v\"}") && !strcmp(s4, "[{\"type\":\"function\",\"name\":\"now\"}]"),
       "the request's fields echoed: %s %s %s %s", s, s2, s3, s4);
    free(s); free(s2); free(s3); free(s4);
    s = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetArrayItem(ev, 16), "response"));
    s2 = cJSON_PrintUnformatted(whole);
    ok(!strcmp(s, s2), "the last event carries the whole response");
    free(s);
    free(s2);
    cJSON_Delete(ev);

    /* the same answer without events: the same response object */
    ngx_http_llm_rs_t one;
    ngx_http_llm_rs_init(&one, &resp, req, 1, 0);
    cJSON *lp = cJSON_Parse("{\"content\":[{\"token\":\"Hel\",\"logprob\":-0.5},{\"token\":\"lo\",\"logprob\":-0.25}]}");
    cJSON *again = NULL;
    rc = ngx_http_llm_rs_text(&one, NULL, 1, "I should answer.", 16, NULL);
    rc |= ngx_http_llm_rs_text(&one, NULL, 0, "Hello", 5, lp);
    rc |= ngx_http_llm_rs_end(&one, NULL, &u, &again);
    s = cJSON_PrintUnformatted(whole);
    s2 = again ? cJSON_PrintUnformatted(again) : strdup("");
    ok(rc == 0 && !strcmp(s, s2), "made whole (no events) it is the streamed one's response");
    free(s);
    free(s2);
    cJSON_Delete(again);
    cJSON_Delete(whole);
    ngx_http_llm_rs_free(&one);
    ngx_http_llm_rs_free(&rs);

    /* text, then tool calls */
    ngx_http_llm_rs_init(&rs, &resp, NULL, 0, 0);
    ev = cJSON_CreateArray();
    rc = ngx_http_llm_rs_begin(&rs, ev);
    rc |= ngx_http_llm_rs_text(&rs, ev, 0, "Checking.", 9, NULL);
    rc |= ngx_http_llm_rs_calls(&rs, ev, CALLS, 2);
    rc |= ngx_http_llm_rs_end(&rs, ev, &calls_end, &whole);
    types(ev, ty, sizeof ty);
    ok(rc == 0 && !strcmp(ty, "created in_progress output_item.added content_part.added output_text.delta output_text.done "
                              "content_part.done output_item.done output_item.added function_call_arguments.delta "
                              "function_call_arguments.done output_item.done output_item.added "
                              "function_call_arguments.delta function_call_arguments.done output_item.done completed"),
       "calls: each an item with its arguments: %s", ty);
    ok(numbered(ev), "numbered");
    s = cJSON_PrintUnformatted(cJSON_GetArrayItem(cJSON_GetObjectItem(whole, "output"), 1));
    ok(!strcmp(s, "{\"id\":\"fc_0123456789abcdef_2\",\"type\":\"function_call\",\"status\":\"completed\",\"call_id\":"
                  "\"call_1\",\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}"),
       "a function_call item: %s", s);
    free(s);
    s = print_at(cJSON_GetArrayItem(ev, 9), "delta", NULL);
    ok(!strcmp(s, "\"{\\\"city\\\":\\\"Oslo\\\"}\""), "the arguments in one delta: %s", s);
    free(s);
    s = print_at(whole, "status", NULL);
    s2 = print_at(whole, "tools", NULL);
    s3 = print_at(whole, "temperature", NULL);
    s4 = print_at(whole, "text", NULL);
    ok(!strcmp(s, "\"completed\"") && !strcmp(s2, "[]") && !strcmp(s3, "1") && !strcmp(s4, "{\"format\":{\"type\":\"text\"}}"),
       "completed; defaults where the request said nothing: %s %s %s %s", s, s2, s3, s4);
    free(s); free(s2); free(s3); free(s4);
    s = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(whole, "output"), 0),
                                                                       "content")->child, "logprobs"));
    ok(!strcmp(s, "[]"), "no logprobs asked: an empty list");
    free(s);
    cJSON_Delete(whole);
    cJSON_Delete(ev);
    ngx_http_llm_rs_free(&rs);

    /* an empty answer still has its message; a failure mid-stream */
    ngx_http_llm_rs_init(&rs, &resp, NULL, 0, 0);
    ev = cJSON_CreateArray();
    rc = ngx_http_llm_rs_end(&rs, ev, &stop_end, NULL);
    types(ev, ty, sizeof ty);
    ok(rc == 0 && !strcmp(ty, "output_item.added content_part.added output_text.done content_part.done output_item.done completed"),
       "an empty answer is an empty message: %s", ty);
    cJSON_Delete(ev);
    ngx_http_llm_rs_free(&rs);
    ngx_http_llm_rs_init(&rs, &resp, NULL, 0, 0);
    ev = cJSON_CreateArray();
    rc = ngx_http_llm_rs_begin(&rs, ev);
    rc |= ngx_http_llm_rs_text(&rs, ev, 0, "Hi", 2, NULL);
    rc |= ngx_http_llm_rs_error(&rs, ev, "timeout", "the request timed out");
    types(ev, ty, sizeof ty);
    ok(rc == 0 && !strcmp(ty, "created in_progress output_item.added content_part.added output_text.delta error failed"),
       "a failure: error, then response.failed: %s", ty);
    s = print_at(cJSON_GetObjectItem(cJSON_GetArrayItem(ev, 6), "response"), "error", NULL);
    ok(!strcmp(s, "{\"code\":\"timeout\",\"message\":\"the request timed out\"}"), "failed carries the error: %s", s);
    free(s);
    cJSON_Delete(ev);
    ngx_http_llm_rs_free(&rs);

    /* invalid UTF-8 in a delta is replaced, never sent raw */
    ngx_http_llm_rs_init(&rs, &resp, NULL, 0, 0);
    ev = cJSON_CreateArray();
    ngx_http_llm_rs_text(&rs, ev, 0, "a\xff", 2, NULL);
    s = print_at(cJSON_GetArrayItem(ev, 2), "delta", NULL);
    ok(!strcmp(s, "\"a\xef\xbf\xbd\""), "invalid bytes as U+FFFD: %s", s);
    free(s);
    cJSON_Delete(ev);
    ngx_http_llm_rs_free(&rs);
    cJSON_Delete(req);
}

int main(void)
{
    test_requests();
    test_output();
    test_mutations();
    return done_testing();
}
