#!/usr/bin/env perl
# Qwen 2 (q/k/v biases) and Qwen 3 (per-head q/k RMSNorm, head_dim not
# dim / heads), both rotating halves (NeoX): GGUF files of those
# architectures written by `gen-model --preset tiny-qwen2|tiny-qwen3` load in
# llama.cpp (node-llama-cpp 3.21.1) and in our engine, and
#  1. teacher-forced over a text, our next-token distribution (CPU backend)
#     matches llama.cpp's on the same file (F32, and Q8_0 where both round);
#  2. greedy ids are llama.cpp's;
#  3. the text is cut into tokens as llama.cpp cuts it (Qwen 2's pre-tokenizer:
#     digits one by one);
#  4. the model re-saved as a Hugging Face directory (config.json model_type,
#     q_proj.bias / q_norm tensors) and back to GGUF gives the same ids.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use Parity qw(compare_llamacpp greedy_llamacpp greedy_ours harness hf_round_trip slurp);

my ($B, $engine, $dump) = harness(tokenizer => 1);

my $dir = tempdir(CLEANUP => 1);
sub capture { return Parity::capture($dir, @_) }

my $text = 'In 2024 the little robot counted 1234567 stars, then 89 more; "Why?" asked Lily, and it said: '
         . 'because the sky over the old harbour was clear for 3 nights.';
my $n = 40;

# Greedy ids after the prompt ids (the Hugging Face directories we write carry no tokenizer).
sub ours_ids { return greedy_ours($dir, $engine, $n, @_) }
sub llamacpp_ids { return greedy_llamacpp($dir, $n, @_) }

for my $arch (qw(qwen2 qwen3)) {
    my %f;
    for my $dt (qw(f32 q8_0)) {
        $f{$dt} = "$dir/tiny-$arch-$dt.gguf";
        my ($rc) = capture($engine, 'gen-model', '--preset', "tiny-$arch", '--dtype', $dt, '--out', $f{$dt},
                           '--seed', '11');
        is($rc, 0, "gen-model --preset tiny-$arch --dtype $dt");
    }
    my ($rc, $info) = capture($engine, 'info', '--model', $f{f32});
    like($info, qr/^architecture: $arch\b/m, "$arch: info names the architecture");
    like($info, $arch eq 'qwen2' ? qr/attn_q\.bias/ : qr/attn_q_norm/, "$arch: info lists its extra tensors");
    like($info, qr/layout half/, "$arch: rotates halves");

    # 3. Tokens of the text (BOS first, as both prepend it).
    my ($rct, $tok) = capture($engine, 'tokenize', '--model', $f{f32}, '--text', $text, '--bos');
    my @ids = $tok =~ /(\d+)/g;
    ok($rct == 0 && @ids > 30, "$arch: the text is " . scalar(@ids) . " tokens");
    my (undef, $lc) = capture('node', 'bench/llamacpp/run.mjs', '--model', $f{f32}, '--prompt', $text,
                              '--max-tokens', '1', '--threads', '1', '--json', '--no-warmup');
    my ($np) = $lc =~ /"n_prompt":(\d+)/;
    is($np, scalar @ids, "$arch: llama.cpp cuts the text into as many tokens");
    ok(scalar(grep { $_ == 16 || $_ == 17 || $_ == 18 || $_ == 19 } @ids) >= 4,
       "$arch: digits one by one (Qwen 2's pre-tokenizer)");

    # 1. Next-token distributions, teacher-forced.
    compare_llamacpp(dir => $dir, dump => $dump, label => "$arch f32", model => $f{f32}, ids => \@ids,
                     vocab => 128256, min_top1 => 0.97, max_mean => 0.002, max_dp => 0.02);
    compare_llamacpp(dir => $dir, dump => $dump, label => "$arch q8_0", model => $f{q8_0}, ids => \@ids,
                     vocab => 128256, min_top1 => 0.9, max_mean => 0.02, max_dp => 0.2);

    # 2. Greedy ids.
    my ($rc1, $a) = ours_ids($f{f32}, \@ids);
    ok($rc1 == 0 && @$a == $n, "$arch: we generate $n ids");
    is_deeply($a, llamacpp_ids($f{f32}, \@ids), "$arch: the same $n greedy ids as llama.cpp");

    # 4. Hugging Face directory and back.
    hf_round_trip(dir => $dir, engine => $engine, label => $arch, model => $f{f32}, ids => \@ids, want => $a,
                  check => sub {
        like(slurp("$_[0]/config.json"), qr/"model_type":\s*"$arch"/, "$arch: config.json says model_type $arch");
    });
}
done_testing();
