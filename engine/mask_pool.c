/* The mask pool (mask_pool.h): threads wait for a round of jobs, take them one at a time, and the last to
 * finish one wakes the waiter. */
#include "mask_pool.h"

#include <pthread.h>
#include <stdlib.h>

struct llm_mask_pool {
    pthread_t      *th;
    int32_t       **cand;        /* each thread's scratch (llm_json_scratch_new), cap_th of them */
    int             n_th, cap_th;
    pthread_mutex_t mu;
    pthread_cond_t  go, done;
    uint64_t        round;       /* bumped by every start */
    int             stop;
    llm_mask_job   *jobs;
    int             n_jobs, next, finished;
    const llm_json_vocab *v;
    int             n_logits;
};

typedef struct {
    llm_mask_pool *p;
    int            k;
} worker_arg;

static void *worker(void *arg)
{
    worker_arg *a = arg;
    llm_mask_pool *p = a->p;
    int32_t *cand = p->cand[a->k];
    free(a);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && (p->round == seen || p->next >= p->n_jobs))
            pthread_cond_wait(&p->go, &p->mu);
        if (p->stop)
            break;
        seen = p->round;
        while (p->next < p->n_jobs) {
            llm_mask_job *j = &p->jobs[p->next++];
            pthread_mutex_unlock(&p->mu);
            j->left = llm_schema_mask_bits(j->state, p->v, j->allow, p->n_logits, cand);
            pthread_mutex_lock(&p->mu);
            if (++p->finished == p->n_jobs)
                pthread_cond_signal(&p->done);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

llm_mask_pool *llm_mask_pool_new(int threads, const llm_json_vocab *v, int n_logits)
{
    if (threads < 1 || v == NULL)
        return NULL;
    llm_mask_pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->v = v;
    p->n_logits = n_logits;
    p->th = calloc((size_t)threads, sizeof(pthread_t));
    p->cand = calloc((size_t)threads, sizeof(int32_t *));
    p->cap_th = p->cand != NULL ? threads : 0;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int k = 0; p->th != NULL && p->cand != NULL && k < threads; k++) {
        worker_arg *a = malloc(sizeof(*a));
        p->cand[k] = llm_json_scratch_new(v);
        if (a == NULL || p->cand[k] == NULL) {
            free(a);
            break;
        }
        a->p = p;
        a->k = k;
        if (pthread_create(&p->th[k], NULL, worker, a) != 0) {
            free(a);
            break;
        }
        p->n_th++;
    }
    if (p->n_th < threads) {
        llm_mask_pool_free(p);
        return NULL;
    }
    return p;
}

void llm_mask_pool_start(llm_mask_pool *p, llm_mask_job *jobs, int n)
{
    pthread_mutex_lock(&p->mu);
    p->jobs = jobs;
    p->n_jobs = n;
    p->next = p->finished = 0;
    p->round++;
    if (n > 0)
        pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
}

void llm_mask_pool_wait(llm_mask_pool *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->finished < p->n_jobs)
        pthread_cond_wait(&p->done, &p->mu);
    p->n_jobs = 0;
    pthread_mutex_unlock(&p->mu);
}

void llm_mask_pool_free(llm_mask_pool *p)
{
    if (p == NULL)
        return;
    if (p->n_th > 0)
        llm_mask_pool_wait(p);
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int k = 0; k < p->n_th; k++)
        pthread_join(p->th[k], NULL);
    for (int k = 0; k < p->cap_th; k++)
        free(p->cand[k]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->cand);
    free(p->th);
    free(p);
}
