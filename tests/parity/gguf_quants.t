#!/usr/bin/env perl
# GGUF files in the types we convert at load (q4_1, q5_0, q5_1, the
# K-quants q2_K .. q6_K and the i-quants iq4_nl / iq4_xs;
# engine/gguf_quants.h), made the way users get them:
# by llama.cpp's own quantiser (llama_model_quantize from node-llama-cpp's
# libllama, through build/parity/ggml_ref).
#  1. ggml's dequantisers and ours give the same values, block for block, and
#     re-quantising to Q8_0 adds little to the file's own rounding error.
#  2. Whole models: teacher-forced over a fixed sequence, our next-token
#     distribution (CPU backend, build/parity/logits_dump) against llama.cpp's
#     on the same file (bench/llamacpp/run.mjs --probs): top-1 agreement and
#     the largest difference in llama.cpp's top-1 probability. The same is
#     measured on the unquantised file as the baseline. Q4_K_M runs both ways
#     on CPUs with the packed kernels: Q4_K from its own blocks (5 bits a
#     weight) and, with LLM_CPU_REPACK=0, converted to Q8_0; so do Q5_K_M,
#     Q6_K, Q3_K_M and Q2_K (Q3_K and Q2_K packed as quants in nibbles with a
#     scale, and for Q2_K a min, per 16).
#  3. Our own Q2_K, Q3_K, Q4_K and Q5_K writers (gen-model --dtype q2_K / q3_K / q4_K / q5_K) against llama.cpp on their
#     files.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use Parity qw(compare_llamacpp);

my $B = $ENV{BUILD} // 'build';
my ($engine, $ref, $pad, $dump) = ("$B/llm-engine", "$B/parity/ggml_ref", "$B/parity/pad_model",
                                   "$B/parity/logits_dump");
my $libdir = 'bench/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64';
my $stories = '../shared/models/stories260K/stories260K.gguf';
plan skip_all => "$ref, $pad, $dump not built (make parity builds them)"
    unless -x $ref && -x $pad && -x $dump && -x $engine;
plan skip_all => 'llama.cpp not installed (npm ci --prefix bench/llamacpp)' unless -f "$libdir/libllama.v0.4.0.so";

my $dir = tempdir(CLEANUP => 1);

sub capture { return Parity::capture($dir, @_) }

# 1. Block by block against ggml.
my ($rc, $tap) = capture($ref, 'dequant', $libdir);
is($rc, 0, 'ggml_ref dequant ran');
for my $line (split /\n/, $tap) {
    next unless $line =~ /^(not ok|ok) \d+ - (.*)$/;
    ok($1 eq 'ok', "dequantise: $2");
}

# 2. Whole models: our softmax of each logits row against llama.cpp's top tokens.
sub compare {
    my ($label, $model, $ids, $vocab, $min_top1, $max_mean, $max_dp) = @_;
    compare_llamacpp(dir => $dir, dump => $dump, label => $label, model => $model, ids => $ids, vocab => $vocab,
                     min_top1 => $min_top1, max_mean => $max_mean, max_dp => $max_dp);
}

sub quantize {
    my ($src, $ftype, $want) = @_;
    my $file = "$dir/" . ($src =~ s{.*/|\.gguf$}{}gr) . "-$ftype.gguf";
    my ($rc) = capture($ref, 'quantize', $libdir, $src, $file, $ftype);
    is($rc, 0, "llama.cpp quantises to $ftype") or return;
    my ($rc2, $info) = capture($engine, 'info', '--model', $file);
    my ($conv) = $info =~ /^converted at load: \d+ tensors of type (.*) re-quantised/m;
    is($rc2, 0, "$ftype: info loads it");
    for my $t (@$want) {
        ok(defined $conv && " $conv " =~ / \Q$t\E /, "$ftype: $t tensors converted at load (" . ($conv // 'none') . ')');
    }
    return $file;
}

# stories260K widened to 256-wide rows (build/parity/pad_model: the same
# logits, and rows llama.cpp K-quantises), over a prompt and its greedy
# continuation on the F32 file.
my $wide = "$dir/stories260K.gguf";
($rc) = capture($pad, $stories, $wide);
is($rc, 0, 'pad_model: stories260K with 256-wide rows');
my ($rcg, $gen) = capture($engine, 'generate', '--model', $wide, '--prompt-ids', '1,403,407,261,378',
                          '--max-tokens', '123', '--threads', '2', '--ignore-eos', '--output-ids');
my @seq = (1, 403, 407, 261, 378, split(' ', $gen));
is(scalar @seq, 128, 'a 128-token sequence');
compare('f32 (baseline)', $wide, \@seq, 512, 0.97, 0.005, 0.002);
# q8_0 is computed natively on both sides: the baseline for quantised weights.
for my $c ([ 'q8_0', [] ], [ 'q4_1', ['q4_1'] ], [ 'q5_0', ['q5_0'] ], [ 'q5_1', ['q5_1'] ], [ 'q2_K', ['q2_K'] ],
           [ 'q3_K_M', ['q3_K'] ], [ 'q4_K_M', [ 'q4_K', 'q6_K' ] ], [ 'q5_K_M', [ 'q5_K', 'q6_K' ] ], [ 'q6_K', ['q6_K'] ],
           [ 'iq4_nl', ['iq4_nl'] ], [ 'iq4_xs', ['iq4_xs'] ]) {
    my $f = quantize($wide, @$c) or next;
    compare($c->[0], $f, \@seq, 512, 0.95, 0.02, 0.1);
    next unless $c->[0] =~ /^q[2-6]_K/;
    # On CPUs with the packed kernels, Q4_K, Q5_K and Q6_K matrices skip
    # Q8_0 and run from their own blocks (CPU_PK_Q4_M, CPU_PK_Q5_M,
    # CPU_PK_Q6), Q3_K as 3-bit quants with a scale per 16 (CPU_PK_Q3), Q2_K
    # as 2-bit ones with a scale and min per 16 (CPU_PK_Q2_M); LLM_CPU_REPACK=0
    # keeps the Q8_0 path.
    my (undef, $gen) = capture($engine, 'generate', '--model', $f, '--prompt-ids', '1', '--max-tokens', '1',
                               '--threads', '2');
    my ($q4k, $q5k, $q6k, $q3k, $q2k) = `cat $dir/stderr` =~ /^prepare: \d+ converted matrices .*; (\d+) of them q4_K.*, (\d+) q5_K.*, (\d+) q6_K.*, (\d+) q3_K.*, (\d+) q2_K/m;
    SKIP: {
        skip 'no packed kernels on this CPU (no VNNI)', 2 unless defined $q4k;
        if ($c->[0] eq 'q4_K_M') {
            ok($q4k > 0 && $q6k > 0 && $q5k == 0 && $q3k == 0, "q4_K_M: $q4k q4_K and $q6k q6_K matrices packed from their blocks");
        } elsif ($c->[0] eq 'q3_K_M') {
            ok($q3k > 0 && $q2k == 0, "q3_K_M: $q3k q3_K matrices packed from their blocks (and $q4k q4_K, $q5k q5_K, $q6k q6_K)");
        } elsif ($c->[0] eq 'q2_K') {
            # llama.cpp's Q2_K mixture keeps Q3_K and Q6_K in some matrices
            ok($q2k > 0 && $q3k > 0, "q2_K: $q2k q2_K and $q3k q3_K matrices packed from their blocks (and $q6k q6_K)");
        } elsif ($c->[0] eq 'q5_K_M') {
            ok($q5k > 0 && $q6k > 0 && $q4k == 0, "q5_K_M: $q5k q5_K and $q6k q6_K matrices packed from their blocks");
        } else {
            ok($q6k > 0 && $q4k == 0, "q6_K: $q6k q6_K matrices packed from their blocks");
        }
        local $ENV{LLM_CPU_REPACK} = '0';
        compare("$c->[0] as q8_0 (LLM_CPU_REPACK=0)", $f, \@seq, 512, 0.95, 0.02, 0.1);
    }
}
# 3. Our own writers (gen-model --dtype q4_K / q5_K / q3_K / q2_K: every matrix whose rows take 256-element
#    blocks, the others q8_0; their blocks are read by ggml as by us, part 1): llama.cpp runs each file as we
#    do, within the bounds of its own files above. Q4_K: a least-squares fit of scale and min per 32; Q5_K the
#    same over 31 steps; Q3_K a least-squares scale per 16 among 16 candidates; Q2_K a least-squares scale
#    and min per 16 among 16 candidate ranges.
for my $k (qw(q4_K q5_K q3_K q2_K)) {
    my $gen = "$dir/wide-gen-$k.gguf";
    ($rc) = capture($engine, 'gen-model', '--from', $wide, '--dtype', $k, '--out', $gen);
    is($rc, 0, "gen-model --dtype $k writes the widened model");
    my (undef, $geninfo) = capture($engine, 'info', '--model', $gen);
    like($geninfo, qr/^converted at load: \d+ tensors of type $k re-quantised/m, "its layer matrices are $k");
    # Q2_K on every matrix (llama.cpp's own Q2_K mixture keeps the output and attn_v wider) flattens the
    # distributions so that the two sides' activation roundings move them more: the largest |dp| is 0.07-0.10
    # on the packed kernels, through the Q8_0 copy and on AVX2 alike, so its bounds are looser.
    my ($mean, $max) = $k eq 'q2_K' ? (0.03, 0.15) : (0.02, 0.1);
    compare("$k by gen-model", $gen, \@seq, 512, 0.95, $mean, $max);
}
done_testing();
