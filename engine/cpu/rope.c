/* Rotary position embedding: precomputed cos/sin per (position, frequency). */
#include <math.h>
#include <stdlib.h>

#include "backend_util.h"
#include "cpu/cpu_backend.h"

int cpu_rope_init(cpu_rope *r, const llm_model *m, int n_pos, int swa)
{
    int half = m->cfg.head_dim / 2;
    r->half_dim = half;
    r->n_pos = n_pos;
    r->cos = malloc((size_t)n_pos * (size_t)half * sizeof(float));
    r->sin = malloc((size_t)n_pos * (size_t)half * sizeof(float));
    double *freq = malloc((size_t)(half > 0 ? half : 1) * sizeof(double));
    if (r->cos == NULL || r->sin == NULL || freq == NULL) {
        free(freq);
        cpu_rope_free(r);
        return -1;
    }
    for (int i = 0; i < half; i++)
        freq[i] = swa ? llm_rope_freq_swa(m, i) : llm_rope_freq(m, i);
    double ms = swa && m->cfg.rope_theta_swa > 0.0f ? 1.0 : llm_rope_mscale(m);
    for (int p = 0; p < n_pos; p++)
        for (int i = 0; i < half; i++) {
            double a = p * freq[i], rot = llm_rope_rotates(&m->cfg, i);
            r->cos[(size_t)p * half + i] = (float)(rot ? cos(a) * ms : 1.0);
            r->sin[(size_t)p * half + i] = (float)(rot ? sin(a) * ms : 0.0);
        }
    free(freq);
    return 0;
}

void cpu_rope_free(cpu_rope *r)
{
    free(r->cos);
    free(r->sin);
    r->cos = r->sin = NULL;
}

void cpu_rope_apply(const cpu_rope *r, llm_rope_layout layout, float *v, int n_heads, int pos)
{
    int half = r->half_dim, hd = 2 * half;
    const float *c = r->cos + (size_t)pos * half, *s = r->sin + (size_t)pos * half;
    for (int h = 0; h < n_heads; h++) {
        float *x = v + (size_t)h * hd;
        if (layout == LLM_ROPE_ADJACENT) {
            for (int i = 0; i < half; i++) {
                float a = x[2 * i], b = x[2 * i + 1];
                x[2 * i]     = a * c[i] - b * s[i];
                x[2 * i + 1] = a * s[i] + b * c[i];
            }
        } else {
            for (int i = 0; i < half; i++) {
                float a = x[i], b = x[i + half];
                x[i]        = a * c[i] - b * s[i];
                x[i + half] = a * s[i] + b * c[i];
            }
        }
    }
}
