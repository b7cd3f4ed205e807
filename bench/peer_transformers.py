"""Second GPU peer for bench/gpu_decode.sh: Hugging Face transformers' own generate() on a random
Llama-3.2-3B-shaped model in bf16 (the baseline a user of plain transformers gets: eager attention kernels,
dynamic KV cache, one Python forward per token). Greedy, a 128-token random prompt, 64 new tokens; time per
output token = (time for 64 new tokens - time for 1) / 63, so the prompt's prefill is left out. Prints one
JSON line per batch size. Runs on the GPU machine (PyTorch and transformers are installed there).
  python3 bench/peer_transformers.py [--batches 1,8] [--new 64]"""
import argparse, json, os, sys, time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=128)
    a = ap.parse_args()
    try:
        import torch
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(f"transformers peer skipped: {e}")
        return 0
    torch.manual_seed(0)
    rope = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}
    if int(transformers.__version__.split(".")[0]) >= 5:  # 5.x: rope_parameters, theta inside
        rope_kw = {"rope_parameters": dict(rope, rope_theta=500000.0)}
    else:
        rope_kw = {"rope_theta": 500000.0, "rope_scaling": rope}
    cfg = LlamaConfig(vocab_size=128256, hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
                      num_attention_heads=24, num_key_value_heads=8, head_dim=128, max_position_embeddings=131072,
                      rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=128000, eos_token_id=None,
                      pad_token_id=0, **rope_kw)
    t0 = time.perf_counter()
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    model = model.to(torch.bfloat16).eval()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: random 3B model built in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    res = {}
    g = torch.Generator().manual_seed(7)
    for b in [int(x) for x in a.batches.split(",") if x]:
        ids = torch.randint(1, cfg.vocab_size, (b, a.prompt), generator=g).cuda()
        att = torch.ones_like(ids)

        def gen(n):
            torch.cuda.synchronize()
            t = time.perf_counter()
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=att, max_new_tokens=n, min_new_tokens=n,
                                     do_sample=False, use_cache=True, pad_token_id=0)
            torch.cuda.synchronize()
            assert out.shape[1] == a.prompt + n, out.shape
            return time.perf_counter() - t

        gen(4)  # warm-up: kernels, allocator
        t1 = min(gen(1) for _ in range(2))
        tn = min(gen(a.new) for _ in range(2))
        tpot = (tn - t1) / (a.new - 1) * 1e3
        res[f"transformers_bs{b}"] = {"tpot_ms": round(tpot, 3), "tok_s": round(b / tpot * 1e3, 1),
                                      "prefill_ms": round(t1 * 1e3, 1)}
        print(json.dumps(res), flush=True)
    out_dir = os.environ.get("OUT")
    if out_dir:
        with open(os.path.join(out_dir, "peer_transformers.json"), "w") as f:
            f.write(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
