#!/usr/bin/perl
# The context and KV-cache options of generate and serve: --ctx-size lowers
# the tokens a sequence may hold (prompt and output) below the model's, and
# refuses more than the model's; --kv-cache-dtype picks f16, f32 or q8_0 (auto: f16,
# f32 for an all-F32 model such as stories260K) and refuses anything else; serve
# with a q8_0 cache gives generate's tokens with one.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use Test::More;
require "$FindBin::Bin/lib.pl";
$SIG{PIPE} = "IGNORE";

our ($BUILD, $MODEL);
plan skip_all => "$BUILD/llm-engine not built" unless -x "$BUILD/llm-engine" && -x "$BUILD/llm-client";
my $dir = tempdir(CLEANUP => 1);
my $E = "$BUILD/llm-engine";

sub run_gen {
    my (@args) = @_;
    my $out = `$E generate --model $MODEL --prompt-ids 1,2,3,4,5,6,7,8,9,10 --threads 1 --output-ids @args 2>$dir/gen.err`;
    return ($? >> 8, $out, slurp("$dir/gen.err"));
}

my ($rc, $out, $err) = run_gen('--max-tokens', 100, '--ignore-eos', '--ctx-size', 16);
is($rc, 0, 'generate --ctx-size 16 runs');
is(scalar(split ' ', $out), 6, 'a 10-token prompt in a 16-token context: 6 tokens generated') or diag($err);
like($err, qr/f32 KV cache/, 'stories260K (all F32): the KV cache is f32 by default');
($rc, $out, $err) = run_gen('--max-tokens', 4, '--kv-cache-dtype', 'f16');
ok($rc == 0 && $err =~ /f16 KV cache/, '--kv-cache-dtype f16: an f16 KV cache') or diag($err);
($rc, $out, $err) = run_gen('--max-tokens', 4, '--ctx-size', 513);
ok($rc != 0 && $err =~ /more than the model's context of 512/, "--ctx-size past the model's context: $err");
($rc, $out, $err) = run_gen('--max-tokens', 4, '--kv-cache-dtype', 'q4_0');
ok($rc != 0 && $err =~ /--kv-cache-dtype must be auto, f16, f32 or q8_0/, "a bad --kv-cache-dtype: $err");
my $q8_ids = `$E generate --model $MODEL --prompt '$main::PROMPT' --max-tokens 40 --ignore-eos --threads 1 --output-ids --kv-cache-dtype q8_0 2>$dir/gen.err`;
ok($? == 0 && slurp("$dir/gen.err") =~ /q8_0 KV cache/, '--kv-cache-dtype q8_0: a q8_0 KV cache') or diag(slurp("$dir/gen.err"));

# serve: the context the segment announces, and a request that runs into it.
my $name = "ctx-$$";
my $pid = spawn_cmd("$dir/serve.out", "$dir/serve.err", $E, 'serve', '--model', $MODEL, '--shm', $name,
                    '--threads', 1, '--ctx-size', 64, '--kv-cache-dtype', 'f16', '--pid-file', "$dir/serve.pid");
ok(defined wait_ready($name, 30), 'serve --ctx-size 64 --kv-cache-dtype f16: READY') or BAIL_OUT(slurp("$dir/serve.err"));
like(slurp("$dir/serve.err"), qr/context 64\n/, 'the engine announces a context of 64 tokens');
my $ids = `$E tokenize --model $MODEL --text '$main::PROMPT' --bos`;
my $n_prompt = () = $ids =~ /\d+/g;
my $resp = `$BUILD/llm-client --shm $name --model $MODEL --prompt '$main::PROMPT' --max-tokens 200 --ignore-eos --timeout-ms 20000`;
my ($gen) = $resp =~ /"ids":\[([\d,]*)\]/;
my $n_gen = defined $gen ? scalar(split /,/, $gen) : -1;
ok($resp =~ /"finish_reason":"length"/ && $n_prompt + $n_gen == 64,
   "max_tokens 200 stops at the context: $n_prompt prompt + $n_gen generated tokens");
stop_engine($pid);
is(segments($name), 0, 'segment removed');

# serve over a q8_0 cache: the tokens generate gives over one (the same prompt, greedy)
$name = "ctxq8-$$";
$pid = spawn_cmd("$dir/serveq.out", "$dir/serveq.err", $E, 'serve', '--model', $MODEL, '--shm', $name,
                 '--threads', 1, '--kv-cache-dtype', 'q8_0', '--pid-file', "$dir/serveq.pid");
ok(defined wait_ready($name, 30), 'serve --kv-cache-dtype q8_0: READY') or BAIL_OUT(slurp("$dir/serveq.err"));
$resp = `$BUILD/llm-client --shm $name --model $MODEL --prompt '$main::PROMPT' --max-tokens 40 --ignore-eos --timeout-ms 20000`;
($gen) = $resp =~ /"ids":\[([\d,]*)\]/;
my @want = $q8_ids =~ /(\d+)/g;
ok(@want == 40 && join(',', split(/,/, $gen // '')) eq join(',', @want), 'serve over a q8_0 cache: generate\'s 40 tokens')
    or diag("serve: ", $gen // 'none', "\ngenerate: @want");
stop_engine($pid);
is(segments($name), 0, 'segment removed');
done_testing();
