#!/usr/bin/env python3
"""Integer-quantised Hugging Face checkpoints (GPTQ, AWQ, compressed-tensors) and their float twins, from an F32
directory; and a comparison of two directories' tensors.

Usage: make_intq.py FORM SRC_DIR Q_DIR REF_DIR       (SRC_DIR: config.json and model.safetensors, F32 or BF16)
       make_intq.py compare REF_DIR GOT_DIR
       make_intq.py wrap-mistral3 Q_DIR OUT_DIR

FORM: gptq (4-bit symmetric, groups of 64, the first checkpoint format: zero points stored minus one),
gptq-act (4-bit asymmetric, groups of 32, act-order: a shuffled g_idx, gptq_v2), gptq8 (8-bit symmetric, one
group per row), awq (4-bit asymmetric, groups of 64, GEMM packing), ct-w4a16 (compressed-tensors pack-quantized,
symmetric, groups of 64), ct-w4a16-asym (the same asymmetric: packed zero points), ct-w8a8 (int-quantized, I8,
per-channel scales, dynamic activations), ct-fp8 (float-quantized, per-channel scales).

Every 2-D tensor under model.layers. except a MoE router (mlp.gate) is quantised round-to-nearest and packed the
way the format's own tools pack it (GPTQ: along the input, low bits first; AWQ: along the output in the order 0 2
4 6 1 3 5 7; compressed-tensors: along the input, values offset by 2^(bits-1), zero points along the output).
REF_DIR gets the same model with those weights as F32: scale * (q - zero), the value the checkpoint means
(exact in F32: an fp16 or bf16 scale times an integer of 9 bits at most); ct-fp8's are the E4M3 value times the
scale rounded to BF16, as its loader keeps them. Prints how many matrices were quantised.

compare: every tensor of REF_DIR against GOT_DIR's (`gen-model --from Q_DIR --dtype f32 --format hf` writes
what the engine loaded): prints how many are identical, and the largest difference relative to the largest
weight of its tensor. wrap-mistral3: Q_DIR in Mistral Small 3's multimodal layout (text_config, tensors under
language_model), its quantization_config at the top level, as RedHatAI's Mistral-Small-3.1 releases have it.
"""
import json
import os
import random
import struct
import sys

# (beside this file: the FP8 checkpoints' writer)
from make_fp8 import bf16_bits, e4m3, f32, nearest as e4m3_nearest, write_st

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # field k of a word holds output column 8j + AWQ_ORDER[k]


def read_st(d):
    raw = open(d + '/model.safetensors', 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    return hdr, raw[8 + n:]


def f16(x):
    return struct.unpack('<e', struct.pack('<e', x))[0]


def bf16(x):
    return struct.unpack('<f', struct.pack('<I', bf16_bits(x) << 16))[0]


def pack(vals, bits):
    """Unsigned values, low field first, into int32 words (as little-endian bytes)."""
    pf = 32 // bits
    words = []
    for k in range(0, len(vals), pf):
        w = 0
        for j, v in enumerate(vals[k:k + pf]):
            w |= (v & ((1 << bits) - 1)) << (bits * j)
        words.append(w)
    return struct.pack('<%dI' % len(words), *words)


class Quant:
    """One matrix [rows][cols] quantised: q (unsigned stored values), zero per (row, group), scale per (row,
    group), g (each column's group)."""

    def __init__(self, w, rows, cols, bits, group, sym, act, scale_round, rng):
        self.rows, self.cols, self.bits = rows, cols, bits
        order = list(range(cols))
        if act:
            rng.shuffle(order)  # act-order: columns taken in another order, grouped as taken
        self.g = [0] * cols
        for pos, c in enumerate(order):
            self.g[c] = pos // group
        self.ngroups = (cols + group - 1) // group
        qmax = (1 << bits) - 1
        self.q = [[0] * cols for _ in range(rows)]
        self.zero = [[0] * self.ngroups for _ in range(rows)]
        self.scale = [[0.0] * self.ngroups for _ in range(rows)]
        for r in range(rows):
            members = [[] for _ in range(self.ngroups)]
            for c in range(cols):
                members[self.g[c]].append(c)
            for gi, cs in enumerate(members):
                vals = [w[r * cols + c] for c in cs]
                if sym:
                    half = 1 << (bits - 1)
                    s = scale_round(max(abs(v) for v in vals) / (half - 1) or 1.0)
                    z = half
                else:
                    lo, hi = min(min(vals), 0.0), max(max(vals), 0.0)
                    s = scale_round((hi - lo) / qmax or 1.0)
                    z = min(qmax, max(0, round(-lo / s)))
                self.scale[r][gi], self.zero[r][gi] = s, z
                for c in cs:
                    self.q[r][c] = min(qmax, max(0, round(w[r * cols + c] / s) + z))

    def value(self, r, c):
        g = self.g[c]
        return f32(self.scale[r][g] * (self.q[r][c] - self.zero[r][g]))


def f16_bytes(rows):
    return b''.join(struct.pack('<%de' % len(r), *r) for r in rows)


def bf16_bytes(rows):
    return b''.join(struct.pack('<%dH' % len(r), *[bf16_bits(x) for x in r]) for r in rows)


FORMS = {
    # name: bits, group (0: the row), sym, act-order, scale rounding
    'gptq': (4, 64, True, False, f16), 'gptq-act': (4, 32, False, True, f16), 'gptq8': (8, 0, True, False, f16),
    'awq': (4, 64, False, False, f16), 'ct-w4a16': (4, 64, True, False, bf16),
    'ct-w4a16-asym': (4, 64, False, False, bf16), 'ct-w8a8': (8, 0, True, False, bf16),
}


def quantise(form, name, w, rows, cols, rng):
    """(checkpoint tensors, twin's F32 values) of one matrix."""
    base = name[:-len('.weight')]
    if form == 'ct-fp8':
        scales = [bf16(max(abs(w[r * cols + c]) for c in range(cols)) / 448.0 or 1.0) for r in range(rows)]
        codes = bytearray(rows * cols)
        ref = []
        for r in range(rows):
            for c in range(cols):
                codes[r * cols + c] = e4m3_nearest(w[r * cols + c] / scales[r])
                ref.append(bf16(f32(e4m3(codes[r * cols + c]) * scales[r])))
        return [(name, 'F8_E4M3', [rows, cols], bytes(codes)),
                (base + '.weight_scale', 'BF16', [rows, 1], bf16_bytes([[s] for s in scales]))], ref
    bits, group, sym, act, sround = FORMS[form]
    Q = Quant(w, rows, cols, bits, group or cols, sym, act, sround, rng)
    ref = [Q.value(r, c) for r in range(rows) for c in range(cols)]
    G, pf = Q.ngroups, 32 // bits
    if form.startswith('gptq'):
        v1 = form != 'gptq-act'
        qw = pack([Q.q[r][c] for k in range(0, cols, pf) for r in range(rows) for c in range(k, k + pf)], bits)
        # (the words [k][r] of that order: each word's pf fields are inputs k .. k + pf - 1 of output r)
        qz = pack([Q.zero[r][g] - (1 if v1 else 0) for g in range(G) for r in range(rows)], bits)
        sc = f16_bytes([[Q.scale[r][g] for r in range(rows)] for g in range(G)])
        return [(base + '.qweight', 'I32', [cols // pf, rows], qw), (base + '.qzeros', 'I32', [G, rows // pf], qz),
                (base + '.scales', 'F16', [G, rows], sc),
                (base + '.g_idx', 'I32', [cols], struct.pack('<%di' % cols, *Q.g))], ref
    if form == 'awq':
        qw = pack([Q.q[8 * j + AWQ_ORDER[k]][i] for i in range(cols) for j in range(rows // 8) for k in range(8)], 4)
        qz = pack([Q.zero[8 * j + AWQ_ORDER[k]][g] for g in range(G) for j in range(rows // 8) for k in range(8)], 4)
        sc = f16_bytes([[Q.scale[r][g] for r in range(rows)] for g in range(G)])
        return [(base + '.qweight', 'I32', [cols, rows // 8], qw), (base + '.qzeros', 'I32', [G, rows // 8], qz),
                (base + '.scales', 'F16', [G, rows], sc)], ref
    sc = bf16_bytes([Q.scale[r] for r in range(rows)])
    shape = struct.pack('<2q', rows, cols)
    if form == 'ct-w8a8':  # signed I8: q - 128 (zero 128, symmetric)
        q8 = struct.pack('<%db' % (rows * cols), *[Q.q[r][c] - 128 for r in range(rows) for c in range(cols)])
        return [(name, 'I8', [rows, cols], q8), (base + '.weight_scale', 'BF16', [rows, G], sc)], ref
    out = [(base + '.weight_packed', 'I32', [rows, cols // pf],
            pack([Q.q[r][c] for r in range(rows) for c in range(cols)], bits)),
           (base + '.weight_scale', 'BF16', [rows, G], sc), (base + '.weight_shape', 'I64', [2], shape)]
    if not sym:  # zero points packed along the outputs: word [k][g] holds rows k * pf .. + pf - 1
        out.append((base + '.weight_zero_point', 'I32', [(rows + pf - 1) // pf, G],
                    pack([Q.zero[k + j][g] if k + j < rows else 0 for k in range(0, rows, pf) for g in range(G)
                          for j in range(pf)], bits)))
    return out, ref


def qconfig(form):
    if form.startswith('gptq'):
        bits, group, sym, act, _ = FORMS[form]
        return {'quant_method': 'gptq', 'bits': bits, 'group_size': group or -1, 'sym': sym, 'desc_act': act,
                'damp_percent': 0.01, 'checkpoint_format': 'gptq_v2' if form == 'gptq-act' else 'gptq'}
    if form == 'awq':
        return {'quant_method': 'awq', 'bits': 4, 'group_size': 64, 'zero_point': True, 'version': 'gemm',
                'modules_to_not_convert': None}
    if form == 'ct-fp8':
        fmt, w, acts = 'float-quantized', {'num_bits': 8, 'type': 'float', 'symmetric': True, 'strategy': 'channel',
                                           'group_size': None, 'dynamic': False}, \
            {'num_bits': 8, 'type': 'float', 'symmetric': True, 'strategy': 'token', 'dynamic': True}
    else:
        bits, group, sym, _, _ = FORMS[form]
        fmt = 'int-quantized' if form == 'ct-w8a8' else 'pack-quantized'
        w = {'num_bits': bits, 'type': 'int', 'symmetric': sym, 'strategy': 'group' if group else 'channel',
             'group_size': group or None, 'actorder': None, 'dynamic': False, 'observer': 'minmax'}
        acts = {'num_bits': 8, 'type': 'int', 'symmetric': True, 'strategy': 'token', 'dynamic': True} \
            if form == 'ct-w8a8' else None
    return {'quant_method': 'compressed-tensors', 'format': fmt, 'quantization_status': 'compressed',
            'config_groups': {'group_0': {'targets': ['Linear'], 'weights': w, 'input_activations': acts,
                                          'output_activations': None, 'format': fmt}},
            'ignore': ['lm_head', 're:.*mlp.gate$'], 'kv_cache_scheme': None, 'sparsity_config': {},
            'transform_config': {}, 'version': '0.11.0'}


def make(form, src, q_dir, ref_dir):
    hdr, data = read_st(src)
    rng = random.Random(7)
    q_t, ref_t, count = [], [], 0
    for name in sorted(hdr):
        if name == '__metadata__':
            continue
        t = hdr[name]
        b, e = t['data_offsets']
        buf = data[b:e]
        if not (name.startswith('model.layers.') and len(t['shape']) == 2 and name.endswith('.weight')
                and not name.endswith('mlp.gate.weight')):
            q_t.append((name, t['dtype'], t['shape'], buf))
            ref_t.append((name, t['dtype'], t['shape'], buf))
            continue
        rows, cols = t['shape']
        if t['dtype'] == 'BF16':
            w = struct.unpack('<%df' % (rows * cols),
                              struct.pack('<%dI' % (rows * cols), *[h << 16 for h in
                                                                     struct.unpack('<%dH' % (rows * cols), buf)]))
        else:
            assert t['dtype'] == 'F32', name
            w = struct.unpack('<%df' % (rows * cols), buf)
        parts, ref = quantise(form, name, w, rows, cols, rng)
        q_t += parts
        ref_t.append((name, 'F32', [rows, cols], struct.pack('<%df' % len(ref), *ref)))
        count += 1
    cfg = json.load(open(src + '/config.json'))
    for d, ts in ((q_dir, q_t), (ref_dir, ref_t)):
        os.makedirs(d, exist_ok=True)
        c = dict(cfg)
        if d == q_dir:
            c['quantization_config'] = qconfig(form)
        json.dump(c, open(d + '/config.json', 'w'), indent=1)
        write_st(d + '/model.safetensors', ts)
    print('%d matrices quantised as %s' % (count, form))


def compare(ref_dir, got_dir):
    rh, rd = read_st(ref_dir)
    gh, gd = read_st(got_dir)
    same = total = 0
    worst = 0.0
    for name in sorted(rh):
        if name == '__metadata__':
            continue
        total += 1
        r, g = rh[name], gh.get(name)
        if g is None or r['shape'] != g['shape'] or r['dtype'] != 'F32' or g['dtype'] != 'F32':
            print('differs in kind: %s' % name)
            worst = float('inf')
            continue
        a = rd[r['data_offsets'][0]:r['data_offsets'][1]]
        b = gd[g['data_offsets'][0]:g['data_offsets'][1]]
        if a == b:
            same += 1
            continue
        x, y = struct.unpack('<%df' % (len(a) // 4), a), struct.unpack('<%df' % (len(b) // 4), b)
        amax = max(abs(v) for v in x) or 1.0
        worst = max(worst, max(abs(p - q) for p, q in zip(x, y)) / amax)
    print('%d of %d tensors identical; largest difference %.3g of the tensor\'s largest weight' % (same, total, worst))


def wrap_mistral3(q_dir, out):
    """Q_DIR as Mistral Small 3's multimodal layout: the config in text_config (model_type mistral), the
    quantization_config left at the top level, the tensors under language_model."""
    cfg = json.load(open(q_dir + '/config.json'))
    q = cfg.pop('quantization_config')
    cfg['model_type'] = 'mistral'
    top = {'architectures': ['Mistral3ForConditionalGeneration'], 'model_type': 'mistral3', 'text_config': cfg,
           'vision_config': {'model_type': 'pixtral'}, 'quantization_config': q}
    hdr, data = read_st(q_dir)
    ts = []
    for name in sorted(hdr):
        if name == '__metadata__':
            continue
        t = hdr[name]
        ts.append(('language_model.' + name, t['dtype'], t['shape'], data[t['data_offsets'][0]:t['data_offsets'][1]]))
    os.makedirs(out, exist_ok=True)
    json.dump(top, open(out + '/config.json', 'w'), indent=1)
    write_st(out + '/model.safetensors', ts)
    print('%d tensors under language_model' % len(ts))


if __name__ == '__main__':
    if sys.argv[1] == 'compare':
        compare(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == 'wrap-mistral3':
        wrap_mistral3(sys.argv[2], sys.argv[3])
    else:
        make(*sys.argv[1:5])
