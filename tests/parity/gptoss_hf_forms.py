#!/usr/bin/env python3
"""gpt-oss's two Hugging Face forms of the same experts agree as transformers relates them.

Usage: gptoss_hf_forms.py MXFP4_DIR PLAIN_DIR

MXFP4_DIR holds mlp.experts.{gate_up,down}_proj_{blocks,scales} (U8), PLAIN_DIR the unquantised
mlp.experts.{gate_up,down}_proj (F32), both written by `gen-model --format hf` from files with the same expert
values. The blocks are decoded here the way transformers' MXFP4 integration dequantises them
(convert_moe_packed_tensors: FP4 E2M1 codes, the low nibble of byte i first, times 2^(scale - 127), each row's
blocks in order, then the last two dimensions swapped), independently of the engine's C code, and must equal
the plain tensors exactly; the biases of both directories must be equal too. Prints one line per layer and
exits 1 on the first difference.
"""
import json
import struct
import sys

FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def read_st(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in hdr.items():
        if name == '__metadata__':
            continue
        b, e = t['data_offsets']
        out[name] = (t['dtype'], t['shape'], data[b:e])
    return out


def floats(t):
    dtype, shape, buf = t
    assert dtype == 'F32', dtype
    return list(struct.unpack('<%df' % (len(buf) // 4), buf)), shape


def dequant(blocks, scales):
    """[E][R][G][16] bytes and [E][R][G] exponents -> [E][G*32][R] floats (transformers' layout)."""
    _, bshape, bb = blocks
    _, sshape, sb = scales
    E, R, G, B = bshape
    assert B == 16 and sshape == [E, R, G]
    rows = []  # [E*R][G*32]
    for er in range(E * R):
        row = []
        for g in range(G):
            exp = sb[er * G + g] - 127
            for byte in bb[(er * G + g) * 16:(er * G + g + 1) * 16]:
                row.append(FP4[byte & 0x0F] * 2.0 ** exp)
                row.append(FP4[byte >> 4] * 2.0 ** exp)
        rows.append(row)
    cols = G * 32
    out = []  # [E][cols][R]: swap the last two dimensions
    for e in range(E):
        for c in range(cols):
            out.extend(rows[e * R + r][c] for r in range(R))
    return out, [E, cols, R]


def main():
    mx = read_st(sys.argv[1] + '/model.safetensors')
    plain = read_st(sys.argv[2] + '/model.safetensors')
    layers = sorted({int(k.split('.')[2]) for k in mx if k.startswith('model.layers.')})
    checked = 0
    for l in layers:
        p = 'model.layers.%d.mlp.experts.' % l
        for kind in ('gate_up_proj', 'down_proj'):
            got, shape = dequant(mx[p + kind + '_blocks'], mx[p + kind + '_scales'])
            want, wshape = floats(plain[p + kind])
            if shape != wshape or got != want:
                bad = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), None)
                print('layer %d %s: shape %s vs %s, first difference at %s' % (l, kind, shape, wshape, bad))
                return 1
            checked += len(got)
        for b in ('gate_up_proj_bias', 'down_proj_bias'):
            if floats(mx[p + b]) != floats(plain[p + b]):
                print('layer %d %s differs' % (l, b))
                return 1
        print('layer %d: gate_up_proj and down_proj from their MXFP4 blocks equal the unquantised ones, biases too' % l)
    print('%d expert weights equal in %d layers' % (checked, len(layers)))
    return 0 if layers else 1


if __name__ == '__main__':
    sys.exit(main())
