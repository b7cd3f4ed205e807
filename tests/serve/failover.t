#!/usr/bin/perl
# A request through nginx whose engine worker dies (kill -9) while the request waits in its queue, before its
# first token: the supervisor starts a new worker (a new generation), nginx re-attaches, and the request starts
# again there (the same prompt and parameters): the client gets `llm-engine generate`'s text, not a 503. The
# error log says what happened.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use HTTP::Tiny;
use JSON::PP;
use Test::More;
require "$FindBin::Bin/lib.pl";
$SIG{PIPE} = "IGNORE";

our ($BUILD, $MODEL, $PROMPT);
plan skip_all => "$BUILD/ngx_http_llm_module.so not built" unless -f "$BUILD/ngx_http_llm_module.so";
my $dir = tempdir(CLEANUP => 1);
my $name = "fo-$$";
my $pidf = "$dir/worker.pid";
my $sup = spawn_cmd("$dir/engine.out", "$dir/engine.err", "$BUILD/llm-engine", 'serve', '--model', $MODEL,
                    '--shm', $name, '--pid-file', $pidf, '--threads', 1, '--slots', 16);
ok(defined wait_ready($name, 30), 'engine under its supervisor: READY') or BAIL_OUT(slurp("$dir/engine.err"));
my ($npid, $port) = start_nginx($dir, "load_module $ENV{PWD}/$BUILD/ngx_http_llm_module.so;",
                                "location / { llm_api; llm_engine $name; llm_model_path $MODEL; }");
my $want = `$BUILD/llm-engine generate --model $MODEL --prompt '$PROMPT' --max-tokens 16 --temperature 0 --threads 1 2>/dev/null`;
$want =~ s/\n\z//;
my $body = qq({"prompt": "$PROMPT", "max_tokens": 16, "temperature": 0});

# the worker stopped, so the request waits in its queue; then killed: the supervisor starts another
my $w = read_pid($pidf);
kill 'STOP', $w;
my ($s, $busy) = post_waiting($port, $body, sub {
    my $m = HTTP::Tiny->new(timeout => 5)->get("http://127.0.0.1:$port/metrics")->{content} // '';
    $m =~ /^llm_slots_in_use (\d+)$/m ? $1 : 0;
});
is($busy, 1, 'the request waits in the stopped worker');
kill 'KILL', $w;
my ($raw, $json) = answer($s);
my ($st) = $raw =~ m{^HTTP/1\.1 (\d+)};
is($st, 200, 'the worker killed before the first token: 200 (started again on its successor)');
is(eval { decode_json($json)->{choices}[0]{text} } // '', $want, "... with generate's text");
isnt(read_pid($pidf), $w, 'a new worker');
like(slurp("$dir/logs/error.log"), qr/engine "\Q$name\E" went away before the request's first token; it goes on on "\Q$name\E" \(restarted\)/,
     'the error log says so');
done_testing();
stop_nginx($npid);
stop_engine($sup);
