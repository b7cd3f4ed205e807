#!/usr/bin/perl
# A request through nginx whose engine worker dies (kill -9) while the request waits in its queue, before its
# first token: the supervisor starts a new worker (a new generation), nginx re-attaches, and the request starts
# again there (the same prompt and parameters): the client gets `llm-engine generate`'s text, not a 503. The
# same for an embeddings request of 40 inputs (16 in the engine at a time, its slots): the same vectors as before. The error log says what happened.
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

# embeddings: 40 inputs, 16 of them waiting in the stopped worker (its slots), which is killed: they start again
# on its successor, and the other 24 after them
my $emb = encode_json({ input => [ map { "$PROMPT there was a dog number $_" } 1 .. 40 ] });
my $post = sub {
    HTTP::Tiny->new(timeout => 30)->post("http://127.0.0.1:$port/v1/embeddings",
                                         { headers => { 'content-type' => 'application/json' }, content => $emb });
};
my $before = $post->();
is($before->{status}, 200, 'embeddings of 40 inputs: 200');
sub vectors { my $d = eval { decode_json($_[0])->{data} }; return map { $_->{embedding} } @{ $d // [] } }
my @vecs = vectors($before->{content});
is(scalar(@vecs), 40, '... 40 vectors');
$w = read_pid($pidf);
kill 'STOP', $w;
($s, $busy) = post_waiting($port, $emb, sub {
    my $m = HTTP::Tiny->new(timeout => 5)->get("http://127.0.0.1:$port/metrics")->{content} // '';
    $m =~ /^llm_slots_in_use (\d+)$/m ? $1 : 0;
}, 16, '/v1/embeddings');
is($busy, 16, 'an embeddings request of 40 inputs waits in the stopped worker, 16 of them in its slots');
kill 'KILL', $w;
($raw, $json) = answer($s);
($st) = $raw =~ m{^HTTP/1\.1 (\d+)};
is($st, 200, 'the worker killed: 200 (its inputs started again on its successor)');
my @again = vectors($json);
is(scalar(@again), 40, '... 40 vectors');
my $maxd = 0;
for my $i (0 .. $#vecs) {
    for my $k (0 .. $#{ $vecs[$i] }) {
        my $d = abs($vecs[$i][$k] - ($again[$i][$k] // 1e9));
        $maxd = $d if $d > $maxd;
    }
}
ok($maxd < 1e-6, "... the vectors of before (max |diff| $maxd)");
like(slurp("$dir/logs/error.log"), qr/engine "\Q$name\E" went away with 40 of the request's 40 inputs to do; they go on on "\Q$name\E" \(restarted\)/,
     'the error log says so');
done_testing();
stop_nginx($npid);
stop_engine($sup);
