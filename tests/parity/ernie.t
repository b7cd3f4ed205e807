#!/usr/bin/env perl
# ERNIE 4.5 dense (GGUF and HF architecture ernie4_5: a Llama whose own checkpoints rotate adjacent pairs, which
# llama.cpp's converter keeps, so neither side permutes q / k) against llama.cpp (node-llama-cpp 3.21.1) on a
# tiny file that `gen-model --preset tiny-ernie4_5` writes (heads wider than the model, 4 x 32 over 64, as
# ERNIE-4.5-0.3B's 16 x 128 over 1024): teacher-forced next-token distributions in F32 (one step, and token by
# token) and Q8_0, the same greedy ids, and the file written back as GGUF (llama.cpp reads it) and as a Hugging
# Face directory (model_type ernie4_5, pairs kept) read back to the same ids. Control: the same file read as
# rotating halves (a plain HF Llama's layout) does not match.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP;
use Parity qw(capture compare_llamacpp greedy_llamacpp greedy_ours harness hf_round_trip slurp);

my ($B, $engine, $dump) = harness(tokenizer => 1);
my $dir = tempdir(CLEANUP => 1);
my $text = 'In 2024 the little robot counted 1234567 stars, then 89 more; "Why?" asked Lily, and it said: '
         . 'because the sky over the old harbour was clear for 3 nights.';
my $n = 40;
my %f;
for my $dt (qw(f32 q8_0)) {
    $f{$dt} = "$dir/ernie-$dt.gguf";
    my ($rc) = capture($dir, $engine, 'gen-model', '--preset', 'tiny-ernie4_5', '--dtype', $dt, '--out', $f{$dt},
                       '--seed', '3');
    is($rc, 0, "gen-model --preset tiny-ernie4_5 --dtype $dt");
}
my (undef, $info) = capture($dir, $engine, 'info', '--model', $f{f32});
like($info, qr/^architecture: ernie4_5\b/m, 'info names the architecture');
like($info, qr/layout adjacent pairs/, 'rotates adjacent pairs');
like($info, qr/heads 4, kv heads 2, head_dim 32/, 'heads wider than the model');
my ($rct, $tok) = capture($dir, $engine, 'tokenize', '--model', $f{f32}, '--text', $text, '--bos');
my @ids = $tok =~ /(\d+)/g;
ok($rct == 0 && @ids > 40, 'the text is ' . scalar(@ids) . ' tokens');

compare_llamacpp(dir => $dir, dump => $dump, label => 'ernie4_5 f32', model => $f{f32}, ids => \@ids,
                 vocab => 128256, min_top1 => 0.97, max_mean => 0.0005, max_dp => 0.005, exact => 1);
compare_llamacpp(dir => $dir, dump => $dump, label => 'ernie4_5 f32 decode', model => $f{f32}, ids => \@ids,
                 vocab => 128256, min_top1 => 0.97, max_mean => 0.0005, max_dp => 0.005, decode => 30, exact => 1);
compare_llamacpp(dir => $dir, dump => $dump, label => 'ernie4_5 q8_0', model => $f{q8_0}, ids => \@ids,
                 vocab => 128256, min_top1 => 0.9, max_mean => 0.03, max_dp => 0.2);
my ($rc1, $a) = greedy_ours($dir, $engine, $n, $f{f32}, \@ids, '--kv-cache-dtype', 'f32');
ok($rc1 == 0 && @$a == $n, "we generate $n ids");
is_deeply($a, greedy_llamacpp($dir, $n, $f{f32}, \@ids, 1), "the same $n greedy ids as llama.cpp");

my $re = "$dir/re-ernie.gguf";
my ($rc) = capture($dir, $engine, 'gen-model', '--from', $f{f32}, '--dtype', 'f32', '--out', $re);
my (undef, $got) = greedy_ours($dir, $engine, $n, $re, \@ids, '--kv-cache-dtype', 'f32');
ok($rc == 0 && "@$got" eq "@$a", 're-saved as GGUF, the same ids');
is_deeply(greedy_llamacpp($dir, $n, $re, \@ids, 1), $a, 'llama.cpp reads the re-saved file: the same ids');
my $hf = hf_round_trip(dir => $dir, engine => $engine, label => 'ernie4_5', model => $f{f32}, ids => \@ids,
                       want => $a, exact => 1, check => sub {
    my ($hf) = @_;
    my $cfg = decode_json(slurp("$hf/config.json"));
    is($cfg->{model_type}, 'ernie4_5', 'config.json says model_type ernie4_5');
    is($cfg->{architectures}[0], 'Ernie4_5ForCausalLM', 'and Ernie4_5ForCausalLM');
});

# control: the Hugging Face directory relabelled a plain llama (rotating halves) gives other ids
my $cfg = decode_json(slurp("$hf/config.json"));
$cfg->{model_type} = 'llama';
open my $fh, '>', "$hf/config.json" or die $!;
print $fh encode_json($cfg);
close $fh;
my (undef, $c) = greedy_ours($dir, $engine, $n, $hf, \@ids, '--kv-cache-dtype', 'f32');
ok(@$c == $n && "@$c" ne "@$a", 'control: read as a llama (halves rotated) the ids differ');
done_testing();
