#!/usr/bin/perl
# llm-engine serve --redis: the supervisor publishes a metrics hash and a
# history stream every second, events (worker restart, tuning) and the tuning
# hash; Redis killed mid-load costs no request, and publishing resumes once
# Redis is back. Skipped without redis-server / redis-cli.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use Test::More;
require "$FindBin::Bin/lib.pl";
# interrupted or piped into head: still run END (which stops the engine)
$SIG{PIPE} = "IGNORE";
$SIG{INT} = $SIG{TERM} = sub { exit 1 };

our ($BUILD, $MODEL, $PROMPT);
plan skip_all => "$BUILD/llm-engine not built" unless -x "$BUILD/llm-engine" && -x "$BUILD/llm-client";
plan skip_all => "no model $MODEL" unless -f $MODEL;
chomp(my $rs = `sh -c "command -v redis-server"` // "");
chomp(my $rc = `sh -c "command -v redis-cli"` // "");
plan skip_all => 'redis-server / redis-cli not installed' unless $rs && $rc;

my $dir = tempdir(CLEANUP => 1);
my $s = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1', LocalPort => 0, ReuseAddr => 1) or die $!;
my $port = $s->sockport;
close $s;

sub start_redis {
    my $pid = spawn_cmd("$dir/redis.out", "$dir/redis.err", $rs, '--port', $port, '--bind', '127.0.0.1',
                        '--save', '', '--appendonly', 'no', '--dir', $dir);
    for (1 .. 100) {
        return $pid if `$rc -p $port ping 2>/dev/null` =~ /PONG/;
        sleep 0.05;
    }
    die "redis-server did not start: " . slurp("$dir/redis.err");
}
sub r { my $o = `$rc -p $port @_ 2>/dev/null`; chomp $o; return $o }

my $redis = start_redis();
my $name = "redis-$$";
my $pidf = "$dir/worker.pid";
my $sup = spawn_cmd("$dir/engine.out", "$dir/engine.err", "$BUILD/llm-engine", 'serve', '--model', $MODEL,
                    '--shm', $name, '--pid-file', $pidf, '--threads', '1', '--slots', '16',
                    '--redis', "redis://127.0.0.1:$port/0", '--slo-ttft-ms', '0.001', '--max-batch-size', '16',
                    '--tune-cooldown', '0');
# an aborted test (BAIL_OUT, die, SIGPIPE) must not leave an engine behind
END {
    local $?;
    stop_engine($sup);
    kill('KILL', $redis), waitpid($redis, 0) if $redis && kill(0, $redis);
}
ok(defined wait_ready($name, 20), 'engine READY') or BAIL_OUT(slurp("$dir/engine.err"));

sub load {
    my ($tag, $n) = @_;
    return spawn_cmd("$dir/$tag.out", "$dir/$tag.err", "$BUILD/llm-client", '--shm', $name, '--model', $MODEL,
                     '--prompt', $PROMPT, '--max-tokens', '50', '--ignore-eos', '--concurrency', '4',
                     '--requests', $n, '--timeout-ms', '120000');
}
my $load = load('load1', 100000);
sleep 2.5;
my $ts1 = r("hget llm:$name:metrics ts_ms");
my $len1 = r("xlen llm:$name:history");
sleep 2.2;
my $ts2 = r("hget llm:$name:metrics ts_ms");
my $len2 = r("xlen llm:$name:history");
ok($ts1 =~ /^\d+$/ && $ts2 =~ /^\d+$/ && $ts2 > $ts1, "metrics hash refreshed ($ts1 -> $ts2)");
ok($len2 >= $len1 + 2, "history stream grows about once a second ($len1 -> $len2)");
like(r("hget llm:$name:metrics tokens_out"), qr/^[1-9]\d*$/, 'tokens_out counted');
like(r("hget llm:$name:metrics max_batch_size"), qr/^\d+$/, 'knobs in force published');
is(r("hget llm:$name:metrics kv_blocks_free") + r("hget llm:$name:metrics kv_blocks_used") > 0 ? 1 : 0, 1,
   'the KV pool\'s gauges published');
like(r("hget llm:$name:metrics tokens_cached"), qr/^\d+$/, 'the prefix cache\'s count published');
is(r("hget llm:$name:metrics kv_window_blocks_free"), '0', 'no window pool (stories260K has no sliding window)');
like(r("hget llm:$name:tuning max_batch_size"), qr/^\d+$/, 'tuning state hash written');
like(r("xrange llm:$name:events - +"), qr/tuning/, 'a tuning decision in the events stream');

# Redis dies mid-load: no request fails, the engine keeps serving
kill 'KILL', $redis;
waitpid($redis, 0);
sleep 1.5;
my $during = load('load2', 40);
is(wait_for($during, 60), 0, 'requests while Redis is down all succeed');
$redis = start_redis();
my $t0 = time;
my $back;
while (time - $t0 < 12) {
    my $l = r("xlen llm:$name:history");
    if ($l =~ /^\d+$/ && $l >= 2) { $back = time - $t0; last }
    sleep 0.2;
}
ok(defined $back, 'publishing resumes after Redis restarts' . (defined $back ? sprintf(' (%.1f s)', $back) : ''));

# a worker restart is an event
kill 'KILL', read_pid($pidf);
ok(defined wait_ready($name, 10), 'READY again after kill -9');
sleep 1.5;
like(r("xrange llm:$name:events - +"), qr/worker_restart/, 'worker restart in the events stream');
like(r("hget llm:$name:metrics restarts"), qr/^1$/, 'restart count in the metrics hash');

kill 'TERM', $load;
wait_for($load, 10);
my @lines = split /\n/, slurp("$dir/load1.out");
my @bad = grep { !/"finish_reason":"(length|stop)"/ } @lines;
diag(scalar(@lines) . ' requests in the long load, ' . scalar(@bad) . ' not ok (the kill -9 round)');
kill 'TERM', $sup;
is(wait_for($sup, 10), 0, 'clean stop');
kill 'TERM', $redis;
waitpid($redis, 0);
done_testing();
