#!/usr/bin/perl
# make install into a DESTDIR: the files land where Debian's nginx and systemd look for them, and they work
# from there: the installed engine runs the command line the systemd unit llm-engine@.service gives it (its
# %i, EnvironmentFile and ${MODEL} / $ENGINE_ARGS expanded as systemd does), nginx loads the installed module
# by the line its modules-available file holds, and a completion through both is `llm-engine generate`'s.
# SIGTERM, as systemctl stop sends it, stops the engine and removes its segment.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use HTTP::Tiny;
use JSON::PP;
use Test::More;
require "$FindBin::Bin/lib.pl";
$SIG{PIPE} = "IGNORE";

our ($BUILD, $MODEL, $PROMPT);
plan skip_all => "$BUILD/ngx_http_llm_module.so not built" unless -f "$BUILD/ngx_http_llm_module.so";
my $dir = tempdir(CLEANUP => 1);
my $D = "$dir/root";
my $mods = '/usr/lib/nginx/modules';

is(system("make -s install BUILD=$BUILD DESTDIR=$D PREFIX=/usr/local NGX_MODULES=$mods >$dir/make.log 2>&1"), 0,
   'make install DESTDIR=...') or diag(slurp("$dir/make.log"));
ok(-x "$D/usr/local/bin/$_", "bin/$_ installed, executable") for qw(llm-engine llm-client);
ok(-f "$D$mods/ngx_http_llm_module.so", 'the module in the nginx modules directory');
my $modconf = slurp("$D/usr/share/nginx/modules-available/mod-http-llm.conf");
is($modconf, "load_module $mods/ngx_http_llm_module.so;\n", 'modules-available/mod-http-llm.conf loads it');
is(readlink("$D/etc/nginx/modules-enabled/50-mod-http-llm.conf"), '/usr/share/nginx/modules-available/mod-http-llm.conf',
   'enabled as Debian enables modules');
my $unit = slurp("$D/etc/systemd/system/llm-engine\@.service");
my ($exec) = $unit =~ /^ExecStart=(.*)$/m;
ok(defined $exec && $exec =~ m{^/usr/local/bin/llm-engine serve } && $unit !~ /\@BINDIR\@/,
   'the unit runs the installed engine') or diag($unit);
like($unit, qr{^EnvironmentFile=/etc/ngx_llm/%i\.env$}m, 'the unit reads /etc/ngx_llm/NAME.env');
SKIP: { # systemd's own reading of the unit (its engine path inside DESTDIR): no complaint
    skip 'no systemd-analyze', 1 unless system('command -v systemd-analyze >/dev/null') == 0;
    mkdir "$dir/units";
    open(my $u, '>', "$dir/units/llm-engine\@check.service") or die;
    (my $copy = $unit) =~ s{^ExecStart=/}{ExecStart=$D/}m;
    print $u $copy;
    close $u;
    my $said = `systemd-analyze verify $dir/units/llm-engine\@check.service 2>&1`;
    is($said, '', 'systemd-analyze verify: no complaint');
}
my %env = slurp("$D/etc/ngx_llm/example.env") =~ /^(\w+)=(.*)$/mg;
ok(exists $env{MODEL} && exists $env{ENGINE_ARGS}, 'example.env sets MODEL and ENGINE_ARGS');
ok(-f "$D/etc/ngx_llm/nginx.conf.example", 'nginx.conf.example beside it');

# the unit's command line, as systemd would expand it for llm-engine@NAME with NAME.env
my $name = "inst-$$";
open(my $f, '>', "$D/etc/ngx_llm/$name.env") or die;
print $f "MODEL=$MODEL\nENGINE_ARGS=--threads 1 --slots 8\n";
close $f;
%env = slurp("$D/etc/ngx_llm/$name.env") =~ /^(\w+)=(.*)$/mg;
my @argv;
for my $w (split ' ', $exec) {
    $w =~ s/%i/$name/g;
    if ($w =~ /^\$(\w+)$/) { push @argv, split(' ', $env{$1} // ''); next; } # $VAR: split on spaces
    $w =~ s/\$\{(\w+)\}/$env{$1} \/\/ ''/ge;                                  # ${VAR}: one word
    push @argv, $w;
}
$argv[0] = "$D$argv[0]";
is_deeply([@argv[1 .. $#argv]], ['serve', '--shm', $name, '--model', $MODEL, '--threads', 1, '--slots', 8],
          'ExecStart expands to serve --shm NAME --model MODEL ENGINE_ARGS');
my $pid = spawn_cmd("$dir/engine.out", "$dir/engine.err", @argv);
ok(defined wait_ready($name, 30), 'the installed engine, started as the unit starts it: READY')
    or BAIL_OUT(slurp("$dir/engine.err"));

# nginx with the installed module, loaded by the modules-available line (its path inside DESTDIR)
(my $load = $modconf) =~ s{ /}{ $D/};
my ($npid, $port) = start_nginx($dir, $load, "location / { llm_api; llm_engine $name; llm_model_path $MODEL; }");
is(system("nginx -t -p $dir -c $dir/nginx.conf -e $dir/logs/error.log >$dir/t.log 2>&1"), 0,
   'nginx -t with the installed module') or diag(slurp("$dir/t.log"));
my $http = HTTP::Tiny->new(timeout => 30);
my $res;
for (1 .. 100) {
    $res = $http->get("http://127.0.0.1:$port/health");
    last if $res->{status} == 200;
    select(undef, undef, undef, 0.1);
}
is($res->{status}, 200, 'GET /health through nginx: 200') or diag(slurp("$dir/logs/error.log"));
my $want = `$BUILD/llm-engine generate --model $MODEL --prompt '$PROMPT' --max-tokens 24 --temperature 0 --threads 1 2>/dev/null`;
$want =~ s/\n\z//; # (generate ends its text with a newline)
$res = $http->post("http://127.0.0.1:$port/v1/completions", {
    headers => { 'content-type' => 'application/json' },
    content => qq({"prompt": "$PROMPT", "max_tokens": 24, "temperature": 0}) });
is($res->{status}, 200, 'POST /v1/completions: 200');
my $text = eval { JSON::PP->new->decode($res->{content})->{choices}[0]{text} } // '';
is($text, $want, "the completion is generate's greedy text") or diag($res->{content});
stop_nginx($npid);

kill 'TERM', $pid;
my $st = wait_for($pid, 15);
is($st, 0, 'SIGTERM (systemctl stop): the engine exits 0');
is(segments($name), 0, 'its segment removed');
done_testing();
