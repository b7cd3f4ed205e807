/* Random-weight model generator: GGUF files of a real model's shape (Llama, Qwen 2,
 * Qwen 3, Qwen 3 MoE, Mixtral, Gemma 2 / 3, Phi 3, SmolLM3, Granite, Granite MoE; BERT encoders) written tensor by tensor. */
#include "model_gen.h"
#include "model.h"
#include "model_write.h"
#include "gguf.h"
#include "gguf_quants.h"
#include "parallel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    const char *name;
    llm_config  cfg;
    int         llama3;  /* Llama 3 tokenizer + rope scaling; else the SPM stories tokenizer */
    const char *arch;    /* NULL: "llama"; Qwen presets carry Llama 3's vocabulary with Qwen 2's pre-tokenizer */
    /* Spread of the matrices, the embedding and the biases (0: 0.02, 0.02, 0.1). The tiny Qwen
     * presets use 1/sqrt(dim) and 1: activations of order 1 and peaked next-token distributions,
     * so that parity tests see every part of the layer in the logits. */
    float       sd, emb_sd, bias_sd;
    float       post_norm; /* Gemma 2 / 3's post norms' mean (0: 1): the tiny ones' blocks then outweigh the
                            * embedding in the residual, as a trained model's do */
} preset;

static const preset presets[] = {
    { "tiny", { .dim = 64, .hidden_dim = 172, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                .vocab_size = 512, .seq_len = 512, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                .tied_embeddings = 1, .bos_id = 1, .eos_id = 2 }, 0, NULL, 0, 0, 0, 0 },
    /* the tiny shape with Llama 3's tokenizer and chat template: tests of what is Llama 3's (tools) */
    { "tiny-llama3", { .dim = 64, .hidden_dim = 172, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                       .vocab_size = 128256, .seq_len = 4096, .rope_theta = 500000.0f, .norm_eps = 1e-5f,
                       .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, NULL, 0, 0, 0, 0 },
    { "stories110m", { .dim = 768, .hidden_dim = 2048, .n_layers = 12, .n_heads = 12, .n_kv_heads = 12,
                       .head_dim = 64, .vocab_size = 32000, .seq_len = 1024, .rope_theta = 10000.0f,
                       .norm_eps = 1e-5f, .tied_embeddings = 1, .bos_id = 1, .eos_id = 2 }, 0, NULL, 0, 0, 0, 0 },
    { "llama-3.2-1b", { .dim = 2048, .hidden_dim = 8192, .n_layers = 16, .n_heads = 32, .n_kv_heads = 8,
                        .head_dim = 64, .vocab_size = 128256, .seq_len = 131072, .rope_theta = 500000.0f,
                        .norm_eps = 1e-5f, .rope_scaling = 1, .rope_factor = 32.0f, .rope_low_freq_factor = 1.0f,
                        .rope_high_freq_factor = 4.0f, .rope_orig_ctx = 8192, .tied_embeddings = 1,
                        .bos_id = 128000, .eos_id = 128009 }, 1, NULL, 0, 0, 0, 0 },
    { "llama-3.2-3b", { .dim = 3072, .hidden_dim = 8192, .n_layers = 28, .n_heads = 24, .n_kv_heads = 8,
                        .head_dim = 128, .vocab_size = 128256, .seq_len = 131072, .rope_theta = 500000.0f,
                        .norm_eps = 1e-5f, .rope_scaling = 1, .rope_factor = 32.0f, .rope_low_freq_factor = 1.0f,
                        .rope_high_freq_factor = 4.0f, .rope_orig_ctx = 8192, .tied_embeddings = 1,
                        .bos_id = 128000, .eos_id = 128009 }, 1, NULL, 0, 0, 0, 0 },
    /* Qwen 2 (q/k/v biases) and Qwen 3 (q/k norms, head_dim not dim / heads), tiny, then the shapes of
     * Qwen2.5-0.5B and Qwen3-0.6B with Llama 3's 128,256-token vocabulary instead of Qwen's 151,936 */
    { "tiny-qwen2", { .dim = 64, .hidden_dim = 172, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                      .vocab_size = 128256, .seq_len = 4096, .rope_theta = 1000000.0f, .norm_eps = 1e-6f,
                      .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, "qwen2", 0.125f, 1.0f, 0.5f, 0 },
    /* Phi 3 (q|k|v and gate|up each one fused matrix, an untied classifier), tiny */
    { "tiny-phi3", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                     .vocab_size = 128256, .seq_len = 4096, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                     .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 }, 1, "phi3", 0.125f, 1.0f, 0, 0 },
    /* ... with LongRoPE as Phi 3's 128k models carry it: a context of 512 over an original 32, so that the long
     * factors apply (attention factor sqrt(1 + ln 16 / ln 32)) */
    { "tiny-phi3-longrope", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                              .head_dim = 16, .vocab_size = 128256, .seq_len = 512, .rope_theta = 10000.0f,
                              .norm_eps = 1e-5f, .rope_scaling = LLM_ROPE_SCALING_LONGROPE, .rope_orig_ctx = 32,
                              .rope_mscale = 1.34164079f, .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 },
      1, "phi3", 0.125f, 1.0f, 0, 0 },
    /* ... Phi-4-mini's way: 3/4 of each head rotating (12 of 16), LongRoPE, GPT-4o's pre-tokenizer (over Llama 3's
     * vocabulary) */
    { "tiny-phi4-mini", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                          .vocab_size = 128256, .seq_len = 512, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                          .rope_dims = 12, .rope_scaling = LLM_ROPE_SCALING_LONGROPE, .rope_orig_ctx = 32,
                          .rope_mscale = 1.34164079f, .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 },
      1, "phi3", 0.125f, 1.0f, 0, 0 },
    /* SmolLM3 (a llama whose every fourth layer has no rope: NoPE), tiny, 8 layers (2 without rope) */
    { "tiny-smollm3", { .dim = 64, .hidden_dim = 192, .n_layers = 8, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                        .vocab_size = 128256, .seq_len = 4096, .rope_theta = 10000.0f, .norm_eps = 1e-6f,
                        .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, "smollm3", 0.125f, 1.0f, 0,
      0 },
    /* Granite 3 (a llama with four scales: embedding, attention, residual, logits), tiny, with StarCoder's two-stage
     * pre-tokenizer (refact) over Llama 3's vocabulary; scales far enough from 1 that leaving one out shows */
    { "tiny-granite", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                        .vocab_size = 128256, .seq_len = 4096, .rope_theta = 10000.0f, .norm_eps = 1e-6f,
                        .embd_scale = 3.0f, .attn_scale = 0.4f, .residual_scale = 0.6f, .logit_scale = 0.5f,
                        .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, "granite", 0.125f, 0.33f, 0,
      0 },
    /* SmolLM3-3B's and Granite 3.3 2B's shapes (Llama 3's vocabulary instead of SmolLM3's 128,256 / Granite's
     * 49,159; Granite's scales as in granite-3.3-2b-instruct) */
    { "smollm3-3b", { .dim = 2048, .hidden_dim = 11008, .n_layers = 36, .n_heads = 16, .n_kv_heads = 4,
                      .head_dim = 128, .vocab_size = 128256, .seq_len = 65536, .rope_theta = 5000000.0f,
                      .norm_eps = 1e-6f, .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, "smollm3",
      0, 0, 0, 0 },
    { "granite-3.3-2b", { .dim = 2048, .hidden_dim = 8192, .n_layers = 40, .n_heads = 32, .n_kv_heads = 8,
                          .head_dim = 64, .vocab_size = 128256, .seq_len = 131072, .rope_theta = 10000000.0f,
                          .norm_eps = 1e-5f, .embd_scale = 12.0f, .attn_scale = 0.015625f, .residual_scale = 0.22f,
                          .logit_scale = 8.0f, .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1,
      "granite", 0, 0, 0, 0 },
    /* a Mistral-style llama with Mistral's Tekken pre-tokenizer over Llama 3's vocabulary (Nemo's split) */
    { "tiny-tekken", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                       .vocab_size = 128256, .seq_len = 4096, .rope_theta = 1000000.0f, .norm_eps = 1e-5f,
                       .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, NULL, 0.125f, 1.0f, 0, 0 },
    { "tiny-qwen3", { .dim = 64, .hidden_dim = 172, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 32,
                      .vocab_size = 128256, .seq_len = 4096, .rope_theta = 1000000.0f, .norm_eps = 1e-6f,
                      .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, "qwen3", 0.125f, 1.0f, 0, 0 },
    /* Gemma 3 (q/k norms, norms after attention and FFN, GeGLU, a sliding window of 16 on five layers of six
     * with their own rope base) and Gemma 2 (the window on every other layer, soft caps low enough to bind on
     * these scores, where Gemma 2's 50 and 30 would barely touch them), tiny; then Gemma 3
     * 1B's shape, all with Llama 3's vocabulary instead of Gemma's 262,144 */
    { "tiny-gemma3", { .dim = 64, .hidden_dim = 192, .n_layers = 6, .n_heads = 4, .n_kv_heads = 1, .head_dim = 32,
                       .vocab_size = 128256, .seq_len = 4096, .rope_theta = 1000000.0f, .norm_eps = 1e-6f,
                       .swa_window = 16, .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, "gemma3",
      0.125f, 1.0f, 0, 4.0f },
    { "tiny-gemma2", { .dim = 64, .hidden_dim = 192, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2, .head_dim = 32,
                       .vocab_size = 128256, .seq_len = 4096, .rope_theta = 10000.0f, .norm_eps = 1e-6f,
                       .swa_window = 16, .attn_softcap = 2.0f, .final_softcap = 30.0f, .tied_embeddings = 1,
                       .bos_id = 128000, .eos_id = 128009 }, 1, "gemma2", 0.125f, 1.0f, 0, 4.0f },
    /* EmbeddingGemma: Gemma 3's layers without the causal mask (a symmetric window of 8 each side here), mean
     * pooling, then Dense 64 -> 256 -> 64; then EmbeddingGemma-300m's shape (24 layers of 768, 3 heads of 256,
     * Dense 768 -> 3072 -> 768), Llama 3's vocabulary instead of Gemma's */
    { "tiny-embeddinggemma", { .dim = 64, .hidden_dim = 192, .n_layers = 6, .n_heads = 4, .n_kv_heads = 1,
                               .head_dim = 32, .vocab_size = 128256, .seq_len = 2048, .rope_theta = 1000000.0f,
                               .norm_eps = 1e-6f, .swa_window = 16, .tied_embeddings = 1, .bos_id = 128000,
                               .eos_id = 128009 }, 1, "gemma-embedding", 0.125f, 1.0f, 0, 4.0f },
    { "embeddinggemma-300m", { .dim = 768, .hidden_dim = 1152, .n_layers = 24, .n_heads = 3, .n_kv_heads = 1,
                               .head_dim = 256, .vocab_size = 128256, .seq_len = 2048, .rope_theta = 1000000.0f,
                               .norm_eps = 1e-6f, .swa_window = 512, .tied_embeddings = 1, .bos_id = 128000,
                               .eos_id = 128009 }, 1, "gemma-embedding", 0, 0, 0, 0 },
    { "gemma-3-1b", { .dim = 1152, .hidden_dim = 6912, .n_layers = 26, .n_heads = 4, .n_kv_heads = 1,
                      .head_dim = 256, .vocab_size = 128256, .seq_len = 32768, .rope_theta = 1000000.0f,
                      .norm_eps = 1e-6f, .swa_window = 512, .tied_embeddings = 1, .bos_id = 128000,
                      .eos_id = 128009 }, 1, "gemma3", 0, 0, 0, 0 },
    /* Mixture of experts: Qwen 3 MoE (q/k norms, 8 experts of width 64, 2 per token) and a Mixtral-style
     * llama (4 experts as wide as its feed_forward_length, 2 per token; 256 wide, so that llama.cpp's
     * quantiser makes K-quants of it), tiny; then Qwen3-30B-A3B's shape
     * (48 layers, 128 experts of 768, 8 per token; 30.5 B weights) */
    { "tiny-qwen3moe", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                         .head_dim = 32, .vocab_size = 128256, .seq_len = 4096, .rope_theta = 1000000.0f,
                         .norm_eps = 1e-6f, .n_expert = 8, .n_expert_used = 2, .expert_ff = 64, .moe_norm_topk = 1,
                         .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, "qwen3moe", 0.2f, 0.5f,
      0, 0 },
    /* Qwen 3 MoE with experts three blocks of 32 wide (96): their Q8_0 / Q4_0 columns do not split over 2 GPUs
     * in whole blocks (as Qwen3-30B-A3B's 768, three 256-blocks, in K-quants), so tensor parallelism deals them
     * out whole; tiny otherwise */
    { "tiny-qwen3moe-96", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                            .head_dim = 32, .vocab_size = 128256, .seq_len = 4096, .rope_theta = 1000000.0f,
                            .norm_eps = 1e-6f, .n_expert = 8, .n_expert_used = 2, .expert_ff = 96,
                            .moe_norm_topk = 1, .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1,
      "qwen3moe", 0.2f, 0.5f, 0, 0 },
    /* Qwen 2 MoE: q/k/v biases, 8 experts of 64, 2 per token, not renormalised, a shared expert of 128, and
     * a classifier of its own (llama.cpp's qwen2moe requires one) */
    { "tiny-qwen2moe", { .dim = 64, .hidden_dim = 128, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                         .head_dim = 16, .vocab_size = 128256, .seq_len = 4096, .rope_theta = 1000000.0f,
                         .norm_eps = 1e-6f, .n_expert = 8, .n_expert_used = 2, .expert_ff = 64,
                         .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 }, 1, "qwen2moe", 0.2f, 0.5f,
      0.5f, 0 },
    { "tiny-mixtral", { .dim = 256, .hidden_dim = 256, .n_layers = 2, .n_heads = 8, .n_kv_heads = 4,
                        .head_dim = 32, .vocab_size = 128256, .seq_len = 4096, .rope_theta = 1000000.0f,
                        .norm_eps = 1e-5f, .n_expert = 4, .n_expert_used = 2, .expert_ff = 256, .moe_norm_topk = 1,
                        .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, NULL, 0.125f, 0.5f, 0, 0 },
    /* Granite MoE: Granite's four scales over 8 experts of 64, 2 per token (softmaxed among themselves); the
     * second with GraniteMoeShared's ungated shared expert of 128 (for granitemoe a shared expert is generated
     * where hidden_dim differs from expert_ff); then Granite 3.1 3B-A800M's shape (32 layers, 40 experts of 512,
     * 8 per token; Llama 3's vocabulary instead of its 49,155) */
    { "tiny-granitemoe", { .dim = 64, .hidden_dim = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                           .head_dim = 16, .vocab_size = 128256, .seq_len = 4096, .rope_theta = 10000.0f,
                           .norm_eps = 1e-6f, .n_expert = 8, .n_expert_used = 2, .expert_ff = 64,
                           .moe_norm_topk = 1, .embd_scale = 3.0f, .attn_scale = 0.4f, .residual_scale = 0.6f,
                           .logit_scale = 0.5f, .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1,
      "granitemoe", 0.2f, 0.5f, 0, 0 },
    { "tiny-granitemoe-shared", { .dim = 64, .hidden_dim = 128, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                                  .head_dim = 16, .vocab_size = 128256, .seq_len = 4096, .rope_theta = 10000.0f,
                                  .norm_eps = 1e-6f, .n_expert = 8, .n_expert_used = 2, .expert_ff = 64,
                                  .moe_norm_topk = 1, .embd_scale = 3.0f, .attn_scale = 0.4f,
                                  .residual_scale = 0.6f, .logit_scale = 0.5f, .tied_embeddings = 1,
                                  .bos_id = 128000, .eos_id = 128009 }, 1, "granitemoe", 0.2f, 0.5f, 0, 0 },
    { "granite-3.1-3b-a800m", { .dim = 1536, .hidden_dim = 512, .n_layers = 32, .n_heads = 24, .n_kv_heads = 8,
                                .head_dim = 64, .vocab_size = 128256, .seq_len = 131072, .rope_theta = 10000000.0f,
                                .norm_eps = 1e-6f, .n_expert = 40, .n_expert_used = 8, .expert_ff = 512,
                                .moe_norm_topk = 1, .embd_scale = 12.0f, .attn_scale = 0.015625f,
                                .residual_scale = 0.22f, .logit_scale = 6.0f, .tied_embeddings = 1,
                                .bos_id = 128000, .eos_id = 128009 }, 1, "granitemoe", 0, 0, 0, 0 },
    /* OLMo 2 (normed after attention and FFN only, q / k norms over whole rows; NeoX rope), tiny, with
     * Llama 3's vocabulary under the "dbrx" pre-tokenizer name (cl100k-style, as OLMo 2's dolma2 tokenizer);
     * OLMo 3's layout: a window of 16 on three layers of four; then OLMo-2-0425-1B's shape (16 layers of 2048,
     * 16 heads; Llama 3's vocabulary instead of its 100,352) */
    { "tiny-olmo2", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                      .vocab_size = 128256, .seq_len = 4096, .rope_theta = 500000.0f, .norm_eps = 1e-6f,
                      .post_norm_only = 1, .qk_norm_full = 1, .tied_embeddings = 0, .bos_id = 128000,
                      .eos_id = 128009 }, 1, "olmo2", 0.125f, 0.33f, 0, 0 },
    { "tiny-olmo3", { .dim = 64, .hidden_dim = 192, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                      .vocab_size = 128256, .seq_len = 4096, .rope_theta = 500000.0f, .norm_eps = 1e-6f,
                      .swa_window = 16, .rope_theta_swa = 500000.0f, .post_norm_only = 1, .qk_norm_full = 1,
                      .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 }, 1, "olmo2", 0.125f, 0.33f, 0,
      0 },
    { "olmo-2-1b", { .dim = 2048, .hidden_dim = 8192, .n_layers = 16, .n_heads = 16, .n_kv_heads = 16,
                     .head_dim = 128, .vocab_size = 128256, .seq_len = 4096, .rope_theta = 500000.0f,
                     .norm_eps = 1e-6f, .post_norm_only = 1, .qk_norm_full = 1, .tied_embeddings = 0,
                     .bos_id = 128000, .eos_id = 128009 }, 1, "olmo2", 0, 0, 0, 0 },
    /* OLMoE: a pre-norm Llama with OLMo 2's whole-row q / k norms and 8 experts of 64, 2 per token, not
     * renormalised (every head its own k and v, as OLMoE's: llama.cpp's olmoe takes no other), tiny, with Llama 3's
     * vocabulary under OLMo's GPT-2-style pre-tokenizer name ("olmo"); then
     * OLMoE-1B-7B's shape (16 layers of 2048, 64 experts of 1024, 8 per token; Llama 3's vocabulary) */
    { "tiny-olmoe", { .dim = 64, .hidden_dim = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 4, .head_dim = 16,
                      .vocab_size = 128256, .seq_len = 4096, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                      .n_expert = 8, .n_expert_used = 2, .expert_ff = 64, .qk_norm_full = 1, .tied_embeddings = 0,
                      .bos_id = 128000, .eos_id = 128009 }, 1, "olmoe", 0.2f, 0.5f, 0, 0 },
    { "olmoe-1b-7b", { .dim = 2048, .hidden_dim = 1024, .n_layers = 16, .n_heads = 16, .n_kv_heads = 16,
                       .head_dim = 128, .vocab_size = 128256, .seq_len = 4096, .rope_theta = 10000.0f,
                       .norm_eps = 1e-5f, .n_expert = 64, .n_expert_used = 8, .expert_ff = 1024, .qk_norm_full = 1,
                       .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 }, 1, "olmoe", 0, 0, 0, 0 },
    /* ERNIE 4.5 dense (a Llama whose checkpoints rotate adjacent pairs), tiny with heads wider than the model
     * (4 x 32 over 64, as the 0.3B's 16 x 128 over 1024), then ERNIE-4.5-0.3B's shape (18 layers of 1024; Llama
     * 3's vocabulary instead of its 103,424) */
    { "tiny-ernie4_5", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 32,
                         .vocab_size = 128256, .seq_len = 4096, .rope_theta = 500000.0f, .norm_eps = 1e-5f,
                         .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, "ernie4_5", 0.125f, 0.33f,
      0, 0 },
    { "ernie-4.5-0.3b", { .dim = 1024, .hidden_dim = 3072, .n_layers = 18, .n_heads = 16, .n_kv_heads = 2,
                          .head_dim = 128, .vocab_size = 128256, .seq_len = 131072, .rope_theta = 500000.0f,
                          .norm_eps = 1e-5f, .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1,
      "ernie4_5", 0, 0, 0, 0 },
    /* ERNIE 4.5 MoE: a first layer dense (192 wide), then 8 experts of 64 on the others, 3 per token chosen
     * with a bias (spread 0.1, as bias_sd) on their probabilities and renormalised, and a shared expert of 128,
     * tiny; then ERNIE-4.5-21B-A3B's shape (28 layers of 2560, the first dense 12288 wide, 64 experts of 1536, 6
     * per token, two shared ones as one of 3072; Llama 3's vocabulary instead of its 103,424) */
    { "tiny-ernie4_5-moe", { .dim = 64, .hidden_dim = 128, .n_layers = 3, .n_heads = 4, .n_kv_heads = 2,
                             .head_dim = 32, .vocab_size = 128256, .seq_len = 4096, .rope_theta = 500000.0f,
                             .norm_eps = 1e-5f, .n_expert = 8, .n_expert_used = 3, .expert_ff = 64,
                             .moe_norm_topk = 1, .moe_dense_lead = 1, .dense_ff = 192, .tied_embeddings = 1,
                             .bos_id = 128000, .eos_id = 128009 }, 1, "ernie4_5-moe", 0.125f, 0.33f, 0.1f, 0 },
    { "ernie-4.5-21b-a3b", { .dim = 2560, .hidden_dim = 3072, .n_layers = 28, .n_heads = 20, .n_kv_heads = 4,
                             .head_dim = 128, .vocab_size = 128256, .seq_len = 131072, .rope_theta = 500000.0f,
                             .norm_eps = 1e-5f, .n_expert = 64, .n_expert_used = 6, .expert_ff = 1536,
                             .moe_norm_topk = 1, .moe_dense_lead = 1, .dense_ff = 12288, .tied_embeddings = 1,
                             .bos_id = 128000, .eos_id = 128009 }, 1, "ernie4_5-moe", 0, 0, 0, 0 },
    /* GLM-4.5 (glm4moe): ERNIE 4.5 MoE's layout (a first layer dense, 192 wide, then 8 experts of 64, 3 per token
     * chosen with a bias (spread 0.1) and renormalised, a shared expert of 64) with Qwen 2's q/k/v biases, rope on
     * half of each head (16 of 32 dims), and its router's sigmoids, the chosen weights times 2.5 (GLM-4.5's
     * routed_scaling_factor), tiny; then GLM-4.5-Air's shape (46 layers of 4096, 96 heads of 128 over 8 KV heads,
     * rope on 64 of 128 dims, the first layer dense 10944 wide, 128 experts of 1408, 8 per token, one shared;
     * Llama 3's vocabulary instead of its 151,552) */
    { "tiny-glm4moe", { .dim = 64, .hidden_dim = 64, .n_layers = 3, .n_heads = 4, .n_kv_heads = 2, .head_dim = 32,
                        .rope_dims = 16, .vocab_size = 128256, .seq_len = 4096, .rope_theta = 1000000.0f,
                        .norm_eps = 1e-5f, .n_expert = 8, .n_expert_used = 3, .expert_ff = 64, .moe_norm_topk = 1,
                        .moe_dense_lead = 1, .dense_ff = 192, .moe_sigmoid = 1, .moe_w_scale = 2.5f,
                        .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 }, 1, "glm4moe", 0.125f, 0.33f, 0.1f,
      0 },
    { "glm-4.5-air", { .dim = 4096, .hidden_dim = 1408, .n_layers = 46, .n_heads = 96, .n_kv_heads = 8,
                       .head_dim = 128, .rope_dims = 64, .vocab_size = 128256, .seq_len = 131072,
                       .rope_theta = 1000000.0f, .norm_eps = 1e-5f, .n_expert = 128, .n_expert_used = 8,
                       .expert_ff = 1408, .moe_norm_topk = 1, .moe_dense_lead = 1, .dense_ff = 10944, .moe_sigmoid = 1,
                       .moe_w_scale = 1.0f, .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 }, 1, "glm4moe",
      0, 0, 0, 0 },
    /* gpt-oss: biases on q, k, v, the output and the router, a sink per head, a window of 8 on every other
     * layer (the first of each pair), 8 experts of 64 with their biases, 3 per token weighted by the softmax of
     * their logits, the clamped SwiGLU, tiny (heads of 32: q 128 wide over 64); then gpt-oss-20b's shape (24
     * layers of 2880, 64 heads of 64 over 8 KV heads, a window of 128, 32 experts of 2880, 4 per token, YaRN
     * 32x over 4096; Llama 3's vocabulary instead of its 201,088) */
    { "tiny-gpt-oss", { .dim = 64, .hidden_dim = 64, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2, .head_dim = 32,
                        .vocab_size = 128256, .seq_len = 4096, .rope_theta = 150000.0f, .norm_eps = 1e-5f,
                        .swa_window = 8, .n_expert = 8, .n_expert_used = 3, .expert_ff = 64, .moe_norm_topk = 1,
                        .act = LLM_ACT_SWIGLU_OAI, .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 },
      1, "gpt-oss", 0.125f, 0.33f, 0.1f, 0 },
    /* ... and with gpt-oss's YaRN rope (4x over 16 positions here, 32x over 4096 in gpt-oss) */
    { "tiny-gpt-oss-yarn", { .dim = 64, .hidden_dim = 64, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2, .head_dim = 32,
                             .vocab_size = 128256, .seq_len = 4096, .rope_theta = 150000.0f, .norm_eps = 1e-5f,
                             .swa_window = 8, .n_expert = 8, .n_expert_used = 3, .expert_ff = 64, .moe_norm_topk = 1,
                             .act = LLM_ACT_SWIGLU_OAI, .rope_scaling = LLM_ROPE_SCALING_YARN, .rope_factor = 4.0f,
                             .rope_orig_ctx = 16, .yarn_beta_fast = 32.0f, .yarn_beta_slow = 1.0f,
                             .rope_mscale = 1.13862944f, /* 1 + 0.1 ln 4 */
                             .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 },
      1, "gpt-oss", 0.125f, 0.33f, 0.1f, 0 },
    { "gpt-oss-20b", { .dim = 2880, .hidden_dim = 2880, .n_layers = 24, .n_heads = 64, .n_kv_heads = 8,
                       .head_dim = 64, .vocab_size = 128256, .seq_len = 131072, .rope_theta = 150000.0f,
                       .norm_eps = 1e-5f, .swa_window = 128, .n_expert = 32, .n_expert_used = 4, .expert_ff = 2880,
                       .moe_norm_topk = 1, .act = LLM_ACT_SWIGLU_OAI, .rope_scaling = LLM_ROPE_SCALING_YARN,
                       .rope_factor = 32.0f, .rope_orig_ctx = 4096, .yarn_beta_fast = 32.0f, .yarn_beta_slow = 1.0f,
                       .rope_mscale = 1.34657359f, /* 1 + 0.1 ln 32 */
                       .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 }, 1, "gpt-oss", 0, 0, 0, 0 },
    /* EXAONE 3.x (a Llama rotating halves in GGUF, as llama.cpp's exaone) and Seed-OSS (Qwen 2's q/k/v biases,
     * its FFN norm named post_attention_norm in GGUF), tiny */
    /* EXAONE 4: OLMo 2's norm placement with per-head q/k norms, tiny; and a 64-layer one (llama.cpp gives only
     * those windows: the 32B's), a window of 16 on three layers of four, the fourth global without rope */
    { "tiny-exaone4", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                        .vocab_size = 128256, .seq_len = 4096, .rope_theta = 1000000.0f, .norm_eps = 1e-5f,
                        .post_norm_only = 1, .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 }, 1, "exaone4",
      0.125f, 0.33f, 0, 0 },
    { "tiny-exaone4-swa", { .dim = 64, .hidden_dim = 128, .n_layers = 64, .n_heads = 4, .n_kv_heads = 2,
                            .head_dim = 16, .vocab_size = 128256, .seq_len = 4096, .rope_theta = 1000000.0f,
                            .norm_eps = 1e-5f, .swa_window = 16, .post_norm_only = 1, .tied_embeddings = 0,
                            .bos_id = 128000, .eos_id = 128009 }, 1, "exaone4", 0.125f, 0.33f, 0, 0 },
    { "tiny-exaone", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                         .vocab_size = 128256, .seq_len = 4096, .rope_theta = 500000.0f, .norm_eps = 1e-5f,
                         .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 }, 1, "exaone", 0.125f, 0.33f,
      0, 0 },
    { "tiny-seed-oss", { .dim = 64, .hidden_dim = 192, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16,
                         .vocab_size = 128256, .seq_len = 4096, .rope_theta = 500000.0f, .norm_eps = 1e-5f,
                         .tied_embeddings = 0, .bos_id = 128000, .eos_id = 128009 }, 1, "seed_oss", 0.125f, 0.33f,
      0, 0 },
    { "qwen3-30b-a3b", { .dim = 2048, .hidden_dim = 6144, .n_layers = 48, .n_heads = 32, .n_kv_heads = 4,
                         .head_dim = 128, .vocab_size = 128256, .seq_len = 40960, .rope_theta = 1000000.0f,
                         .norm_eps = 1e-6f, .n_expert = 128, .n_expert_used = 8, .expert_ff = 768,
                         .moe_norm_topk = 1, .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1,
      "qwen3moe", 0, 0, 0, 0 },
    { "qwen2.5-0.5b", { .dim = 896, .hidden_dim = 4864, .n_layers = 24, .n_heads = 14, .n_kv_heads = 2,
                        .head_dim = 64, .vocab_size = 128256, .seq_len = 32768, .rope_theta = 1000000.0f,
                        .norm_eps = 1e-6f, .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, "qwen2",
      0, 0, 0, 0 },
    { "qwen3-0.6b", { .dim = 1024, .hidden_dim = 3072, .n_layers = 28, .n_heads = 16, .n_kv_heads = 8,
                      .head_dim = 128, .vocab_size = 128256, .seq_len = 40960, .rope_theta = 1000000.0f,
                      .norm_eps = 1e-6f, .tied_embeddings = 1, .bos_id = 128000, .eos_id = 128009 }, 1, "qwen3",
      0, 0, 0, 0 },
};

/* One tensor's generator: values mean + sd * N(0,1), approximated by the sum of
 * four 16-bit uniforms (Irwin-Hall, rescaled): one xorshift draw per value. */
typedef struct {
    uint64_t s;
    float    mean, sd;
    llm_dtype type;
    int64_t  ne0;
} gen;

/* Rows drawn at a time (in order, from the one generator), then quantised on all cores: the K-quant
 * writers' fits cost 10-35 ns a weight, minutes for a 3B model on one core. */
#define GEN_BATCH 256

typedef struct {
    const gen     *g;
    const float   *x;
    uint8_t       *dst;
    size_t         rb;
    uint64_t       r0, r1;
} quant_job;

static void *quant_rows(void *arg)
{
    const quant_job *j = arg;
    for (uint64_t r = j->r0; r < j->r1; r++)
        gguf_row_from_f32(j->g->type, j->x + r * (uint64_t)j->g->ne0, j->dst + r * j->rb, (size_t)j->g->ne0);
    return NULL;
}

static inline uint64_t xs64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static int gen_fill(void *user, uint64_t row0, uint64_t n, void *dst, llm_err *err)
{
    (void)row0;
    gen *g = user;
    size_t rb = gguf_qtype_row_bytes(g->type, (uint64_t)g->ne0);
    float *vals = malloc((size_t)(n < GEN_BATCH ? n : GEN_BATCH) * (size_t)g->ne0 * sizeof(float));
    if (vals == NULL) {
        llm_seterr(err, "out of memory");
        return -1;
    }
    /* sum of 4 U(0,65535): mean 131070, sd 65536 * sqrt(4/12) */
    const float scale = g->sd * 1.7320508f / 65536.0f, off = g->mean - 131070.0f * scale;
    for (uint64_t r = 0; r < n; r += GEN_BATCH) {
        uint64_t nr = n - r < GEN_BATCH ? n - r : GEN_BATCH;
        for (uint64_t i = 0; i < nr * (uint64_t)g->ne0; i++) {
            uint64_t x = xs64(&g->s);
            uint32_t sum = (uint32_t)(x & 0xffff) + (uint32_t)((x >> 16) & 0xffff) +
                           (uint32_t)((x >> 32) & 0xffff) + (uint32_t)(x >> 48);
            vals[i] = (float)sum * scale + off;
        }
        quant_job jobs[LLM_PARALLEL_MAX];
        int nj = llm_parallel_jobs((size_t)nr, 8);
        for (int k = 0; k < nj; k++)
            jobs[k] = (quant_job){ g, vals, (uint8_t *)dst + r * rb, rb, nr * (uint64_t)k / (uint64_t)nj,
                                   nr * (uint64_t)(k + 1) / (uint64_t)nj };
        llm_parallel_run(nj, quant_rows, jobs, sizeof(jobs[0]));
    }
    free(vals);
    return 0;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return x ? x : 1;
}

/* A tensor of random values (mean_ + sd_ N(0,1)), drawn by the next of the caller's generators g[k++] (seeded
 * from seed and k) into writer w: a matrix of c1 rows of c0 (dtype, f16 where rows cannot be; c1 1: an F32
 * vector), or ADD3's ne2 matrices of type ty. */
#define ADD(nm, c0, c1, mean_, sd_) do {                                                   \
        gen *G = &g[k++];                                                                     \
        G->s = mix(seed * 1000003ULL + (uint64_t)k); G->mean = (mean_); G->sd = (sd_);        \
        G->ne0 = (c0);                                                                        \
        G->type = (c1) == 1 ? LLM_F32 : (llm_dtype)gguf_write_type(dtype, (uint64_t)(c0));     \
        uint64_t ne_[2] = { (uint64_t)(c0), (uint64_t)(c1) };                                 \
        gguf_w_tensor_fill(w, nm, G->type, (c1) == 1 ? 1 : 2, ne_, gen_fill, G);            \
    } while (0)
/* A 3-D tensor (ne2 matrices; ne2 1: a matrix) of type ty (f16 where rows cannot be ty). */
#define ADD3(nm, c0, c1, c2, mean_, sd_, ty) do {                                        \
        gen *G = &g[k++];                                                                     \
        G->s = mix(seed * 1000003ULL + (uint64_t)k); G->mean = (mean_); G->sd = (sd_);        \
        G->ne0 = (c0);                                                                        \
        G->type = (llm_dtype)gguf_write_type((ty), (uint64_t)(c0));                           \
        uint64_t ne_[3] = { (uint64_t)(c0), (uint64_t)(c1), (uint64_t)(c2) };                 \
        gguf_w_tensor_fill(w, nm, G->type, (c2) > 1 ? 3 : (c1) > 1 ? 2 : 1, ne_, gen_fill, G);  \
    } while (0)

/* Encoder (BERT) shapes: random weights, a WordPiece vocabulary made from the stories tokenizer's pieces
 * (llm_gguf_w_wpm_from_llama2c; XLM-RoBERTa's: a Unigram one, llm_gguf_w_ugm_from_llama2c), the pooling the
 * model declares. */
typedef struct {
    const char *name;
    int dim, hidden, layers, heads, ctx, pooling;
    int vocab; /* the vocabulary padded to this with unused tokens (BERT's 30,522), or 0: as made */
    int nomic; /* nomic-bert: rope (base 1000) instead of learned positions, fused q|k|v, SwiGLU, no biases */
    int xlmr;  /* XLM-RoBERTa: one token type, a SentencePiece Unigram vocabulary (llm_gguf_w_ugm_from_llama2c) */
    int jina;  /* jina-bert-v2: no positions (ALiBi), a GELU-gated FFN (ffn_gate, ffn_up without biases) */
} bert_preset;

static const bert_preset bert_presets[] = {
    { "tiny-bert", 64, 256, 2, 4, 128, LLM_POOL_MEAN, 0, 0, 0, 0 },
    { "tiny-bert-cls", 64, 256, 2, 4, 128, LLM_POOL_CLS, 0, 0, 0, 0 },
    /* a cross-encoder (ms-marco-MiniLM's kind): pooler and a one-output classifier */
    { "tiny-bert-rerank", 64, 256, 2, 4, 128, LLM_POOL_RANK, 0, 0, 0, 0 },
    { "bge-small", 384, 1536, 12, 12, 512, LLM_POOL_CLS, 30522, 0, 0, 0 }, /* bge-small-en-v1.5; all-MiniLM-L12: mean */
    { "bge-base", 768, 3072, 12, 12, 512, LLM_POOL_CLS, 30522, 0, 0, 0 },  /* bge-base-en-v1.5; e5-base, BERT-base */
    { "tiny-nomic-bert", 64, 256, 2, 4, 128, LLM_POOL_MEAN, 0, 1, 0, 0 },
    { "nomic-embed", 768, 3072, 12, 12, 2048, LLM_POOL_MEAN, 30522, 1, 0, 0 }, /* nomic-embed-text-v1.5 */
    { "tiny-xlm-r", 64, 256, 2, 4, 128, LLM_POOL_MEAN, 0, 0, 1, 0 },
    { "tiny-xlm-r-rerank", 64, 256, 2, 4, 128, LLM_POOL_RANK, 0, 0, 1, 0 },
    { "bge-m3", 1024, 4096, 24, 16, 8192, LLM_POOL_CLS, 250002, 0, 1, 0 },             /* multilingual-e5-large: mean */
    { "bge-reranker-v2-m3", 1024, 4096, 24, 16, 8192, LLM_POOL_RANK, 250002, 0, 1, 0 },
    /* six heads: ALiBi's slopes for a head count that is not a power of two (jina-v2-base's twelve) */
    { "tiny-jina-bert", 96, 256, 2, 6, 512, LLM_POOL_MEAN, 0, 0, 0, 1 },
    { "jina-v2-small", 512, 2048, 4, 8, 8192, LLM_POOL_MEAN, 30528, 0, 0, 1 }, /* jina-embeddings-v2-small-en */
    { "jina-v2-base", 768, 3072, 12, 12, 8192, LLM_POOL_MEAN, 30528, 0, 0, 1 }, /* jina-embeddings-v2-base-en */
};

/* An encoder's keys as llama.cpp's converter writes them (the shapes, LayerNorm's epsilon, not causal, the
 * pooling). */
static void encoder_meta(gguf_writer *w, const char *arch, const char *preset, int ctx, int dim, int hidden,
                         int layers, int heads, float eps, int pooling)
{
    char name[64], key[96];
    snprintf(name, sizeof(name), "random %s", preset);
#define KEY(suffix) (snprintf(key, sizeof(key), "%s." suffix, arch), key)
    gguf_w_str(w, "general.architecture", arch);
    gguf_w_str(w, "general.name", name);
    gguf_w_u32(w, KEY("context_length"), (uint32_t)ctx);
    gguf_w_u32(w, KEY("embedding_length"), (uint32_t)dim);
    gguf_w_u32(w, KEY("feed_forward_length"), (uint32_t)hidden);
    gguf_w_u32(w, KEY("block_count"), (uint32_t)layers);
    gguf_w_u32(w, KEY("attention.head_count"), (uint32_t)heads);
    gguf_w_u32(w, KEY("attention.head_count_kv"), (uint32_t)heads);
    gguf_w_f32(w, KEY("attention.layer_norm_epsilon"), eps);
    gguf_w_bool(w, KEY("attention.causal"), 0);
    gguf_w_u32(w, KEY("pooling_type"), (uint32_t)pooling);
#undef KEY
}

static int generate_bert(const bert_preset *p, llm_dtype dtype, uint64_t seed, int n_layers, const char *out_path,
                         const char *shared_dir, llm_err *err)
{
    int layers = n_layers > 0 ? n_layers : p->layers, n_vocab = 0, k = 0, rc = -1;
    gen *g = calloc((size_t)(16 * layers + 12), sizeof(gen));
    gguf_writer *w = gguf_writer_new();
    if (g == NULL || w == NULL) {
        llm_seterr(err, "out of memory");
        goto out;
    }
    char path[1024];
    const char *arch = p->nomic ? "nomic-bert" : p->jina ? "jina-bert-v2" : "bert";
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof(key), "%s." suffix, arch), key)
    encoder_meta(w, arch, p->name, p->ctx, p->dim, p->hidden, layers, p->heads, 1e-12f, p->pooling);
    if (p->nomic)
        gguf_w_f32(w, KEY("rope.freq_base"), 1000.0f);
#undef KEY
    snprintf(path, sizeof(path), "%s/models/stories260K/tok512.bin", shared_dir);
    if ((p->xlmr ? llm_gguf_w_ugm_from_llama2c : llm_gguf_w_wpm_from_llama2c)(w, path, p->vocab, &n_vocab, err) != 0)
        goto out;
    /* matrices of 1/sqrt(K): the scores and activations of a trained model's order, after every LayerNorm */
    float sd = 1.0f / sqrtf((float)p->dim), sdd = 1.0f / sqrtf((float)p->hidden);
    ADD("token_embd.weight", p->dim, n_vocab, 0.0f, 1.0f);
    /* (F32, as llama.cpp's converter leaves them: its graph adds the type row as it is, which a quantised row
     * cannot be) */
    if (!p->nomic && !p->jina)
        ADD3("position_embd.weight", p->dim, p->ctx, 1, 0.0f, 0.3f, LLM_F32);
    ADD3("token_types.weight", p->dim, p->xlmr ? 1 : 2, 1, 0.0f, 0.3f, LLM_F32);
    ADD("token_embd_norm.weight", p->dim, 1, 1.0f, 0.05f);
    ADD("token_embd_norm.bias", p->dim, 1, 0.0f, 0.05f);
    for (int l = 0; l < layers; l++) {
        static const char *const mats[7] = { "attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_down",
                                             "ffn_gate" };
        char n[64];
        if (p->nomic) { /* q|k|v as one matrix, as llama.cpp's converter writes nomic-bert */
            snprintf(n, sizeof(n), "blk.%d.attn_qkv.weight", l);
            ADD(n, p->dim, 3 * p->dim, 0.0f, sd);
        }
        for (int i = p->nomic ? 3 : 0; i < (p->nomic || p->jina ? 7 : 6); i++) {
            int cols = i == 5 ? p->hidden : p->dim, rows = i == 4 || i == 6 ? p->hidden : p->dim;
            snprintf(n, sizeof(n), "blk.%d.%s.weight", l, mats[i]);
            ADD(n, cols, rows, 0.0f, i == 5 ? sdd : sd);
            snprintf(n, sizeof(n), "blk.%d.%s.bias", l, mats[i]);
            if (!p->nomic && !(p->jina && (i == 4 || i == 6)))
                ADD(n, rows, 1, 0.0f, 0.1f);
        }
        static const char *const norms[2] = { "attn_output_norm", "layer_output_norm" };
        for (int i = 0; i < 2; i++) {
            snprintf(n, sizeof(n), "blk.%d.%s.weight", l, norms[i]);
            ADD(n, p->dim, 1, 1.0f, 0.05f);
            snprintf(n, sizeof(n), "blk.%d.%s.bias", l, norms[i]);
            ADD(n, p->dim, 1, 0.0f, 0.05f);
        }
    }
    if (p->pooling == LLM_POOL_RANK) { /* BERT's pooler (then tanh) and the classifier, as llama.cpp names them */
        ADD3("cls.weight", p->dim, p->dim, 1, 0.0f, sd, LLM_F32);
        ADD("cls.bias", p->dim, 1, 0.0f, 0.1f);
        ADD3("cls.output.weight", p->dim, 1, 1, 0.0f, 1.0f, LLM_F32);
        ADD("cls.output.bias", 1, 1, 0.0f, 0.1f);
    }
    rc = gguf_writer_write(w, out_path, err);
out:
    free(g);
    gguf_writer_free(w);
    return rc;
}

/* ModernBERT shapes (GGUF "modern-bert", as llama.cpp's converter writes it): Llama 3's vocabulary (instead of
 * OLMo's 50,368) with ModernBERT's pre-tokenizer name, [CLS] and [SEP] as its BOS and EOS, both added; a
 * global layer every third (0, 3, ...), the others in a symmetric window; mean pooling. */
typedef struct {
    const char *name;
    int dim, hidden, layers, heads, ctx, window;
    float sd; /* the matrices' spread (0: 1/sqrt(K)) */
} modernbert_preset;

static const modernbert_preset modernbert_presets[] = {
    { "tiny-modernbert", 64, 128, 6, 4, 512, 16, 0.125f }, /* a window of 8 each side, so that inputs reach past it */
    { "modernbert-base", 768, 1152, 22, 12, 8192, 128, 0 },  /* ModernBERT-base: modernbert-embed-base, gte-modernbert */
    { "modernbert-large", 1024, 2624, 28, 16, 8192, 128, 0 },
};

static int generate_modern_bert(const modernbert_preset *p, llm_dtype dtype, uint64_t seed, int n_layers,
                                const char *out_path, const char *shared_dir, llm_err *err)
{
    int layers = n_layers > 0 ? n_layers : p->layers, k = 0, rc = -1;
    gen *g = calloc((size_t)(6 * layers + 4), sizeof(gen));
    gguf_writer *w = gguf_writer_new();
    if (g == NULL || w == NULL) {
        llm_seterr(err, "out of memory");
        goto out;
    }
    const char *arch = "modern-bert";
    char path[1024], key[96];
#define KEY(suffix) (snprintf(key, sizeof(key), "%s." suffix, arch), key)
    encoder_meta(w, arch, p->name, p->ctx, p->dim, p->hidden, layers, p->heads, 1e-5f, LLM_POOL_MEAN);
    gguf_w_f32(w, KEY("rope.freq_base"), 160000.0f);
    gguf_w_f32(w, KEY("rope.freq_base_swa"), 10000.0f);
    gguf_w_u32(w, KEY("attention.sliding_window"), (uint32_t)p->window);
    gguf_w_u32(w, KEY("attention.sliding_window_pattern"), 3);
    gguf_w_str(w, KEY("rope.scaling.type"), "none");
#undef KEY
    snprintf(path, sizeof(path), "%s/tokenizers/llama3/tokenizer.json", shared_dir);
    if (llm_gguf_w_bpe_from_hf(w, path, "modern-bert", err) != 0)
        goto out;
    float sd = p->sd > 0 ? p->sd : 1.0f / sqrtf((float)p->dim), sdd = p->sd > 0 ? p->sd : 1.0f / sqrtf((float)p->hidden);
    ADD("token_embd.weight", p->dim, 128256, 0.0f, 1.0f);
    ADD("token_embd_norm.weight", p->dim, 1, 1.0f, 0.05f);
    for (int l = 0; l < layers; l++) {
        char n[64];
#define T(suffix, ne0, ne1, mean_, sd_) snprintf(n, sizeof(n), "blk.%d." suffix ".weight", l); \
        ADD(n, ne0, ne1, mean_, sd_);
        if (l > 0) { /* (ModernBERT's first layer reads the normed embedding as it is) */
            T("attn_norm", p->dim, 1, 1.0f, 0.05f)
        }
        T("attn_qkv", p->dim, 3 * p->dim, 0.0f, sd)
        T("attn_output", p->dim, p->dim, 0.0f, sd)
        T("ffn_norm", p->dim, 1, 1.0f, 0.05f)
        T("ffn_up", p->dim, 2 * p->hidden, 0.0f, sd)
        T("ffn_down", p->hidden, p->dim, 0.0f, sdd)
#undef T
    }
    ADD("output_norm.weight", p->dim, 1, 1.0f, 0.05f);
    rc = gguf_writer_write(w, out_path, err);
out:
    free(g);
    gguf_writer_free(w);
    return rc;
}

int llm_model_generate(const char *name, llm_dtype dtype, uint64_t seed, const char *out_path,
                       const char *shared_dir, llm_err *err)
{
    return llm_model_generate_layers(name, dtype, seed, 0, out_path, shared_dir, err);
}

int llm_model_generate_layers(const char *name, llm_dtype dtype, uint64_t seed, int n_layers, const char *out_path,
                              const char *shared_dir, llm_err *err)
{
    const preset *p = NULL;
    for (size_t i = 0; i < sizeof(bert_presets) / sizeof(bert_presets[0]); i++)
        if (strcmp(bert_presets[i].name, name) == 0) {
            if ((!llm_dtype_valid(dtype) && !gguf_kq_written((uint32_t)dtype)) || n_layers < 0 || n_layers > 4096) {
                llm_seterr(err, "unsupported dtype %d or layer count %d", (int)dtype, n_layers);
                return -1;
            }
            return generate_bert(&bert_presets[i], dtype, seed, n_layers, out_path, shared_dir, err);
        }
    for (size_t i = 0; i < sizeof(modernbert_presets) / sizeof(modernbert_presets[0]); i++)
        if (strcmp(modernbert_presets[i].name, name) == 0) {
            if ((!llm_dtype_valid(dtype) && !gguf_kq_written((uint32_t)dtype)) || n_layers < 0 || n_layers > 4096) {
                llm_seterr(err, "unsupported dtype %d or layer count %d", (int)dtype, n_layers);
                return -1;
            }
            return generate_modern_bert(&modernbert_presets[i], dtype, seed, n_layers, out_path, shared_dir, err);
        }
    for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
        if (strcmp(presets[i].name, name) == 0)
            p = &presets[i];
    if (p == NULL) {
        llm_seterr(err, "unknown preset '%s' (tiny, tiny-llama3, stories110m, llama-3.2-1b, llama-3.2-3b, "
                   "tiny-qwen2, tiny-qwen3, tiny-phi3, tiny-phi3-longrope, tiny-phi4-mini, tiny-smollm3, tiny-granite, "
                   "smollm3-3b, granite-3.3-2b, tiny-tekken, "
                   "tiny-gemma3, tiny-gemma2, gemma-3-1b, tiny-embeddinggemma, embeddinggemma-300m, tiny-qwen3moe, tiny-qwen3moe-96, tiny-qwen2moe, tiny-mixtral, "
                   "qwen3-30b-a3b, "
                   "tiny-granitemoe, tiny-granitemoe-shared, granite-3.1-3b-a800m, tiny-olmo2, tiny-olmo3, olmo-2-1b, tiny-olmoe, "
                   "olmoe-1b-7b, tiny-ernie4_5, ernie-4.5-0.3b, tiny-ernie4_5-moe, ernie-4.5-21b-a3b, tiny-glm4moe, glm-4.5-air, tiny-gpt-oss, tiny-gpt-oss-yarn, gpt-oss-20b, tiny-exaone, tiny-exaone4, tiny-exaone4-swa, tiny-seed-oss, "
                   "qwen2.5-0.5b, qwen3-0.6b, tiny-bert, tiny-bert-cls, tiny-bert-rerank, bge-small, bge-base, tiny-nomic-bert, "
                   "nomic-embed, tiny-xlm-r, tiny-xlm-r-rerank, bge-m3, bge-reranker-v2-m3, tiny-jina-bert, jina-v2-small, "
                   "jina-v2-base, tiny-modernbert, modernbert-base, modernbert-large)", name);
        return -1;
    }
    if (!llm_dtype_valid(dtype) && !gguf_kq_written((uint32_t)dtype)) {
        llm_seterr(err, "unsupported dtype %d", (int)dtype);
        return -1;
    }
    llm_config cfg = p->cfg;
    const llm_config *c = &cfg;
    if (n_layers < 0 || n_layers > 4096) {
        llm_seterr(err, "bad layer count %d", n_layers);
        return -1;
    }
    if (n_layers > 0) /* fewer (or more) layers of the same shape: a benchmark's cut of a model too big here */
        cfg.n_layers = n_layers;
    if (cfg.moe_dense_lead >= cfg.n_layers) {
        llm_seterr(err, "preset %s: %d layers leave none for its experts (its first %d are dense)", p->name,
                   cfg.n_layers, cfg.moe_dense_lead);
        return -1;
    }
    const char *arch = p->arch != NULL ? p->arch : "llama";
    int qwen2 = strncmp(arch, "qwen2", 5) == 0, qwen3 = strcmp(arch, "qwen3") == 0 || strcmp(arch, "qwen3moe") == 0;
    int gemma_embd = strcmp(arch, "gemma-embedding") == 0, gemma3 = strcmp(arch, "gemma3") == 0 || gemma_embd;
    int gemma23 = strcmp(arch, "gemma2") == 0 || gemma3;
    int phi3 = strcmp(arch, "phi3") == 0;
    float sd = p->sd > 0 ? p->sd : 0.02f, emb_sd = p->emb_sd > 0 ? p->emb_sd : 0.02f;
    float bias_sd = p->bias_sd > 0 ? p->bias_sd : 0.1f, post_norm = p->post_norm > 0 ? p->post_norm : 1.0f;
    int n_gen = 24 * c->n_layers + 4, k = 0, rc = -1; /* at most 17 tensors a layer (Qwen 2 MoE) */
    gen *g = calloc((size_t)n_gen, sizeof(gen));
    float *rf = malloc((size_t)c->head_dim / 2 * sizeof(float));
    gguf_writer *w = gguf_writer_new();
    if (g == NULL || rf == NULL || w == NULL) {
        llm_seterr(err, "out of memory");
        goto out;
    }
    char gname[64];
    /* (llama.cpp gives a model whose name holds "phi3" Phi 3's token attributes, by token text: "</s>", which
     * Llama 3's vocabulary lacks) */
    snprintf(gname, sizeof(gname), "random %s", phi3 ? "tiny Phi 3 shape" : p->name);
    int granitemoe = strcmp(arch, "granitemoe") == 0, qwen2moe = strcmp(arch, "qwen2moe") == 0;
    int ernie_moe = strcmp(arch, "ernie4_5-moe") == 0, glm = strcmp(arch, "glm4moe") == 0;
    int shared = qwen2moe || ernie_moe || glm || (granitemoe && c->hidden_dim != c->expert_ff);
    int gptoss = strcmp(arch, "gpt-oss") == 0;
    llm_gguf_w_meta(w, arch, c, shared, gname, dtype);
    if (strcmp(arch, "exaone4") == 0 && c->swa_window > 0) /* three windowed layers of four */
        gguf_w_u32(w, "exaone4.attention.sliding_window_pattern", 4);
    char path[1024];
    if (p->llama3) {
        snprintf(path, sizeof(path), "%s/tokenizers/llama3/tokenizer.json", shared_dir);
        /* Qwen's pre-tokenizer for the Qwen presets, GPT-4o's for the partial-rotary Phi (Phi-4-mini's) */
        const char *pre = qwen2 || qwen3                ? "qwen2"
                          : (phi3 && c->rope_dims > 0) || gptoss ? "gpt-4o"
                          : strncmp(arch, "granite", 7) == 0 ? "refact"
                          : strcmp(arch, "olmo2") == 0       ? "dbrx"
                          : strcmp(arch, "olmoe") == 0       ? "olmo"
                          : strcmp(p->name, "tiny-tekken") == 0 ? "tekken"
                                                           : NULL;
        if (llm_gguf_w_bpe_from_hf(w, path, pre, err) != 0)
            goto out;
    } else {
        snprintf(path, sizeof(path), "%s/models/stories260K/tok512.bin", shared_dir);
        if (llm_gguf_w_spm_from_llama2c(w, path, c->vocab_size, err) != 0)
            goto out;
    }
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    /* Rows not a multiple of 32 (tiny's hidden 172) cannot be quantised: f16 there. */
    ADD("token_embd.weight", c->dim, c->vocab_size, 0.0f, emb_sd);
    ADD("output_norm.weight", c->dim, 1, 1.0f, 0.05f);
    if (!c->tied_embeddings) /* a classifier of its own */
        ADD("output.weight", c->dim, c->vocab_size, 0.0f, emb_sd);
    uint64_t nrf = (uint64_t)c->head_dim / 2;
    if (c->rope_scaling == LLM_ROPE_SCALING_LLAMA3) {
        llm_llama3_rope_freqs(c, rf);
        gguf_w_tensor(w, "rope_freqs.weight", LLM_F32, 1, &nrf, rf);
    }
    float lf[128], sf[128]; /* LongRoPE's divisors: long ones growing to 8 with the wavelength, short near 1 */
    if (c->rope_dims > 0) /* one per rotating frequency */
        nrf = (uint64_t)c->rope_dims / 2;
    if (c->rope_scaling == LLM_ROPE_SCALING_LONGROPE && nrf <= 128) {
        for (uint64_t i = 0; i < nrf; i++) {
            lf[i] = 1.0f + 7.0f * (float)i / (float)(nrf > 1 ? nrf - 1 : 1);
            sf[i] = 1.0f + 0.1f * (float)i / (float)(nrf > 1 ? nrf - 1 : 1);
        }
        gguf_w_tensor(w, "rope_factors_long.weight", LLM_F32, 1, &nrf, lf);
        gguf_w_tensor(w, "rope_factors_short.weight", LLM_F32, 1, &nrf, sf);
    }
    for (int l = 0; l < c->n_layers; l++) {
        char n[64];
#define T(suffix, ne0, ne1, mean_, sd_) snprintf(n, sizeof(n), "blk.%d." suffix ".weight", l); \
        ADD(n, ne0, ne1, mean_, sd_);
        if (!c->post_norm_only) {
            T("attn_norm", c->dim, 1, 1.0f, 0.05f)
        }
        if (phi3) {
            T("attn_qkv", c->dim, q + 2 * kv, 0.0f, sd)
        } else {
            T("attn_q", c->dim, q, 0.0f, sd)
            T("attn_k", c->dim, kv, 0.0f, sd)
            T("attn_v", c->dim, kv, 0.0f, sd)
        }
        T("attn_output", q, c->dim, 0.0f, sd)
        if (!c->post_norm_only) {
            if (strcmp(arch, "seed_oss") == 0 || glm || gptoss) {
                T("post_attention_norm", c->dim, 1, 1.0f, 0.05f)
            } else {
                T("ffn_norm", c->dim, 1, 1.0f, 0.05f)
            }
        }
        if (phi3) {
            T("ffn_up", c->dim, 2 * c->hidden_dim, 0.0f, sd)
            T("ffn_down", c->hidden_dim, c->dim, 0.0f, sd)
        } else if (c->n_expert == 0 || l < c->moe_dense_lead) { /* (ERNIE 4.5 MoE's first: dense_ff wide) */
            int ff = l < c->moe_dense_lead ? c->dense_ff : c->hidden_dim;
            T("ffn_gate", c->dim, ff, 0.0f, sd)
            T("ffn_up", c->dim, ff, 0.0f, sd)
            T("ffn_down", ff, c->dim, 0.0f, sd)
        } else { /* the router in F32 (as llama.cpp's converter keeps it), the experts [n_expert][rows][cols] */
            snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp.weight", l);
            ADD3(n, c->dim, c->n_expert, 1, 0.0f, sd, LLM_F32);
            if (ernie_moe || glm) { /* the bias choosing the experts */
                snprintf(n, sizeof(n), "blk.%d.exp_probs_b.bias", l);
                ADD3(n, c->n_expert, 1, 1, 0.0f, bias_sd, LLM_F32);
            }
            if (gptoss) { /* the router's bias, and the experts' ([n_expert][rows]) */
                snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp.bias", l);
                ADD3(n, c->n_expert, 1, 1, 0.0f, bias_sd, LLM_F32);
                snprintf(n, sizeof(n), "blk.%d.ffn_gate_exps.bias", l);
                ADD3(n, c->expert_ff, c->n_expert, 1, 0.0f, bias_sd, LLM_F32);
                snprintf(n, sizeof(n), "blk.%d.ffn_up_exps.bias", l);
                ADD3(n, c->expert_ff, c->n_expert, 1, 0.0f, bias_sd, LLM_F32);
                snprintf(n, sizeof(n), "blk.%d.ffn_down_exps.bias", l);
                ADD3(n, c->dim, c->n_expert, 1, 0.0f, bias_sd, LLM_F32);
            }
            snprintf(n, sizeof(n), "blk.%d.ffn_gate_exps.weight", l);
            ADD3(n, c->dim, c->expert_ff, c->n_expert, 0.0f, sd, dtype);
            snprintf(n, sizeof(n), "blk.%d.ffn_up_exps.weight", l);
            ADD3(n, c->dim, c->expert_ff, c->n_expert, 0.0f, sd, dtype);
            snprintf(n, sizeof(n), "blk.%d.ffn_down_exps.weight", l);
            ADD3(n, c->expert_ff, c->dim, c->n_expert, 0.0f, sd, dtype);
            if (qwen2moe) { /* the shared expert's gate */
                snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp_shexp.weight", l);
                ADD3(n, c->dim, 1, 1, 0.0f, sd, LLM_F32);
            }
            if (shared) { /* the shared expert, hidden_dim wide */
                T("ffn_gate_shexp", c->dim, c->hidden_dim, 0.0f, sd)
                T("ffn_up_shexp", c->dim, c->hidden_dim, 0.0f, sd)
                T("ffn_down_shexp", c->hidden_dim, c->dim, 0.0f, sd)
            }
        }
#undef T
#define V(name, ne0, mean_, sd_) snprintf(n, sizeof(n), "blk.%d." name, l); ADD(n, ne0, 1, mean_, sd_);
        if (qwen2 || glm || gptoss || strcmp(arch, "seed_oss") == 0) {
            V("attn_q.bias", q, 0.0f, bias_sd)
            V("attn_k.bias", kv, 0.0f, bias_sd)
            V("attn_v.bias", kv, 0.0f, bias_sd)
        }
        if (gptoss) { /* the output's bias; the heads' sinks, spread about 0 as a trained model's (-3 .. 3) */
            V("attn_output.bias", c->dim, 0.0f, bias_sd)
            V("attn_sinks.weight", c->n_heads, 0.0f, 1.0f)
        }
        if (qwen3 || gemma3 || c->qk_norm_full || strcmp(arch, "exaone4") == 0) { /* (OLMo 2's over whole rows) */
            V("attn_q_norm.weight", c->qk_norm_full ? q : c->head_dim, 1.0f, 0.05f)
            V("attn_k_norm.weight", c->qk_norm_full ? kv : c->head_dim, 1.0f, 0.05f)
        }
        if (gemma23 || c->post_norm_only) { /* (Gemma's 1 + w, as the converter stores it) */
            V("post_attention_norm.weight", c->dim, post_norm, 0.05f)
            V("post_ffw_norm.weight", c->dim, post_norm, 0.05f)
        }
#undef V
    }
    if (gemma_embd) { /* mean pooling, the local layers' rope base, and the Dense modules (4x wide), as
                       * llama.cpp's converter writes EmbeddingGemma with its sentence-transformers modules */
        int64_t wide = 4 * (int64_t)c->dim;
        gguf_w_u32(w, "gemma-embedding.pooling_type", LLM_POOL_MEAN);
        gguf_w_f32(w, "gemma-embedding.rope.freq_base_swa", 10000.0f);
        gguf_w_u32(w, "gemma-embedding.dense_2_feat_in", (uint32_t)c->dim);
        gguf_w_u32(w, "gemma-embedding.dense_2_feat_out", (uint32_t)wide);
        gguf_w_u32(w, "gemma-embedding.dense_3_feat_in", (uint32_t)wide);
        gguf_w_u32(w, "gemma-embedding.dense_3_feat_out", (uint32_t)c->dim);
        ADD("dense_2.weight", c->dim, wide, 0.0f, 1.0f / sqrtf((float)c->dim));
        ADD("dense_3.weight", wide, c->dim, 0.0f, 1.0f / sqrtf((float)wide));
    }
    rc = gguf_writer_write(w, out_path, err);
out:
    free(g);
    free(rf);
    gguf_writer_free(w);
    return rc;
}
#undef ADD
#undef ADD3
