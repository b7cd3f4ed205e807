/* TGI's API (POST /generate, /generate_stream, POST /): bodies turned into the completions bodies they mean
 * (ngx_module/llm_tgi.c) and parsed through llm_api.c, every refusal with the parameter it names; the output
 * builder (ngx_module/ngx_http_llm_tgi_out.c): the stream's events (a token's text the text it released), the
 * whole answer with and without details, POST /'s list of one, return_full_text, a stream whose first token
 * ended it; the error object and its status. */
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
#include "../ngx_module/ngx_http_llm_tgi_out.c"
#include "api_mutate.h"
#include "token_json.h"

static int parse(llm_api_kind kind, const char *body, llm_api_req *r, llm_api_err *e)
{
    memset(e, 0, sizeof *e);
    return llm_api_parse(kind, body, strlen(body), r, e);
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

static int same_json(const cJSON *v, const char *want, const char *what)
{
    char *s = v ? cJSON_PrintUnformatted(v) : strdup("(none)");
    int same = !strcmp(s, want);
    ok(same, "%s", what);
    if (!same) printf("#   got  %s\n#   want %s\n", s, want);
    free(s);
    return same;
}

static void test_parse(void)
{
    llm_api_req r;
    llm_api_err e;

    /* the parameters huggingface_hub sends, most of them null: greedy (do_sample false), details */
    int rc = parse(LLM_API_TGI_GENERATE,
                   "{\"inputs\":\"Once upon a time\",\"model\":\"their-name\",\"parameters\":{\"adapter_id\":null,"
                   "\"best_of\":null,\"decoder_input_details\":false,\"details\":true,\"do_sample\":false,"
                   "\"frequency_penalty\":null,\"grammar\":null,\"max_new_tokens\":20,\"repetition_penalty\":null,"
                   "\"return_full_text\":false,\"seed\":null,\"stop\":[],\"temperature\":null,\"top_k\":null,"
                   "\"top_n_tokens\":null,\"top_p\":null,\"truncate\":null,\"typical_p\":null,\"watermark\":false},"
                   "\"stream\":true}", &r, &e);
    ok(rc == 0, "huggingface_hub's body parses (%s)", e.message);
    ok(r.kind == LLM_API_COMPLETIONS && r.api == LLM_API_TGI_GENERATE, "a completion, of TGI's API");
    ok(r.prompt && !strcmp(r.prompt, "Once upon a time") && r.max_tokens == 20, "inputs -> prompt, max_new_tokens");
    ok(r.temperature == 0, "do_sample false and no sampling parameter: greedy");
    ok(!r.stream, "/generate does not stream, whatever the body says");
    ok(r.tgi_details && !r.tgi_full_text && r.keep_last == 0 && r.n_stop == 0, "details; no full text, truncation, stops");
    ok(r.model == NULL, "the body's model name is not read");
    ok(!r.logprobs, "no alternatives asked for");
    llm_api_req_free(&r);

    rc = parse(LLM_API_TGI_STREAM, "{\"inputs\":\"Hi\",\"parameters\":{\"temperature\":0.7,\"top_k\":40,\"top_p\":0.9,"
               "\"seed\":7,\"repetition_penalty\":1.2,\"frequency_penalty\":0.5,\"stop\":[\"\\n\",\"END\"],"
               "\"return_full_text\":true,\"truncate\":100,\"top_n_tokens\":3}}", &r, &e);
    ok(rc == 0 && r.stream, "/generate_stream streams (%s)", e.message);
    ok(r.temperature == 0.7 && r.top_k == 40 && r.top_p == 0.9 && r.has_seed && r.seed == 7 &&
       r.repetition_penalty == 1.2 && r.frequency_penalty == 0.5, "sampling parameters carried over");
    ok(r.n_stop == 2 && !strcmp(r.stop[1], "END"), "stop sequences");
    ok(r.tgi_full_text && r.keep_last == 100, "return_full_text, truncate");
    ok(r.logprobs && r.top_logprobs == 3, "top_n_tokens: 3 alternatives a token");
    llm_api_req_free(&r);

    rc = parse(LLM_API_TGI_GENERATE, "{\"inputs\":\"Hi\",\"parameters\":{\"top_p\":0.5}}", &r, &e);
    ok(rc == 0 && r.temperature == 1 && r.top_p == 0.5, "top_p below 1 alone samples (TGI's warpers)");
    llm_api_req_free(&r);
    rc = parse(LLM_API_TGI_GENERATE, "{\"inputs\":\"Hi\",\"parameters\":{\"typical_p\":0.95}}", &r, &e);
    ok(rc == 0 && r.temperature == 1 && r.typical_p == 0.95, "typical_p below 1 (LangChain's default 0.95) samples with "
       "it (%s)", e.message);
    llm_api_req_free(&r);
    rc = parse(LLM_API_TGI_GENERATE, "{\"inputs\":\"Hi\",\"parameters\":{\"do_sample\":true}}", &r, &e);
    ok(rc == 0 && r.temperature == 1, "do_sample alone samples at temperature 1");
    llm_api_req_free(&r);
    rc = parse(LLM_API_TGI_GENERATE, "{\"inputs\":\"Hi\",\"parameters\":{\"top_p\":1.0,\"best_of\":1,\"typical_p\":1}}",
               &r, &e);
    ok(rc == 0 && r.temperature == 0, "top_p 1, best_of 1, typical_p 1: neutral, still greedy (%s)", e.message);
    llm_api_req_free(&r);
    rc = parse(LLM_API_TGI_GENERATE, "{\"inputs\":\"Hi\"}", &r, &e);
    ok(rc == 0 && r.temperature == 0 && r.max_tokens == 0, "no parameters: greedy, the server's default length");
    llm_api_req_free(&r);

    /* POST /: the body's stream decides */
    rc = parse(LLM_API_TGI, "{\"inputs\":\"Hi\",\"stream\":true}", &r, &e);
    ok(rc == 0 && r.stream, "POST / with stream true streams");
    llm_api_req_free(&r);
    rc = parse(LLM_API_TGI, "{\"inputs\":\"Hi\"}", &r, &e);
    ok(rc == 0 && !r.stream, "POST / without stream does not");
    llm_api_req_free(&r);

    /* grammars: json (an object or its text), json_schema, regex */
    rc = parse(LLM_API_TGI_GENERATE, "{\"inputs\":\"Hi\",\"parameters\":{\"grammar\":{\"type\":\"json\",\"value\":"
               "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}}}", &r, &e);
    ok(rc == 0 && r.schema && strstr(r.schema, "\"integer\"") && !r.regex, "a json grammar: the schema (%s)", e.message);
    llm_api_req_free(&r);
    rc = parse(LLM_API_TGI_GENERATE, "{\"inputs\":\"Hi\",\"parameters\":{\"grammar\":{\"type\":\"json\",\"value\":"
               "\"{\\\"type\\\":\\\"boolean\\\"}\"}}}", &r, &e);
    ok(rc == 0 && r.schema && strstr(r.schema, "boolean"), "a json grammar as text (%s)", e.message);
    llm_api_req_free(&r);
    rc = parse(LLM_API_TGI_GENERATE, "{\"inputs\":\"Hi\",\"parameters\":{\"grammar\":{\"type\":\"json_schema\",\"value\":"
               "{\"name\":\"n\",\"schema\":{\"type\":\"string\"}}}}}", &r, &e);
    ok(rc == 0 && r.schema && strstr(r.schema, "string"), "a json_schema grammar (%s)", e.message);
    llm_api_req_free(&r);
    rc = parse(LLM_API_TGI_GENERATE, "{\"inputs\":\"Hi\",\"parameters\":{\"grammar\":{\"type\":\"regex\",\"value\":"
               "\"(yes|no)\"}}}", &r, &e);
    ok(rc == 0 && r.regex && r.schema && !strcmp(r.schema, "(yes|no)"), "a regex grammar (%s)", e.message);
    llm_api_req_free(&r);

    rc = parse(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"max_new_tokens\":0}}", &r, &e);
    ok(rc == -1 && strstr(e.message, "'parameters.max_new_tokens' must be") && !strstr(e.message, "'max_tokens'"),
       "the message names the parameter as the body has it: %s", e.message);
    llm_api_req_free(&r);

    /* refusals, each naming the parameter as the body has it */
    bad(LLM_API_TGI_GENERATE, "{\"parameters\":{}}", "inputs", "no inputs");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"\"}", "inputs", "empty inputs");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":[1,2]}", "inputs", "inputs not a string");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":[]}", "parameters", "parameters not an object");
    bad(LLM_API_TGI, "{\"inputs\":\"x\",\"stream\":\"yes\"}", "stream", "stream not a boolean");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"max_new_tokens\":0}}", "parameters.max_new_tokens",
        "max_new_tokens 0");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"max_new_tokens\":1.5}}", "parameters.max_new_tokens",
        "max_new_tokens not whole");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"temperature\":0}}", "parameters.temperature",
        "temperature 0 (TGI: strictly positive)");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"temperature\":9}}", "parameters.temperature",
        "temperature over this server's 2");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"top_k\":0}}", "parameters.top_k", "top_k 0");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"top_p\":0}}", "parameters.top_p", "top_p 0");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"repetition_penalty\":0}}",
        "parameters.repetition_penalty", "repetition_penalty 0");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"stop\":[1]}}", "parameters.stop", "a stop not text");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"seed\":\"7\"}}", "parameters.seed", "seed as text");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"do_sample\":1}}", "parameters.do_sample", "do_sample not a boolean");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"details\":\"true\"}}", "parameters.details",
        "details not a boolean");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"best_of\":2}}", "parameters.best_of", "best_of 2");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"typical_p\":0}}", "parameters.typical_p",
        "typical_p 0");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"typical_p\":1.5}}", "parameters.typical_p",
        "typical_p over 1");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"watermark\":true}}", "parameters.watermark", "watermark");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"decoder_input_details\":true}}",
        "parameters.decoder_input_details", "decoder_input_details");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"adapter_id\":\"lora-1\"}}", "parameters.adapter_id", "adapter_id");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"truncate\":0}}", "parameters.truncate", "truncate 0");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"top_n_tokens\":21}}", "parameters.top_n_tokens",
        "top_n_tokens 21");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"grammar\":{\"type\":\"lark\",\"value\":\"x\"}}}",
        "parameters.grammar", "a grammar type not known");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"grammar\":{\"type\":\"regex\",\"value\":3}}}",
        "parameters.grammar", "a regex that is not text");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"grammar\":{\"type\":\"json\"}}}", "parameters.grammar",
        "a grammar without a value");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"grammar\":{\"type\":\"json_schema\",\"value\":"
        "{\"name\":\"n\"}}}}", "parameters.grammar", "a json_schema grammar without its schema");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"grammar\":{\"type\":\"regex\",\"value\":\"(a\"}}}",
        "parameters.grammar", "a regex that does not compile");
    bad(LLM_API_TGI_GENERATE, "{\"inputs\":\"x\",\"parameters\":{\"grammar\":{\"type\":\"json\",\"value\":"
        "{\"type\":\"object\",\"$ref\":\"#/x\"}}}}", "parameters.grammar", "a schema that does not compile");
}

static void test_output(void)
{
    const ngx_http_llm_typed_t *ty = &ngx_http_llm_tg_typed;
    ok(ty->data_only == 1 && ty->ndjson == 0, "the builder's events are plain data: lines");
    llm_api_req q;
    memset(&q, 0, sizeof q);
    q.api = LLM_API_TGI_STREAM;
    q.stream = 1;
    q.tgi_details = 1;
    ngx_http_llm_tg_t tg;
    ngx_http_llm_end_t end = { "length", NULL, 5, 3, 0, 0 };

    /* streamed: a token whose text was held (a stop string's start), then released with the next; the flush at
     * the end joins the last token */
    is_int(ngx_http_llm_tg_init(&tg, &q, 1, 42, 2), 0, "builder ready");
    cJSON *ev = cJSON_CreateArray(), *whole = NULL;
    int rc = ty->begin(&tg, ev);
    rc |= ty->text(&tg, ev, 0, " there", 6, tok(383, " there", -0.5));
    rc |= ty->text(&tg, ev, 0, "", 0, tok(286, " wa", -0.25));
    rc |= ty->text(&tg, ev, 0, " was a", 6, tok(261, " a", -0.125));
    ok(rc == 0 && cJSON_GetArraySize(ev) == 2, "each token's event goes out when the next comes (%d)", cJSON_GetArraySize(ev));
    rc |= ty->text(&tg, ev, 0, "!", 1, NULL);
    rc |= ty->end(&tg, ev, &end, NULL);
    ok(rc == 0 && cJSON_GetArraySize(ev) == 3, "three events, one per token");
    same_json(cJSON_GetArrayItem(ev, 0), "{\"index\":1,\"token\":{\"id\":383,\"text\":\" there\",\"logprob\":-0.5,"
              "\"special\":false},\"top_tokens\":null,\"generated_text\":null,\"details\":null}", "a token's event");
    same_json(cJSON_GetArrayItem(ev, 1), "{\"index\":2,\"token\":{\"id\":286,\"text\":\"\",\"logprob\":-0.25,"
              "\"special\":false},\"top_tokens\":null,\"generated_text\":null,\"details\":null}",
              "a token that released nothing yet: empty text");
    same_json(cJSON_GetArrayItem(ev, 2), "{\"index\":3,\"token\":{\"id\":261,\"text\":\" was a!\",\"logprob\":-0.125,"
              "\"special\":false},\"top_tokens\":null,\"generated_text\":\" there was a!\",\"details\":{\"finish_reason\":"
              "\"length\",\"generated_tokens\":3,\"seed\":42,\"input_length\":5}}",
              "the last: the held text and the flush, generated_text, details with the seed");
    cJSON_Delete(ev);
    ty->free(&tg);

    /* streamed, the first token the end: the end-of-generation token, special; stop sequence; greedy: seed null */
    q.tgi_details = 0;
    ngx_http_llm_tg_init(&tg, &q, 0, 42, 2);
    ev = cJSON_CreateArray();
    end.finish = "stop";
    rc = ty->end(&tg, ev, &end, NULL);
    same_json(cJSON_GetArrayItem(ev, 0), "{\"index\":1,\"token\":{\"id\":2,\"text\":\"\",\"logprob\":null,\"special\":true},"
              "\"top_tokens\":null,\"generated_text\":\"\",\"details\":null}",
              "nothing generated: the end token's event; no details unless asked");
    cJSON_Delete(ev);
    ty->free(&tg);

    /* top tokens go beside the token */
    q.tgi_details = 1;
    ngx_http_llm_tg_init(&tg, &q, 0, 0, 2);
    ev = cJSON_CreateArray();
    cJSON *t = tok(5, "a", -0.1), *top = cJSON_AddArrayToObject(t, "top_tokens");
    cJSON_AddItemToArray(top, tok(5, "a", -0.1));
    cJSON_AddItemToArray(top, tok(6, "b", -2.5));
    end.stop_seq = "\n";
    rc = ty->text(&tg, ev, 0, "a", 1, t);
    rc |= ty->end(&tg, ev, &end, NULL);
    same_json(cJSON_GetArrayItem(ev, 0), "{\"index\":1,\"token\":{\"id\":5,\"text\":\"a\",\"logprob\":-0.1,\"special\":false},"
              "\"top_tokens\":[{\"id\":5,\"text\":\"a\",\"logprob\":-0.1,\"special\":false},{\"id\":6,\"text\":\"b\","
              "\"logprob\":-2.5,\"special\":false}],\"generated_text\":\"a\",\"details\":{\"finish_reason\":"
              "\"stop_sequence\",\"generated_tokens\":3,\"seed\":null,\"input_length\":5}}",
              "top_tokens beside the token; a stop string: stop_sequence");
    ok(rc == 0, "no failure");
    cJSON_Delete(ev);
    ty->free(&tg);

    /* the whole answer: details with each token (its top tokens in a list beside), return_full_text */
    q.stream = 0;
    q.api = LLM_API_TGI_GENERATE;
    q.tgi_full_text = 1;
    q.prompt = "Once";
    q.prompt_len = 4;
    ngx_http_llm_tg_init(&tg, &q, 0, 0, 2);
    cJSON *toks = cJSON_CreateArray();
    cJSON_AddItemToArray(toks, tok(383, " there", -0.5));
    t = tok(286, " was", -0.25);
    top = cJSON_AddArrayToObject(t, "top_tokens");
    cJSON_AddItemToArray(top, tok(286, " was", -0.25));
    cJSON_AddItemToArray(toks, t);
    end.finish = "stop";
    end.stop_seq = NULL;
    end.output = 2;
    rc = ty->text(&tg, NULL, 0, " there was", 10, toks);
    rc |= ty->end(&tg, NULL, &end, &whole);
    same_json(whole, "{\"generated_text\":\"Once there was\",\"details\":{\"finish_reason\":\"eos_token\","
              "\"generated_tokens\":2,\"seed\":null,\"prefill\":[],\"tokens\":[{\"id\":383,\"text\":\" there\","
              "\"logprob\":-0.5,\"special\":false},{\"id\":286,\"text\":\" was\",\"logprob\":-0.25,\"special\":false}],"
              "\"top_tokens\":[[{\"id\":286,\"text\":\" was\",\"logprob\":-0.25,\"special\":false}]]}}",
              "the whole answer: the prompt first, eos_token, the tokens");
    ok(rc == 0, "no failure");
    cJSON_Delete(whole);
    ty->free(&tg);

    /* POST / without stream, no details: a list of one */
    q.api = LLM_API_TGI;
    q.tgi_details = 0;
    q.tgi_full_text = 0;
    ngx_http_llm_tg_init(&tg, &q, 0, 0, 2);
    rc = ty->text(&tg, NULL, 0, "Hi", 2, NULL);
    rc |= ty->end(&tg, NULL, &end, &whole);
    same_json(whole, "[{\"generated_text\":\"Hi\"}]", "POST /: [{\"generated_text\"}]");
    cJSON_Delete(whole);
    ty->free(&tg);

    ev = cJSON_CreateArray();
    rc = ty->error(&tg, ev, "timeout", "server_error", "the request timed out");
    rc |= ty->error(&tg, ev, "queue_full", "rate_limit_error", "full");
    same_json(ev, "[{\"error\":\"the request timed out\",\"error_type\":\"generation\"},{\"error\":\"full\","
              "\"error_type\":\"overloaded\"}]", "errors mid-stream: generation, overloaded");
    cJSON_Delete(ev);

    llm_api_err e;
    llm_api_seterr(&e, 400, "max_tokens", "invalid_value", "too many");
    llm_tgi_param(&e);
    char *s = llm_tgi_error_json(&e);
    ok(s && !strcmp(s, "{\"error\":\"too many\",\"error_type\":\"validation\"}") && llm_tgi_status(400) == 422 &&
       !strcmp(e.param, "parameters.max_new_tokens"), "a refusal: 422, validation (%s)", s);
    cJSON_free(s);
    llm_api_seterr(&e, 503, NULL, "engine_unavailable", "down");
    s = llm_tgi_error_json(&e);
    ok(s && strstr(s, "\"overloaded\"") && llm_tgi_status(503) == 503, "503: overloaded");
    cJSON_free(s);
}

/* ngx_http_llm_tg_token on a real vocabulary: the token's own text, its alternatives. */
static void test_token(void)
{
    llm_err err = { "" };
    llm_tokenizer *tk = llm_tok_load("../shared/models/stories260K/stories260K.gguf", &err);
    ok(tk != NULL, "stories260K's tokenizer (%s)", err.msg);
    if (tk == NULL) return;
    llm_shm_token t;
    memset(&t, 0, sizeof t);
    t.id = 383;
    t.logprob = -0.5f;
    t.n_top = 2;
    t.top[0] = (llm_shm_logprob){ 383, -0.5f };
    t.top[1] = (llm_shm_logprob){ 286, -1.5f };
    cJSON *o = ngx_http_llm_tg_token(tk, &t, 1);
    same_json(o, "{\"id\":383,\"text\":\" there\",\"logprob\":-0.5,\"special\":false,\"top_tokens\":[{\"id\":383,"
              "\"text\":\" there\",\"logprob\":-0.5,\"special\":false}]}", "a token with one of its two alternatives");
    cJSON_Delete(o);
    o = ngx_http_llm_tg_token(tk, &t, 0);
    ok(o && !cJSON_GetObjectItem(o, "top_tokens"), "without alternatives asked: none");
    cJSON_Delete(o);
    llm_tok_free(tk);
}

static llm_api_kind tgi_kind(int k, int seed) { (void)seed; return (llm_api_kind)(LLM_API_TGI + k % 3); }

static void test_mutations(void)
{
    static const char *const seeds[] = {
        "{\"inputs\":\"Once upon\",\"parameters\":{\"max_new_tokens\":9,\"stop\":[\"x\"],\"temperature\":0.5,"
        "\"details\":true,\"top_n_tokens\":2,\"truncate\":4,\"grammar\":{\"type\":\"regex\",\"value\":\"[ab]+\"}},"
        "\"stream\":false}",
        "{\"inputs\":\"p\",\"parameters\":{\"do_sample\":true,\"seed\":3,\"top_k\":2,\"return_full_text\":true,"
        "\"grammar\":{\"type\":\"json\",\"value\":{\"type\":\"object\"}}}}",
    };
    ok(api_mutate(seeds, 2, 3000, 0x7a1e5u, tgi_kind, LLM_CHAT_LLAMA3),
       "3000 mutated bodies: each parsed or refused with a 400");
}

int main(void)
{
    test_parse();
    test_output();
    test_token();
    test_mutations();
    return done_testing();
}
