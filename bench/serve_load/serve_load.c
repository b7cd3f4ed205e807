/* serve_load: closed-loop HTTP load generator for ngx_llm (streaming completions).
 *
 *   serve_load --port P [--host 127.0.0.1] [--concurrency C] [--requests R]
 *              [--max-tokens N] [--prompt TEXT] [--warmup W] [--chat] [--raw FILE]
 *              [--temperature T] [--top-p P]
 *
 * Keeps C requests in flight (one connection each, HTTP/1.0 so the SSE body ends
 * at close), R requests in all after W unmeasured warm-up ones. Every request is
 * greedy (or sampled with --temperature / --top-p) with ignore_eos and
 * include_usage, so each yields exactly N tokens.
 * Per request: TTFT = first token event received - request written (the TCP
 * connection is already up, so the handshake is not counted); TPOT = (last token
 * event - first) / (tokens - 1). Prints one JSON line with p50/p99 of both,
 * requests/s and output tokens/s over the measured wall time. --raw FILE writes
 * each request's ttft_ms and tpot_ms, one line each.
 * Single-threaded epoll; the client costs a few microseconds per event. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int    fd;
    int    live, sent_all, headers_done, status;
    size_t req_off;
    char  *buf;            /* received bytes not yet consumed */
    size_t len, cap;
    double t_send, t_first, t_last;
    long   events, usage_tokens;
    int    done_seen, measured;
} conn;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    if (n == 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* JSON string escape of the prompt (quotes, backslashes, control characters). */
static char *json_escape(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n * 6 + 1), *p = o;
    if (o == NULL)
        die("malloc");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { *p++ = '\\'; *p++ = (char)c; }
        else if (c < 0x20) p += sprintf(p, "\\u%04x", c);
        else *p++ = (char)c;
    }
    *p = '\0';
    return o;
}

static struct sockaddr_in g_addr;
static char *g_req;
static size_t g_req_len;

static void conn_open(conn *c, int ep)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&g_addr, sizeof(g_addr)) != 0 && errno != EINPROGRESS)
        die("connect");
    c->fd = fd;
    c->live = 1;
    c->sent_all = c->headers_done = c->done_seen = 0;
    c->status = 0;
    c->req_off = 0;
    c->len = 0;
    c->t_send = c->t_first = c->t_last = 0.0;
    c->events = c->usage_tokens = 0;
    struct epoll_event ev = { .events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.ptr = c };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        die("epoll_ctl");
}

/* Consumes complete SSE events from c->buf; t = when these bytes arrived. */
static void parse(conn *c, double t)
{
    size_t off = 0;
    if (!c->headers_done) {
        char *e = memmem(c->buf, c->len, "\r\n\r\n", 4);
        if (e == NULL)
            return;
        if (sscanf(c->buf, "HTTP/%*d.%*d %d", &c->status) != 1)
            c->status = -1;
        c->headers_done = 1;
        off = (size_t)(e - c->buf) + 4;
    }
    for (;;) {
        char *e = memmem(c->buf + off, c->len - off, "\n\n", 2);
        if (e == NULL)
            break;
        size_t elen = (size_t)(e - (c->buf + off));
        const char *ev = c->buf + off;
        if (elen >= 12 && memcmp(ev, "data: [DONE]", 12) == 0) {
            c->done_seen = 1;
        } else if (memmem(ev, elen, "\"finish_reason\":null", 20) != NULL &&
                   memmem(ev, elen, "\"delta\":{\"role\"", 16) == NULL) { /* chat's role chunk is no token */
            if (c->events++ == 0)
                c->t_first = t;
            c->t_last = t;
        } else {
            const char *u = memmem(ev, elen, "\"completion_tokens\":", 20);
            if (u != NULL)
                c->usage_tokens = strtol(u + 20, NULL, 10);
        }
        off += elen + 2;
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *prompt = "Once upon a time", *raw = NULL;
    int port = 0, conc = 1, total = 100, max_tokens = 64, warmup = -1, chat = 0;
    double temperature = 0.0, top_p = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--chat")) { chat = 1; continue; }
        if (strcmp(a, "--port") && strcmp(a, "--host") && strcmp(a, "--concurrency") && strcmp(a, "--requests") &&
            strcmp(a, "--max-tokens") && strcmp(a, "--warmup") && strcmp(a, "--prompt") && strcmp(a, "--raw") &&
            strcmp(a, "--temperature") && strcmp(a, "--top-p")) {
            fprintf(stderr, "serve_load: unknown option %s\n", a);
            return 2;
        }
        if (v == NULL) { fprintf(stderr, "serve_load: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--host")) host = v;
        else if (!strcmp(a, "--concurrency")) conc = atoi(v);
        else if (!strcmp(a, "--requests")) total = atoi(v);
        else if (!strcmp(a, "--max-tokens")) max_tokens = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--temperature")) temperature = atof(v);
        else if (!strcmp(a, "--top-p")) top_p = atof(v);
        else raw = v;
        i++;
    }
    if (port <= 0 || port > 65535 || conc < 1 || conc > 4096 || total < 1 || max_tokens < 1 ||
        !(temperature >= 0.0 && temperature <= 2.0) || !(top_p > 0.0 && top_p <= 1.0)) {
        fprintf(stderr, "usage: serve_load --port P [--concurrency C] [--requests R] [--max-tokens N] "
                        "[--prompt TEXT] [--warmup W] [--chat] [--raw FILE] [--temperature 0..2] [--top-p (0,1]]\n");
        return 2;
    }
    if (warmup < 0)
        warmup = conc;
    memset(&g_addr, 0, sizeof(g_addr));
    g_addr.sin_family = AF_INET;
    g_addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &g_addr.sin_addr) != 1) {
        fprintf(stderr, "serve_load: --host must be an IPv4 address\n");
        return 2;
    }

    char *p = json_escape(prompt), body[8192];
    int bl = chat ? snprintf(body, sizeof body,
                             "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":%d,\"temperature\":%g,"
                             "\"top_p\":%g,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
                             p, max_tokens, temperature, top_p)
                  : snprintf(body, sizeof body,
                             "{\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":%g,\"top_p\":%g,\"ignore_eos\":true,"
                             "\"stream\":true,\"stream_options\":{\"include_usage\":true}}", p, max_tokens, temperature, top_p);
    free(p);
    if (bl < 0 || (size_t)bl >= sizeof body) {
        fprintf(stderr, "serve_load: prompt too long\n");
        return 2;
    }
    g_req = malloc(sizeof body + 256);
    if (g_req == NULL)
        die("malloc");
    g_req_len = (size_t)sprintf(g_req, "POST %s HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\n"
                                       "Content-Length: %d\r\n\r\n%s",
                                chat ? "/v1/chat/completions" : "/v1/completions", host, bl, body);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    conn *cs = calloc((size_t)conc, sizeof(*cs));
    double *ttft = calloc((size_t)total, sizeof(double)), *tpot = calloc((size_t)total, sizeof(double));
    if (cs == NULL || ttft == NULL || tpot == NULL)
        die("calloc");
    FILE *rawf = raw ? fopen(raw, "w") : NULL;
    if (raw && rawf == NULL)
        die(raw);

    int all = warmup + total, started = 0, finished = 0, errors = 0, n_ttft = 0, n_tpot = 0;
    long out_tokens = 0;
    double t_measure = 0.0;
    for (int i = 0; i < conc && started < all; i++, started++) {
        cs[i].measured = started >= warmup;
        conn_open(&cs[i], ep);
    }
    if (warmup == 0)
        t_measure = now_s();
    struct epoll_event evs[256];
    while (finished < all) {
        int n = epoll_wait(ep, evs, 256, 60000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) { fprintf(stderr, "serve_load: no progress for 60 s\n"); return 1; }
        for (int k = 0; k < n; k++) {
            conn *c = evs[k].data.ptr;
            int closed = 0;
            if (!c->sent_all && (evs[k].events & EPOLLOUT)) {
                if (c->req_off == 0)
                    c->t_send = now_s();
                ssize_t w = write(c->fd, g_req + c->req_off, g_req_len - c->req_off);
                if (w < 0 && errno != EAGAIN) {
                    closed = 1;
                } else if (w > 0 && (c->req_off += (size_t)w) == g_req_len) {
                    c->sent_all = 1;
                    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            if (evs[k].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
                for (;;) {
                    if (c->cap - c->len < 65536) {
                        c->cap = c->cap * 2 + 65536;
                        c->buf = realloc(c->buf, c->cap);
                        if (c->buf == NULL)
                            die("realloc");
                    }
                    ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
                    if (r > 0) {
                        c->len += (size_t)r;
                        parse(c, now_s());
                        continue;
                    }
                    if (r == 0 || errno != EAGAIN)
                        closed = 1;
                    break;
                }
            }
            if (!closed)
                continue;
            close(c->fd); /* closing removes it from the epoll set */
            c->live = 0;
            finished++;
            int ok = c->status == 200 && c->done_seen && c->events > 0;
            if (!ok) {
                errors++;
                if (errors <= 3)
                    fprintf(stderr, "serve_load: request failed (status %d, %ld token events): %.*s\n",
                            c->status, c->events, (int)(c->len < 300 ? c->len : 300), c->buf ? c->buf : "");
            } else if (c->measured) {
                long toks = c->usage_tokens > 0 ? c->usage_tokens : c->events;
                out_tokens += toks;
                ttft[n_ttft++] = (c->t_first - c->t_send) * 1e3;
                double tp = toks > 1 ? (c->t_last - c->t_first) * 1e3 / (double)(toks - 1) : 0.0;
                if (toks > 1)
                    tpot[n_tpot++] = tp;
                if (rawf)
                    fprintf(rawf, "%.4f %.4f\n", ttft[n_ttft - 1], tp);
            }
            if (finished == warmup)
                t_measure = now_s();
            if (started < all) {
                c->measured = started >= warmup;
                started++;
                conn_open(c, ep);
            }
        }
    }
    double wall = now_s() - t_measure;
    int measured_ok = n_ttft;
    printf("{\"concurrency\":%d,\"requests\":%d,\"errors\":%d,\"max_tokens\":%d,"
           "\"ttft_p50_ms\":%.3f,\"ttft_p99_ms\":%.3f,\"tpot_p50_ms\":%.4f,\"tpot_p99_ms\":%.4f,"
           "\"req_per_s\":%.1f,\"out_tok_per_s\":%.0f,\"wall_s\":%.3f}\n",
           conc, measured_ok, errors, max_tokens, pct(ttft, n_ttft, 0.50), pct(ttft, n_ttft, 0.99),
           pct(tpot, n_tpot, 0.50), pct(tpot, n_tpot, 0.99), measured_ok / wall, (double)out_tokens / wall, wall);
    if (rawf)
        fclose(rawf);
    for (int i = 0; i < conc; i++)
        free(cs[i].buf);
    free(cs);
    free(ttft);
    free(tpot);
    free(g_req);
    close(ep);
    return errors ? 1 : 0;
}
