/* A deterministic engine double for the NGINX module's tests: it speaks the
 * real shared-memory protocol (shm/llm_server.h) but, instead of running a
 * model, "generates" the prompt's own tokens back (BOS skipped), then the
 * tokenizer's EOS id, so every response is predictable from its prompt:
 *   max_tokens > prompt tokens      -> text = prompt text, finish_reason "stop"
 *   max_tokens <= prompt tokens     -> a prefix of it, finish_reason "length"
 * Each token has logprob -0.5 and top-n entries (id k, logprob -0.5 - k).
 *
 *   echo_engine NAME TOKENIZER [--slots N] [--ctx N] [--delay-ms N]
 *
 * Runs until SIGTERM/SIGINT; prints "ready" on stdout once it serves. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "llm_server.h"
#include "tokenizer.h"

typedef struct { uint32_t slot; uint32_t pos; uint64_t next_ns; int live; } job;

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s NAME TOKENIZER [--slots N] [--ctx N] [--delay-ms N]\n", argv[0]);
        return 2;
    }
    uint32_t slots = 16, ctx = 256, delay_ms = 0;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--slots")) slots = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ctx")) ctx = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--delay-ms")) delay_ms = (uint32_t)atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    llm_err err = { "" };
    llm_tokenizer *tok = llm_tok_load(argv[2], &err);
    if (!tok) { fprintf(stderr, "echo_engine: %s\n", err.msg); return 1; }

    llm_server_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.name = argv[1];
    cfg.caps = (llm_shm_caps){ .n_slots = slots, .ring_size = 64, .max_prompt = ctx, .stream_cap = 64,
                               .max_top = 20, .n_waiters = 64 };
    snprintf(cfg.model.name, sizeof cfg.model.name, "echo");
    cfg.model.vocab_size = (uint32_t)llm_tok_vocab_size(tok);
    cfg.model.ctx_len = ctx;
    cfg.model.bos_id = llm_tok_bos(tok);
    cfg.model.eos_id = llm_tok_eos(tok);
    cfg.model.n_eog = (uint32_t)llm_tok_eog_ids(tok, cfg.model.eog_ids, LLM_SHM_MAX_EOG);
    cfg.model.tok_kind = (uint32_t)llm_tok_kind_of(tok);
    cfg.mode = 0666;
    cfg.force = 1;
    char emsg[256];
    llm_server *s = llm_server_create(&cfg, emsg, sizeof emsg);
    if (!s) { fprintf(stderr, "echo_engine: %s\n", emsg); llm_tok_free(tok); return 1; }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    llm_server_set_state(s, LLM_ENGINE_READY);
    printf("ready\n");
    fflush(stdout);

    job *jobs = calloc(slots, sizeof *jobs);
    int32_t eos = llm_tok_eos(tok);
    while (!stop_flag) {
        int any = 0;
        for (uint32_t i = 0; i < slots; i++) any |= jobs[i].live;
        llm_server_wait(s, any ? 0 : 50);
        uint32_t slot;
        while (llm_server_pop(s, &slot))
            jobs[slot] = (job){ slot, 0, llm_shm_now_ns() + (uint64_t)delay_ms * 1000000u, 1 };
        uint64_t now = llm_shm_now_ns();
        for (uint32_t i = 0; i < slots; i++) {
            job *j = &jobs[i];
            if (!j->live) continue;
            if (llm_server_cancelled(s, j->slot)) {
                llm_server_finish(s, j->slot, LLM_FINISH_CANCELLED, 0);
                j->live = 0;
                continue;
            }
            if (now < j->next_ns || llm_server_stream_space(s, j->slot) == 0) continue;
            uint32_t n;
            const int32_t *prompt = llm_server_prompt(s, j->slot, &n);
            const llm_shm_params *p = llm_server_params(s, j->slot);
            uint32_t start = (n > 0 && prompt[0] == cfg.model.bos_id) ? 1 : 0;
            int32_t id = start + j->pos < n ? prompt[start + j->pos] : eos;
            llm_shm_logprob top[20];
            uint32_t ntop = p->n_logprobs > 0 ? (uint32_t)p->n_logprobs : 0;
            for (uint32_t k = 0; k < ntop && k < 20; k++) top[k] = (llm_shm_logprob){ (int32_t)k, -0.5f - (float)k };
            llm_server_push(s, j->slot, id, -0.5f, top, ntop);
            j->pos++;
            int is_stop = 0;
            for (uint32_t k = 0; k < p->n_stop; k++) is_stop |= p->stop_ids[k] == id;
            if (is_stop) { llm_server_finish(s, j->slot, LLM_FINISH_STOP, 0); j->live = 0; }
            else if ((int32_t)j->pos >= p->max_tokens) { llm_server_finish(s, j->slot, LLM_FINISH_LENGTH, 0); j->live = 0; }
            j->next_ns = now + (uint64_t)delay_ms * 1000000u;
        }
        llm_server_reap(s, 0);
        if (delay_ms && any) usleep(1000);
    }
    llm_server_destroy(s);
    free(jobs);
    llm_tok_free(tok);
    return 0;
}
