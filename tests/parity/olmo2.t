#!/usr/bin/env perl
# OLMo 2 and OLMo 3 (GGUF architecture olmo2: no norm before attention or the FFN, an RMSNorm of each block's
# output before the residual add, q and k RMS-normed over their whole rows (not per head), NeoX rope; OLMo 3's
# sliding window on three layers of four, whose rope is never scaled) against llama.cpp (node-llama-cpp
# 3.21.1) on tiny files of those layouts that `gen-model --preset tiny-olmo2 | tiny-olmo3` write (Llama 3's
# vocabulary under the "dbrx" pre-tokenizer name, as OLMo 2's cl100k-style files carry it; OLMo 3's window
# 16, the text 51 tokens, so the windows cut): teacher-forced next-token distributions in F32 (the whole text
# in one step, and its last 30 tokens one by one) and Q8_0, the same greedy ids, OLMo 3 with YaRN on its
# global layers, and the files written back (GGUF, read by llama.cpp; a Hugging Face directory, model_type
# olmo2 / olmo3 as transformers writes them, read back to the same ids).
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP;
use Parity qw(capture compare_f32_q8 compare_llamacpp greedy_llamacpp greedy_ours harness hf_round_trip slurp
              token_counts);

my ($B, $engine, $dump) = harness(tokenizer => 1);
my $dir = tempdir(CLEANUP => 1);
my $text = 'In 2024 the little robot counted 1234567 stars, then 89 more; "Why?" asked Lily, and it said: '
         . 'because the sky over the old harbour was clear for 3 nights.';
my $n = 40;

for my $preset (qw(tiny-olmo2 tiny-olmo3)) {
    my $olmo3 = $preset eq 'tiny-olmo3';
    my %f;
    for my $dt (qw(f32 q8_0)) {
        $f{$dt} = "$dir/$preset-$dt.gguf";
        my ($rc) = capture($dir, $engine, 'gen-model', '--preset', $preset, '--dtype', $dt, '--out', $f{$dt},
                           '--seed', '7');
        is($rc, 0, "gen-model --preset $preset --dtype $dt");
    }
    my (undef, $info) = capture($dir, $engine, 'info', '--model', $f{f32});
    like($info, qr/^architecture: olmo2\b/m, "$preset: info names the architecture");
    like($info, qr/layout half/, "$preset: rotates halves (NeoX), as llama.cpp's olmo2");
    like($info, $olmo3 ? qr/norms after attention and ffn only, q\/k norms over whole rows, sliding window 16 on 3 of 4/
                       : qr/norms after attention and ffn only, q\/k norms over whole rows$/m,
         "$preset: info shows what differs from a llama");
    my ($rct, $tok) = capture($dir, $engine, 'tokenize', '--model', $f{f32}, '--text', $text, '--bos');
    my @ids = $tok =~ /(\d+)/g;
    ok($rct == 0 && @ids > 40, "$preset: the text is " . scalar(@ids) . ' tokens');

    compare_f32_q8(dir => $dir, dump => $dump, label => $preset, f32 => $f{f32}, q8 => $f{q8_0}, ids => \@ids);
    my ($rc1, $a) = greedy_ours($dir, $engine, $n, $f{f32}, \@ids, '--kv-cache-dtype', 'f32');
    ok($rc1 == 0 && @$a == $n, "$preset: we generate $n ids");
    is_deeply($a, greedy_llamacpp($dir, $n, $f{f32}, \@ids, 1), "$preset: the same $n greedy ids as llama.cpp");

    if ($olmo3) {
        # YaRN on the global layers only (llama.cpp's olmo2 rotates the windowed ones unscaled, as transformers'
        # Olmo3 does): a factor of 4 over an original context of 16, so the text's positions see it
        my $y = "$dir/$preset-yarn.gguf";
        my ($ry) = capture($dir, $engine, 'gen-model', '--from', $f{f32}, '--dtype', 'f32', '--out', $y,
                           '--rope-scaling', 'yarn', '--rope-factor', '4', '--rope-orig-ctx', '16');
        is($ry, 0, "$preset: a YaRN variant written");
        compare_llamacpp(dir => $dir, dump => $dump, label => "$preset yarn f32", model => $y, ids => \@ids,
                         vocab => 128256, min_top1 => 0.97, max_mean => 0.0005, max_dp => 0.005, exact => 1);
    }

    # written back: GGUF (llama.cpp reads it) and a Hugging Face directory (and back to GGUF)
    my $re = "$dir/re-$preset.gguf";
    my ($rc) = capture($dir, $engine, 'gen-model', '--from', $f{f32}, '--dtype', 'f32', '--out', $re);
    my (undef, $got) = greedy_ours($dir, $engine, $n, $re, \@ids, '--kv-cache-dtype', 'f32');
    ok($rc == 0 && "@$got" eq "@$a", "$preset: re-saved as GGUF, the same ids");
    my $mt = $olmo3 ? 'olmo3' : 'olmo2';
    hf_round_trip(dir => $dir, engine => $engine, label => $preset, model => $f{f32}, ids => \@ids, want => $a,
                  exact => 1, check => sub {
        my ($hf) = @_;
        my $cfg = decode_json(slurp("$hf/config.json"));
        is($cfg->{model_type}, $mt, "$preset: config.json says model_type $mt");
        my $st = slurp("$hf/model.safetensors");
        my $hdr = decode_json(substr($st, 8, unpack('Q<', substr($st, 0, 8))));
        ok(!exists $hdr->{'model.layers.0.input_layernorm.weight'}, "$preset: no input_layernorm");
        is_deeply($hdr->{'model.layers.0.self_attn.q_norm.weight'}{shape}, [64],
                  "$preset: q_norm spans the 4 heads of 16");
        is_deeply($hdr->{'model.layers.0.self_attn.k_norm.weight'}{shape}, [32], "$preset: k_norm the 2 kv heads");
        ok(exists $hdr->{'model.layers.1.post_feedforward_layernorm.weight'}, "$preset: post_feedforward_layernorm");
        is_deeply($cfg->{layer_types}, [('sliding_attention') x 3, 'full_attention'],
                  "$preset: layer_types, three windowed layers of four") if $olmo3;
        # hostile: OLMo 1's clip_qkv, refused with a message rather than run without it
        my $bad = "$dir/bad-$preset";
        system('rm', '-rf', $bad);
        system('cp', '-r', $hf, $bad);
        $cfg->{clip_qkv} = 8;
        open my $fh, '>', "$bad/config.json" or die $!;
        print $fh encode_json($cfg);
        close $fh;
        my ($rb) = capture($dir, $engine, 'info', '--model', $bad);
        my $msg = slurp("$dir/stderr");
        ok($rb != 0 && $msg =~ /clip_qkv is not supported/, "$preset: a config with clip_qkv is refused");
    });
}

# the "dbrx" pre-tokenizer name (OLMo 2's files) splits as Llama 3's: as many tokens as llama.cpp makes
my $g = "$dir/tiny-olmo2-f32.gguf";
for my $t ("x  1 22  333\t4444 \n 5", "I'm sure they'll say we've 2024 items: don't stop", "HelloWorld's 123456 ok.") {
    my ($ours, $np) = token_counts($dir, $engine, $g, $t);
    (my $show = $t) =~ s/\n/\\n/g;
    ok(defined $ours && defined $np && $np == $ours,
       "dbrx pre-tokenizer on '$show': " . ($ours // '?') . ' tokens, llama.cpp ' . ($np // '?'));
}
done_testing();
