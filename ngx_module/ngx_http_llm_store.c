/* Stored responses (llm_responses_store SIZE): the Responses API's store. A response a worker finished, its
 * request not saying store: false, is kept in a shared zone ("llm_responses") so that every worker finds it:
 * GET /v1/responses/<id> gives it back, DELETE drops it, and previous_response_id puts the conversation up to
 * it (each response's input items and output items, oldest first) before a new request's input. Each record
 * holds its own turn and the id before it, so a conversation costs its length once, not once per turn. When
 * the zone is full the least recently used records go first. */
#include "ngx_http_llm_module.h"

#define NGX_LLM_STORE_MAX_CHAIN 1000 /* turns followed back from a previous_response_id */
#define NGX_LLM_STORE_ID_MAX    64

typedef struct {
    ngx_rbtree_t      tree;
    ngx_rbtree_node_t sentinel;
    ngx_queue_t       lru;   /* most recently used first */
} ngx_http_llm_store_sh_t;

typedef struct {
    ngx_http_llm_store_sh_t *sh;
    ngx_slab_pool_t         *shpool;
} ngx_http_llm_store_ctx_t;

/* One response: id, the id before it (or none), this turn's items (JSON array text), the response (JSON). */
typedef struct {
    ngx_rbtree_node_t node;  /* key: crc32 of the id */
    ngx_queue_t       lru;
    u_short           id_len, prev_len;
    uint32_t          items_len, response_len;
    uint32_t          n_input;  /* the first n_input items are the request's input, the rest its output */
    u_char            data[1];
} ngx_http_llm_stored_t;

static ngx_str_t ngx_http_llm_store_zone_name = ngx_string("llm_responses");

static void ngx_http_llm_store_insert(ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel)
{
    for (;;) { /* equal keys go right: ids are compared on lookup */
        ngx_rbtree_node_t **p = node->key < temp->key ? &temp->left : &temp->right;
        if (*p == sentinel) {
            *p = node;
            node->parent = temp;
            node->left = sentinel;
            node->right = sentinel;
            ngx_rbt_red(node);
            return;
        }
        temp = *p;
    }
}

static ngx_int_t ngx_http_llm_store_zone_init(ngx_shm_zone_t *zone, void *data)
{
    ngx_http_llm_store_ctx_t *ctx = zone->data, *old = data;
    ctx->shpool = (ngx_slab_pool_t *)zone->shm.addr;
    if (old) { /* reload: keep what is stored */
        ctx->sh = old->sh;
        return NGX_OK;
    }
    if (zone->shm.exists) { ctx->sh = ctx->shpool->data; return NGX_OK; }
    ctx->sh = ngx_slab_calloc(ctx->shpool, sizeof(ngx_http_llm_store_sh_t));
    if (ctx->sh == NULL) return NGX_ERROR;
    ngx_rbtree_init(&ctx->sh->tree, &ctx->sh->sentinel, ngx_http_llm_store_insert);
    ngx_queue_init(&ctx->sh->lru);
    ctx->shpool->data = ctx->sh;
    ctx->shpool->log_nomem = 0; /* a full zone drops old records; that is not an error */
    return NGX_OK;
}

char *ngx_http_llm_store_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    (void)cmd;
    ngx_http_llm_main_conf_t *mcf = conf;
    ngx_str_t *v = cf->args->elts;
    if (mcf->store != NULL) return "is duplicate";
    if (ngx_strcmp(v[1].data, "off") == 0) return NGX_CONF_OK;
    ssize_t size = ngx_parse_size(&v[1]);
    if (size == NGX_ERROR || size < (ssize_t)(8 * ngx_pagesize)) return "takes a size of at least 8 pages (e.g. 64m), or off";
    ngx_shm_zone_t *zone = ngx_shared_memory_add(cf, &ngx_http_llm_store_zone_name, (size_t)size, &ngx_http_llm_module);
    if (zone == NULL) return NGX_CONF_ERROR;
    ngx_http_llm_store_ctx_t *ctx = ngx_pcalloc(cf->pool, sizeof *ctx);
    if (ctx == NULL) return NGX_CONF_ERROR;
    zone->init = ngx_http_llm_store_zone_init;
    zone->data = ctx;
    mcf->store = zone;
    return NGX_CONF_OK;
}

static ngx_http_llm_store_ctx_t *ngx_http_llm_store_ctx(ngx_http_request_t *r)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    return mcf->store ? mcf->store->data : NULL;
}

int ngx_http_llm_store_on(ngx_http_request_t *r)
{
    return ngx_http_llm_store_ctx(r) != NULL;
}

/* The record of id (zone locked), or NULL. */
static ngx_http_llm_stored_t *ngx_http_llm_store_find(ngx_http_llm_store_ctx_t *ctx, const u_char *id, size_t len)
{
    uint32_t key = ngx_crc32_short((u_char *)id, len);
    ngx_rbtree_node_t *n = ctx->sh->tree.root, *s = ctx->sh->tree.sentinel;
    while (n != s) {
        if (key != n->key) { n = key < n->key ? n->left : n->right; continue; }
        ngx_http_llm_stored_t *st = (ngx_http_llm_stored_t *)n;
        if (st->id_len == len && ngx_memcmp(st->data, id, len) == 0) return st;
        n = n->right; /* an equal key: the others are to the right */
    }
    return NULL;
}

static void ngx_http_llm_store_drop(ngx_http_llm_store_ctx_t *ctx, ngx_http_llm_stored_t *st)
{
    ngx_rbtree_delete(&ctx->sh->tree, &st->node);
    ngx_queue_remove(&st->lru);
    ngx_slab_free_locked(ctx->shpool, st);
}

ngx_int_t ngx_http_llm_store_put(ngx_http_request_t *r, const char *id, const char *prev, const char *items,
                                 uint32_t n_input, const char *response)
{
    ngx_http_llm_store_ctx_t *ctx = ngx_http_llm_store_ctx(r);
    if (ctx == NULL) return NGX_DECLINED;
    size_t il = ngx_strlen(id), pl = prev ? ngx_strlen(prev) : 0, tl = ngx_strlen(items), rl = ngx_strlen(response);
    if (il == 0 || il > NGX_LLM_STORE_ID_MAX || pl > NGX_LLM_STORE_ID_MAX) return NGX_DECLINED;
    size_t size = offsetof(ngx_http_llm_stored_t, data) + il + pl + tl + rl;
    ngx_shmtx_lock(&ctx->shpool->mutex);
    ngx_http_llm_stored_t *st = ngx_http_llm_store_find(ctx, (const u_char *)id, il);
    if (st != NULL) ngx_http_llm_store_drop(ctx, st);
    while ((st = ngx_slab_alloc_locked(ctx->shpool, size)) == NULL && !ngx_queue_empty(&ctx->sh->lru))
        ngx_http_llm_store_drop(ctx, ngx_queue_data(ngx_queue_last(&ctx->sh->lru), ngx_http_llm_stored_t, lru));
    if (st == NULL) { /* larger than the whole zone */
        ngx_shmtx_unlock(&ctx->shpool->mutex);
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm: response %s (%uz bytes) is larger than llm_responses_store; not stored", id, size);
        return NGX_DECLINED;
    }
    st->id_len = (u_short)il;
    st->prev_len = (u_short)pl;
    st->items_len = (uint32_t)tl;
    st->response_len = (uint32_t)rl;
    st->n_input = n_input;
    u_char *p = ngx_cpymem(st->data, id, il);
    p = ngx_cpymem(p, prev ? prev : "", pl);
    p = ngx_cpymem(p, items, tl);
    ngx_memcpy(p, response, rl);
    st->node.key = ngx_crc32_short((u_char *)id, il);
    ngx_rbtree_insert(&ctx->sh->tree, &st->node);
    ngx_queue_insert_head(&ctx->sh->lru, &st->lru);
    ngx_shmtx_unlock(&ctx->shpool->mutex);
    return NGX_OK;
}

/* A record's items (response 0) or response JSON (1) copied out (malloc'd, NUL-ended), the record now the most
 * recently used; NULL out of memory. The zone is locked. */
static char *ngx_http_llm_store_copy(ngx_http_llm_store_ctx_t *ctx, ngx_http_llm_stored_t *st, int response)
{
    size_t off = st->id_len + st->prev_len + (response ? st->items_len : 0);
    size_t len = response ? st->response_len : st->items_len;
    char *out = malloc(len + 1);
    if (out == NULL) return NULL;
    ngx_memcpy(out, st->data + off, len);
    out[len] = 0;
    ngx_queue_remove(&st->lru);
    ngx_queue_insert_head(&ctx->sh->lru, &st->lru);
    return out;
}

char *ngx_http_llm_store_get(ngx_http_request_t *r, const u_char *id, size_t len)
{
    ngx_http_llm_store_ctx_t *ctx = ngx_http_llm_store_ctx(r);
    if (ctx == NULL) return NULL;
    ngx_shmtx_lock(&ctx->shpool->mutex);
    ngx_http_llm_stored_t *st = ngx_http_llm_store_find(ctx, id, len);
    char *out = st != NULL ? ngx_http_llm_store_copy(ctx, st, 1) : NULL;
    ngx_shmtx_unlock(&ctx->shpool->mutex);
    return out;
}

cJSON *ngx_http_llm_store_input_items(ngx_http_request_t *r, const u_char *id, size_t len)
{
    ngx_http_llm_store_ctx_t *ctx = ngx_http_llm_store_ctx(r);
    if (ctx == NULL) return NULL;
    ngx_shmtx_lock(&ctx->shpool->mutex);
    ngx_http_llm_stored_t *st = ngx_http_llm_store_find(ctx, id, len);
    char *items = st != NULL ? ngx_http_llm_store_copy(ctx, st, 0) : NULL;
    uint32_t n_input = st != NULL ? st->n_input : 0;
    ngx_shmtx_unlock(&ctx->shpool->mutex);
    cJSON *all = items ? cJSON_Parse(items) : NULL;
    free(items);
    while (all != NULL && cJSON_GetArraySize(all) > (int)n_input) cJSON_DeleteItemFromArray(all, (int)n_input);
    return all;
}

int ngx_http_llm_store_delete(ngx_http_request_t *r, const u_char *id, size_t len)
{
    ngx_http_llm_store_ctx_t *ctx = ngx_http_llm_store_ctx(r);
    if (ctx == NULL) return 0;
    ngx_shmtx_lock(&ctx->shpool->mutex);
    ngx_http_llm_stored_t *st = ngx_http_llm_store_find(ctx, id, len);
    if (st != NULL) ngx_http_llm_store_drop(ctx, st);
    ngx_shmtx_unlock(&ctx->shpool->mutex);
    return st != NULL;
}

cJSON *ngx_http_llm_store_history(void *data, const char *id, llm_api_err *e)
{
    ngx_http_request_t *r = data;
    ngx_http_llm_store_ctx_t *ctx = ngx_http_llm_store_ctx(r);
    if (ctx == NULL) {
        llm_api_seterr(e, 400, "previous_response_id", "unsupported_parameter",
                       "'previous_response_id' needs responses kept by the server; this one keeps none "
                       "(llm_responses_store is off): send the whole conversation in 'input'");
        return NULL;
    }
    /* each turn's items copied out under the lock, newest first; parsed after it */
    char *turns[NGX_LLM_STORE_MAX_CHAIN];
    int n = 0;
    u_char cur[NGX_LLM_STORE_ID_MAX];
    size_t cl = ngx_strlen(id);
    int missing = cl == 0 || cl > NGX_LLM_STORE_ID_MAX, oom = 0;
    if (!missing) ngx_memcpy(cur, id, cl);
    ngx_shmtx_lock(&ctx->shpool->mutex);
    while (!missing && !oom && cl > 0 && n < NGX_LLM_STORE_MAX_CHAIN) {
        ngx_http_llm_stored_t *st = ngx_http_llm_store_find(ctx, cur, cl);
        if (st == NULL) { missing = 1; break; }
        if ((turns[n++] = ngx_http_llm_store_copy(ctx, st, 0)) == NULL) { n--; oom = 1; break; }
        cl = st->prev_len;
        ngx_memcpy(cur, st->data + st->id_len, cl);
    }
    ngx_shmtx_unlock(&ctx->shpool->mutex);
    cJSON *all = missing || oom ? NULL : cJSON_CreateArray();
    for (int i = n - 1; all != NULL && i >= 0; i--) {
        cJSON *items = cJSON_Parse(turns[i]), *it;
        if (items == NULL) { cJSON_Delete(all); all = NULL; oom = 1; break; }
        while ((it = cJSON_DetachItemFromArray(items, 0)) != NULL) cJSON_AddItemToArray(all, it);
        cJSON_Delete(items);
    }
    for (int i = 0; i < n; i++) free(turns[i]);
    if (missing)
        llm_api_seterr(e, 400, "previous_response_id", "previous_response_not_found",
                       n == 0 ? "previous response with id '%.64s' not found (never stored, deleted, or dropped from a "
                                "full llm_responses_store)"
                              : "the conversation before response '%.64s' is no longer stored (an earlier turn was "
                                "deleted or dropped from a full llm_responses_store)", id);
    else if (all == NULL)
        llm_api_seterr(e, 500, NULL, NULL, "out of memory");
    return all;
}
