package Test::Nginx::Socket;
# A small Test::Nginx::Socket-compatible runner, built on Test::Base, for
# machines where the real Test::Nginx is not installed (t/run.sh puts this
# directory on @INC only then). It understands the subset of the data format
# the project's t/*.t files use:
#   --- main_config --- http_config --- config --- request --- more_headers
#   --- error_code --- response_body --- response_body_like --- response_body_unlike --- response_headers
#   --- response_headers_like --- error_log --- no_error_log --- timeout --- abort
#   --- must_die (the configuration must fail: nginx does not start; error_log is then looked for in what
#   it printed and logged)
#   --- init (Perl code run once nginx is up, before the request, as Test::Nginx does)
#   $TEST_NGINX_* variables in the config sections.
# nginx runs like under Test::Nginx: daemon on, master_process off, one worker,
# a fresh server root in t/servroot, restarted for every block.
use strict;
use warnings;

# Test::Base must be imported once to set up its default object (the __DATA__ parser);
# do it in a scratch package so its exports do not clash with ours.
{ package Test::Nginx::Socket::Base; use Test::Base; }
use Test::More ();
use IO::Socket::INET;
use IO::Select;
use File::Path qw(make_path remove_tree);
use Time::HiRes qw(sleep time);
use Cwd qw(getcwd);

our $VERSION = '0.1-ngx_llm';
our @EXPORT = qw(run_tests blocks plan repeat_each no_shuffle no_long_string log_level
                 master_on master_off workers no_root_location env_to_nginx);

my $RepeatEach = 1;
my $LogLevel   = 'debug';
my $Master     = 0;
my $Workers    = 1;

sub import {
    my ($class, @args) = @_;
    my $caller = caller;
    no strict 'refs';
    *{"${caller}::$_"} = \&{"Test::Nginx::Socket::$_"} for @EXPORT;
    *{"${caller}::$_"} = \&{"Test::More::$_"} for qw(is ok like unlike is_deeply diag note pass fail done_testing);
    if (@args && $args[0] eq 'no_plan') { Test::More::plan('no_plan') }
    elsif (@args && $args[0] eq 'tests') { Test::More::plan(tests => $args[1]) }
}

sub blocks        { Test::Base::blocks(@_) }
sub plan          { Test::More::plan(@_) }
sub repeat_each   { $RepeatEach = shift if @_; $RepeatEach }
sub no_shuffle    { }
sub no_long_string { }
sub no_root_location { }
sub env_to_nginx  { }
sub log_level     { $LogLevel = shift }
sub master_on     { $Master = 1 }
sub master_off    { $Master = 0 }
sub workers       { $Workers = shift }

my $Cwd      = getcwd();
my $Binary   = $ENV{TEST_NGINX_BINARY} || 'nginx';
my $Port     = $ENV{TEST_NGINX_SERVER_PORT} || $ENV{TEST_NGINX_PORT} || 1984;
my $ServRoot = $ENV{TEST_NGINX_SERVROOT} || "$Cwd/t/servroot";
$ENV{TEST_NGINX_SERVER_PORT} = $Port;
$ENV{TEST_NGINX_SERVROOT}    = $ServRoot;

# A section's value, or undef when no block has it (Test::Base makes accessors only for seen names).
sub sec {
    my ($block, $name) = @_;
    return $block->can($name) ? $block->$name : undef;
}

sub expand_env {
    my $s = shift;
    return '' unless defined $s;
    $s =~ s/\$(TEST_NGINX_[_A-Z0-9]+)/
        defined $ENV{$1} ? $ENV{$1} : die "environment variable $1 is not set (used in a test block)\n"/ge;
    return $s;
}

sub pid_of {
    open my $fh, '<', "$ServRoot/logs/nginx.pid" or return;
    my $pid = <$fh>;
    return unless defined $pid;
    chomp $pid;
    return $pid =~ /^\d+$/ ? $pid : undef;
}

# The daemon is not our child: once it exits it may stay a zombie until init reaps it.
sub alive {
    my $pid = shift;
    return 0 unless kill 0, $pid;
    open my $fh, '<', "/proc/$pid/stat" or return 1;
    my $st = <$fh>;
    return !($st && $st =~ /^\d+ \(.*\) Z/);
}

sub stop_nginx {
    my $pid = pid_of() or return;
    kill 'QUIT', $pid;
    for (1 .. 200) {
        return unless alive($pid);
        sleep 0.01;
    }
    kill 'KILL', $pid;
    sleep 0.05;
}

sub write_conf {
    my $block = shift;
    remove_tree($ServRoot);
    make_path("$ServRoot/conf", "$ServRoot/logs", "$ServRoot/html",
              map { "$ServRoot/${_}_temp" } qw(client_body proxy fastcgi uwsgi scgi));
    my $main   = expand_env(sec($block, 'main_config'));
    my $http   = expand_env(sec($block, 'http_config'));
    my $config = expand_env(sec($block, 'config'));
    my $master = $Master ? 'on' : 'off';
    open my $fh, '>', "$ServRoot/conf/nginx.conf" or die "cannot write nginx.conf: $!";
    print $fh <<"EOF";
worker_processes  $Workers;
daemon on;
master_process $master;
error_log $ServRoot/logs/error.log $LogLevel;
pid       $ServRoot/logs/nginx.pid;

$main

http {
    access_log $ServRoot/logs/access.log;
    default_type text/plain;
    keepalive_timeout  68;
    client_body_temp_path $ServRoot/client_body_temp;
    proxy_temp_path $ServRoot/proxy_temp;
    fastcgi_temp_path $ServRoot/fastcgi_temp;
    uwsgi_temp_path $ServRoot/uwsgi_temp;
    scgi_temp_path $ServRoot/scgi_temp;

$http

    server {
        listen          $Port;
        server_name     'localhost';
        client_max_body_size 30M;

$config
    }
}

events {
    accept_mutex off;
    worker_connections 256;
}
EOF
    close $fh;
}

sub start_nginx {
    my $out = `$Binary -p $ServRoot/ -c $ServRoot/conf/nginx.conf 2>&1`;
    return "nginx failed to start: $out" if $?;
    for (1 .. 250) {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $Port, Proto => 'tcp');
        if ($s) { close $s; return undef }
        sleep 0.02;
    }
    return "nginx did not listen on port $Port";
}

sub parse_request {
    my ($text) = @_;
    $text =~ s/\A\s+//;
    my ($line, $body) = split /\n/, $text, 2;
    $body = '' unless defined $body;
    my ($method, $uri, $proto) = split ' ', $line;
    return ($method, $uri, $proto || 'HTTP/1.1', $body);
}

sub http_request {
    my ($block, $timeout) = @_;
    my ($method, $uri, $proto, $body) = parse_request(sec($block, 'request'));
    my $headers = "Host: localhost\r\nConnection: close\r\n";
    my $more = expand_env(sec($block, 'more_headers') // '');
    for my $h (split /\n/, $more) {
        next unless $h =~ /\S/;
        $headers .= "$h\r\n";
    }
    $headers .= "Content-Length: " . length($body) . "\r\n"
        if length($body) && $more !~ /^(content-length|transfer-encoding):/mi;
    my $req = "$method $uri $proto\r\n$headers\r\n$body";
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $Port, Proto => 'tcp', Timeout => $timeout)
        or return (undef, "connect failed: $!");
    binmode $s;
    print $s $req;
    my $sel = IO::Select->new($s);
    my $resp = '';
    my $deadline = time + $timeout;
    while (1) {
        my $left = $deadline - time;
        if ($left <= 0) {
            # --- abort: the client gives up (closing the connection); what came so far is the response.
            last if defined sec($block, 'abort');
            return (undef, "timeout after ${timeout}s; got: " . substr($resp, 0, 200));
        }
        next unless $sel->can_read($left);
        my $n = sysread($s, my $buf, 65536);
        last if !$n;
        $resp .= $buf;
    }
    close $s;
    my ($head, $rbody) = split /\r\n\r\n/, $resp, 2;
    return (undef, "malformed response: " . substr($resp, 0, 200)) unless defined $head && $head =~ m{^HTTP/\d\.\d (\d+)};
    my $status = $1;
    my %h;
    for my $l (split /\r\n/, $head) {
        next unless $l =~ /^([^:\s]+):\s*(.*)$/;
        $h{lc $1} = $2;
    }
    $rbody = '' unless defined $rbody;
    if (($h{'transfer-encoding'} // '') =~ /chunked/i) {
        my $plain = '';
        while ($rbody =~ s/\A([0-9a-fA-F]+)[^\r\n]*\r\n//) {
            my $len = hex $1;
            last if $len == 0;
            $plain .= substr($rbody, 0, $len, '');
            $rbody =~ s/\A\r\n//;
        }
        $rbody = $plain;
    }
    return ({ status => $status, headers => \%h, body => $rbody }, undef);
}

my $StartOutput = '';

sub error_log_text {
    open my $fh, '<', "$ServRoot/logs/error.log" or return $StartOutput;
    local $/;
    return $StartOutput . <$fh>;
}

sub check_log {
    my ($block, $name, $want_present) = @_;
    my $spec = sec($block, $name);
    return unless defined $spec;
    my @pats = ref $spec eq 'ARRAY' ? @$spec : grep { /\S/ } split /\n/, $spec;
    my $log = error_log_text();
    for my $p (@pats) {
        my $found = ref $p eq 'Regexp' ? $log =~ $p : index($log, $p) >= 0;
        Test::More::ok($want_present ? $found : !$found,
                       $block->name . " - $name: " . ($want_present ? '' : 'no ') . "'$p'");
    }
}

sub run_block {
    my $block = shift;
    my $name = $block->name;
    my $timeout = sec($block, 'timeout') // 10;
    $timeout =~ s/s$//;
    stop_nginx();
    write_conf($block);
    $StartOutput = '';
    my $err = start_nginx();
    if (defined sec($block, 'must_die')) {
        Test::More::ok($err, "$name - nginx refused the configuration");
        stop_nginx() unless $err;
        $StartOutput = $err // '';
        check_log($block, 'error_log', 1);
        $StartOutput = '';
        return;
    }
    if ($err) {
        Test::More::fail("$name - nginx started");
        Test::More::diag($err);
        return;
    }
    if (defined sec($block, 'init')) {
        eval sec($block, 'init');
        if ($@) {
            Test::More::fail("$name - init");
            Test::More::diag($@);
            stop_nginx();
            return;
        }
    }
    my ($res, $rerr) = http_request($block, $timeout);
    if (!$res) {
        Test::More::fail("$name - request");
        Test::More::diag($rerr);
        stop_nginx();
        return;
    }
    my $code = sec($block, 'error_code');
    $code = 200 unless defined $code;
    chomp $code;
    Test::More::is($res->{status}, $code, "$name - status code ok");

    if (defined sec($block, 'response_headers')) {
        for my $l (split /\n/, sec($block, 'response_headers')) {
            next unless $l =~ /\S/;
            if ($l =~ /^!\s*(\S+)/) {
                Test::More::ok(!exists $res->{headers}{lc $1}, "$name - header $1 absent");
            } elsif ($l =~ /^([^:]+):\s*(.*?)\s*$/) {
                Test::More::is($res->{headers}{lc $1}, $2, "$name - header $1 ok");
            }
        }
    }
    if (defined sec($block, 'response_headers_like')) {
        for my $l (split /\n/, sec($block, 'response_headers_like')) {
            next unless $l =~ /^([^:]+):\s*(.*?)\s*$/;
            Test::More::like($res->{headers}{lc $1} // '', qr/$2/, "$name - header $1 like");
        }
    }
    if (defined sec($block, 'response_body')) {
        Test::More::is($res->{body}, sec($block, 'response_body'), "$name - response_body - response is expected");
    }
    if (defined sec($block, 'response_body_like')) {
        my $re = sec($block, 'response_body_like');
        $re = qr/$re/s unless ref $re eq 'Regexp';
        Test::More::like($res->{body}, $re, "$name - response_body_like - response is expected");
    }
    if (defined sec($block, 'response_body_unlike')) {
        my $re = sec($block, 'response_body_unlike');
        $re = qr/$re/s unless ref $re eq 'Regexp';
        Test::More::unlike($res->{body}, $re, "$name - response_body_unlike - response is expected");
    }
    stop_nginx();
    check_log($block, 'error_log', 1);
    check_log($block, 'no_error_log', 0);
}

sub run_tests {
    for my $block (Test::Base::blocks()) {
        run_block($block) for 1 .. $RepeatEach;
    }
}

1;
