#!/usr/bin/env perl
# LoRA adapters (engine/lora.c: merged into the weights at load, --lora / --lora-scale) against llama.cpp
# (node-llama-cpp 3.21.1), which applies the same adapter GGUF at run time, on stories260K (a llama GGUF:
# q and k rows in llama.cpp's rope pairs):
#  1. a random adapter of rank 4 on every attention and FFN matrix of every layer
#     (tests/parity/make_lora.py), teacher-forced over 48 tokens, at scale 1 and 0.5: our next-token
#     distribution is llama.cpp's, and far from the base model's (the adapter matters);
#  2. the same adapter as a PEFT directory (Hugging Face's q/k row order, permuted at load): the same logits
#     as from the GGUF, and the same greedy text; merged into a GGUF by gen-model --lora, which llama.cpp
#     reads without the adapter to the same greedy ids;
#  3. an adapter of only some matrices (q, v); Q8_0, Q4_0 and (widened) Q4_K_M bases (merged matrices
#     re-quantised to Q8_0, a K-quant one from the file's blocks);
#     and refusals (a DoRA adapter among them): an adapter for another shape, a file that is
#     not an adapter, an adapter of a matrix the model lacks (a layer past its last).
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use Parity qw(capture compare_llamacpp greedy_llamacpp greedy_ours harness slurp);

my ($B, $engine, $dump) = harness();
my $S = '../shared/models/stories260K/stories260K.gguf';
plan skip_all => "$S missing" unless -f $S;

my $dir = tempdir(CLEANUP => 1);
sub run { return Parity::capture($dir, @_) }

# stories260K: dim 64, hidden 172, 5 layers, 8 heads, 4 kv heads
my ($rc) = run('python3', 'tests/parity/make_lora.py', "$dir/ad", 64, 172, 5, 8, 4, 4, 8);
is($rc, 0, 'make_lora.py writes the adapter (GGUF and PEFT)');
($rc) = run('python3', 'tests/parity/make_lora.py', "$dir/qv", 64, 172, 5, 8, 4, 8, 16, 'q,v');
is($rc, 0, 'make_lora.py writes a q, v adapter of rank 8');

my ($rc0, $base_out) = run($engine, 'generate', '--model', $S, '--prompt', 'Once upon a time', '--max-tokens', 48,
                           '--ignore-eos', '--output-ids');
my @ids = (1, split ' ', $base_out); # BOS + the base model's own continuation: a text it finds likely
my $V = 512;
is($rc0, 0, 'the base model generates the text');

for my $scale (1, 0.5) {
    compare_llamacpp(dir => $dir, dump => $dump, label => "adapter gguf, scale $scale", model => $S, ids => \@ids,
                     vocab => $V, lora => "$dir/ad.gguf", lora_scale => $scale, exact => 1, min_top1 => 0.97,
                     max_mean => 2e-4, max_dp => 2e-3);
}
compare_llamacpp(dir => $dir, dump => $dump, label => 'adapter PEFT (ours) vs gguf (llama.cpp)', model => $S,
                 ids => \@ids, vocab => $V, lora => "$dir/ad.gguf", lora_ours => "$dir/ad_peft", exact => 1,
                 min_top1 => 0.97, max_mean => 2e-4, max_dp => 2e-3);
compare_llamacpp(dir => $dir, dump => $dump, label => 'q, v adapter of rank 8', model => $S, ids => \@ids,
                 vocab => $V, lora => "$dir/qv.gguf", exact => 1, min_top1 => 0.97, max_mean => 2e-4,
                 max_dp => 2e-3);

# quantised bases: the adapted matrices are re-quantised to Q8_0 here, llama.cpp adds B A in float at run time
for my $dt (qw(q8_0 q4_0)) {
    ($rc) = run($engine, 'gen-model', '--from', $S, '--dtype', $dt, '--out', "$dir/s260-$dt.gguf");
    is($rc, 0, "stories260K in $dt");
    compare_llamacpp(dir => $dir, dump => $dump, label => "adapter gguf on a $dt base", model => "$dir/s260-$dt.gguf",
                     ids => \@ids, vocab => $V, lora => "$dir/ad.gguf", min_top1 => 0.9, max_mean => 0.02,
                     max_dp => 0.2);
}

# a K-quant base (stories260K widened to 256-wide rows by build/parity/pad_model, Q4_K_M by llama.cpp's quantiser,
# as tests/parity/gguf_quants.t makes it): the adapted matrices are merged from the file's own K-quant blocks
my ($ref, $pad) = ("$B/parity/ggml_ref", "$B/parity/pad_model");
my $libdir = 'bench/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64';
SKIP: {
    skip "$ref / $pad not built", 4 unless -x $ref && -x $pad;
    ($rc) = run($pad, $S, "$dir/wide.gguf");
    my ($rcq) = run($ref, 'quantize', $libdir, "$dir/wide.gguf", "$dir/wide-q4_K_M.gguf", 'q4_K_M');
    my ($rca) = run('python3', 'tests/parity/make_lora.py', "$dir/wad", 256, 256, 5, 8, 4, 4, 8, 'all', 8);
    ok($rc == 0 && $rcq == 0 && $rca == 0, 'widened stories260K in q4_K_M, and an adapter of its shape');
    compare_llamacpp(dir => $dir, dump => $dump, label => 'adapter gguf on a q4_K_M base', ids => \@ids,
                     model => "$dir/wide-q4_K_M.gguf", vocab => $V, lora => "$dir/wad.gguf", min_top1 => 0.9,
                     max_mean => 0.03, max_dp => 0.2);
}

# the adapter matters: without it our logits are far from the adapted ones
open my $fh, '>:raw', "$dir/ids.i32" or die $!;
print $fh pack('l<*', @ids);
close $fh;
my %logits;
for my $k (['base'], ['gguf', '--lora', "$dir/ad.gguf"], ['peft', '--lora', "$dir/ad_peft"]) {
    my ($name, @lora) = @$k;
    ($rc) = run($dump, '--backend', 'cpu', '--model', $S, '--ids', "$dir/ids.i32", '--out', "$dir/$name.f32",
                '--decode', 8, @lora);
    is($rc, 0, "logits: $name");
    $logits{$name} = [ unpack('f<*', slurp("$dir/$name.f32")) ];
}
my ($d_base, $d_peft) = (0, 0);
for my $i (0 .. $#{ $logits{gguf} }) {
    my ($g, $b, $p) = ($logits{gguf}[$i], $logits{base}[$i], $logits{peft}[$i]);
    $d_base = abs($g - $b) if abs($g - $b) > $d_base;
    $d_peft = abs($g - $p) if abs($g - $p) > $d_peft;
}
cmp_ok($d_base, '>', 1, "the adapter moves the logits (max |diff| from the base model $d_base)");
cmp_ok($d_peft, '<', 1e-4, "the PEFT directory and the GGUF give the same logits (max |diff| $d_peft)");

# greedy text: PEFT == GGUF; gen-model --lora merges it into a GGUF llama.cpp reads to the same ids
my @prompt = @ids[0 .. 5];
my ($rc1, $g_gguf) = greedy_ours($dir, $engine, 32, $S, \@prompt, '--lora', "$dir/ad.gguf", '--kv-cache-dtype', 'f32');
my ($rc2, $g_peft) = greedy_ours($dir, $engine, 32, $S, \@prompt, '--lora', "$dir/ad_peft", '--kv-cache-dtype', 'f32');
ok($rc1 == 0 && $rc2 == 0 && @$g_gguf == 32, 'greedy with each adapter file');
is_deeply($g_peft, $g_gguf, 'greedy ids: PEFT directory == GGUF adapter');
($rc) = run($engine, 'gen-model', '--from', $S, '--lora', "$dir/ad.gguf", '--dtype', 'f32', '--out', "$dir/merged.gguf");
is($rc, 0, 'gen-model --lora writes the merged model');
is_deeply(greedy_llamacpp($dir, 32, "$dir/merged.gguf", \@prompt, 1), $g_gguf,
          "llama.cpp on the merged GGUF (no adapter): our adapted greedy ids");

# refusals, each a clear error and no output
($rc, my $out) = run('python3', 'tests/parity/make_lora.py', "$dir/wide", 128, 172, 5, 8, 4);
my @bad = (["$dir/wide.gguf", qr/the adapter is \d+x\d+, the model's matrix/, 'an adapter for another width'],
           [$S, qr/not a LoRA adapter/, 'a model file given as the adapter'],
           ["$dir/nope.gguf", qr/no such adapter/, 'a missing adapter']);
($rc) = run('python3', 'tests/parity/make_lora.py', "$dir/deep", 64, 172, 6, 8, 4);
push @bad, ["$dir/deep.gguf", qr/tensors adapt nothing this model has/, 'an adapter for 6 layers on a 5-layer model'];
# a PEFT DoRA adapter (magnitude vectors beside A and B): refused by its config
mkdir "$dir/dora";
{
    my $cfg = slurp("$dir/ad_peft/adapter_config.json");
    $cfg =~ s/\}\s*$/, "use_dora": true}/;
    open my $o, '>', "$dir/dora/adapter_config.json" or die $!;
    print $o $cfg;
    close $o;
    link "$dir/ad_peft/adapter_model.safetensors", "$dir/dora/adapter_model.safetensors" or die $!;
}
push @bad, ["$dir/dora", qr/DoRA adapters \(use_dora\) are not supported/, 'a DoRA adapter'];
for my $b (@bad) {
    my ($path, $re, $what) = @$b;
    ($rc, $out) = run($engine, 'generate', '--model', $S, '--lora', $path, '--prompt', 'Hi', '--max-tokens', 4);
    my $err = slurp("$dir/stderr");
    ok($rc != 0 && $err =~ $re, "refused: $what") or diag($err);
}
($rc) = run($engine, 'generate', '--model', $S, '--lora-scale', '2', '--prompt', 'Hi', '--max-tokens', 4);
ok($rc != 0 && slurp("$dir/stderr") =~ /--lora-scale needs --lora/, 'refused: --lora-scale alone');

done_testing();
