/* The NGINX module's request parser (ngx_module/llm_api.c, plain C + cJSON):
 * defaults, every parameter, every 400 path, error JSON shape. */
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
#include "api_mutate.h"
#include "grammar.h"

static int parse(llm_api_kind k, const char *body, llm_api_req *r, llm_api_err *e)
{
    return llm_api_parse(k, body, strlen(body), r, e);
}

/* Expects a 400 naming param; frees the request. */
static void bad(llm_api_kind k, const char *body, const char *param, const char *what)
{
    llm_api_req r;
    llm_api_err e;
    memset(&e, 0, sizeof e);
    int rc = parse(k, body, &r, &e);
    ok(rc == -1 && e.status == 400 && !strcmp(e.param, param), "%s -> 400 param '%s' (got %d '%s': %s)",
       what, param, e.status, e.param, e.message);
    llm_api_req_free(&r);
}

/* The kind of mutated body k (api_mutate.h): its seed's. */
static llm_api_kind api_kind(int k, int seed)
{
    (void)k;
    return seed == 8 ? LLM_API_RERANK : seed == 5 || seed == 6 ? LLM_API_EMBEDDINGS
         : seed >= 2 && seed <= 4 ? LLM_API_CHAT : LLM_API_COMPLETIONS;
}

int main(void)
{
    llm_api_req r;
    llm_api_err e;

    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"hi\"}", &r, &e), 0, "minimal completion parses");
    ok(!strcmp(r.prompt, "hi") && r.prompt_len == 2, "prompt text");
    ok(r.temperature == 1.0 && r.top_p == 1.0 && r.top_k == 0 && r.min_p == 0 && r.n == 1 &&
       r.repetition_penalty == 1.0 && r.max_tokens == 0 && !r.stream && !r.logprobs && !r.has_seed,
       "defaults");
    llm_api_req_free(&r);

    is_int(parse(LLM_API_COMPLETIONS,
                 "{\"prompt\":[1,2,3],\"max_tokens\":7,\"temperature\":0,\"top_p\":0.5,\"top_k\":-1,\"min_p\":0.1,"
                 "\"presence_penalty\":-1,\"frequency_penalty\":1.5,\"repetition_penalty\":1.2,\"seed\":42,\"n\":3,"
                 "\"stop\":[\"a\",\"\",\"bc\"],\"logprobs\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                 "\"user\":\"u\",\"model\":\"m\",\"prompt_cache_key\":\"k1\",\"whatever\":{\"x\":[1]}}", &r, &e), 0,
           "full completion parses");
    ok(r.n_ids == 3 && r.ids[2] == 3 && r.prompt == NULL, "token-id prompt");
    ok(r.max_tokens == 7 && r.temperature == 0 && r.top_p == 0.5 && r.top_k == 0 && r.min_p > 0.09 &&
       r.presence_penalty == -1 && r.frequency_penalty == 1.5 && r.repetition_penalty > 1.19, "sampling fields");
    ok(r.has_seed && r.seed == 42 && r.n == 3, "seed and n");
    ok(r.n_stop == 2 && !strcmp(r.stop[0], "a") && !strcmp(r.stop[1], "bc") && r.stop_len[1] == 2,
       "stop list, empty string dropped");
    ok(r.logprobs && r.top_logprobs == 4, "completions logprobs = alternatives");
    ok(r.stream && r.include_usage && !strcmp(r.user, "u") && !strcmp(r.model, "m"), "stream, usage, user, model");
    ok(r.cache_key != NULL && !strcmp(r.cache_key, "k1"), "prompt_cache_key");
    llm_api_req_free(&r);

    is_int(parse(LLM_API_CHAT,
                 "{\"messages\":[{\"role\":\"developer\",\"content\":\"s\"},"
                 "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
                 "{\"role\":\"assistant\",\"content\":null}],"
                 "\"max_completion_tokens\":5,\"logprobs\":true,\"top_logprobs\":3,\"stop\":\"x\"}", &r, &e),
           0, "chat parses");
    ok(r.n_msgs == 3 && !strcmp(r.msgs[0].role, "system") && !strcmp(r.msgs[1].content, "ab") &&
       !strcmp(r.msgs[2].content, ""), "messages: developer -> system, parts joined, null content");
    ok(r.max_tokens == 5 && r.logprobs && r.top_logprobs == 3 && r.n_stop == 1, "chat fields");
    llm_api_req_free(&r);

    is_int(parse(LLM_API_TOKENIZE, "{\"prompt\":\"x\",\"add_special_tokens\":false}", &r, &e), 0, "tokenize");
    ok(!r.add_special, "add_special_tokens false");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_DETOKENIZE, "{\"tokens\":[5,6]}", &r, &e), 0, "detokenize");
    ok(r.n_ids == 2 && r.ids[0] == 5, "detokenize ids");
    llm_api_req_free(&r);

    /* null means absent */
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"temperature\":null,\"stop\":null,\"n\":null}", &r, &e),
           0, "nulls accepted");
    ok(r.temperature == 1.0 && r.n_stop == 0 && r.n == 1, "nulls keep defaults");
    llm_api_req_free(&r);

    /* errors */
    memset(&e, 0, sizeof e);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":", &r, &e), -1, "truncated JSON");
    ok(e.status == 400 && !strcmp(e.code, "invalid_json"), "invalid_json code");
    llm_api_req_free(&r);
    is_int(llm_api_parse(LLM_API_CHAT, "", 0, &r, &e), -1, "empty body");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_CHAT, "\"str\"", &r, &e), -1, "non-object body");
    llm_api_req_free(&r);

    bad(LLM_API_COMPLETIONS, "{}", "prompt", "missing prompt");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":[]}", "prompt", "empty prompt list");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":[\"a\",true]}", "prompt", "a list of prompts holding a boolean");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":[1,-1]}", "prompt", "negative token id");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":true}", "prompt", "bool prompt");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"temperature\":2.1}", "temperature", "temperature > 2");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"temperature\":\"1\"}", "temperature", "temperature string");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"top_p\":0}", "top_p", "top_p 0");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"top_k\":2.5}", "top_k", "top_k float");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"min_p\":-0.1}", "min_p", "min_p negative");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"presence_penalty\":2.5}", "presence_penalty", "presence_penalty");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"frequency_penalty\":-2.5}", "frequency_penalty", "frequency_penalty");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"repetition_penalty\":0}", "repetition_penalty", "repetition_penalty 0");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens", "max_tokens 0");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":1.5}", "max_tokens", "max_tokens float");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"n\":0}", "n", "n 0");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"n\":9}", "n", "n 9");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"seed\":1e30}", "seed", "seed out of range");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"stop\":{}}", "stop", "stop object");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"logprobs\":true}", "logprobs", "completions logprobs bool");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"stream\":1}", "stream", "stream number");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"stream\":true,\"stream_options\":[]}", "stream_options", "stream_options array");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"stream_options\":{}}", "stream_options", "stream_options without stream");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"model\":[]}", "model", "model array");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"prompt_cache_key\":5}", "prompt_cache_key",
        "prompt_cache_key number");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"logprobs\":1}", "logprobs", "chat logprobs number");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"top_logprobs\":21,\"logprobs\":true}", "top_logprobs", "top_logprobs 21");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"top_logprobs\":1}", "top_logprobs", "top_logprobs alone");
    bad(LLM_API_CHAT, "{\"messages\":{}}", "messages", "messages object");
    bad(LLM_API_CHAT, "{\"messages\":[1]}", "messages", "message not an object");
    bad(LLM_API_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", "messages", "message without role");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", "messages", "unsupported role");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages", "numeric content");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", "messages", "text part without text");
    bad(LLM_API_TOKENIZE, "{}", "prompt", "tokenize without prompt");
    bad(LLM_API_TOKENIZE, "{\"prompt\":\"x\",\"add_special_tokens\":1}", "add_special_tokens", "add_special_tokens number");
    bad(LLM_API_DETOKENIZE, "{\"tokens\":\"1 2\"}", "tokens", "tokens string");

    {
        char body[64 + LLM_STOP_MAX_LEN + 8];
        char big[LLM_STOP_MAX_LEN + 2];
        memset(big, 'z', sizeof big - 1);
        big[sizeof big - 1] = 0;
        snprintf(body, sizeof body, "{\"prompt\":\"x\",\"stop\":\"%s\"}", big);
        bad(LLM_API_COMPLETIONS, body, "stop", "overlong stop string");
    }

    /* logit_bias */
    is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"logit_bias\":{\"13\":-100,\"0\":2.5,\"13\":1}}",
                 &r, &e), 0, "logit_bias parses");
    ok(r.n_bias == 3 && r.bias_ids[0] == 13 && r.bias[0] == -100.0f && r.bias_ids[1] == 0 && r.bias[1] == 2.5f &&
       r.bias_ids[2] == 13 && r.bias[2] == 1.0f, "logit_bias entries in the body's order, a repeated id kept (the "
       "sampler keeps its last)");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":null}", &r, &e), 0, "logit_bias null");
    ok(r.n_bias == 0 && r.bias == NULL, "null logit_bias: none");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{}}", &r, &e), 0, "logit_bias {}");
    llm_api_req_free(&r);
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":[1]}", "logit_bias", "logit_bias array");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"a\":1}}", "logit_bias", "logit_bias key not an id");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"-1\":1}}", "logit_bias", "logit_bias negative id");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"1.5\":1}}", "logit_bias", "logit_bias id 1.5");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"\":1}}", "logit_bias", "logit_bias empty key");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"2147483648\":1}}", "logit_bias", "logit_bias id > INT32_MAX");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"5\":100.5}}", "logit_bias", "logit_bias 100.5");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"logit_bias\":{\"5\":\"1\"}}", "logit_bias", "logit_bias string value");
    {
        size_t cap = 64 + (LLM_API_MAX_BIAS + 1) * 12;
        char *body = malloc(cap);
        size_t at = (size_t)snprintf(body, cap, "{\"prompt\":\"x\",\"logit_bias\":{");
        for (int i = 0; i <= LLM_API_MAX_BIAS; i++)
            at += (size_t)snprintf(body + at, cap - at, "%s\"%d\":1", i ? "," : "", i);
        snprintf(body + at, cap - at, "}}");
        bad(LLM_API_COMPLETIONS, body, "logit_bias", "logit_bias with one entry too many");
        at = (size_t)snprintf(body, cap, "{\"prompt\":\"x\",\"logit_bias\":{");
        for (int i = 0; i < LLM_API_MAX_BIAS; i++)
            at += (size_t)snprintf(body + at, cap - at, "%s\"%d\":1", i ? "," : "", i);
        snprintf(body + at, cap - at, "}}");
        is_int(parse(LLM_API_COMPLETIONS, body, &r, &e), 0, "logit_bias with the most entries allowed");
        is_int(r.n_bias, LLM_API_MAX_BIAS, "... all kept");
        llm_api_req_free(&r);
        free(body);
    }

    /* a list of prompts */
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":[\"a\",\"bc\",\"\"],\"n\":2}", &r, &e), 0, "a list of texts parses");
    ok(r.n_prompts == 3 && r.batch && !strcmp(r.batch[1], "bc") && r.batch_len[1] == 2 && r.batch_len[2] == 0 &&
       r.prompt == NULL && r.ids == NULL, "three text prompts");
    llm_api_req one;
    llm_api_prompt_at(&r, 1, &one);
    ok(one.n_prompts == 1 && one.batch == NULL && !strcmp(one.prompt, "bc") && one.prompt_len == 2 && one.n == 2,
       "prompt_at: a one-prompt view with the request's other fields");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":[[1,2],[3]]}", &r, &e), 0, "a list of token-id prompts parses");
    ok(r.n_prompts == 2 && r.batch_ids && r.batch_n_ids[0] == 2 && r.batch_ids[1][0] == 3, "two id prompts");
    llm_api_prompt_at(&r, 0, &one);
    ok(one.ids == r.batch_ids[0] && one.n_ids == 2 && one.prompt == NULL, "prompt_at: ids of prompt 0");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":[[7,8]]}", &r, &e), 0, "a list of one id prompt");
    ok(r.n_prompts == 1 && r.n_ids == 2 && r.batch_ids == NULL, "... is one prompt");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", &r, &e), 0, "chat");
    ok(r.n_prompts == 1, "a chat request is one prompt");
    llm_api_req_free(&r);
    bad(LLM_API_COMPLETIONS, "{\"prompt\":[\"a\",[1]]}", "prompt", "texts and ids mixed");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":[[1],\"a\"]}", "prompt", "ids and texts mixed");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":[[1],[]]}", "prompt", "an empty id prompt in a list");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":[[1],[-1]]}", "prompt", "a negative id in a list");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"],\"n\":8}", "n",
        "9 prompts x n 8 = 72 choices");
    {
        char body[64 + (LLM_API_MAX_CHOICES + 1) * 4];
        size_t at = (size_t)snprintf(body, sizeof body, "{\"prompt\":[");
        for (int i = 0; i <= LLM_API_MAX_CHOICES; i++)
            at += (size_t)snprintf(body + at, sizeof body - at, "%s\"x\"", i ? "," : "");
        snprintf(body + at, sizeof body - at, "]}");
        bad(LLM_API_COMPLETIONS, body, "prompt", "65 prompts");
    }

    /* function calling */
    {
        static const char *const tools =
            "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather \\\"now\\\"\","
            "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}},"
            "\"required\":[\"city\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";
        char body[2048];
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}", tools);
        is_int(parse(LLM_API_CHAT, body, &r, &e), 0, "tools parse");
        ok(r.tool_mode == LLM_TOOLS_AUTO && r.tools != NULL && r.schema == NULL, "... tool_choice auto by default, no schema");
        ok(r.tool_defs && !strcmp(r.tool_defs,
           "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
           "        \"description\": \"Weather \\\"now\\\"\",\n        \"parameters\": {\n            \"type\": \"object\",\n"
           "            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\"\n                },\n"
           "                \"days\": {\n                    \"type\": \"integer\"\n                }\n            },\n"
           "            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}\n\n"
           "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"now\"\n    }\n}\n\n"),
           "... listed as json.dumps(indent=4) prints them, a blank line after each:\n%s", r.tool_defs ? r.tool_defs : "");
        llm_tool_call c[LLM_TOOLS_MAX_CALLS];
        size_t cl = 99;
#define OUT(text) llm_tools_output(&r, text, strlen(text), c, &cl)
        ok(OUT(" {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}\n") == 1 && cl == 0 &&
           !strcmp(c[0].name, "get_weather") && !strcmp(c[0].args, "{\"city\":\"Oslo\"}"), "an answer that is a call is read as one");
        llm_tool_call_free(&c[0]);
        ok(OUT("{\"name\":\"now\"}") == 1 && !strcmp(c[0].args, "{}"), "... with no parameters: {}");
        llm_tool_call_free(&c[0]);
        ok(OUT("{\"name\":\"other\",\"parameters\":{}}") == 0 && OUT("It is sunny.") == 0 &&
           OUT("{\"name\":\"now\",\"parameters\":3}") == 0 && OUT("{\"name\":\"now\"") == 0 &&
           OUT("{\"name\":\"now\"} and more") == 0 && OUT("<tool_call>{\"name\":\"now\"}</tool_call>") == 0,
           "... an unknown tool, text, parameters that are not an object, a cut call, a call and text, "
           "ChatML's tags: not calls (Llama 3)");
        ok(llm_tools_may_be_call(&r, " {\"na", 5) && !llm_tools_may_be_call(&r, " It", 3),
           "Llama 3, streamed: held while it may be a call");
        llm_api_req_free(&r);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":\"required\"}", tools);
        is_int(parse(LLM_API_CHAT, body, &r, &e), 0, "tool_choice required parses");
        ok(r.tool_mode == LLM_TOOLS_REQUIRED && r.schema != NULL &&
           !strcmp(r.schema, "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},"
                             "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":"
                             "{\"type\":\"integer\"}},\"required\":[\"city\"]}},\"required\":[\"name\",\"parameters\"]},"
                             "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"now\"},\"parameters\":{\"type\":\"object\"}},"
                             "\"required\":[\"name\",\"parameters\"]}]}"),
           "... the answer held to either call: %s", r.schema ? r.schema : "");
        llm_api_req_free(&r);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,"
                 "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"now\"}}}", tools);
        is_int(parse(LLM_API_CHAT, body, &r, &e), 0, "a named tool_choice parses");
        ok(r.tool_mode == LLM_TOOLS_NAMED && r.schema != NULL &&
           !strcmp(r.schema, "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"now\"},\"parameters\":"
                             "{\"type\":\"object\"}},\"required\":[\"name\",\"parameters\"]}"),
           "... the answer held to that call: %s", r.schema ? r.schema : "");
        llm_api_req_free(&r);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":\"none\"}", tools);
        is_int(parse(LLM_API_CHAT, body, &r, &e), 0, "tool_choice none parses");
        ok(r.tool_mode == LLM_TOOLS_OFF && r.tool_defs == NULL, "... the tools stay out");
        llm_api_req_free(&r);
        /* a conversation with a call and its result */
        is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
                                   "\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":"
                                   "{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\",\\\"days\\\":2}\"}}]},"
                                   "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny\"}]}", &r, &e), 0,
               "a conversation with a tool call and its result parses");
        ok(r.n_msgs == 3 && !strcmp(r.msgs[1].role, "assistant") && !strcmp(r.msgs[1].content, "") &&
           r.msgs[1].n_calls == 1 && !strcmp(r.msgs[1].calls[0].name, "get_weather") &&
           !strcmp(r.msgs[1].calls[0].args, "{\"city\": \"Oslo\", \"days\": 2}") &&
           !strcmp(r.msgs[2].role, "tool") && !strcmp(r.msgs[2].content, "sunny"),
           "... the call's name and arguments as tojson prints them: %s", r.n_msgs > 1 && r.msgs[1].n_calls ?
           r.msgs[1].calls[0].args : "");
        llm_api_req_free(&r);

        /* ChatML (Hermes / Qwen): the tools one per line, "arguments", several calls an answer */
        llm_api_req q;
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}", tools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_CHATML, &q, &e), 0, "chatml: tools parse");
        ok(q.tool_defs && !strncmp(q.tool_defs, "\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                                              "\"description\": ", 68) && strchr(q.tool_defs + 1, '\n') != NULL,
           "chatml: each tool on a line of its own as tojson prints it:%s", q.tool_defs ? q.tool_defs : "");
#define QOUT(text) llm_tools_output(&q, text, strlen(text), c, &cl)
        const char *two = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
                          "</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n";
        int n2 = QOUT(two);
        ok(n2 == 2 && cl == 12 && !strcmp(c[0].name, "get_weather") && !strcmp(c[0].args, "{\"city\":\"Oslo\"}") &&
           !strcmp(c[1].name, "now") && !strcmp(c[1].args, "{}"), "chatml: content, then two calls (%d, content %zu)",
           n2, cl);
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        ok(QOUT("<tool_call>{\"name\":\"now\"}") == 1 && cl == 0, "chatml: a call whose closing tag never came");
        llm_tool_call_free(&c[0]);
        ok(QOUT("{\"name\":\"now\"}") == 0 && QOUT("<tool_call>{\"name\":\"now\"}</tool_call> then text") == 0 &&
           QOUT("<tool_call>{\"name\":\"nope\"}</tool_call>") == 0 && QOUT("<tool_call>{\"name\":\"now\"}</tool_call>"
           "<tool_call>{\"name\":\"now\",\"arguments\":[]}</tool_call>") == 0,
           "chatml: bare JSON, text after the calls, an unknown tool, a bad second call: not calls");
        ok(llm_tools_may_be_call(&q, " <too", 5) && llm_tools_may_be_call(&q, "<tool_call>\n{\"x", 14) &&
           !llm_tools_may_be_call(&q, "Hi", 2) && !llm_tools_may_be_call(&q, "{", 1) &&
           llm_tools_may_be_call(&q, NULL, 0) && llm_tools_may_be_call(&q, "\n", 1),
           "chatml, streamed: held while it may open with <tool_call>");
        ok(llm_tools_content_end(&q, "Let me see. <tool_call>\n{", 25, 0) == 12 &&
           llm_tools_content_end(&q, "Let me see. <tool_call>\n{", 25, 12) == 12 &&
           llm_tools_content_end(&q, "Let me see. <too", 16, 3) == 12 && llm_tools_content_end(&q, "a <tools> b", 11, 0) == 11 &&
           llm_tools_content_end(&q, "abc", 3, 3) == 3 && llm_tools_content_end(&q, "x<", 2, 0) == 1,
           "chatml, streamed: content goes out up to a <tool_call> or what may begin one");
        llm_api_req_free(&q);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,"
                 "\"parallel_tool_calls\":false}", tools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_CHATML, &q, &e), 0, "chatml: one call");
        n2 = QOUT(two);
        ok(n2 == 1 && !strcmp(c[0].name, "get_weather"), "chatml: parallel_tool_calls false keeps the first call");
        if (n2 == 1) llm_tool_call_free(&c[0]);
        llm_api_req_free(&q);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":"
                 "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}}", tools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_CHATML, &q, &e), 0, "chatml: named");
        ok(q.schema && strstr(q.schema, "\"arguments\":{\"type\":\"object\"}") &&
           QOUT("{\"name\": \"now\", \"arguments\": {}}\n") == 1, "chatml named: held to {name, arguments}, the "
           "answer (opened inside the call by the prompt) read as the call: %s", q.schema ? q.schema : "");
        llm_tool_call_free(&c[0]);
        llm_api_req_free(&q);
        const char *hist = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":"
                           "\"Both.\",\"tool_calls\":[{\"function\":{\"name\":\"a\",\"arguments\":\"{}\"}},{\"function\":"
                           "{\"name\":\"b\",\"arguments\":{\"x\":1}}}]}]}";
        is_int(llm_api_parse_chat(LLM_API_CHAT, hist, strlen(hist), LLM_CHAT_CHATML, &q, &e), 0,
               "chatml: a history message with two calls and content");
        ok(q.n_msgs == 2 && q.msgs[1].n_calls == 2 && !strcmp(q.msgs[1].content, "Both.") &&
           !strcmp(q.msgs[1].calls[1].args, "{\"x\": 1}"), "... kept, arguments as tojson prints them");
        llm_api_req_free(&q);
        /* Qwen3-Coder: the tools in XML as its template writes them (checked against it; Python's str() for the
         * values a `| string` prints), calls in XML read back typed by the schema, history calls as its lines */
        const char *ctools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
                             "\" The weather\\n\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                             "\"string\",\"description\":\"City\",\"enum\":[\"Oslo\",\"Rome\"]},\"days\":{\"type\":"
                             "\"integer\",\"minimum\":1},\"unit\":{\"type\":[\"string\",\"null\"]},\"hot\":{\"type\":"
                             "\"boolean\"},\"at\":{\"type\":\"number\"},\"opts\":{\"type\":\"object\"}},\"required\":"
                             "[\"city\"]},\"strict\":true}},{\"type\":\"function\",\"function\":{\"name\":\"now\","
                             "\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]";
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}", ctools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_QWEN3_CODER, &q, &e), 0,
               "qwen3-coder: tools parse");
        ok(q.tool_defs && !strcmp(q.tool_defs, "\n<function>\n<name>get_weather</name>\n<description>The weather"
                                              "</description>\n<parameters>\n<parameter>\n<name>city</name>\n<type>string"
                                              "</type>\n<description>City</description>\n<enum>[\"Oslo\", \"Rome\"]</enum>"
                                              "\n</parameter>\n<parameter>\n<name>days</name>\n<type>integer</type>\n"
                                              "<minimum>1</minimum>\n</parameter>\n<parameter>\n<name>unit</name>\n<type>"
                                              "['string', 'null']</type>\n</parameter>\n<parameter>\n<name>hot</name>\n"
                                              "<type>boolean</type>\n</parameter>\n<parameter>\n<name>at</name>\n<type>"
                                              "number</type>\n</parameter>\n<parameter>\n<name>opts</name>\n<type>object"
                                              "</type>\n</parameter>\n<required>[\"city\"]</required>\n</parameters>\n"
                                              "<strict>True</strict>\n</function>\n<function>\n<name>now</name>\n"
                                              "<parameters>\n</parameters>\n</function>"),
           "qwen3-coder: the tools in its XML:%s", q.tool_defs ? q.tool_defs : "");
        const char *xml = "I will check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
                          "<parameter=days>\n3\n</parameter>\n<parameter=hot>\nTrue\n</parameter>\n<parameter=at>\n"
                          "2.5\n</parameter>\n<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n<parameter=unit>\nnull\n"
                          "</parameter>\n<parameter=note>\ntwo\nlines\n</parameter>\n</function>\n</tool_call>\n"
                          "<tool_call>\n<function=now>\n</function>\n</tool_call>";
        n2 = QOUT(xml);
        ok(n2 == 2 && cl == 13 && !strcmp(c[0].name, "get_weather") &&
           !strcmp(c[0].args, "{\"city\":\"Oslo\",\"days\":3,\"hot\":true,\"at\":2.5,\"opts\":{\"a\":[1,2]},\"unit\":null,"
                              "\"note\":\"two\\nlines\"}") && !strcmp(c[1].name, "now") && !strcmp(c[1].args, "{}"),
           "qwen3-coder: content, then two XML calls, the values typed by the schema (%d, content %zu): %s", n2, cl,
           n2 > 0 ? c[0].args : "");
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        ok(QOUT("<tool_call>\n<function=nope>\n</function>\n</tool_call>") == 0 &&
           QOUT("<tool_call>\n<function=now>\n<parameter=x>\n1\n</function>") == 0 &&
           QOUT("<tool_call>\n<function=now\n") == 0 && QOUT("<tool_call>\n<function=get_weather>\n<parameter=days>\n"
           "many\n</parameter>\n</function>") == 1 && !strcmp(c[0].args, "{\"days\":\"many\"}"),
           "qwen3-coder: an unknown tool, an unclosed parameter or name: not calls; a value its type cannot take stays "
           "text: %s", c[0].args);
        llm_tool_call_free(&c[0]);
        llm_api_req_free(&q);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":"
                 "\"required\"}", ctools);
        /* held (required / named): XML calls have no grammar here, so the answer is held to a JSON array of
         * calls as vLLM holds any model's; the prompt opens no call, and the array is read back */
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_QWEN3_CODER, &q, &e), 0,
               "qwen3-coder: tool_choice required");
        ok(q.schema && !strncmp(q.schema, "{\"type\":\"array\",\"items\":{\"anyOf\":[", 34) &&
           strstr(q.schema, "\"name\":{\"const\":\"now\"},\"arguments\":{") && !llm_tools_prompt_opens_call(&q),
           "qwen3-coder required: held to an array of {name, arguments}, the prompt opening no call: %s",
           q.schema ? q.schema : "");
        n2 = QOUT(" [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, {\"name\": \"now\", "
                  "\"arguments\": {}}]");
        ok(n2 == 2 && cl == 0 && !strcmp(c[0].name, "get_weather") && !strcmp(c[0].args, "{\"city\":\"Oslo\"}") &&
           !strcmp(c[1].name, "now"), "qwen3-coder required: the held array read as its calls (%d)", n2);
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        ok(QOUT("<tool_call>\n<function=now>\n</function>\n</tool_call>") == 0,
           "qwen3-coder required: XML is not the held answer");
        llm_api_req_free(&q);
        const char *chist = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":"
                            "\"\",\"tool_calls\":[{\"function\":{\"name\":\"a\",\"arguments\":\"{\\\"s\\\": \\\"x\\\", "
                            "\\\"b\\\": false, \\\"n\\\": null, \\\"l\\\": [1, \\\"y\\\"], \\\"f\\\": 0.5}\"}}]}]}";
        is_int(llm_api_parse_chat(LLM_API_CHAT, chist, strlen(chist), LLM_CHAT_QWEN3_CODER, &q, &e), 0,
               "qwen3-coder: a history call");
        ok(q.n_msgs == 2 && q.msgs[1].n_calls == 1 &&
           !strcmp(q.msgs[1].calls[0].args, "<parameter=s>\nx\n</parameter>\n<parameter=b>\nFalse\n</parameter>\n"
                                            "<parameter=n>\nNone\n</parameter>\n<parameter=l>\n[1, \"y\"]\n</parameter>\n"
                                            "<parameter=f>\n0.5\n</parameter>\n"),
           "... its arguments as the template's <parameter> lines: %s", q.n_msgs == 2 ? q.msgs[1].calls[0].args : "");
        llm_api_req_free(&q);
        /* Seed-OSS: the tools as its template's Python function docs ([必填] required, [选填] optional, the
         * "returns" properties), history calls as its <parameter=key>value</parameter> lines (Python's str() of the
         * value): the whole rendering as its template renders it in Python's Jinja2 (transformers' way); its XML
         * calls read back typed by the schema; tool_choice required refused (XML) */
        const char *sbody = "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\","
                            " \"content\": \"Weather?\"}, {\"role\": \"assistant\", \"content\": \" Checking. \", \"t"
                            "ool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"argum"
                            "ents\": \"{\\\"city\\\": \\\"Oslo\\\", \\\"days\\\": 2, \\\"opts\\\": {\\\"a\\\": [1, \\"
                            "\"x\\\"]}, \\\"hot\\\": false}\"}}, {\"type\": \"function\", \"function\": {\"name\": \""
                            "now\", \"arguments\": \"{}\"}}]}, {\"role\": \"tool\", \"content\": \"7C\"}, {\"role\": "
                            "\"tool\", \"content\": \"noon\"}], \"tools\": [{\"type\": \"function\", \"function\": {"
                            "\"name\": \"get_weather\", \"description\": \" The weather\\n\", \"parameters\": {\"type"
                            "\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"Cit"
                            "y\"}, \"days\": {\"type\": \"integer\"}, \"hot\": {\"type\": \"boolean\", \"description"
                            "\": \"hot?\"}, \"opts\": {\"type\": \"object\"}}, \"required\": [\"city\"]}, \"returns\""
                            ": {\"type\": \"object\", \"properties\": {\"temp\": {\"type\": \"number\", \"description"
                            "\": \"deg\"}}}}}, {\"type\": \"function\", \"function\": {\"name\": \"now\", \"parameter"
                            "s\": {\"type\": \"object\", \"properties\": {}}}}]}";
        is_int(llm_api_parse_chat(LLM_API_CHAT, sbody, strlen(sbody), LLM_CHAT_SEED_OSS, &q, &e), 0,
               "seed-oss: tools and a history call parse");
        {
            llm_chat_tools st = { q.tool_defs, NULL, 0, NULL };
            llm_chat_out so;
            llm_err serr = { { 0 } };
            int rr = llm_chat_render_ex(LLM_CHAT_SEED_OSS, q.msgs, q.n_msgs, &st, NULL, 1, &so, &serr);
            char *joined = rr == 0 ? llm_chat_out_join(&so) : NULL;
            int same = joined != NULL && !strcmp(joined, "<seed:bos>system\nBe brief.\n\nFunction:\ndef get_weather(city: str,days: int,hot: bool,"
                            "opts: Any):\n    \"\"\"\n    The weather\n\n    Args:\n    - city (str) [\u5fc5\u586b]: "
                            "City\n    - days (int) [\u9009\u586b]: \n    - hot (bool) [\u9009\u586b]: hot?\n    - op"
                            "ts (Any) [\u9009\u586b]: \n    Returns:\n    - temp (int): deg\n    \"\"\"\n\nFunction:"
                            "\ndef now():\n    \"\"\"\n    \n\n\n\n    \"\"\"\n\u5de5\u5177\u8c03\u7528\u8bf7\u9075"
                            "\u5faa\u5982\u4e0b\u683c\u5f0f:\n<seed:tool_call>\n<function=example_function_name>\n<pa"
                            "rameter=example_parameter_1>value_1</parameter>\n<parameter=example_parameter_2>This is "
                            "the value for the second parameter\nthat can span\nmultiple lines</parameter>\n</functio"
                            "n>\n</seed:tool_call>\n<seed:eos><seed:bos>user\nWeather?<seed:eos><seed:bos>assistant\n"
                            "Checking.\n\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>"
                            "\n<parameter=days>2</parameter>\n<parameter=opts>{'a': [1, 'x']}</parameter>\n<parameter"
                            "=hot>False</parameter>\n</function>\n</seed:tool_call>\n<seed:tool_call>\n<function=now>"
                            "\n</function>\n</seed:tool_call><seed:eos><seed:bos>tool\n7C<seed:eos><seed:bos>tool\nno"
                            "on<seed:eos><seed:bos>assistant\n");
            ok(same, "seed-oss: the tools, calls and results as its template renders them");
            if (!same) diag("%s", joined ? joined : serr.msg);
            free(joined);
            if (rr == 0) llm_chat_out_free(&so);
        }
        const char *sx = "Let me see.<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n"
                         "<parameter=days>3</parameter>\n<parameter=hot>true</parameter>\n<parameter=opts>{\"a\": 1}"
                         "</parameter>\n<parameter=note>two\nlines</parameter>\n</function>\n</seed:tool_call>"
                         "<seed:tool_call>\n<function=now>\n</function>\n</seed:tool_call>";
        n2 = QOUT(sx);
        ok(n2 == 2 && cl == 11 && !strcmp(c[0].name, "get_weather") &&
           !strcmp(c[0].args, "{\"city\":\"Oslo\",\"days\":3,\"hot\":true,\"opts\":{\"a\":1},\"note\":\"two\\nlines\"}") &&
           !strcmp(c[1].name, "now") && !strcmp(c[1].args, "{}"),
           "seed-oss: content, then two <seed:tool_call> calls, the values typed by the schema (%d, content %zu): %s",
           n2, cl, n2 > 0 ? c[0].args : "");
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        ok(QOUT("<seed:tool_call>\n<function=nope>\n</function>\n</seed:tool_call>") == 0 &&
           QOUT("<tool_call>\n<function=now>\n</function>\n</tool_call>") == 0 &&
           QOUT("<seed:tool_call>\n<function=now>\n<parameter=x>1</function>") == 0,
           "seed-oss: an unknown tool, ChatML's tag, an unclosed parameter: not calls");
        llm_api_req_free(&q);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":"
                 "\"required\"}", ctools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_SEED_OSS, &q, &e), 0,
               "seed-oss: tool_choice required");
        n2 = QOUT("[{\"name\": \"now\", \"arguments\": {}}]");
        ok(q.schema && !strncmp(q.schema, "{\"type\":\"array\"", 15) && !llm_tools_prompt_opens_call(&q) && n2 == 1 &&
           !strcmp(c[0].name, "now"), "seed-oss required: held to an array of calls, read back (%d): %s", n2,
           q.schema ? q.schema : "");
        if (n2 == 1) llm_tool_call_free(&c[0]);
        llm_api_req_free(&q);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":"
                 "{\"type\":\"function\",\"function\":{\"name\":\"now\"}},\"parallel_tool_calls\":false}", ctools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_SEED_OSS, &q, &e), 0, "seed-oss: named");
        ok(q.schema && strstr(q.schema, "\"maxItems\":1") && !strstr(q.schema, "get_weather"),
           "seed-oss named, parallel_tool_calls false: an array of one call of that tool: %s", q.schema ? q.schema : "");
        llm_api_req_free(&q);
        /* GLM-4.5: the tools as one-line JSON each (the whole tool object), history calls as its <arg_key> /
         * <arg_value> lines: the whole rendering as its template renders it in Python's Jinja2 (transformers' way;
         * 15 cases compared, these two among them); its XML calls read back typed by the schema; tool_choice required
         * held to a JSON array of calls, no tag opened */
        const char *gbody = "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
                            "\"content\": \"Weather?\"}, {\"role\": \"assistant\", \"content\": \" Checking. \", \"tool"
                            "_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments"
                            "\": \"{\\\"city\\\": \\\"Osl\u00f8\\\\n2\\\", \\\"days\\\": 2, \\\"opts\\\": {\\\"a\\\": ["
                            "1, \\\"x\\\"]}, \\\"hot\\\": false, \\\"unit\\\": null, \\\"at\\\": 2.5}\"}}, {\"type\": "
                            "\"function\", \"function\": {\"name\": \"now\", \"arguments\": \"{}\"}}]}, {\"role\": \"to"
                            "ol\", \"content\": \"7C\"}, {\"role\": \"tool\", \"content\": \"noon\"}], \"tools\": [{\"t"
                            "ype\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weat"
                            "her\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"stri"
                            "ng\"}, \"days\": {\"type\": \"integer\"}, \"hot\": {\"type\": \"boolean\"}, \"opts\": {\"t"
                            "ype\": \"object\"}, \"at\": {\"type\": \"number\"}}, \"required\": [\"city\"]}}}, {\"type"
                            "\": \"function\", \"function\": {\"name\": \"now\", \"parameters\": {\"type\": \"object\","
                            " \"properties\": {}}}}]}";
        const char *gwant = "[gMASK]<sop><|system|>\n# Tools\n\nYou may call one or more functions to assist with the u"
                            "ser query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n"
                            "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description"
                            "\": \"The weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\""
                            "type\": \"string\"}, \"days\": {\"type\": \"integer\"}, \"hot\": {\"type\": \"boolean\"}, "
                            "\"opts\": {\"type\": \"object\"}, \"at\": {\"type\": \"number\"}}, \"required\": [\"city\""
                            "]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"now\", \"parameters\": {\"type\""
                            ": \"object\", \"properties\": {}}}}\n</tools>\n\nFor each function call, output the functi"
                            "on name and arguments within the following XML format:\n<tool_call>{function-name}\n<arg_k"
                            "ey>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n<arg_key>{arg-key-2}</arg_"
                            "key>\n<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call><|system|>\nBe brief.<|user|>"
                            "\nWeather?<|assistant|>\n<think></think>\nChecking.\n<tool_call>get_weather\n<arg_key>city"
                            "</arg_key>\n<arg_value>Osl\u00f8\n2</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</ar"
                            "g_value>\n<arg_key>opts</arg_key>\n<arg_value>{\"a\": [1, \"x\"]}</arg_value>\n<arg_key>ho"
                            "t</arg_key>\n<arg_value>false</arg_value>\n<arg_key>unit</arg_key>\n<arg_value>null</arg_v"
                            "alue>\n<arg_key>at</arg_key>\n<arg_value>2.5</arg_value>\n</tool_call>\n<tool_call>now\n</"
                            "tool_call><|observation|>\n<tool_response>\n7C\n</tool_response>\n<tool_response>\nnoon\n<"
                            "/tool_response><|assistant|>";
        const char *gbody2 = "{\"messages\": [{\"role\": \"user\", \"content\": \"Time?\"}, {\"role\": \"assistant\", \""
                             "content\": \"<think>\\nThe tool knows.\\n</think>\\n\", \"tool_calls\": [{\"type\": \"func"
                             "tion\", \"function\": {\"name\": \"now\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\", \\\"f"
                             "mt\\\": [\\\"h\\\", 24]}\"}}]}, {\"role\": \"tool\", \"content\": \"12:00\"}], \"chat_temp"
                             "late_kwargs\": {\"enable_thinking\": false}}";
        const char *gwant2 = "[gMASK]<sop><|user|>\nTime?/nothink<|assistant|>\n<think>The tool knows.</think>\n<tool_ca"
                             "ll>now\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n<arg_key>fmt</arg_key>\n<arg_va"
                             "lue>[\"h\", 24]</arg_value>\n</tool_call><|observation|>\n<tool_response>\n12:00\n</tool_r"
                             "esponse><|assistant|>\n<think></think>";
        const char *const gbodies[] = { gbody, gbody2 }, *const gwants[] = { gwant, gwant2 };
        for (int k = 0; k < 2; k++) {
            is_int(llm_api_parse_chat(LLM_API_CHAT, gbodies[k], strlen(gbodies[k]), LLM_CHAT_GLM45, &q, &e), 0,
                   "glm4.5: case %d parses (tools, history calls)", k + 1);
            llm_chat_tools gt = { q.tool_defs, NULL, llm_tools_prompt_opens_call(&q), NULL };
            llm_chat_vars gv = { .no_think = q.enable_thinking == 0 };
            llm_chat_out go;
            llm_err gerr = { { 0 } };
            int rr = llm_chat_render_ex(LLM_CHAT_GLM45, q.msgs, q.n_msgs, q.tool_mode != LLM_TOOLS_OFF ? &gt : NULL,
                                        &gv, 1, &go, &gerr);
            char *joined = rr == 0 ? llm_chat_out_join(&go) : NULL;
            int same = joined != NULL && !strcmp(joined, gwants[k]);
            ok(same, "glm4.5: case %d: the tools, calls and results as its template renders them", k + 1);
            if (!same) diag("%s", joined ? joined : gerr.msg);
            free(joined);
            if (rr == 0) llm_chat_out_free(&go);
            if (k == 0)
                ok(q.tool_defs && !strcmp(q.tool_defs, "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                                                      "\"description\": \"The weather\", \"parameters\": {\"type\": "
                                                      "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}, "
                                                      "\"days\": {\"type\": \"integer\"}, \"hot\": {\"type\": \"boolean\"}, "
                                                      "\"opts\": {\"type\": \"object\"}, \"at\": {\"type\": \"number\"}}, "
                                                      "\"required\": [\"city\"]}}}\n{\"type\": \"function\", \"function\": "
                                                      "{\"name\": \"now\", \"parameters\": {\"type\": \"object\", "
                                                      "\"properties\": {}}}}\n") &&
                   q.msgs[2].n_calls == 2 && !strcmp(q.msgs[2].calls[1].args, ""),
                   "glm4.5: each tool's whole object as tojson prints it, a newline after each; a call without "
                   "arguments has no lines:%s", q.tool_defs ? q.tool_defs : "");
            if (k == 0) { /* reading an answer's calls, with the same tools */
                const char *gx = "I will check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value> Oslo"
                                 "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3\n</arg_value>\n<arg_key>hot</arg_key>"
                                 "<arg_value>True</arg_value><arg_key>at</arg_key>\n<arg_value>2.5</arg_value>\n<arg_key>"
                                 "opts</arg_key>\n<arg_value>{\"a\": [1, 2]}</arg_value>\n<arg_key> note </arg_key>\n"
                                 "<arg_value>two\nlines</arg_value>\n<arg_key>unit</arg_key>\n<arg_value>null</arg_value>\n"
                                 "</tool_call>\n<tool_call>now\n</tool_call>";
                n2 = QOUT(gx);
                ok(n2 == 2 && cl == 13 && !strcmp(c[0].name, "get_weather") &&
                   !strcmp(c[0].args, "{\"city\":\" Oslo\",\"days\":3,\"hot\":true,\"at\":2.5,\"opts\":{\"a\":[1,2]},"
                                      "\"note\":\"two\\nlines\",\"unit\":null}") &&
                   !strcmp(c[1].name, "now") && !strcmp(c[1].args, "{}"),
                   "glm4.5: content, then two calls, the values typed by the schema (a string as written; %d, "
                   "content %zu): %s", n2, cl, n2 > 0 ? c[0].args : "");
                for (int j = 0; j < n2; j++) llm_tool_call_free(&c[j]);
                n2 = QOUT("<tool_call> now <arg_key>tz</arg_key> <arg_value>UTC</arg_value> </tool_call>");
                ok(n2 == 1 && cl == 0 && !strcmp(c[0].args, "{\"tz\":\"UTC\"}"),
                   "glm4.5: a call on one line, spaces between its tags (%d): %s", n2, n2 > 0 ? c[0].args : "");
                if (n2 == 1) llm_tool_call_free(&c[0]);
                ok(QOUT("<tool_call>nope\n</tool_call>") == 0 &&
                   QOUT("<tool_call>now\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>") == 0 &&
                   QOUT("<tool_call>now\n<arg_key>tz</arg_key>\n<arg_value>UTC</tool_call>") == 0 &&
                   QOUT("<tool_call>now\n<arg_key>tz\n<arg_value>UTC</arg_value>\n</tool_call>") == 0 &&
                   QOUT("<tool_call>now\n<arg_value>UTC</arg_value>\n</tool_call>") == 0 &&
                   QOUT("<tool_call>now\ntz: UTC\n</tool_call>") == 0 &&
                   QOUT("<tool_call>now\n</tool_call> and then text") == 0 &&
                   QOUT("<tool_call>\n<function=now>\n</function>\n</tool_call>") == 0,
                   "glm4.5: an unknown tool, an unclosed block or value, a key without its value, a value without its "
                   "key, text in the block or after it, Qwen3-Coder's XML: not calls");
                n2 = QOUT("<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>many</arg_value>\n<arg_key>city"
                          "</arg_key>\n<arg_value>007</arg_value>\n</tool_call>");
                ok(n2 == 1 && !strcmp(c[0].args, "{\"days\":\"many\",\"city\":\"007\"}"),
                   "glm4.5: a value its type cannot take stays text, a string parameter's digits a string: %s",
                   n2 == 1 ? c[0].args : "");
                if (n2 == 1) llm_tool_call_free(&c[0]);
                ok(!strcmp(llm_tools_call_tag(&q), "<tool_call>") && llm_tools_content_end(&q, "Hi <tool_ca", 11, 0) == 3 &&
                   llm_tools_may_be_call(&q, "\n<tool", 6) && !llm_tools_may_be_call(&q, "Hi", 2),
                   "glm4.5: <tool_call> is the tag: content streams up to it");
                const char *tags[8];
                int nt = llm_tools_text_tags(&q, tags, 8);
                ok(nt == 6 && !strcmp(tags[1], "</tool_call>") && !strcmp(tags[5], "</arg_value>") &&
                   llm_tools_text_tags(&q, tags, 2) == 2, "glm4.5: its six call tags reach the reader (%d)", nt);
            }
            llm_api_req_free(&q);
        }
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":"
                 "\"required\"}", ctools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_GLM45, &q, &e), 0, "glm4.5: tool_choice required");
        n2 = QOUT("\n[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, {\"name\": \"now\", \"arguments\": {}}]");
        ok(q.schema && !strncmp(q.schema, "{\"type\":\"array\",\"items\":{\"anyOf\":[", 34) &&
           !llm_tools_prompt_opens_call(&q) && n2 == 2 && !strcmp(c[0].name, "get_weather") && !strcmp(c[1].name, "now"),
           "glm4.5 required: held to an array of calls, the prompt opening no call, read back (%d): %s", n2,
           q.schema ? q.schema : "");
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        ok(QOUT("<tool_call>now\n</tool_call>") == 0, "glm4.5 required: XML is not the held answer");
        llm_api_req_free(&q);
        /* gpt-oss (harmony): the content after its reasoning is the final message, or one call: its channel and
         * recipient in either order, then the arguments' JSON (the splitter took the analysis message and the
         * next message's <|start|>assistant) */
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}", ctools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_GPT_OSS, &q, &e), 0, "gpt-oss: tools parse");
        ok(q.tool_defs && !strncmp(q.tool_defs, "## functions\n\nnamespace functions {\n\n// ", 40) &&
           strstr(q.tool_defs, "type now = () => any;\n\n} // namespace functions"),
           "gpt-oss: the tools as its template's TypeScript namespace: %s", q.tool_defs ? q.tool_defs : "");
        n2 = QOUT("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}");
        ok(n2 == 1 && cl == 0 && !strcmp(c[0].name, "get_weather") && !strcmp(c[0].args, "{\"city\":\"Oslo\"}"),
           "gpt-oss: a call on the commentary channel (%d)", n2);
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        n2 = QOUT(" to=functions.now<|channel|>commentary json<|message|>{}");
        ok(n2 == 1 && !strcmp(c[0].name, "now") && !strcmp(c[0].args, "{}"), "gpt-oss: the recipient first (%d)", n2);
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        ok(QOUT("The weather is fine.") == 0 && QOUT("<|channel|>commentary to=functions.nope <|constrain|>json"
                                                     "<|message|>{}") == 0 &&
           QOUT("<|channel|>commentary to=functions.now <|constrain|>json<|message|>{} and more") == 0 &&
           QOUT("<|channel|>commentary to=functions.now <|constrain|>json<|message|>[1]") == 0,
           "gpt-oss: text, an unknown tool, text after the arguments, arguments not an object: no call");
        /* a preamble's text (the splitter dropped its header and close) before the call: content */
        n2 = QOUT("Let me check. <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                  "{\"city\": \"Oslo\"}");
        ok(n2 == 1 && cl == 13 && !strcmp(c[0].name, "get_weather"),
           "gpt-oss: a preamble's text, then the call: content up to it (%d, %zu)", n2, cl);
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        n2 = QOUT("Let me check. to=functions.now<|channel|>commentary json<|message|>{}");
        ok(n2 == 1 && cl == 13 && !strcmp(c[0].name, "now"), "gpt-oss: a preamble, then the recipient first (%d)",
           n2);
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        ok(llm_tools_may_be_call(&q, "<|chan", 6) && llm_tools_may_be_call(&q, " to=f", 5) &&
           !llm_tools_may_be_call(&q, "The", 3) && llm_tools_content_end(&q, "<|channel|>comm", 15, 0) == 0 &&
           llm_tools_content_end(&q, "Sunny <|channel|>commentary", 27, 0) == 6 &&
           llm_tools_content_end(&q, "Sunny <|chan", 12, 3) == 6 && llm_tools_content_end(&q, "Sunny", 5, 0) == 5 &&
           llm_tools_content_end(&q, "Sunny to", 8, 0) == 5,
           "gpt-oss streamed: text goes out up to where a call opens (or may: held)");
        {
            const char *tags[8];
            ok(llm_tools_text_tags(&q, tags, 8) == 0, "gpt-oss: no call tags of its own (its control tokens are kept)");
        }
        llm_api_req_free(&q);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":"
                 "\"required\"}", ctools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_GPT_OSS, &q, &e), 0, "gpt-oss: required");
        n2 = QOUT("[{\"name\": \"now\", \"arguments\": {}}]");
        ok(q.schema && !llm_tools_prompt_opens_call(&q) && n2 == 1 && !strcmp(c[0].name, "now"),
           "gpt-oss required: held to an array of calls, read back (%d)", n2);
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        llm_api_req_free(&q);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":"
                 "{\"type\":\"function\",\"function\":{\"name\":\"now\"}},\"parallel_tool_calls\":false}", ctools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_GLM45, &q, &e), 0, "glm4.5: named");
        ok(q.schema && strstr(q.schema, "\"maxItems\":1") && !strstr(q.schema, "get_weather"),
           "glm4.5 named, parallel_tool_calls false: an array of one call of that tool: %s", q.schema ? q.schema : "");
        llm_api_req_free(&q);
        /* Seed-OSS's thinking budget (chat_template_kwargs.thinking_budget): an integer from -1; 0 is enable_thinking
         * false there (its template's budget 0), and nothing for the other formats */
        static const char *const bud_bad[] = { "-2", "1.5", "\"512\"", "2000000", "true" };
        int bud_ok = 1;
        for (size_t k = 0; k < sizeof bud_bad / sizeof bud_bad[0]; k++) {
            snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                     "\"chat_template_kwargs\":{\"thinking_budget\":%s}}", bud_bad[k]);
            bud_ok &= llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_SEED_OSS, &q, &e) != 0 &&
                      e.status == 400 && strstr(e.message, "thinking_budget") != NULL;
            llm_api_req_free(&q);
        }
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"chat_template_kwargs\":{\"thinking_budget\":0}}");
        bud_ok &= llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_SEED_OSS, &q, &e) == 0 &&
                  q.thinking_budget == 0 && q.enable_thinking == 0;
        llm_api_req_free(&q);
        bud_ok &= llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_CHATML, &q, &e) == 0 &&
                  q.enable_thinking == -1;
        llm_api_req_free(&q);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"chat_template_kwargs\":{\"thinking_budget\":-1}}");
        bud_ok &= llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_SEED_OSS, &q, &e) == 0 &&
                  q.thinking_budget == -1 && q.enable_thinking == -1;
        llm_api_req_free(&q);
        ok(bud_ok, "thinking_budget: -2, 1.5, a string, 2000000, true refused; 0 is Seed-OSS's enable_thinking false "
                   "(not ChatML's); -1 none");
        /* the reasoning effort (OpenAI's reasoning_effort, or gpt-oss's chat_template_kwargs.reasoning_effort) */
        static const char *const eff[][2] = { { "\"reasoning_effort\":\"high\"", "high" },
                                              { "\"reasoning_effort\":\"minimal\"", "low" },
                                              { "\"chat_template_kwargs\":{\"reasoning_effort\":\"low\"}", "low" },
                                              { "\"reasoning_effort\":null", NULL },
                                              { "\"reasoning_effort\":\"max\"", "!" },
                                              { "\"reasoning_effort\":3", "!" },
                                              { "\"chat_template_kwargs\":{\"reasoning_effort\":\"HIGH\"}", "!" } };
        int eff_ok = 1;
        for (size_t k = 0; k < sizeof eff / sizeof eff[0]; k++) {
            snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}", eff[k][0]);
            int rc = llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_GPT_OSS, &q, &e);
            if (eff[k][1] != NULL && eff[k][1][0] == '!')
                eff_ok &= rc != 0 && e.status == 400 && strstr(e.message, "reasoning_effort") != NULL;
            else
                eff_ok &= rc == 0 && (eff[k][1] == NULL ? q.reasoning_effort == NULL
                                                         : q.reasoning_effort && !strcmp(q.reasoning_effort, eff[k][1]));
            llm_api_req_free(&q);
        }
        ok(eff_ok, "reasoning_effort: low / medium / high (minimal as low), top level or in chat_template_kwargs; "
                   "another value, or another type, a 400");
        /* Mistral's formats (v3-tekken here): the tools on one line each, joined by ", "; an answer's calls after
         * [TOOL_CALLS] as an array; with tool_choice required / named the answer is held to that array */
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}", tools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_MISTRAL_V3_TEKKEN, &q, &e), 0,
               "mistral: tools parse");
        ok(q.tool_defs && !strcmp(q.tool_defs, "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                                               "\"description\": \"Weather \\\"now\\\"\", \"parameters\": {\"type\": "
                                               "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": "
                                               "{\"type\": \"integer\"}}, \"required\": [\"city\"]}}}, {\"type\": "
                                               "\"function\", \"function\": {\"name\": \"now\"}}"),
           "mistral: each tool as {\"type\": \"function\", \"function\": ...}, joined by \", \":\n%s",
           q.tool_defs ? q.tool_defs : "");
        const char *mc = "Sure.[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
                         "{\"name\": \"now\", \"arguments\": {}}]";
        n2 = QOUT(mc);
        ok(n2 == 2 && cl == 5 && !strcmp(c[0].name, "get_weather") && !strcmp(c[0].args, "{\"city\":\"Oslo\"}") &&
           !strcmp(c[1].name, "now"), "mistral: content, then [TOOL_CALLS] and an array of two calls (%d, content %zu)",
           n2, cl);
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        ok(QOUT(" [TOOL_CALLS] {\"name\": \"now\", \"arguments\": {}}\n") == 1 && cl == 0,
           "mistral: one call without the brackets");
        llm_tool_call_free(&c[0]);
        ok(QOUT("{\"name\":\"now\"}") == 0 && QOUT("[TOOL_CALLS][{\"name\":\"nope\"}]") == 0 &&
           QOUT("[TOOL_CALLS][]") == 0 && QOUT("[TOOL_CALLS][{\"name\":\"now\"}] and text") == 0 &&
           QOUT("[TOOL_CALLS][{\"name\":\"now\"}") == 0 && QOUT("[TOOL_CALLS][{\"name\":\"now\"} {\"name\":\"now\"}]") == 0,
           "mistral: bare JSON, an unknown tool, no calls, text after them, a cut array, no comma: not calls");
        ok(llm_tools_may_be_call(&q, " [TOOL", 6) && !llm_tools_may_be_call(&q, "Hi", 2) &&
           llm_tools_content_end(&q, "Hi [TOOL_CA", 11, 0) == 3 && llm_tools_content_end(&q, "a [b] c", 7, 0) == 7,
           "mistral, streamed: content goes out up to a [TOOL_CALLS] or what may begin one");
        llm_api_req_free(&q);
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":"
                 "{\"type\":\"function\",\"function\":{\"name\":\"now\"}},\"parallel_tool_calls\":false}", tools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_MISTRAL_V7, &q, &e), 0, "mistral: named");
        ok(q.schema && !strcmp(q.schema, "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"name\":"
                                         "{\"const\":\"now\"},\"arguments\":{\"type\":\"object\"}},\"required\":"
                                         "[\"name\",\"arguments\"]},\"minItems\":1,\"maxItems\":1}") &&
           QOUT(" [{\"name\": \"now\", \"arguments\": {}}]") == 1,
           "mistral named: held to an array of that call (one: parallel_tool_calls false), the answer after the "
           "prompt's [TOOL_CALLS] read as the calls: %s", q.schema ? q.schema : "");
        llm_tool_call_free(&c[0]);
        llm_api_req_free(&q);
        const char *mh = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"tool_calls\":"
                         "[{\"id\":\"call_0123456789\",\"function\":{\"name\":\"a\",\"arguments\":\"{}\"}}]},{\"role\":"
                         "\"tool\",\"tool_call_id\":\"call_0123456789\",\"content\":\"1\"}]}";
        is_int(llm_api_parse_chat(LLM_API_CHAT, mh, strlen(mh), LLM_CHAT_MISTRAL_V3, &q, &e), 0,
               "mistral: a history with a call and its result");
        ok(q.n_msgs == 3 && q.msgs[1].calls[0].id && !strcmp(q.msgs[1].calls[0].id, "call_0123456789") &&
           q.msgs[2].call_id && !strcmp(q.msgs[2].call_id, "call_0123456789"), "... the call's id and the result's kept");
        llm_api_req_free(&q);
        bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"tool\",\"tool_call_id\":7,\"content\":\"1\"}]}", "messages",
            "a tool_call_id that is not a string");
        /* Granite: the tools as one list, tojson(indent=4); the calls after <|tool_call|> as an array */
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}", tools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_GRANITE, &q, &e), 0, "granite: tools parse");
        ok(q.tool_defs && !strncmp(q.tool_defs, "[\n    {\n        \"type\": \"function\",\n        \"function\": {\n"
                                              "            \"name\": \"get_weather\",", 84) &&
           !strcmp(q.tool_defs + strlen(q.tool_defs) - 8, "\n    }\n]"),
           "granite: the tools as one list, as tojson(indent=4) prints it:\n%s", q.tool_defs ? q.tool_defs : "");
        n2 = QOUT("<|tool_call|>[{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": "
                  "{\"city\": \"Oslo\"}}]");
        ok(n2 == 2 && cl == 0 && !strcmp(c[1].args, "{\"city\":\"Oslo\"}"), "granite: <|tool_call|> and two calls");
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        ok(QOUT("[TOOL_CALLS][{\"name\":\"now\"}]") == 0 && llm_tools_content_end(&q, "Hi <|tool", 9, 0) == 3,
           "granite: Mistral's tag is text; content held back where <|tool_call|> may begin");
        llm_api_req_free(&q);
        /* SmolLM3: each tool's one-line JSON then a newline (its template's XML tools); calls as ChatML's */
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}", tools);
        is_int(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_SMOLLM3, &q, &e), 0, "smollm3: tools parse");
        ok(q.tool_defs && !strncmp(q.tool_defs, "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"", 55) &&
           strlen(q.tool_defs) > 60 && !strcmp(q.tool_defs + strlen(q.tool_defs) - 53,
                                               "}}\n{\"type\": \"function\", \"function\": {\"name\": \"now\"}}\n"),
           "smollm3: each tool on a line, a newline after it:\n%s", q.tool_defs ? q.tool_defs : "");
        n2 = QOUT("Sure.\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>");
        ok(n2 == 1 && cl == 5, "smollm3: content, then a <tool_call> block");
        for (int k = 0; k < n2; k++) llm_tool_call_free(&c[k]);
        llm_api_req_free(&q);
        /* the answers are the model's text: cut and mangled ones (in buffers of their exact size, no NUL, so
         * that ASan sees any read past them) read as calls or as content, never more than the maximum */
        static const struct { int format; const char *answer; } fz[] = {
            { LLM_CHAT_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}" },
            { LLM_CHAT_CHATML, "Hm.\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>{\"name\": "
                               "\"get_weather\", \"arguments\": {\"city\": \"B\"}}</tool_call>" },
            { LLM_CHAT_MISTRAL_V3, "Ok.[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"now\", "
                                   "\"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}]" },
            { LLM_CHAT_GRANITE, "<|tool_call|>[{\"name\": \"now\", \"arguments\": {}},{\"name\": \"now\"}]" },
        };
        static const char marks[] = "[]{},:\"\\ <|>";
        uint64_t seed = 0x9E3779B97F4A7C15ULL;
        int fuzz_ok = 1, fuzz_calls = 0;
        for (size_t f = 0; f < sizeof fz / sizeof fz[0]; f++) {
            snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}", tools);
            if (llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), fz[f].format, &q, &e) != 0) { fuzz_ok = 0; break; }
            size_t n = strlen(fz[f].answer);
            for (int it = 0; it < 2000; it++) {
                seed ^= seed >> 12; seed ^= seed << 25; seed ^= seed >> 27;
                uint64_t x = seed * 0x2545F4914F6CDD1DULL;
                size_t len = it % 3 == 0 ? (size_t)(x % (n + 1)) : n;
                char *t = malloc(len ? len : 1);
                memcpy(t, fz[f].answer, len);
                if (it % 3 != 0 && len > 0) /* one byte changed, to a structural one or any */
                    t[(x >> 8) % len] = it % 2 ? marks[(x >> 24) % (sizeof marks - 1)] : (char)(x >> 32);
                int got = llm_tools_output(&q, t, len, c, &cl);
                fuzz_ok &= got >= 0 && got <= LLM_TOOLS_MAX_CALLS && cl <= len;
                fuzz_calls += got > 0;
                for (int k = 0; k < got; k++) llm_tool_call_free(&c[k]);
                free(t);
            }
            llm_api_req_free(&q);
        }
        ok(fuzz_ok && fuzz_calls > 0, "8000 cut and mangled answers in four formats read safely (%d as calls)", fuzz_calls);
        /* chat_template_kwargs: enable_thinking (Qwen 3) read, other variables accepted */
        const char *kw = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":"
                         "{\"enable_thinking\":false,\"custom\":1}}";
        is_int(llm_api_parse_chat(LLM_API_CHAT, kw, strlen(kw), LLM_CHAT_CHATML, &q, &e), 0, "chat_template_kwargs parse");
        ok(q.enable_thinking == 0, "... enable_thinking false read");
        llm_api_req_free(&q);
        is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &q, &e), 0, "no kwargs");
        ok(q.enable_thinking == -1, "... not given: the template's default");
        ok(llm_chat_thinks(LLM_CHAT_CHATML, q.enable_thinking) && !llm_chat_thinks(LLM_CHAT_EXAONE4, q.enable_thinking) &&
           llm_chat_thinks(LLM_CHAT_EXAONE4, 1) && !llm_chat_thinks(LLM_CHAT_CHATML, 0),
           "... Qwen 3 thinks unless told not to, EXAONE 4 only when told to");
        llm_api_req_free(&q);
        bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"chat_template_kwargs\":[]}", "chat_template_kwargs",
            "chat_template_kwargs not an object");
        bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}}",
            "chat_template_kwargs", "enable_thinking not a boolean");
        ok(llm_api_parse_chat(LLM_API_CHAT, body, strlen(body), LLM_CHAT_LLAMA2, &q, &e) == -1 && e.status == 400 &&
           strstr(e.message, "Llama 3, ChatML"), "tools on a Llama 2 model: 400 (%s)", e.message);
        llm_api_req_free(&q);
        bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
                          "{\"name\":\"a\",\"arguments\":\"{}\"}},{\"function\":{\"name\":\"b\",\"arguments\":\"{}\"}}]}]}",
            "messages", "two calls in one assistant message");
        bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
                          "{\"name\":\"a\",\"arguments\":\"[1\"}}]}]}", "messages", "call arguments that are not a JSON object");
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\"}],%s,\"tool_choice\":{\"type\":\"function\","
                 "\"function\":{\"name\":\"nope\"}}}", tools);
        bad(LLM_API_CHAT, body, "tool_choice", "a named tool that is not among the tools");
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\"}],%s,\"tool_choice\":\"required\","
                 "\"response_format\":{\"type\":\"json_object\"}}", tools);
        bad(LLM_API_CHAT, body, "tool_choice", "a required call with a response_format");
        bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\","
                          "\"parameters\":{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"integer\",\"multipleOf\":2}}}}}],"
                          "\"tool_choice\":\"required\"}", "tools", "a required call whose parameters the server cannot hold to");
        is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"tools\":[{\"type\":\"function\",\"function\":"
                                   "{\"name\":\"a\",\"parameters\":{\"type\":\"integer\",\"multipleOf\":2}}}]}", &r, &e), 0,
               "... with tool_choice auto the same parameters are only shown to the model");
        llm_api_req_free(&r);
        bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}",
            "tools", "a tool name with a space");
        bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},"
                          "{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]}", "tools", "two tools with one name");
        bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"tools\":[{\"type\":\"function\"}]}", "tools", "a tool without a function");
        bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"tools\":[],\"parallel_tool_calls\":1}", "parallel_tool_calls",
            "parallel_tool_calls as a number");
        bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]}", "tools",
            "tools on completions");
        cJSON *v = cJSON_Parse("{\"a\":[1,2.5,-3e-07,\"\\u00e9\\n\\u0001\"],\"b\":{},\"c\":[],\"d\":null,\"e\":true}");
        char *d1 = llm_tools_dumps(v, -1), *d2 = llm_tools_dumps(v, 2);
        ok(d1 && !strcmp(d1, "{\"a\": [1, 2.5, -3e-07, \"\xc3\xa9\\n\\u0001\"], \"b\": {}, \"c\": [], \"d\": null, \"e\": true}"),
           "json.dumps on one line: %s", d1 ? d1 : "");
        ok(d2 && !strcmp(d2, "{\n  \"a\": [\n    1,\n    2.5,\n    -3e-07,\n    \"\xc3\xa9\\n\\u0001\"\n  ],\n  \"b\": {},\n  \"c\": [],\n"
                             "  \"d\": null,\n  \"e\": true\n}"), "json.dumps with an indent:\n%s", d2 ? d2 : "");
        free(d1);
        free(d2);
        cJSON_Delete(v);
    }
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"functions\":[{\"name\":\"f\"}]}", "functions",
        "functions");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"tool_choice\":\"required\"}", "tool_choice",
        "tool_choice required without tools");
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":[\"x\",\"y\"],\"suffix\":\"end\"}", &r, &e), 0,
           "suffix (fill in the middle) with text prompts");
    ok(r.suffix && !strcmp(r.suffix, "end") && r.suffix_len == 3, "suffix kept");
    llm_api_req_free(&r);
    bad(LLM_API_COMPLETIONS, "{\"prompt\":[1,2],\"suffix\":\"end\"}", "suffix", "suffix with token ids");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"suffix\":\"end\",\"echo\":true}", "suffix", "suffix with echo");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"suffix\":5}", "suffix", "suffix not a string");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"best_of\":3}", "best_of", "best_of 3");
    is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"tools\":[],\"tool_choice\":\"none\"}", &r, &e),
           0, "empty tools and tool_choice none are fine");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"suffix\":\"\",\"best_of\":2,\"n\":2}", &r, &e), 0,
           "an empty suffix and best_of = n are fine");
    ok(r.suffix == NULL, "an empty suffix is none");
    llm_api_req_free(&r);

    /* min_tokens, stop_token_ids (vLLM's) */
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"min_tokens\":3,\"stop_token_ids\":[5,9]}", &r, &e), 0,
           "min_tokens and stop_token_ids parse");
    ok(r.min_tokens == 3 && r.n_stop_token_ids == 2 && r.stop_token_ids[1] == 9, "min_tokens 3, stop ids 5 and 9");
    llm_api_req_free(&r);
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"min_tokens\":-1}", "min_tokens", "min_tokens -1");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"stop_token_ids\":5}", "stop_token_ids", "stop_token_ids not a list");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"stop_token_ids\":[-5]}", "stop_token_ids", "a negative stop token id");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"stop_token_ids\":[1,2,3,4,5,6,7,8,9]}", "stop_token_ids",
        "9 stop token ids");

    /* priority (vLLM's: lower first) */
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"priority\":-3}", &r, &e), 0, "priority parses");
    ok(r.has_priority && r.priority == -3, "priority -3");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\"}", &r, &e), 0, "no priority");
    ok(!r.has_priority, "... not set");
    llm_api_req_free(&r);
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"priority\":1.5}", "priority", "priority 1.5");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"priority\":2000000}", "priority", "priority 2e6");

    /* echo */
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"echo\":true,\"max_tokens\":0,\"logprobs\":1}", &r, &e), 0,
           "echo with max_tokens 0 parses");
    ok(r.echo && r.echo_only && r.logprobs && r.top_logprobs == 1, "echo, nothing generated, logprobs");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"echo\":true,\"max_tokens\":3}", &r, &e), 0, "echo parses");
    ok(r.echo && !r.echo_only && r.max_tokens == 3, "echo, then 3 tokens");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"echo\":true}", &r, &e), 0,
           "chat: echo is not a chat parameter (ignored)");
    ok(!r.echo, "... and not set");
    llm_api_req_free(&r);
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens", "max_tokens 0 without echo");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"echo\":1}", "echo", "echo as a number");

    /* response_format */
    is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"response_format\":{\"type\":\"json_object\"}}",
                 &r, &e), 0, "response_format json_object parses");
    ok(r.json == 1, "json_object: JSON mode");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"response_format\":{\"type\":\"text\"}}", &r, &e), 0,
           "response_format text parses");
    ok(r.json == 0, "text: no JSON mode");
    llm_api_req_free(&r);
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"response_format\":{\"type\":\"json_schema\"}}",
        "response_format", "response_format json_schema without its json_schema object");
    is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"response_format\":{\"type\":\"json_schema\","
                               "\"json_schema\":{\"name\":\"p\",\"strict\":true,\"schema\":{\"type\":\"object\", "
                               "\"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}}}}", &r, &e), 0,
           "response_format json_schema parses");
    ok(r.json == 0 && r.schema != NULL &&
       !strcmp(r.schema, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}") &&
       r.schema_len == strlen(r.schema), "... the schema kept as compact text: %s", r.schema ? r.schema : "(none)");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"response_format\":{\"type\":\"json_schema\","
                               "\"json_schema\":{\"name\":\"any\"}}}", &r, &e), 0,
           "response_format json_schema without a schema parses");
    ok(r.json == 1 && r.schema == NULL, "... as JSON mode");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_json\":{\"enum\":[\"a\",\"b\"]}}", &r, &e), 0,
           "guided_json (vLLM) as an object parses");
    ok(r.schema != NULL && !strcmp(r.schema, "{\"enum\":[\"a\",\"b\"]}"), "... kept");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_json\":\"{\\\"type\\\": \\\"string\\\"}\"}", &r, &e), 0,
           "guided_json as a string parses");
    ok(r.schema != NULL && !strcmp(r.schema, "{\"type\":\"string\"}"), "... kept: %s", r.schema ? r.schema : "(none)");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"response_format\":{\"type\":\"json_schema\","
                               "\"json_schema\":{\"name\":\"p\",\"schema\":{\"type\":\"integer\",\"multipleOf\":2}}}}", &r, &e), -1,
           "a schema with a keyword the recogniser cannot follow is refused");
    ok(e.status == 400 && !strcmp(e.param, "response_format") && !strcmp(e.code, "invalid_schema") &&
       strstr(e.message, "'multipleOf' is not supported") != NULL, "... a 400 that says which: %s (%s)", e.message, e.code);
    llm_api_req_free(&r);
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"response_format\":{\"type\":\"json_schema\","
                      "\"json_schema\":{\"name\":7,\"schema\":{}}}}", "response_format", "a json_schema name that is not a string");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_json\":\"{\"}", "guided_json", "guided_json text that is not JSON");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_json\":{},\"response_format\":{\"type\":\"text\"}}",
        "guided_json", "guided_json and response_format together");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_json\":{\"$ref\":\"#/$defs/x\"}}", "guided_json",
        "a $ref to nothing");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"response_format\":{\"type\":\"yaml\"}}",
        "response_format", "response_format of an unknown type");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"response_format\":{}}", "response_format",
        "response_format without a type");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"response_format\":\"json\"}", "response_format",
        "response_format as a string");
    /* vLLM's guided_choice: the alternation of the strings, escaped, that matches each of them whole and no other */
    is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"guided_choice\":[\"a.b\",\"c\\nd\",\"e\\\"f(g)\","
                               "\"[x]{1}|^$\\\\\"]}", &r, &e), 0, "guided_choice with metacharacters, a newline, a quote");
    {
        char why[256] = "";
        llm_schema *sc = r.regex && r.schema ? llm_schema_regex(r.schema, r.schema_len, why, sizeof why) : NULL;
        static const char *const yes[] = { "a.b", "c\nd", "e\"f(g)", "[x]{1}|^$\\" }, *const no[] = { "axb", "c", "x" };
        int good = sc != NULL;
        for (int i = 0; i < 4 && sc; i++) {
            llm_schema_state *st = llm_schema_state_new(sc);
            good &= st != NULL && llm_schema_feed(st, yes[i], strlen(yes[i])) == 0 && llm_schema_can_end(st);
            llm_schema_state_free(st);
        }
        for (int i = 0; i < 3 && sc; i++) {
            llm_schema_state *st = llm_schema_state_new(sc);
            good &= st != NULL && (llm_schema_feed(st, no[i], strlen(no[i])) != 0 || !llm_schema_can_end(st));
            llm_schema_state_free(st);
        }
        ok(good, "... a regex (%s) that matches each choice whole and not others %s", r.schema ? r.schema : "", why);
        llm_schema_free(sc);
    }
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"structured_outputs\":{\"regex\":\"\\\\d+\"}}", &r, &e), 0,
           "structured_outputs regex parses");
    ok(r.regex == 1 && r.schema != NULL && !strcmp(r.schema, "\\d+"), "... kept as it is");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"json_schema\":{\"type\":\"string\"}}", &r, &e), 0,
           "llama.cpp's json_schema parses");
    ok(r.regex == 0 && r.schema != NULL && !strcmp(r.schema, "{\"type\":\"string\"}"), "... as a schema");
    llm_api_req_free(&r);
    /* the same extensions on Anthropic's Messages API and OpenAI's Responses API (copied into the chat body) */
    is_int(parse(LLM_API_MESSAGES, "{\"model\":\"m\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                                   "\"guided_choice\":[\"yes\",\"no\"]}", &r, &e), 0, "/v1/messages with guided_choice parses");
    ok(r.regex == 1 && r.schema != NULL && !strcmp(r.schema, "yes|no"), "... held to it: %s", r.schema ? r.schema : "");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_RESPONSES, "{\"input\":\"hi\",\"guided_regex\":\"[0-9]+\"}", &r, &e), 0,
           "/v1/responses with guided_regex parses");
    ok(r.regex == 1 && r.schema != NULL && !strcmp(r.schema, "[0-9]+"), "... held to it: %s", r.schema ? r.schema : "");
    llm_api_req_free(&r);
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_regex\":7}", "guided_regex", "guided_regex not a string");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_regex\":\"\"}", "guided_regex", "an empty guided_regex");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_regex\":\"a(?<=b)\"}", "guided_regex", "lookbehind");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_choice\":[\"a\",1]}", "guided_choice", "a choice not a string");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_choice\":[\"a\",\"\"]}", "guided_choice", "an empty choice");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_choice\":[\"a\\u0001\"]}", "guided_choice",
        "a choice with a control character");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_choice\":\"a\"}", "guided_choice", "guided_choice not a list");
    /* GBNF grammars: llama.cpp's grammar, vLLM's guided_grammar and structured_outputs.grammar */
    {
        static const char gbnf[] = "root ::= answer (\",\" ws answer)*  # a comment\n"
                                   "answer ::= \"yes\" | \"no\" | [0-9]{1,3}\nws ::= [ \t\n]*\n";
        char body[512];
        snprintf(body, sizeof body, "{\"prompt\":\"x\",\"grammar\":\"%s\"}",
                 "root ::= answer (\\\",\\\" ws answer)*  # a comment\\n"
                 "answer ::= \\\"yes\\\" | \\\"no\\\" | [0-9]{1,3}\\nws ::= [ \\t\\n]*\\n");
        is_int(parse(LLM_API_COMPLETIONS, body, &r, &e), 0, "llama.cpp's grammar parses");
        ok(r.grammar == 1 && r.regex == 0 && r.json == 0 && r.schema != NULL && r.schema_len == strlen(gbnf) &&
           !strcmp(r.schema, gbnf), "... kept as it is (%zu bytes)", r.schema_len);
        char why[256] = "";
        llm_schema *sc = r.schema ? llm_schema_grammar(r.schema, r.schema_len, why, sizeof why) : NULL;
        llm_schema_state *st = sc ? llm_schema_state_new(sc) : NULL;
        ok(st != NULL && llm_schema_feed(st, "yes, 12,\n no", 12) == 0 && llm_schema_can_end(st) &&
           llm_schema_feed(st, "x", 1) != 0, "... the grammar the engine will follow %s", why);
        llm_schema_state_free(st);
        llm_schema_free(sc);
        llm_api_req_free(&r);
    }
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_grammar\":\"root ::= [a-z]+\"}", &r, &e), 0,
           "vLLM's guided_grammar parses");
    ok(r.grammar == 1 && r.regex == 0 && r.schema != NULL && !strcmp(r.schema, "root ::= [a-z]+"), "... kept as it is");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"structured_outputs\":{\"grammar\":"
                               "\"root ::= \\\"a\\\" | \\\"b\\\"\"}}", &r, &e), 0,
           "structured_outputs grammar parses");
    ok(r.grammar == 1 && r.schema != NULL && !strcmp(r.schema, "root ::= \"a\" | \"b\""), "... kept: %s",
       r.schema ? r.schema : "(none)");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"grammar\":\"root ::= \\\"ok\\\"\"}", &r, &e), 0,
           "/v1/chat/completions with grammar parses");
    ok(r.grammar == 1 && r.schema != NULL && !strcmp(r.schema, "root ::= \"ok\""), "... held to it");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_MESSAGES, "{\"model\":\"m\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\","
                                   "\"content\":\"hi\"}],\"guided_grammar\":\"root ::= [0-9]+\"}", &r, &e), 0,
           "/v1/messages with guided_grammar parses");
    ok(r.grammar == 1 && r.schema != NULL && !strcmp(r.schema, "root ::= [0-9]+"), "... held to it: %s",
       r.schema ? r.schema : "");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_MESSAGES, "{\"model\":\"m\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\","
                                   "\"content\":\"hi\"}],\"grammar\":\"root ::= \\\"y\\\"\"}", &r, &e), 0,
           "/v1/messages with grammar parses");
    ok(r.grammar == 1 && r.schema != NULL && !strcmp(r.schema, "root ::= \"y\""), "... held to it");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_RESPONSES, "{\"input\":\"hi\",\"grammar\":\"root ::= [0-9]+\"}", &r, &e), 0,
           "/v1/responses with grammar parses");
    ok(r.grammar == 1 && r.schema != NULL && !strcmp(r.schema, "root ::= [0-9]+"), "... held to it: %s",
       r.schema ? r.schema : "");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_RESPONSES, "{\"input\":\"hi\",\"guided_grammar\":\"root ::= \\\"n\\\"\"}", &r, &e), 0,
           "/v1/responses with guided_grammar parses");
    ok(r.grammar == 1 && r.schema != NULL && !strcmp(r.schema, "root ::= \"n\""), "... held to it");
    llm_api_req_free(&r);
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"grammar\":7}", "grammar", "grammar not a string");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_grammar\":{\"root\":\"x\"}}", "guided_grammar",
        "guided_grammar not a string");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"structured_outputs\":{\"grammar\":[]}}", "structured_outputs",
        "structured_outputs.grammar not a string");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"grammar\":\"\"}", "grammar", "an empty grammar");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_grammar\":\"\"}", "guided_grammar", "an empty guided_grammar");
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"grammar\":\"root ::= x\"}", &r, &e), -1,
           "a grammar with a rule used but not defined is refused");
    ok(e.status == 400 && !strcmp(e.param, "grammar") && !strcmp(e.code, "invalid_value") &&
       strstr(e.message, "rule 'x' is used but not defined") != NULL, "... a 400 that names the rule: %s", e.message);
    llm_api_req_free(&r);
    is_int(parse(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"guided_grammar\":\"root ::= a\\na ::= a \\\"x\\\" | "
                                      "\\\"y\\\"\"}", &r, &e), -1, "a left-recursive grammar is refused");
    ok(e.status == 400 && !strcmp(e.param, "guided_grammar") && strstr(e.message, "rule 'a' is left-recursive") != NULL,
       "... a 400 that names the rule: %s", e.message);
    llm_api_req_free(&r);
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"structured_outputs\":{\"grammar\":\"start ::= \\\"a\\\"\"}}",
        "structured_outputs", "structured_outputs.grammar without a root");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"a\"}", "grammar",
        "a grammar with an open literal");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"structured_outputs\":{\"grammar\":\"root ::= x\",\"regex\":\"a\"}}",
        "structured_outputs", "structured_outputs with a grammar and a regex");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"a\\\"\",\"guided_regex\":\"a\"}",
        "guided_regex", "grammar and guided_regex together");
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"a\\\"\","
                             "\"guided_grammar\":\"root ::= \\\"a\\\"\"}", "guided_grammar",
        "grammar and guided_grammar together");
    bad(LLM_API_CHAT, "{\"messages\":[{\"role\":\"user\"}],\"grammar\":\"root ::= \\\"a\\\"\",\"response_format\":"
                      "{\"type\":\"json_object\"}}", "grammar", "grammar and response_format together");
    {
        static char big[LLM_GRAMMAR_MAX_TEXT + 100];
        int at = snprintf(big, sizeof big, "{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"");
        while (at < LLM_GRAMMAR_MAX_TEXT + 80) big[at++] = 'a'; /* the grammar's text: 65536 + 50 bytes */
        snprintf(big + at, sizeof big - (size_t)at, "\\\"\"}");
        bad(LLM_API_COMPLETIONS, big, "grammar", "a grammar past LLM_GRAMMAR_MAX_TEXT bytes");
    }
    bad(LLM_API_COMPLETIONS, "{\"prompt\":\"x\",\"json_schema\":{},\"guided_regex\":\"a\"}", "guided_regex",
        "json_schema and guided_regex together");
    {
        char big[3000];
        int at = snprintf(big, sizeof big, "{\"prompt\":\"x\",\"guided_choice\":[");
        for (int i = 0; i < 150; i++)
            at += snprintf(big + at, sizeof big - (size_t)at, "%s\"choice%03d\"", i ? "," : "", i);
        snprintf(big + at, sizeof big - (size_t)at, "]}");
        bad(LLM_API_COMPLETIONS, big, "guided_choice", "choices past the pattern's length");
    }

    /* mutations of full bodies: every parse ends in 0 or a 400 (ASan/UBSan in make san catch the rest) */
    {
        static const char *const seeds[] = {
            "{\"prompt\":[\"Once\",\"upon\"],\"n\":2,\"echo\":true,\"logprobs\":3,\"max_tokens\":0,"
            "\"logit_bias\":{\"13\":-100,\"7\":2.5},\"stop\":[\"a\",\"b\"],\"seed\":4}",
            "{\"prompt\":[[1,2,3],[4,5]],\"response_format\":{\"type\":\"json_object\"},\"stream\":true,"
            "\"stream_options\":{\"include_usage\":true},\"temperature\":0.5,\"top_p\":0.9}",
            "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":"
            "[{\"type\":\"text\",\"text\":\"x\"}]}],\"logprobs\":true,\"top_logprobs\":2,"
            "\"response_format\":{\"type\":\"text\"},\"logit_bias\":{\"0\":1}}",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
            "\"json_schema\":{\"name\":\"p\",\"schema\":{\"$defs\":{\"t\":{\"type\":[\"string\",\"null\"],\"maxLength\":3}},"
            "\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/t\"},\"b\":{\"enum\":[1,\"x\",[2]]},"
            "\"c\":{\"type\":\"array\",\"items\":{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"integer\"}]},\"minItems\":1}},"
            "\"required\":[\"a\",\"c\"]}}}}",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"w\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
            "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":[1,2]}\"}}]},"
            "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}],\"tools\":[{\"type\":\"function\",\"function\":"
            "{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"array\",\"items\":"
            "{\"type\":\"integer\",\"minimum\":0}}},\"required\":[\"x\"]}}}],\"tool_choice\":\"required\"}",
            "{\"input\":[\"a cat\",\"a dog\"],\"encoding_format\":\"base64\",\"dimensions\":8,\"user\":\"u\"}",
            "{\"input\":[[1,2,3],[4,5]],\"model\":\"m\",\"encoding_format\":\"float\"}",
            "{\"prompt\":\"def f(\",\"suffix\":\"return x\",\"max_tokens\":8,\"stop\":[\"\\n\"]}",
            "{\"query\":\"q\",\"documents\":[\"a\",{\"text\":\"b\"}],\"top_n\":1,\"return_documents\":false,"
            "\"instruction\":\"i\"}",
        };
        ok(api_mutate(seeds, 9, 5400, 0x1234567u, api_kind, LLM_CHAT_LLAMA3),
           "5400 mutated bodies: each parsed or refused with a 400");
    }

    /* rerank: the query, documents as strings or {"text"}, top_n (cut to the documents), return_documents */
    is_int(parse(LLM_API_RERANK, "{\"query\":\"q?\",\"documents\":[\"a\",{\"text\":\"bc\"}],\"top_n\":9,"
                 "\"return_documents\":false,\"instruction\":\"Find it\"}", &r, &e), 0, "rerank parses");
    ok(!strcmp(r.query, "q?") && r.n_prompts == 2 && !strcmp(r.batch[1], "bc") && r.batch_len[1] == 2 &&
       r.top_n == 2 && !r.return_documents && !strcmp(r.instruction, "Find it"),
       "rerank: query, two documents, top_n cut to 2, no documents back, the instruction");
    llm_api_req_free(&r);
    is_int(parse(LLM_API_RERANK, "{\"query\":\"q\",\"documents\":[\"a\"]}", &r, &e), 0, "minimal rerank parses");
    ok(r.top_n == 0 && r.return_documents && r.instruction == NULL, "rerank defaults: all, with the documents");
    llm_api_req_free(&r);
    bad(LLM_API_RERANK, "{\"documents\":[\"a\"]}", "query", "rerank without a query");
    bad(LLM_API_RERANK, "{\"query\":\"\",\"documents\":[\"a\"]}", "query", "rerank with an empty query");
    bad(LLM_API_RERANK, "{\"query\":\"q\",\"documents\":\"a\"}", "documents", "rerank documents not an array");
    bad(LLM_API_RERANK, "{\"query\":\"q\",\"documents\":[{\"text\":1}]}", "documents", "a document without text");
    bad(LLM_API_RERANK, "{\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":0}", "top_n", "top_n 0");

    /* error JSON */
    llm_api_seterr(&e, 429, NULL, "queue_full", "full %d", 1);
    char *js = llm_api_error_json(&e);
    ok(js && !strcmp(js, "{\"error\":{\"message\":\"full 1\",\"type\":\"rate_limit_error\",\"param\":null,\"code\":\"queue_full\"}}"),
       "error JSON shape: %s", js ? js : "(null)");
    cJSON_free(js);
    llm_api_seterr(&e, 400, "n", NULL, "quote \" here");
    js = llm_api_error_json(&e);
    ok(js && strstr(js, "\"message\":\"quote \\\" here\"") && strstr(js, "\"param\":\"n\"") && strstr(js, "\"code\":null"),
       "error JSON escapes and nulls: %s", js ? js : "(null)");
    cJSON_free(js);
    return done_testing();
}
