#!/usr/bin/env perl
# GGUF files written by `llm-engine gen-model` load in llama.cpp (npm
# node-llama-cpp@3.21.1, bench/llamacpp/run.mjs) and in our engine; on the
# stories260K weights re-saved as F16 and Q8_0 both give the same greedy ids.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use Parity;

my $engine = 'build/llm-engine';
my $harness = 'bench/llamacpp/run.mjs';
my $gguf = '../shared/models/stories260K/stories260K.gguf';
plan skip_all => "$engine not built" unless -x $engine;
plan skip_all => 'llama.cpp harness not installed (npm ci --prefix bench/llamacpp)'
    unless -d 'bench/llamacpp/node_modules/node-llama-cpp';

my $dir = tempdir(CLEANUP => 1);
my $prompt = '1,403,407,261,378';
my $n = 100;

sub capture { return Parity::capture($dir, @_) }   # stderr (timing figures, llama.cpp logs) into $dir/stderr

sub ours {
    my ($model) = @_;
    my ($rc, $out) = capture($engine, 'generate', '--model', $model, '--prompt-ids', $prompt,
        '--max-tokens', $n, '--threads', '2', '--ignore-eos', '--output-ids');
    $out =~ s/\s+$//;
    return ($rc, [ split ' ', $out ]);
}

sub llamacpp {
    my ($model) = @_;
    my ($rc, $out) = capture('node', $harness, '--model', $model, '--prompt-tokens', $prompt,
        '--max-tokens', $n, '--threads', '1', '--json', '--no-warmup');   # llama.cpp's defaults (flash attention auto)
    my ($line) = grep { /^\{/ } split /\n/, $out;
    my @ids = defined $line && $line =~ /"ids":\[([0-9,]*)\]/ ? split(/,/, $1) : ();
    return ($rc, \@ids);
}

# Same greedy tokens on the real weights, re-saved by our writer.
for my $dt (qw(f16 q8_0)) {
    my $file = "$dir/stories260K-$dt.gguf";
    my ($rc) = capture($engine, 'gen-model', '--from', $gguf, '--dtype', $dt, '--out', $file);
    is($rc, 0, "gen-model --from stories260K.gguf --dtype $dt");
    my ($rc1, $a) = ours($file);
    my ($rc2, $b) = llamacpp($file);
    is($rc1, 0, "$dt: our engine runs");
    is($rc2, 0, "$dt: llama.cpp loads and runs");
    is(scalar @$a, $n, "$dt: we generated $n ids");
    is_deeply($a, $b, "$dt: same $n greedy ids as llama.cpp");
}

# Every dtype that gen-model writes loads in llama.cpp and in ours.
for my $dt (qw(f32 f16 bf16 q8_0 q4_0)) {
    my $file = "$dir/tiny-$dt.gguf";
    my ($rc) = capture($engine, 'gen-model', '--preset', 'tiny', '--dtype', $dt, '--out', $file, '--seed', '7');
    is($rc, 0, "gen-model --preset tiny --dtype $dt");
    my ($rc1, $a) = ours($file);
    my ($rc2, $b) = llamacpp($file);
    ok($rc1 == 0 && @$a == $n, "tiny $dt: our engine loads it and generates $n tokens");
    ok($rc2 == 0 && @$b == $n, "tiny $dt: llama.cpp loads it and generates $n tokens");
    my $same = 0;
    for my $i (0 .. $n - 1) { last unless defined $a->[$i] && defined $b->[$i] && $a->[$i] == $b->[$i]; $same++ }
    diag("tiny $dt (random weights): first $same of $n greedy ids agree with llama.cpp");
}
done_testing();
