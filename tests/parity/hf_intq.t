#!/usr/bin/env perl
# Integer-quantised Hugging Face checkpoints: GPTQ (4 and 8 bits, symmetric and asymmetric, act-order, both
# checkpoint formats), AWQ (GEMM packing) and compressed-tensors (pack-quantized W4A16 symmetric and asymmetric,
# int-quantized W8A8, float-quantized FP8 per channel), repacked at load as Q4_0 / Q8_0 (FP8: BF16).
# make_intq.py writes each from an F32 directory (`gen-model --format hf` of tiny-tekken, a Llama; GPTQ also of
# tiny-qwen3moe's experts), packed as each format's own tools pack it, and, computed on its own in Python, the F32
# twin the checkpoint means (scale * (q - zero) of each weight's group):
#  1. what the engine loaded, written back as F32 (`gen-model --from DIR --dtype f32 --format hf`), is the twin
#     bit for bit: every weight carried exactly (act-order's blocks, whose groups interleave, re-quantised to
#     Q8_0: within 1/254 of the block's largest weight, and info counts them);
#  2. our logits from the checkpoint against llama.cpp's on the twin (as an F32 GGUF): the same weights, ours
#     through the Q4_0 / Q8_0 products (activations rounded to 8 bits) where llama.cpp multiplies in F32;
#  3. generate runs one; malformed ones and the methods the loader does not carry are refused by name.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP qw(decode_json encode_json);
use Parity qw(capture compare_llamacpp edited_copy harness slurp);

my ($B, $engine, $dump) = harness(tokenizer => 1);
my $dir = tempdir(CLEANUP => 1);
my $py = "$FindBin::Bin/make_intq.py";
my $text = 'In 2024 the little robot counted 1234567 stars, then 89 more; "Why?" asked Lily, and it said: '
         . 'because the sky over the old harbour was clear for 3 nights.';

for my $preset (qw(tiny-tekken tiny-qwen3moe)) {
    my ($rc) = capture($dir, $engine, 'gen-model', '--preset', $preset, '--dtype', 'f32', '--out', "$dir/$preset.gguf",
                       '--seed', 3);
    ($rc) = capture($dir, $engine, 'gen-model', '--from', "$dir/$preset.gguf", '--dtype', 'f32', '--format', 'hf',
                    '--out', "$dir/$preset-hf") if $rc == 0;
    is($rc, 0, "$preset: an F32 directory");
}
my (undef, $tok) = capture($dir, $engine, 'tokenize', '--model', "$dir/tiny-tekken.gguf", '--text', $text, '--bos');
my @ids = $tok =~ /(\d+)/g;

# form => [preset, what info says, matrices as q4_0, as q8_0, top-1 floor against llama.cpp]
my $exact = qr/all \d+ 32-weight blocks exact/;
my @forms = (
    [ 'gptq', 'tiny-tekken', 'gptq', 4, 14, 0, $exact ],
    [ 'gptq-act', 'tiny-tekken', 'gptq', 4, 0, 14, qr/(\d+) of \d+ 32-weight blocks re-quantised/ ],
    [ 'gptq8', 'tiny-tekken', 'gptq', 8, 0, 14, $exact ],
    [ 'awq', 'tiny-tekken', 'awq', 4, 0, 14, $exact ],
    [ 'ct-w4a16', 'tiny-tekken', 'compressed-tensors', 4, 14, 0, $exact ],
    [ 'ct-w4a16-asym', 'tiny-tekken', 'compressed-tensors', 4, 0, 14, $exact ],
    [ 'ct-w8a8', 'tiny-tekken', 'compressed-tensors', 8, 0, 14, $exact ],
    [ 'ct-fp8', 'tiny-tekken', 'compressed-tensors', 0, 0, 0, undef ],
    [ 'gptq', 'tiny-qwen3moe', 'gptq', 4, 56, 0, $exact ],
);
for my $f (@forms) {
    my ($form, $preset, $method, $bits, $n4, $n8, $blocks) = @$f;
    my $label = "$preset $form";
    my ($q, $ref) = ("$dir/$preset-$form", "$dir/$preset-$form-ref");
    my $n = $n4 + $n8 || 14;
    my ($rp, $out) = capture($dir, 'python3', $py, $form, "$dir/$preset-hf", $q, $ref);
    ok($rp == 0 && $out =~ /^$n matrices quantised as \Q$form\E$/m, "$label: a checkpoint of $n matrices and its twin")
        or diag($out, `tail -3 $dir/stderr`);
    my (undef, $info) = capture($dir, $engine, 'info', '--model', $q);
    if ($blocks) {
        like($info, qr/^converted at load: $n \Q$method\E matrices of $bits-bit integers repacked: $n4 as q4_0, $n8 as q8_0; $blocks/m,
             "$label: info says how it was repacked");
    } else {
        like($info, qr/^converted at load: 14 FP8 \(e4m3\) matrices dequantised to bf16 with their scales \(compressed-tensors\)$/m,
             "$label: info says how it was converted");
    }
    like($info, qr/^the checkpoint quantises activations too: run weight-only/m, "$label: info says activations stay "
         . 'in float') if $form =~ /w8a8|fp8/;
    my ($rw) = capture($dir, $engine, 'gen-model', '--from', $q, '--dtype', 'f32', '--format', 'hf', '--out', "$q-back");
    my (undef, $cmp) = capture($dir, 'python3', $py, 'compare', $ref, "$q-back");
    my ($same, $total, $worst) = $cmp =~ /^(\d+) of (\d+) tensors identical; largest difference (\S+)/m;
    if ($form eq 'gptq-act') { # (Q8_0's rounding: half a step, 1/254 of the block's largest weight, and its
                               # fp16 scale's rounding over 127 steps, 2^-11 of it: 1/226 at most)
        ok($rw == 0 && defined $worst && $worst > 0 && $worst <= 1 / 226,
           "$label: the loaded weights within 1/226 of the twin's largest (act-order's interleaved groups "
           . "re-quantised): $cmp");
    } else {
        ok($rw == 0 && defined $same && $same == $total, "$label: the loaded weights are the twin's bit for bit: $cmp");
    }
    next unless $form =~ /^(gptq|awq|ct-fp8)$/; # (one of each kind the products see: Q4_0, Q8_0, BF16)
    my ($rg) = capture($dir, $engine, 'gen-model', '--from', $ref, '--dtype', 'f32', '--out', "$ref.gguf",
                       '--tokenizer', '../shared/tokenizers/llama3/tokenizer.json');
    is($rg, 0, "$label: the twin as an F32 GGUF");
    # (ours multiplies Q4_0 / Q8_0 rows by activations rounded to 8 bits, llama.cpp the twin's F32)
    compare_llamacpp(dir => $dir, dump => $dump, label => "$label against llama.cpp on its F32 twin",
                     model => "$ref.gguf", ours => $q, ids => \@ids, vocab => 128256,
                     min_top1 => $preset =~ /moe/ ? 0.8 : 0.9, max_mean => 0.02, max_dp => 0.1, exact => 1);
    # (measured: 51, 50 and 51 of 51 for tiny-tekken's, mean |dp| 0.0094, 0.0138, 0.0033; the MoE 44 of 51,
    # 0.0096: its random router's choices flip where the activations' rounding moves two experts' scores past
    # each other; on a Q4_0 GGUF holding the same blocks ours and llama.cpp, both rounding activations, agree on
    # 47 of 51, and on the F32 twin on 51 of 51)
}

system('cp', '../shared/tokenizers/llama3/tokenizer.json', '../shared/tokenizers/llama3/tokenizer_config.json',
       "$dir/tiny-tekken-gptq");
my ($rg, $gen) = capture($dir, $engine, 'generate', '--model', "$dir/tiny-tekken-gptq", '--prompt',
                         'Once upon a time', '--max-tokens', 8, '--output-ids', '--ignore-eos');
my @g = split ' ', $gen;
ok($rg == 0 && @g == 8, 'generate runs the GPTQ directory: ' . scalar(@g) . ' ids');

# generate and serve defer conversions (LLM_LOAD_DEFER_KQ): asymmetric 4-bit then becomes ggml's Q4_1 blocks,
# which the CUDA backend takes (make test-emu), and the CPU's Q8_0 from them keeps each block's scale: the
# logits the same bits as from the Q8_0 made at load (logits_dump --no-defer 1, as info and gen-model load)
{
    open my $fh, '>:raw', "$dir/ids.i32" or die $!;
    print $fh pack('l<*', @ids);
    close $fh;
    for my $form (qw(awq ct-w4a16-asym)) {
        my @out;
        for my $nd (0, 1) {
            capture($dir, $dump, '--backend', 'cpu', '--model', "$dir/tiny-tekken-$form", '--ids', "$dir/ids.i32",
                    '--out', "$dir/defer$nd.f32", '--decode', 4, '--no-defer', $nd);
            push @out, slurp("$dir/defer$nd.f32");
        }
        ok(length($out[0]) > 1000 && $out[0] eq $out[1], "$form: deferred through Q4_1, the CPU's logits the same bits");
    }
}

# the older tools' own files beside config.json: AutoGPTQ's quantize_config.json, AutoAWQ's quant_config.json
# (w_bit, q_group_size); neither, and the tensors quantised: refused saying so
for my $s ([ 'gptq', 'quantize_config.json', sub { my %q = %{ $_[0] }; delete $q{quant_method}; \%q } ],
           [ 'awq', 'quant_config.json', sub { { zero_point => JSON::PP::true, q_group_size => $_[0]{group_size},
                                                 w_bit => 4, version => 'GEMM' } } ],
           [ 'gptq', undef, undef ]) {
    my ($form, $file, $make) = @$s;
    my $to = "$dir/side-$form-" . ($file // 'none');
    system('rm', '-rf', $to);
    system('cp', '-r', "$dir/tiny-tekken-$form", $to);
    my $cfg = decode_json(slurp("$to/config.json"));
    my $q = delete $cfg->{quantization_config};
    open my $fh, '>', "$to/config.json" or die $!;
    print $fh encode_json($cfg);
    close $fh;
    if ($file) {
        open $fh, '>', "$to/$file" or die $!;
        print $fh encode_json($make->($q));
        close $fh;
    }
    my ($rc, $info) = capture($dir, $engine, 'info', '--model', $to);
    if ($file) {
        like($info, qr/^converted at load: 14 $form matrices of 4-bit integers repacked: .*all \d+ 32-weight blocks exact$/m,
             "$form: its quantisation read from $file");
    } else {
        my $msg = slurp("$dir/stderr");
        ok($rc != 0 && $msg =~ /is quantised \(\S+\.qweight\) but config.json has no quantization_config/,
           'qweight tensors without any quantisation config: refused saying so: ' . (split /\n/, $msg)[-1]);
    }
}

# Mistral Small 3's multimodal layout (the text model's config in text_config, the tensors under language_model)
# with the quantisation at the top level, as RedHatAI's Mistral-Small-3.1 W4A16 has it
{
    my $m3 = "$dir/mistral3-ct-w4a16";
    my ($rp) = capture($dir, 'python3', $py, 'wrap-mistral3', "$dir/tiny-tekken-ct-w4a16", $m3);
    my (undef, $info) = capture($dir, $engine, 'info', '--model', $m3);
    like($info, qr/^converted at load: 14 compressed-tensors matrices of 4-bit integers repacked: 14 as q4_0/m,
         'mistral3 layout: the top-level quantization_config applies to its text model');
    my ($rw) = capture($dir, $engine, 'gen-model', '--from', $m3, '--dtype', 'f32', '--format', 'hf', '--out',
                       "$m3-back");
    my (undef, $cmp) = capture($dir, 'python3', $py, 'compare', "$dir/tiny-tekken-ct-w4a16-ref", "$m3-back");
    ok($rp == 0 && $rw == 0 && $cmp =~ /^20 of 20 tensors identical/m, "mistral3 layout: its twin's weights: $cmp");
}

# hostile headers: digits of the safetensors header changed at random (shapes, offsets), or a tensor's shape
# swapped or halved and doubled (its bytes still matching: the packed forms' own checks), in each packed form;
# every load fails with a message or loads, none crashes
{
    my ($clean, $loaded, $n) = (1, 0, 0);
    srand(11);
    for my $form (qw(gptq gptq-act awq ct-w4a16 ct-w4a16-asym ct-w8a8)) {
        my $src = slurp("$dir/tiny-tekken-$form/model.safetensors");
        my $hl = unpack('Q<', $src);
        my $hdr = substr($src, 8, $hl);
        my @digits = grep { substr($hdr, $_, 1) =~ /\d/ } 0 .. length($hdr) - 1;
        my $j = decode_json($hdr);
        my @two = grep { ref $j->{$_} eq 'HASH' && @{ $j->{$_}{shape} } == 2 } sort keys %$j;
        for my $it (1 .. 24) {
            my $h = $hdr;
            if ($it % 2) {
                substr($h, $digits[int(rand(@digits))], 1) = int(rand(10)) for 1 .. 1 + int(rand(3));
            } else {
                my $k = decode_json($hdr);
                my $sh = $k->{ $two[int(rand(@two))] }{shape};
                my $how = int(rand(3));
                if ($how == 0) { @$sh = reverse @$sh }
                elsif ($how == 1 && $sh->[1] % 2 == 0) { $sh->[0] *= 2; $sh->[1] /= 2 }
                elsif ($sh->[0] % 2 == 0) { $sh->[0] /= 2; $sh->[1] *= 2 }
                $h = encode_json($k);
                $h .= ' ' x ((8 - length($h) % 8) % 8);
            }
            my $to = "$dir/fuzz";
            system('rm', '-rf', $to);
            mkdir $to;
            system('cp', "$dir/tiny-tekken-$form/config.json", $to);
            open my $fh, '>:raw', "$to/model.safetensors" or die $!;
            print $fh pack('Q<', length($h)), $h, substr($src, 8 + $hl);
            close $fh;
            system("'$engine' info --model '$to' >/dev/null 2>'$dir/stderr'"); # ($?: a signal shows)
            my ($st, $msg) = ($?, slurp("$dir/stderr"));
            $n++;
            $loaded++ if $st == 0;
            $clean = 0, diag("$form: status $st: $msg") unless $st == 0 || ($st == 256 && $msg =~ /^error: /m);
        }
    }
    ok($clean, "$n packed checkpoints with altered headers fail with a message or load ($loaded loaded)");
}

# refused by name
sub bad_copy { # (edit_cfg gets the quantization_config, then the whole config)
    my ($from, $name, $edit_cfg, $edit_st) = @_;
    return edited_copy("$dir/$from", "$dir/bad-$name", $edit_cfg && sub { $edit_cfg->($_[0]{quantization_config}, $_[0]) },
                       $edit_st);
}
my $b = 'model.layers.1.self_attn.q_proj';
my ($g, $a, $c) = ('tiny-tekken-gptq', 'tiny-tekken-awq', 'tiny-tekken-ct-w4a16');
for my $t (
    [ $g, 'bnb', sub { $_[0]{quant_method} = 'bitsandbytes' }, undef, qr/quant_method 'bitsandbytes' is not supported/ ],
    [ $g, 'bits3', sub { $_[0]{bits} = 3 }, undef, qr/gptq with 3-bit weights is not supported/ ],
    [ $g, 'marlin', sub { $_[0]{checkpoint_format} = 'marlin' }, undef, qr/gptq checkpoint_format 'marlin'/ ],
    [ $g, 'groups', sub { $_[0]{group_size} = 32 }, sub { delete $_[0]{"$b.g_idx"} }, qr/\Q$b\E has 1 groups of scales; 64 columns in groups of 32 make 2/ ],
    [ $g, 'noqzeros', undef, sub { delete $_[0]{"$b.qzeros"} }, qr/\Q$b\E: qweight \[8, 64\] needs scales \[groups, 64\] and qzeros/ ],
    [ $g, 'gidx', undef, sub { my ($h, $d) = @_; substr($$d, $h->{"$b.g_idx"}{data_offsets}[0], 4) = pack('l<', 9) },
      qr/\Q$b\E: a g_idx group out of range/ ],
    [ $g, 'nanscale', undef, sub { my ($h, $d) = @_; substr($$d, $h->{"$b.scales"}{data_offsets}[0] + 2, 2) = "\x00\x7e" },
      qr/\Q$b\E: a scale that is not finite/ ],
    [ $a, 'gemv', sub { $_[0]{version} = 'gemv' }, undef, qr/awq version 'gemv' is not supported/ ],
    [ $a, 'nozero', sub { $_[0]{zero_point} = JSON::PP::false }, undef, qr/awq without zero points/ ],
    [ $c, 'sparse', sub { $_[0]{sparsity_config} = { format => 'sparse-24-bitmask' } }, undef,
      qr/sparsity_config \(format 'sparse-24-bitmask'\) is not supported/ ],
    [ $c, 'rotated', sub { $_[0]{transform_config} = { config_groups => { u => {} } } }, undef,
      qr/transform_config \(rotated weights\) is not supported/ ],
    [ $c, 'nvfp4', sub { $_[0]{config_groups}{group_0}{weights}{type} = 'float';
                         $_[0]{config_groups}{group_0}{format} = 'nvfp4-pack-quantized' }, undef,
      qr/compressed-tensors format 'nvfp4-pack-quantized' is not supported/ ],
    [ $c, 'noscale', undef, sub { delete $_[0]{"$b.weight_scale"} }, qr/\Q$b\E needs weight_scale \[64, groups\]/ ],
) {
    my ($from, $name, $ec, $es, $want) = @$t;
    my $d = bad_copy($from, $name, $ec, $es);
    my ($rc) = capture($dir, $engine, 'info', '--model', $d);
    my $msg = slurp("$dir/stderr");
    ok($rc != 0 && $msg =~ $want, "refused ($name): " . (split /\n/, $msg)[-1]);
}
done_testing();
