#!/usr/bin/env perl
# Long-context rope scalings against llama.cpp (node-llama-cpp 3.21.1) on the same GGUF: a tiny Qwen 2 model
# (F32) re-saved by `gen-model --rope-scaling yarn|linear --rope-factor 4 --rope-orig-ctx 48`, which writes
# llama.cpp's keys (<arch>.rope.scaling.type / factor / original_context_length). Teacher-forced over a
# text of ~60 tokens (past the 48 of the "original" context), our next-token distribution (CPU backend) must
# be llama.cpp's; the unscaled model's, a control, must not.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use Parity qw(capture compare_llamacpp harness);

my ($B, $engine, $dump) = harness(tokenizer => 1);

my $dir = tempdir(CLEANUP => 1);
my $text = 'In 2024 the little robot counted 1234567 stars, then 89 more; "Why?" asked Lily, and it said: '
         . 'because the sky over the old harbour was clear for 3 nights, and the sea was calm and grey and cold.';
my $base = "$dir/q2.gguf";
my ($rc) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-qwen2', '--dtype', 'f32', '--out', $base, '--seed', '11');
is($rc, 0, 'gen-model --preset tiny-qwen2');
my ($rct, $tok) = capture($dir, $engine, 'tokenize', '--model', $base, '--text', $text, '--bos');
my @ids = $tok =~ /(\d+)/g;
ok($rct == 0 && @ids > 48, 'the text is ' . scalar(@ids) . ' tokens, past the original context of 48');

for my $kind (qw(yarn linear)) {
    my $f = "$dir/q2-$kind.gguf";
    ($rc) = capture($dir, $engine, 'gen-model', '--from', $base, '--dtype', 'f32', '--rope-scaling', $kind,
                    '--rope-factor', '4', '--rope-orig-ctx', '48', '--out', $f);
    is($rc, 0, "re-saved with --rope-scaling $kind");
    my (undef, $info) = capture($dir, $engine, 'info', '--model', $f);
    like($info, qr/$kind scaling factor 4/, "$kind: info shows the scaling");
    compare_llamacpp(dir => $dir, dump => $dump, label => "$kind f32", model => $f, ids => \@ids,
                     vocab => 128256, min_top1 => 0.97, max_mean => 0.002, max_dp => 0.02);
}
# the control: llama.cpp on the yarn file against ours on the unscaled one
my $f = "$dir/q2-yarn.gguf";
my (undef, $out) = capture($dir, 'node', 'bench/llamacpp/run.mjs', '--model', $f, '--prompt-tokens', join(',', @ids),
                           '--max-tokens', '1', '--threads', '2', '--probs', '1');
my (undef, $out0) = capture($dir, 'node', 'bench/llamacpp/run.mjs', '--model', $base, '--prompt-tokens',
                            join(',', @ids), '--max-tokens', '1', '--threads', '2', '--probs', '1');
my ($p1) = $out =~ /^\{"probs":(.*)\}$/m;
my ($p0) = $out0 =~ /^\{"probs":(.*)\}$/m;
ok(defined $p1 && defined $p0 && $p1 ne $p0, 'the control: llama.cpp itself scales the yarn file (its probabilities differ from the unscaled file\'s)');
done_testing();
