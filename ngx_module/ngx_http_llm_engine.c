/* Per-worker engine client: its wake-up socket sits in the event loop as a
 * read event; a one-second timer notices an engine that died silently. */
#include "ngx_http_llm_module.h"

void ngx_http_llm_pending_add(ngx_http_llm_engine_t *eng, ngx_http_llm_pending_t *p)
{
    ngx_queue_insert_tail(&eng->active, &p->queue);
    p->queued = 1;
    /* Read (and arm the wake-up) from the event loop, not from inside the caller's handler. */
    ngx_post_event(eng->conn->read, &ngx_posted_events);
}

void ngx_http_llm_pending_remove(ngx_http_llm_pending_t *p)
{
    if (p->queued) {
        ngx_queue_remove(&p->queue);
        p->queued = 0;
    }
}

static void ngx_http_llm_progress_all(ngx_http_llm_engine_t *eng)
{
    /* Requests may finish (and leave the queue) while we walk it: take them out first. */
    ngx_queue_t work;
    ngx_queue_init(&work);
    if (!ngx_queue_empty(&eng->active)) {
        ngx_queue_add(&work, &eng->active);
        ngx_queue_init(&eng->active);
    }
    while (!ngx_queue_empty(&work)) {
        ngx_queue_t *qn = ngx_queue_head(&work);
        ngx_queue_remove(qn);
        ngx_http_llm_pending_t *p = ngx_queue_data(qn, ngx_http_llm_pending_t, queue);
        p->queued = 0;
        if (p->step(p->ctx)) { /* unfinished: back on the queue */
            ngx_queue_insert_tail(&eng->active, &p->queue);
            p->queued = 1;
        }
    }
}

static void ngx_http_llm_wake(ngx_event_t *rev)
{
    ngx_connection_t *c = rev->data;
    ngx_http_llm_engine_t *eng = c->data;
    llm_client_drain(eng->client);
    ngx_http_llm_progress_all(eng);
    /* Tokens that landed while we read would send no wake-up (we were not
     * waiting): come back on the next loop iteration, after other connections. */
    if (!ngx_queue_empty(&eng->active) && llm_client_arm(eng->client)) {
        ngx_post_event(rev, &ngx_posted_next_events);
    }
    if (ngx_handle_read_event(rev, 0) != NGX_OK)
        ngx_log_error(NGX_LOG_ALERT, eng->log, 0, "llm: could not re-arm the engine wake-up event");
}

static void ngx_http_llm_check(ngx_event_t *ev)
{
    ngx_http_llm_engine_t *eng = ev->data;
    if (!ngx_queue_empty(&eng->active)) {
        /* An engine that died without a successor is only noticed here (and embeddings waiting for a slot
         * start here). */
        (void)llm_client_check(eng->client);
        ngx_http_llm_progress_all(eng);
    }
    if (!ngx_exiting) ngx_add_timer(ev, 1000);
}

ngx_int_t ngx_http_llm_engine_init_process(ngx_cycle_t *cycle, ngx_http_llm_engine_t *eng)
{
    char name[LLM_SHM_MAX_NAME], err[256];
    ngx_cpystrn((u_char *)name, eng->name.data, ngx_min(sizeof name, eng->name.len + 1));
    ngx_queue_init(&eng->active);
    eng->log = cycle->log;
    eng->client = llm_client_new(name, err, sizeof err);
    if (eng->client == NULL) {
        /* Not fatal: every request on this engine answers 503 and says why. */
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "llm: engine \"%s\": %s", name, err);
        return NGX_OK;
    }
    ngx_connection_t *c = ngx_get_connection(llm_client_fd(eng->client), cycle->log);
    if (c == NULL) {
        llm_client_free(eng->client);
        eng->client = NULL;
        return NGX_ERROR;
    }
    c->data = eng;
    c->read->handler = ngx_http_llm_wake;
    c->read->log = cycle->log;
    c->write->log = cycle->log;
    eng->conn = c;
    if (ngx_handle_read_event(c->read, 0) != NGX_OK) return NGX_ERROR;
    eng->check.handler = ngx_http_llm_check;
    eng->check.data = eng;
    eng->check.log = cycle->log;
    eng->check.cancelable = 1;
    ngx_add_timer(&eng->check, 1000);
    return NGX_OK;
}

void ngx_http_llm_engine_exit_process(ngx_http_llm_engine_t *eng)
{
    if (eng->check.timer_set) ngx_del_timer(&eng->check);
    if (eng->conn) {
        /* The client owns the fd: detach it from the connection before freeing both. */
        if (eng->conn->read->active) ngx_del_event(eng->conn->read, NGX_READ_EVENT, 0);
        eng->conn->fd = (ngx_socket_t)-1;
        ngx_free_connection(eng->conn);
        eng->conn = NULL;
    }
    if (eng->client) {
        llm_client_free(eng->client);
        eng->client = NULL;
    }
}
