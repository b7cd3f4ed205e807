#!/usr/bin/env perl
# ModernBERT (GGUF "modern-bert": a pre-norm encoder whose norms are LayerNorms without bias, none before the
# first layer's attention; q|k|v and gate|up fused; GeGLU; NeoX rope with a global base on every third layer
# and a local one on the others, which see a symmetric window) against llama.cpp (node-llama-cpp 3.21.1's
# embedding context, bench/llamacpp/embed.mjs) on gen-model's tiny-modernbert (a window of 16: 8 positions
# each side) in F32, F16, Q8_0 and Q4_0: the same token counts ([CLS] and [SEP] added) and llama.cpp's
# vectors at cosine >= 0.9999 (F32, F16; the quantised files, where each side rounds the activations to 8 bits
# its own way: >= 0.999) for five texts of 3 to 45 tokens (the longer ones reach past the window). Measured:
# 1.000000 (F32, F16), >= 0.99979 (Q8_0), >= 0.99983 (Q4_0); the windowed layers run as global ones: 0.96.
# Re-saved as GGUF it stays the same model; the CPU backend here (the CUDA one: tests/gpu/emu_quick.sh).
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
embed_vs_llamacpp($dir, $engine, 'tiny-modernbert', "$dir/mb", $_) for qw(f32 f16 q8_0 q4_0);
# re-saved (gen-model --from the F32 file --dtype q8_0): the fused tensors, the first layer without its norm,
# the window's pattern and the rope bases go along; llama.cpp on the new file gives our vectors, and they are
# gen-model's own Q8_0 file's bit for bit
{
    my $g = "$dir/mb-resaved.gguf";
    my ($rc) = capture($dir, $engine, 'gen-model', '--from', "$dir/mb-f32.gguf", '--dtype', 'q8_0', '--out', $g);
    my (undef, $o) = capture($dir, $engine, 'embed', '--model', $g, '--input-file', "$dir/in.txt", '--threads', '2',
                             '--no-normalize');
    my (undef, $q) = capture($dir, $engine, 'embed', '--model', "$dir/mb-q8_0.gguf", '--input-file', "$dir/in.txt",
                             '--threads', '2', '--no-normalize');
    my (undef, $l) = capture($dir, 'node', 'bench/llamacpp/embed.mjs', '--model', $g, '--input-file', "$dir/in.txt",
                             '--threads', '2');
    my ($a, $b) = (vectors($o), vectors($l));
    my @x = map { cosine($a->[$_], $b->[$_]) } 0 .. 4;
    ok($rc == 0 && @$a == 5 && min(@x) >= 0.999 && $o eq $q,
       sprintf('re-saved as Q8_0: llama.cpp\'s vectors (cosine >= %.6f), gen-model\'s Q8_0 file\'s bit for bit',
               min(@x)));
}
my ($rc3, $info) = capture($dir, $engine, 'info', '--model', "$dir/mb-f32.gguf");
like($info, qr/8 each side.*LayerNorm without bias.*but layer 0's attention norm.*exact erf gelu.*sliding window 16 on 4 of 6 layers \(rope theta there 10000\)/s,
     'info: the symmetric window, the LayerNorms, the erf GeGLU, the windowed layers and their rope base');
capture($dir, $engine, 'generate', '--model', "$dir/mb-f32.gguf", '--prompt', 'Hi', '--max-tokens', '2');
like(slurp("$dir/stderr"), qr/an embedding model \(modern-bert.*does not generate/, 'generate: refused (an embedding model)');
done_testing();
