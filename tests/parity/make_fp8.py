#!/usr/bin/env python3
"""A block-wise FP8 checkpoint and its dequantised twin, from an F32 Hugging Face directory.

Usage: make_fp8.py SRC_DIR FP8_DIR REF_DIR BLOCK_ROWS BLOCK_COLS

SRC_DIR: config.json + model.safetensors (F32; `gen-model --format hf` writes one). Every 2-D tensor under
model.layers. (the layers' Linear weights) goes to FP8_DIR as transformers' FP8 checkpoints store it
(Qwen3-*-FP8): F8_E4M3 codes [out][in] and `<name>_scale_inv` F32 [ceil(out/BR)][ceil(in/BC)], each block's
scale its largest magnitude / 448 (E4M3's largest value), each code the nearest E4M3 value of w / scale; config.json
gains quantization_config {quant_method fp8, fmt e4m3, activation_scheme dynamic, weight_block_size [BR, BC]}.
REF_DIR gets the same model with those weights as BF16: code value * scale rounded to float32, then to BF16
(nearest even), the dequantisation an FP8 checkpoint means, computed here independently of the engine. The other
tensors are copied as they are. Prints how many matrices were quantised.
"""
import json
import math
import os
import struct
import sys


def e4m3(code):
    e, m = (code >> 3) & 15, code & 7
    if e == 15 and m == 7:
        return float('nan')
    v = math.ldexp(m / 8.0, -6) if e == 0 else math.ldexp(1.0 + m / 8.0, e - 7)
    return -v if code & 0x80 else v


VALUES = sorted((e4m3(c), c) for c in range(127))  # the non-negative finite codes 0x00..0x7e


def nearest(x):
    a = abs(x)
    lo, hi = 0, len(VALUES) - 1
    while lo < hi:  # first value >= a
        mid = (lo + hi) // 2
        if VALUES[mid][0] < a:
            lo = mid + 1
        else:
            hi = mid
    best = VALUES[lo]
    if lo > 0 and a - VALUES[lo - 1][0] <= best[0] - a:
        best = VALUES[lo - 1]
    return best[1] | (0x80 if x < 0 and best[1] != 0 else 0)


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def bf16_bits(x):
    b = struct.unpack('<I', struct.pack('<f', x))[0]
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def write_st(path, tensors):
    """tensors: [(name, dtype, shape, bytes)]"""
    hdr, off = {}, 0
    for name, dt, shape, data in tensors:
        hdr[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [off, off + len(data)]}
        off += len(data)
    h = json.dumps(hdr).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h)
        for t in tensors:
            f.write(t[3])


def main():
    src, fp8_dir, ref_dir, br, bc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    raw = open(src + '/model.safetensors', 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    fp8_t, ref_t, count = [], [], 0
    for name in sorted(hdr):
        if name == '__metadata__':
            continue
        t = hdr[name]
        b, e = t['data_offsets']
        buf = data[b:e]
        if not (name.startswith('model.layers.') and len(t['shape']) == 2):
            fp8_t.append((name, t['dtype'], t['shape'], buf))
            ref_t.append((name, t['dtype'], t['shape'], buf))
            continue
        assert t['dtype'] == 'F32', name
        rows, cols = t['shape']
        w = struct.unpack('<%df' % (rows * cols), buf)
        sr, sc = (rows + br - 1) // br, (cols + bc - 1) // bc
        scales = []
        for i in range(sr):
            for j in range(sc):
                amax = max(abs(w[r * cols + c]) for r in range(i * br, min(rows, (i + 1) * br))
                           for c in range(j * bc, min(cols, (j + 1) * bc)))
                scales.append(f32(amax / 448.0) if amax > 0 else 1.0)
        codes, ref = bytearray(rows * cols), []
        for r in range(rows):
            for c in range(cols):
                s = scales[(r // br) * sc + c // bc]
                q = nearest(w[r * cols + c] / s)
                codes[r * cols + c] = q
                ref.append(bf16_bits(f32(e4m3(q) * s)))
        fp8_t.append((name, 'F8_E4M3', [rows, cols], bytes(codes)))
        fp8_t.append((name + '_scale_inv', 'F32', [sr, sc], struct.pack('<%df' % len(scales), *scales)))
        ref_t.append((name, 'BF16', [rows, cols], struct.pack('<%dH' % len(ref), *ref)))
        count += 1
    cfg = json.load(open(src + '/config.json'))
    for d, ts in ((fp8_dir, fp8_t), (ref_dir, ref_t)):
        os.makedirs(d, exist_ok=True)
        c = dict(cfg)
        if d == fp8_dir:
            c['quantization_config'] = {'quant_method': 'fp8', 'fmt': 'e4m3', 'activation_scheme': 'dynamic',
                                        'weight_block_size': [br, bc]}
        json.dump(c, open(d + '/config.json', 'w'), indent=1)
        write_st(d + '/model.safetensors', ts)
    print('%d matrices quantised to FP8 in blocks of %d x %d' % (count, br, bc))


if __name__ == '__main__':
    main()
