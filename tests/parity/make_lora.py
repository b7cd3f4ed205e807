"""Writes one random LoRA adapter for a Llama-shaped model in the two formats llm-engine reads (pure Python, for
tests/parity/lora.t):
  OUT.gguf      llama.cpp's adapter GGUF (general.type "adapter", adapter.type "lora", adapter.lora.alpha,
                blk.N.<name>.weight.lora_a [r x in] / .lora_b [out x r], F32), as convert_lora_to_gguf.py
                writes it for a "llama" model: the q and k rows of lora_b permuted to llama.cpp's rope pairs;
  OUT_peft/     a PEFT directory (adapter_config.json, adapter_model.safetensors, F32) of the same adapter in
                Hugging Face's row order.
    python3 tests/parity/make_lora.py OUT DIM HIDDEN LAYERS HEADS KV_HEADS [RANK] [ALPHA] [MODULES] [HEAD_DIM]
MODULES (default, or "all": q,k,v,o,gate,up,down): the matrices adapted, in every layer; HEAD_DIM (default
DIM / HEADS)."""
import json, os, random, struct, sys

NAMES = {"q": ("attn_q", "self_attn.q_proj"), "k": ("attn_k", "self_attn.k_proj"),
         "v": ("attn_v", "self_attn.v_proj"), "o": ("attn_output", "self_attn.o_proj"),
         "gate": ("ffn_gate", "mlp.gate_proj"), "up": ("ffn_up", "mlp.up_proj"), "down": ("ffn_down", "mlp.down_proj")}


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kvs, tensors):
    """kvs: [(key, type, value)] with type 8 (string) or 6 (f32); tensors: [(name, rows, cols, floats)]."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for k, t, v in kvs:
        out += gguf_str(k) + struct.pack("<I", t) + (gguf_str(v) if t == 8 else struct.pack("<f", v))
    offset, blobs = 0, []
    for name, rows, cols, vals in tensors:
        out += gguf_str(name) + struct.pack("<I", 2) + struct.pack("<QQ", cols, rows) + struct.pack("<IQ", 0, offset)
        blob = struct.pack("<%df" % len(vals), *vals)
        blob += b"\0" * (-len(blob) % 32)
        blobs.append(blob)
        offset += len(blob)
    out += b"\0" * (-len(out) % 32)
    with open(path, "wb") as f:
        f.write(out)
        for b in blobs:
            f.write(b)


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, rows, cols, vals in tensors:
        blob = struct.pack("<%df" % len(vals), *vals)
        header[name] = {"dtype": "F32", "shape": [rows, cols], "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def to_llamacpp_rows(b, heads, r):
    """B's rows per head from Hugging Face's halves (i, i + hd/2) to llama.cpp's pairs (2i, 2i + 1)."""
    hd = len(b) // r // heads
    out = list(b)
    for h in range(heads):
        for i in range(hd // 2):
            for j in range(2):
                src, dst = h * hd + j * (hd // 2) + i, h * hd + 2 * i + j
                out[dst * r:(dst + 1) * r] = b[src * r:(src + 1) * r]
    return out


def main():
    out = sys.argv[1]
    dim, hidden, layers, heads, kv = (int(x) for x in sys.argv[2:7])
    r = int(sys.argv[7]) if len(sys.argv) > 7 else 4
    alpha = float(sys.argv[8]) if len(sys.argv) > 8 else 8.0
    mods = sys.argv[9].split(",") if len(sys.argv) > 9 and sys.argv[9] != "all" else list(NAMES)
    hd = int(sys.argv[10]) if len(sys.argv) > 10 else dim // heads
    shapes = {"q": (heads * hd, dim), "k": (kv * hd, dim), "v": (kv * hd, dim), "o": (dim, heads * hd),
              "gate": (hidden, dim), "up": (hidden, dim), "down": (dim, hidden)}
    rnd = random.Random(11)
    gg, st = [], []
    for l in range(layers):
        for m in mods:
            rows, cols = shapes[m]
            a = [rnd.uniform(-0.15, 0.15) for _ in range(r * cols)]
            b = [rnd.uniform(-0.15, 0.15) for _ in range(rows * r)]
            gname, pname = NAMES[m]
            gb = to_llamacpp_rows(b, heads if m == "q" else kv, r) if m in ("q", "k") else b
            gg += [("blk.%d.%s.weight.lora_a" % (l, gname), r, cols, a),
                   ("blk.%d.%s.weight.lora_b" % (l, gname), rows, r, gb)]
            st += [("base_model.model.model.layers.%d.%s.lora_A.weight" % (l, pname), r, cols, a),
                   ("base_model.model.model.layers.%d.%s.lora_B.weight" % (l, pname), rows, r, b)]
    write_gguf(out + ".gguf", [("general.architecture", 8, "llama"), ("general.type", 8, "adapter"),
                               ("adapter.type", 8, "lora"), ("adapter.lora.alpha", 6, alpha)], gg)
    os.makedirs(out + "_peft", exist_ok=True)
    with open(os.path.join(out + "_peft", "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": r, "lora_alpha": alpha, "target_modules": [NAMES[m][1].split(".")[1]
                                                                                          for m in mods],
                   "fan_in_fan_out": False, "use_rslora": False, "task_type": "CAUSAL_LM"}, f)
    write_safetensors(os.path.join(out + "_peft", "adapter_model.safetensors"), st)


if __name__ == "__main__":
    main()
