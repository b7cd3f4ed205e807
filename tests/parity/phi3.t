#!/usr/bin/env perl
# Phi 3 (GGUF architecture phi3: q|k|v one fused matrix attn_qkv, gate|up one fused ffn_up, rotate-half rope)
# against llama.cpp (node-llama-cpp 3.21.1) on tiny files of that layout that `gen-model --preset tiny-phi3`
# writes (Llama 3's vocabulary): teacher-forced next-token distributions in F32, F16, Q8_0 and Q4_0, the same
# greedy ids, and `gen-model --from` writing the fused matrices back (llama.cpp reads the file; we give the
# same ids as from the file written directly in that type); LongRoPE (the 128k models) the same way; each as
# a Hugging Face directory (Phi3ForCausalLM: qkv_proj, gate_up_proj, partial_rotary_factor, rope_scaling
# longrope with original_max_position_embeddings): the file's logits bit for bit, its greedy ids, and back.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP qw(decode_json encode_json);
use Parity qw(capture compare_llamacpp greedy_llamacpp greedy_ours harness hf_round_trip logits_bytes slurp
              token_counts);

my ($B, $engine, $dump) = harness(tokenizer => 1);
my $dir = tempdir(CLEANUP => 1);
my $text = 'In 2024 the little robot counted 1234567 stars, then 89 more; "Why?" asked Lily, and it said: '
         . 'because the sky over the old harbour was clear for 3 nights, and the sea was calm and grey and cold.';
my %f;
for my $dt (qw(f32 f16 q8_0 q4_0)) {
    $f{$dt} = "$dir/tiny-phi3-$dt.gguf";
    my ($rc) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-phi3', '--dtype', $dt, '--out', $f{$dt},
                       '--seed', '11');
    is($rc, 0, "gen-model --preset tiny-phi3 --dtype $dt");
}
my (undef, $info) = capture($dir, $engine, 'info', '--model', $f{f32});
like($info, qr/^architecture: phi3\b/m, 'info names the architecture');
like($info, qr/layout half/, 'rotates halves');
my ($rct, $tok) = capture($dir, $engine, 'tokenize', '--model', $f{f32}, '--text', $text, '--bos');
my @ids = $tok =~ /(\d+)/g;
ok($rct == 0 && @ids > 40, 'the text is ' . scalar(@ids) . ' tokens');

# measured: f32 54 of 54 (|dp| < 1e-4), f16 54 / mean 0.0005, q8_0 53 / 0.0149, q4_0 53 / 0.0173
compare_llamacpp(dir => $dir, dump => $dump, label => 'phi3 f32', model => $f{f32}, ids => \@ids, vocab => 128256,
                 min_top1 => 0.97, max_mean => 0.002, max_dp => 0.02, exact => 1);
compare_llamacpp(dir => $dir, dump => $dump, label => 'phi3 f16', model => $f{f16}, ids => \@ids, vocab => 128256,
                 min_top1 => 0.95, max_mean => 0.005, max_dp => 0.05);
for my $dt (qw(q8_0 q4_0)) {
    compare_llamacpp(dir => $dir, dump => $dump, label => "phi3 $dt", model => $f{$dt}, ids => \@ids,
                     vocab => 128256, min_top1 => 0.9, max_mean => 0.03, max_dp => 0.2);
}

my $n = 40;
my ($rc1, $a) = greedy_ours($dir, $engine, $n, $f{f32}, \@ids, '--kv-cache-dtype', 'f32');
ok($rc1 == 0 && @$a == $n, "we generate $n ids");
is_deeply($a, greedy_llamacpp($dir, $n, $f{f32}, \@ids, 1), "the same $n greedy ids as llama.cpp (F32)");

# gen-model --from: the fused matrices written back
my $re = "$dir/re-q8_0.gguf";
my ($rc) = capture($dir, $engine, 'gen-model', '--from', $f{f32}, '--dtype', 'q8_0', '--out', $re);
is($rc, 0, 'gen-model --from the F32 file --dtype q8_0');
my (undef, $want) = greedy_ours($dir, $engine, $n, $f{q8_0}, \@ids);
my (undef, $got) = greedy_ours($dir, $engine, $n, $re, \@ids);
ok(@$want == $n && "@$got" eq "@$want", 're-saved: the ids of the file written as Q8_0 directly');
compare_llamacpp(dir => $dir, dump => $dump, label => 'phi3 re-saved q8_0', model => $re, ids => \@ids,
                 vocab => 128256, min_top1 => 0.9, max_mean => 0.03, max_dp => 0.2);

# LongRoPE (Phi 3's 128k models): a context of 512 over an original 32, so both sides take the long factors
# and the attention factor; measured: 54 of 54, |dp| < 1e-4 (taking the short factors instead: 17 of 54, mean
# 0.37; leaving the attention factor out: 19 of 54, mean 0.31)
my $lr = "$dir/longrope.gguf";
($rc) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-phi3-longrope', '--dtype', 'f32', '--out', $lr,
                '--seed', '11');
(undef, $info) = capture($dir, $engine, 'info', '--model', $lr);
ok($rc == 0 && $info =~ /longrope orig ctx 32 attention factor 1\.3416\d* \(long factors at context 512\)/,
   'gen-model --preset tiny-phi3-longrope: info shows the scaling');
compare_llamacpp(dir => $dir, dump => $dump, label => 'phi3 LongRoPE f32', model => $lr, ids => \@ids,
                 vocab => 128256, min_top1 => 0.97, max_mean => 0.002, max_dp => 0.02, exact => 1);
my $lr2 = "$dir/longrope-re.gguf";
($rc) = capture($dir, $engine, 'gen-model', '--from', $lr, '--dtype', 'f32', '--out', $lr2);
(undef, $want) = greedy_ours($dir, $engine, $n, $lr, \@ids);
(undef, $got) = greedy_ours($dir, $engine, $n, $lr2, \@ids);
ok($rc == 0 && @$want == $n && "@$got" eq "@$want", 'LongRoPE re-saved: the same ids');

# Phi-4-mini's way: 12 of 16 dims rotating (our q / k rows reordered at load), LongRoPE, GPT-4o's pre-tokenizer.
# measured: 54 of 54, |dp| < 1e-4 (rows not reordered: 28 of 54; the passing dims rotated: 36 of 54)
my $pm = "$dir/phi4-mini.gguf";
($rc) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-phi4-mini', '--dtype', 'f32', '--out', $pm, '--seed', '11');
(undef, $info) = capture($dir, $engine, 'info', '--model', $pm);
ok($rc == 0 && $info =~ /rotating 12 of 16 dims/, 'gen-model --preset tiny-phi4-mini: info shows the partial rotary');
my $cased = "HelloWorld's iPhone met an HTTPServer; 'TIS the JSONParser/XMLReader, 123456 ok.\nCamelCase\r\n  x";
my ($n4, $np) = token_counts($dir, $engine, $pm, $cased);
ok(defined $n4 && defined $np && $np == $n4, "GPT-4o's pre-tokenizer: as many tokens as llama.cpp makes (" .
   ($n4 // '?') . ')');
compare_llamacpp(dir => $dir, dump => $dump, label => 'phi4-mini f32', model => $pm, ids => \@ids, vocab => 128256,
                 min_top1 => 0.97, max_mean => 0.002, max_dp => 0.02, exact => 1);
my $pmq = "$dir/phi4-mini-q8_0.gguf";
($rc) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-phi4-mini', '--dtype', 'q8_0', '--out', $pmq,
                '--seed', '11');
compare_llamacpp(dir => $dir, dump => $dump, label => 'phi4-mini q8_0', model => $pmq, ids => \@ids,
                 vocab => 128256, min_top1 => 0.9, max_mean => 0.03, max_dp => 0.2);
# re-saved: q / k rows written back in the file's order (the F32 copy gives the same ids; llama.cpp reads the
# Q8_0 one as it reads the file written directly in Q8_0)
($rc) = capture($dir, $engine, 'gen-model', '--from', $pm, '--dtype', 'f32', '--out', "$dir/pm-re.gguf");
(undef, $want) = greedy_ours($dir, $engine, $n, $pm, \@ids);
(undef, $got) = greedy_ours($dir, $engine, $n, "$dir/pm-re.gguf", \@ids);
ok($rc == 0 && @$want == $n && "@$got" eq "@$want", 'partial rotary re-saved (F32): the same ids');
($rc) = capture($dir, $engine, 'gen-model', '--from', $pm, '--dtype', 'q8_0', '--out', "$dir/pm-re-q8.gguf");
is($rc, 0, 'partial rotary re-saved as Q8_0');
compare_llamacpp(dir => $dir, dump => $dump, label => 'phi4-mini re-saved q8_0', model => "$dir/pm-re-q8.gguf",
                 ids => \@ids, vocab => 128256, min_top1 => 0.9, max_mean => 0.03, max_dp => 0.2);

# Hugging Face directories (Phi-3 / Phi-3.5-mini / Phi-4 / Phi-4-mini's Phi3ForCausalLM): q|k|v as qkv_proj and
# gate|up as gate_up_proj, stacked by rows; Phi-4-mini's partial rotary as partial_rotary_factor (its q / k rows
# back in the checkpoint's order), LongRoPE as rope_scaling longrope with original_max_position_embeddings at the
# top level (the attention factor computed from the two lengths, as transformers and llama.cpp's converter do)
my $dump_bytes = sub { return logits_bytes($dir, $dump, $_[0], \@ids, 16) }; # (16 decoded one by one)
for my $c ([ 'phi3', $f{f32}, sub {
                 my ($h, $cfg) = @_;
                 is_deeply([ $cfg->{model_type}, $h->{'model.layers.0.self_attn.qkv_proj.weight'}{shape},
                             $h->{'model.layers.0.mlp.gate_up_proj.weight'}{shape} ],
                           [ 'phi3', [ 128, 64 ], [ 384, 64 ] ],
                           'config.json phi3; qkv_proj [q + k + v, dim], gate_up_proj [2 ff, dim]');
             } ],
           [ 'phi3-longrope', $lr, sub {
                 my ($h, $cfg) = @_;
                 is_deeply([ $cfg->{rope_scaling}{type}, scalar @{ $cfg->{rope_scaling}{long_factor} },
                             $cfg->{original_max_position_embeddings}, exists $cfg->{rope_scaling}{attention_factor} ],
                           [ 'longrope', 8, 32, '' ], 'rope_scaling longrope: 8 factors each, over 32 positions');
             } ],
           [ 'phi4-mini', $pm, sub {
                 my ($h, $cfg) = @_;
                 is($cfg->{partial_rotary_factor}, 0.75, 'partial_rotary_factor 0.75');
             } ]) {
    my ($label, $file, $check) = @$c;
    my (undef, $want) = greedy_ours($dir, $engine, $n, $file, \@ids, '--kv-cache-dtype', 'f32');
    my $hf = hf_round_trip(dir => $dir, engine => $engine, label => $label, model => $file, ids => \@ids,
                           want => $want, exact => 1, check => sub {
        my ($d) = @_;
        my $st = slurp("$d/model.safetensors");
        $check->(decode_json(substr($st, 8, unpack('Q<', $st))), decode_json(slurp("$d/config.json")));
    });
    my $logits = $dump_bytes->($file);
    ok(length($logits) > 1000 && $dump_bytes->($hf) eq $logits, "$label: the directory gives the file's logits bit for bit");
}
(undef, $info) = capture($dir, $engine, 'info', '--model', "$dir/hf-phi4-mini");
like($info, qr/rotating 12 of 16 dims/, 'info on the Phi-4-mini directory: the partial rotary');
like($info, qr/longrope orig ctx 32 attention factor 1\.3416\d* \(long factors at context 512\)/, '... and LongRoPE');
# refused: factors that do not cover the rotating frequencies, a partial rotary of an odd width
for my $bad ([ 'factors', sub { pop @{ $_[0]{rope_scaling}{short_factor} } },
               qr/rope_scaling short_factor must be 6 numbers/ ],
             [ 'rotary', sub { $_[0]{partial_rotary_factor} = 0.3 }, qr/partial_rotary_factor 0\.3 of head_dim 16/ ]) {
    my ($name, $edit, $want) = @$bad;
    my $d = "$dir/bad-$name";
    system('rm', '-rf', $d);
    system('cp', '-r', "$dir/hf-phi4-mini", $d);
    my $cfg = decode_json(slurp("$d/config.json"));
    $edit->($cfg);
    open my $fh, '>', "$d/config.json" or die $!;
    print $fh encode_json($cfg);
    close $fh;
    my ($rcb) = capture($dir, $engine, 'info', '--model', $d);
    my $msg = slurp("$dir/stderr");
    ok($rcb != 0 && $msg =~ $want, "refused ($name): " . (split /\n/, $msg)[-1]);
}
done_testing();
