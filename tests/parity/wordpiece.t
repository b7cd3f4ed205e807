#!/usr/bin/env perl
# The WordPiece tokenizer (engine/tokenizer_wpm.c) against llama.cpp's "bert" vocabulary (node-llama-cpp 3.21.1,
# bench/llamacpp/tokenize.mjs) on gen-model's tiny-bert GGUF (the vocabulary llm_gguf_w_wpm_from_llama2c derives
# from tok512.bin): the same ids for hand-picked texts (punctuation, symbols, CJK, whitespace and control
# characters, accents, Greek, Cyrillic, special-token text) and random strings over those classes, both with
# special-token text left as text and parsed (`llm-engine tokenize --special`).
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
my $f = "$dir/tiny-bert.gguf";
my ($rc) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-bert', '--dtype', 'f32', '--out', $f);
is($rc, 0, 'gen-model --preset tiny-bert') or BAIL_OUT('no model');

my @texts = ('Hello world, playing! Once upon a time', 'HELLO World', 'She said, "Don\'t go!"', 'a+b=c x<y>z',
             'email@example.com http://example.com/a?b=c', "tabs\tand\ttabs\nline two\r\nthree", '', ' ',
             "Caf\x{e9} na\x{ef}ve r\x{e9}sum\x{e9} CAF\x{c9} cafe\x{301}", "\x{3a0}\x{391}\x{3a1}\x{391} \x{3ac}\x{3bb}",
             "\x{41f}\x{420}\x{418}\x{412}\x{415}\x{422} \x{451}\x{43b}\x{43a}\x{430} \x{439}\x{43e}\x{434}",
             "\x{4f60}\x{597d}world\x{4e16}\x{754c}", "\x{300c}\x{3053}\x{3093}\x{300d}\x{3001}\x{3002}",
             "em\x{2014}dash en\x{2013}dash\x{2026} \x{ab}q\x{bb} \x{bf}qu\x{e9}? \x{a1}s\x{ed}!",
             "a\x{a0}b\x{2003}c\x{3000}d\x{2028}e\x{85}f", "zero\x{200b}width soft\x{ad}hyphen bom\x{feff}x",
             "ctrl\x{1}char\x{7f}del priv\x{e000}ate \x{fffd}", "emoji \x{1f600} \x{a9}2024 \x{2122} \x{b0}",
             '[CLS] hello [SEP]', '[CLS]hello[SEP]world', '[MASK] is [UNK] [PAD]', "Vi\x{1ec7}t Nam \x{1e9e}",
             "\x{1c5}ungla \x{1d5}", "fullwidth\x{ff01}\x{ff04}\x{ff0b}\x{ff21}", 'timmy\'s big red ball 1,234.56 $5',
             "\x{2044}frac\x{2052}minus \x{3012}post", "under_score back\\slash pipe|tilde~caret^grave`");
my @pool = ((map { chr } 0x20 .. 0x7e, 0x61 .. 0x7a, 0x61 .. 0x7a, 0xa0 .. 0x24f, 0x370 .. 0x52f, 0x2010 .. 0x205e,
             0x3000 .. 0x303f, 0xff01 .. 0xff5e, 0x300 .. 0x36f, 0x1e00 .. 0x1eff),
            (' ') x 20, "\t", "\n", "\r", "\x{a0}", "\x{3000}", "\x{2028}", "\x{85}", "\x{b}", "\x{1c}", "\x{1}",
            "\x{200b}", "\x{feff}", "\x{e000}", "\x{1f600}", "\x{4f60}", "\x{597d}", "\x{ac00}", "\x{627}", "\x{64b}",
            "\x{915}", "\x{93f}", "\x{304c}", "\x{3099}", '[CLS]', '[SEP]', '[MASK]', '[UNK]', 'the', 'lily', 'play',
            'ing', 'Once');
my $seed = 12345;
sub rnd { $seed = ($seed * 1103515245 + 12345) % 2147483648; return $seed % $_[0] }
for (1 .. 300) {
    my $n = 1 + rnd(30);
    push @texts, join '', map { $pool[rnd(scalar @pool)] } 1 .. $n;
}

compare_tokenizer($dir, $engine, $f, \@texts);
done_testing();
