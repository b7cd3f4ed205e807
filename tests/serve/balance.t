#!/usr/bin/perl
# llm_balance with two live replicas of stories260K. Under prefix (the default) a request goes to the least busy
# replica, where every 64 tokens of its prompt that a replica took before (whose prefix cache then serves them:
# $llm_cached_tokens) count as one request fewer in flight there, up to 4 more: a prompt that starts as an
# earlier one did goes to the replica that took that one, until it is busier by more than that; a new prompt
# to the least busy. A prefix both replicas took (as a system prompt every request starts with) favours neither,
# while a longer one only one took still does. Under least, the same prompt goes to the replicas in turn. Every
# answer is the same greedy text. A prompt_cache_key makes a request's prefixes its key's own (OpenAI's field).
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use HTTP::Tiny;
use JSON::PP;
use Test::More;
require "$FindBin::Bin/lib.pl";
$SIG{PIPE} = "IGNORE";

our ($BUILD, $MODEL, $PROMPT, $STORY);
plan skip_all => "$BUILD/ngx_http_llm_module.so not built" unless -f "$BUILD/ngx_http_llm_module.so";
my $dir = tempdir(CLEANUP => 1);
my ($C, $D) = ("balc-$$", "bald-$$");
my %pid;
$pid{$_} = replica($dir, $_) for ($C, $D);
my ($npid, $port) = start_nginx($dir, "load_module $ENV{PWD}/$BUILD/ngx_http_llm_module.so;", <<"EOL", <<'EOH');
        location / {
            llm_api;
            llm_engine $C $D;
            llm_model_path $MODEL;
            llm_model_name stories;
            add_header X-Engine \$llm_engine always;
            add_header X-Cached \$llm_cached_tokens always;
        }
        location = /$C/v1/completions {
            llm_api completions;
            llm_engine $C;
            llm_model_path $MODEL;
        }
        location = /$D/v1/completions {
            llm_api completions;
            llm_engine $D;
            llm_model_path $MODEL;
        }
        location = /least/v1/completions {
            llm_api completions;
            llm_engine $C $D;
            llm_balance least;
            llm_model_path $MODEL;
            add_header X-Engine \$llm_engine always;
        }
EOL
EOH
my $http = HTTP::Tiny->new(timeout => 30);
# lib.pl's 306-token story, and P2, with more after it: 405 tokens; Q: 99
my $P = $STORY;
my $P2 = "$P The next morning, Lily woke up early and looked out of the window. The sun was shining and the birds "
       . 'were singing in the trees. She put on her shoes and ran to the park to find the dog again. He was waiting '
       . 'for her by the gate.';
my $Q = 'The little dog had a shiny blue bone. He liked to dig in the garden and hide it under the flowers. One '
      . 'morning, he could not find the bone anywhere, and he felt very sad. His friend the cat came to help him look.';
sub body {
    my ($prompt, $key) = @_;
    return encode_json({ prompt => $prompt, max_tokens => 8, temperature => 0,
                         defined $key ? (prompt_cache_key => $key) : () });
}

# one completion (of the prompt, with prompt_cache_key $key if given): (status, X-Engine, text, X-Cached)
sub complete {
    my ($prompt, $path, $key) = @_;
    my $res = $http->post("http://127.0.0.1:$port" . ($path // '') . "/v1/completions",
                          { headers => { 'content-type' => 'application/json' }, content => body($prompt, $key) });
    my $text = eval { decode_json($res->{content})->{choices}[0]{text} } // '';
    return ($res->{status}, $res->{headers}{'x-engine'} // '', $text, $res->{headers}{'x-cached'} // '');
}

sub slots { # a replica's requests in flight
    my ($engine) = @_;
    my $m = $http->get("http://127.0.0.1:$port/metrics")->{content} // '';
    return $m =~ /^llm_slots_in_use\{engine="\Q$engine\E"\} (\d+)$/m ? $1 : undef;
}

my ($st, $X, $want, $cached) = complete($P);
is($st, 200, 'a 306-token prompt: 200');
ok($X eq $C || $X eq $D, "served by a replica ($X)");
my $Y = $X eq $C ? $D : $C;
my @seq;
for (1 .. 3) {
    my ($s, $e, $text, $c) = complete($P);
    is($text, $want, "the same prompt again ($_): the same greedy text");
    push @seq, "$s:$e:" . ($c >= 288 ? 'cached' : "cached $c");
}
is("@seq", join(' ', ("200:$X:cached") x 3),
   "... goes to $X each time, which has 288 or more of its tokens cached");
my ($s2, $e2, $t2, $c2) = complete($P2);
is("$s2:$e2", "200:$X", 'the prompt with more after it (a next turn): the same replica');
ok($c2 >= 288, "... which has the first one's tokens cached ($c2)");

my ($s3, $Z) = complete($Q);
is($s3, 200, 'another prompt: 200');
@seq = map { my ($s, $e) = complete($Q); "$s:$e" } 1 .. 2;
is("@seq", "200:$Z 200:$Z", "... and it again: the replica that took it ($Z)");

my %least;
for (1 .. 2) {
    my ($s, $e, $text) = complete($P, '/least');
    is($text, $want, "llm_balance least, the first prompt ($_): the same text");
    $least{$e}++;
}
is(join(',', sort keys %least), join(',', sort ($C, $D)), '... from each replica in turn');

# X stopped: requests for P (288 tokens X took: 4.5 requests' worth) wait there while it has at most 4 more in
# flight than Y; the next goes to Y
kill 'STOP', $pid{$X};
my @waiting;
for my $k (1 .. 5) {
    my ($s, $busy) = post_waiting($port, body($P), sub { slots($X) }, $k);
    is($busy, $k, "with $X stopped, request $k for the first prompt waits on $X");
    push @waiting, $s;
}
my ($s4, $e4, $t4) = complete($P);
is("$s4:$e4", "200:$Y", "the sixth, with $X 5 requests busier: $Y");
is($t4, $want, '... the same text');
kill 'CONT', $pid{$X};
for my $k (1 .. 5) {
    my ($raw, $json) = answer($waiting[$k - 1]);
    like($raw, qr{^HTTP/1\.1 200 .*\r\nX-Engine: \Q$X\E\r\n}s, "waiting request $k: 200 from $X");
    is(eval { decode_json($json)->{choices}[0]{text} } // '', $want, '... the same text');
}

# The first prompt's blocks are now on both: with X one request busier (stopped, one waiting there), the first
# prompt goes to Y; the longer one, 96 more tokens of which X alone took, still to X
kill 'STOP', $pid{$X};
my ($w1) = post_waiting($port, body($PROMPT), sub { slots($X) }, 1, "/$X/v1/completions");
my ($s5, $e5) = complete($P);
is("$s5:$e5", "200:$Y", "with $X one request busier, the first prompt, which both took: $Y");
my ($w2, $busy) = post_waiting($port, body($P2), sub { slots($X) }, 2);
is($busy, 2, "... the longer one, which only $X took past the first: $X, one request busier");
kill 'CONT', $pid{$X};
like((answer($_))[0], qr{^HTTP/1\.1 200 }, 'the waiting request: 200') for ($w1, $w2);

# prompt_cache_key: requests with the same key follow each other; another key's prefixes do not count
my ($sk, $A) = complete($P2, '', 'team-a');
is($sk, 200, 'the longer prompt with prompt_cache_key "team-a": 200');
my $B = $A eq $C ? $D : $C;
is(join(' ', map { (complete($P2, '', 'team-a'))[1] } 1 .. 2), "$A $A", "... and again twice: $A each time");
kill 'STOP', $pid{$A};
my ($k1) = post_waiting($port, body($PROMPT), sub { slots($A) }, 1, "/$A/v1/completions");
my ($k2, $kb) = post_waiting($port, body($P2, 'team-a'), sub { slots($A) }, 2);
is($kb, 2, "with $A one request busier, \"team-a\" still goes to $A");
my ($sb, $eb) = complete($P2, '', 'team-b');
is("$sb $eb", "200 $B", "the same prompt with \"team-b\": $B, the less busy (\"team-a\"'s prefix does not count)");
kill 'CONT', $pid{$A};
like((answer($_))[0], qr{^HTTP/1\.1 200 }, 'the waiting request: 200') for ($k1, $k2);
my $bad = $http->post("http://127.0.0.1:$port/v1/completions", { headers => { 'content-type' => 'application/json' },
                      content => encode_json({ prompt => $PROMPT, max_tokens => 2, prompt_cache_key => 7 }) });
is($bad->{status}, 400, 'prompt_cache_key not a string: 400');
like($bad->{content}, qr/prompt_cache_key/, '... naming it');

stop_engine($pid{$_}) for ($C, $D);
stop_nginx($npid);
is(segments($C) + segments($D), 0, 'segments removed');
done_testing();
