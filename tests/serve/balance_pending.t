#!/usr/bin/perl
# llm_balance prefix weighs the replicas' prompt tokens still to compute (llm_prompt_tokens_pending), not only
# their requests in flight: two replicas of stories260K (one request at a time each, --max-batch-size 1), both
# with two requests in flight; C's second has a 306-token prompt waiting behind its first (a long generation),
# D's two are not in its engine yet (D stopped). A new short request goes to D: as many requests, fewer tokens
# of work. C is stopped while its long prompt waits (tried again if its first request ended before that).
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

our ($BUILD, $MODEL, $PROMPT, $STORY);
plan skip_all => "$BUILD/ngx_http_llm_module.so not built" unless -f "$BUILD/ngx_http_llm_module.so";
my $dir = tempdir(CLEANUP => 1);
my ($C, $D) = ("penc-$$", "pend-$$");
my %pid;
$pid{$_} = replica($dir, $_, 16, '--max-batch-size', 1) for ($C, $D);
my ($npid, $port) = start_nginx($dir, "load_module $ENV{PWD}/$BUILD/ngx_http_llm_module.so;", <<"EOL");
        location / {
            llm_api;
            llm_engine $C $D;
            llm_model_path $MODEL;
            add_header X-Engine \$llm_engine always;
        }
        location = /$C/v1/completions { llm_api completions; llm_engine $C; llm_model_path $MODEL; }
        location = /$D/v1/completions { llm_api completions; llm_engine $D; llm_model_path $MODEL; }
EOL
my $http = HTTP::Tiny->new(timeout => 30);
my $LONG = $STORY; # 306 tokens
sub body { my ($prompt, $n) = @_; return encode_json({ prompt => $prompt, max_tokens => $n, temperature => 0, ignore_eos => JSON::PP::true }) }
sub gauge {
    my ($name, $engine) = @_;
    my $m = $http->get("http://127.0.0.1:$port/metrics")->{content} // '';
    return $m =~ /^\Q$name\E\{engine="\Q$engine\E"\} (\d+)$/m ? $1 : undef;
}

# D stopped, two requests waiting in its ring (not in its engine: nothing pending there)
kill 'STOP', $pid{$D};
my @held;
for my $k (1, 2) {
    my ($s, $busy) = post_waiting($port, body($PROMPT, 8), sub { gauge('llm_slots_in_use', $D) }, $k, "/$D/v1/completions");
    is($busy, $k, "$D stopped: request $k waits there");
    push @held, $s;
}
is(gauge('llm_prompt_tokens_pending', $D), 0, "$D: no prompt tokens pending (its engine has not seen them)");

# C: a long generation, then the long prompt behind it; C stopped while that prompt waits (the generation takes
# some 60 ms: polled every 2 ms)
my ($pending, $flight) = (0, 0);
for my $try (1 .. 10) {
    my ($s1) = post_waiting($port, body($PROMPT, 480), sub { gauge('llm_slots_in_use', $C) }, 1, "/$C/v1/completions");
    my ($s2) = post_waiting($port, body($LONG, 8), sub { 0 }, 0, "/$C/v1/completions");
    for (1 .. 500) {
        last if (gauge('llm_prompt_tokens_pending', $C) // 0) >= 300;
        sleep 0.002;
    }
    kill 'STOP', $pid{$C};
    $pending = gauge('llm_prompt_tokens_pending', $C) // 0;
    $flight = gauge('llm_slots_in_use', $C) // 0;
    if ($pending >= 300 && $flight == 2) {
        push @held, $s1, $s2;
        last;
    }
    diag("try $try: $C stopped with $pending prompt tokens pending, $flight requests in flight; again");
    kill 'CONT', $pid{$C};
    answer($_) for ($s1, $s2);
}
ok($pending >= 300 && $flight == 2, "$C stopped with its long prompt waiting: $pending prompt tokens pending, "
                                     . "$flight requests in flight, as $D");

my ($s, $busy) = post_waiting($port, body($PROMPT, 8), sub { gauge('llm_slots_in_use', $D) }, 3);
is($busy, 3, "a new request (no prefix either took): to $D, as busy in requests and with fewer tokens to compute");
push @held, $s;
kill 'CONT', $pid{$_} for ($C, $D);
my @st = map { ((answer($_))[0] =~ m{^HTTP/1\.1 (\d+)})[0] // 0 } @held;
is("@st", join(' ', (200) x 5), 'every held request: 200');

stop_engine($pid{$_}) for ($C, $D);
stop_nginx($npid);
is(segments($C) + segments($D), 0, 'segments removed');
done_testing();
