#!/usr/bin/env perl
# Greedy generation on stories260K equals llama2.c run.c's output (ids and
# text), through the llama2.c checkpoint and through the GGUF file.
use strict;
use warnings;
use Test::More;
use JSON::PP;

my $engine = 'build/llm-engine';
my $models = '../shared/models/stories260K';
plan skip_all => "$engine not built" unless -x $engine;

open my $fh, '<:raw', 'tests/parity/llama2c_run_vectors.json' or die $!;
my $vectors = JSON::PP->new->utf8->decode(do { local $/; <$fh> });

my @sources = (
    [ 'llama2.c .bin + tok512.bin', "--model $models/stories260K.bin --tokenizer $models/tok512.bin" ],
    [ 'GGUF',                       "--model $models/stories260K.gguf" ],
);

sub run_engine {
    my ($args) = @_;
    my @cmd = ($engine, 'generate', @$args);
    open my $save, '>&', \*STDERR or die $!;
    open STDERR, '>', '/dev/null' or die $!;   # timing figures are not under test
    open my $out, '-|', @cmd or die "cannot run $engine: $!";
    open STDERR, '>&', $save or die $!;
    binmode $out, ':raw';
    my $text = do { local $/; <$out> };
    close $out;
    return ($? >> 8, $text);
}

for my $src (@sources) {
    my ($label, $model) = @$src;
    for my $v (@$vectors) {
        my $n = scalar @{ $v->{ids} };
        my @base = (split(' ', $model), '--prompt', $v->{prompt}, '--max-tokens', $n,
                    '--temperature', '0', '--threads', '2', '--ignore-eos');
        my ($rc, $ids) = run_engine([ @base, '--output-ids' ]);
        is($rc, 0, "$label: exit status for '$v->{prompt}'");
        $ids =~ s/\s+$//;
        is($ids, join(' ', @{ $v->{ids} }), "$label: $n greedy ids for '$v->{prompt}'");
        my ($rc2, $text) = run_engine(\@base);
        my $want = $v->{text};
        utf8::encode($want);
        $text =~ s/\n\z//;
        is($text, $want, "$label: text for '$v->{prompt}'");
    }
}
done_testing();
