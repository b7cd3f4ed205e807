#!/usr/bin/env perl
# Llamas under other architecture names, against llama.cpp (node-llama-cpp 3.21.1) on tiny files that
# `gen-model --preset tiny-ernie4_5 | tiny-exaone | tiny-exaone4 | tiny-exaone4-swa | tiny-seed-oss` write:
#  - ERNIE 4.5 dense (ernie4_5): its own checkpoints rotate adjacent pairs, which llama.cpp's converter keeps, so
#    neither a GGUF nor a directory is permuted; heads wider than the model (4 x 32 over 64, as the 0.3B's);
#  - EXAONE 3.x (exaone): halves rotated (NeoX) in GGUF; its Hugging Face directory in its remote code's names
#    (transformer.h.N.attn.attention.q_proj, mlp.c_fc_0, ...; num_layers, layer_norm_epsilon);
#  - EXAONE 4 (exaone4): no norm before the blocks, RMSNorms of their outputs (as OLMo 2), per-head q/k norms;
#    a 64-layer model (llama.cpp windows only those, as the 32B) with a window of 16 on three layers of four and
#    the fourth global without rope (the 44-token text crosses the windows);
#  - Seed-OSS (seed_oss): Qwen 2's q/k/v biases, halves rotated, its pre-FFN norm named post_attention_norm.
# Each: teacher-forced next-token distributions in F32 (one step, and token by token) and Q8_0, the same greedy
# ids, the file written back as GGUF (llama.cpp reads it) and, where the architecture has one, as a Hugging Face
# directory read back to the same ids. Control: the ERNIE directory read as a plain Llama (halves) differs; an EXAONE
# directory of another activation is refused.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP;
use Parity qw(capture compare_f32_q8 greedy_llamacpp greedy_ours harness hf_round_trip slurp);

my ($B, $engine, $dump) = harness(tokenizer => 1);
my $dir = tempdir(CLEANUP => 1);
my $text = 'In 2024 the little robot counted 1234567 stars, then 89 more; "Why?" asked Lily, and it said: '
         . 'because the sky over the old harbour was clear for 3 nights.';
my $n = 40;
my %v = ('tiny-ernie4_5' => ['ernie4_5', 'adjacent pairs', 'Ernie4_5ForCausalLM'],
         'tiny-exaone' => ['exaone', 'half', 'ExaoneForCausalLM'],
         'tiny-seed-oss' => ['seed_oss', 'half', 'SeedOssForCausalLM'],
         'tiny-exaone4' => ['exaone4', 'half', 'Exaone4ForCausalLM'],
         'tiny-exaone4-swa' => ['exaone4', 'half', 'Exaone4ForCausalLM']);
for my $preset (sort keys %v) {
    my ($arch, $layout, $hf_class) = @{ $v{$preset} };
    my %f;
    for my $dt (qw(f32 q8_0)) {
        $f{$dt} = "$dir/$preset-$dt.gguf";
        my ($rc) = capture($dir, $engine, 'gen-model', '--preset', $preset, '--dtype', $dt, '--out', $f{$dt},
                           '--seed', '3');
        is($rc, 0, "gen-model --preset $preset --dtype $dt");
    }
    my (undef, $info) = capture($dir, $engine, 'info', '--model', $f{f32});
    like($info, qr/^architecture: $arch\b/m, "$preset: info names the architecture");
    like($info, qr/layout \Q$layout\E/, "$preset: rotates $layout");
    like($info, qr/attn_q\.bias/, "$preset: q/k/v biases") if $arch eq 'seed_oss';
    like($info, qr/norms after attention and ffn only$/m, "$preset: normed after its blocks") if $preset eq 'tiny-exaone4';
    like($info, qr/no rope \(NoPE\) on 16 of 64 layers[\s\S]*sliding window 16 on 48 of 64 layers$/m,
         "$preset: windows on 48 layers, the 16 global ones without rope") if $preset eq 'tiny-exaone4-swa';
    my ($rct, $tok) = capture($dir, $engine, 'tokenize', '--model', $f{f32}, '--text', $text, '--bos');
    my @ids = $tok =~ /(\d+)/g;
    ok($rct == 0 && @ids > 40, "$preset: the text is " . scalar(@ids) . ' tokens');

    # (the 64-layer EXAONE 4 file's near-tied top tokens flip under 64 layers of Q8_0 rounding on either side:
    # 39 of 44 alike, mean |dp| 0.004)
    compare_f32_q8(dir => $dir, dump => $dump, label => $preset, f32 => $f{f32}, q8 => $f{q8_0}, ids => \@ids,
                   q8_top1 => $preset =~ /swa/ ? 0.85 : 0.9);
    my ($rc1, $a) = greedy_ours($dir, $engine, $n, $f{f32}, \@ids, '--kv-cache-dtype', 'f32');
    ok($rc1 == 0 && @$a == $n, "$preset: we generate $n ids");
    is_deeply($a, greedy_llamacpp($dir, $n, $f{f32}, \@ids, 1), "$preset: the same $n greedy ids as llama.cpp");

    my $re = "$dir/re-$preset.gguf";
    my ($rc) = capture($dir, $engine, 'gen-model', '--from', $f{f32}, '--dtype', 'f32', '--out', $re);
    my (undef, $got) = greedy_ours($dir, $engine, $n, $re, \@ids, '--kv-cache-dtype', 'f32');
    ok($rc == 0 && "@$got" eq "@$a", "$preset: re-saved as GGUF, the same ids");
    is_deeply(greedy_llamacpp($dir, $n, $re, \@ids, 1), $a, "$preset: llama.cpp reads the re-saved file");
    my $hf = hf_round_trip(dir => $dir, engine => $engine, label => $preset, model => $f{f32}, ids => \@ids,
                           want => $a, exact => 1, check => sub {
        my ($hf) = @_;
        my $cfg = decode_json(slurp("$hf/config.json"));
        is($cfg->{model_type}, $arch, "$preset: config.json says model_type $arch");
        is($cfg->{architectures}[0], $hf_class, "$preset: and $hf_class");
        return unless $arch eq 'exaone';
        ok(defined $cfg->{num_layers} && defined $cfg->{layer_norm_epsilon} && !defined $cfg->{num_hidden_layers},
           "$preset: EXAONE's num_layers and layer_norm_epsilon");
        my $st = slurp("$hf/model.safetensors");
        my $names = decode_json(substr($st, 8, unpack('Q<', substr($st, 0, 8))));
        my @ours = grep { /^model\./ } keys %$names;
        ok(exists $names->{'transformer.h.1.attn.attention.out_proj.weight'} && exists $names->{'transformer.wte.weight'}
           && exists $names->{'transformer.h.0.mlp.c_fc_0.weight'} && !@ours, "$preset: tensors under EXAONE's names");
    });
    if ($arch eq 'exaone') { # an EXAONE directory of another activation is refused, said so
        my $cfg = decode_json(slurp("$hf/config.json"));
        $cfg->{activation_function} = 'gelu';
        open my $fh, '>', "$hf/config.json" or die $!;
        print $fh encode_json($cfg);
        close $fh;
        my ($ri) = capture($dir, $engine, 'info', '--model', $hf);
        ok($ri != 0 && slurp("$dir/stderr") =~ /activation_function must be silu/, "$preset: a gelu EXAONE is refused");
    }
    next unless $arch eq 'ernie4_5';
    # control: the directory relabelled a plain llama (rotating halves) gives other ids
    my $cfg = decode_json(slurp("$hf/config.json"));
    $cfg->{model_type} = 'llama';
    open my $fh, '>', "$hf/config.json" or die $!;
    print $fh encode_json($cfg);
    close $fh;
    my (undef, $c) = greedy_ours($dir, $engine, $n, $hf, \@ids, '--kv-cache-dtype', 'f32');
    ok(@$c == $n && "@$c" ne "@$a", "$preset: control: read as a llama (halves rotated) the ids differ");
}
done_testing();
