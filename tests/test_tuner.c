/* The adaptive batching controller (engine/tuner.c) on synthetic figures, the
 * histogram-delta quantiles it reads, and llm_sched_set_knobs on a live
 * scheduler (fake backend). */
#include "tap.h"

#include "scheduler.h"
#include "tuner.h"

#include <stdlib.h>
#include <string.h>

static llm_tuner_config base_cfg(void)
{
    llm_tuner_config c;
    memset(&c, 0, sizeof(c));
    c.slo_ttft_ms = 200;
    c.slo_tpot_ms = 50;
    c.min = (llm_tuner_knobs){ 2, 0, 64 };
    c.max = (llm_tuner_knobs){ 32, 20, 2048 };
    c.cooldown = 1;
    return c;
}

static llm_tuner_input fig(double ttft, double tpot, int64_t queue)
{
    llm_tuner_input in;
    memset(&in, 0, sizeof(in));
    in.ttft_p95_ms = ttft;
    in.tpot_p95_ms = tpot;
    in.n_ttft = in.n_tpot = in.n_steps = 10;
    in.queue_depth = queue;
    in.running = 4;
    return in;
}

static void test_config(void)
{
    char e[256];
    llm_tuner_config c = base_cfg();
    is_int(llm_tuner_config_check(&c, e, sizeof e), 0, "sane bounds accepted");
    c.min.max_batch_size = 40;
    is_int(llm_tuner_config_check(&c, e, sizeof e), -1, "min batch above max refused: %s", e);
    c = base_cfg();
    c.min.max_batch_size = 0;
    is_int(llm_tuner_config_check(&c, e, sizeof e), -1, "batch size 0 refused");
    c = base_cfg();
    c.max.max_batched_tokens = 1;
    c.min.max_batched_tokens = 1;
    is_int(llm_tuner_config_check(&c, e, sizeof e), -1, "token budget below the batch refused");
    c = base_cfg();
    c.slo_ttft_ms = -1;
    is_int(llm_tuner_config_check(&c, e, sizeof e), -1, "negative target refused");
}

static void test_policy(void)
{
    llm_tuner_config c = base_cfg();
    llm_tuner t;
    char why[512];
    llm_tuner_init(&t, &c, &(llm_tuner_knobs){ 100, 50, 10 });
    is_int(t.knobs.max_batch_size, 32, "start clamped to max batch");
    is_int(t.knobs.batch_timeout_ms, 20, "start clamped to max timeout");
    is_int(t.knobs.max_batched_tokens, 64, "start clamped to min tokens");

    llm_tuner_init(&t, &c, &(llm_tuner_knobs){ 16, 10, 512 });
    llm_tuner_input in = fig(100, 80, 0);
    is_int(llm_tuner_step(&t, &in, why, sizeof why), 1, "TPOT over target: a change");
    diag("%s", why);
    is_int(t.knobs.max_batch_size, 12, "batch shrinks by a quarter");
    is_int(t.knobs.max_batched_tokens, 384, "token budget shrinks by a quarter");
    ok(strstr(why, "tpot p95 80.0") != NULL, "reason carries the figure");
    is_int(llm_tuner_step(&t, &in, why, sizeof why), 0, "cooldown: no change next interval");
    is_int(llm_tuner_step(&t, &in, why, sizeof why), 1, "after the cooldown it acts again");
    is_int(t.knobs.max_batch_size, 9, "12 -> 9");

    /* shrinking stops at the bound */
    for (int i = 0; i < 20; i++)
        llm_tuner_step(&t, &in, why, sizeof why);
    is_int(t.knobs.max_batch_size, 2, "never below the minimum batch");
    is_int(t.knobs.max_batched_tokens, 64, "never below the minimum token budget");
    t.wait = 0;
    is_int(llm_tuner_step(&t, &in, why, sizeof why), 0, "at the bound: no change reported");

    /* TTFT over target, queue, TPOT headroom: grow, timeout to min */
    llm_tuner_init(&t, &c, &(llm_tuner_knobs){ 8, 10, 256 });
    in = fig(500, 10, 6);
    is_int(llm_tuner_step(&t, &in, why, sizeof why), 1, "TTFT over target with a queue: a change");
    is_int(t.knobs.max_batch_size, 10, "batch grows by a quarter");
    is_int(t.knobs.max_batched_tokens, 320, "token budget grows by a quarter");
    is_int(t.knobs.batch_timeout_ms, 0, "timeout drops to its minimum");

    /* TTFT over target, but TPOT near its target: only the hold shrinks */
    llm_tuner_init(&t, &c, &(llm_tuner_knobs){ 8, 10, 256 });
    in = fig(500, 45, 6);
    is_int(llm_tuner_step(&t, &in, why, sizeof why), 1, "TTFT over target, no TPOT headroom: a change");
    is_int(t.knobs.max_batch_size, 8, "batch kept");
    is_int(t.knobs.batch_timeout_ms, 5, "timeout halved");

    /* both fine with headroom and a queue: +1 */
    llm_tuner_init(&t, &c, &(llm_tuner_knobs){ 8, 10, 256 });
    in = fig(50, 10, 3);
    is_int(llm_tuner_step(&t, &in, why, sizeof why), 1, "headroom with a queue: a change");
    is_int(t.knobs.max_batch_size, 9, "one more sequence");

    /* fine, no queue: nothing; idle interval (no observations): nothing */
    in = fig(50, 10, 0);
    t.wait = 0;
    is_int(llm_tuner_step(&t, &in, why, sizeof why), 0, "targets met, no queue: no change");
    memset(&in, 0, sizeof(in));
    is_int(llm_tuner_step(&t, &in, why, sizeof why), 0, "idle interval: no change");

    /* no targets: never moves */
    llm_tuner_config nc = base_cfg();
    nc.slo_ttft_ms = nc.slo_tpot_ms = 0;
    llm_tuner_init(&t, &nc, &(llm_tuner_knobs){ 8, 10, 256 });
    in = fig(5000, 5000, 50);
    is_int(llm_tuner_step(&t, &in, why, sizeof why), 0, "without targets nothing moves");

    /* token budget follows a growing batch */
    llm_tuner_config tc = base_cfg();
    tc.min.max_batched_tokens = 1;
    llm_tuner_init(&t, &tc, &(llm_tuner_knobs){ 8, 10, 4 });
    is_int(t.knobs.max_batched_tokens, 8, "token budget raised to the batch size");
}

static void test_snapshot_deltas(void)
{
    static llm_shm_metrics m; /* zeroed */
    llm_metrics_snap a, b;
    llm_tuner_input in;
    for (int i = 0; i < 100; i++)
        llm_hist_observe(&m.ttft, 900000000ull); /* 900 ms: an earlier interval */
    llm_metrics_snapshot(&m, &a);
    for (int i = 0; i < 99; i++)
        llm_hist_observe(&m.ttft, 3000000ull);  /* 3 ms -> bucket <= 4.096 ms */
    llm_hist_observe(&m.ttft, 100000000ull);    /* one slow one */
    for (int i = 0; i < 10; i++)
        llm_hist_observe(&m.step_time, 1500000ull); /* 1.5 ms -> bucket 2.048 ms */
    atomic_store(&m.queue_depth, 7);
    llm_metrics_snapshot(&m, &b);
    llm_tuner_input_from(&a, &b, &in);
    is_int((int)in.n_ttft, 100, "interval holds only the new observations");
    ok(in.ttft_p95_ms > 4.0 && in.ttft_p95_ms < 4.2, "p95 of the interval, not of all time: %.3f ms", in.ttft_p95_ms);
    ok(in.step_p50_ms > 2.0 && in.step_p50_ms < 2.1, "step p50 %.3f ms", in.step_p50_ms);
    is_int((int)in.n_tpot, 0, "no TPOT observations");
    is_int((int)in.queue_depth, 7, "queue gauge");
}

/* ---- llm_sched_set_knobs on a live scheduler, fake backend: token 1 always wins */

typedef struct { int max_seqs, max_tokens; } fake_seen;
static fake_seen seen;

static int fake_init(llm_backend *b, llm_err *err) { (void)b; (void)err; return 0; }
static void fake_destroy(llm_backend *b) { (void)b; }
static int fake_forward(llm_backend *b, const llm_batch *bt, float *logits, llm_err *err)
{
    (void)err;
    int vocab = b->model->cfg.vocab_size, rows = 0;
    if (bt->n_seqs > seen.max_seqs)
        seen.max_seqs = bt->n_seqs;
    if (bt->n_tokens > seen.max_tokens)
        seen.max_tokens = bt->n_tokens;
    for (int t = 0; t < bt->n_tokens; t++)
        if (bt->want_logits[t]) {
            float *lg = logits + (size_t)rows++ * vocab;
            for (int i = 0; i < vocab; i++)
                lg[i] = i == 1 ? 1.0f : 0.0f;
        }
    return 0;
}
static const llm_backend_ops fake_ops = { "fake", fake_init, fake_forward, fake_destroy };

static void run_until_idle(llm_sched *s)
{
    for (int i = 0; i < 1000 && llm_sched_step(s) > 0; i++)
        ;
}

static void submit_n(llm_sched *s, int n, uint64_t first_id)
{
    static const int32_t prompt[6] = { 3, 4, 5, 6, 7, 8 };
    for (int i = 0; i < n; i++) {
        llm_sched_request r;
        memset(&r, 0, sizeof(r));
        r.id = first_id + (uint64_t)i;
        r.prompt = prompt;
        r.n_prompt = 6;
        llm_sampling_defaults(&r.sampling);
        r.sampling.temperature = 0;
        r.max_tokens = 4;
        llm_err err = { { 0 } };
        if (llm_sched_submit(s, &r, &err) != 0)
            diag("submit: %s", err.msg);
    }
}

static void test_set_knobs(void)
{
    llm_model model;
    memset(&model, 0, sizeof(model));
    model.cfg.vocab_size = 16;
    model.cfg.seq_len = 64;
    llm_backend be;
    memset(&be, 0, sizeof(be));
    be.ops = &fake_ops;
    be.model = &model;
    be.opts.kv_blocks = 64;
    be.opts.block_size = 4;
    llm_sched_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.max_batch_size = 8;
    cfg.max_batched_tokens = 64;
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(&be, &cfg, &err);
    ok(s != NULL, "scheduler created");
    if (s == NULL)
        return;
    int mbs, bto, mbt;
    is_int(llm_sched_set_knobs(s, 9, -1, 0), -1, "batch size above the creation value refused");
    is_int(llm_sched_set_knobs(s, 0, -1, 65), -1, "token budget above the creation value refused");
    is_int(llm_sched_set_knobs(s, -1, -1, 0), -1, "negative batch size refused");
    llm_sched_get_knobs(s, &mbs, &bto, &mbt);
    ok(mbs == 8 && bto == 0 && mbt == 64, "a refused change changes nothing");

    is_int(llm_sched_set_knobs(s, 3, 7, 0), 0, "lower the batch to 3");
    llm_sched_get_knobs(s, &mbs, &bto, &mbt);
    ok(mbs == 3 && bto == 7 && mbt == 64, "knobs read back (0 kept the token budget)");
    submit_n(s, 8, 100);
    run_until_idle(s);
    is_int(seen.max_seqs, 3, "batches never exceed the lowered size");

    is_int(llm_sched_set_knobs(s, 8, -1, 12), 0, "batch back to 8, budget 12 tokens");
    seen.max_seqs = seen.max_tokens = 0;
    submit_n(s, 8, 200);
    run_until_idle(s);
    is_int(seen.max_seqs, 8, "batches grow to the raised size");
    ok(seen.max_tokens <= 12, "steps keep to the token budget (%d)", seen.max_tokens);
    llm_sched_stats st;
    llm_sched_get_stats(s, &st);
    is_int((int)st.finished[LLM_SCHED_FINISH_LENGTH], 16, "every request ran to its length");
    llm_sched_destroy(s);
}

int main(void)
{
    test_config();
    test_policy();
    test_snapshot_deltas();
    test_set_knobs();
    return done_testing();
}
