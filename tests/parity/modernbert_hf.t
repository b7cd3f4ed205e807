#!/usr/bin/env perl
# ModernBERT as a Hugging Face directory (model_type "modernbert": a bare ModernBertModel as sentence-transformers
# saves modernbert-embed-base or gte-modernbert-base, with its tokenizer.json and 1_Pooling): gen-model's
# tiny-modernbert (GGUF "modern-bert") re-saved with --format hf and read back gives the GGUF's vectors bit for
# bit, the same token counts ([CLS] and [SEP] added on both sides) on five texts of 3 to 45 tokens (the longer
# ones reach past the window of 8 each side); so do a ModernBertForMaskedLM layout (tensors under "model.")
# and a config whose rope bases are in rope_parameters (newer transformers), and that directory saved as GGUF
# again; with Llama 3's tokenizer given in place of its own, [CLS] and [SEP] are still added. Against
# transformers' ModernBertModel written out in pure Python (tests/parity/modernbert_ref.py) on the directory,
# three inputs of 4 to 35 tokens: within 1e-5 (measured 5.2e-7; the tanh form of GELU, llama.cpp's, is
# 2.8e-4 away). A reranker (ModernBertForSequenceClassification) scores pairs as that definition does, its head
# on the mean or on [CLS]. Biases, other activations, token classifiers and broken tensors are refused with a
# message.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use JSON::PP;
use List::Util ();
use lib "$FindBin::Bin/lib";
use Parity qw(capture slurp write_texts);

my $B = $ENV{BUILD} // 'build';
my $engine = "$B/llm-engine";
plan skip_all => "$engine not built" unless -x $engine;
plan skip_all => '../shared/tokenizers/llama3 missing' unless -f '../shared/tokenizers/llama3/tokenizer.json';

my $dir = tempdir(CLEANUP => 1);
write_texts("$dir/in.txt");

# (vectors as printed, tokens counted) of embed on a model
sub embed {
    my ($model) = @_;
    my (undef, $out) = capture($dir, $engine, 'embed', '--model', $model, '--input-file', "$dir/in.txt",
                               '--threads', '2', '--no-normalize');
    my ($n) = slurp("$dir/stderr") =~ /\((\d+) tokens/;
    return ($out, $n // -1);
}

my ($rc) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-modernbert', '--dtype', 'f32', '--seed', '3',
                   '--out', "$dir/m.gguf");
is($rc, 0, 'gen-model --preset tiny-modernbert') or BAIL_OUT('no model');
my ($gv, $gn) = embed("$dir/m.gguf");
my $hf = "$dir/hf";
($rc) = capture($dir, $engine, 'gen-model', '--from', "$dir/m.gguf", '--dtype', 'f32', '--format', 'hf', '--out', $hf);
is($rc, 0, 're-saved with --format hf');
my $cfg = decode_json(slurp("$hf/config.json"));
is_deeply([ @$cfg{qw(model_type global_attn_every_n_layers local_attention cls_token_id sep_token_id)} ],
          [ 'modernbert', 3, 16, 128000, 128001 ], 'config.json: modernbert, a global layer every 3, a window of 16');
my $st = slurp("$hf/model.safetensors");
my $hdr = decode_json(substr($st, 8, unpack('Q<', substr($st, 0, 8))));
ok(!exists $hdr->{'layers.0.attn_norm.weight'} && $hdr->{'layers.1.attn.Wqkv.weight'}{shape}[0] == 192 &&
   $hdr->{'layers.1.mlp.Wi.weight'}{shape}[0] == 256, 'q|k|v and the GLU\'s halves fused; no attn_norm in layer 0');
my ($hv, $hn) = embed($hf);
ok($gv ne '' && $hv eq $gv && $hn == $gn, "the directory gives the GGUF's vectors bit for bit ($hn tokens)");
# transformers' definition in pure Python on the same ids ([CLS] text [SEP]): mean of the last hidden states
for my $text ('Why?', 'A cat sat on the mat.', 'Once upon a time there was a girl named Lily who loved to play in '
              . 'the park with her friends every single day of the long, hot summer by the sea.') {
    my (undef, $ids) = capture($dir, $engine, 'tokenize', '--model', $hf, '--text', $text);
    $ids =~ s/[\[\]\s]//g;
    $ids = "128000,$ids,128001";
    my (undef, $ours) = capture($dir, $engine, 'embed', '--model', $hf, '--prompt-ids', $ids, '--no-normalize',
                                '--pooling', 'mean');
    my (undef, $ref) = capture($dir, 'python3', 'tests/parity/modernbert_ref.py', $hf, $ids);
    my ($a, $b) = (decode_json((split /\n/, $ours)[0] // '[]'), decode_json($ref || '[]'));
    my $d = @$a == 64 && @$b == 64 ? List::Util::max(map { abs($a->[$_] - $b->[$_]) } 0 .. 63) : 1;
    my $n = () = $ids =~ /,/g;
    ok($d <= 1e-5, sprintf('transformers\' ModernBertModel in pure Python, %d tokens: max |diff| %.2g', $n + 1, $d));
}
# Llama 3's tokenizer.json in the directory's place: still [CLS] ... [SEP] (config.json's ids); the vectors
# of texts its split cuts as GPT-2's does (no run of digits) are the same
my (undef, $tv) = capture($dir, $engine, 'embed', '--model', $hf, '--tokenizer', '../shared/tokenizers/llama3',
                          '--input-file', "$dir/in.txt", '--threads', '2', '--no-normalize');
my ($tn) = slurp("$dir/stderr") =~ /\((\d+) tokens/;
my @t = split /\n/, $tv;
my @g = split /\n/, $gv;
ok(@t == 5 && $tn == $gn && "@t[0, 2, 3, 4]" eq "@g[0, 2, 3, 4]",
   "--tokenizer llama3 in its place: [CLS] and [SEP] from config.json ($tn tokens)");
# and back as GGUF: the [CLS] / [SEP] ids from config.json, the split named modern-bert
capture($dir, $engine, 'gen-model', '--from', $hf, '--dtype', 'f32', '--out', "$dir/back.gguf");
my ($bv, $bn) = embed("$dir/back.gguf");
ok($bv eq $gv && $bn == $gn, 'saved again as GGUF: the same vectors');

# A copy of the directory, its safetensors header and config.json passed through $edit (the data may grow).
sub variant {
    my ($name, $edit) = @_;
    my $to = "$dir/$name";
    system('cp', '-r', $hf, $to) == 0 or die "cp: $?";
    my $s = slurp("$hf/model.safetensors");
    my $hl = unpack('Q<', substr($s, 0, 8));
    my ($h, $data) = (decode_json(substr($s, 8, $hl)), substr($s, 8 + $hl));
    my $c = decode_json(slurp("$hf/config.json"));
    $h = $edit->($h, $c, \$data) // $h;
    my $nh = encode_json($h);
    $nh .= ' ' x ((8 - length($nh) % 8) % 8);
    open my $f, '>:raw', "$to/model.safetensors" or die $!;
    print $f pack('Q<', length $nh), $nh, $data;
    close $f;
    open $f, '>', "$to/config.json" or die $!;
    print $f encode_json($c);
    close $f;
    return $to;
}

# A reranker (ModernBertForSequenceClassification, as gte-reranker-modernbert-base: head.dense, GELU, head.norm,
# classifier on the tokens' mean; modernbert_ref.py --make-rank gives the directory a random head): `embed
# --query` scores each document paired as [CLS] query [SEP] document [SEP] as transformers' definition does
# (within 1e-4); with classifier_pooling "cls" too; other activations refused, and so is re-saving it
{
    my $rr = "$dir/rr";
    my ($mrc) = capture($dir, 'python3', 'tests/parity/modernbert_ref.py', '--make-rank', $hf, $rr);
    my @docs = ('the cat sat on the mat', 'the sun is hot today', 'A cat and a dog ran home.');
    open my $df, '>', "$dir/docs.txt" or die $!;
    print $df "$_\n" for @docs;
    close $df;
    my $ids = sub {
        my (undef, $t) = capture($dir, $engine, 'tokenize', '--model', $rr, '--text', $_[0]);
        $t =~ s/[\[\]\s]//g;
        return $t;
    };
    for my $pool ('mean', 'cls') {
        if ($pool eq 'cls') {
            my $c = decode_json(slurp("$rr/config.json"));
            $c->{classifier_pooling} = 'cls';
            open my $cf, '>', "$rr/config.json" or die $!;
            print $cf encode_json($c);
            close $cf;
        }
        my (undef, $out) = capture($dir, $engine, 'embed', '--model', $rr, '--query', 'a cat', '--input-file',
                                   "$dir/docs.txt");
        my @ours = map { /\[([^\]]+)\]/ ? $1 : 'nan' } split /\n/, $out;
        my $q = $ids->('a cat');
        my @ref = map {
            my (undef, $r) = capture($dir, 'python3', 'tests/parity/modernbert_ref.py', $rr,
                                     "128000,$q,128001," . $ids->($_) . ",128001");
            decode_json($r || '[0]')->[0]
        } @docs;
        my $d = @ours == 3 ? List::Util::max(map { abs($ours[$_] - $ref[$_]) } 0 .. 2) : 1;
        ok($mrc == 0 && $d <= 1e-4, sprintf("reranker, classifier_pooling $pool: scores %s, transformers' within %.2g",
                                            join(' ', map { sprintf '%.4f', $_ } @ours), $d));
    }
    capture($dir, $engine, 'info', '--model', $rr);
    my $c = decode_json(slurp("$rr/config.json"));
    $c->{classifier_activation} = 'silu';
    open my $cf, '>', "$rr/config.json" or die $!;
    print $cf encode_json($c);
    close $cf;
    my ($arc) = capture($dir, $engine, 'info', '--model', $rr);
    like(slurp("$dir/stderr"), qr/classifier_activation 'silu' is not supported/, 'reranker with a SiLU head: refused');
    $c->{classifier_activation} = 'gelu';
    open $cf, '>', "$rr/config.json" or die $!;
    print $cf encode_json($c);
    close $cf;
    my ($src) = capture($dir, $engine, 'gen-model', '--from', $rr, '--dtype', 'f16', '--out', "$dir/rr.gguf");
    like(slurp("$dir/stderr"), qr/re-saving a ModernBERT reranker is not supported/, 're-saving it: refused');
}

# ModernBertForMaskedLM's layout: the encoder under "model." (its head beside it would be left out)
my $mlm = variant('mlm', sub {
    my ($h, $c) = @_;
    $c->{architectures} = ['ModernBertForMaskedLM'];
    return { map { ("model.$_" => $h->{$_}) } keys %$h };
});
my ($mv, $mn) = embed($mlm);
ok($mv eq $gv && $mn == $gn, 'tensors under "model." (ModernBertForMaskedLM): the same vectors');
my $rp = variant('rope-parameters', sub {
    my (undef, $c) = @_;
    $c->{rope_parameters} = { full_attention => { rope_type => 'default', rope_theta => delete $c->{global_rope_theta} },
                              sliding_attention => { rope_type => 'default',
                                                     rope_theta => delete $c->{local_rope_theta} } };
    return;
});
my ($rv, $rn) = embed($rp);
ok($rv eq $gv && $rn == $gn, 'rope bases in rope_parameters (newer transformers): the same vectors');

# refused, each with a message naming what
my @bad = (
    [ 'norm_bias true', qr/norm_bias true is not supported/, sub { $_[1]{norm_bias} = JSON::PP::true; return } ],
    [ 'hidden_activation relu', qr/hidden_activation 'relu' is not supported/,
      sub { $_[1]{hidden_activation} = 'relu'; return } ],
    [ 'a token classifier', qr/ModernBertForTokenClassification is not supported/,
      sub { $_[1]{architectures} = ['ModernBertForTokenClassification']; return } ],
    [ 'a reranker without its head', qr/missing tensor classifier\.weight|needs classifier\.weight/,
      sub { $_[1]{architectures} = ['ModernBertForSequenceClassification']; return } ],
    [ 'a bias tensor', qr/tensor layers\.0\.attn\.Wo\.bias is not supported/, sub {
        my ($h, undef, $data) = @_;
        $h->{'layers.0.attn.Wo.bias'} = { dtype => 'F32', shape => [64],
                                          data_offsets => [ length $$data, length($$data) + 256 ] };
        $$data .= "\0" x 256;
        return } ],
    [ 'no layers.1.attn_norm', qr/missing tensor layers\.1\.attn_norm\.weight/,
      sub { delete $_[0]{'layers.1.attn_norm.weight'}; return } ],
    [ 'a Wqkv of 128 rows', qr/Wqkv\.weight is \[128 x 64\], the config needs \[192 x 64\]/, sub {
        my $e = $_[0]{'layers.1.attn.Wqkv.weight'};
        @$e{qw(shape data_offsets)} = ([ 128, 64 ], [ $e->{data_offsets}[0], $e->{data_offsets}[0] + 128 * 64 * 4 ]);
        return } ],
);
for my $i (0 .. $#bad) {
    my ($what, $msg, $edit) = @{ $bad[$i] };
    my ($brc) = capture($dir, $engine, 'info', '--model', variant("bad$i", $edit));
    like(slurp("$dir/stderr"), $msg, "$what: refused with a message") and isnt($brc, 0, "$what: and a failure");
}
done_testing();
