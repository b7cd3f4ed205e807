# Helpers shared by tests/serve/*.t: start and stop llm-engine serve, probe
# readiness with llm-client, run llm-client loads in the background.
use strict;
use warnings;
use FindBin;
use POSIX ":sys_wait_h";
use Time::HiRes qw(time sleep);
use IO::Socket::INET;

our $BUILD = $ENV{BUILD} // 'build';
our $MODEL = '../shared/models/stories260K/stories260K.gguf';
our $PROMPT = 'Once upon a time';
# 306 tokens of stories260K's tokenizer (a long prompt: prefix caching, replicas' balance)
our $STORY = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her '
           . 'friends. One day, she saw a big red ball under a tall tree and wanted to play with it. Her mom said she '
           . 'could play until the sun went down, so Lily ran and ran. She kicked the ball high into the sky and '
           . 'laughed. Her friend Tom came to play too. They played with the ball all day long. Then a little dog '
           . 'came running and took the ball in his mouth. Lily and Tom ran after the dog. The dog was fast, but they '
           . 'did not give up. At last the dog stopped by the pond and dropped the ball. Lily said thank you to the '
           . 'dog and gave him a pat on the head. The dog wagged his tail and barked happily. Lily, Tom and the dog '
           . 'played together until it was time to go home. Lily was very happy.';

# Spawn a command with stdout/stderr to files; returns the pid.
sub spawn_cmd {
    my ($out, $err, @cmd) = @_;
    my $pid = fork() // die "fork: $!";
    if ($pid == 0) {
        open(STDOUT, '>', $out) or die "$out: $!";
        open(STDERR, '>', $err) or die "$err: $!";
        exec(@cmd) or die "exec $cmd[0]: $!";
    }
    return $pid;
}

# A replica: `llm-engine serve` of $MODEL on segment $name, one thread, $slots slots (16 if not given), not
# supervised, with @more options, its output in $dir/$name.out / .err; waits until it is READY (else bails
# out). Returns its pid.
sub replica {
    my ($dir, $name, $slots, @more) = @_;
    my $pid = spawn_cmd("$dir/$name.out", "$dir/$name.err", "$BUILD/llm-engine", 'serve', '--model', $MODEL, '--shm',
                        $name, '--threads', 1, '--slots', $slots // 16, '--no-supervise', @more);
    Test::More::ok(defined wait_ready($name, 30), "engine $name: READY") or Test::More::BAIL_OUT(slurp("$dir/$name.err"));
    return $pid;
}

# Wait for pid up to $secs; returns its status, or undef on timeout.
sub wait_for {
    my ($pid, $secs) = @_;
    my $end = time + $secs;
    while (time < $end) {
        my $w = waitpid($pid, WNOHANG);
        return $? if $w == $pid;
        return -1 if $w < 0;
        sleep 0.02;
    }
    return undef;
}

# One short request; 1 if it finished without an error.
sub probe {
    my ($name) = @_;
    my $out = `$BUILD/llm-client --shm $name --model $MODEL --prompt '$PROMPT' --max-tokens 2 --requests 1 --timeout-ms 2000 2>/dev/null`;
    return ($? == 0 && $out =~ /"finish_reason":"(length|stop)"/) ? 1 : 0;
}

# Seconds until probe succeeds, or undef after $secs.
sub wait_ready {
    my ($name, $secs) = @_;
    my $t0 = time;
    while (time - $t0 < $secs) {
        return time - $t0 if probe($name);
        sleep 0.05;
    }
    return undef;
}

sub read_pid {
    my ($file) = @_;
    open(my $f, '<', $file) or return undef;
    my $p = <$f>;
    close $f;
    return defined $p && $p =~ /^(\d+)/ ? $1 : undef;
}

sub slurp {
    my ($file) = @_;
    open(my $f, '<', $file) or return '';
    local $/;
    my $s = <$f>;
    close $f;
    return $s // '';
}

sub segments {
    my ($name) = @_;
    opendir(my $d, '/dev/shm') or return 0;
    my @s = grep { $_ eq "llm-$name" } readdir($d);
    closedir $d;
    return scalar @s;
}

# SIGTERM (then SIGKILL after 10 s) to a supervisor still running; reaps it.
sub stop_engine {
    my ($pid) = @_;
    return unless $pid && waitpid($pid, WNOHANG) == 0;
    kill 'TERM', $pid;
    kill('KILL', $pid), waitpid($pid, 0) unless defined wait_for($pid, 10);
}

# Build tests/serve/shm_knobs.c (reads the knobs and OOM counters from a segment) into $dir; returns its
# path. One test assertion; bails out when it cannot be built.
sub build_shm_knobs {
    my ($dir, $cc) = @_;
    my $reader = "$dir/shm_knobs";
    Test::More::is(system("$cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Ishm -o $reader "
                          . "$FindBin::Bin/shm_knobs.c shm/llm_shm.c"), 0, 'built the segment reader')
        or Test::More::BAIL_OUT('cannot build shm_knobs');
    return $reader;
}

# One reading of a running engine's segment by shm_knobs: a hash of its "key value ..." lines, the
# histograms' bucket counts (ttft, tpot) as array refs.
sub shm_reading {
    my ($reader, $name) = @_;
    my $out = `$reader $name 2>&1`;
    die "shm_knobs: $out" if $? != 0;
    my %r;
    for my $line (split /\n/, $out) {
        my ($k, @v) = split ' ', $line;
        if ($k eq 'ttft' || $k eq 'tpot') { $r{$k} = \@v }
        else { %r = (%r, $k, @v) }
    }
    return \%r;
}


# nginx in the foreground (master_process off, unless $load turns it on) on 127.0.0.1:PORT, the module loaded
# by $load (a load_module line), with $locations in its one server and $http (optional) at http level; its
# files under $dir. Returns (pid, port) once it answers, or dies with its error log.
sub start_nginx {
    my ($dir, $load, $locations, $http) = @_;
    $http //= '';
    my $master = $load =~ /^\s*master_process\b/m ? '' : 'master_process off;';
    my $port = 20000 + ($$ * 7 + int(rand(1000))) % 20000;
    mkdir "$dir/logs";
    open(my $f, '>', "$dir/nginx.conf") or die "$dir/nginx.conf: $!";
    print $f <<"EOC";
$load
daemon off;
$master
error_log $dir/logs/error.log warn;
pid $dir/logs/nginx.pid;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $dir/cb; proxy_temp_path $dir/px; fastcgi_temp_path $dir/fc;
    uwsgi_temp_path $dir/uw; scgi_temp_path $dir/sc;
$http
    server {
        listen 127.0.0.1:$port;
$locations
    }
}
EOC
    close $f;
    my $pid = spawn_cmd("$dir/nginx.out", "$dir/nginx.err", 'nginx', '-p', $dir, '-c', "$dir/nginx.conf", '-e',
                        "$dir/logs/error.log");
    for (1 .. 200) {
        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Timeout => 1);
        return ($pid, $port) if $s;
        die "nginx did not start:\n" . slurp("$dir/nginx.err") . slurp("$dir/logs/error.log")
            if waitpid($pid, WNOHANG) == $pid;
        sleep 0.05;
    }
    die "nginx did not answer on $port";
}

# SIGTERM to nginx (foreground), reaped.
sub stop_nginx {
    my ($pid) = @_;
    kill 'TERM', $pid;
    kill('KILL', $pid), waitpid($pid, 0) unless defined wait_for($pid, 10);
}


# POSTs $body to /v1/completions (or $path) on 127.0.0.1:$port without waiting for the answer; then polls
# $load->() (the engine's slots in use) every 50 ms, up to 10 s, until it is $want (1 if not given) or more:
# (the socket, the last reading).
sub post_waiting {
    my ($port, $body, $load, $want, $path) = @_;
    $want //= 1;
    $path //= '/v1/completions';
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Timeout => 60) or die "connect: $!";
    print $s "POST $path HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
        . "Content-Length: " . length($body) . "\r\n\r\n$body";
    my $busy = 0;
    for (1 .. 200) {
        last if ($busy = $load->() // 0) >= $want;
        sleep 0.05;
    }
    return ($s, $busy);
}

# The whole answer on a socket of post_waiting: (the raw response, its body).
sub answer {
    my ($s) = @_;
    local $/;
    my $raw = <$s> // '';
    close $s;
    my ($body) = $raw =~ /\r\n\r\n(.*)\z/s;
    return ($raw, $body // '');
}

1;
