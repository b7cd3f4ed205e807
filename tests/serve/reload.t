#!/usr/bin/perl
# nginx -s reload (SIGHUP to the master) while two replicas of stories260K serve: the new workers go on
# counting where the old ones stopped (the module's counters in /metrics are kept, not read from the old
# configuration's memory, which the master frees), llm_balance prefix still knows which replica took a prompt,
# and 48 streamed requests at once after it are all answered, with no worker dying.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use HTTP::Tiny;
use JSON::PP;
use Test::More;
use Time::HiRes qw(sleep);
require "$FindBin::Bin/lib.pl";
$SIG{PIPE} = "IGNORE";

our ($BUILD, $MODEL, $PROMPT);
plan skip_all => "$BUILD/ngx_http_llm_module.so not built" unless -f "$BUILD/ngx_http_llm_module.so";
my $dir = tempdir(CLEANUP => 1);
my ($C, $D) = ("relc-$$", "reld-$$");
my %pid;
$pid{$_} = replica($dir, $_, 64) for ($C, $D);
my $user = getpwuid($<); # (the workers open the engines' segments, made by this user)
my ($npid, $port) = start_nginx($dir, "load_module $ENV{PWD}/$BUILD/ngx_http_llm_module.so;\nmaster_process on;\n"
                                      . "worker_processes 2;\nuser $user;", <<"EOL");
        location / {
            llm_api;
            llm_engine $C $D;
            llm_model_path $MODEL;
            add_header X-Engine \$llm_engine always;
        }
EOL
my $http = HTTP::Tiny->new(timeout => 30);
my $want = `$BUILD/llm-engine generate --model $MODEL --prompt '$PROMPT' --max-tokens 16 --temperature 0 --threads 1 2>/dev/null`;
$want =~ s/\n\z//;
my $P = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her '
      . 'friends. One day, she saw a big red ball under a tall tree and wanted to play with it.';

sub complete { # (status, X-Engine, text)
    my ($prompt, $stream) = @_;
    my $res = $http->post("http://127.0.0.1:$port/v1/completions", { headers => { 'content-type' => 'application/json' },
        content => encode_json({ prompt => $prompt, max_tokens => 16, temperature => 0, stream => $stream ? JSON::PP::true : JSON::PP::false }) });
    my $text = '';
    if ($stream) { $text .= $1 while ($res->{content} // '') =~ /"text":"((?:[^"\\]|\\.)*)"/g }
    else { $text = eval { decode_json($res->{content})->{choices}[0]{text} } // '' }
    return ($res->{status}, $res->{headers}{'x-engine'} // '', $text);
}

sub metric {
    my ($re) = @_;
    my $m = $http->get("http://127.0.0.1:$port/metrics")->{content} // '';
    return $m =~ /^\Q$re\E (\d+)$/m ? $1 : undef;
}

sub workers { # the master's children
    my @w;
    for my $st (glob '/proc/[0-9]*/stat') {
        open(my $f, '<', $st) or next;
        my $line = <$f> // '';
        push @w, $1 if $line =~ /^(\d+) \(nginx\) \S+ $npid /;
    }
    return join(' ', sort @w);
}

for (1 .. 3) {
    my ($st, $eng, $text) = complete($PROMPT, $_ == 3);
    is("$st $text", "200 $want", "before the reload, request $_: generate's text");
}
my ($st, $X) = complete($P);
is($st, 200, 'a long prompt: 200');
my $completions = metric('llm_http_requests_total{endpoint="completions"}');
my $streams = metric('llm_http_streams_total');
is($completions, 4, '/metrics: 4 completions');
is($streams, 1, '... 1 streamed');

my $before = workers();
like($before, qr/^\d+ \d+$/, "two workers ($before)");
kill 'HUP', $npid;
my $after = '';
for (1 .. 200) { # until none of the old workers is left
    $after = workers();
    last if $after =~ /^\d+ \d+$/ && !grep { $after =~ /\b$_\b/ } split / /, $before;
    sleep 0.05;
}
ok($after =~ /^\d+ \d+$/ && !grep({ $after =~ /\b$_\b/ } split / /, $before), "reloaded: two new workers ($after)");

is(metric('llm_http_requests_total{endpoint="completions"}'), $completions, 'after it, /metrics: the same 4 completions');
is(metric('llm_http_streams_total'), $streams, '... and the same streamed one');
my ($st2, $eng2) = complete($P);
is("$st2 $eng2", "200 $X", "the long prompt again: $X, which took it before the reload");

my @kids;
for my $i (1 .. 48) {
    my $pid = fork() // die "fork: $!";
    if ($pid == 0) {
        my ($s, $e, $t) = complete($PROMPT, $i % 2);
        POSIX::_exit($s == 200 && $t eq $want ? 0 : 1);
    }
    push @kids, $pid;
}
my $bad = 0;
for (@kids) { waitpid($_, 0); $bad++ if $? != 0 }
is($bad, 0, '48 requests at once (half of them streamed): each 200 with generate\'s text');
is(metric('llm_http_requests_total{endpoint="completions"}'), $completions + 49, '/metrics: 4 + 1 + 48 completions');
is(metric('llm_http_streams_total'), $streams + 24, '... 1 + 24 streamed');
is(workers(), $after, 'the same two workers');
unlike(slurp("$dir/logs/error.log"), qr/exited on signal/, 'no worker died');

kill 'QUIT', $npid;
ok(defined wait_for($npid, 15), 'nginx stopped');
stop_engine($pid{$_}) for ($C, $D);
is(segments($C) + segments($D), 0, 'segments removed');
done_testing();
