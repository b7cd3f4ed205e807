#!/usr/bin/perl
# llm-engine serve under its supervisor: kill -9 the worker ten times under a
# little load. Each time the in-flight requests must end promptly (with an
# error, not a hang), the engine must be READY again within 10 s, and no
# segment or slot may leak. Then SIGTERM stops everything cleanly.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use Time::HiRes qw(time sleep);
use Test::More;
require "$FindBin::Bin/lib.pl";
# interrupted or piped into head: still run END (which stops the engine)
$SIG{PIPE} = "IGNORE";
$SIG{INT} = $SIG{TERM} = sub { exit 1 };

our ($BUILD, $MODEL, $PROMPT);
plan skip_all => "$BUILD/llm-engine not built" unless -x "$BUILD/llm-engine" && -x "$BUILD/llm-client";
plan skip_all => "no model $MODEL" unless -f $MODEL;

my $dir = tempdir(CLEANUP => 1);
my $name = "sup-$$";
my $pidf = "$dir/worker.pid";
my $slots = 16;
my $sup = spawn_cmd("$dir/engine.out", "$dir/engine.err", "$BUILD/llm-engine", 'serve', '--model', $MODEL,
                    '--shm', $name, '--pid-file', $pidf, '--threads', '1', '--slots', $slots);
# an aborted test (BAIL_OUT, die) must not leave an engine behind
END { local $?; stop_engine($sup) }
my $t = wait_ready($name, 20);
ok(defined $t, 'engine READY under the supervisor') or BAIL_OUT(slurp("$dir/engine.err"));

my (@ready_s, @drain_s);
for my $round (1 .. 10) {
    my $worker = read_pid($pidf);
    ok(defined $worker && $worker != $sup && kill(0, $worker), "round $round: worker pid $worker from the pid file");
    my $out = "$dir/load$round.out";
    my $n_req = 200;
    my $load = spawn_cmd($out, "$dir/load$round.err", "$BUILD/llm-client", '--shm', $name, '--model', $MODEL,
                         '--prompt', $PROMPT, '--max-tokens', '50', '--ignore-eos', '--concurrency', '4',
                         '--requests', $n_req, '--timeout-ms', '120000');
    # kill once requests are flowing (a few have finished, four are in flight)
    my $tw = time;
    sleep 0.01 while time - $tw < 20 && (() = slurp($out) =~ /\n/g) < 8;
    kill 'KILL', $worker;
    my $t0 = time;
    # the requests in flight at the kill end with an error, promptly
    my $gone;
    while (time - $t0 < 10) {
        if (slurp($out) =~ /"finish_reason":"error"/) { $gone = time - $t0; last }
        sleep 0.01;
    }
    ok(defined $gone, "round $round: in-flight requests ended with an error" .
                      (defined $gone ? sprintf(' after %.2f s', $gone) : ' (none within 10 s)'));
    push @drain_s, $gone // 10;
    my $r = wait_ready($name, 10 - (time - $t0));
    $r = time - $t0 if defined $r; # from the kill
    ok(defined $r, "round $round: READY again within 10 s of the kill" . (defined $r ? sprintf(' (%.2f s)', $r) : ''));
    push @ready_s, $r // 10;
    # the client goes on with the new engine and finishes: no hang
    my $st = wait_for($load, 120);
    ok(defined $st, "round $round: the load client finished (no hang)");
    kill('KILL', $load), waitpid($load, 0) unless defined $st;
    my @lines = split /\n/, slurp($out);
    is(scalar @lines, $n_req, "round $round: every request accounted for");
    my $nw = read_pid($pidf);
    ok(defined $nw && $nw != $worker, "round $round: a new worker ($nw)");
    is(segments($name), 1, "round $round: one segment");
}
diag(sprintf('after kill -9: in-flight requests failed within max %.2f s; READY again in max %.2f s, mean %.2f s',
             (sort { $b <=> $a } @drain_s)[0], (sort { $b <=> $a } @ready_s)[0],
             eval { my $s = 0; $s += $_ for @ready_s; $s / @ready_s }));

# no slot leaked: every slot busy at once, none refused
my $full = `$BUILD/llm-client --shm $name --model $MODEL --prompt '$PROMPT' --max-tokens 20 --concurrency $slots --requests @{[2 * $slots]} 2>&1`;
my @done = grep { /"finish_reason":"(length|stop)"/ } split /\n/, $full;
is(scalar @done, 2 * $slots, "all $slots slots usable at once after the restarts");

my $err = slurp("$dir/engine.err");
my $restarts = () = $err =~ /worker_restart/g;
is($restarts, 10, 'supervisor logged ten restarts');

kill 'TERM', $sup;
my $st = wait_for($sup, 10);
is($st, 0, 'SIGTERM: supervisor and worker stop cleanly');
is(segments($name), 0, 'segment removed');
ok(!-e $pidf, 'pid file removed');
done_testing();
