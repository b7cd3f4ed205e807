"""A small random Hugging Face BERT directory and what BERT computes on it, in pure Python (no numpy / torch):
the reference for engine/model_hf_bert.c (tests/parity/hf_bert.t, t/096).
    python3 tests/parity/make_hf_bert.py OUT_DIR embed|rerank
    python3 tests/parity/make_hf_bert.py OUT_DIR xlmr TOKENIZER.gguf IDS.json
embed:  BertModel as sentence-transformers saves it (tensors at the top, an I64 embeddings.position_ids
        buffer, 1_Pooling/config.json: mean), F32.
rerank: BertForSequenceClassification (tensors under "bert.", bert.pooler.dense, classifier with one label),
        LayerNorms spelt gamma / beta as TensorFlow-era checkpoints have them, F16.
Both: tokenizer.json (WordPiece, BertNormalizer, [CLS] ... [SEP]). Prints a JSON object: "inputs" (token id
lists: single texts, and a pair [CLS] a [SEP] b [SEP] whose second text is of token type 1), "cls" and
"mean" (each input's last hidden states pooled), and for rerank "query", "documents" and "scores" (sigmoid
of the classifier on the pooler's tanh, each document paired with the query) with "scores_re", a regex that
accepts each score within 2e-3, in order of relevance as /v1/rerank lists them.
xlmr:   XLMRobertaForSequenceClassification (model_type "xlm-roberta"; tensors under "roberta.", position rows
        counted from padding_idx + 1 = 2, one token type, classifier.dense + classifier.out_proj), F32, with
        a Unigram tokenizer.json made from a GGUF "t5" vocabulary (its pieces, scores, types and precompiled
        charsmap; Metaspace, <s> ... </s>). IDS.json: {"inputs": [[ids]], "pairs": [[ids]]}, token ids as
        the GGUF's tokenizer gives them; prints "cls" and "mean" of each input and "logits" (the head's
        output) of each pair."""
import json, math, os, random, struct, sys
from array import array

WORDS = ["a", "cat", "sat", "on", "the", "mat", "sun", "is", "hot", "dog", "and", "ran", "home", "big", "red",
         "ball", "##s", "##ing", "play", "park", "with", "her", "friend", "bird", "tree", "girl", "boy", "went", "to",
         "saw", "house", "water", "fish", "sky", "blue", "little", "day"]  # (more rows than D: they carry states)
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
D, F, H, LAYERS, POS = 32, 64, 4, 2, 64


def tokenize(text):
    """BERT's basic tokenizer + greedy WordPiece, enough for lowercase words of the vocabulary."""
    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    ids = []
    for word in text.lower().split():
        start, pieces = 0, []
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    break
                end -= 1
            if end == start:
                pieces = [vocab["[UNK]"]]
                break
            pieces.append(vocab[piece])
            start = end
        ids += pieces
    return ids


def layer_norm(x, w, b, eps=1e-12):
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    r = 1.0 / math.sqrt(var + eps)
    return [(v - mean) * r * wi + bi for v, wi, bi in zip(x, w, b)]


def linear(x, w, b):
    return [sum(wr[i] * x[i] for i in range(len(x))) + bo for wr, bo in zip(w, b)]


def forward(p, ids):
    """The last hidden states of one input (BERT: types 1 after its first [SEP]; RoBERTa: position t is row
    t + 2, one type)."""
    xs, typ, roberta = [], 0, len(p["type"]) == 1
    for t, tok in enumerate(ids):
        e = [a + b + c for a, b, c in zip(p["tok"][tok], p["pos"][t + 2 if roberta else t], p["type"][typ])]
        xs.append(layer_norm(e, *p["emb_ln"], p.get("eps", 1e-12)))
        typ = 1 if tok == 3 and not roberta else typ
    hd = D // H
    for L in p["layers"]:
        q = [linear(x, *L["q"]) for x in xs]
        k = [linear(x, *L["k"]) for x in xs]
        v = [linear(x, *L["v"]) for x in xs]
        ctx = []
        for i in range(len(xs)):
            out = []
            for h in range(H):
                sl = slice(h * hd, (h + 1) * hd)
                s = [sum(a * b for a, b in zip(q[i][sl], k[j][sl])) / math.sqrt(hd) for j in range(len(xs))]
                m = max(s)
                e = [math.exp(z - m) for z in s]
                z = sum(e)
                out += [sum(e[j] / z * v[j][sl][d] for j in range(len(xs))) for d in range(hd)]
            ctx.append(out)
        xs = [layer_norm([a + b for a, b in zip(x, linear(c, *L["o"]))], *L["attn_ln"], p.get("eps", 1e-12))
              for x, c in zip(xs, ctx)]
        h = [[0.5 * u * (1.0 + math.erf(u / math.sqrt(2.0))) for u in linear(x, *L["up"])] for x in xs]
        xs = [layer_norm([a + b for a, b in zip(x, linear(hh, *L["down"]))], *L["ffn_ln"], p.get("eps", 1e-12))
              for x, hh in zip(xs, h)]
    return xs


def f16_round(vals):
    return list(array("f", struct.unpack(f"<{len(vals)}e", struct.pack(f"<{len(vals)}e", *vals))))


class Weights:
    """Random tensors drawn in order (mean + sd N(0,1); f16: rounded to the F16 values stored), kept as
    (name, shape, values) for the safetensors file and returned as rows for the reference."""

    def __init__(self, seed, f16=False, gamma=("weight", "bias")):
        self.rnd, self.f16, self.gamma, self.tensors = random.Random(seed), f16, gamma, []

    def add(self, name, shape, sd, mean=0.0):
        n = 1
        for x in shape:
            n *= x
        vals = [mean + sd * self.rnd.gauss(0, 1) for _ in range(n)]
        if self.f16:
            vals = f16_round(vals)
        self.tensors.append((name, shape, vals))
        return vals if len(shape) == 1 else [vals[r * shape[1]:(r + 1) * shape[1]] for r in range(shape[0])]

    def lin(self, name, rows, cols):
        return self.add(name + ".weight", [rows, cols], 1.0 / math.sqrt(cols)), self.add(name + ".bias", [rows], 0.1)

    def ln(self, name):
        return self.add(name + "." + self.gamma[0], [D], 0.1, 1.0), self.add(name + "." + self.gamma[1], [D], 0.1)

    def encoder(self, pre, vocab, pos_rows, types):
        """BERT's embeddings and layers under the prefix pre."""
        p = {"layers": [], "tok": self.add(pre + "embeddings.word_embeddings.weight", [vocab, D], 1.0),
             "pos": self.add(pre + "embeddings.position_embeddings.weight", [pos_rows, D], 0.3),
             "type": self.add(pre + "embeddings.token_type_embeddings.weight", [types, D], 0.5),
             "emb_ln": self.ln(pre + "embeddings.LayerNorm")}
        for l in range(LAYERS):
            b = f"{pre}encoder.layer.{l}."
            p["layers"].append({"q": self.lin(b + "attention.self.query", D, D),
                                "k": self.lin(b + "attention.self.key", D, D),
                                "v": self.lin(b + "attention.self.value", D, D),
                                "o": self.lin(b + "attention.output.dense", D, D),
                                "attn_ln": self.ln(b + "attention.output.LayerNorm"),
                                "up": self.lin(b + "intermediate.dense", F, D), "down": self.lin(b + "output.dense", D, F),
                                "ffn_ln": self.ln(b + "output.LayerNorm")})
        return p

    def safetensors(self, path, extra=()):
        """The tensors (F16 or F32) and any extra (name, dtype, shape, bytes) as model.safetensors."""
        header, blobs, off = {}, [], 0
        for name, shape, vals in self.tensors:
            blob = struct.pack(f"<{len(vals)}e", *vals) if self.f16 else array("f", vals).tobytes()
            header[name] = {"dtype": "F16" if self.f16 else "F32", "shape": shape,
                            "data_offsets": [off, off + len(blob)]}
            blobs.append(blob)
            off += len(blob)
        for name, dtype, shape, blob in extra:
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(blob)]}
            blobs.append(blob)
            off += len(blob)
        h = json.dumps(header).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def gguf_kv(path):
    """A GGUF file's metadata as a dict (enough of the format for tokenizer keys)."""
    f = open(path, "rb")
    rd = lambda fmt: struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]
    rs = lambda: f.read(rd("Q")).decode("utf-8", "surrogateescape")
    scal = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return rs()
        if t == 9:
            et, n = rd("I"), rd("Q")
            if et in (0, 1):
                return f.read(n)
            return [value(et) for _ in range(n)]
        return rd(scal[t])
    assert f.read(4) == b"GGUF"
    rd("I"), rd("Q")
    kv = {}
    for _ in range(rd("Q")):
        k = rs()
        kv[k] = value(rd("I"))
    return kv


def xlmr(out, gguf, ids_path):
    """An XLMRobertaForSequenceClassification directory with the GGUF's Unigram vocabulary."""
    import base64
    kv = gguf_kv(gguf)
    pieces, scores, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"], kv["tokenizer.ggml.token_type"]
    V, unk = len(pieces), kv["tokenizer.ggml.unknown_token_id"]
    w = Weights(17)
    p = w.encoder("roberta.", V, POS + 2, 1)
    p["eps"] = 1e-5
    dense, proj = w.lin("classifier.dense", D, D), w.lin("classifier.out_proj", 1, D)
    os.makedirs(out, exist_ok=True)
    w.safetensors(os.path.join(out, "model.safetensors"))
    cfg = {"architectures": ["XLMRobertaForSequenceClassification"], "model_type": "xlm-roberta",
           "hidden_size": D, "intermediate_size": F, "num_hidden_layers": LAYERS, "num_attention_heads": H,
           "max_position_embeddings": POS + 2, "type_vocab_size": 1, "vocab_size": V, "hidden_act": "gelu",
           "layer_norm_eps": 1e-5, "position_embedding_type": "absolute", "pad_token_id": 1, "bos_token_id": 0,
           "eos_token_id": 2, "_name_or_path": "tiny-hf-xlm-roberta", "torch_dtype": "float32",
           "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    added = [{"id": i, "content": pieces[i], "single_word": False, "lstrip": pieces[i] == "<mask>", "rstrip": False,
              "normalized": False, "special": True} for i in range(V) if types[i] in (2, 3)]
    bos, eos = pieces[kv["tokenizer.ggml.bos_token_id"]], pieces[kv["tokenizer.ggml.eos_token_id"]]
    sp = lambda t: {"SpecialToken": {"id": t, "type_id": 0}}
    seq = lambda t: {"Sequence": {"id": t, "type_id": 0}}
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": {"type": "Sequence", "normalizers": [
               {"type": "Precompiled",
                "precompiled_charsmap": base64.b64encode(kv["tokenizer.ggml.precompiled_charsmap"]).decode()},
               {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
           "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
           "post_processor": {"type": "TemplateProcessing", "single": [sp(bos), seq("A"), sp(eos)],
                              "pair": [sp(bos), seq("A"), sp(eos), sp(eos), seq("B"), sp(eos)],
                              "special_tokens": {}},
           "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
           "model": {"type": "Unigram", "unk_id": unk, "vocab": [[pc, sc] for pc, sc in zip(pieces, scores)],
                     "byte_fallback": False}}
    json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w"))
    ids = json.load(open(ids_path))
    res = {"cls": [], "mean": [], "logits": []}
    for x in ids["inputs"]:
        hs = forward(p, x)
        res["cls"].append(hs[0])
        res["mean"].append([sum(col) / len(hs) for col in zip(*hs)])
    for x in ids["pairs"]:
        hs = forward(p, x)
        res["logits"].append(linear([math.tanh(v) for v in linear(hs[0], *dense)], *proj)[0])
    print(json.dumps(res))


def main():
    out, kind = sys.argv[1], sys.argv[2]
    if kind == "xlmr":
        return xlmr(out, sys.argv[3], sys.argv[4])
    rerank = kind == "rerank"
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    V = len(SPECIAL) + len(WORDS)
    # the cross-encoder stored as F16 (the reference computes with the stored values), its LayerNorms spelt
    # gamma / beta
    w = Weights(11 if rerank else 5, f16=rerank, gamma=("gamma", "beta") if rerank else ("weight", "bias"))
    p = w.encoder("bert." if rerank else "", V, POS, 2)
    pooler = w.lin(("bert." if rerank else "") + "pooler.dense", D, D)
    if rerank:
        classifier = w.lin("classifier", 1, D)
    # embed: the I64 position_ids buffer transformers saved before 4.31 (never a weight)
    w.safetensors(os.path.join(out, "model.safetensors"),
                  [] if rerank else [("embeddings.position_ids", "I64", [1, POS], array("q", range(POS)).tobytes())])
    cfg = {"architectures": ["BertForSequenceClassification" if rerank else "BertModel"], "model_type": "bert",
           "hidden_size": D, "intermediate_size": F, "num_hidden_layers": LAYERS, "num_attention_heads": H,
           "max_position_embeddings": POS, "type_vocab_size": 2, "vocab_size": V, "hidden_act": "gelu",
           "layer_norm_eps": 1e-12, "position_embedding_type": "absolute", "pad_token_id": 0,
           "_name_or_path": "tiny-hf-bert-" + kind, "torch_dtype": "float16" if rerank else "float32"}
    if rerank:
        cfg.update({"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}})
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    json.dump({"word_embedding_dimension": D, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": not rerank},
              open(os.path.join(out, "1_Pooling", "config.json"), "w"))
    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": i, "content": w, "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True} for i, w in enumerate(SPECIAL)],
           "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                          "strip_accents": None, "lowercase": True},
           "pre_tokenizer": {"type": "BertPreTokenizer"},
           "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
           "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
           "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                     "max_input_chars_per_word": 100, "vocab": vocab}}
    json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w"))

    texts = ["a cat sat on the mat", "the big red ball", "dogs playing in the park"]
    inputs = [[2] + tokenize(t) + [3] for t in texts] + [[2] + tokenize(texts[0]) + [3] + tokenize(texts[1]) + [3]]
    res = {"texts": texts, "inputs": inputs, "cls": [], "mean": []}
    for ids in inputs:
        hs = forward(p, ids)
        res["cls"].append(hs[0])
        res["mean"].append([sum(col) / len(hs) for col in zip(*hs)])
    if rerank:
        query, docs = "a cat", ["a cat sat on the mat", "the sun is hot", "cats and dogs"]
        scores = []
        for d in docs:
            hs = forward(p, [2] + tokenize(query) + [3] + tokenize(d) + [3])
            pooled = [math.tanh(v) for v in linear(hs[0], *pooler)]
            logit = linear(pooled, *classifier)[0]
            scores.append(1.0 / (1.0 + math.exp(-logit)))
        order = sorted(range(len(docs)), key=lambda i: -scores[i])

        def near(v, tol=2e-3):  # every 4-decimal prefix within tol of v (F16 weights: the CPU's F16 products)
            lo, hi = int(math.floor((v - tol) * 1e4)), int(math.floor((v + tol) * 1e4))
            return "0\\.(?:" + "|".join("%04d" % k for k in range(lo, hi + 1)) + ")\\d*"
        res.update({"query": query, "documents": docs, "scores": scores, "scores_re": '"results":\\[' + ",".join(
            '\\{"index":%d,"relevance_score":%s\\}' % (i, near(scores[i])) for i in order) + "\\]"})
    print(json.dumps(res))


if __name__ == "__main__":
    main()
