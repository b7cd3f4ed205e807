/* Best-effort Redis publisher (see redis_pub.h). */
#include "redis_pub.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EVENT_QUEUE 64
#define TIMEOUT_MS  200
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000

typedef struct {
    char type[32];
    char detail[480];
    long long ts_ms;
} event;

struct llm_redis {
    char host[256];
    int  port, db;
    char k_metrics[96], k_history[96], k_events[96], k_tuning[96];
    redisContext *ctx;
    long long next_try_ms;
    int  backoff_ms;
    int  down_logged;
    event ev[EVENT_QUEUE];
    int  ev_head, ev_n;
    long long dropped_events;
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

llm_redis *llm_redis_new(const char *url, const char *name, char *err, size_t cap)
{
    const char *p = url;
    if (url == NULL || strncmp(url, "redis://", 8) != 0) {
        snprintf(err, cap, "--redis wants redis://host[:port][/db], got '%s'", url ? url : "(null)");
        return NULL;
    }
    p += 8;
    llm_redis *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    size_t hn = strcspn(p, ":/");
    if (hn == 0 || hn >= sizeof(r->host)) {
        snprintf(err, cap, "--redis '%s': no host", url);
        free(r);
        return NULL;
    }
    memcpy(r->host, p, hn);
    p += hn;
    r->port = 6379;
    if (*p == ':') {
        char *end;
        long v = strtol(p + 1, &end, 10);
        if (end == p + 1 || v < 1 || v > 65535 || (*end != '/' && *end != '\0')) {
            snprintf(err, cap, "--redis '%s': bad port", url);
            free(r);
            return NULL;
        }
        r->port = (int)v;
        p = end;
    }
    if (*p == '/' && p[1] != '\0') {
        char *end;
        long v = strtol(p + 1, &end, 10);
        if (end == p + 1 || v < 0 || v > 1000000 || *end != '\0') {
            snprintf(err, cap, "--redis '%s': bad database number", url);
            free(r);
            return NULL;
        }
        r->db = (int)v;
    } else if (*p != '\0' && strcmp(p, "/") != 0) {
        snprintf(err, cap, "--redis '%s': trailing garbage", url);
        free(r);
        return NULL;
    }
    snprintf(r->k_metrics, sizeof r->k_metrics, "llm:%s:metrics", name);
    snprintf(r->k_history, sizeof r->k_history, "llm:%s:history", name);
    snprintf(r->k_events, sizeof r->k_events, "llm:%s:events", name);
    snprintf(r->k_tuning, sizeof r->k_tuning, "llm:%s:tuning", name);
    r->backoff_ms = BACKOFF_MIN_MS;
    return r;
}

void llm_redis_free(llm_redis *r)
{
    if (r == NULL)
        return;
    if (r->ctx != NULL)
        redisFree(r->ctx);
    free(r);
}

void llm_redis_disconnect(llm_redis *r)
{
    if (r != NULL && r->ctx != NULL) {
        redisFree(r->ctx);
        r->ctx = NULL;
    }
}

static void went_down(llm_redis *r, const char *why)
{
    if (!r->down_logged)
        fprintf(stderr, "supervisor: redis %s:%d unreachable (%s); retrying with backoff, samples dropped\n",
                r->host, r->port, why);
    r->down_logged = 1;
    if (r->ctx != NULL) {
        redisFree(r->ctx);
        r->ctx = NULL;
    }
    r->next_try_ms = now_ms() + r->backoff_ms;
    r->backoff_ms = r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
}

/* A reply that is not an error; frees it. 0 ok, -1 connection trouble. */
static int check_reply(llm_redis *r, redisReply *rep)
{
    if (rep == NULL) {
        went_down(r, r->ctx->errstr[0] ? r->ctx->errstr : "no reply");
        return -1;
    }
    int rc = 0;
    if (rep->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "supervisor: redis error: %s\n", rep->str);
        rc = 1; /* the server answered: the connection is fine */
    }
    freeReplyObject(rep);
    return rc;
}

static int connected(llm_redis *r)
{
    if (r->ctx != NULL)
        return 1;
    if (now_ms() < r->next_try_ms)
        return 0;
    struct timeval tv = { 0, TIMEOUT_MS * 1000 };
    r->ctx = redisConnectWithTimeout(r->host, r->port, tv);
    if (r->ctx == NULL || r->ctx->err) {
        char why[128];
        snprintf(why, sizeof why, "%s", r->ctx ? r->ctx->errstr : "out of memory");
        went_down(r, why);
        return 0;
    }
    redisSetTimeout(r->ctx, tv);
    if (r->db != 0 && check_reply(r, redisCommand(r->ctx, "SELECT %d", r->db)) != 0) {
        if (r->ctx != NULL)
            went_down(r, "SELECT failed");
        return 0;
    }
    if (r->down_logged)
        fprintf(stderr, "supervisor: redis %s:%d reachable again\n", r->host, r->port);
    r->down_logged = 0;
    r->backoff_ms = BACKOFF_MIN_MS;
    return 1;
}

/* Send the pipelined commands already appended; read n replies. */
static int flush_replies(llm_redis *r, int n)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        void *rep = NULL;
        if (redisGetReply(r->ctx, &rep) != REDIS_OK) {
            went_down(r, r->ctx->errstr[0] ? r->ctx->errstr : "reply lost");
            return -1;
        }
        if (check_reply(r, rep) != 0)
            rc = -1;
    }
    return rc;
}

int llm_redis_publish(llm_redis *r, const char *const *fields, const char *const *values, int n)
{
    if (!connected(r) || n <= 0 || n > 64)
        return -1;
    const char *argv[2 * 64 + 8];
    size_t lens[2 * 64 + 8];
    int a = 0;
    argv[a++] = "HSET";
    argv[a++] = r->k_metrics;
    for (int i = 0; i < n; i++) {
        argv[a++] = fields[i];
        argv[a++] = values[i];
    }
    for (int i = 0; i < a; i++)
        lens[i] = strlen(argv[i]);
    redisAppendCommandArgv(r->ctx, a, argv, lens);
    a = 0;
    argv[a++] = "XADD";
    argv[a++] = r->k_history;
    argv[a++] = "MAXLEN";
    argv[a++] = "~";
    argv[a++] = "3600";
    argv[a++] = "*";
    for (int i = 0; i < n; i++) {
        argv[a++] = fields[i];
        argv[a++] = values[i];
    }
    for (int i = 0; i < a; i++)
        lens[i] = strlen(argv[i]);
    redisAppendCommandArgv(r->ctx, a, argv, lens);
    return flush_replies(r, 2);
}

int llm_redis_event(llm_redis *r, const char *type, const char *detail)
{
    if (type != NULL) {
        if (r->ev_n == EVENT_QUEUE) { /* bounded: drop the oldest */
            r->ev_head = (r->ev_head + 1) % EVENT_QUEUE;
            r->ev_n--;
            r->dropped_events++;
        }
        event *e = &r->ev[(r->ev_head + r->ev_n) % EVENT_QUEUE];
        snprintf(e->type, sizeof e->type, "%s", type);
        snprintf(e->detail, sizeof e->detail, "%s", detail ? detail : "");
        e->ts_ms = wall_ms();
        r->ev_n++;
    }
    while (r->ev_n > 0) {
        if (!connected(r))
            return -1;
        event *e = &r->ev[r->ev_head];
        char ts[32];
        snprintf(ts, sizeof ts, "%lld", e->ts_ms);
        redisReply *rep = redisCommand(r->ctx, "XADD %s MAXLEN ~ 10000 * type %s detail %s ts_ms %s", r->k_events,
                                       e->type, e->detail, ts);
        if (check_reply(r, rep) < 0)
            return -1;
        r->ev_head = (r->ev_head + 1) % EVENT_QUEUE;
        r->ev_n--;
    }
    return 0;
}

int llm_redis_save_tuning(llm_redis *r, int max_batch_size, int batch_timeout_ms, int max_batched_tokens)
{
    if (!connected(r))
        return -1;
    redisReply *rep = redisCommand(r->ctx, "HSET %s max_batch_size %d batch_timeout_ms %d max_batched_tokens %d",
                                   r->k_tuning, max_batch_size, batch_timeout_ms, max_batched_tokens);
    return check_reply(r, rep) == 0 ? 0 : -1;
}

int llm_redis_load_tuning(llm_redis *r, int *max_batch_size, int *batch_timeout_ms, int *max_batched_tokens)
{
    if (!connected(r))
        return -1;
    redisReply *rep = redisCommand(r->ctx, "HMGET %s max_batch_size batch_timeout_ms max_batched_tokens",
                                   r->k_tuning);
    if (rep == NULL) {
        went_down(r, r->ctx->errstr[0] ? r->ctx->errstr : "no reply");
        return -1;
    }
    int found = 0;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 3) {
        int *out[3] = { max_batch_size, batch_timeout_ms, max_batched_tokens };
        int v[3], n = 0;
        for (int i = 0; i < 3; i++) {
            redisReply *e = rep->element[i];
            char *end;
            if (e->type == REDIS_REPLY_STRING) {
                long x = strtol(e->str, &end, 10);
                if (end != e->str && *end == '\0' && x >= 0 && x <= 1 << 24)
                    v[n++] = (int)x;
            }
        }
        if (n == 3) {
            for (int i = 0; i < 3; i++)
                *out[i] = v[i];
            found = 1;
        }
    }
    freeReplyObject(rep);
    return found;
}
