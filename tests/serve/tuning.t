#!/usr/bin/perl
# Adaptive tuning under a load step: serve a stories110m-shaped q8_0 model
# (generated) on one thread with --slo-tpot-ms, run a low-load phase
# (concurrency 1) and then a high-load one (concurrency 32). The target comes
# from this machine's own speed: both loads are run first on an engine whose
# target cannot be missed, and the target is the geometric mean of their TPOT
# p95s (x1.1, off the histogram's power-of-two bucket bounds). A batch of 32
# on one thread takes about 8-16x the single-request TPOT, so the target sits
# a bucket or more from each side, on a slow machine as on a fast one (a fixed
# 100 ms stopped being missed once the VNNI kernels landed). The knobs in force (read
# from the segment by shm_knobs.c) must hold during the low phase and move the
# way tuner.h's rule 1 says during the high one: max batch size and token
# budget shrink, never below the configured minimum. The interval figures and
# the tuner's decisions are printed; no time is asserted on.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use Time::HiRes qw(time sleep);
use Test::More;
require "$FindBin::Bin/lib.pl";
$SIG{PIPE} = "IGNORE";
$SIG{INT} = $SIG{TERM} = sub { exit 1 };

our ($BUILD, $PROMPT);
plan skip_all => "$BUILD/llm-engine not built" unless -x "$BUILD/llm-engine" && -x "$BUILD/llm-client";
my $cc = $ENV{CC} // 'cc';
plan skip_all => "no C compiler ($cc) for shm_knobs" if system("$cc --version >/dev/null 2>&1") != 0;

my $dir = tempdir(CLEANUP => 1);
my $reader = build_shm_knobs($dir, $cc);
my $model = "$dir/s110m.gguf";
is(system("$BUILD/llm-engine gen-model --preset stories110m --dtype q8_0 --out $model >/dev/null 2>&1"), 0,
   'generated the stories110m-shaped model') or BAIL_OUT('gen-model failed');

my ($max_batch, $min_batch) = (32, 4);
sub start_engine {
    my ($n, $log, $slo) = @_;
    return spawn_cmd("$dir/$log.out", "$dir/$log.err", "$BUILD/llm-engine", 'serve', '--model', $model,
                     '--shm', $n, '--threads', '1', '--slots', 64, '--max-batch-size', $max_batch,
                     '--slo-tpot-ms', $slo, '--tune-min-batch', $min_batch, '--tune-cooldown', 1);
}
my ($name, $sup);
END { local $?; stop_engine($sup) }

# Knobs and histogram buckets from the segment.
sub reading { shm_reading($reader, $name) }

# p95 in ms (bucket upper bound, as the tuner sees it) of the observations between two readings.
sub p95_ms {
    my ($a, $b, $h) = @_;
    my @d = map { $b->{$h}[$_] - $a->{$h}[$_] } 0 .. $#{ $b->{$h} };
    my $n = 0;
    $n += $_ for @d;
    return (0, 0) unless $n;
    my $want = int(0.95 * $n);
    $want = $n - 1 if $want >= $n;
    my $acc = 0;
    for my $i (0 .. $#d) {
        $acc += $d[$i];
        return ((2**$i) / 1000, $n) if $acc > $want;
    }
}

sub knobs { my $r = shift; "max_batch_size $r->{max_batch_size}, batch_timeout_ms $r->{batch_timeout_ms}, " .
                           "max_batched_tokens $r->{max_batched_tokens}" }

sub load {
    my ($tag, $conc, $n_req, $max_tokens) = @_;
    my $pid = spawn_cmd("$dir/$tag.out", "$dir/$tag.err", "$BUILD/llm-client", '--shm', $name, '--model', $model,
                        '--prompt', $PROMPT, '--max-tokens', $max_tokens, '--ignore-eos', '--concurrency', $conc,
                        '--requests', $n_req, '--timeout-ms', '120000');
    my $t0 = time;
    my $st = wait_for($pid, 120);
    kill('KILL', $pid), waitpid($pid, 0) unless defined $st;
    my $done = () = slurp("$dir/$tag.out") =~ /"finish_reason":"length"/g;
    is($done, $n_req, "$tag: $n_req requests at concurrency $conc finished") or diag(slurp("$dir/$tag.err"));
    return time - $t0;
}

sub tuning_lines { grep { /supervisor: tuning:/ } split /\n/, slurp("$dir/engine.err") }

$ENV{BUILD} = $BUILD;

# Calibration: TPOT p95 of both loads on this machine.
$name = "tune-cal-$$";
$sup = start_engine($name, 'calibrate', 100000);
ok(defined wait_ready_model($name, 60), 'calibration engine READY') or BAIL_OUT(slurp("$dir/calibrate.err"));
my $c0 = reading();
load('calibrate-low', 1, 8, 32);
my $c1 = reading();
load('calibrate-high', 32, 32, 24);
my ($cal_low) = p95_ms($c0, $c1, 'tpot');
my ($cal_high) = p95_ms($c1, reading(), 'tpot');
stop_engine($sup);
my $slo_tpot = int(sqrt($cal_low * $cal_high) * 1.1 + 0.5) || 1;
diag(sprintf('calibration: TPOT p95 %.1f ms one request at a time, %.1f ms at 32 -> --slo-tpot-ms %d',
             $cal_low, $cal_high, $slo_tpot));

$name = "tune-$$";
$sup = start_engine($name, 'engine', $slo_tpot);
my $t = wait_ready_model($name, 60);
ok(defined $t, 'engine READY') or BAIL_OUT(slurp("$dir/engine.err"));

my $r0 = reading();
is($r0->{max_batch_size}, $max_batch, "start: max_batch_size $max_batch in force");
diag("start:      " . knobs($r0));

# Phase 1: one request at a time.
my $s1 = load('low', 1, 8, 32);
sleep 2.2; # the supervisor's interval covering the end of the phase, and one idle one, pass
my $r1 = reading();
my ($tpot1, $n1) = p95_ms($r0, $r1, 'tpot');
my ($ttft1) = p95_ms($r0, $r1, 'ttft');
my @lines1 = tuning_lines();
diag(sprintf('low load (concurrency 1, %.1f s): TPOT p95 %.1f ms over %d tokens (target %d ms), TTFT p95 %.1f ms',
             $s1, $tpot1, $n1, $slo_tpot, $ttft1));
diag("after low:  " . knobs($r1));
diag("  $_") for @lines1;
is(scalar(grep { /smaller batches/ } @lines1), 0, 'low load: no shrink decision');
is($r1->{max_batch_size}, $r0->{max_batch_size}, 'low load: max_batch_size held');
is($r1->{max_batched_tokens}, $r0->{max_batched_tokens}, 'low load: max_batched_tokens held');

# Phase 2: the step to concurrency 32.
my $s2 = load('high', 32, 64, 24);
sleep 2.2;
my $r2 = reading();
my ($tpot2, $n2) = p95_ms($r1, $r2, 'tpot');
my ($ttft2) = p95_ms($r1, $r2, 'ttft');
my @lines2 = tuning_lines();
splice(@lines2, 0, scalar @lines1);
diag(sprintf('high load (concurrency 32, %.1f s): TPOT p95 %.1f ms over %d tokens (target %d ms), TTFT p95 %.1f ms',
             $s2, $tpot2, $n2, $slo_tpot, $ttft2));
diag("after high: " . knobs($r2));
diag("  $_") for @lines2;
ok(scalar(grep { /TPOT over target: smaller batches/ } @lines2) >= 1, 'high load: the tuner saw TPOT over target');
cmp_ok($r2->{max_batch_size}, '<', $r1->{max_batch_size}, 'high load: max_batch_size shrank');
cmp_ok($r2->{max_batch_size}, '>=', $min_batch, "high load: max_batch_size not below --tune-min-batch $min_batch");
cmp_ok($r2->{max_batched_tokens}, '<', $r1->{max_batched_tokens}, 'high load: max_batched_tokens shrank');
cmp_ok($r2->{max_batched_tokens}, '>=', $r2->{max_batch_size}, 'token budget not below the batch size');
# the knobs in force are the last decision's (the worker applied it)
is($r2->{applied}, $r2->{seq}, "the worker applied the supervisor's last request (seq $r2->{seq})");
if (@lines2 && $lines2[-1] =~ /max_batch_size \d+ -> (\d+), batch_timeout_ms \d+ -> (\d+), max_batched_tokens \d+ -> (\d+)/) {
    is(knobs($r2), "max_batch_size $1, batch_timeout_ms $2, max_batched_tokens $3",
       'knobs in force = the last decision');
}
else { fail('a decision line with old -> new knobs') }

kill 'TERM', $sup;
is(wait_for($sup, 10), 0, 'SIGTERM: clean stop');
done_testing();

# wait_ready with this test's model (lib.pl's probe uses stories260K).
sub wait_ready_model {
    my ($n, $secs) = @_;
    my $t0 = time;
    while (time - $t0 < $secs) {
        my $out = `$BUILD/llm-client --shm $n --model $model --prompt '$PROMPT' --max-tokens 2 --requests 1 --timeout-ms 5000 2>/dev/null`;
        return time - $t0 if $? == 0 && $out =~ /"finish_reason":"(length|stop)"/;
        sleep 0.1;
    }
    return undef;
}
