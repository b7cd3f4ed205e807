#!/usr/bin/perl
# The KV pools' gauges and the prefix cache's count in the engine's metrics
# block (what /metrics, llm_status and Redis publish), end to end through
# llm-engine serve: a tiny Gemma 3 (`gen-model --preset tiny-gemma3`: a window
# of 16 positions on 5 of its 6 layers) served with --swa-kv window. Before any
# load both pools are whole (used 0, free = the sizes serve logs); while eight
# long requests run the window pool holds only their windows (at most three
# blocks of 16 each: the window's two and one step's) while the main pool holds
# their contexts; afterwards every block is back. The same prompt twice: the
# second request takes its full prompt blocks from the prefix cache, counted
# in tokens_cached. With --swa-kv full the window gauges stay 0.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use Time::HiRes qw(sleep);
use Test::More;
require "$FindBin::Bin/lib.pl";
$SIG{PIPE} = "IGNORE";
$SIG{INT} = $SIG{TERM} = sub { exit 1 };

our $BUILD;
plan skip_all => "$BUILD/llm-engine not built" unless -x "$BUILD/llm-engine" && -x "$BUILD/llm-client";
my $cc = $ENV{CC} // 'cc';
plan skip_all => "no C compiler ($cc) for shm_knobs" if system("$cc --version >/dev/null 2>&1") != 0;

my $dir = tempdir(CLEANUP => 1);
my $reader = build_shm_knobs($dir, $cc);
my $model = "$dir/tiny-gemma3.gguf";
is(system("$BUILD/llm-engine gen-model --preset tiny-gemma3 --out $model >$dir/gen.out 2>&1"), 0,
   'gen-model --preset tiny-gemma3') or BAIL_OUT(slurp("$dir/gen.out"));

my $PROMPT = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her '
           . 'friends. One day, she saw a big red ball in the park.';
my $BS = 16;
my @sups;
END { local $?; stop_engine($_) for @sups }

sub start {
    my ($tag, @opts) = @_;
    my $name = "pools-$tag-$$";
    push @sups, spawn_cmd("$dir/$tag.out", "$dir/$tag.err", "$BUILD/llm-engine", 'serve', '--model', $model,
                          '--shm', $name, '--threads', 1, '--slots', 8, @opts);
    my $ready = 0;
    for (1 .. 300) {
        last if ($ready = (slurp("$dir/$tag.err") =~ /serve: ready on/));
        sleep 0.1;
    }
    ok($ready, "$tag: engine ready") or BAIL_OUT(slurp("$dir/$tag.err"));
    return $name;
}

sub reading { shm_reading($reader, $_[0]) }

# n requests of the prompt at concurrency n, max_tokens each, in the background; the client's pid.
sub load {
    my ($tag, $name, $n, $max_tokens) = @_;
    return spawn_cmd("$dir/$tag.out", "$dir/$tag.cerr", "$BUILD/llm-client", '--shm', $name, '--model', $model,
                     '--prompt', $PROMPT, '--max-tokens', $max_tokens, '--ignore-eos', '--concurrency', $n,
                     '--requests', $n, '--timeout-ms', '120000');
}

sub finished {
    my ($tag, $pid) = @_;
    kill('KILL', $pid), waitpid($pid, 0) unless defined wait_for($pid, 120);
    return scalar(() = slurp("$dir/$tag.out") =~ /"finish_reason":"length"/g);
}

# The gauges settle once the engine's loop has run after the last request.
sub settled {
    my ($name) = @_;
    my $r;
    for (1 .. 50) {
        $r = reading($name);
        last if $r->{kv_blocks_used} == 0 && $r->{kv_window_blocks_used} == 0;
        sleep 0.05;
    }
    return $r;
}

# ---- --swa-kv window ----
my $w = start('window', '--swa-kv', 'window');
my ($main_n) = slurp("$dir/window.err") =~ /(\d+) KV blocks of $BS tokens/;
my ($win_n) = slurp("$dir/window.err") =~ /window pool of (\d+) blocks/;
ok($main_n && $win_n, "serve logs both pools ($main_n and $win_n blocks)");
my $r = reading($w);
is("$r->{kv_blocks_used} $r->{kv_blocks_free} $r->{kv_blocks_cached}", "0 $main_n 0", 'idle: the main pool all free');
is("$r->{kv_window_blocks_used} $r->{kv_window_blocks_free}", "0 $win_n", 'idle: the window pool all free');

# eight requests of the prompt (39 tokens) and 300 more: each context reaches 20 blocks
my $pid = load('burst', $w, 8, 300);
my ($max_main, $max_win, $readings) = (0, 0, 0);
while (!defined wait_for($pid, 0.02)) {
    $r = reading($w);
    $readings++;
    $max_main = $r->{kv_blocks_used} if $r->{kv_blocks_used} > $max_main;
    $max_win = $r->{kv_window_blocks_used} if $r->{kv_window_blocks_used} > $max_win;
    last if $readings > 5000;
}
is(scalar(() = slurp("$dir/burst.out") =~ /"finish_reason":"length"/g), 8, 'the eight requests finished');
ok($max_win > 0, "the window pool was in use ($max_win blocks at most over $readings readings)");
ok($max_win <= 8 * 3, "... never more than the eight windows' blocks and a step's ($max_win <= 24)");
ok($max_main > $max_win, "the main pool held the contexts ($max_main blocks at most)");
$r = settled($w);
is("$r->{kv_blocks_used} $r->{kv_window_blocks_used}", '0 0', 'after the load: no block used in either pool');
is($r->{kv_blocks_free}, $main_n, 'the main pool whole again');
is($r->{kv_window_blocks_free}, $win_n, 'the window pool whole again');

# the same prompt alone, twice: the second takes its full blocks of the prompt from the prefix cache
my $before = reading($w);
is(finished('one', load('one', $w, 1, 4)), 1, 'a request of the prompt');
my $mid = reading($w);
is(finished('two', load('two', $w, 1, 4)), 1, 'the same request again');
my $after = settled($w);
my $n_prompt = $mid->{tokens_in} - $before->{tokens_in};
my $full = int(($n_prompt - 1) / $BS) * $BS; # the last prompt token is always computed
ok($n_prompt > 2 * $BS, "the prompt is $n_prompt tokens");
is($after->{tokens_cached} - $mid->{tokens_cached}, $full, "the second took its $full tokens of full blocks from the "
   . 'prefix cache (tokens_cached)');
ok($after->{kv_blocks_cached} >= $full / $BS, "the main pool keeps them as cached blocks ($after->{kv_blocks_cached})");

# ---- --swa-kv full: no window pool ----
my $f = start('full', '--swa-kv', 'full');
is(finished('fone', load('fone', $f, 1, 4)), 1, 'full: a request');
$r = settled($f);
is("$r->{kv_window_blocks_used} $r->{kv_window_blocks_free}", '0 0', 'full: the window gauges are 0');
ok($r->{kv_blocks_free} > 0, "full: the main pool's gauges are set ($r->{kv_blocks_free} free)");

done_testing();
