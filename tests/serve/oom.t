#!/usr/bin/perl
# Out-of-memory self-healing, end to end on the CPU backend with a real
# allocation failure: the engine runs under an address-space limit (prlimit
# --as) a little above what it needs for small steps, so the scratch for a
# 2048-token step cannot be had (malloc returns NULL). The scheduler must cap
# its steps and go on: every request of a 64-wide burst of long prompts
# finishes, none fails, the supervisor records an oom_shrink event, and once
# load falls the cap is lifted again (oom_recover event). A second burst then
# goes through too.
#
# The limit comes from the worker itself: its VmSize after the warm-up (the
# smallest of a few readings, so nothing transient counts), plus 2 MiB, set on
# that same process with prlimit --pid (a 2048-token step of stories260K needs
# ~6.4 MiB of scratch, a 512-token one ~1.6 MiB; the warm-up leaves ~0.6 MiB).
# Measuring another run instead let that run's layout decide whether the
# limit bit at all. A batch-fill
# hold (--preferred-batch-sizes 64) makes each burst's first step the full
# 2048 tokens, so the failure does not depend on how fast the client submits.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use Time::HiRes qw(time sleep);
use Test::More;
require "$FindBin::Bin/lib.pl";
$SIG{PIPE} = "IGNORE";
$SIG{INT} = $SIG{TERM} = sub { exit 1 };

our ($BUILD, $MODEL);
plan skip_all => "$BUILD/llm-engine not built" unless -x "$BUILD/llm-engine" && -x "$BUILD/llm-client";
plan skip_all => 'no prlimit (util-linux)' if system('prlimit --version >/dev/null 2>&1') != 0;
my $cc = $ENV{CC} // 'cc';
plan skip_all => "no C compiler ($cc) for shm_knobs" if system("$cc --version >/dev/null 2>&1") != 0;

my $dir = tempdir(CLEANUP => 1);
my $reader = build_shm_knobs($dir, $cc);

my $LONG = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her '
         . 'friends. One day, she saw a big red ball in the park. She ran to the ball and kicked it very hard. The '
         . 'ball went up high into the sky and came down near a tree. Lily was happy and laughed. Her mom said it '
         . 'was time to go home for lunch.';
my @engine_opts = ('--threads', 1, '--slots', 64, '--max-batch-size', 64, '--max-batched-tokens', 2048,
                   '--oom-recover-ms', 500, '--preferred-batch-sizes', 64, '--batch-timeout-ms', 1000);

sub start {
    my ($tag, $name, @prefix) = @_;
    my $pid = spawn_cmd("$dir/$tag.out", "$dir/$tag.err", @prefix, "$BUILD/llm-engine", 'serve', '--model', $MODEL,
                        '--shm', $name, '--pid-file', "$dir/$tag.pid", @engine_opts);
    ok(defined wait_ready($name, 30), "$tag: engine READY") or BAIL_OUT(slurp("$dir/$tag.err"));
    return $pid;
}

# n requests at concurrency n; the number that finished with "length".
sub burst {
    my ($tag, $name, $prompt, $n, $max_tokens) = @_;
    my $pid = spawn_cmd("$dir/$tag.out", "$dir/$tag.cerr", "$BUILD/llm-client", '--shm', $name, '--model', $MODEL,
                        '--prompt', $prompt, '--max-tokens', $max_tokens, '--ignore-eos', '--concurrency', $n,
                        '--requests', $n, '--timeout-ms', '120000');
    kill('KILL', $pid), waitpid($pid, 0) unless defined wait_for($pid, 150);
    my $done = () = slurp("$dir/$tag.out") =~ /"finish_reason":"length"/g;
    return $done;
}

sub reading { shm_reading($reader, $_[0]) }

sub vmsize_kb {
    my ($pid) = @_;
    return slurp("/proc/$pid/status") =~ /^VmSize:\s+(\d+)/m ? $1 : undef;
}

# Lines of the engine's stderr matching re, waiting up to 5 s for the first
# (the supervisor looks at the segment once a second).
sub lines_soon {
    my ($file, $re) = @_;
    my @l;
    for (1 .. 50) {
        @l = grep { /$re/ } split /\n/, slurp($file);
        last if @l;
        sleep 0.1;
    }
    return @l;
}

sub warm_up {
    my ($tag, $name) = @_;
    is(burst("$tag-warm", $name, 'Once upon', 64, 8), 64, "$tag: warm-up burst of 64 short prompts");
}

# What the worker needs after the warm-up; then an address-space limit 2 MiB above that on it.
my $nb = "oom-b-$$";
my $sb = start('b', $nb);
END { local $?; stop_engine($sb) if $sb }
warm_up('b', $nb);
my $wpid = read_pid("$dir/b.pid");
my $vm;
for (1 .. 10) {
    my $v = vmsize_kb($wpid);
    $vm = $v if defined $v && (!defined $vm || $v < $vm);
    sleep 0.05;
}
ok($vm, "worker VmSize after warm-up: $vm kB");
my $limit = ($vm + 2048) * 1024;
is(system('prlimit', '--pid', $wpid, "--as=$limit"), 0, "address-space limit of $limit bytes set on the worker");
my $r0 = reading($nb);
is($r0->{oom_shrinks}, 0, 'no out-of-memory step during the warm-up');

my $t0 = time;
is(burst('b-long1', $nb, $LONG, 64, 16), 64, 'burst of 64 long prompts under the limit: every request finished')
    or diag(slurp("$dir/b-long1.cerr"));
my $r1 = reading($nb);
ok($r1->{oom_shrinks} >= 1, "the backend ran out of memory and the steps shrank ($r1->{oom_shrinks} times)")
    or diag(slurp("$dir/b.err"));
is($r1->{failed} - $r0->{failed}, 0, 'no request failed');
my @shrinks = lines_soon("$dir/b.err", qr/supervisor: oom_shrink:/);
ok(@shrinks >= 1, 'oom_shrink event recorded') or diag(slurp("$dir/b.err"));
diag($_) for @shrinks[0 .. ($#shrinks < 2 ? $#shrinks : 2)];
my @why = grep { /serve: backend out of memory/ } split /\n/, slurp("$dir/b.err");
diag($why[0]) if @why;

# Load has fallen: the cap doubles every 500 ms of quiet and is lifted.
my $lifted;
for (1 .. 100) {
    my $r = reading($nb);
    if ($r->{mem_cap_tokens} == 0 && $r->{oom_recoveries} >= 1) { $lifted = time - $t0; last }
    sleep 0.1;
}
ok(defined $lifted, 'memory cap lifted once load fell') or diag(slurp("$dir/b.err"));
my @rec = lines_soon("$dir/b.err", qr/supervisor: oom_recover:/);
ok(@rec >= 1, 'oom_recover event recorded') or diag(slurp("$dir/b.err"));
diag($rec[0]) if @rec;

# Capacity is back to the knobs: the next burst's first step is the full 2048
# tokens again (memory still being short, it usually shrinks again); nothing fails.
is(burst('b-long2', $nb, $LONG, 64, 16), 64, 'second burst: every request finished');
my $r2 = reading($nb);
diag("second burst: out-of-memory shrinks $r1->{oom_shrinks} -> $r2->{oom_shrinks}");
is($r2->{failed} - $r0->{failed}, 0, 'still no request failed');
ok(probe($nb), 'engine still serving');
ok(waitpid($sb, POSIX::WNOHANG()) == 0, 'supervisor still running');
my $restarts = () = slurp("$dir/b.err") =~ /worker_restart/g;
is($restarts, 0, 'the worker never died');
stop_engine($sb);
$sb = undef;
is(segments($nb), 0, 'segment removed at exit');
done_testing();
