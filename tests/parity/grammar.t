#!/usr/bin/env perl
# GBNF grammars against llama.cpp's grammar sampler (npm node-llama-cpp@3.21.1, bench/llamacpp/run.mjs
# --grammar-file): on stories260K, greedy decoding held to the same grammar gives the same ids on both sides
# (`generate --grammar-file`; llama.cpp ends with its end-of-generation token where the grammar is complete,
# ours ends there by itself), for grammars with alternatives, repetitions, classes, nesting and a JSON object.
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
my $n = 80;
my $eos = 2;

my %grammars = (
    sentences => <<'G',
root ::= sentence ("." " " sentence)* "."
sentence ::= ("Lily" | "Tom") " " ("was" | "saw") " " [a-z]+ (" " [a-z]+){0,4}
G
    object => <<'G',
root ::= "{" ws "\"name\":" ws name "," ws "\"age\":" ws [0-9]{1,2} ws "}"
name ::= "\"" [A-Za-z ]{1,12} "\""
ws ::= [ ]?
G
    nested => <<'G',
root ::= "(" item (" " item){0,3} ")"
item ::= [a-z]+ | root   # a word, or a list inside
G
    choice => <<'G',
# one of a few answers, then a reason
root ::= ("yes" | "no" | "maybe") ", " ("because" | "since") " " [^.\n]{1,40} "."
G
    dialogue => <<'G',
root ::= line{2,3}
line ::= ("Mom" | "Lily") ": \"" [A-Za-z ,!?']+ "\"\n"
G
);

sub capture { return Parity::capture($dir, @_) }

for my $name (sort keys %grammars) {
    my $file = "$dir/$name.gbnf";
    open my $fh, '>', $file or die "$file: $!";
    print $fh $grammars{$name};
    close $fh;
    for my $prompt ('1,403,407,261,378', '1,365,288,300') {
        my ($rc1, $out) = capture($engine, 'generate', '--model', $gguf, '--prompt-ids', $prompt, '--max-tokens', $n,
            '--threads', '2', '--output-ids', '--grammar-file', $file);
        $out =~ s/\s+$//;
        my @ours = split ' ', $out;
        my ($rc2, $js) = capture('node', $harness, '--model', $gguf, '--prompt-tokens', $prompt, '--max-tokens', $n,
            '--threads', '1', '--json', '--no-warmup', '--stop-at-eos', '--grammar-file', $file);
        my ($line) = grep { /^\{/ } split /\n/, $js;
        my @theirs = defined $line && $line =~ /"ids":\[([0-9,]*)\]/ ? split(/,/, $1) : ();
        pop @theirs if @theirs && $theirs[-1] == $eos;
        pop @ours if @ours && $ours[-1] == $eos;
        ok($rc1 == 0 && $rc2 == 0 && @ours > 0, "$name, prompt $prompt: both ran (" . scalar(@ours) . " ids ours, "
            . scalar(@theirs) . " llama.cpp's)");
        is_deeply(\@ours, \@theirs, "$name, prompt $prompt: the same greedy ids as llama.cpp's grammar sampler");
    }
}

# A grammar llama.cpp's parser refuses is refused here too, with a message.
my $bad = "$dir/bad.gbnf";
open my $fh, '>', $bad or die;
print $fh "root ::= item\n";
close $fh;
my ($rc, $out) = capture($engine, 'generate', '--model', $gguf, '--prompt-ids', '1', '--max-tokens', 4,
    '--grammar-file', $bad);
my $err = do { local $/; open my $e, '<', "$dir/stderr" or die; <$e> };
isnt($rc, 0, 'an undefined rule: generate fails');
like($err, qr/rule 'item' is used but not defined/, 'with a message naming the rule');

done_testing();
