#!/usr/bin/env perl
# SentencePiece's own model files (tokenizer.model, engine/tokenizer_load_spm_model.c) against SentencePiece itself
# (Debian's python3-sentencepiece) and llama.cpp (node-llama-cpp 3.21.1): a BPE model (byte fallback, the identity
# normalization, whitespace kept: Llama's kind) and a Unigram one (the default nmt_nfkc normalization, whitespace
# folded), trained here on the repository's docs, and a BPE model with the default normalization, whose rules are left
# out as llama.cpp's converter leaves them (llama.cpp's ids only). For hand-picked and random texts: our ids from the
# .model file are SentencePiece's; the vocabulary written into a GGUF (`gen-model --tokenizer X.model`) is read by
# llama.cpp to the same ids; a Hugging Face directory with tokenizer.model and tokenizer_config.json (no
# tokenizer.json) loads with its BOS and chat template and re-saves as GGUF to the same ids. Truncated and garbage
# files are refused with a message.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use File::Copy qw(copy);
use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP;
use Parity qw(capture compare_tokenizer slurp);

my $B = $ENV{BUILD} // 'build';
my $engine = "$B/llm-engine";
plan skip_all => "$engine not built" unless -x $engine;
plan skip_all => 'llama.cpp harness not installed (npm ci --prefix bench/llamacpp)'
    unless -d 'bench/llamacpp/node_modules/node-llama-cpp';
my ($py) = grep { system($_, '-c', 'import sentencepiece') == 0 } ('python3', '/usr/bin/python3');
plan skip_all => 'SentencePiece for Python missing (apt-get install python3-sentencepiece)' unless $py;

my $dir = tempdir(CLEANUP => 1);
open my $c, '>', "$dir/corpus.txt" or die $!;
print $c slurp($_) for ('README.md', 'docs/design-notes.md');
close $c;
my $train = <<'PY';
import sentencepiece as spm, sys
d = sys.argv[1]
spm.SentencePieceTrainer.train(input=d + '/corpus.txt', model_prefix=d + '/bpe', vocab_size=512, model_type='bpe',
    byte_fallback=True, normalization_rule_name='identity', remove_extra_whitespaces=False, split_digits=True,
    minloglevel=2)
spm.SentencePieceTrainer.train(input=d + '/corpus.txt', model_prefix=d + '/uni', vocab_size=512,
    model_type='unigram', minloglevel=2)
spm.SentencePieceTrainer.train(input=d + '/corpus.txt', model_prefix=d + '/nfkc', vocab_size=512, model_type='bpe',
    byte_fallback=True, minloglevel=2)
PY
my ($rc) = capture($dir, $py, '-c', $train, $dir);
ok($rc == 0 && -s "$dir/bpe.model" && -s "$dir/uni.model", 'SentencePiece trains a BPE and a Unigram model')
    or BAIL_OUT('no models: ' . slurp("$dir/stderr"));

my @texts = ('Hello world', 'Once upon a time, there was a little girl named Lily.', '  two  leading, trailing  ',
             "tabs\tand\ttabs\nline two\r\nthree", ' ', 'a', '...', '12345 + 678 = 13023',
             "Caf\x{e9} na\x{ef}ve u\x{308}ber ma\x{f1}ana", "\x{ff28}\x{ff25}\x{ff2c}\x{ff2c}\x{ff2f}!",
             "\x{fb01}ne \x{fb02}ow", "\x{65e5}\x{672c}\x{8a9e} \x{4e2d}\x{6587}", "emoji \x{1f600}\x{1f600} \x{a9}",
             "\x{43f}\x{440}\x{438}\x{432}\x{435}\x{442}", 'llm_chat_template exaone4;', 'the KV cache, paged',
             "a\x{a0}b\x{3000}c", "x\n\n\ny", '    indented code();');
my @pool = ((map { chr } 0x20 .. 0x7e, 0x61 .. 0x7a, 0xe0 .. 0xff, 0x430 .. 0x44f, 0x3040 .. 0x305f),
            (' ') x 20, "\t", "\n", "\x{a0}", "\x{3000}", "\x{fb01}", "\x{1f600}", "\x{65e5}", "\x{301}",
            'the', 'model', 'token', 'ing', 'GGUF', '2048');
my $seed = 777;
sub rnd { $seed = ($seed * 1103515245 + 12345) % 2147483648; return $seed % $_[0] }
push @texts, join '', map { $pool[rnd(scalar @pool)] } 1 .. 1 + rnd(25) for 1 .. 150;
open my $t, '>', "$dir/texts.json" or die $!;
print $t JSON::PP->new->ascii->encode(\@texts);
close $t;
my $encode = <<'PY';
import json, sentencepiece as spm, sys
sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
for s in json.load(open(sys.argv[2])):
    print(json.dumps(sp.encode(s)))
PY

for my $kind (qw(bpe uni nfkc)) {
    my $model = "$dir/$kind.model";
    # (nfkc: its normalization rules are left out, as llama.cpp leaves them: llama.cpp's ids only)
    unless ($kind eq 'nfkc') {
        my ($rs, $out) = capture($dir, $py, '-c', $encode, $model, "$dir/texts.json");
        my @want = grep { /^\[/ } split /\n/, $out;
        is(scalar @want, scalar @texts, "$kind: SentencePiece encodes " . scalar(@texts) . ' texts');
        my ($bad, $shown) = (0, 0);
        for my $i (0 .. $#texts) {
            my $x = $texts[$i];
            utf8::encode($x);
            my (undef, $o) = capture($dir, $engine, 'tokenize', '--tokenizer', $model, '--text', $x);
            chomp $o;
            (my $w = $want[$i] // '') =~ s/\s+//g;
            next if $o eq $w;
            $bad++;
            diag(JSON::PP->new->ascii->encode([$texts[$i]]) . ": ours $o, SentencePiece's $w") if $shown++ < 8;
        }
        is($bad, 0, "$kind: our ids from $kind.model are SentencePiece's for every text");
    }
    # the vocabulary in a GGUF, read by llama.cpp
    my $gguf = "$dir/tiny-$kind.gguf";
    capture($dir, $engine, 'gen-model', '--preset', 'tiny', '--dtype', 'f32', '--out', "$dir/tiny.gguf")
        unless -s "$dir/tiny.gguf";
    ($rc) = capture($dir, $engine, 'gen-model', '--from', "$dir/tiny.gguf", '--tokenizer', $model, '--dtype', 'f32',
                    '--out', $gguf);
    is($rc, 0, "$kind: gen-model --tokenizer $kind.model writes a GGUF") or next;
    compare_tokenizer($dir, $engine, $gguf, \@texts);
}

# a Hugging Face directory with SentencePiece's file and a tokenizer_config.json only
my $hf = "$dir/hf";
($rc) = capture($dir, $engine, 'gen-model', '--from', "$dir/tiny.gguf", '--dtype', 'f32', '--format', 'hf',
                '--out', $hf);
is($rc, 0, 'the tiny model as a Hugging Face directory');
unlink "$hf/tokenizer.json";
copy("$dir/bpe.model", "$hf/tokenizer.model") or die $!;
open my $tc, '>', "$hf/tokenizer_config.json" or die $!;
print $tc encode_json({ add_bos_token => JSON::PP::true, bos_token => '<s>', eos_token => '</s>',
                        chat_template => "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                                         . '{% endfor %}' });
close $tc;
my (undef, $direct) = capture($dir, $engine, 'tokenize', '--tokenizer', "$dir/bpe.model", '--text', 'Hello world');
my ($rt, $with_bos) = capture($dir, $engine, 'tokenize', '--model', $hf, '--text', 'Hello world', '--bos');
chomp($direct, $with_bos);
(my $rest = $direct) =~ s/^\[//;
is($with_bos, "[1,$rest", 'the directory tokenizes with its tokenizer.model, BOS (<s>, 1) first');
my (undef, $info) = capture($dir, $engine, 'info', '--model', $hf);
like($info, qr/^chat template: \d+ bytes, rendered as chatml$/m, 'info: the chat template from tokenizer_config.json, rendered as chatml');
my $back = "$dir/back.gguf";
($rc) = capture($dir, $engine, 'gen-model', '--from', $hf, '--dtype', 'f32', '--out', $back);
is($rc, 0, 'the directory re-saved as GGUF');
my $ref = compare_tokenizer($dir, $engine, $back, [@texts[0 .. 30]]);

# hostile files
my $bytes = slurp("$dir/bpe.model");
for my $case (['truncated', substr($bytes, 0, 1000)], ['garbage', join '', map { chr(rnd(256)) } 1 .. 4096],
              ['empty', '']) {
    my ($name, $data) = @$case;
    open my $fh, '>:raw', "$dir/$name.model" or die $!;
    print $fh $data;
    close $fh;
    my ($rb) = capture($dir, $engine, 'tokenize', '--tokenizer', "$dir/$name.model", '--text', 'x');
    ok($rb != 0 && slurp("$dir/stderr") =~ /SentencePiece model/, "a $name tokenizer.model is refused, said so: "
       . (split /\n/, slurp("$dir/stderr"))[0]);
}
done_testing();
