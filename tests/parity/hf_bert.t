#!/usr/bin/env perl
# Hugging Face BERT directories (engine/model_hf_bert.c) against BERT written out in pure Python
# (tests/parity/make_hf_bert.py: random weights, its own forward pass from BERT's definition):
#  1. a BertModel as sentence-transformers saves it (F32, tensors at the top, an I64 position_ids buffer,
#     1_Pooling: mean): `llm-engine embed --prompt-ids` gives Python's last hidden states pooled by CLS and
#     by mean, for single texts and a pair (its second text of token type 1), within 1e-5; the directory's
#     pooling (mean) is the default; the tokenizer.json's WordPiece ids are Python's;
#  2. a BertForSequenceClassification cross-encoder (F16, under "bert.", gamma / beta LayerNorms): the same
#     within 1e-3 (the CPU's F16 products), and `info` shows its head (the scores themselves: t/096 through
#     nginx);
#  3. gen-model --from the directory writes a BERT GGUF (WordPiece vocabulary included) that gives the same
#     vectors bit for bit, and llama.cpp's on it (F32 and Q8_0; node-llama-cpp 3.21.1);
#  4. an XLMRobertaForSequenceClassification directory with a Unigram tokenizer.json (made from tiny-xlm-r's
#     GGUF vocabulary and charsmap): the GGUF's ids (which unigram.t checks against llama.cpp's), Python's
#     hidden states and pair scores within 1e-5; written as GGUF, the same scores and ids;
#  5. refusals with a message: a relu hidden_act, a missing layer, saving a BERT as a directory.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use JSON::PP qw(decode_json encode_json);
use List::Util qw(max);
use lib "$FindBin::Bin/lib";
use Parity qw(capture vectors);

my $B = $ENV{BUILD} // 'build';
my $engine = "$B/llm-engine";
plan skip_all => "$engine not built" unless -x $engine;
my $dir = tempdir(CLEANUP => 1);

sub max_diff {
    my ($a, $b) = @_;
    return 1e9 unless @$a == @$b;
    return max(map { abs($a->[$_] - $b->[$_]) } 0 .. $#$a);
}

for my $kind (qw(embed rerank)) {
    my $m = "$dir/$kind";
    my ($rc, $out) = capture($dir, 'python3', 'tests/parity/make_hf_bert.py', $m, $kind);
    is($rc, 0, "make_hf_bert.py writes the $kind directory") or next;
    my $ref = decode_json($out);
    my $tol = $kind eq 'embed' ? 1e-5 : 1e-3;
    for my $pool (qw(cls mean)) {
        my $md = 0;
        for my $i (0 .. $#{ $ref->{inputs} }) {
            my ($rc1, $o) = capture($dir, $engine, 'embed', '--model', $m, '--prompt-ids',
                                    join(',', @{ $ref->{inputs}[$i] }), '--pooling', $pool, '--no-normalize',
                                    '--threads', '1');
            my $v = vectors($o);
            $md = max($md, $rc1 == 0 && @$v == 1 ? max_diff($v->[0], $ref->{$pool}[$i]) : 1e9);
        }
        ok($md <= $tol, sprintf("$kind, %s pooling, %d inputs (a pair among them): Python's hidden states within %g "
                                . "(max |diff| %.3g)", $pool, scalar @{ $ref->{inputs} }, $tol, $md));
    }
    for my $i (0 .. $#{ $ref->{texts} }) {
        my ($rc2, $ids) = capture($dir, $engine, 'tokenize', '--model', $m, '--text', $ref->{texts}[$i]);
        my @want = @{ $ref->{inputs}[$i] };
        is($ids =~ s/\s+$//r, '[' . join(',', @want[1 .. $#want - 1]) . ']',
           "$kind: tokenizer.json's WordPiece ids of \"$ref->{texts}[$i]\"");
    }
    my ($rc3, $info) = capture($dir, $engine, 'info', '--model', $m);
    if ($kind eq 'embed') {
        like($info, qr/format:\s+hf.*architecture: bert.*embeddings pooling: mean/s, 'embed: a BERT from hf, 1_Pooling\'s mean');
        my ($rc4, $o) = capture($dir, $engine, 'embed', '--model', $m, '--prompt-ids',
                                join(',', @{ $ref->{inputs}[0] }), '--no-normalize', '--threads', '1');
        my $v = vectors($o);
        ok(@$v == 1 && max_diff($v->[0], $ref->{mean}[0]) <= $tol, 'embed: mean pooling by default');
    } else {
        like($info, qr/cross-encoder: a pooler \(tanh\) and a classifier of 1 output on \[CLS\]/,
             'rerank: the cross-encoder head (pooler, classifier)');
    }
}

# gen-model writes BERT GGUFs (llama.cpp's names, the WordPiece vocabulary from tokenizer.json): the directory
# as F32 GGUF gives the same vectors bit for bit; llama.cpp reads it (and its Q8_0 re-save) to our vectors and
# token counts. A BERT is not written as a Hugging Face directory: refused.
open my $in, '>', "$dir/in.txt" or die $!;
print $in "A cat sat on the mat.\nthe big red ball and her dogs\nWhy?\n";
close $in;
my @embed = ('embed', '--input-file', "$dir/in.txt", '--no-normalize', '--threads', '2');
for my $dt (qw(f32 q8_0)) {
    my $g = "$dir/embed-$dt.gguf";
    my ($rc6) = capture($dir, $engine, 'gen-model', '--from', "$dir/embed", '--dtype', $dt, '--out', $g);
    is($rc6, 0, "gen-model --from the directory --dtype $dt: a bert GGUF") or next;
    my ($rc7, $ours) = capture($dir, $engine, @embed, '--model', $g);
    my ($ours_tokens) = Parity::slurp("$dir/stderr") =~ /\((\d+) tokens/;
    if ($dt eq 'f32') {
        my (undef, $from_dir) = capture($dir, $engine, @embed, '--model', "$dir/embed");
        ok($rc7 == 0 && $ours ne '' && $ours eq $from_dir, 'f32 GGUF: the directory\'s vectors, bit for bit');
    }
    SKIP: {
        skip 'llama.cpp harness not installed (npm ci --prefix bench/llamacpp)', 2
            unless -d 'bench/llamacpp/node_modules/node-llama-cpp';
        my ($rc8, $l) = capture($dir, 'node', 'bench/llamacpp/embed.mjs', '--model', $g, '--input-file', "$dir/in.txt",
                                '--threads', '2');
        my ($a, $b) = (vectors($ours), vectors($l));
        my ($lc) = $l =~ /"tokens":(\d+)/;
        is($ours_tokens, $lc, "$dt GGUF: llama.cpp's tokenizer gives our token count ($lc)");
        my @c = map { Parity::cosine($a->[$_], $b->[$_]) } 0 .. 2;
        ok($rc8 == 0 && @$a == 3 && @$b == 3 && List::Util::min(@c) >= 0.9999,
           sprintf("$dt GGUF: llama.cpp's vectors, cosine %s", join(' ', map { sprintf '%.6f', $_ } @c)));
    }
}
my ($rc9) = capture($dir, $engine, 'gen-model', '--from', "$dir/embed", '--dtype', 'f32', '--format', 'hf', '--out',
                    "$dir/back");
like(Parity::slurp("$dir/stderr"), qr/a bert model is saved as GGUF only/, 'a BERT as a Hugging Face directory: refused');

# An XLMRobertaForSequenceClassification directory (make_hf_bert.py xlmr: tensors under "roberta.", position
# rows counted after padding_idx + 1, classifier.dense / out_proj, layer_norm_eps 1e-5, and a Unigram
# tokenizer.json made from tiny-xlm-r's GGUF vocabulary and charsmap, Metaspace, <s> ... </s>).
{
    my $g = "$dir/tiny-xlm-r.gguf";
    my ($rc) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-xlm-r', '--dtype', 'f32', '--out', $g);
    is($rc, 0, 'gen-model --preset tiny-xlm-r (the vocabulary for the directory)');
    my @docs = ('a cat sat on the mat', 'the sun is hot', "cats and dogs \x{2460}\x{ff01}");
    my @texts = (@docs, "  \x{ff28}ello   \x{fb01}ne wo\x{301}rld\x{2026} \x{65e5}\x{672c}\x{8a9e} zz\t", 'Why?');
    my $ids = sub {
        my ($model, $t) = @_;
        utf8::encode($t);
        my (undef, $x) = capture($dir, $engine, 'tokenize', '--tokenizer', $model, '--text', $t);
        $x =~ s/\s+$//;
        return $x;
    };
    my (@inputs, @pairs);
    for my $t (@texts) {
        my $x = decode_json($ids->($g, $t));
        push @inputs, [0, @$x, 2];
    }
    my $q = decode_json($ids->($g, 'a cat'));
    push @pairs, [0, @$q, 2, 2, @{ $inputs[$_] }[1 .. $#{ $inputs[$_] }]] for 0 .. $#docs;
    open my $fh, '>', "$dir/xlmr-ids.json" or die $!;
    print $fh encode_json({ inputs => \@inputs, pairs => \@pairs });
    close $fh;
    my $m = "$dir/xlmr";
    my ($rc1, $out) = capture($dir, 'python3', 'tests/parity/make_hf_bert.py', $m, 'xlmr', $g, "$dir/xlmr-ids.json");
    is($rc1, 0, 'make_hf_bert.py writes the XLM-RoBERTa directory') or BAIL_OUT('no directory');
    my $ref = decode_json($out);
    my $same = grep { $ids->($m, $texts[$_]) eq encode_json([@{ $inputs[$_] }[1 .. $#{ $inputs[$_] } - 1]]) } 0 .. $#texts;
    is($same, scalar @texts, "xlmr: tokenizer.json (Unigram, Precompiled charsmap) gives the GGUF's ids for "
       . scalar(@texts) . ' texts (charsmap rules, runs of spaces, unknowns)');
    for my $pool (qw(cls mean)) {
        my $md = 0;
        for my $i (0 .. $#inputs) {
            my ($rc2, $o) = capture($dir, $engine, 'embed', '--model', $m, '--prompt-ids', join(',', @{ $inputs[$i] }),
                                    '--pooling', $pool, '--no-normalize', '--threads', '1');
            my $v = vectors($o);
            $md = max($md, $rc2 == 0 && @$v == 1 ? max_diff($v->[0], $ref->{$pool}[$i]) : 1e9);
        }
        ok($md <= 1e-5, sprintf("xlmr, %s pooling: Python's hidden states within 1e-5 (positions after the "
                                . "padding's rows; max |diff| %.3g)", $pool, $md));
    }
    open my $d, '>:utf8', "$dir/xlmr-docs.txt" or die $!;
    print $d "$_\n" for @docs;
    close $d;
    my @rank = ('embed', '--query', 'a cat', '--input-file', "$dir/xlmr-docs.txt", '--threads', '1');
    my ($rc3, $o) = capture($dir, $engine, @rank, '--model', $m);
    my @got = map { /^\[([-0-9.e]+)\]$/ ? $1 : () } split /\n/, $o;
    my $md = @got == 3 ? max(map { abs($got[$_] - $ref->{logits}[$_]) } 0 .. 2) : 1e9;
    ok($rc3 == 0 && $md <= 1e-5, sprintf("xlmr: embed --query's scores (pairs <s> q </s></s> d </s>, "
                                         . "classifier.dense / out_proj) are Python's within 1e-5 (%.3g)", $md));
    my $cg = "$dir/xlmr.gguf";
    my ($rc4) = capture($dir, $engine, 'gen-model', '--from', $m, '--dtype', 'f32', '--out', $cg);
    my ($rc5, $o2) = capture($dir, $engine, @rank, '--model', $cg);
    ok($rc4 == 0 && $rc5 == 0 && $o2 ne '' && $o2 eq $o, 'xlmr: written as GGUF, the same scores bit for bit');
    my $same2 = grep { $ids->($cg, $_) eq $ids->($m, $_) } @texts;
    is($same2, scalar @texts, 'xlmr: and the same ids (the t5 vocabulary, charsmap and switches written)');
}

# Refusals: each a clear error, no crash.
my $bad = "$dir/bad";
system('cp', '-r', "$dir/embed", $bad) == 0 or die;
sub edit_config {
    my ($f) = @_;
    open my $fh, '<', "$bad/config.json" or die $!;
    my $c = decode_json(do { local $/; <$fh> });
    close $fh;
    $f->($c);
    open $fh, '>', "$bad/config.json" or die $!;
    print $fh encode_json($c);
    close $fh;
}
edit_config(sub { $_[0]{hidden_act} = 'relu' });
my ($rc5) = capture($dir, $engine, 'info', '--model', $bad);
like(Parity::slurp("$dir/stderr"), qr/hidden_act 'relu' is not supported/, 'a relu BERT is refused');
edit_config(sub { $_[0]{hidden_act} = 'gelu'; $_[0]{num_hidden_layers} = 3 });
($rc5) = capture($dir, $engine, 'info', '--model', $bad);
like(Parity::slurp("$dir/stderr"), qr/missing tensor encoder\.layer\.2\.attention\.self\.query\.weight/,
     'a layer the file lacks: missing tensor, named');
isnt($rc5, 0, '... and the exit status says so');
done_testing();
