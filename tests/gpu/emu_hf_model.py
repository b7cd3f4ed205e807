"""Writes a small random Llama-3-style Hugging Face directory (bf16 safetensors, pure Python: no numpy/torch)
for emulated-CUDA vs CPU parity: rotate-half rope with llama3 scaling (original context 128, so the scaling
matters at the tested positions), 3 query heads per kv head, head_dim 32, untied classifier.
    python3 tests/gpu/emu_hf_model.py OUT_DIR [HEAD_DIM] [ARCH]
HEAD_DIM (default 32) picks the attention kernels' per-lane width: 128 is Llama 3.2 3B's.
ARCH (default llama): qwen2 adds q/k/v biases, qwen3 per-head q/k norms (both: rope theta 1e6, no scaling);
k256 is llama with every matrix 256 or 512 columns wide (8 heads of 32, FFN 512), for K-quant files."""
import json, os, random, struct, sys
from array import array

CFG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 192, "intermediate_size": 320,
       "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 32,
       "vocab_size": 512, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
       "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 128},
       "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}


def bf16(values):
    f = array("f", values)
    out = array("H")
    for u in array("I", f.tobytes()):
        out.append(((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF)
    return out.tobytes()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rnd = random.Random(7)
    c = dict(CFG)
    if len(sys.argv) > 2:
        c["head_dim"] = int(sys.argv[2])
    arch = sys.argv[3] if len(sys.argv) > 3 else "llama"
    if arch == "k256":  # every matrix 256 (or 512) columns wide: all of them take GGUF K-quants
        c.update({"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8})
        arch = "llama"
    if arch != "llama":
        c.update({"architectures": [arch.capitalize() + "ForCausalLM"], "model_type": arch, "rope_theta": 1e6,
                  "rope_scaling": None})
    D, F, H, KV, HD, V = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"], \
        c["num_key_value_heads"], c["head_dim"], c["vocab_size"]
    tensors = [("model.embed_tokens.weight", [V, D], 0.5), ("model.norm.weight", [D], None),
               ("lm_head.weight", [V, D], 0.1)]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        tensors += [(p + "input_layernorm.weight", [D], None), (p + "post_attention_layernorm.weight", [D], None),
                    (p + "self_attn.q_proj.weight", [H * HD, D], 0.08), (p + "self_attn.k_proj.weight", [KV * HD, D], 0.08),
                    (p + "self_attn.v_proj.weight", [KV * HD, D], 0.08), (p + "self_attn.o_proj.weight", [D, H * HD], 0.08),
                    (p + "mlp.gate_proj.weight", [F, D], 0.08), (p + "mlp.up_proj.weight", [F, D], 0.08),
                    (p + "mlp.down_proj.weight", [D, F], 0.06)]
        if arch == "qwen2":
            tensors += [(p + "self_attn.q_proj.bias", [H * HD], 1.0), (p + "self_attn.k_proj.bias", [KV * HD], 1.0),
                        (p + "self_attn.v_proj.bias", [KV * HD], 1.0)]
        if arch == "qwen3":  # weights well away from 1 (as trained ones are), so that each norm shows in the logits
            tensors += [(p + "self_attn.q_norm.weight", [HD], "qk"), (p + "self_attn.k_norm.weight", [HD], "qk")]
    header, blobs, off = {}, [], 0
    for name, shape, sd in tensors:
        n = 1
        for s in shape:
            n *= s
        if sd is None:
            vals = [1.0 + 0.2 * rnd.gauss(0, 1) for _ in range(n)]
        elif sd == "qk":
            vals = [2.5 + 0.5 * rnd.gauss(0, 1) for _ in range(n)]
        else:
            vals = [sd * rnd.gauss(0, 1) for _ in range(n)]
        b = bf16(vals)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    json.dump(c, open(os.path.join(out, "config.json"), "w"), indent=1)
    print(f"wrote {out}: {off / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
