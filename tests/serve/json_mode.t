#!/usr/bin/perl
# JSON mode end to end on a real model: `llm-engine generate --json` (the engine's mask, as serve applies it to
# response_format json_object) must print one JSON object that a JSON parser takes, and stop right after it
# closes; `generate --json-schema` an object its schema accepts. stories260K writes stories, not JSON: biases toward '}' and '"' and against newlines make it close
# its objects within the token budget; the mask alone must make what it writes valid.
use strict;
use warnings;
use File::Temp qw(tempdir);
use FindBin;
use JSON::PP;
use Test::More;
require "$FindBin::Bin/lib.pl";

our ($BUILD, $MODEL);
plan skip_all => "$BUILD/llm-engine not built" unless -x "$BUILD/llm-engine";
my $dir = tempdir(CLEANUP => 1);
my $E = "$BUILD/llm-engine";

for my $seed (1 .. 5) {
    my $out = `$E generate --model $MODEL --prompt 'Once upon a time' --threads 1 --max-tokens 480 --temperature 0.8 --seed $seed --logit-bias 128=10,436=5,13=-100 --json 2>$dir/err`;
    is($? >> 8, 0, "seed $seed: generate --json runs") or diag(slurp("$dir/err"));
    chomp $out; # generate's own newline
    my $v = eval { JSON::PP->new->decode($out) };
    ok(ref $v eq 'HASH' && $out =~ /\}\s*\z/,
       "seed $seed: one JSON object with " . (ref $v eq 'HASH' ? scalar(keys %$v) : '?') . " keys, nothing after it")
        or diag("not JSON ($@): $out");
}

# No biases, greedy: max_tokens cuts the object, but it is an object that was being written, not the story.
my $out = `$E generate --model $MODEL --prompt 'Once upon a time' --threads 1 --max-tokens 60 --json 2>$dir/err`;
chomp $out;
ok($out =~ /\A\s*\{\s*"/, 'greedy, no biases: the text opens an object and a key') or diag($out);

# --json-schema: values that a JSON parser takes and that match tests/data/story_schema.json, property by property.
for my $seed (1 .. 5) {
    my $out = `$E generate --model $MODEL --prompt 'Once upon a time' --threads 1 --max-tokens 200 --temperature 0.8 --seed $seed --logit-bias 13=-100,410=-100,35=-100,12=-100,16=-100 --json-schema tests/data/story_schema.json 2>$dir/err`;
    is($? >> 8, 0, "seed $seed: generate --json-schema runs") or diag(slurp("$dir/err"));
    chomp $out;
    my $v = eval { JSON::PP->new->decode($out) };
    my @keys = $out =~ /"(name|age|happy|friends)"\s*:/g;
    ok(ref $v eq 'HASH' && "@keys" =~ /\Aname age happy( friends)?\z/ && keys(%$v) == @keys
       && length($v->{name}) <= 12 && $v->{age} =~ /\A-?\d+\z/ && JSON::PP::is_bool($v->{happy})
       && (!exists $v->{friends} || (ref $v->{friends} eq 'ARRAY' && @{$v->{friends}} <= 2
                                     && !grep { length($_) > 10 } @{$v->{friends}})),
       "seed $seed: the schema's object, keys in order (@keys)") or diag("not the schema's ($@): $out");
}
`printf '{"type":"string","pattern":"(?=a)"}' > $dir/bad.json`;
$out = `$E generate --model $MODEL --prompt x --max-tokens 4 --json-schema $dir/bad.json 2>&1`;
ok(($? >> 8) != 0 && $out =~ /lookaround and named groups are not supported/, 'a schema with a pattern it cannot follow: a clear error') or diag($out);
$out = `$E generate --model $MODEL --prompt x --max-tokens 4 --json-schema $dir/none.json 2>&1`;
ok(($? >> 8) != 0 && $out =~ /none\.json/, 'a schema file that does not exist: an error naming it') or diag($out);

my $err = `$E generate --model $MODEL --prompt x --max-tokens 4 --json --tokenizer /nonexistent 2>&1`;
isnt($? >> 8, 0, 'generate --json with a tokenizer that cannot load fails cleanly');
done_testing();
