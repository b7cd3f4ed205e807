#!/usr/bin/env perl
# gpt-oss (GGUF architecture "gpt-oss"): a file written by `gen-model --preset tiny-gpt-oss` (q, k, v, output
# and router biases; a sink per head that takes part in the softmax's sum; a window of 8 on every other layer,
# the first of each pair; 8 experts of 64 with their own biases, 3 per token weighted by the softmax of their
# logits; the experts' clamped SwiGLU, min(g, 7) * sigmoid(1.702 g) * (clamp(u, -7, 7) + 1); heads of 32, q
# 128 wide over a 64-wide model) loads in llama.cpp (node-llama-cpp 3.21.1) and in our engine, and
#  1. teacher-forced over a 44-token text (longer than the window), our next-token distribution (CPU backend)
#     matches llama.cpp's on the same file (F32, and Q8_0 where both round), the whole text as one prefill
#     step and its last 30 tokens decoded one by one;
#  2. greedy ids are llama.cpp's;
#  3. without its sinks or with the plain SwiGLU the logits move (controls: the check above can fail);
#  4. a file we re-save (gen-model --from) reads in llama.cpp with the same results;
#  5. as a Hugging Face directory (GptOssForCausalLM), in both forms transformers reads: unquantised experts
#     ([E][dim][2 ff], gate and up interleaved) give the GGUF's logits exactly, MXFP4 blocks and scales (as
#     OpenAI ships gpt-oss) the same expert values as llama.cpp's MXFP4 file (exactly, through a re-save) and
#     its probabilities; the two forms decode to each other as transformers' dequantisation does
#     (gptoss_hf_forms.py, independent of our C); bad directories are refused by name.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;
use lib "$FindBin::Bin/lib";
use JSON::PP qw(decode_json encode_json);
use Parity qw(compare_llamacpp greedy_llamacpp greedy_ours harness hf_round_trip logits_bytes slurp);

my ($B, $engine, $dump) = harness(tokenizer => 1);
my $dir = tempdir(CLEANUP => 1);
sub capture { return Parity::capture($dir, @_) }

my $text = 'In 2024 the little robot counted 1234567 stars, then 89 more; "Why?" asked Lily, and it said: '
         . 'because the sky over the old harbour was clear for 3 nights.';
my %f;
for my $dt (qw(f32 q8_0)) {
    $f{$dt} = "$dir/tiny-gpt-oss-$dt.gguf";
    my ($rc) = capture($engine, 'gen-model', '--preset', 'tiny-gpt-oss', '--dtype', $dt, '--out', $f{$dt},
                       '--seed', '5');
    is($rc, 0, "gen-model --preset tiny-gpt-oss --dtype $dt");
}
my ($rci, $info) = capture($engine, 'info', '--model', $f{f32});
like($info, qr/^architecture: gpt-oss\b/m, 'info names the architecture');
like($info, qr/mixture of experts: 8 experts of width 64, 3 per token, softmax weights renormalised over those chosen, with biases$/m,
     'info shows the experts and their biases');
like($info, qr/^ffn swiglu-oai\b/m, 'and the clamped SwiGLU');
like($info, qr/sliding window 8 on 2 of 4 layers/, 'and the window on every other layer');
like($info, qr/attention sinks/, 'and the sinks');

my ($rct, $tok) = capture($engine, 'tokenize', '--model', $f{f32}, '--text', $text, '--bos');
my @ids = $tok =~ /(\d+)/g;
ok($rct == 0 && @ids > 40, 'the text is ' . scalar(@ids) . ' tokens');

compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss f32', model => $f{f32}, ids => \@ids,
                 vocab => 128256, min_top1 => 0.97, max_mean => 0.0005, max_dp => 0.005, exact => 1);
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss f32 decode', model => $f{f32}, ids => \@ids,
                 vocab => 128256, min_top1 => 0.97, max_mean => 0.0005, max_dp => 0.005, decode => 30, exact => 1);
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss q8_0', model => $f{q8_0}, ids => \@ids,
                 vocab => 128256, min_top1 => 0.85, max_mean => 0.04, max_dp => 0.3, exact => 1);

# MXFP4 experts (gpt-oss's own format; the rest Q8_0), made by llama.cpp's quantiser (mxfp4_moe): our loader
# turns each MXFP4 block into Q8_0 without rounding (its power of two is the Q8_0 scale, its values the quants)
my $ref = "$B/parity/ggml_ref";
my $libdir = 'bench/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64';
my $mx = "$dir/tiny-gpt-oss-mxfp4.gguf";
my ($rq) = capture($ref, 'quantize', $libdir, $f{f32}, $mx, 'mxfp4_moe');
is($rq, 0, "llama.cpp quantised it to mxfp4_moe");
my ($rcm, $infom) = capture($engine, 'info', '--model', $mx);
like($infom, qr/converted at load: 96 tensors of type mxfp4 re-quantised to q8_0/, 'its 96 expert matrices are mxfp4');
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss mxfp4', model => $mx, ids => \@ids,
                 vocab => 128256, min_top1 => 0.85, max_mean => 0.04, max_dp => 0.3, exact => 1);
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss mxfp4 decode', model => $mx, ids => \@ids,
                 vocab => 128256, min_top1 => 0.85, max_mean => 0.04, max_dp => 0.3, decode => 30, exact => 1);

# re-saved by us (gen-model --from, F32: the experts' MXFP4 values exactly): llama.cpp reads our file, the same
# tensors and keys, and agrees as on its own
my $back = "$dir/tiny-gpt-oss-mxfp4-f32.gguf";
my ($rb) = capture($engine, 'gen-model', '--from', $mx, '--dtype', 'f32', '--out', $back);
is($rb, 0, 'gen-model --from re-saves it in F32');
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss re-saved f32', model => $back, ids => \@ids,
                 vocab => 128256, min_top1 => 0.97, max_mean => 0.0005, max_dp => 0.005, exact => 1);

# gpt-oss's YaRN rope (tiny-gpt-oss-yarn: 4x over 16 positions; the text runs past them)
my $fy = "$dir/tiny-gpt-oss-yarn-f32.gguf";
my ($ry) = capture($engine, 'gen-model', '--preset', 'tiny-gpt-oss-yarn', '--dtype', 'f32', '--out', $fy, '--seed', '5');
is($ry, 0, 'gen-model --preset tiny-gpt-oss-yarn');
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss-yarn f32', model => $fy, ids => \@ids,
                 vocab => 128256, min_top1 => 0.97, max_mean => 0.0005, max_dp => 0.005, exact => 1);

my $n = 40;
my ($rc1, $a) = greedy_ours($dir, $engine, $n, $f{f32}, \@ids, '--kv-cache-dtype', 'f32');
ok($rc1 == 0 && @$a == $n, "we generate $n ids");
is_deeply($a, greedy_llamacpp($dir, $n, $f{f32}, \@ids, 1), "the same $n greedy ids as llama.cpp");

# Hugging Face directories. Unquantised (from the F32 file): the same logits, bit for bit, teacher-forced and
# token by token; the same greedy ids, and back to GGUF for llama.cpp (hf_round_trip)
my $dump_bytes = sub { return logits_bytes($dir, $dump, $_[0], \@ids, 16) }; # (16 decoded one by one)
my $hf = hf_round_trip(dir => $dir, engine => $engine, label => 'gpt-oss', model => $f{f32}, ids => \@ids,
                       want => $a, exact => 1, check => sub {
    my ($d) = @_;
    my $cfg = decode_json(slurp("$d/config.json"));
    is_deeply([ @$cfg{qw(model_type num_local_experts experts_per_token sliding_window swiglu_limit)} ],
              [ 'gpt_oss', 8, 3, 8, 7 ], 'config.json: gpt_oss, 8 experts, 3 a token, a window of 8, the clamp 7');
    is_deeply($cfg->{layer_types}, [ ('sliding_attention', 'full_attention') x 2 ], 'layer_types: every other');
    ok(!exists $cfg->{quantization_config}, 'unquantised experts: no quantization_config');
    my $st = slurp("$d/model.safetensors");
    my $h = decode_json(substr($st, 8, unpack('Q<', $st)));
    is_deeply([ map { $h->{"model.layers.0.$_"}{shape} } qw(mlp.experts.gate_up_proj mlp.experts.down_proj
              mlp.experts.gate_up_proj_bias mlp.router.bias self_attn.sinks) ],
              [ [ 8, 64, 128 ], [ 8, 64, 64 ], [ 8, 128 ], [8], [4] ],
              "transformers' shapes: gate_up_proj [E][dim][2 ff], down_proj [E][ff][dim], biases, sinks");
});
my $want_logits = $dump_bytes->($f{f32});
ok(length($want_logits) > 1000 && $dump_bytes->($hf) eq $want_logits,
   'the directory gives the F32 file\'s logits bit for bit (44 positions, 16 of them decoded)');
my ($rcb) = capture($engine, 'gen-model', '--from', $f{f32}, '--dtype', 'bf16', '--format', 'hf', '--out',
                    "$dir/hf-bf16");
my ($rcg, $g) = greedy_ours($dir, $engine, $n, "$dir/hf-bf16", \@ids);
ok($rcb == 0 && $rcg == 0 && @$g == $n, "a BF16 directory (experts transposed as BF16) generates $n ids");

# MXFP4 (from llama.cpp's mxfp4_moe file, the rest F32): the experts as U8 blocks and scales with
# quantization_config mxfp4; read back, the same expert values (its F32 re-save's logits are those of the
# file's own F32 re-save, bit for bit); our logits from the directory against llama.cpp's on the file
my $hfmx = "$dir/hf-mxfp4";
my ($rh) = capture($engine, 'gen-model', '--from', $mx, '--dtype', 'f32', '--format', 'hf', '--out', $hfmx);
is($rh, 0, 'the MXFP4 file re-saved as a Hugging Face directory');
my $cfgmx = decode_json(slurp("$hfmx/config.json"));
is($cfgmx->{quantization_config}{quant_method}, 'mxfp4', 'quantization_config: mxfp4, as openai/gpt-oss-20b');
my $stmx = slurp("$hfmx/model.safetensors");
my $hmx = decode_json(substr($stmx, 8, unpack('Q<', $stmx)));
is_deeply([ map { [ $hmx->{"model.layers.0.mlp.experts.$_"}{dtype}, $hmx->{"model.layers.0.mlp.experts.$_"}{shape} ] }
            qw(gate_up_proj_blocks gate_up_proj_scales down_proj_blocks down_proj_scales) ],
          [ [ 'U8', [ 8, 128, 2, 16 ] ], [ 'U8', [ 8, 128, 2 ] ], [ 'U8', [ 8, 64, 2, 16 ] ], [ 'U8', [ 8, 64, 2 ] ] ],
          'blocks [E][rows][cols / 32][16] and scales [E][rows][cols / 32], U8');
my ($rim, $infomx) = capture($engine, 'info', '--model', $hfmx);
like($infomx, qr/converted at load: 96 tensors of type mxfp4/, 'read back: 96 MXFP4 expert matrices');
my $hfback = "$dir/hf-mxfp4-back.gguf";
my ($rhb) = capture($engine, 'gen-model', '--from', $hfmx, '--dtype', 'f32', '--out', $hfback, '--tokenizer',
                    '../shared/tokenizers/llama3/tokenizer.json');
my $back_logits = $dump_bytes->($back);
ok($rhb == 0 && length($back_logits) > 1000 && $dump_bytes->($hfback) eq $back_logits,
   'its F32 re-save gives the MXFP4 file\'s F32 re-save\'s logits bit for bit: every expert value kept');
compare_llamacpp(dir => $dir, dump => $dump, label => 'tiny-gpt-oss mxfp4 directory', model => $mx, ours => $hfmx,
                 ids => \@ids, vocab => 128256, min_top1 => 0.85, max_mean => 0.04, max_dp => 0.3, exact => 1);

# the two forms as transformers relates them: the blocks dequantised (FP4 codes, low nibble first, times
# 2^(scale - 127), the last two dimensions swapped) are the unquantised tensors of the same values
my $hfdq = "$dir/hf-mxfp4-plain";
capture($engine, 'gen-model', '--from', $back, '--dtype', 'f32', '--format', 'hf', '--out', $hfdq);
my ($rpy, $pyout) = capture('python3', "$FindBin::Bin/gptoss_hf_forms.py", $hfmx, $hfdq);
is($rpy, 0, 'gptoss_hf_forms.py: the MXFP4 blocks decode to the unquantised experts') or diag($pyout);
like($pyout, qr/^393216 expert weights equal in 4 layers$/m, 'every expert weight compared');

# refused with a message: other quantisations, another clamp, no window, a missing scales tensor, a U8
# tensor where a weight belongs
sub copy_dir { # the header edited, the data as it was (offsets unchanged)
    my ($from, $name, $edit_cfg, $edit_st) = @_;
    return Parity::edited_copy($from, "$dir/$name", $edit_cfg, $edit_st);
}
my @bad = (
    [ 'bnb', sub { $_[0]{quantization_config}{quant_method} = 'bitsandbytes' }, undef,
      qr/quant_method 'bitsandbytes' is not supported/ ],
    [ 'clamp', sub { $_[0]{swiglu_limit} = 5 }, undef, qr/swiglu_limit 5: gpt-oss's clamp is 7/ ],
    [ 'nowindow', sub { delete $_[0]{sliding_window} }, undef, qr/gpt-oss needs a sliding_window/ ],
    [ 'noscales', undef, sub { delete $_[0]{'model.layers.2.mlp.experts.down_proj_scales'} },
      qr/tensor model\.layers\.2\.mlp\.experts\.down_proj_scales is missing/ ],
    [ 'shape', undef, sub { $_[0]{'model.layers.1.mlp.experts.gate_up_proj_scales'}{shape} = [ 8, 64, 4 ] },
      qr/gate_up_proj_scales has another type or shape: gpt-oss needs U8 \[8, 128, 2\]/ ],
    [ 'u8weight', undef, sub {
          my $h = $_[0];
          $h->{'model.layers.0.self_attn.q_proj_scales'} = delete $h->{'model.layers.0.self_attn.q_proj.weight'};
          $h->{'model.layers.0.self_attn.q_proj_scales'}{dtype} = 'U8';
          $h->{'model.layers.0.self_attn.q_proj_scales'}{shape} = [ 128, 256 ];
      }, qr/missing tensor model\.layers\.0\.self_attn\.q_proj\.weight/ ],
);
for my $b (@bad) {
    my ($name, $ec, $es, $want) = @$b;
    my $d = copy_dir($hfmx, "bad-$name", $ec, $es);
    my ($rc) = capture($engine, 'info', '--model', $d);
    my $msg = slurp("$dir/stderr");
    ok($rc != 0 && $msg =~ $want, "refused ($name): " . (split /\n/, $msg)[-1]);
}

# gpt-oss's own rope_scaling says "truncate": false (YaRN's correction range unrounded, as transformers runs
# it): read from config.json, shown by info, and it moves the logits (the YaRN file's range is rounded as
# llama.cpp's GGUF runs it)
my $hfy = "$dir/hf-yarn";
capture($engine, 'gen-model', '--from', $fy, '--dtype', 'f32', '--format', 'hf', '--out', $hfy);
my $yarn_logits = $dump_bytes->($hfy);
ok(length($yarn_logits) > 1000 && $yarn_logits eq $dump_bytes->($fy), 'the YaRN file as a directory: its logits');
my $hfyt = copy_dir($hfy, 'hf-yarn-untruncated', sub { $_[0]{rope_scaling}{truncate} = JSON::PP::false });
my ($riy, $infoy) = capture($engine, 'info', '--model', $hfyt);
like($infoy, qr/yarn scaling factor 4 .*correction range not truncated/, 'info: the range not truncated');
my $unt = $dump_bytes->($hfyt);
ok(length($unt) == length($yarn_logits) && $unt ne $yarn_logits, 'and the logits move with it');

done_testing();
