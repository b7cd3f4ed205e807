"""ModernBERT's forward in pure Python (no numpy / torch), written from transformers' ModernBertModel: the
reference for our modern-bert path on a Hugging Face directory of F32 tensors (tests/parity/modernbert_hf.t).
    python3 tests/parity/modernbert_ref.py DIR IDS [--tanh]
    python3 tests/parity/modernbert_ref.py --make-rank SRC DST
IDS: comma-separated token ids, [CLS] and [SEP] included. Prints the mean of the last hidden states (after
final_norm) as a JSON list; for a ModernBertForSequenceClassification, the classifier's outputs on the
pooled state (classifier_pooling: mean or [CLS]'s): classifier(LayerNorm(gelu(head.dense pooled))).
--make-rank: DST, a copy of the F32 directory SRC made a reranker: random head.dense, head.norm, classifier
(one label), architectures ModernBertForSequenceClassification, classifier_pooling mean.
The definition followed:
  x = LayerNorm(tok_embeddings[ids])                        LayerNorms without bias, eps norm_eps
  per layer l (global when l % global_attn_every_n_layers == 0, else local):
    h = x if l == 0 else LayerNorm(x)                         (layer 0's attn_norm is an Identity)
    q, k, v = Wqkv h (in that order); q, k rotated (rotate_half) with base global_rope_theta or
      local_rope_theta; softmax(q.k / sqrt(head_dim)) over the keys j with |i - j| <= local_attention // 2
      on a local layer, all of them on a global one (no causal mask)
    x = x + Wo attention
    input, gate = Wi LayerNorm(x) (halves); x = x + Wo (gelu(input) * gate), gelu the exact erf one
  final_norm(x).
--tanh: the tanh form of GELU instead (what llama.cpp computes), to see how far that moves the output."""
import json, math, struct, sys


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        a, b = t["data_offsets"]
        out[name] = (t["shape"], data, a, b)
    return out


def rows(tensors, name):
    """A 2-D tensor as a list of rows (1-D: one row)."""
    shape, data, a, b = tensors[name]
    cols = shape[-1]
    flat = struct.unpack_from("<%df" % ((b - a) // 4), data, a)
    return [list(flat[i:i + cols]) for i in range(0, len(flat), cols)]


def row(tensors, name, r):
    shape, data, a, _ = tensors[name]
    cols = shape[-1]
    return list(struct.unpack_from("<%df" % cols, data, a + 4 * r * cols))


def layer_norm(x, w, eps):
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    r = 1.0 / math.sqrt(var + eps)
    return [(v - mean) * r * wi for v, wi in zip(x, w)]


def matvec(m, x):
    return [sum(a * b for a, b in zip(r, x)) for r in m]


def gelu(v, tanh):
    if tanh:
        return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


def rotate(x, pos, theta, hd):
    """rotate_half over one head of hd values at position pos."""
    half = hd // 2
    out = list(x)
    for i in range(half):
        a = pos * theta ** (-2.0 * i / hd)
        c, s = math.cos(a), math.sin(a)
        out[i] = x[i] * c - x[i + half] * s
        out[i + half] = x[i + half] * c + x[i] * s
    return out


def make_rank(src, dst):
    import os, random
    random.seed(7)
    os.makedirs(dst, exist_ok=True)
    cfg = json.load(open(src + "/config.json"))
    dim = cfg["hidden_size"]
    t = read_safetensors(src + "/model.safetensors")
    blobs = {n: (shape, data[a:b]) for n, (shape, data, a, b) in t.items()}
    def rand(shape, mean, sd):
        n = 1
        for s in shape:
            n *= s
        return (shape, struct.pack("<%df" % n, *[random.gauss(mean, sd) for _ in range(n)]))
    blobs["head.dense.weight"] = rand([dim, dim], 0.0, dim ** -0.5)
    blobs["head.norm.weight"] = rand([dim], 1.0, 0.1)
    blobs["classifier.weight"] = rand([1, dim], 0.0, 1.0)
    blobs["classifier.bias"] = rand([1], 0.0, 0.5)
    head, off, body = {}, 0, b""
    for n in sorted(blobs):
        shape, raw = blobs[n]
        head[n] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        body += raw
    hj = json.dumps(head).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(dst + "/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + body)
    cfg["architectures"] = ["ModernBertForSequenceClassification"]
    cfg["classifier_pooling"] = "mean"
    cfg["classifier_activation"] = "gelu"
    cfg["classifier_bias"] = False
    cfg["id2label"] = {"0": "LABEL_0"}
    json.dump(cfg, open(dst + "/config.json", "w"), indent=1)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(src + "/" + name):
            open(dst + "/" + name, "wb").write(open(src + "/" + name, "rb").read())


def main():
    if sys.argv[1] == "--make-rank":
        make_rank(sys.argv[2], sys.argv[3])
        return
    d, ids = sys.argv[1], [int(v) for v in sys.argv[2].split(",")]
    tanh = "--tanh" in sys.argv[3:]
    cfg = json.load(open(d + "/config.json"))
    t = read_safetensors(d + "/model.safetensors")
    dim, heads, n_layers = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    hd, eps, every = dim // heads, cfg.get("norm_eps", 1e-5), cfg.get("global_attn_every_n_layers", 3)
    half_win = cfg.get("local_attention", 128) // 2
    n = len(ids)
    x = [layer_norm(row(t, "embeddings.tok_embeddings.weight", i), rows(t, "embeddings.norm.weight")[0], eps)
         for i in ids]
    for l in range(n_layers):
        local = l % every != 0
        theta = cfg["local_rope_theta"] if local else cfg["global_rope_theta"]
        p = "layers.%d." % l
        h = x if l == 0 else [layer_norm(v, rows(t, p + "attn_norm.weight")[0], eps) for v in x]
        qkv = [matvec(rows(t, p + "attn.Wqkv.weight"), v) for v in h]
        att = [[0.0] * dim for _ in range(n)]
        for hh in range(heads):
            q = [rotate(r[hh * hd:(hh + 1) * hd], i, theta, hd) for i, r in enumerate(qkv)]
            k = [rotate(r[dim + hh * hd:dim + (hh + 1) * hd], i, theta, hd) for i, r in enumerate(qkv)]
            v = [r[2 * dim + hh * hd:2 * dim + (hh + 1) * hd] for r in qkv]
            for i in range(n):
                js = [j for j in range(n) if not local or abs(i - j) <= half_win]
                s = [sum(a * b for a, b in zip(q[i], k[j])) / math.sqrt(hd) for j in js]
                m = max(s)
                e = [math.exp(z - m) for z in s]
                z = sum(e)
                for c in range(hd):
                    att[i][hh * hd + c] = sum(e[u] * v[j][c] for u, j in enumerate(js)) / z
        wo = rows(t, p + "attn.Wo.weight")
        x = [[a + b for a, b in zip(x[i], matvec(wo, att[i]))] for i in range(n)]
        wi, wo2, nw = rows(t, p + "mlp.Wi.weight"), rows(t, p + "mlp.Wo.weight"), rows(t, p + "mlp_norm.weight")[0]
        ff = len(wi) // 2
        for i in range(n):
            u = matvec(wi, layer_norm(x[i], nw, eps))
            g = [gelu(u[c], tanh) * u[ff + c] for c in range(ff)]
            x[i] = [a + b for a, b in zip(x[i], matvec(wo2, g))]
    fw = rows(t, "final_norm.weight")[0]
    x = [layer_norm(v, fw, eps) for v in x]
    pooled = [sum(v[c] for v in x) / n for c in range(dim)]
    if "classifier.weight" not in t:
        print(json.dumps(pooled))
        return
    if cfg.get("classifier_pooling", "mean") == "cls":
        pooled = x[0]
    h = [gelu(v, tanh) for v in matvec(rows(t, "head.dense.weight"), pooled)]
    h = layer_norm(h, rows(t, "head.norm.weight")[0], eps)
    b = rows(t, "classifier.bias")[0]
    print(json.dumps([o + bi for o, bi in zip(matvec(rows(t, "classifier.weight"), h), b)]))


main()
