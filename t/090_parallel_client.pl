#!/usr/bin/perl
# Concurrent greedy requests for t/070_real_concurrency.t (run by its --- exec):
#   perl t/090_parallel_client.pl PORT CONCURRENCY completions|chat|stream|chat_stream
# Sends CONCURRENCY identical greedy requests at once, one process each, and
# prints how many answers carried exactly the llm-engine generate text
# ($TEST_NGINX_REF_COMPLETION / $TEST_NGINX_REF_CHAT, set by t/run.sh).
use strict;
use warnings;
use IO::Socket::INET;
use JSON::PP;

my ($port, $conc, $mode) = @ARGV;
die "usage: $0 PORT CONCURRENCY completions|chat|stream|chat_stream\n"
    unless defined $mode && $port =~ /^\d+$/ && $conc =~ /^\d+$/ && $conc > 0
        && $mode =~ /^(completions|chat|stream|chat_stream)$/;
my $chat   = $mode =~ /chat/;
my $stream = $mode =~ /stream/ ? JSON::PP::true : JSON::PP::false;
my $want   = $chat ? $ENV{TEST_NGINX_REF_CHAT} : $ENV{TEST_NGINX_REF_COMPLETION};
die "$0: TEST_NGINX_REF_COMPLETION / TEST_NGINX_REF_CHAT not set (run through t/run.sh)\n" unless defined $want;

my $json = JSON::PP->new->utf8(1);   # bytes in and out
my ($uri, $body) = $chat
    ? ('/v1/chat/completions', { messages => [{ role => 'user', content => 'Once upon a time' }], max_tokens => 20 })
    : ('/v1/completions', { prompt => 'Once upon a time', max_tokens => 40 });
$body->{temperature} = 0;
$body->{stream} = $stream;
my $payload = $json->encode($body);

# One request over HTTP/1.0 (the body ends at close, never chunked); returns the text.
sub one {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 30)
        or return "connect: $!";
    binmode $s;
    print $s "POST $uri HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        . "Content-Length: " . length($payload) . "\r\n\r\n$payload";
    local $/;
    my $resp = <$s> // '';
    close $s;
    my ($head, $rbody) = split /\r\n\r\n/, $resp, 2;
    return "no 200: " . substr($resp, 0, 120) unless $head =~ m{^HTTP/1\.\d 200};
    my $text = '';
    if ($stream) {
        return "stream does not end with [DONE]" unless $rbody =~ s/data: \[DONE\]\n\n\z//;
        for my $ev (split /\n\n/, $rbody) {
            return "bad SSE event: $ev" unless $ev =~ s/\Adata: //;
            my $c = eval { $json->decode($ev) } or return "bad JSON event: $ev";
            my $ch = $c->{choices}[0];
            $text .= $chat ? ($ch->{delta}{content} // '') : $ch->{text};
        }
    } else {
        my $r = eval { $json->decode($rbody) } or return "bad JSON: $rbody";
        $text = $chat ? $r->{choices}[0]{message}{content} : $r->{choices}[0]{text};
    }
    return $text;
}

my @kids;
for my $i (1 .. $conc) {
    pipe(my $r, my $w) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        close $r;
        my $t = one();
        utf8::encode($t);   # characters -> UTF-8 bytes, like the environment's reference
        print $w ($t eq $want ? "same\n" : "differs: $t\n");
        close $w;
        exit 0;
    }
    close $w;
    push @kids, [$pid, $r];
}
my ($same, @bad) = (0);
for my $k (@kids) {
    my $fh = $k->[1];
    my $line = <$fh> // "no answer\n";
    waitpid $k->[0], 0;
    $line eq "same\n" ? $same++ : push @bad, $line;
}
print "$conc concurrent $mode requests: $same gave the llm-engine generate text\n";
print STDERR @bad;
