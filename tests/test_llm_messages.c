/* Anthropic's Messages API (POST /v1/messages): bodies turned into the chat bodies they mean
 * (ngx_module/llm_messages.c) and parsed through llm_api.c, every refusal with the field it names; the output
 * builder (ngx_module/ngx_http_llm_messages_out.c): the whole message and the stream's events, for text,
 * thinking, tool use and each stop reason; the error object. */
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
#include "../ngx_module/ngx_http_llm_messages_out.c"
#include "api_mutate.h"

static int parse(const char *body, llm_api_req *r, llm_api_err *e)
{
    memset(e, 0, sizeof *e);
    return llm_api_parse_chat(LLM_API_MESSAGES, body, strlen(body), LLM_CHAT_CHATML, r, e);
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

static void types(const cJSON *ev, char *out, size_t cap)
{
    out[0] = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, ev) {
        size_t l = strlen(out);
        snprintf(out + l, cap - l, "%s%s", l ? " " : "", cJSON_GetObjectItem(o, "type")->valuestring);
    }
}

static int same_json(const cJSON *v, const char *want, const char *what)
{
    char *s = v ? cJSON_PrintUnformatted(v) : strdup("(none)");
    int same = !strcmp(s, want);
    ok(same, "%s: %s", what, s);
    free(s);
    return same;
}

static void test_requests(void)
{
    llm_api_req r;
    llm_api_err e;

    is_int(parse("{\"model\":\"m\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &r, &e), 0,
           "a minimal body parses");
    ok(r.api == LLM_API_MESSAGES && r.kind == LLM_API_CHAT && r.n_msgs == 1 && !strcmp(r.msgs[0].role, "user") &&
       !strcmp(r.msgs[0].content, "Hi") && r.max_tokens == 9 && !strcmp(r.model, "m"), "one user message, max_tokens 9");
    llm_api_req_free(&r);

    const char *conv =
        "{\"system\":[{\"type\":\"text\",\"text\":\"Be \"},{\"type\":\"text\",\"text\":\"brief.\"}],\"max_tokens\":50,"
        "\"temperature\":0.5,\"top_k\":5,\"stop_sequences\":[\"END\",\"##\"],\"metadata\":{\"user_id\":\"u1\"},"
        "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Weather \"},{\"type\":\"text\","
        "\"text\":\"in Oslo?\"}]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"x\"},"
        "{\"type\":\"text\",\"text\":\"Checking.\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\","
        "\"input\":{\"city\":\"Oslo\"}},{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"now\",\"input\":{}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":\"rain\"},"
        "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_2\",\"content\":[{\"type\":\"text\",\"text\":\"no clock\"}],"
        "\"is_error\":true},{\"type\":\"text\",\"text\":\"Thanks\"}]}],"
        "\"tools\":[{\"name\":\"get_weather\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\",\"properties\":"
        "{\"city\":{\"type\":\"string\"}}}},{\"name\":\"now\",\"input_schema\":{\"type\":\"object\"}}],"
        "\"tool_choice\":{\"type\":\"tool\",\"name\":\"now\",\"disable_parallel_tool_use\":true}}";
    is_int(parse(conv, &r, &e), 0, "a conversation with thinking, tool use and results parses (%s)", e.message);
    static const char *const roles[] = { "system", "user", "assistant", "tool", "tool", "user" };
    static const char *const texts[] = { "Be brief.", "Weather in Oslo?", "Checking.", "rain", "Error: no clock", "Thanks" };
    int same = r.n_msgs == 6;
    for (size_t i = 0; same && i < 6; i++) same = !strcmp(r.msgs[i].role, roles[i]) && !strcmp(r.msgs[i].content, texts[i]);
    ok(same, "system, user, assistant (thinking left out), two tool results (an error says so), user: %zu messages", r.n_msgs);
    ok(r.msgs[2].n_calls == 2 && !strcmp(r.msgs[2].calls[0].name, "get_weather") && !strcmp(r.msgs[2].calls[1].name, "now"),
       "the tool_use blocks are the assistant turn's calls");
    ok(r.n_stop == 2 && !strcmp(r.stop[0], "END") && r.temperature == 0.5 && r.top_k == 5 && r.user && !strcmp(r.user, "u1"),
       "stop_sequences, temperature, top_k, metadata.user_id");
    ok(r.tool_mode == LLM_TOOLS_NAMED && !r.parallel_calls && strstr(r.schema, "\"now\"") != NULL,
       "tool_choice tool: held to now's call; disable_parallel_tool_use");
    llm_api_req_free(&r);

    is_int(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                 "\"text\":\"b\"}]}],\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}],\"tool_choice\":"
                 "{\"type\":\"any\"}}", &r, &e), 0, "two user messages in a row, tool_choice any");
    ok(r.n_msgs == 2 && !strcmp(r.msgs[1].content, "b") && r.tool_mode == LLM_TOOLS_REQUIRED, "each its own message; any = required");
    llm_api_req_free(&r);
    is_int(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"thinking\":{\"type\":\"disabled\"}}", &r, &e), 0,
           "thinking disabled");
    ok(!r.enable_thinking, "turns Qwen 3's thinking off");
    llm_api_req_free(&r);
    is_int(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"
                 "1024},\"tool_choice\":{\"type\":\"none\"},\"tools\":[{\"type\":\"custom\",\"name\":\"f\",\"input_schema\":{}}]}",
                 &r, &e), 0, "thinking enabled, tool_choice none, a custom tool");
    ok(r.enable_thinking == 1 && r.tool_mode == LLM_TOOLS_OFF, "thinking on (EXAONE 4's switch too); none leaves the tools out");
    llm_api_req_free(&r);

    bad("{}", "messages", "no messages");
    bad("{\"messages\":{}}", "messages", "messages an object");
    bad("{\"messages\":[]}", "messages", "no messages in the list");
    bad("{\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}", "messages", "a system role in messages");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":7}]}", "messages", "content a number");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{}}]}]}", "messages", "an image");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"x\"}]}]}", "messages", "a block without type");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":{}}]}]}",
        "messages", "tool_use in a user message");
    bad("{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"a\"}]}]}",
        "messages", "tool_result in an assistant message");
    bad("{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":\"x\"}]}]}",
        "messages", "tool_use input not an object");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\"}]}]}", "messages", "tool_result without id");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"a\",\"content\":"
        "[{\"type\":\"image\"}]}]}]}", "messages", "an image in a tool result");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"system\":5}", "system", "system a number");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"system\":[{\"type\":\"image\"}]}", "system", "system an image");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"w\"}]}",
        "tools", "a server tool");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":{}}", "tools", "tools an object");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"input_schema\":{}}]}", "tools", "a tool without name");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":{\"type\":\"tool\"}}", "tool_choice",
        "tool_choice tool without name");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"auto\"}", "tool_choice", "tool_choice a string");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"thinking\":{\"type\":\"maybe\"}}", "thinking", "thinking maybe");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"metadata\":{\"user_id\":3}}", "metadata", "user_id a number");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"mcp_servers\":[{\"url\":\"u\"}]}", "mcp_servers", "MCP servers");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop_sequences\":5}", "stop_sequences",
        "stop_sequences a number: named as the body names it");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop_sequences\":[1]}", "stop_sequences", "a number in stop_sequences");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", "max_tokens", "max_tokens 0");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":-1}", "temperature", "temperature -1");
    bad("{\"messages\":", "", "malformed JSON");
}

static const ngx_http_llm_call_t CALLS[2] = { { "call_0123", "get_weather", "{\"city\":\"Oslo\"}" },
                                              { "call_4567", "now", "{}" } };

static void test_output(void)
{
    ngx_http_llm_resp_t resp;
    ngx_http_llm_resp_init(&resp, LLM_API_CHAT, "tiny");
    snprintf(resp.id, sizeof resp.id, "msg_0123456789abcdef");
    const ngx_http_llm_typed_t *ty = &ngx_http_llm_ms_typed;
    ngx_http_llm_ms_t ms;
    char ty_s[2048];

    /* thinking, then text, cut by max_tokens */
    is_int(ngx_http_llm_ms_init(&ms, &resp, 12), 0, "builder ready");
    cJSON *ev = cJSON_CreateArray(), *whole = NULL;
    ngx_http_llm_end_t end = { "length", NULL, 12, 7, 4, 2 };
    int rc = ty->begin(&ms, ev);
    rc |= ty->text(&ms, ev, 1, "Let me ", 7, NULL);
    rc |= ty->text(&ms, ev, 1, "see.", 4, NULL);
    rc |= ty->text(&ms, ev, 0, "", 0, cJSON_Parse("{\"content\":[]}"));
    rc |= ty->text(&ms, ev, 0, "Hel", 3, NULL);
    rc |= ty->text(&ms, ev, 0, "lo", 2, NULL);
    rc |= ty->end(&ms, ev, &end, &whole);
    types(ev, ty_s, sizeof ty_s);
    ok(rc == 0 && !strcmp(ty_s, "message_start content_block_start content_block_delta content_block_delta "
                                "content_block_stop content_block_start content_block_delta content_block_delta "
                                "content_block_stop message_delta message_stop"), "events: %s", ty_s);
    same_json(cJSON_GetArrayItem(ev, 0), "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_0123456789abcdef\",\"type\":"
              "\"message\",\"role\":\"assistant\",\"model\":\"tiny\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"
              "\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":0}}}",
              "message_start");
    same_json(cJSON_GetArrayItem(ev, 1), "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\","
              "\"thinking\":\"\",\"signature\":\"\"}}", "a thinking block opens");
    same_json(cJSON_GetArrayItem(ev, 2), "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\","
              "\"thinking\":\"Let me \"}}", "thinking_delta");
    same_json(cJSON_GetArrayItem(ev, 6), "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\","
              "\"text\":\"Hel\"}}", "text_delta of block 1");
    same_json(cJSON_GetArrayItem(ev, 9), "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":"
              "null},\"usage\":{\"output_tokens\":7}}", "message_delta: max_tokens");
    same_json(whole, "{\"id\":\"msg_0123456789abcdef\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"tiny\",\"content\":"
              "[{\"type\":\"thinking\",\"thinking\":\"Let me see.\",\"signature\":\"\"},{\"type\":\"text\",\"text\":\"Hello\"}],"
              "\"stop_reason\":\"max_tokens\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":8,\"cache_creation_input_tokens\":0,"
              "\"cache_read_input_tokens\":4,\"output_tokens\":7}}", "the whole message (input_tokens without the cached ones)");
    cJSON_Delete(whole);
    cJSON_Delete(ev);
    ngx_http_llm_ms_free(&ms);

    /* text then tool use: one tool_use block each, input as an object, its JSON in one delta */
    ngx_http_llm_ms_init(&ms, &resp, 3);
    ev = cJSON_CreateArray();
    end.finish = "tool_calls";
    rc = ty->begin(&ms, ev);
    rc |= ty->text(&ms, ev, 0, "Checking.", 9, NULL);
    rc |= ty->calls(&ms, ev, CALLS, 2);
    rc |= ty->end(&ms, ev, &end, &whole);
    types(ev, ty_s, sizeof ty_s);
    ok(rc == 0 && !strcmp(ty_s, "message_start content_block_start content_block_delta content_block_stop content_block_start "
                                "content_block_delta content_block_stop content_block_start content_block_delta "
                                "content_block_stop message_delta message_stop"), "tool use events: %s", ty_s);
    same_json(cJSON_GetArrayItem(ev, 4), "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\","
              "\"id\":\"toolu_0123\",\"name\":\"get_weather\",\"input\":{}}}", "a tool_use block opens with empty input");
    same_json(cJSON_GetArrayItem(ev, 5), "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
              "\"partial_json\":\"{\\\"city\\\":\\\"Oslo\\\"}\"}}", "its input as one input_json_delta");
    same_json(cJSON_GetObjectItem(whole, "content"), "[{\"type\":\"text\",\"text\":\"Checking.\"},{\"type\":\"tool_use\",\"id\":"
              "\"toolu_0123\",\"name\":\"get_weather\",\"input\":{\"city\":\"Oslo\"}},{\"type\":\"tool_use\",\"id\":\"toolu_4567\","
              "\"name\":\"now\",\"input\":{}}]", "content: text, then the calls");
    same_json(cJSON_GetObjectItem(whole, "stop_reason"), "\"tool_use\"", "stop_reason tool_use");
    cJSON_Delete(whole);
    cJSON_Delete(ev);
    ngx_http_llm_ms_free(&ms);

    /* a stop sequence; an empty answer; no events asked for */
    ngx_http_llm_ms_init(&ms, &resp, 3);
    ngx_http_llm_end_t stop = { "stop", "END", 3, 1, 0, 0 };
    rc = ty->end(&ms, NULL, &stop, &whole);
    ok(rc == 0, "an empty answer");
    same_json(cJSON_GetObjectItem(whole, "content"), "[{\"type\":\"text\",\"text\":\"\"}]", "is one empty text block");
    same_json(cJSON_GetObjectItem(whole, "stop_sequence"), "\"END\"", "stop_sequence");
    same_json(cJSON_GetObjectItem(whole, "stop_reason"), "\"stop_sequence\"", "stop_reason stop_sequence");
    cJSON_Delete(whole);
    ngx_http_llm_ms_free(&ms);
    ngx_http_llm_ms_init(&ms, &resp, 3);
    stop.stop_seq = NULL;
    ty->end(&ms, NULL, &stop, &whole);
    same_json(cJSON_GetObjectItem(whole, "stop_reason"), "\"end_turn\"", "an end-of-turn token: end_turn");
    cJSON_Delete(whole);
    ngx_http_llm_ms_free(&ms);

    /* errors */
    ngx_http_llm_ms_init(&ms, &resp, 3);
    ev = cJSON_CreateArray();
    ty->error(&ms, ev, "timeout", "timeout_error", "the request timed out");
    same_json(cJSON_GetArrayItem(ev, 0), "{\"type\":\"error\",\"error\":{\"type\":\"timeout_error\",\"message\":"
              "\"the request timed out\"}}", "a failure mid-stream: an error event");
    cJSON_Delete(ev);
    ngx_http_llm_ms_free(&ms);
    llm_api_err e;
    llm_api_seterr(&e, 400, "messages", "invalid_value", "bad");
    char *s = ngx_http_llm_ms_error_json(&e);
    ok(!strcmp(s, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}"), "error body: %s", s);
    cJSON_free(s);
    llm_api_seterr(&e, 500, NULL, NULL, "boom");
    s = ngx_http_llm_ms_error_json(&e);
    ok(strstr(s, "\"api_error\"") != NULL, "a 500 is an api_error: %s", s);
    cJSON_free(s);
    llm_api_seterr(&e, 503, NULL, NULL, "busy");
    s = ngx_http_llm_ms_error_json(&e);
    ok(strstr(s, "\"overloaded_error\"") != NULL, "a 503 is an overloaded_error: %s", s);
    cJSON_free(s);
}

static llm_api_kind messages_kind(int k, int seed) { (void)k; (void)seed; return LLM_API_MESSAGES; }

/* Mutations of whole bodies (api_mutate.h). */
static void test_mutations(void)
{
    static const char *const seed =
        "{\"system\":\"s\",\"max_tokens\":9,\"stop_sequences\":[\"x\"],\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
        "\"text\",\"text\":\"w\"}]},{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\","
        "\"input\":{\"a\":[1]}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"content\":"
        "\"ok\",\"is_error\":false}]}],\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}],\"tool_choice\":"
        "{\"type\":\"any\"},\"thinking\":{\"type\":\"disabled\"}}";
    ok(api_mutate(&seed, 1, 3000, 0x51ed2701u, messages_kind, LLM_CHAT_CHATML),
       "3000 mutated bodies: each parsed or refused with a 400");
}

int main(void)
{
    test_requests();
    test_output();
    test_mutations();
    return done_testing();
}
