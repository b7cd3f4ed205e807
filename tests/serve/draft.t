#!/usr/bin/perl
# serve --draft-model: the options refused where they cannot work (another vocabulary, an encoder, both kinds
# of drafting, --draft-tokens or --draft-fixed alone, a truncated file), and a served run with a draft that is stories260K
# re-saved in Q8_0 (the same weights, rounded: it agrees with the target most of the time, not always): four
# concurrent greedy requests give `llm-engine generate`'s ids, and the engine's last line counts the drafts.
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

sub refused {
    my ($why, $want, @args) = @_;
    my $out = `$E serve --model $MODEL --shm draftbad-$$ --no-supervise --threads 1 @args 2>&1`;
    my $rc = $? >> 8;
    ok($rc != 0 && $out =~ $want, "$why: refused (exit $rc)") or diag($out);
}

system("$E gen-model --preset tiny-llama3 --dtype q8_0 --seed 3 --out $dir/llama3.gguf >/dev/null 2>&1") == 0
    or BAIL_OUT('gen-model tiny-llama3');
system("$E gen-model --preset tiny-bert --dtype f32 --seed 5 --out $dir/bert.gguf >/dev/null 2>&1") == 0
    or BAIL_OUT('gen-model tiny-bert');
refused('a draft over another vocabulary', qr/not the target's vocabulary \(512 and 128256 tokens/,
        '--draft-model', "$dir/llama3.gguf");
refused('an encoder as draft', qr/speculation is for decoders/, '--draft-model', "$dir/bert.gguf");
refused('n-gram and draft-model drafting at once', qr/two ways of drafting/, '--draft-model', $MODEL,
        '--spec-ngram', 3);
refused('--draft-tokens without a draft', qr/--draft-tokens and --draft-fixed need --draft-model/, '--draft-tokens', 3);
refused('--draft-fixed without a draft', qr/--draft-tokens and --draft-fixed need --draft-model/, '--draft-fixed');
refused('--draft-tokens past 16', qr/draft-tokens/, '--draft-model', $MODEL, '--draft-tokens', 17);
open(my $in, '<:raw', $MODEL) or die;
read($in, my $head, 4096);
close $in;
open(my $out, '>:raw', "$dir/cut.gguf") or die;
print $out $head;
close $out;
refused('a truncated draft model', qr/draft model: .*cut\.gguf/, '--draft-model', "$dir/cut.gguf");

# a served run: stories260K with its Q8_0 copy drafting
system("$E gen-model --from $MODEL --dtype q8_0 --out $dir/draft.gguf >/dev/null 2>&1") == 0
    or BAIL_OUT('gen-model --from stories260K');
my $want = `$E generate --model $MODEL --prompt '$main::PROMPT' --max-tokens 60 --threads 1 --output-ids --ignore-eos 2>/dev/null`;
$want =~ s/\s+/,/g;
$want =~ s/^,|,$//g;
my $name = "draft-$$";
my $pid = spawn_cmd("$dir/serve.out", "$dir/serve.err", $E, 'serve', '--model', $MODEL, '--shm', $name,
                    '--threads', 1, '--draft-model', "$dir/draft.gguf", '--draft-tokens', 5,
                    '--pid-file', "$dir/serve.pid");
ok(defined wait_ready($name, 30), 'serve --draft-model: READY') or BAIL_OUT(slurp("$dir/serve.err"));
like(slurp("$dir/serve.err"), qr/draft model llama: up to 5 drafts a step, its KV pool \d+ blocks of 16/,
     'the engine names its draft model');
my $resp = `$BUILD/llm-client --shm $name --model $MODEL --prompt '$main::PROMPT' --max-tokens 60 --ignore-eos --concurrency 4 --requests 4 --timeout-ms 30000`;
my @ids = $resp =~ /"ids":\[([\d,]*)\]/g;
is(scalar(@ids), 4, 'four answers');
is(scalar(grep { $_ eq $want } @ids), 4, "each is generate's 60 greedy ids") or diag("$resp\nwant $want");
stop_engine($pid);
my $err = slurp("$dir/serve.err");
ok($err =~ /draft-model speculation: (\d+) of (\d+) drafted tokens confirmed/ && $1 > 0 && $1 <= $2,
   "drafts counted: " . ($err =~ /(draft-model speculation: [^\n]*)/ ? $1 : 'none'));
is(segments($name), 0, 'segment removed');

# --draft-fixed: always K drafts; the same ids
$name = "draftfx-$$";
$pid = spawn_cmd("$dir/serve.out", "$dir/serve.err", $E, 'serve', '--model', $MODEL, '--shm', $name,
                 '--threads', 1, '--draft-model', "$dir/draft.gguf", '--draft-tokens', 3, '--draft-fixed',
                 '--pid-file', "$dir/serve.pid");
ok(defined wait_ready($name, 30), 'serve --draft-fixed: READY') or BAIL_OUT(slurp("$dir/serve.err"));
like(slurp("$dir/serve.err"), qr/draft model llama: 3 drafts a step \(fixed\)/, 'the engine says the length is fixed');
$resp = `$BUILD/llm-client --shm $name --model $MODEL --prompt '$main::PROMPT' --max-tokens 60 --ignore-eos --concurrency 2 --requests 2 --timeout-ms 30000`;
@ids = $resp =~ /"ids":\[([\d,]*)\]/g;
is(scalar(grep { $_ eq $want } @ids), 2, "fixed length: both are generate's 60 greedy ids") or diag($resp);
stop_engine($pid);
is(segments($name), 0, 'segment removed');
done_testing();
