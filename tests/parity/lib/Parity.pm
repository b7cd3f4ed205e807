# Helpers the parity tests share: run a command with its stderr kept aside,
# and compare our next-token distribution with llama.cpp's on the same GGUF.
package Parity;
use strict;
use warnings;
use Exporter 'import';
use JSON::PP;
use List::Util qw(max sum);
use Test::More;

our @EXPORT_OK = qw(capture compare_llamacpp compare_f32_q8 compare_tokenizer cosine greedy_ours greedy_llamacpp
                    edited_copy harness embed_vs_llamacpp hf_round_trip logits_bytes slurp token_counts vectors write_texts);

# Five texts of 3 to 45 tokens, one a line, into $path: the embedding models' tests (the longer ones reach past
# a tiny preset's window of 8 positions each side).
sub write_texts {
    my ($path) = @_;
    open my $fh, '>', $path or die "$path: $!";
    print $fh "$_\n" for ('A cat sat on the mat.',
                          'The little robot counted 1234567 stars over the old harbour, then 89 more, and then it '
                          . 'went home to sleep under the warm blanket of the night sky.',
                          'Why?',
                          'Once upon a time there was a girl named Lily who loved to play in the park with her '
                          . 'friends every single day of the long, hot summer by the sea.',
                          'Embeddings turn text into vectors.');
    close $fh;
}

# gen-model's $preset (seed 3) in $dt as "$stem-$dt.gguf", embedded by us and by llama.cpp
# (bench/llamacpp/embed.mjs) over write_texts' "$dir/in.txt": four tests (the file written, five vectors each
# side, the same token count, every cosine >= 0.9999, or 0.999 for the quantised types, where each side rounds
# the activations to 8 bits its own way).
sub embed_vs_llamacpp {
    my ($dir, $engine, $preset, $stem, $dt) = @_;
    my $f = "$stem-$dt.gguf";
    my ($rc) = capture($dir, $engine, 'gen-model', '--preset', $preset, '--dtype', $dt, '--out', $f, '--seed', '3');
    is($rc, 0, "gen-model --preset $preset --dtype $dt") or return;
    my ($rc1, $o) = capture($dir, $engine, 'embed', '--model', $f, '--input-file', "$dir/in.txt", '--threads', '2',
                            '--no-normalize');
    my ($ours) = slurp("$dir/stderr") =~ /\((\d+) tokens/;
    my ($rc2, $l) = capture($dir, 'node', 'bench/llamacpp/embed.mjs', '--model', $f, '--input-file', "$dir/in.txt",
                            '--threads', '2');
    my ($a, $b) = (vectors($o), vectors($l));
    my ($lc) = $l =~ /"tokens":(\d+)/;
    ok($rc1 == 0 && $rc2 == 0 && @$a == 5 && @$b == 5, "$dt: five vectors from each side") or return;
    is($ours, $lc, "$dt: the same number of tokens as llama.cpp ($lc)");
    my @c = map { cosine($a->[$_], $b->[$_]) } 0 .. 4;
    my $want = $dt =~ /^q/ ? 0.999 : 0.9999;
    ok(List::Util::min(@c) >= $want, sprintf("$dt: llama.cpp's vectors, cosine %s (>= $want)",
                                             join(' ', map { sprintf '%.6f', $_ } @c)));
}

# ($BUILD, its llm-engine, its parity/logits_dump); the whole test is skipped where those, the llama.cpp
# harness or (tokenizer => 1) the shared Llama 3 tokenizer are missing.
sub harness {
    my (%o) = @_;
    my $B = $ENV{BUILD} // 'build';
    my ($engine, $dump) = ("$B/llm-engine", "$B/parity/logits_dump");
    plan(skip_all => "$engine, $dump not built (make parity builds them)") unless -x $engine && -x $dump;
    plan(skip_all => 'llama.cpp harness not installed (npm ci --prefix bench/llamacpp)')
        unless -d 'bench/llamacpp/node_modules/node-llama-cpp';
    plan(skip_all => '../shared/tokenizers/llama3 missing')
        if $o{tokenizer} && !-f '../shared/tokenizers/llama3/tokenizer.json';
    return ($B, $engine, $dump);
}

# Our tokenizer against llama.cpp's on the GGUF $f, for every text of @$texts (Perl strings): llama.cpp's ids
# (bench/llamacpp/tokenize.mjs, special-token text as text and parsed) against `llm-engine tokenize` (and
# --special). Runs the tests "N results from llama.cpp" and the two agreements (the first 10 differences
# shown); returns llama.cpp's results ({ids, special} per text).
sub compare_tokenizer {
    my ($dir, $engine, $f, $texts) = @_;
    open my $fh, '>', "$dir/texts.json" or die $!;
    print $fh JSON::PP->new->ascii->encode($texts);
    close $fh;
    my ($rc, $out) = capture($dir, 'node', 'bench/llamacpp/tokenize.mjs', '--model', $f, '--input-file',
                             "$dir/texts.json");
    my @ref = map { decode_json($_) } grep { /^\{/ } split /\n/, $out;
    is($rc, 0, 'llama.cpp tokenizes the texts');
    is(scalar @ref, scalar @$texts, scalar(@$texts) . ' results from llama.cpp') or BAIL_OUT('no reference');
    my ($bad, $bad_sp, $shown) = (0, 0, 0);
    for my $i (0 .. $#$texts) {
        my $t = $texts->[$i];
        utf8::encode($t);
        my (undef, $o) = capture($dir, $engine, 'tokenize', '--tokenizer', $f, '--text', $t);
        my (undef, $s) = capture($dir, $engine, 'tokenize', '--tokenizer', $f, '--text', $t, '--special');
        my ($want, $want_sp) = (encode_json($ref[$i]{ids}), encode_json($ref[$i]{special}));
        chomp($o, $s);
        $bad++ if $o ne $want;
        $bad_sp++ if $s ne $want_sp;
        diag(JSON::PP->new->ascii->encode([$texts->[$i]]) . ": ours $o / $s, llama.cpp's $want / $want_sp")
            if ($o ne $want || $s ne $want_sp) && $shown++ < 10;
    }
    is($bad, 0, scalar(@$texts) . ' texts: our ids are llama.cpp\'s');
    is($bad_sp, 0, scalar(@$texts) . ' texts with special tokens parsed: our ids are llama.cpp\'s');
    return \@ref;
}

# (exit status, stdout) of a command; its stderr goes to $dir/stderr.
sub capture {
    my ($dir, @cmd) = @_;
    open my $save, '>&', \*STDERR or die $!;
    open STDERR, '>', "$dir/stderr" or die $!;
    open my $fh, '-|', @cmd or die "cannot run $cmd[0]: $!";
    open STDERR, '>&', $save or die $!;
    my $out = do { local $/; <$fh> };
    close $fh;
    return ($? >> 8, $out // '');
}

# (exit status, [ids]): $n greedy ids our engine generates after the prompt ids $ids (2 threads, EOS ignored).
sub greedy_ours {
    my ($dir, $engine, $n, $model, $ids, @extra) = @_;
    my ($rc, $out) = capture($dir, $engine, 'generate', '--model', $model, '--prompt-ids', join(',', @$ids),
                             '--max-tokens', $n, '--threads', '2', '--ignore-eos', '--output-ids', @extra);
    return ($rc, [ split ' ', $out ]);
}

# [ids]: the same from llama.cpp (bench/llamacpp/run.mjs), empty when it failed. $exact: its KV cache in F32
# and no flash attention (compare_llamacpp's exact; ours then with --kv-cache-dtype f32).
sub greedy_llamacpp {
    my ($dir, $n, $model, $ids, $exact) = @_;
    my (undef, $out) = capture($dir, 'node', 'bench/llamacpp/run.mjs', '--model', $model, '--prompt-tokens',
                               join(',', @$ids), '--max-tokens', $n, '--threads', '1', '--json', '--no-warmup',
                               $exact ? ('--kv-type', 'f32', '--flash-attn', 'off') : ());
    my ($line) = grep { /^\{/ } split /\n/, $out;
    return [ defined $line && $line =~ /"ids":\[([0-9,]*)\]/ ? split(/,/, $1) : () ];
}

# (ours, llama.cpp's): how many tokens each makes of $text with BOS (ours undef where tokenize failed, llama.cpp's
# where it gave none): pre-tokenizer checks on files whose vocabulary both read.
sub token_counts {
    my ($dir, $engine, $model, $text) = @_;
    my ($rc, $tok) = capture($dir, $engine, 'tokenize', '--model', $model, '--text', $text, '--bos');
    my @ids = $tok =~ /(\d+)/g;
    my (undef, $lc) = capture($dir, 'node', 'bench/llamacpp/run.mjs', '--model', $model, '--prompt', $text,
                              '--max-tokens', '1', '--threads', '1', '--json', '--no-warmup');
    my ($np) = $lc =~ /"n_prompt":(\d+)/;
    return ($rc == 0 ? scalar(@ids) : undef, $np);
}

# The JSON arrays among an output's lines (one vector a line: `llm-engine embed`, bench/llamacpp/embed.mjs).
sub vectors { return [ map { decode_json($_) } grep { /^\[/ } split /\n/, $_[0] ] }

# Cosine similarity of two vectors.
sub cosine {
    my ($a, $b) = @_;
    my ($d, $na, $nb) = (0, 0, 0);
    for my $i (0 .. $#$a) { $d += $a->[$i] * $b->[$i]; $na += $a->[$i]**2; $nb += $b->[$i]**2 }
    return $d / sqrt($na * $nb);
}

# A Hugging Face directory $from copied to $to with edits (the malformed checkpoints tests refuse): $edit_cfg
# gets config.json's object, $edit_st the safetensors header's object and a reference to its data bytes; each
# optional. Returns $to.
sub edited_copy {
    my ($from, $to, $edit_cfg, $edit_st) = @_;
    system('rm', '-rf', $to);
    system('cp', '-r', $from, $to);
    my $cfg = decode_json(slurp("$to/config.json"));
    $edit_cfg->($cfg) if $edit_cfg;
    open my $fh, '>', "$to/config.json" or die $!;
    print $fh encode_json($cfg);
    close $fh;
    if ($edit_st) {
        my $st = slurp("$to/model.safetensors");
        my $n = unpack('Q<', $st);
        my $h = decode_json(substr($st, 8, $n));
        my $data = substr($st, 8 + $n);
        $edit_st->($h, \$data);
        my $j = encode_json($h);
        $j .= ' ' x ((8 - length($j) % 8) % 8);
        open $fh, '>:raw', "$to/model.safetensors" or die $!;
        print $fh pack('Q<', length($j)), $j, $data;
        close $fh;
    }
    return $to;
}

# A file's bytes.
sub slurp {
    my ($p) = @_;
    open my $fh, '<:raw', $p or die "$p: $!";
    local $/;
    return <$fh>;
}

# Our logits of $model (CPU backend, $dump = build/parity/logits_dump) over the ids $ids, the last $decode of
# them decoded one by one, as bytes (a model in another form compared bit for bit); "failed: ..." otherwise.
sub logits_bytes {
    my ($dir, $dump, $model, $ids, $decode) = @_;
    open my $fh, '>:raw', "$dir/ids.i32" or die $!;
    print $fh pack('l<*', @$ids);
    close $fh;
    my ($rc) = capture($dir, $dump, '--backend', 'cpu', '--model', $model, '--ids', "$dir/ids.i32", '--out',
                       "$dir/logits.f32", '--decode', $decode // 0);
    return $rc == 0 ? slurp("$dir/logits.f32") : 'failed: ' . `tail -2 $dir/stderr`;
}

# $model re-saved as a Hugging Face directory ($dir/hf-$label, F32; returned) and that back as GGUF: our
# greedy ids from each, and llama.cpp's from the GGUF, are $want (ids after the prompt $ids). $check, if
# given, runs on the directory (its config.json, its tensors) before that. exact => 1: both sides keep the
# KV cache in F32 (and llama.cpp leaves flash attention off).
sub hf_round_trip {
    my (%a) = @_;
    my ($dir, $engine, $label, $ids, $want) = @a{qw(dir engine label ids want)};
    my $n = @$want;
    my @kv = $a{exact} ? ('--kv-cache-dtype', 'f32') : ();
    my $hf = "$dir/hf-$label";
    my ($rc) = capture($dir, $engine, 'gen-model', '--from', $a{model}, '--dtype', 'f32', '--format', 'hf',
                       '--out', $hf);
    is($rc, 0, "$label: re-saved as a Hugging Face directory");
    $a{check}->($hf) if $a{check};
    my (undef, $c) = greedy_ours($dir, $engine, $n, $hf, $ids, @kv);
    is_deeply($c, $want, "$label: the Hugging Face directory gives the same ids") or diag(`tail -3 $dir/stderr`);
    my $back = "$dir/back-$label.gguf";
    capture($dir, $engine, 'gen-model', '--from', $hf, '--dtype', 'f32', '--out', $back,
            '--tokenizer', '../shared/tokenizers/llama3/tokenizer.json');
    my (undef, $d) = greedy_ours($dir, $engine, $n, $back, $ids, @kv);
    is_deeply($d, $want, "$label: and again as GGUF") or diag(`tail -3 $dir/stderr`);
    is_deeply(greedy_llamacpp($dir, $n, $back, $ids, $a{exact}), $want,
              "$label: llama.cpp reads that GGUF to the same ids");
    return $hf;
}

# Teacher-forced over $ids: our logits (CPU backend, $dump = build/parity/logits_dump)
# against llama.cpp's top tokens (bench/llamacpp/run.mjs --probs): the share of
# positions whose top-1 agree (>= $min_top1) and |p ours - p llama.cpp| of
# llama.cpp's top-1 (mean <= $max_mean, max <= $max_dp). exact => 1: llama.cpp's KV cache in F32 and its
# attention without the flash kernel (by default both round keys, values and scores to F16, which our F32
# models keep exact: on models whose activations are large that alone moves probabilities by ~0.002).
# lora => ADAPTER.gguf (lora_scale => S): llama.cpp applies that adapter at run time and we merge it (or
# lora_ours => another file of the same adapter, e.g. its PEFT directory). kv => q8_0 (or f16, f32): that KV
# cache type on both sides (kv_ours / kv_ref: on one). ours => PATH: our engine runs that model (the same
# weights in another form, a Hugging Face directory) where llama.cpp runs model. Returns the top-1 agreement,
# the mean and the max |dp| (nothing when a side failed).
# A decoder's usual three comparisons on files of Llama 3's vocabulary: the F32 file (f32 =>) teacher-forced in
# one step and its last 30 tokens one by one (both exact, within 5e-4 mean / 5e-3 max, 97% top-1), then the
# Q8_0 file (q8 =>) within q8_top1 (0.9), q8_mean (0.03) and q8_dp (0.2).
sub compare_f32_q8 {
    my (%a) = @_;
    my @common = (dir => $a{dir}, dump => $a{dump}, ids => $a{ids}, vocab => 128256);
    compare_llamacpp(@common, label => "$a{label} f32", model => $a{f32}, min_top1 => 0.97, max_mean => 0.0005,
                     max_dp => 0.005, exact => 1);
    compare_llamacpp(@common, label => "$a{label} f32 decode", model => $a{f32}, min_top1 => 0.97,
                     max_mean => 0.0005, max_dp => 0.005, decode => 30, exact => 1);
    compare_llamacpp(@common, label => "$a{label} q8_0", model => $a{q8}, min_top1 => $a{q8_top1} // 0.9,
                     max_mean => $a{q8_mean} // 0.03, max_dp => $a{q8_dp} // 0.2);
}

sub compare_llamacpp {
    my (%a) = @_;
    my ($dir, $dump, $label, $model, $ids, $vocab) = @a{qw(dir dump label model ids vocab)};
    my $P = @$ids;
    open my $fh, '>:raw', "$dir/ids.i32" or die $!;
    print $fh pack('l<*', @$ids);
    close $fh;
    my @lora_ours = $a{lora} ? ('--lora', $a{lora_ours} // $a{lora}, '--lora-scale', $a{lora_scale} // 1) : ();
    my @lora_ref = $a{lora} ? ('--lora', $a{lora}, '--lora-scale', $a{lora_scale} // 1) : ();
    my ($rc1) = capture($dir, $dump, '--backend', 'cpu', '--model', $a{ours} // $model, '--ids', "$dir/ids.i32",
                        '--out', "$dir/ours.f32", '--decode', $a{decode} // 0, @lora_ours,
                        ($a{kv_ours} // $a{kv}) ? ('--kv-cache-dtype', $a{kv_ours} // $a{kv}) : ());
    my $err1 = `tail -3 $dir/stderr`;
    my ($rc2, $out) = capture($dir, 'node', 'bench/llamacpp/run.mjs', '--model', $model, '--prompt-tokens',
                              join(',', @$ids), '--max-tokens', '1', '--threads', '2', '--probs', '4',
                              $a{exact} ? ('--kv-type', 'f32', '--flash-attn', 'off') : (),
                              ($a{kv_ref} // $a{kv}) ? ('--kv-type', $a{kv_ref} // $a{kv}) : (), @lora_ref);
    my ($line) = grep { /^\{"probs"/ } split /\n/, $out;
    unless (is($rc1, 0, "$label: our logits") && is($rc2, 0, "$label: llama.cpp's probabilities") && $line) {
        diag($err1, `tail -3 $dir/stderr`);
        return;
    }
    my $probs = decode_json($line)->{probs};
    open $fh, '<:raw', "$dir/ours.f32" or die $!;
    my $raw = do { local $/; <$fh> };
    close $fh;
    my ($agree, $worst, $total) = (0, 0, 0);
    for my $i (0 .. $P - 1) {
        my @l = unpack('f<*', substr($raw, $i * $vocab * 4, $vocab * 4));
        my $m = max(@l);
        my $z = sum(map { exp($_ - $m) } @l);
        my ($best) = sort { $l[$b] <=> $l[$a] || $a <=> $b } 0 .. $#l;
        my ($top, $p) = @{ $probs->[$i] }[0, 1];
        $agree++ if $best == $top;
        my $dp = abs(exp($l[$top] - $m) / $z - $p);
        $worst = $dp if $dp > $worst;
        $total += $dp;
    }
    ok($agree / $P >= $a{min_top1},
       sprintf("%s: top-1 agreement with llama.cpp %d of %d (>= %.2f)", $label, $agree, $P, $a{min_top1}));
    ok($total / $P <= $a{max_mean} && $worst <= $a{max_dp},
       sprintf("%s: |p ours - p llama.cpp| of llama.cpp's top-1: mean %.4f (<= %g), max %.4f (<= %g)",
               $label, $total / $P, $a{max_mean}, $worst, $a{max_dp}));
    return ($agree / $P, $total / $P, $worst);
}

1;
