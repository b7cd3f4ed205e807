#!/usr/bin/env perl
# EmbeddingGemma (GGUF "gemma-embedding": Gemma 3's layers without the causal mask, its sliding window made
# symmetric, mean pooling, then sentence-transformers' Dense modules dense_2 / dense_3) against llama.cpp
# (node-llama-cpp 3.21.1's embedding context, bench/llamacpp/embed.mjs) on gen-model's tiny-embeddinggemma
# (a window of 16: 8 positions each side, on five layers of six) in F32, F16 and Q8_0: the same token counts
# and llama.cpp's vectors at cosine >= 0.9999 (F32, F16; Q8_0, where each side rounds the activations to
# 8 bits its own way: >= 0.999) for five texts of 3 to 45 tokens (the longer ones reach past the window);
# the CPU backend only (the CUDA backend refuses the model with a message). Re-saved as GGUF and as a Hugging
# Face directory (sentence-transformers' layout) it stays the same model.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use List::Util qw(min);
use lib "$FindBin::Bin/lib";
use Parity qw(capture cosine embed_vs_llamacpp slurp vectors write_texts);

my $B = $ENV{BUILD} // 'build';
my $engine = "$B/llm-engine";
plan skip_all => "$engine not built" unless -x $engine;
plan skip_all => 'llama.cpp harness not installed (npm ci --prefix bench/llamacpp)'
    unless -d 'bench/llamacpp/node_modules/node-llama-cpp';

my $dir = tempdir(CLEANUP => 1);
write_texts("$dir/in.txt");
embed_vs_llamacpp($dir, $engine, 'tiny-embeddinggemma', "$dir/eg", $_) for qw(f32 f16 q8_0);
# re-saved (gen-model --from the F32 file --dtype q8_0): the architecture, window, rope bases and Dense modules
# go along; llama.cpp on the new file gives our vectors, and they are the F32 file's
{
    my $g = "$dir/eg-resaved.gguf";
    my ($rc) = capture($dir, $engine, 'gen-model', '--from', "$dir/eg-f32.gguf", '--dtype', 'q8_0', '--out', $g);
    my (undef, $o) = capture($dir, $engine, 'embed', '--model', $g, '--input-file', "$dir/in.txt", '--threads', '2',
                             '--no-normalize');
    my (undef, $f) = capture($dir, $engine, 'embed', '--model', "$dir/eg-f32.gguf", '--input-file', "$dir/in.txt",
                             '--threads', '2', '--no-normalize');
    my (undef, $l) = capture($dir, 'node', 'bench/llamacpp/embed.mjs', '--model', $g, '--input-file', "$dir/in.txt",
                             '--threads', '2');
    my ($a, $b, $c) = (vectors($o), vectors($l), vectors($f));
    my @x = map { cosine($a->[$_], $b->[$_]) } 0 .. 4;
    my @y = map { cosine($a->[$_], $c->[$_]) } 0 .. 4;
    ok($rc == 0 && @$a == 5 && min(@x) >= 0.999 && min(@y) >= 0.999,
       sprintf('re-saved as Q8_0: llama.cpp\'s vectors (cosine >= %.6f) and the F32 file\'s (>= %.6f)', min(@x),
               min(@y)));
}
# as a Hugging Face directory (sentence-transformers' layout: a bare Gemma3TextModel with
# use_bidirectional_attention, 1_Pooling, 2_Dense, 3_Dense, modules.json) and loaded from it: the same vectors
my ($rc5) = capture($dir, $engine, 'gen-model', '--from', "$dir/eg-f32.gguf", '--dtype', 'f32', '--format', 'hf',
                    '--out', "$dir/eg-hf");
my @tok = ('--tokenizer', '../shared/tokenizers/llama3');
my (undef, $hv) = capture($dir, $engine, 'embed', '--model', "$dir/eg-hf", @tok, '--input-file', "$dir/in.txt",
                          '--threads', '2');
my (undef, $gv) = capture($dir, $engine, 'embed', '--model', "$dir/eg-f32.gguf", '--input-file', "$dir/in.txt",
                          '--threads', '2');
ok($rc5 == 0 && $hv ne '' && $hv eq $gv && -f "$dir/eg-hf/2_Dense/model.safetensors",
   '--format hf: a Gemma3TextModel directory with its Dense modules, read back to the same vectors bit for bit');
open my $dc, '>', "$dir/eg-hf/2_Dense/config.json" or die $!;
print $dc '{"in_features": 64, "out_features": 256, "bias": true}';
close $dc;
capture($dir, $engine, 'info', '--model', "$dir/eg-hf");
like(slurp("$dir/stderr"), qr/a Dense module with a bias or an activation is not supported/,
     'a Dense module with a bias: refused with a message');
my ($rc3, $info) = capture($dir, $engine, 'info', '--model', "$dir/eg-f32.gguf");
like($info, qr/bidirectional attention \(sliding windows symmetric, 8 each side\).*Dense 64 -> 256 -> 64/s,
     'info: bidirectional, the symmetric window, the Dense modules');
my ($rc4) = capture($dir, $engine, 'generate', '--model', "$dir/eg-f32.gguf", '--prompt', 'Hi', '--max-tokens', '2');
like(slurp("$dir/stderr"), qr/an embedding model \(gemma-embedding.*does not generate/,
     'generate: refused (an embedding model)');
done_testing();
