#!/usr/bin/env perl
# The Unigram tokenizer (engine/tokenizer_ugm.c) against llama.cpp's "t5" vocabulary (UGM; node-llama-cpp
# 3.21.1, bench/llamacpp/tokenize.mjs) on gen-model's tiny-xlm-r GGUF (the XLM-RoBERTa-style vocabulary and
# precompiled charsmap that llm_gguf_w_ugm_from_llama2c writes): the same ids for hand-picked texts (the
# charsmap's rules: fullwidth forms, ligatures, circled digits, combining accents, odd spaces, a dropped
# zero-width space; runs of spaces, leading and trailing spaces, unknown characters, special-token text) and
# random strings over those classes, with special-token text left as text and parsed (`--special`).
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use Parity qw(capture compare_tokenizer);

my $B = $ENV{BUILD} // 'build';
my $engine = "$B/llm-engine";
plan skip_all => "$engine not built" unless -x $engine;
plan skip_all => 'llama.cpp harness not installed (npm ci --prefix bench/llamacpp)'
    unless -d 'bench/llamacpp/node_modules/node-llama-cpp';

my $dir = tempdir(CLEANUP => 1);
my $f = "$dir/tiny-xlm-r.gguf";
my ($rc) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-xlm-r', '--dtype', 'f32', '--out', $f);
is($rc, 0, 'gen-model --preset tiny-xlm-r') or BAIL_OUT('no model');

my @texts = ('Hello world', 'Once upon a time, there was a little girl named Lily.', '  two  leading, trailing  ',
             "tabs\tand\ttabs\nline two\r\nthree", '', ' ', "\t\n", 'a', '.', '...',
             "Caf\x{e9} cafe\x{301} na\x{ef}ve u\x{308}ber man\x{303}ana a\x{300} e\x{301}e\x{301}",
             "\x{ff28}\x{ff25}\x{ff2c}\x{ff2c}\x{ff2f} \x{ff57}\x{ff4f}\x{ff52}\x{ff4c}\x{ff44}\x{ff01}",
             "\x{fb01}ne \x{fb02}ow of\x{fb01}ce", "\x{2460}\x{2461}\x{2462} step\x{2468}", "wait\x{2026} what\x{2026}",
             "\x{bd} cup, \x{212b}ngstr\x{f6}m", "\x{ff76}\x{30ab} \x{30ab}", "zero\x{200b}width \x{200b} x",
             "a\x{a0}b\x{2002}c\x{3000}d", "\x{65e5}\x{672c}\x{8a9e} \x{65e5}\x{672c} \x{4e2d}\x{6587}",
             "\x{43f}\x{440}\x{438}\x{432}\x{435}\x{442} \x{43f}\x{440}", "emoji \x{1f600}\x{1f600} \x{a9} \x{2122}",
             '<s>Hello</s>', '<s> <pad> </s> <unk> <mask>', '<mask>is<unk>', 'timmy\'s big red ball 1,234.56 $5',
             "\x{ff21}\x{301}", "e\x{301}\x{301}", "\x{301}lone mark", "x\x{fb01}\x{fb01}\x{2026}\x{2026}y", "\x{3a9}he \x{3a9}h \x{3a9}\x{3a9}he");
my @pool = ((map { chr } 0x20 .. 0x7e, 0x61 .. 0x7a, 0x61 .. 0x7a, 0xa0 .. 0xff, 0x400 .. 0x44f, 0xff01 .. 0xff5e,
             0x2460 .. 0x246a, 0x3040 .. 0x30ff),
            (' ') x 30, "\t", "\n", "\r", "\x{a0}", "\x{3000}", "\x{2002}", "\x{200b}", "\x{fb01}", "\x{fb02}",
            "\x{2026}", "\x{bd}", "\x{212b}", "\x{ff76}", "\x{301}", "\x{300}", "\x{308}", "\x{303}", "\x{1f600}",
            "\x{65e5}", "\x{672c}", "\x{8a9e}", "\x{3a9}h", "\x{3a9}he", '<s>', '</s>', '<unk>', '<mask>', '<pad>', 'the', 'lily', 'play',
            'ing', 'Once', 'e', 'a', 'u', 'n');
my $seed = 4242;
sub rnd { $seed = ($seed * 1103515245 + 12345) % 2147483648; return $seed % $_[0] }
for (1 .. 300) {
    my $n = 1 + rnd(30);
    push @texts, join '', map { $pool[rnd(scalar @pool)] } 1 .. $n;
}

my $ref = compare_tokenizer($dir, $engine, $f, \@texts);
my $unk = grep { grep { $_ == 3 } @{ $_->{ids} } } @$ref;
ok($unk > 10, "$unk texts have unknown characters (the unknown path is exercised)");
done_testing();
