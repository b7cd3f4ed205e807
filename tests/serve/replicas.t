#!/usr/bin/perl
# llm_engine A B: two engines of stories260K behind one location. Idle replicas take requests in turn; a
# replica with a request in flight (its worker stopped with SIGSTOP, so the request waits there) is passed
# over for the idle one; SIGTERM to it then (a rolling restart) drains it: the request it held still
# completes, and the other serves every request after, /health 200 "degraded" with each replica listed. A
# replica killed outright while a request waits on it, before its first token: the request goes on on the other. $llm_engine names the one that served (an X-Engine header here);
# /metrics labels each replica's series engine="NAME". Every answer is `llm-engine generate`'s text.
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
my ($A, $B) = ("repa-$$", "repb-$$");
my %pid;
$pid{$_} = replica($dir, $_) for ($A, $B);
my ($npid, $port) = start_nginx($dir, "load_module $ENV{PWD}/$BUILD/ngx_http_llm_module.so;", <<"EOL", <<'EOH');
        location / {
            llm_api;
            llm_engine $A $B;
            llm_model_path $MODEL;
            llm_model_name stories;
            add_header X-Engine \$llm_engine always;
            access_log $dir/logs/llm.log llm;
        }
EOL
    log_format llm '$request_uri $status $llm_engine $llm_model $llm_prompt_tokens $llm_completion_tokens '
                   '$llm_cached_tokens $llm_ttft $llm_finish_reason';
EOH
my $http = HTTP::Tiny->new(timeout => 30);
my $want = `$BUILD/llm-engine generate --model $MODEL --prompt '$PROMPT' --max-tokens 16 --temperature 0 --threads 1 2>/dev/null`;
$want =~ s/\n\z//;
my $body = qq({"prompt": "$PROMPT", "max_tokens": 16, "temperature": 0});

# one completion: (status, X-Engine, text)
sub complete {
    my $res = $http->post("http://127.0.0.1:$port/v1/completions",
                          { headers => { 'content-type' => 'application/json' }, content => $body });
    my $text = eval { decode_json($res->{content})->{choices}[0]{text} } // '';
    return ($res->{status}, $res->{headers}{'x-engine'} // '', $text);
}

# n completions one after another, each checked for generate's text: "status:engine ..."
sub requests {
    my ($n, $why) = @_;
    my @seq;
    for (1 .. $n) {
        my ($st, $eng, $text) = complete();
        push @seq, "$st:$eng";
        is($text, $want, "$why, request $_: generate's text");
    }
    return "@seq";
}

sub metric {
    my ($name, $engine) = @_;
    my $m = $http->get("http://127.0.0.1:$port/metrics")->{content} // '';
    return $m =~ /^\Q$name\E\{engine="\Q$engine\E"\} (\d+)$/m ? $1 : undef;
}

my %before = map { $_ => metric('llm_requests_finished_total', $_) } ($A, $B);
ok(defined $before{$A} && defined $before{$B}, '/metrics has each replica, labelled engine="NAME"');
my @seq;
for (1 .. 6) {
    my ($st, $eng, $text) = complete();
    is($st, 200, "request $_: 200");
    is($text, $want, "request $_: generate's greedy text");
    push @seq, $eng;
}
is("@seq", "$A $B $A $B $A $B", 'idle replicas take requests in turn ($llm_engine)');
$http->get("http://127.0.0.1:$port/health"); # (the last one's log line is written before this is served)
my @log = grep { m{^/v1/completions } } split /\n/, slurp("$dir/logs/llm.log");
is(scalar(@log), 6, 'the access log has the six');
is(scalar(grep { m{^/v1/completions 200 (\S+) stories 5 16 \d+ \d+\.\d{3} length$} } @log), 6,
   'each: $llm_engine $llm_model, 5 prompt and 16 completion tokens, cached, $llm_ttft, finish') or diag(join("\n", @log));
is(join(' ', map { (split / /)[2] } @log), "@seq", '... and the engine each names is the one that answered');
is(metric('llm_requests_finished_total', $A) - $before{$A}, 3, "$A finished 3 of them");
is(metric('llm_requests_finished_total', $B) - $before{$B}, 3, "$B finished 3");
my $h = decode_json($http->get("http://127.0.0.1:$port/health")->{content});
is($h->{status}, 'ok', '/health: ok');
is(join(',', map { "$_->{engine}:$_->{status}" } @{ $h->{engines} // [] }), "$A:ok,$B:ok", '/health lists both');

# A's worker stopped: the next request (A's turn) waits there; while it does, A is busier than B
kill 'STOP', $pid{$A};
my ($s, $busy) = post_waiting($port, $body, sub { metric('llm_slots_in_use', $A) }); # (until it is on A's ring)
is($busy, 1, "the request waits on $A (its slots in use: 1)");
is(requests(4, "with $A busy"), join(' ', ("200:$B") x 4), "a request in flight on $A: the others go to $B");
# a rolling restart: SIGTERM to A, which drains: the request it holds runs to the end, then A exits
kill 'TERM', $pid{$A};
kill 'CONT', $pid{$A};
my ($raw, $json) = answer($s);
like($raw, qr{^HTTP/1\.1 200 .*\r\nX-Engine: \Q$A\E\r\n}s, "SIGTERM to $A: the request it held, 200 from $A");
is(eval { decode_json($json)->{choices}[0]{text} } // '', $want, '... with generate\'s text (drained, not dropped)');
is(wait_for($pid{$A}, 15), 0, "$A drained and exited 0");

# A down: B serves every request; /health 200, degraded, A unavailable
is(requests(3, "with $A down"), join(' ', ("200:$B") x 3), "$A down: every request to $B");
my $sr = $http->post("http://127.0.0.1:$port/v1/completions", { headers => { 'content-type' => 'application/json' },
    content => qq({"prompt": "$PROMPT", "max_tokens": 16, "temperature": 0, "stream": true}) });
like($sr->{content} // '', qr/data: \[DONE\]/, 'a streamed one');
$http->get("http://127.0.0.1:$port/health"); # (its log line is written before this one is served)
like((grep { m{^/v1/completions } } split /\n/, slurp("$dir/logs/llm.log"))[-1] // '',
     qr{^/v1/completions 200 \Q$B\E stories 5 16 \d+ \d+\.\d{3} length$}, '... logged with its 16 tokens (counted as they went)');
my $r = $http->get("http://127.0.0.1:$port/health");
is($r->{status}, 200, '/health with one replica down: 200 (it still serves)');
$h = decode_json($r->{content});
is($h->{status}, 'degraded', '... "degraded"');
is(join(',', map { "$_->{engine}:$_->{status}" } @{ $h->{engines} // [] }), "$A:unavailable,$B:ok", '... A unavailable');
like($http->get("http://127.0.0.1:$port/metrics")->{content}, qr/^llm_engine_up\{engine="\Q$A\E"\} 0\nllm_engine_up\{engine="\Q$B\E"\} 1$/m,
     '/metrics: llm_engine_up 0 and 1');

# A back; B killed (kill -9) while a request waits on it, before its first token: it goes on on A
$pid{$A} = replica($dir, $A); # (back)
$http->get("http://127.0.0.1:$port/health"); # (the workers re-attach)
kill 'STOP', $pid{$B};
($s, $busy) = post_waiting($port, $body, sub { metric('llm_slots_in_use', $B) });
is($busy, 1, "a request waits on $B (ties go in turn: its turn)");
kill 'KILL', $pid{$B};
waitpid($pid{$B}, 0);
($raw, $json) = answer($s);
like($raw, qr{^HTTP/1\.1 200 .*\r\nX-Engine: \Q$A\E\r\n}s, "$B killed before its first token: 200 from $A");
is(eval { decode_json($json)->{choices}[0]{text} } // '', $want, '... with generate\'s text');
like(slurp("$dir/logs/error.log"), qr/engine "\Q$B\E" went away before the request's first token; it goes on on "\Q$A\E"/,
     '... and the error log says so');
unlink "/dev/shm/llm-$B"; # (a killed engine leaves its segment; its successor would replace it)

stop_engine($pid{$A});
my ($st) = complete();
is($st, 503, 'both down: 503');
stop_nginx($npid);
is(segments($A) + segments($B), 0, 'segments removed');
done_testing();
