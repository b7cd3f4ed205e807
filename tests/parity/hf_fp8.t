#!/usr/bin/env perl
# Block-wise FP8 Hugging Face checkpoints (quantization_config quant_method fp8, fmt e4m3, weight_block_size:
# Qwen3-*-FP8's layout): each layer matrix F8_E4M3 with its weight_scale_inv per block, dequantised to BF16 at
# load. make_fp8.py writes such a checkpoint from an F32 directory (`gen-model --format hf` of a tiny file, blocks
# of 32 x 48 so that rows and columns end in partial blocks) and, computed on its own in Python, the BF16 twin
# that checkpoint means (code value * scale, rounded to float then to BF16):
#  1. our logits from the FP8 directory are the twin's bit for bit (dense Qwen 3, and Qwen 3 MoE's experts);
#  2. against llama.cpp on the F32 file the FP8 model stays close (its quantisation error only: E4M3 keeps 3
#     mantissa bits, so these random tiny models move more than under Q8_0);
#  3. generate runs it; malformed ones (e5m2, no block size, a missing or misshapen scale, F8 weights without the
#     config, a NaN code) are refused by name.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP qw(decode_json encode_json);
use Parity qw(capture compare_llamacpp edited_copy harness logits_bytes slurp);

my ($B, $engine, $dump) = harness(tokenizer => 1);
my $dir = tempdir(CLEANUP => 1);
my $text = 'In 2024 the little robot counted 1234567 stars, then 89 more; "Why?" asked Lily, and it said: '
         . 'because the sky over the old harbour was clear for 3 nights.';

my %fp8;
for my $preset (qw(tiny-qwen3 tiny-qwen3moe)) {
    my $gguf = "$dir/$preset.gguf";
    my ($rc) = capture($dir, $engine, 'gen-model', '--preset', $preset, '--dtype', 'f32', '--out', $gguf, '--seed', 3);
    ($rc) = capture($dir, $engine, 'gen-model', '--from', $gguf, '--dtype', 'f32', '--format', 'hf', '--out',
                    "$dir/$preset-hf") if $rc == 0;
    my ($rp, $py) = capture($dir, 'python3', "$FindBin::Bin/make_fp8.py", "$dir/$preset-hf", "$dir/$preset-fp8",
                            "$dir/$preset-ref", 32, 48);
    my $n = $preset eq 'tiny-qwen3' ? 14 : 2 * (4 + 1 + 3 * 8);
    ok($rc == 0 && $rp == 0 && $py =~ /^$n matrices quantised to FP8 in blocks of 32 x 48$/m,
       "$preset: an FP8 checkpoint of $n matrices and its BF16 twin") or diag($py, `tail -3 $dir/stderr`);
    my (undef, $info) = capture($dir, $engine, 'info', '--model', "$dir/$preset-fp8");
    like($info, qr/^converted at load: $n FP8 \(e4m3\) matrices dequantised to bf16 with their 32 x 48 blocks' scales$/m,
         "$preset: info counts them");
    my (undef, $tok) = capture($dir, $engine, 'tokenize', '--model', $gguf, '--text', $text, '--bos');
    my @ids = $tok =~ /(\d+)/g;
    my $want = logits_bytes($dir, $dump, "$dir/$preset-ref", \@ids, 16);
    my $got = logits_bytes($dir, $dump, "$dir/$preset-fp8", \@ids, 16);
    ok(length($want) > 1000 && $got eq $want, "$preset: the FP8 directory gives its BF16 twin's logits bit for bit ("
       . scalar(@ids) . ' positions, 16 decoded)') or diag(substr($got, 0, 200));
    compare_llamacpp(dir => $dir, dump => $dump, label => "$preset fp8 against llama.cpp on the F32 file",
                     model => $gguf, ours => "$dir/$preset-fp8", ids => \@ids, vocab => 128256, min_top1 => 0.7,
                     max_mean => 0.1, max_dp => 0.5, exact => 1); # (E4M3's 3 mantissa bits: measured 48 and 40
                                                                  # of 51, mean |dp| 0.065 and 0.042)
    $fp8{$preset} = "$dir/$preset-fp8";
}
system('cp', '../shared/tokenizers/llama3/tokenizer.json', '../shared/tokenizers/llama3/tokenizer_config.json',
       $fp8{'tiny-qwen3'});
my ($rg, $gen) = capture($dir, $engine, 'generate', '--model', $fp8{'tiny-qwen3'}, '--prompt', 'Once upon a time',
                         '--max-tokens', 8, '--output-ids', '--ignore-eos');
my @g = split ' ', $gen;
ok($rg == 0 && @g == 8, 'generate runs the FP8 directory: ' . scalar(@g) . ' ids');

# refused by name
sub bad_copy {
    my ($name, $edit_cfg, $edit_st) = @_;
    return edited_copy($fp8{'tiny-qwen3'}, "$dir/bad-$name", $edit_cfg, $edit_st);
}
my $q = 'model.layers.1.self_attn.q_proj.weight';
for my $b (
    [ 'e5m2', sub { $_[0]{quantization_config}{fmt} = 'e5m2' }, undef, qr/fmt 'e5m2': FP8 weights in e4m3 only/ ],
    [ 'noblock', sub { delete $_[0]{quantization_config}{weight_block_size} }, undef,
      qr/weight_block_size must be \[rows, cols\]/ ],
    [ 'noconfig', sub { delete $_[0]{quantization_config} }, undef,
      qr/is F8_E4M3 but config.json has no fp8 quantization_config/ ],
    [ 'bnb', sub { $_[0]{quantization_config}{quant_method} = 'bitsandbytes' }, undef,
      qr/quant_method 'bitsandbytes' is not supported/ ],
    [ 'noscale', undef, sub { delete $_[0]{"${q}_scale_inv"} },
      qr/FP8 tensor \Q$q\E needs \Q$q\E_scale_inv, F32 or BF16 \[4, 2\]/ ],
    [ 'scaleshape', undef, sub { $_[0]{"${q}_scale_inv"}{shape} = [ 2, 4 ] }, qr/needs \Q$q\E_scale_inv/ ],
    [ 'nan', undef, sub { my ($h, $d) = @_; substr($$d, $h->{$q}{data_offsets}[0] + 5, 1) = "\x7f" },
      qr/FP8 tensor \Q$q\E holds a NaN code/ ],
) {
    my ($name, $ec, $es, $want) = @$b;
    my $d = bad_copy($name, $ec, $es);
    my ($rc) = capture($dir, $engine, 'info', '--model', $d);
    my $msg = slurp("$dir/stderr");
    ok($rc != 0 && $msg =~ $want, "refused ($name): " . (split /\n/, $msg)[-1]);
}
done_testing();
