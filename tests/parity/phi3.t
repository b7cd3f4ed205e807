#!/usr/bin/env perl
# Phi 3 (GGUF architecture phi3: q|k|v one fused matrix attn_qkv, gate|up one fused ffn_up, rotate-half rope)
# against llama.cpp (node-llama-cpp 3.21.1) on tiny files of that layout that `gen-model --preset tiny-phi3`
# writes (Llama 3's vocabulary): teacher-forced next-token distributions in F32, F16, Q8_0 and Q4_0, the same
# greedy ids, and `gen-model --from` writing the fused matrices back (llama.cpp reads the file; we give the
# same ids as from the file written directly in that type); LongRoPE (the 128k models) the same way.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use Parity qw(capture compare_llamacpp greedy_llamacpp greedy_ours harness token_counts);

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
($rc) = capture($dir, $engine, 'gen-model', '--from', $f{f32}, '--dtype', 'f32', '--format', 'hf', '--out',
                "$dir/hf");
ok($rc != 0 && `cat $dir/stderr` =~ /phi3 model is saved as GGUF only/, 'a Hugging Face directory is refused');

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
done_testing();
