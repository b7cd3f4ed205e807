/* llm_engine NAME ...: replicas of one model, an engine each (one a GPU: `--device N`; or one a CPU socket).
 *
 * A new request goes to a ready replica (llm_balance): under `least`, the one with the fewest requests in flight
 * (its segment's slots in use, which every worker's submissions count at once), ties taken in turn; under
 * `prefix` (the default), the one with the least work in tokens: 64 a request in flight, plus the prompt
 * tokens its engine has still to compute, less what it took of this prompt before: a replica's prefix cache
 * keeps the prompts it computed, so a conversation's next turn, or another question about the same long
 * document, costs it only the new tokens, and another replica all of them; never one more than 4 (or half the
 * least busy one's) requests over the least busy. The request stays there until it ends, unless that replica
 * dies before its first token (ngx_http_llm_failover, in ngx_http_llm_generate.c, starts it again on another).
 * A replica that is down or restarting is passed over, so the others go on serving. $llm_engine names the
 * choice (ngx_http_llm_vars.c); /health and /metrics look at every replica (ngx_http_llm_info.c,
 * ngx_http_llm_metrics.c). */
#include "ngx_http_llm_module.h"

char *ngx_http_llm_engine_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    (void)cmd;
    ngx_http_llm_loc_conf_t *lcf = conf;
    ngx_str_t *v = cf->args->elts;
    if (lcf->engine_names != NGX_CONF_UNSET_PTR) return "is duplicate";
    if (cf->args->nelts - 1 > NGX_LLM_MAX_REPLICAS) return "takes at most 16 engines";
    lcf->engine_names = ngx_array_create(cf->pool, cf->args->nelts - 1, sizeof(ngx_str_t));
    if (lcf->engine_names == NULL) return NGX_CONF_ERROR;
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        for (ngx_uint_t j = 1; j < i; j++)
            if (v[j].len == v[i].len && ngx_strncmp(v[j].data, v[i].data, v[i].len) == 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "llm_engine \"%V\" named twice", &v[i]);
                return NGX_CONF_ERROR;
            }
        ngx_str_t *n = ngx_array_push(lcf->engine_names);
        if (n == NULL) return NGX_CONF_ERROR;
        *n = v[i];
    }
    return NGX_CONF_OK;
}

ngx_http_llm_engine_t *ngx_http_llm_replica(ngx_http_request_t *r, ngx_http_llm_loc_conf_t *lcf, ngx_uint_t i)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    return &((ngx_http_llm_engine_t *)mcf->engines.elts)[lcf->replicas[i]];
}

ngx_http_llm_engine_t *ngx_http_llm_lcf_engine(ngx_http_request_t *r, ngx_http_llm_loc_conf_t *lcf)
{
    llm_api_err e;
    for (ngx_uint_t i = 0; lcf->n_replicas > 1 && i < lcf->n_replicas; i++) {
        ngx_http_llm_engine_t *eng = ngx_http_llm_replica(r, lcf, i);
        if (ngx_http_llm_engine_ready(eng, &e) == LLM_SHM_OK) return eng;
    }
    return ngx_http_llm_replica(r, lcf, 0);
}

/* llm_balance prefix's table, in shared memory (every worker's requests write and read it): for each prompt
 * block a replica took, a hash of the prompt up to the end of that block, chained from the names of the
 * location's replicas (ngx_http_llm_balance_conf), in the high 48 bits, and in the
 * low 16 which replicas took it (bit i: replica i). A system prompt that every request starts with soon has
 * every replica's bit, so it favours none; a conversation's earlier turns have one. Direct-mapped: a newer
 * block takes the slot of an older one, as the engines' caches give the oldest back first. A stale or
 * colliding entry only sends a request to a replica that has less of it cached than hoped. */
#define NGX_LLM_PREFIX_TAG (~(uint64_t)0xffff)

static uint64_t ngx_http_llm_prefix_mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

#define NGX_LLM_FNV_PRIME 0x100000001b3ULL

static uint64_t ngx_http_llm_prefix_block(uint64_t h, const int32_t *ids)
{
    for (int k = 0; k < NGX_LLM_PREFIX_BLOCK; k++) h = (h ^ (uint32_t)ids[k]) * NGX_LLM_FNV_PRIME;
    return ngx_http_llm_prefix_mix(h);
}

/* The chained hash of each of ids' whole blocks (*nb of them), from the location's replicas (lcf->prefix_seed)
 * and the request's prompt_cache_key if it has one; NULL when there is no whole block (or no memory). Made
 * once a request, for ngx_http_llm_prefix_find and _note. */
static uint64_t *ngx_http_llm_prefix_hashes(ngx_http_request_t *r, ngx_http_llm_loc_conf_t *lcf, const int32_t *ids,
                                            size_t n, const char *key, size_t *nb)
{
    *nb = n / NGX_LLM_PREFIX_BLOCK;
    uint64_t *hs = *nb > 0 ? ngx_palloc(r->pool, *nb * sizeof *hs) : NULL;
    if (hs == NULL) {
        *nb = 0;
        return NULL;
    }
    uint64_t h = lcf->prefix_seed;
    for (const u_char *k = (const u_char *)key; k != NULL && *k; k++) h = (h ^ *k) * NGX_LLM_FNV_PRIME;
    h = ngx_http_llm_prefix_mix(h ^ (key != NULL));
    for (size_t b = 0; b < *nb; b++) hs[b] = h = ngx_http_llm_prefix_block(h, ids + b * NGX_LLM_PREFIX_BLOCK);
    return hs;
}

/* matched[i] (n_replicas of them): how many leading tokens (whole blocks, hashes hs[0..nb)) replica i took. */
static void ngx_http_llm_prefix_find(const uint64_t *table, const uint64_t *hs, size_t nb, ngx_uint_t n_replicas,
                                     size_t *matched)
{
    uint64_t alive = ((uint64_t)1 << n_replicas) - 1;
    for (size_t b = 0; alive && b < nb; b++) {
        uint64_t e = __atomic_load_n(&table[hs[b] & (NGX_LLM_PREFIX_SLOTS - 1)], __ATOMIC_RELAXED);
        alive &= (e & NGX_LLM_PREFIX_TAG) == (hs[b] & NGX_LLM_PREFIX_TAG) ? e : 0;
        for (ngx_uint_t i = 0; i < n_replicas; i++)
            if (alive >> i & 1) matched[i] = (b + 1) * NGX_LLM_PREFIX_BLOCK;
    }
}

/* Records that replica i took the blocks of hashes hs[0..nb). */
static void ngx_http_llm_prefix_note(uint64_t *table, const uint64_t *hs, size_t nb, ngx_uint_t i)
{
    for (size_t b = 0; b < nb; b++) {
        uint64_t *slot = &table[hs[b] & (NGX_LLM_PREFIX_SLOTS - 1)], tag = hs[b] & NGX_LLM_PREFIX_TAG;
        uint64_t bit = (uint64_t)1 << i, e = __atomic_load_n(slot, __ATOMIC_RELAXED), ne;
        do ne = (e & NGX_LLM_PREFIX_TAG) == tag ? e | bit : tag | bit; /* (another block's: taken over) */
        while (ne != e && !__atomic_compare_exchange_n(slot, &e, ne, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    }
}

static ngx_int_t ngx_http_llm_prefix_zone_init(ngx_shm_zone_t *zone, void *data)
{
    ngx_http_llm_main_conf_t *mcf = zone->data;
    if (data) { /* reload: keep what the replicas hold */
        mcf->prefix_table = ((ngx_http_llm_main_conf_t *)data)->prefix_table;
        return NGX_OK;
    }
    ngx_slab_pool_t *shpool = (ngx_slab_pool_t *)zone->shm.addr;
    if (zone->shm.exists) { mcf->prefix_table = shpool->data; return NGX_OK; }
    mcf->prefix_table = ngx_slab_calloc(shpool, NGX_LLM_PREFIX_SLOTS * sizeof(uint64_t));
    if (mcf->prefix_table == NULL) return NGX_ERROR;
    shpool->data = mcf->prefix_table;
    return NGX_OK;
}

ngx_int_t ngx_http_llm_balance_conf(ngx_conf_t *cf, ngx_http_llm_loc_conf_t *lcf)
{
    static ngx_str_t name = ngx_string("llm_prefixes");
    ngx_http_llm_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);
    if (lcf->n_replicas < 2 || lcf->balance != NGX_LLM_BALANCE_PREFIX) return NGX_OK;
    /* a prompt's chain starts from the names of the location's replicas: locations, and reloads that change
     * them, do not mix */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (ngx_uint_t i = 0; i < lcf->n_replicas; i++) {
        ngx_str_t *nm = &((ngx_http_llm_engine_t *)mcf->engines.elts)[lcf->replicas[i]].name;
        for (size_t k = 0; k < nm->len; k++) h = (h ^ nm->data[k]) * NGX_LLM_FNV_PRIME;
        h = (h ^ 0xff) * NGX_LLM_FNV_PRIME; /* (between names) */
    }
    lcf->prefix_seed = h;
    if (mcf->prefixes != NULL) return NGX_OK;
    size_t size = ngx_align(NGX_LLM_PREFIX_SLOTS * sizeof(uint64_t) + 64 * 1024, ngx_pagesize);
    mcf->prefixes = ngx_shared_memory_add(cf, &name, size, &ngx_http_llm_module);
    if (mcf->prefixes == NULL) return NGX_ERROR;
    mcf->prefixes->init = ngx_http_llm_prefix_zone_init;
    mcf->prefixes->data = mcf;
    return NGX_OK;
}

ngx_http_llm_engine_t *ngx_http_llm_pick_engine(ngx_http_request_t *r, const int32_t *ids, size_t n,
                                                const char *cache_key)
{
    static ngx_uint_t turn; /* this worker's: where ties start */
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    ngx_uint_t best = 0;
    if (lcf->n_replicas > 1) {
        int64_t least = -1, load[NGX_LLM_MAX_REPLICAS], pending[NGX_LLM_MAX_REPLICAS];
        size_t matched[NGX_LLM_MAX_REPLICAS] = { 0 };
        int prefix = lcf->balance == NGX_LLM_BALANCE_PREFIX;
        llm_api_err e;
        for (ngx_uint_t i = 0; i < lcf->n_replicas; i++) {
            ngx_http_llm_engine_t *eng = ngx_http_llm_replica(r, lcf, i);
            load[i] = -1; /* not ready */
            if (ngx_http_llm_engine_ready(eng, &e) != LLM_SHM_OK) continue;
            llm_shm_metrics *met = llm_client_map(eng->client)->metrics;
            load[i] = atomic_load(&met->slots_in_use);
            pending[i] = prefix ? atomic_load(&met->prefill_pending) : 0;
            if (least < 0 || load[i] < least) least = load[i];
        }
        uint64_t *table = prefix && ids != NULL ? mcf->prefix_table : NULL;
        size_t nb = 0;
        uint64_t *hs = table != NULL && least >= 0 ? ngx_http_llm_prefix_hashes(r, lcf, ids, n, cache_key, &nb) : NULL;
        if (hs != NULL) ngx_http_llm_prefix_find(table, hs, nb, lcf->n_replicas, matched);
        /* The least busy in tokens of work under prefix: NGX_LLM_PREFIX_PER_REQUEST a request in flight, plus the
         * prompt tokens it has still to compute, less the tokens of this prompt it took before; never one more
         * than 4 requests, and half, over the least busy. Ties: the one that took more of the prompt, then in
         * turn. */
        int64_t cap = least + ngx_max(4, least / 2), score = 0;
        for (ngx_uint_t k = 0, found = 0; k < lcf->n_replicas; k++) {
            ngx_uint_t i = (turn + k) % lcf->n_replicas;
            if (load[i] < 0 || load[i] > cap) continue;
            int64_t sc = load[i] * NGX_LLM_PREFIX_PER_REQUEST + pending[i] - (int64_t)matched[i];
            if (!found || sc < score || (sc == score && matched[i] > matched[best])) {
                found = 1;
                score = sc;
                best = i;
            }
        }
        turn++;
        if (hs != NULL) ngx_http_llm_prefix_note(table, hs, nb, best);
    }
    ngx_http_llm_engine_t *eng = ngx_http_llm_replica(r, lcf, best);
    ngx_http_llm_log_t *l = ngx_http_llm_log(r);
    if (l != NULL) l->eng = eng;
    return eng;
}
