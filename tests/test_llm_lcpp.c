/* llama.cpp server's own /completion API: bodies turned into the completions bodies they mean
 * (ngx_module/llm_lcpp.c) and parsed through llm_api.c, every refusal with the field it names; llama.cpp's
 * /tokenize shape ({"content"}); the output builder (ngx_module/ngx_http_llm_lcpp_out.c): the stream's events,
 * the last one's fields, the whole answer with tokens and completion_probabilities, each stop_type. */
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
#include "../ngx_module/ngx_http_llm_lcpp_out.c"
#include "api_mutate.h"
#include "token_json.h"

static int parse(llm_api_kind kind, const char *body, llm_api_req *r, llm_api_err *e)
{
    memset(e, 0, sizeof *e);
    return llm_api_parse(kind, body, strlen(body), r, e);
}

static void bad(const char *body, const char *param, const char *what)
{
    llm_api_req r;
    llm_api_err e;
    int rc = parse(LLM_API_LCPP, body, &r, &e);
    ok(rc == -1 && e.status == 400 && !strcmp(e.param, param), "%s -> 400 param '%s' (got %d '%s': %s)", what,
       param, e.status, e.param, e.message);
    llm_api_req_free(&r);
}

/* v without the fields that change from run to run (timings), printed. */
static int same_json(const cJSON *v, const char *want, const char *what)
{
    cJSON *c = v ? cJSON_Duplicate(v, 1) : NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(c, "timings");
    char *s = c ? cJSON_PrintUnformatted(c) : strdup("(none)");
    int same = !strcmp(s, want);
    ok(same, "%s", what);
    if (!same) printf("#   got  %s\n#   want %s\n", s, want);
    free(s);
    cJSON_Delete(c);
    return same;
}

static void test_parse(void)
{
    llm_api_req r;
    llm_api_err e;
    int rc = parse(LLM_API_LCPP, "{\"prompt\":\"Once upon a time\",\"n_predict\":20,\"temperature\":0.7,\"top_k\":40,"
                   "\"top_p\":0.95,\"min_p\":0.05,\"typical_p\":0.9,\"repeat_penalty\":1.1,\"repeat_last_n\":64,"
                   "\"presence_penalty\":0.1,\"frequency_penalty\":0.2,\"seed\":42,\"stop\":[\"\\n\"],\"stream\":true,"
                   "\"n_probs\":3,\"return_tokens\":true,\"cache_prompt\":true,\"id_slot\":-1,\"n_keep\":0,"
                   "\"samplers\":[\"top_k\",\"temperature\"],\"mirostat\":0,\"ignore_eos\":true}", &r, &e);
    ok(rc == 0, "a llama.cpp body parses (%s)", e.message);
    ok(r.kind == LLM_API_COMPLETIONS && r.api == LLM_API_LCPP && r.prompt && !strcmp(r.prompt, "Once upon a time"),
       "a completion, of llama.cpp's API");
    ok(r.max_tokens == 20 && r.temperature == 0.7 && r.top_k == 40 && fabs(r.top_p - 0.95) < 1e-9 &&
       fabs(r.min_p - 0.05) < 1e-9 && fabs(r.typical_p - 0.9) < 1e-9, "n_predict, temperature, top_k, top_p, min_p, typical_p");
    ok(fabs(r.repetition_penalty - 1.1) < 1e-9 && r.penalty_last_n == 64 && r.presence_penalty == 0.1 &&
       r.frequency_penalty == 0.2, "repeat_penalty with its window, presence and frequency penalties");
    ok(r.has_seed && r.seed == 42 && r.n_stop == 1 && r.stream && r.ignore_eos, "seed, stop, stream, ignore_eos");
    ok(r.logprobs && r.top_logprobs == 3 && r.lcpp_tokens, "n_probs 3, return_tokens");
    llm_api_req_free(&r);

    rc = parse(LLM_API_LCPP, "{\"prompt\":[1,403,407],\"n_predict\":-1,\"seed\":-1,\"top_k\":0,\"repeat_last_n\":-1}", &r, &e);
    ok(rc == 0 && r.ids && r.n_ids == 3 && r.ids[2] == 407, "token ids as the prompt (%s)", e.message);
    ok(r.max_tokens == 0 && r.max_tokens_all, "n_predict -1: as many as the server allows");
    ok(!r.has_seed, "seed -1: random");
    ok(r.top_k == 0 && r.penalty_last_n == 0, "top_k 0: off; repeat_last_n -1: the whole context");
    ok(r.temperature == 1 && !r.lcpp_tokens && !r.logprobs, "unset: this server's defaults");
    llm_api_req_free(&r);

    rc = parse(LLM_API_LCPP, "{\"prompt\":\"x\",\"repeat_penalty\":1.3,\"presence_penalty\":0.5,\"repeat_last_n\":0}", &r, &e);
    ok(rc == 0 && r.repetition_penalty == 1 && r.presence_penalty == 0, "repeat_last_n 0: no penalty");
    llm_api_req_free(&r);

    rc = parse(LLM_API_LCPP, "{\"prompt\":\"x\",\"logit_bias\":[[15,1.5],[16,false],[15,-2]]}", &r, &e);
    ok(rc == 0 && r.n_bias == 2, "logit_bias pairs, a repeated id once (%s)", e.message);
    int b15 = 0, b16 = 0;
    for (int i = 0; i < r.n_bias; i++) {
        b15 |= r.bias_ids[i] == 15 && r.bias[i] == -2.0f;
        b16 |= r.bias_ids[i] == 16 && r.bias[i] == -100.0f;
    }
    ok(b15 && b16, "the last bias of an id counts; false bans it (-100)");
    llm_api_req_free(&r);
    rc = parse(LLM_API_LCPP, "{\"prompt\":\"x\",\"logit_bias\":{\"15\":false,\"7\":3}}", &r, &e);
    ok(rc == 0 && r.n_bias == 2, "logit_bias as an object (OpenAI's), false too (%s)", e.message);
    llm_api_req_free(&r);

    rc = parse(LLM_API_LCPP, "{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"yes\\\" | \\\"no\\\"\"}", &r, &e);
    ok(rc == 0 && r.grammar && r.schema, "grammar (GBNF) (%s)", e.message);
    llm_api_req_free(&r);
    rc = parse(LLM_API_LCPP, "{\"prompt\":\"x\",\"json_schema\":{\"type\":\"object\"}}", &r, &e);
    ok(rc == 0 && r.schema && !r.grammar, "json_schema (%s)", e.message);
    llm_api_req_free(&r);

    bad("{\"n_predict\":3}", "prompt", "no prompt");
    bad("{\"prompt\":[\"a\",\"b\"]}", "prompt", "several prompts");
    bad("{\"prompt\":[1,\"a\"]}", "prompt", "mixed ids and text");
    bad("{\"prompt\":{\"prompt_string\":\"a\"}}", "prompt", "a multimodal object");
    bad("{\"prompt\":\"x\",\"n_predict\":0}", "n_predict", "n_predict 0");
    bad("{\"prompt\":\"x\",\"n_predict\":-2}", "n_predict", "n_predict -2");
    bad("{\"prompt\":\"x\",\"n_predict\":2.5}", "n_predict", "n_predict not whole");
    bad("{\"prompt\":\"x\",\"temperature\":3}", "temperature", "temperature over 2");
    bad("{\"prompt\":\"x\",\"top_k\":\"40\"}", "top_k", "top_k as text");
    bad("{\"prompt\":\"x\",\"repeat_penalty\":0}", "repeat_penalty", "repeat_penalty 0");
    bad("{\"prompt\":\"x\",\"repeat_last_n\":-5}", "repeat_last_n", "repeat_last_n -5");
    bad("{\"prompt\":\"x\",\"typical_p\":0}", "typical_p", "typical_p 0");
    bad("{\"prompt\":\"x\",\"n_probs\":21}", "n_probs", "n_probs 21");
    bad("{\"prompt\":\"x\",\"return_tokens\":1}", "return_tokens", "return_tokens not a boolean");
    bad("{\"prompt\":\"x\",\"logit_bias\":[[\"Hello\",1]]}", "logit_bias", "a bias on text");
    bad("{\"prompt\":\"x\",\"logit_bias\":[[1,2,3]]}", "logit_bias", "a bias entry of three");
    bad("{\"prompt\":\"x\",\"logit_bias\":5}", "logit_bias", "logit_bias a number");
    bad("{\"prompt\":\"x\",\"mirostat\":2}", "mirostat", "mirostat 2");
    bad("{\"prompt\":\"x\",\"dry_multiplier\":0.8}", "dry_multiplier", "DRY");
    bad("{\"prompt\":\"x\",\"xtc_probability\":0.5}", "xtc_probability", "XTC");
    bad("{\"prompt\":\"x\",\"dynatemp_range\":0.5}", "dynatemp_range", "dynamic temperature");
    bad("{\"prompt\":\"x\",\"n_cmpl\":2}", "n_cmpl", "n_cmpl 2");
    bad("{\"prompt\":\"x\",\"post_sampling_probs\":true}", "post_sampling_probs", "post_sampling_probs");
    bad("{\"prompt\":\"x\",\"lora\":[{\"id\":0,\"scale\":0.5}]}", "lora", "lora per request");
    bad("{\"prompt\":\"x\",\"grammar\":\"root ::= undefined\"}", "grammar", "a grammar with an undefined rule");
    bad("{\"prompt\":\"x\",\"n_indent\":-1}", "n_indent", "n_indent -1");
    bad("{\"prompt\":\"x\",\"t_max_predict_ms\":1.5}", "t_max_predict_ms", "t_max_predict_ms not whole");
    bad("{\"prompt\":\"x\",\"response_fields\":\"content\"}", "response_fields", "response_fields not a list");
    bad("{\"prompt\":\"x\",\"response_fields\":[1]}", "response_fields", "a response field not a name");
    llm_api_req r2;
    llm_api_err e2;
    static const struct { const char *body, *param, *what; } ib[] = {
        { "{\"input_prefix\":1}", "input_prefix", "input_prefix not a string" },
        { "{\"input_suffix\":[]}", "input_suffix", "input_suffix not a string" },
        { "{\"input_extra\":{}}", "input_extra", "input_extra not a list" },
        { "{\"input_extra\":[{\"filename\":\"a\"}]}", "input_extra", "a file without text" },
        { "{\"input_extra\":[{\"text\":\"a\",\"filename\":2}]}", "input_extra", "a file name not a string" },
        { "{\"input_extra\":[\"a\"]}", "input_extra", "a file not an object" },
        { "{\"prompt\":[1,2]}", "prompt", "an /infill prompt of ids" },
    };
    for (size_t k = 0; k < sizeof ib / sizeof ib[0]; k++) {
        int rc2 = parse(LLM_API_LCPP_INFILL, ib[k].body, &r2, &e2);
        ok(rc2 == -1 && e2.status == 400 && !strcmp(e2.param, ib[k].param), "/infill: %s -> 400 '%s' (got '%s': %s)",
           ib[k].what, ib[k].param, e2.param, e2.message);
        llm_api_req_free(&r2);
    }

    rc = parse(LLM_API_LCPP, "{\"prompt\":\"x\",\"n_predict\":0}", &r, &e);
    ok(rc == -1 && strstr(e.message, "'n_predict'"), "the message names n_predict: %s", e.message);
    llm_api_req_free(&r);
    rc = parse(LLM_API_LCPP, "{\"prompt\":\"x\",\"repeat_penalty\":20}", &r, &e);
    ok(rc == -1 && !strcmp(e.param, "repeat_penalty") && strstr(e.message, "'repeat_penalty'") &&
       !strstr(e.message, "repetition"), "ours renamed to llama.cpp's in the message: %s", e.message);
    llm_api_req_free(&r);

    /* /infill: the parts; the prompt is the text after the middle token */
    rc = parse(LLM_API_LCPP_INFILL, "{\"input_prefix\":\"def f(\",\"input_suffix\":\"return 1\",\"input_extra\":"
               "[{\"filename\":\"a.py\",\"text\":\"x = 1\"},{\"text\":\"y\"}],\"prompt\":\"a\",\"n_predict\":8,"
               "\"n_indent\":4,\"t_max_prompt_ms\":500,\"t_max_predict_ms\":1000,\"samplers\":[\"top_k\",\"infill\"],"
               "\"response_fields\":[\"content\",\"timings/prompt_n\"]}", &r, &e);
    ok(rc == 0 && r.api == LLM_API_LCPP && r.infill, "an /infill body (llama.vim's fields) parses (%s)", e.message);
    ok(r.infill_prefix && !strcmp(r.infill_prefix, "def f(") && r.infill_prefix_len == 6 && r.infill_suffix &&
       !strcmp(r.infill_suffix, "return 1") && cJSON_GetArraySize(r.infill_extra) == 2 && r.prompt && !strcmp(r.prompt, "a"),
       "prefix, suffix, the files, the middle as the prompt");
    ok(r.n_indent == 4 && r.t_max_predict_ms == 1000 && cJSON_GetArraySize(r.response_fields) == 2 && r.max_tokens == 8,
       "n_indent, t_max_predict_ms, response_fields");
    llm_api_req_free(&r);
    rc = parse(LLM_API_LCPP_INFILL, "{}", &r, &e);
    ok(rc == 0 && r.infill && !strcmp(r.infill_prefix, "") && r.infill_extra == NULL && r.prompt && !strcmp(r.prompt, ""),
       "/infill with nothing: all empty (%s)", e.message);
    llm_api_req_free(&r);
    rc = parse(LLM_API_LCPP, "{\"prompt\":\"x\"}", &r, &e);
    ok(rc == 0 && !r.infill && r.n_indent == 0 && r.t_max_predict_ms == 0 && r.response_fields == NULL,
       "/completion: none of them unless given");
    llm_api_req_free(&r);

    /* /tokenize in llama.cpp's shape */
    rc = parse(LLM_API_TOKENIZE, "{\"content\":\"Hello\",\"with_pieces\":true}", &r, &e);
    ok(rc == 0 && r.prompt && !strcmp(r.prompt, "Hello") && !r.add_special && r.with_pieces,
       "tokenize {content}: no BOS unless add_special, with_pieces");
    llm_api_req_free(&r);
    rc = parse(LLM_API_TOKENIZE, "{\"content\":\"Hello\",\"add_special\":true}", &r, &e);
    ok(rc == 0 && r.add_special && !r.with_pieces, "tokenize {content, add_special: true}: BOS");
    llm_api_req_free(&r);
    rc = parse(LLM_API_TOKENIZE, "{\"prompt\":\"Hello\"}", &r, &e);
    ok(rc == 0 && r.add_special, "tokenize {prompt} (vLLM's) still adds BOS");
    llm_api_req_free(&r);
}

static void test_output(void)
{
    const ngx_http_llm_typed_t *ty = &ngx_http_llm_lc_typed;
    ok(ty->data_only == 1 && ty->ndjson == 0, "plain data: events");
    ngx_http_llm_resp_t resp;
    ngx_http_llm_resp_init(&resp, LLM_API_COMPLETIONS, "tiny");
    llm_api_req q;
    memset(&q, 0, sizeof q);
    q.api = LLM_API_LCPP;
    q.prompt = "Once";
    q.prompt_len = 4;
    q.stream = 1;
    q.temperature = 0;
    q.top_p = q.typical_p = q.repetition_penalty = 1;
    q.stop[0] = "END";
    q.stop_len[0] = 3;
    q.n_stop = 1;
    ngx_http_llm_lc_t lc;
    ngx_http_llm_end_t end = { "stop", "END", 5, 2, 1, 0 };

    is_int(ngx_http_llm_lc_init(&lc, &resp, &q, 16, 512, 5, NULL), 0, "builder ready");
    cJSON *ev = cJSON_CreateArray(), *whole = NULL;
    int rc = ty->begin(&lc, ev);
    rc |= ty->text(&lc, ev, 0, " there", 6, tok(383, " there", -0.5));
    ngx_http_llm_lc_first(&lc);
    rc |= ty->text(&lc, ev, 0, "", 0, tok(286, " E", -0.25));
    rc |= ty->end(&lc, ev, &end, NULL);
    ok(rc == 0 && cJSON_GetArraySize(ev) == 3, "an event a token, then the last (%d)", cJSON_GetArraySize(ev));
    same_json(cJSON_GetArrayItem(ev, 0), "{\"index\":0,\"content\":\" there\",\"tokens\":[383],\"stop\":false,"
              "\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":5}", "a token's event");
    same_json(cJSON_GetArrayItem(ev, 1), "{\"index\":0,\"content\":\"\",\"tokens\":[286],\"stop\":false,"
              "\"id_slot\":-1,\"tokens_predicted\":2,\"tokens_evaluated\":5}", "a token whose text is held: empty content");
    same_json(cJSON_GetArrayItem(ev, 2), "{\"index\":0,\"content\":\"\",\"tokens\":[],\"stop\":true,\"id_slot\":-1,"
              "\"model\":\"tiny\",\"tokens_predicted\":2,\"tokens_evaluated\":5,\"generation_settings\":{\"stop\":[\"END\"],"
              "\"n_ctx\":512,\"n_predict\":16,\"model\":\"tiny\",\"seed\":4294967295,\"temperature\":0,\"top_k\":0,"
              "\"top_p\":1,\"min_p\":0,\"typical_p\":1,\"repeat_penalty\":1,\"repeat_last_n\":-1,\"presence_penalty\":0,"
              "\"frequency_penalty\":0,\"ignore_eos\":false,\"n_probs\":0,\"stream\":true},\"prompt\":\"Once\","
              "\"has_new_line\":false,\"truncated\":false,\"stop_type\":\"word\",\"stopping_word\":\"END\","
              "\"tokens_cached\":1}", "the last event: stop, the settings, stop_type word");
    const cJSON *t = cJSON_GetObjectItem(cJSON_GetArrayItem(ev, 2), "timings");
    ok(cJSON_GetObjectItem(t, "prompt_n")->valueint == 4 && cJSON_GetObjectItem(t, "predicted_n")->valueint == 2 &&
       cJSON_GetObjectItem(t, "prompt_ms")->valuedouble >= 0, "timings: the prompt's uncached tokens, the output's");
    cJSON_Delete(ev);
    ty->free(&lc);

    /* the whole answer: return_tokens, n_probs 1 (completion_probabilities), a newline, the limit */
    q.stream = 0;
    q.lcpp_tokens = 1;
    q.logprobs = 1;
    q.top_logprobs = 1;
    q.has_seed = 1;
    q.seed = 9;
    ngx_http_llm_lc_init(&lc, &resp, &q, 16, 512, 5, NULL);
    cJSON *toks = cJSON_CreateArray(), *t1 = tok(13, "\n", -0.1), *top = cJSON_AddArrayToObject(t1, "top_tokens");
    cJSON_AddItemToArray(top, tok(13, "\n", -0.1));
    cJSON_AddItemToArray(toks, t1);
    end = (ngx_http_llm_end_t){ "length", NULL, 5, 1, 0, 0 };
    rc = ty->text(&lc, NULL, 0, "\n", 1, toks);
    rc |= ty->end(&lc, NULL, &end, &whole);
    ok(rc == 0, "no failure");
    cJSON_DeleteItemFromObjectCaseSensitive(whole, "generation_settings");
    same_json(whole, "{\"index\":0,\"content\":\"\\n\",\"tokens\":[13],\"stop\":true,\"id_slot\":-1,\"model\":\"tiny\","
              "\"tokens_predicted\":1,\"tokens_evaluated\":5,\"prompt\":\"Once\",\"has_new_line\":true,\"truncated\":false,"
              "\"stop_type\":\"limit\",\"stopping_word\":\"\",\"tokens_cached\":0,\"completion_probabilities\":[{\"id\":13,"
              "\"token\":\"\\n\",\"bytes\":[10],\"logprob\":-0.1,\"top_logprobs\":[{\"id\":13,\"token\":\"\\n\",\"bytes\":[10],"
              "\"logprob\":-0.1}]}]}", "the whole answer: tokens, completion_probabilities, stop_type limit");
    cJSON_Delete(whole);
    ty->free(&lc);

    /* the end token: stop_type eos; without return_tokens no ids */
    q.lcpp_tokens = 0;
    q.logprobs = 0;
    ngx_http_llm_lc_init(&lc, &resp, &q, 16, 512, 5, NULL);
    end = (ngx_http_llm_end_t){ "stop", NULL, 5, 3, 0, 0 };
    rc = ty->text(&lc, NULL, 0, "Hi.", 3, NULL);
    rc |= ty->end(&lc, NULL, &end, &whole);
    ok(rc == 0 && !strcmp(cJSON_GetObjectItem(whole, "stop_type")->valuestring, "eos") &&
       cJSON_GetArraySize(cJSON_GetObjectItem(whole, "tokens")) == 0 && !cJSON_GetObjectItem(whole, "completion_probabilities") &&
       cJSON_GetObjectItem(cJSON_GetObjectItem(whole, "generation_settings"), "seed")->valuedouble == 9,
       "stop_type eos; no ids unless asked; the request's seed in the settings");
    cJSON_Delete(whole);
    ty->free(&lc);

    /* a prompt of token ids: its text as the caller decoded it */
    q.prompt = NULL;
    ngx_http_llm_lc_init(&lc, &resp, &q, 16, 512, 2, strdup("<s> Hi"));
    rc = ty->end(&lc, NULL, &end, &whole);
    ok(rc == 0 && !strcmp(cJSON_GetObjectItem(whole, "prompt")->valuestring, "<s> Hi"), "token ids: the prompt's text");
    cJSON_Delete(whole);
    ty->free(&lc);

    /* response_fields: kept fields, a/b under that name, a missing one left out; the stream's last event too */
    cJSON *fields = cJSON_Parse("[\"content\",\"timings/predicted_n\",\"generation_settings/n_predict\",\"no/such\","
                                "\"stop_type\"]");
    q.response_fields = fields;
    q.prompt = "Once";
    ngx_http_llm_lc_init(&lc, &resp, &q, 16, 512, 5, NULL);
    end = (ngx_http_llm_end_t){ "length", NULL, 5, 2, 0, 0 };
    rc = ty->text(&lc, NULL, 0, "Hi.", 3, NULL);
    rc |= ty->end(&lc, NULL, &end, &whole);
    same_json(whole, "{\"content\":\"Hi.\",\"timings/predicted_n\":2,\"generation_settings/n_predict\":16,"
              "\"stop_type\":\"limit\"}", "response_fields: the answer cut to them");
    cJSON_Delete(whole);
    ty->free(&lc);
    q.stream = 1;
    ngx_http_llm_lc_init(&lc, &resp, &q, 16, 512, 5, NULL);
    ev = cJSON_CreateArray();
    rc |= ty->end(&lc, ev, &end, NULL);
    same_json(cJSON_GetArrayItem(ev, 0), "{\"content\":\"\",\"timings/predicted_n\":2,\"generation_settings/n_predict\":16,"
              "\"stop_type\":\"limit\"}", "response_fields: the stream's last event too");
    ok(rc == 0, "no failure");
    cJSON_Delete(ev);
    ty->free(&lc);
    q.response_fields = NULL;
    cJSON_Delete(fields);

    ev = cJSON_CreateArray();
    rc = ty->error(&lc, ev, "timeout", "server_error", "the request timed out");
    same_json(cJSON_GetArrayItem(ev, 0), "{\"error\":{\"code\":500,\"message\":\"the request timed out\",\"type\":"
              "\"server_error\"}}", "an error mid-stream, llama.cpp's shape");
    cJSON_Delete(ev);
}

static llm_api_kind lcpp_kind(int k, int seed) { (void)k; (void)seed; return LLM_API_LCPP; }

static void test_mutations(void)
{
    static const char *const seeds[] = {
        "{\"prompt\":\"Once upon\",\"n_predict\":9,\"stop\":[\"x\"],\"temperature\":0.5,\"top_k\":4,\"n_probs\":2,"
        "\"logit_bias\":[[3,false],[4,1.5]],\"repeat_last_n\":8,\"repeat_penalty\":1.1,\"stream\":false}",
        "{\"prompt\":[1,2,3],\"seed\":-1,\"return_tokens\":true,\"grammar\":\"root ::= [a-z]+\",\"mirostat\":0}",
    };
    ok(api_mutate(seeds, 2, 3000, 0x11ac99u, lcpp_kind, LLM_CHAT_LLAMA3),
       "3000 mutated bodies: each parsed or refused with a 400");
}

int main(void)
{
    test_parse();
    test_output();
    test_mutations();
    return done_testing();
}
