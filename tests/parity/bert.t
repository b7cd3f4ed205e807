#!/usr/bin/env perl
# BERT encoders against llama.cpp (node-llama-cpp 3.21.1's embedding context, bench/llamacpp/embed.mjs) on the
# same GGUF: gen-model's tiny-bert (mean pooling), tiny-bert-cls (CLS pooling), tiny-nomic-bert (nomic-bert:
# rope positions, fused q|k|v, SwiGLU, no biases; mean pooling), tiny-xlm-r (XLM-RoBERTa: one token type,
# a Unigram vocabulary) and tiny-jina-bert (jina-bert-v2: ALiBi with six heads, so both of its slope formulas,
# and a GELU-gated FFN; measured 1.000000 in F32, 0.99996 in Q8_0; the slopes of a power-of-two head count for
# all six heads give 0.994, no ALiBi 0.992) in F32, F16, Q8_0 and Q4_0,
# whose WordPiece vocabulary each side tokenizes itself (lowercasing, punctuation split, unknown words, CJK,
# accents; tiny-xlm-r's inputs go to llama.cpp as our ids, <s> ... </s>, since node-llama-cpp leaves a
# Unigram vocabulary's BOS out: its tokenizer is checked by unigram.t): the same number of tokens, and
# `llm-engine embed` (five texts in the scheduler at once, each
# input computed in one step: every token sees the whole input) must give llama.cpp's vectors, cosine >= 0.9999
# for every input; the other pooling's vector (a control) must not. A cross-encoder, tiny-xlm-r-rerank (XLM-R's
# classification head: dense, tanh, out_proj), scores three documents against a query (`llm-engine embed --query`,
# each pair <s> query </s></s> document </s>) as llama.cpp's rank pooling scores the same ids, within 0.01 (its
# KV cache holds F16); the pair with one </s> between the texts (BERT's way) scores differently.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use List::Util qw(min);
use lib "$FindBin::Bin/lib";
use Parity qw(capture cosine vectors);

my $B = $ENV{BUILD} // 'build';
my $engine = "$B/llm-engine";
plan skip_all => "$engine not built" unless -x $engine;
plan skip_all => 'llama.cpp harness not installed (npm ci --prefix bench/llamacpp)'
    unless -d 'bench/llamacpp/node_modules/node-llama-cpp';

my $dir = tempdir(CLEANUP => 1);
open my $fh, '>:utf8', "$dir/in.txt" or die $!;
print $fh "$_\n" for ('A cat sat on the mat.',
                      'The little robot counted 1234567 stars over the old harbour, then 89 more!',
                      'Why?',
                      'Once upon a time there was a girl named Lily who loved to play in the park.',
                      "CAF\x{c9} r\x{e9}sum\x{e9} na\x{ef}ve \x{2014} \x{201c}quoted\x{201d} text\x{2026} \x{6771}\x{4eac} and "
                      . "zzqx xyzzy!\ttabs");
close $fh;
sub ids_file { # our ids of each input line, <s> ... </s> (XLM-R's 0 and 2), for embed.mjs --input-ids
    my ($f) = @_;
    open my $in, '<', "$dir/in.txt" or die $!;
    open my $out, '>', "$dir/ids.txt" or die $!;
    while (my $line = <$in>) {
        chomp $line;
        my (undef, $ids) = capture($dir, $engine, 'tokenize', '--tokenizer', $f, '--text', $line);
        $ids =~ s/^\[|\]\s*$//g;
        print $out join(',', 0, ($ids eq '' ? () : $ids), 2), "\n";
    }
    close $out;
    return "$dir/ids.txt";
}

for my $dt (qw(f32 f16 q8_0 q4_0)) {
    my %v;
    for my $preset (qw(tiny-bert tiny-bert-cls tiny-nomic-bert tiny-xlm-r tiny-jina-bert)) {
        my $f = "$dir/$preset-$dt.gguf";
        my ($rc) = capture($dir, $engine, 'gen-model', '--preset', $preset, '--dtype', $dt, '--out', $f, '--seed', '5');
        is($rc, 0, "gen-model --preset $preset --dtype $dt");
        my ($rc1, $o) = capture($dir, $engine, 'embed', '--model', $f, '--input-file', "$dir/in.txt", '--threads', '2',
                                '--no-normalize');
        my ($ours_tokens) = `cat $dir/stderr` =~ /\((\d+) tokens/;
        my @in = $preset =~ /xlm-r/ ? ('--input-ids', ids_file($f)) : ('--input-file', "$dir/in.txt");
        my ($rc2, $l) = capture($dir, 'node', 'bench/llamacpp/embed.mjs', '--model', $f, @in, '--threads', '2');
        my ($a, $b) = (vectors($o), vectors($l));
        my ($lc) = $l =~ /"tokens":(\d+)/;
        ok($rc1 == 0 && $rc2 == 0 && @$a == 5 && @$b == 5, "$preset $dt: five vectors from each side") or next;
        is($ours_tokens, $lc, "$preset $dt: the same number of tokens as llama.cpp's tokenizer ($lc)");
        my @c = map { cosine($a->[$_], $b->[$_]) } 0 .. 4;
        ok(min(@c) >= 0.9999, sprintf("$preset $dt: llama.cpp's vectors, cosine %s (>= 0.9999)",
                                      join(' ', map { sprintf '%.6f', $_ } @c)));
        $v{$preset} = [ $a, $b ];
    }
    next unless $v{'tiny-bert'} && $v{'tiny-bert-cls'};
    my @x = map { cosine($v{'tiny-bert'}[0][$_], $v{'tiny-bert-cls'}[1][$_]) } 0 .. 4;
    ok(min(@x) < 0.99, sprintf("$dt: our mean-pooled vectors are not llama.cpp's CLS ones (min cosine %.3f)", min(@x)));
}
{
    my $f = "$dir/tiny-xlm-r-rerank.gguf";
    my ($rc) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-xlm-r-rerank', '--dtype', 'f32', '--out', $f,
                       '--seed', '13');
    is($rc, 0, 'gen-model --preset tiny-xlm-r-rerank');
    my @docs = ('a cat sat on the mat', 'the sun is hot', "cats and dogs \x{2460}\x{ff01}");
    open my $d, '>:utf8', "$dir/docs.txt" or die $!;
    print $d "$_\n" for @docs;
    close $d;
    my ($rc1, $o) = capture($dir, $engine, 'embed', '--model', $f, '--query', 'a cat', '--input-file', "$dir/docs.txt");
    my @ours = map { /^\[([-0-9.e]+)\]$/ ? $1 : () } split /\n/, $o;
    my $ids = sub {
        my ($t) = @_;
        utf8::encode($t);
        my (undef, $x) = capture($dir, $engine, 'tokenize', '--tokenizer', $f, '--text', $t);
        $x =~ s/^\[|\]\s*$//g;
        return $x;
    };
    my $q = $ids->('a cat');
    for my $seps (2, 1) {
        open my $out, '>', "$dir/pairs.txt" or die $!;
        print $out join(',', 0, $q, (2) x $seps, $ids->($_), 2), "\n" for @docs;
        close $out;
        my ($rc2, $l) = capture($dir, 'node', 'bench/llamacpp/embed.mjs', '--model', $f, '--input-ids', "$dir/pairs.txt",
                                '--threads', '2');
        my @ref = map { /^\[([-0-9.e]+)\]$/ ? $1 : () } split /\n/, $l;
        ok($rc1 == 0 && $rc2 == 0 && @ours == 3 && @ref == 3, "xlm-r rerank ($seps </s>): three scores each side")
            or next;
        my $worst = 0;
        for (0 .. 2) { my $e = abs($ours[$_] - $ref[$_]); $worst = $e if $e > $worst }
        my $what = sprintf('ours %s, llama.cpp %s', join(' ', map { sprintf '%.4f', $_ } @ours),
                           join(' ', map { sprintf '%.4f', $_ } @ref));
        if ($seps == 2) {
            ok($worst <= 0.01, "xlm-r rerank: llama.cpp's scores of the pairs <s> q </s></s> d </s> ($what)");
        } else {
            ok($worst > 0.01, "xlm-r rerank, control: not those of <s> q </s> d </s> ($what)");
        }
    }
}
done_testing();
