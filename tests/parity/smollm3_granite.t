#!/usr/bin/env perl
# SmolLM3 (GGUF architecture smollm3: a llama whose every fourth layer skips the rope, "NoPE") and Granite 3
# (architecture granite: a llama with an embedding scale, an attention scale, a residual scale on each block's
# output and a logit scale) against llama.cpp (node-llama-cpp 3.21.1) on tiny files of those layouts that
# `gen-model --preset tiny-smollm3 | tiny-granite` write (Llama 3's vocabulary; the Granite one with StarCoder's
# two-stage pre-tokenizer, "refact", as Granite's files carry it): teacher-forced next-token distributions in
# F32 and Q8_0, the same greedy ids, the same token counts as llama.cpp's on texts with digits and spaces, and
# `gen-model --from` writing the files back (GGUF and a Hugging Face directory, read back to the same ids).
# Then Mistral's Tekken pre-tokenizer the same way.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP qw(decode_json encode_json);
use Parity qw(capture compare_llamacpp greedy_llamacpp greedy_ours harness logits_bytes slurp token_counts);

my ($B, $engine, $dump) = harness(tokenizer => 1);
my $dir = tempdir(CLEANUP => 1);
my $text = 'In 2024 the little robot counted 1234567 stars, then 89 more; "Why?" asked Lily, and it said: '
         . 'because the sky over the old harbour was clear for 3 nights, and the sea was calm and grey and cold.';
my $n = 40;

for my $arch (qw(smollm3 granite)) {
    my %f;
    for my $dt (qw(f32 q8_0)) {
        $f{$dt} = "$dir/tiny-$arch-$dt.gguf";
        my ($rc) = capture($dir, $engine, 'gen-model', '--preset', "tiny-$arch", '--dtype', $dt, '--out', $f{$dt},
                           '--seed', '11');
        is($rc, 0, "gen-model --preset tiny-$arch --dtype $dt");
    }
    my (undef, $info) = capture($dir, $engine, 'info', '--model', $f{f32});
    like($info, qr/^architecture: $arch\b/m, "$arch: info names the architecture");
    like($info, qr/layout adjacent pairs/, "$arch: rotates pairs (a llama's GGUF layout)");
    like($info, $arch eq 'smollm3' ? qr/no rope \(NoPE\) on 2 of 8 layers/
                                   : qr/residual scale 0\.6, logit scale 0\.5\n.*embedding scale 3, attention scale 0\.4/,
         "$arch: info shows what differs from a llama");
    my ($rct, $tok) = capture($dir, $engine, 'tokenize', '--model', $f{f32}, '--text', $text, '--bos');
    my @ids = $tok =~ /(\d+)/g;
    ok($rct == 0 && @ids > 40, "$arch: the text is " . scalar(@ids) . ' tokens');

    # measured: smollm3 f32 54 of 54, |dp| < 1e-4 (every layer rotated instead: 37 of 54, mean 0.13), q8_0 52 /
    # 0.025; granite f32 61 of 61, |dp| < 1e-4 (the residual scale left out: 35 of 61, mean 0.49; the logit
    # scale: mean 0.39; the embedding scale: 1 of 61; the attention scale: mean 0.038), q8_0 61 / 0.0025
    compare_llamacpp(dir => $dir, dump => $dump, label => "$arch f32", model => $f{f32}, ids => \@ids,
                     vocab => 128256, min_top1 => 0.97, max_mean => 0.002, max_dp => 0.02, exact => 1);
    compare_llamacpp(dir => $dir, dump => $dump, label => "$arch q8_0", model => $f{q8_0}, ids => \@ids,
                     vocab => 128256, min_top1 => 0.9, max_mean => 0.03, max_dp => 0.2);
    my ($rc1, $a) = greedy_ours($dir, $engine, $n, $f{f32}, \@ids, '--kv-cache-dtype', 'f32');
    ok($rc1 == 0 && @$a == $n, "$arch: we generate $n ids");
    is_deeply($a, greedy_llamacpp($dir, $n, $f{f32}, \@ids, 1), "$arch: the same $n greedy ids as llama.cpp (F32)");

    # written back: GGUF (llama.cpp reads it) and a Hugging Face directory (we read it back)
    my $re = "$dir/re-$arch.gguf";
    my ($rc) = capture($dir, $engine, 'gen-model', '--from', $f{f32}, '--dtype', 'f32', '--out', $re);
    my (undef, $got) = greedy_ours($dir, $engine, $n, $re, \@ids, '--kv-cache-dtype', 'f32');
    ok($rc == 0 && "@$got" eq "@$a", "$arch: re-saved as GGUF, the same ids");
    is_deeply(greedy_llamacpp($dir, $n, $re, \@ids, 1), $a, "$arch: llama.cpp reads the re-saved file: the same ids");
    ($rc) = capture($dir, $engine, 'gen-model', '--from', $f{f32}, '--dtype', 'f32', '--format', 'hf', '--out',
                    "$dir/hf-$arch");
    (undef, $got) = greedy_ours($dir, $engine, $n, "$dir/hf-$arch", \@ids, '--kv-cache-dtype', 'f32');
    ok($rc == 0 && "@$got" eq "@$a", "$arch: saved as a Hugging Face directory and read back, the same ids")
        or diag(`cat $dir/stderr`);
}

# StarCoder's / Granite's pre-tokenizer: each digit first, then GPT-2's split within the pieces (whitespace
# before a digit is a piece's end); as many tokens as llama.cpp makes on texts where a one-stage split differs
my $g = "$dir/tiny-granite-f32.gguf";
sub same_count {
    my ($model, $name, $t) = @_;
    my ($ours, $np) = token_counts($dir, $engine, $model, $t);
    (my $show = $t) =~ s/\n/\\n/g;
    $show =~ s/\r/\\r/g;
    ok(defined $ours && defined $np && $np == $ours, "$name pre-tokenizer on '$show': " . ($ours // '?') .
       ' tokens, llama.cpp ' . ($np // '?'));
}
same_count($g, 'refact', $_) for "x  1 22  333\t4444 \n 5", "a 12b  c3  \n\n  7   z",
                                 "tab\t\t9 and   99 bottles, 2.5%  off  ";
# Mistral's Tekken pre-tokenizer (Nemo, Small 3: tokenizer.ggml.pre "tekken"; --preset tiny-tekken puts it over
# Llama 3's vocabulary): case changes split words, contractions and digits stand alone; as many tokens as
# llama.cpp on texts where Llama 3's and GPT-4o's splits give other counts (17 / 16 against 19 / 21 here)
my $tk = "$dir/tiny-tekken.gguf";
my ($rck) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-tekken', '--dtype', 'f32', '--out', $tk);
is($rck, 0, 'gen-model --preset tiny-tekken');
same_count($tk, 'tekken', $_)
    for "HelloWorld's iPhone met an HTTPServer; 'TIS the JSONParser/XMLReader, 123456 ok.\nCamelCase\r\n  x",
        "I'm sure they'll say we've 2024 items: don't stop", "x  1 22  333\t4444 \n 5";

# Mistral Small 3.1 / 3.2's Hugging Face layout (Mistral3ForConditionalGeneration, model_type mistral3): the
# Mistral in text_config, its tensors under language_model (transformers before 4.52: language_model.model.*
# and language_model.lm_head; after: model.language_model.* and lm_head), a vision tower and projector beside
# them that are left out: the plain directory's logits bit for bit, its head untied here so that lm_head is read
my $tkhf = "$dir/tekken-hf";
my ($rch) = capture($dir, $engine, 'gen-model', '--from', $tk, '--dtype', 'f32', '--format', 'hf', '--out', $tkhf);
is($rch, 0, 'the tekken file as a Hugging Face directory');
my ($rct, $tok) = capture($dir, $engine, 'tokenize', '--model', $tk, '--text', 'In 2024 the little robot counted '
                          . '1234567 stars; "Why?" asked Lily, and it said: because the sky was clear.', '--bos');
my @tids = $tok =~ /(\d+)/g;
my $want = logits_bytes($dir, $dump, $tkhf, \@tids, 8); # (the plain directory's: its q / k rows rotate halves)
for my $new (0, 1) {
    my $mm = "$dir/mistral3-$new";
    mkdir $mm or die $!;
    my $cfg = decode_json(slurp("$tkhf/config.json"));
    $cfg->{model_type} = 'mistral';
    $cfg->{tie_word_embeddings} = JSON::PP::false;
    open my $fh, '>', "$mm/config.json" or die $!;
    print $fh encode_json({ model_type => 'mistral3', architectures => ['Mistral3ForConditionalGeneration'],
                            text_config => $cfg, vision_config => { hidden_size => 1024, model_type => 'pixtral' },
                            image_token_index => 10 });
    close $fh;
    my $st = slurp("$tkhf/model.safetensors");
    my $hl = unpack('Q<', substr($st, 0, 8));
    my $hdr = decode_json(substr($st, 8, $hl));
    my %ren = map { (my $k = $_) =~ s/^model\./$new ? 'model.language_model.' : 'language_model.model.'/e;
                    ($k => $hdr->{$_}) } keys %$hdr;
    $ren{ $new ? 'lm_head.weight' : 'language_model.lm_head.weight' } = $hdr->{'model.embed_tokens.weight'};
    $ren{'vision_tower.patch_conv.weight'} = $hdr->{'model.norm.weight'};
    $ren{'multi_modal_projector.linear_1.weight'} = $hdr->{'model.layers.0.mlp.down_proj.weight'};
    my $nh = encode_json(\%ren);
    $nh .= ' ' x ((8 - length($nh) % 8) % 8);
    open $fh, '>:raw', "$mm/model.safetensors" or die $!;
    print $fh pack('Q<', length $nh), $nh, substr($st, 8 + $hl);
    close $fh;
    my $got = logits_bytes($dir, $dump, $mm, \@tids, 8);
    ok(length($want) > 1000 && $got eq $want, 'Mistral3ForConditionalGeneration (' . ($new ? 'model.language_model.*'
       : 'language_model.model.*') . '): the plain directory\'s logits bit for bit') or diag(substr($got, 0, 200));
}
done_testing();
