#!/usr/bin/env perl
# gpt-oss (GGUF architecture "gpt-oss"): a file written by `gen-model --preset tiny-gpt-oss` (q, k, v, output
# and router biases; a sink per head that takes part in the softmax's sum; a window of 8 on every other layer,
# the first of each pair; 8 experts of 64 with their own biases, 3 per token weighted by the softmax of their
# logits; the experts' clamped SwiGLU, min(g, 7) * sigmoid(1.702 g) * (clamp(u, -7, 7) + 1); heads of 32, q
# 128 wide over a 64-wide model) loads in llama.cpp (node-llama-cpp 3.21.1) and in our engine, and
#  1. teacher-forced over a 44-token text (longer than the window), our next-token distribution (CPU backend)
#     matches llama.cpp's on the same file (F32, and Q8_0 where both round), the whole text as one prefill
#     step and its last 30 tokens decoded one by one;
#  2. greedy ids are llama.cpp's;
#  3. without its sinks or with the plain SwiGLU the logits move (controls: the check above can fail);
#  4. a file we re-save (gen-model --from) reads in llama.cpp with the same results.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use Parity qw(compare_llamacpp greedy_llamacpp greedy_ours harness);

my ($B, $engine, $dump) = harness(tokenizer => 1);
my $dir = tempdir(CLEANUP => 1);
sub capture { return Parity::capture($dir, @_) }

my $text = 'In 2024 the little robot counted 1234567 stars, then 89 more; "Why?" asked Lily, and it said: '
         . 'because the sky over the old harbour was clear for 3 nights.';
my %f;
for my $dt (qw(f32 q8_0)) {
    $f{$dt} = "$dir/tiny-gpt-oss-$dt.gguf";
    my ($rc) = capture($engine, 'gen-model', '--preset', 'tiny-gpt-oss', '--dtype', $dt, '--out', $f{$dt},
                       '--seed', '5');
    is($rc, 0, "gen-model --preset tiny-gpt-oss --dtype $dt");
}
my ($rci, $info) = capture($engine, 'info', '--model', $f{f32});
like($info, qr/^architecture: gpt-oss\b/m, 'info names the architecture');
like($info, qr/mixture of experts: 8 experts of width 64, 3 per token, softmax weights renormalised over those chosen, with biases$/m,
     'info shows the experts and their biases');
like($info, qr/^ffn swiglu-oai\b/m, 'and the clamped SwiGLU');
like($info, qr/sliding window 8 on 2 of 4 layers/, 'and the window on every other layer');
like($info, qr/attention sinks/, 'and the sinks');

my ($rct, $tok) = capture($engine, 'tokenize', '--model', $f{f32}, '--text', $text, '--bos');
my @ids = $tok =~ /(\d+)/g;
ok($rct == 0 && @ids > 40, 'the text is ' . scalar(@ids) . ' tokens');

compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss f32', model => $f{f32}, ids => \@ids,
                 vocab => 128256, min_top1 => 0.97, max_mean => 0.0005, max_dp => 0.005, exact => 1);
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss f32 decode', model => $f{f32}, ids => \@ids,
                 vocab => 128256, min_top1 => 0.97, max_mean => 0.0005, max_dp => 0.005, decode => 30, exact => 1);
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss q8_0', model => $f{q8_0}, ids => \@ids,
                 vocab => 128256, min_top1 => 0.85, max_mean => 0.04, max_dp => 0.3, exact => 1);

# MXFP4 experts (gpt-oss's own format; the rest Q8_0), made by llama.cpp's quantiser (mxfp4_moe): our loader
# turns each MXFP4 block into Q8_0 without rounding (its power of two is the Q8_0 scale, its values the quants)
my $ref = "$B/parity/ggml_ref";
my $libdir = 'bench/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64';
my $mx = "$dir/tiny-gpt-oss-mxfp4.gguf";
my ($rq) = capture($ref, 'quantize', $libdir, $f{f32}, $mx, 'mxfp4_moe');
is($rq, 0, "llama.cpp quantised it to mxfp4_moe");
my ($rcm, $infom) = capture($engine, 'info', '--model', $mx);
like($infom, qr/converted at load: 96 tensors of type mxfp4 re-quantised to q8_0/, 'its 96 expert matrices are mxfp4');
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss mxfp4', model => $mx, ids => \@ids,
                 vocab => 128256, min_top1 => 0.85, max_mean => 0.04, max_dp => 0.3, exact => 1);
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss mxfp4 decode', model => $mx, ids => \@ids,
                 vocab => 128256, min_top1 => 0.85, max_mean => 0.04, max_dp => 0.3, decode => 30, exact => 1);

# re-saved by us (gen-model --from, F32: the experts' MXFP4 values exactly): llama.cpp reads our file, the same
# tensors and keys, and agrees as on its own
my $back = "$dir/tiny-gpt-oss-mxfp4-f32.gguf";
my ($rb) = capture($engine, 'gen-model', '--from', $mx, '--dtype', 'f32', '--out', $back);
is($rb, 0, 'gen-model --from re-saves it in F32');
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss re-saved f32', model => $back, ids => \@ids,
                 vocab => 128256, min_top1 => 0.97, max_mean => 0.0005, max_dp => 0.005, exact => 1);

# gpt-oss's YaRN rope (tiny-gpt-oss-yarn: 4x over 16 positions; the text runs past them)
my $fy = "$dir/tiny-gpt-oss-yarn-f32.gguf";
my ($ry) = capture($engine, 'gen-model', '--preset', 'tiny-gpt-oss-yarn', '--dtype', 'f32', '--out', $fy, '--seed', '5');
is($ry, 0, 'gen-model --preset tiny-gpt-oss-yarn');
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss-yarn f32', model => $fy, ids => \@ids,
                 vocab => 128256, min_top1 => 0.97, max_mean => 0.0005, max_dp => 0.005, exact => 1);

my $n = 40;
my ($rc1, $a) = greedy_ours($dir, $engine, $n, $f{f32}, \@ids, '--kv-cache-dtype', 'f32');
ok($rc1 == 0 && @$a == $n, "we generate $n ids");
is_deeply($a, greedy_llamacpp($dir, $n, $f{f32}, \@ids, 1), "the same $n greedy ids as llama.cpp");
done_testing();
