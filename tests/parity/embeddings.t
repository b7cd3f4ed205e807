#!/usr/bin/env perl
# Embeddings against llama.cpp (node-llama-cpp 3.21.1's embedding context, bench/llamacpp/embed.mjs) on the
# same GGUF: a tiny Llama 3 and a tiny Qwen 3 model (F32 and Q8_0) re-saved with `gen-model --pooling last`
# and `--pooling mean` (GGUF <arch>.pooling_type, which llama.cpp pools by), five texts of 1-40 tokens each
# tokenized by each side (BOS as the model asks): `llm-engine embed` (all five in the scheduler at once, steps
# of 16 tokens: chunked prompts) must give llama.cpp's vector, cosine >= 0.9999 for every input; the other
# pooling's vector (a control) must not.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use List::Util qw(min sum);
use lib "$FindBin::Bin/lib";
use Parity qw(capture cosine vectors);

my $B = $ENV{BUILD} // 'build';
my $engine = "$B/llm-engine";
plan skip_all => "$engine not built" unless -x $engine;
plan skip_all => 'llama.cpp harness not installed (npm ci --prefix bench/llamacpp)'
    unless -d 'bench/llamacpp/node_modules/node-llama-cpp';
plan skip_all => '../shared/tokenizers/llama3 missing' unless -f '../shared/tokenizers/llama3/tokenizer.json';

my $dir = tempdir(CLEANUP => 1);
open my $fh, '>', "$dir/in.txt" or die $!;
print $fh "$_\n" for ('A cat.',
                      'The little robot counted 1234567 stars over the old harbour, then 89 more.',
                      'Why?',
                      'Once upon a time there was a girl named Lily who loved to play in the park with her dog, '
                      . 'and every day they ran along the river until the sun went down.',
                      'Embeddings turn text into vectors.');
close $fh;


for my $preset (qw(tiny-llama3 tiny-qwen3)) {
    for my $dt (qw(f32 q8_0)) {
        my $base = "$dir/$preset-$dt.gguf";
        my ($rc) = capture($dir, $engine, 'gen-model', '--preset', $preset, '--dtype', $dt, '--out', $base, '--seed', '5');
        is($rc, 0, "gen-model --preset $preset --dtype $dt");
        my %ours;
        for my $pool (qw(last mean)) {
            my $f = "$dir/$preset-$dt-$pool.gguf";
            ($rc) = capture($dir, $engine, 'gen-model', '--from', $base, '--dtype', $dt, '--pooling', $pool, '--out', $f);
            is($rc, 0, "re-saved with --pooling $pool");
            my ($rc1, $o) = capture($dir, $engine, 'embed', '--model', $f, '--input-file', "$dir/in.txt", '--threads', '2',
                                    '--no-normalize', '--max-batched-tokens', '16');
            my ($rc2, $l) = capture($dir, 'node', 'bench/llamacpp/embed.mjs', '--model', $f, '--input-file',
                                    "$dir/in.txt", '--threads', '2');
            my ($a, $b) = (vectors($o), vectors($l));
            $ours{$pool} = [ $a, $b ];
            ok($rc1 == 0 && $rc2 == 0 && @$a == 5 && @$b == 5, "$preset $dt $pool: five vectors from each side")
                or do { diag(`tail -3 $dir/stderr`); next };
            my @c = map { cosine($a->[$_], $b->[$_]) } 0 .. 4;
            my $tol = $dt eq 'f32' ? 0.9999 : 0.999;
            ok(min(@c) >= $tol, sprintf("$preset $dt $pool pooling: llama.cpp's vectors, cosine %s (>= %s)",
                                        join(' ', map { sprintf '%.6f', $_ } @c), $tol));
        }
        # the control: each side's last-token vector against the other pooling's
        next unless $ours{last} && $ours{mean};
        my @x = map { cosine($ours{mean}[0][$_], $ours{last}[1][$_]) } 0 .. 4;
        ok(min(@x) < 0.99, sprintf("$preset $dt: our mean-pooled vectors are not llama.cpp's last-token ones (min cosine %.3f)",
                                   min(@x)));
    }
}
done_testing();
