#!/bin/sh
# test/test_translate_options.sh — ./translate's scoring, target prefixes, sampling, files and
# n-best options end to end, each checked by its effect: --score of the program's own n-best
# output gives back its log-probabilities (an ensemble's too), prefixes start the output, a seed reproduces a
# sample, -i/-o equal stdin/stdout, n-best lines count from 0, a line read from a pipe held open is
# translated before the next comes; bad values are refused.
# Trains a tiny model first (about 10 s). Run from the repository root after `make`; the
# optional argument is the folder holding the programs. Ends with
# "translate_options: N passed, M failed".
set -u
B=${1:-.}
. test/check.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

toy_corpus "$T/corpus"
"$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data "$T/corpus" --out "$T/run" \
    --max-steps 60 --max-tokens 400 --save-every-steps 30 --warmup 20 --log-every 1000s --no-eval > "$T/train.log" 2>&1
check $? "a tiny model trains"
M="$T/run/average.safetensors"
IN="$T/corpus/test.en"
tr() { "$B"/translate --model "$M" --quiet "$@"; }

# max |a - b| over two columns of numbers: "maxdiff FILE_A FILE_B"; "none" (which no
# 'd <= 1e-4' passes) when there are no lines or one file has fewer (empty == empty had given 0)
maxdiff() { paste "$1" "$2" | awk -F '\t' '$1 == "" || $2 == "" { bad = 1 } { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d }
    END { if (bad || NR == 0) printf "none (%d lines, some unpaired or empty: %d)", NR, bad; else printf "%.2e", m + 0 }'; }
# field N (1-based) of " ||| "-separated lines
field() { awk -F ' [|][|][|] ' -v n="$1" '{ print $n }' "$2"; }
# the tokens of a line of text as ./translate counts them (its refusal at --max-input-tokens 1 names
# the count): "tokens_of TEXT [MODEL]"
tokens_of() { printf '%s\n' "$1" | "$B"/translate --model "${2:-$M}" --max-input-tokens 1 2>&1 >/dev/null |
    sed -n 's/^translate: line 1: \([0-9]*\) tokens.*/\1/p'; }
# the source line of each n-best line ("i ||| hyp ||| ..."), paired: "SOURCE ||| hyp"
pairs() { awk -F ' [|][|][|] ' 'NR == FNR { src[NR - 1] = $0; next } { print src[$1] " ||| " $2 }' "$1" "$2"; }

# ---- n-best lines count from 0, every line numbered in order
tr --nbest 3 < "$IN" > "$T/nbest.txt"
n=$(wc -l < "$IN")
field 1 "$T/nbest.txt" | uniq > "$T/ids.txt"
seq 0 $((n - 1)) | cmp -s - "$T/ids.txt"; check $? "--nbest 3: lines numbered 0..$((n - 1)) in input order ($(head -n 1 "$T/ids.txt")..$(tail -n 1 "$T/ids.txt"))"
[ "$(wc -l < "$T/nbest.txt")" -eq $((3 * n)) ]; check $? "--nbest 3: 3 entries per line ($(wc -l < "$T/nbest.txt") for $n lines)"
# a NUL byte in a translation (here forced by a prefix: a model can copy one from its source)
# is written whole in an n-best line, as in the 1-best output (printf's %s had cut the text there)
printf 'sun ||| luno\000sol moon\n' | tr --prefix-inline --beam 2 --nbest 2 | head -n 1 | command tr '\000' @ > "$T/nul.txt"
grep -q '^0 ||| luno@sol moon' "$T/nul.txt"; check $? "--nbest: a NUL byte in a translation kept with the text after it: $(head -c 60 "$T/nul.txt")"
awk 'BEGIN { for (i = 0; i < 30; i++) printf "sun moon "; print "" }' > "$T/long.txt"
tr --split-long --max-input-tokens 16 --nbest 2 < "$T/long.txt" > "$T/long_nbest.txt"
s=$?; [ $s -eq 0 ] && [ "$(wc -l < "$T/long_nbest.txt")" -eq 2 ] && [ "$(field 1 "$T/long_nbest.txt" | sort -u)" = 0 ]
check $? "--split-long --nbest 2: a line cut in pieces keeps 2 numbered n-best entries (exit $s, $(wc -l < "$T/long_nbest.txt") lines)"
# its score: the pieces' summed log-probability over GNMT's length penalty ((5 + n) / 6)^0.6 of
# all n tokens, for some n at least the words of the text (n is not printed: a search over n;
# neighbouring n differ by over 0.3%, the printed 6 decimals by 1e-6)
awk -F ' [|][|][|] ' '{ s = $3 + 0; l = $4 + 0; w = split($2, x, " "); ok = 0
    for (n = (w > 2 ? w : 2); n <= 4 * w + 64; n++) { d = l / ((5 + n) / 6) ^ 0.6 - s; if (d < 0) d = -d; if (d <= 2e-6) ok = n }
    printf "%s%d", (NR > 1 ? " " : ""), ok; if (!ok) bad = 1 } END { exit bad || NR == 0 }' "$T/long_nbest.txt" > "$T/long_n.txt"
check $? "--split-long --nbest 2: each entry's score is its log-probability over the length penalty of all its tokens (n = $(cat "$T/long_n.txt"))"

# ---- --split-sentences: a line is its sentences' own translations joined by a space
printf 'sun moon.\nMoon sun!\n' | tr --beam 2 > "$T/alone.txt"
printf 'sun moon.  Moon sun!\n' | tr --beam 2 --split-sentences > "$T/sentences.txt"
s=$?; [ $s -eq 0 ] && [ "$(wc -l < "$T/sentences.txt")" -eq 1 ] && [ "$(paste -sd' ' "$T/alone.txt")" = "$(cat "$T/sentences.txt")" ]
check $? "--split-sentences: 'sun moon.  Moon sun!' gives its sentences' translations joined by a space (exit $s): $(cat "$T/sentences.txt")"
printf 'sun moon. Moon sun moon sun moon sun moon sun moon sun moon sun moon sun.\n' | tr --split-sentences --max-input-tokens 8 > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "line 1: a sentence of .* tokens, more than --max-input-tokens 8" "$T/err.txt"
check $? "--split-sentences, a sentence over --max-input-tokens: refused, exit 1 ($s): $(head -c 120 "$T/err.txt")"
printf 'sun moon. Moon sun moon sun moon sun moon sun moon sun moon sun moon sun.\n' | tr --split-sentences --split-long --max-input-tokens 8 > "$T/cut.txt"
s=$?; [ $s -eq 0 ] && [ "$(wc -l < "$T/cut.txt")" -eq 1 ]
check $? "--split-sentences --split-long: that sentence cut, one output line (exit $s)"
# a line that fits exactly (K tokens, --max-input-tokens K) stays whole under --split-long, though
# it has two sentences (cut into them, it translates otherwise: checked first)
printf 'sun moon sky. Moon sun sea!\n' > "$T/two_sentences.txt"
k=$(tokens_of "$(cat "$T/two_sentences.txt")")
tr --beam 2 --max-input-tokens "${k:-1}" < "$T/two_sentences.txt" > "$T/whole.txt"
tr --beam 2 --split-sentences < "$T/two_sentences.txt" > "$T/halves.txt"
tr --beam 2 --split-long --max-input-tokens "${k:-1}" < "$T/two_sentences.txt" > "$T/fits.txt"
s=$?; [ $s -eq 0 ] && [ -n "$k" ] && ! cmp -s "$T/whole.txt" "$T/halves.txt" && cmp -s "$T/whole.txt" "$T/fits.txt"
check $? "--split-long --max-input-tokens $k: a line of exactly $k tokens (two sentences) is translated whole: $(cat "$T/fits.txt") (cut: $(cat "$T/halves.txt"))"
for other in --score --alignment; do
    echo 'sun ||| moon' | tr --split-sentences $other > /dev/null 2> "$T/err.txt"
    s=$?; [ $s -eq 2 ] && grep -q -- "--split-sentences" "$T/err.txt"
    check $? "--split-sentences with $other: refused, exit 2 ($s): $(head -c 100 "$T/err.txt")"
done

# ---- scoring: the program's own output scored gives back its log-probabilities (n-best
# rescoring: the n-best lines paired with their sources, then --score; test_decode checks
# greedy and beam hypotheses by their token ids); an empty line among them: its n-best line is
# the empty translation at 0, and so is its score (it had scored </s> alone)
{ head -n 3 "$IN"; echo; tail -n +4 "$IN"; } > "$T/in_empty.txt"
tr --beam 4 --nbest 4 < "$T/in_empty.txt" > "$T/own4.txt"
pairs "$T/in_empty.txt" "$T/own4.txt" > "$T/pairs4.txt"
tr --score < "$T/pairs4.txt" > "$T/scored4.txt"; s=$?
[ $s -eq 0 ] && [ -s "$T/pairs4.txt" ] && [ "$(wc -l < "$T/scored4.txt")" -eq "$(wc -l < "$T/pairs4.txt")" ]
check $? "--score on the n-best output: one line per pair (exit $s)"
field 4 "$T/own4.txt" > "$T/a.txt"; field 2 "$T/scored4.txt" > "$T/b.txt"
d=$(maxdiff "$T/a.txt" "$T/b.txt")
awk -v d="$d" 'BEGIN { exit !(d <= 1e-4) }'; check $? "--score of the beam-4 n-best output == its logprobs (max diff $d <= 1e-4, $(wc -l < "$T/a.txt") hypotheses)"
field 3 "$T/own4.txt" > "$T/a.txt"; field 1 "$T/scored4.txt" > "$T/b.txt"
d=$(maxdiff "$T/a.txt" "$T/b.txt")
awk -v d="$d" 'BEGIN { exit !(d <= 1e-4) }'; check $? "--score: the length-normalised scores == the n-best scores (max diff $d <= 1e-4)"
cut -f1 -d'|' "$T/pairs4.txt" | sed 's/ *$//' > "$T/src4.txt"
field 2 "$T/pairs4.txt" > "$T/ref4.txt"
tr --score --ref "$T/ref4.txt" < "$T/src4.txt" > "$T/scored_ref.txt"
[ -s "$T/scored4.txt" ] && cmp -s "$T/scored_ref.txt" "$T/scored4.txt"; check $? "--score --ref FILE == 'SOURCE ||| TARGET' lines"
tr --score --score-tokens < "$T/pairs4.txt" > "$T/tokens.txt"
awk -F ' [|][|][|] ' '{ n = split($3, v, " "); s = 0; for (i = 1; i <= n; i++) s += v[i]; d = s - $2; if (d < 0) d = -d; if (d > m) m = d }
    END { exit !(NR > 0 && m <= 1e-4) }' "$T/tokens.txt"
check $? "--score-tokens: the per-token log-probabilities add up to the line's"
[ -s "$T/scored4.txt" ] && awk -F ' [|][|][|] ' '{ print $1 " ||| " $2 }' "$T/tokens.txt" | cmp -s - "$T/scored4.txt"
check $? "--score-tokens: the first two fields unchanged"
# one log-probability per target token and one for </s>, no more (a loop one past printed a value
# read beyond the line's: the sum above unchanged where it read 0)
nt=$(tokens_of "suno moono")
echo "sun moon ||| suno moono" | tr --score --score-tokens > "$T/one.txt"
[ -n "$nt" ] && [ "$(field 3 "$T/one.txt" | wc -w)" -eq $((nt + 1)) ]
check $? "--score-tokens: 'suno moono' ($nt tokens) gives $((nt + 1)) log-probabilities: $(field 3 "$T/one.txt")"
# Only an empty line with an empty target scores 0 (the search's answer to an empty line); an empty
# target after a source is </s> alone, and a target after an empty source is scored: both below 0
# (they had been taken for the empty line, scored 0)
printf ' ||| \nsun moon ||| \n ||| suno\n' | tr --score --score-tokens > "$T/empties.txt"
awk -F ' [|][|][|] ' 'NR == 1 && !($1 == 0 && $2 == 0 && $3 == 0) { bad = 1 } NR > 1 && !($2 < 0) { bad = 1 } END { exit bad || NR != 3 }' "$T/empties.txt"
check $? "--score: ' ||| ' scores 0, 'sun moon ||| ' (</s> alone) and ' ||| suno' below 0: $(field 2 "$T/empties.txt" | paste -sd' ')"
# a target's tokens and its </s> must fit --max-input-tokens: N tokens need N + 1
nt=$(tokens_of "sunno moono staro")
echo "sun moon star ||| sunno moono staro" | tr --score --max-input-tokens "${nt:-1}" > /dev/null 2> "$T/err.txt"; s=$?
echo "sun moon star ||| sunno moono staro" | tr --score --max-input-tokens $((${nt:-1} + 1)) > /dev/null; s1=$?
[ -n "$nt" ] && [ $s -eq 1 ] && [ $s1 -eq 0 ] && grep -q "target: $nt tokens, more than $((${nt:-1} - 1)) (--max-input-tokens $nt less one: its </s> must fit)" "$T/err.txt"
check $? "--score: a target of $nt tokens refused at --max-input-tokens $nt (exit $s: $(head -c 90 "$T/err.txt")), taken at $((${nt:-1} + 1)) (exit $s1)"

# ---- a model with learned positions (max_len 12) takes lines of 11 tokens: with </s>, 12 positions
"$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data "$T/corpus" --out "$T/learned" --learned-pos \
    --max-len 12 --max-steps 2 --max-tokens 400 --warmup 2 --log-every 1000s --no-eval > "$T/learned.log" 2>&1
check $? "a tiny model with learned positions, max_len 12, trains 2 steps"
LP="$T/learned/average.safetensors"
eleven=""; twelve=""; words=""
for i in $(seq 1 14); do
    words="$words sun"
    case $(tokens_of "$words" "$LP") in 11) eleven=$words ;; 12) twelve=$words ;; esac
done
echo "$eleven" | "$B"/translate --model "$LP" --quiet > /dev/null 2>&1; s=$?
echo "$twelve" | "$B"/translate --model "$LP" --quiet > /dev/null 2> "$T/err.txt"; s1=$?
[ -n "$eleven" ] && [ -n "$twelve" ] && [ $s -eq 0 ] && [ $s1 -eq 1 ] && grep -q "line 1: 12 tokens, more than --max-input-tokens 11" "$T/err.txt"
check $? "learned positions, max_len 12: a line of 11 tokens translated (exit $s), one of 12 refused (exit $s1: $(head -c 90 "$T/err.txt"))"
# --max-input-tokens above the limit is said, with what sets it: the learned table (here 11, and
# 1,999 for a table of 2,000, larger than the sinusoids' 1,024), or 1,024 with sinusoids
"$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data "$T/corpus" --out "$T/learned2k" --learned-pos \
    --max-len 2000 --max-steps 1 --max-tokens 2000 --warmup 2 --log-every 1000s --no-eval > "$T/learned2k.log" 2>&1
for c in "$LP:11 (a learned position table" "$T/learned2k/average.safetensors:1999 (a learned position table" \
         "$M:1024 (this program's limit with sinusoids"; do
    echo sun | "$B"/translate --model "${c%%:*}" --max-input-tokens 5000 --quiet > /dev/null 2> "$T/err.txt"; s=$?
    [ $s -eq 0 ] && grep -q "more than the model takes: ${c#*:}" "$T/err.txt"
    check $? "--max-input-tokens 5000 with $(basename "$(dirname "${c%%:*}")"): said, ${c#*:}) (exit $s: $(head -c 120 "$T/err.txt"))"
done

# ---- --ensemble: a model with itself translates as the model alone; an ensemble's own n-best
# output, scored by the same ensemble, gives back its log-probabilities (test_decode checks the
# search against a brute-force mean of the members' probabilities)
C30="$T/run/ckpt-00000030.safetensors"
tr --beam 4 --nbest 2 < "$IN" > "$T/alone2.txt"
tr --beam 4 --nbest 2 --ensemble "$M" < "$IN" > "$T/self2.txt"; s=$?
field 2 "$T/alone2.txt" > "$T/a.txt"; field 2 "$T/self2.txt" > "$T/b.txt"
field 4 "$T/alone2.txt" > "$T/c.txt"; field 4 "$T/self2.txt" > "$T/d.txt"
d=$(maxdiff "$T/c.txt" "$T/d.txt")
[ $s -eq 0 ] && cmp -s "$T/a.txt" "$T/b.txt" && awk -v d="$d" 'BEGIN { exit !(d <= 1e-4) }'
check $? "--ensemble (the model itself): the n-best texts of the model alone, logprobs within $d (exit $s)"
tr --beam 4 --nbest 4 --ensemble "$C30" < "$IN" > "$T/ens4.txt"; s=$?
pairs "$IN" "$T/ens4.txt" > "$T/ens_pairs.txt"
tr --score --ensemble "$C30" < "$T/ens_pairs.txt" > "$T/ens_scored.txt"
field 4 "$T/ens4.txt" > "$T/a.txt"; field 2 "$T/ens_scored.txt" > "$T/b.txt"
d=$(maxdiff "$T/a.txt" "$T/b.txt")
[ $s -eq 0 ] && [ -s "$T/a.txt" ] && awk -v d="$d" 'BEGIN { exit !(d <= 1e-4) }'
check $? "--ensemble (two checkpoints): --score of its beam-4 n-best output == its logprobs (max diff $d, $(wc -l < "$T/a.txt") hypotheses)"
tr --score < "$T/ens_pairs.txt" > "$T/alone_scored.txt"
field 2 "$T/alone_scored.txt" > "$T/c.txt"
! cmp -s "$T/b.txt" "$T/c.txt"; check $? "--ensemble: --score differs from the first model's alone (the member counts)"
"$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 280 --data "$T/corpus" --out "$T/run280" \
    --max-steps 2 --max-tokens 400 --warmup 20 --log-every 1000s --no-eval > "$T/train280.log" 2>&1
echo "sun moon" | tr --ensemble "$T/run280/average.safetensors" > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && grep -q "tokenizer differs" "$T/err.txt"
check $? "--ensemble with another tokenizer: refused, exit 1 ($s): $(head -c 140 "$T/err.txt")"
echo "sun moon" | tr --ensemble "$T/missing.safetensors" > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && grep -q "missing.safetensors" "$T/err.txt"
check $? "--ensemble with a missing file: exit 1 ($s): $(head -c 120 "$T/err.txt")"
set -- ; for i in $(seq 16); do set -- "$@" --ensemble "$M"; done
echo "sun moon" | tr "$@" > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 2 ] && grep -q "at most 16 models: --model and 15 --ensemble, not 16" "$T/err.txt"
check $? "16 --ensemble (17 models): refused, exit 2 ($s): $(head -c 120 "$T/err.txt")"

# ---- target prefixes
head -n 6 "$IN" > "$T/in6.txt"
printf 'sun\n\nrocko moono\nmoono\n\nfireo\n' > "$T/prefix.txt"
for beam in 1 4; do
    tr --beam $beam --prefix "$T/prefix.txt" < "$T/in6.txt" > "$T/prefixed$beam.txt"
    s=$?
    paste -d '\t' "$T/prefix.txt" "$T/prefixed$beam.txt" | awk -F '\t' '$1 != "" && index($2, $1) != 1 { bad++ } END { exit bad > 0 }'
    check $? "--prefix, beam $beam: each output starts with its prefix (exit $s)"
    tr --beam $beam < "$T/in6.txt" > "$T/plain$beam.txt"
    paste -d '\t' "$T/prefix.txt" "$T/prefixed$beam.txt" "$T/plain$beam.txt" | awk -F '\t' '$1 == "" && $2 != $3 { bad++ } END { exit bad > 0 }'
    check $? "--prefix, beam $beam: an empty prefix gives the output of no prefix"
    paste -d '\t' "$T/in6.txt" "$T/prefix.txt" | sed 's/\t/ ||| /' | tr --beam $beam --prefix-inline > "$T/inline$beam.txt"
    cmp -s "$T/inline$beam.txt" "$T/prefixed$beam.txt"; check $? "--prefix-inline, beam $beam: the same as --prefix FILE"
done
# (whole output words as prefixes here: a prefix that ends inside a word, such as 'sun' of
# 'suno', is re-tokenized differently once the word is complete, and --score scores text)
printf 'rocko\n\nrocko moono\nmoono\n\nfireo\n' > "$T/prefix_words.txt"
tr --beam 4 --nbest 2 --prefix "$T/prefix_words.txt" < "$T/in6.txt" > "$T/prefixed_nbest.txt"
pairs "$T/in6.txt" "$T/prefixed_nbest.txt" | tr --score > "$T/prefixed_scored.txt"
field 4 "$T/prefixed_nbest.txt" > "$T/a.txt"; field 2 "$T/prefixed_scored.txt" > "$T/b.txt"
d=$(maxdiff "$T/a.txt" "$T/b.txt")
awk -v d="$d" 'BEGIN { exit !(d <= 1e-4) }'; check $? "--prefix: the prefix's log-probabilities count (n-best logprob == --score, max diff $d)"

# ---- sampling
tr --sampling topk:5 --seed 3 < "$IN" > "$T/s3a.txt"
tr --sampling topk:5 --seed 3 < "$IN" > "$T/s3b.txt"
tr --sampling topk:5 --seed 4 < "$IN" > "$T/s4.txt"
[ "$(wc -l < "$T/s3a.txt")" -eq "$n" ] && cmp -s "$T/s3a.txt" "$T/s3b.txt"; check $? "--sampling topk:5: the same seed samples the same text ($(wc -l < "$T/s3a.txt") lines)"
differ=$(paste -d '\t' "$T/s3a.txt" "$T/s4.txt" | awk -F '\t' '$1 != $2' | wc -l)
[ "$differ" -gt 0 ]; check $? "--sampling topk:5: another seed samples other text ($differ of $n lines differ)"
tr --sampling topp:0.9 --temperature 1.5 --seed 3 < "$IN" > "$T/p3a.txt"; s=$?
tr --sampling topp:0.9 --temperature 1.5 --seed 3 --batch-tokens 7 < "$IN" > "$T/p3b.txt"
[ $s -eq 0 ] && [ "$(wc -l < "$T/p3a.txt")" -eq "$n" ] && cmp -s "$T/p3a.txt" "$T/p3b.txt"
check $? "--sampling topp:0.9: the same seed, other batches: the same text ($(wc -l < "$T/p3a.txt") lines, exit $s)"
tr --sampling topk:1 < "$IN" > "$T/k1.txt"
tr --beam 1 < "$IN" | cmp -s - "$T/k1.txt"; check $? "--sampling topk:1 == greedy (--beam 1)"
tr --sampling topk:1 --beam 1 < "$IN" | cmp -s - "$T/k1.txt"; check $? "--sampling topk:1 --beam 1 (the beam sampling needs, said): accepted, the same text"
# every line its own random numbers: 4,104 copies of one line, lines 1-8 against 2,001-2,008 (the
# first lines of the second chunk of 2,000 read together) and 4,097-4,104 (the version before drew
# the same numbers every 4,096 lines)
yes "sun moon star sea" | head -n 4104 > "$T/copies.txt"
tr --sampling topk:5 --temperature 1.5 < "$T/copies.txt" > "$T/copies_out.txt"
sed -n 1,8p "$T/copies_out.txt" > "$T/a.txt"; sed -n 2001,2008p "$T/copies_out.txt" > "$T/c.txt"
sed -n 4097,4104p "$T/copies_out.txt" > "$T/b.txt"
distinct=$(sort -u "$T/copies_out.txt" | wc -l)
[ "$(wc -l < "$T/copies_out.txt")" -eq 4104 ] && ! cmp -s "$T/a.txt" "$T/b.txt" && ! cmp -s "$T/a.txt" "$T/c.txt"
check $? "--sampling: lines 1-8, 2,001-2,008 and 4,097-4,104 of 4,104 copies of one line draw other samples ($distinct distinct texts)"

# ---- -i / -o, --threads, --quiet, --version, the speed summary
tr < "$IN" > "$T/stdout.txt"
tr -i "$IN" -o "$T/out.txt"; s=$?
[ $s -eq 0 ] && cmp -s "$T/out.txt" "$T/stdout.txt"; check $? "-i FILE -o FILE == stdin/stdout (exit $s)"
tr --input "$IN" --output "$T/out2.txt" --threads 1 && cmp -s "$T/out2.txt" "$T/stdout.txt"
check $? "--input/--output, --threads 1: the same output"
ls "$T" | grep -q '\.tmp\.'; [ $? -ne 0 ]; check $? "-o: no temporary file left"
echo old > "$T/perm.txt"; chmod 640 "$T/perm.txt"; echo old > "$T/target.txt"; ln -s target.txt "$T/link.txt"
tr -i "$IN" -o "$T/perm.txt" && tr -i "$IN" -o "$T/link.txt" && [ "$(stat -c %a "$T/perm.txt")" = 640 ] &&
    [ -L "$T/link.txt" ] && cmp -s "$T/perm.txt" "$T/stdout.txt" && cmp -s "$T/target.txt" "$T/stdout.txt"
check $? "-o over a file keeps its permissions ($(stat -c %a "$T/perm.txt")); -o through a link writes the linked file, the link stays"
# a dangling link: its file is created and the link stays, as '> link' does; a link into a missing
# folder is an error (either link had been replaced by a regular file, exit 0)
ln -s new.txt "$T/dangling.txt"; ln -s "$T/missing/out.txt" "$T/nowhere.txt"
tr -i "$IN" -o "$T/dangling.txt"; s=$?
tr -i "$IN" -o "$T/nowhere.txt" 2> "$T/err.txt"; s1=$?
[ $s -eq 0 ] && [ -L "$T/dangling.txt" ] && cmp -s "$T/new.txt" "$T/stdout.txt" && [ $s1 -eq 1 ] && [ -L "$T/nowhere.txt" ] &&
    grep -q "cannot create $T/missing/out.txt.tmp" "$T/err.txt"
check $? "-o through a dangling link creates its file, the link stays (exit $s); into a missing folder: exit 1 ($s1), $(head -c 100 "$T/err.txt")"
printf 'sun\nsun \377\n' > "$T/bad.txt"
tr -i "$T/bad.txt" -o "$T/never.txt" 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && [ ! -e "$T/never.txt" ] && ! ls "$T" | grep -q '\.tmp\.'
check $? "-o with an input error: exit 1 ($s), no output file and no temporary left"
awk 'BEGIN { for (i = 0; i < 1500; i++) print "sun moon star sky" }' > "$T/many.txt"
(trap '' XFSZ; ulimit -f 8; exec "$B"/translate --model "$M" --quiet --beam 1 -i "$T/many.txt" -o "$T/limited.txt") 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && grep -q "limited.txt: File too large" "$T/err.txt" && [ ! -e "$T/limited.txt" ] && ! ls "$T" | grep -q '\.tmp\.'
check $? "-o past a file-size limit: exit 1 ($s), message naming the file ($(head -c 90 "$T/err.txt")), nothing left"
tr -o /dev/full < "$IN" 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && grep -q "not a regular file" "$T/err.txt"; check $? "-o /dev/full: refused (renaming over a device), exit 1 ($s)"
tr -i "$T/missing.txt" > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && grep -q "cannot open $T/missing.txt" "$T/err.txt"; check $? "-i missing file: clear error, exit 1 ($s)"
"$B"/translate --model "$M" < "$IN" > /dev/null 2> "$T/err.txt"
# (the thread governor's note follows when the machine was busy: toolkit/thread_governor.h)
grep -Eq "^translate: $n sentences, [0-9]+ tokens \(target, with </s>\) in [0-9.]+ s: [0-9.]+ sentences/s, [0-9.]+ tokens/s(; fewer OpenMP threads while the cores were busy: [0-9]+ of [0-9]+ after [0-9]+ of [0-9]+ looks)?$" "$T/err.txt"
check $? "the speed summary on stderr: $(cat "$T/err.txt")"
tr < "$IN" > /dev/null 2> "$T/err.txt"; [ ! -s "$T/err.txt" ]; check $? "--quiet: nothing on stderr"
"$B"/translate --version > "$T/version.txt"; s=$?
[ $s -eq 0 ] && grep -q "^translate .*[0-9]" "$T/version.txt"; check $? "--version: exit 0 ($s), $(cat "$T/version.txt")"

# ---- a UTF-8 byte-order mark at the input's start (a file saved as "UTF-8 with BOM", as Windows
# Notepad saves it) is an encoding signature, dropped: the n-best lines, texts and scores, equal
# the input's without it, from stdin and from -i FILE; a --ref FILE starting with one scores as
# without it. (It had been three byte pieces glued to the first word: other scores.) Only at the
# start: a U+FEFF further on is text, kept (line 2's scores differ).
printf 'sun moon\nstar sky\n' > "$T/plain.txt"
printf '\357\273\277sun moon\nstar sky\n' > "$T/bom.txt"
printf 'sun moon\n\357\273\277sun moon\n' > "$T/bom_line2.txt"
tr --beam 2 --nbest 2 < "$T/plain.txt" > "$T/plain_nbest.txt"
tr --beam 2 --nbest 2 < "$T/bom.txt" > "$T/bom_nbest.txt"
tr --beam 2 --nbest 2 -i "$T/bom.txt" > "$T/bom_nbest_i.txt"
[ -s "$T/plain_nbest.txt" ] && cmp -s "$T/bom_nbest.txt" "$T/plain_nbest.txt" && cmp -s "$T/bom_nbest_i.txt" "$T/plain_nbest.txt"
check $? "a BOM at the input's start dropped: --nbest 2 lines equal the input's without it, stdin and -i ($(head -n 1 "$T/bom_nbest.txt") vs $(head -n 1 "$T/plain_nbest.txt"))"
tr --beam 2 --nbest 2 < "$T/bom_line2.txt" | awk -F ' [|][|][|] ' '$1 == 1' > "$T/line2.txt"
awk -F ' [|][|][|] ' '$1 == 0' "$T/bom_nbest.txt" | sed 's/^0 /1 /' > "$T/line1.txt"
[ -s "$T/line2.txt" ] && ! cmp -s "$T/line2.txt" "$T/line1.txt"
check $? "a U+FEFF at line 2's start is kept (its n-best lines differ from the line without it: $(head -n 1 "$T/line2.txt"))"
printf 'suno moono\nstaro skyo\n' > "$T/ref_plain.txt"
printf '\357\273\277suno moono\nstaro skyo\n' > "$T/ref_bom.txt"
tr --score --ref "$T/ref_plain.txt" < "$T/plain.txt" > "$T/scored_plain.txt"
tr --score --ref "$T/ref_bom.txt" < "$T/plain.txt" > "$T/scored_bom.txt"
[ -s "$T/scored_plain.txt" ] && cmp -s "$T/scored_bom.txt" "$T/scored_plain.txt"
check $? "--score --ref FILE starting with a BOM: the scores as without it ($(head -n 1 "$T/scored_bom.txt") vs $(head -n 1 "$T/scored_plain.txt"))"

# ---- bad values: exit 2 for options, exit 1 for bad input, each with a clear message
refused() {  # refused STATUS PATTERN ARGS... (stdin: $T/stdin.txt)
    want=$1 pat=$2; shift 2
    "$B"/translate --model "$M" "$@" < "$T/stdin.txt" > /dev/null 2> "$T/err.txt"; s=$?
    [ $s -eq "$want" ] && grep -q -- "$pat" "$T/err.txt"
    check $? "translate $*: exit $want ($s), message: $(head -c 110 "$T/err.txt")"
}
echo "sun moon" > "$T/stdin.txt"
refused 2 "--sampling" --sampling topp:0
refused 2 "--sampling" --sampling topp:1.5
refused 2 "--sampling" --sampling topp:0x1p-1
refused 2 "--sampling" --sampling "topp: 0.5"
refused 2 "--sampling" --sampling topk:0
refused 2 "--sampling" --sampling topk:+5
refused 2 "--sampling" --sampling topk:1000001
refused 2 "--sampling" --sampling topk:99999999999999999999
refused 2 "--sampling" --sampling topx:3
# an option's name or --help where a value belongs: a forgotten value ("-o --help" had written
# translations to a file named --help, and "--prefix -h" read a file named -h)
refused 2 "option -o needs a value (FILE), got the option --help" -o --help
refused 2 "option --prefix needs a value (FILE), got the option -h" --prefix -h
[ ! -e ./--help ] && [ ! -e "$T/--help" ]; check $? "translate -o --help wrote no file named --help"
refused 2 "--temperature" --sampling topk:5 --temperature 0
refused 2 "--temperature" --sampling topk:5 --temperature -1
# --temperature and --seed only shape sampling: without --sampling they had been ignored silently
# (the beam search ran), while a --serve request with them and no "sampling" is refused
refused 2 "--temperature applies to sampling: add --sampling" --temperature 0.5
refused 2 "--seed applies to sampling: add --sampling" --seed 7
refused 2 "--seed applies to sampling" --beam 1 --seed=7
refused 2 "needs --beam 1" --sampling topk:5 --beam 4
refused 2 "--nbest must be 1" --sampling topk:5 --nbest 2
refused 2 "--score-tokens needs --score" --score-tokens
refused 2 "add --score" --ref "$T/ref4.txt"
refused 2 "exclude each other" --prefix "$T/prefix.txt" --prefix-inline
refused 2 "do not apply" --score --sampling topk:3
refused 2 "do not apply" --score --prefix "$T/prefix.txt"   # (let through, its lines would be scored as targets)
refused 2 "do not apply" --score --prefix-inline
refused 2 "--precision int8 runs on the CPU" --device cuda --precision int8   # at parse time, GPU or not
refused 2 "not with --score" --score --alignment
refused 2 "not with --score" --score --attention "$T/score-pictures"
# --serve with each option of stdin mode, alone: refused before a model is loaded or a port taken
# (timeout: a flip that let one through would serve until killed)
for opts in "--score" "--prefix $T/prefix.txt" "--prefix-inline" "--sampling topk:3" "-i $T/stdin.txt" \
            "-o $T/serve-out.txt" "--attention $T/serve-pictures" "--alignment"; do
    timeout 30 "$B"/translate --model "$M" --serve 0 $opts < /dev/null > /dev/null 2> "$T/err.txt"; s=$?
    [ $s -eq 2 ] && grep -q "are options of stdin mode" "$T/err.txt"
    check $? "translate --serve 0 $opts: exit 2 ($s), message: $(head -c 110 "$T/err.txt")"
done
refused 2 "it does not search: --beam, --nbest" --score --nbest 3 --beam 4
refused 2 "it does not search" --score --beam 1
# the search's length limit does not limit a scored target (it had been accepted and ignored)
refused 2 "it does not search: --beam, --nbest, --max-len-a and --max-len-b do not apply" --score --max-len-b 3
refused 2 "it does not search" --score --max-len-a=0.5
refused 1 "line 1: expected 'SOURCE ||| TARGET', found no '|||'" --score
printf 'sun ||| soon ||| x\n' > "$T/stdin.txt"
refused 1 "line 1: expected 'SOURCE ||| TARGET', found more than one '|||'" --score
printf 'sun ||| soon\nmoon\n' > "$T/stdin.txt"
refused 1 "line 2: expected 'SOURCE ||| PREFIX', found no '|||'" --prefix-inline
printf 'sun\nmoon\nstar\n' > "$T/stdin.txt"
printf 'suno\nmoono\n' > "$T/two.txt"
refused 1 "two.txt has only 2 lines" --score --ref "$T/two.txt"
printf 'sun\n' > "$T/stdin.txt"
refused 1 "two.txt has 2 lines, the input 1" --score --ref "$T/two.txt"
refused 1 "two.txt has 2 lines, the input 1" --prefix "$T/two.txt"
refused 1 "cannot read" --score --ref "$T/missing.txt"
# "-" (stdin) for --ref or --prefix when stdin is the input too: refused at once (it had read all
# of stdin as targets, then said "- has 1 lines, the input 0"); with -i FILE it reads stdin
refused 2 "--prefix - reads stdin, which holds the input lines: give those with -i FILE" --prefix -
refused 2 "--ref - reads stdin" --score --ref - -i -
printf 'luno\n' | tr --prefix - -i "$T/stdin.txt" > "$T/prefixed_stdin.txt"; s=$?
[ $s -eq 0 ] && grep -q '^luno' "$T/prefixed_stdin.txt"; check $? "--prefix - -i FILE: the prefixes from stdin (exit $s): $(cat "$T/prefixed_stdin.txt")"

# Interactive use: a line's translation comes out while stdin stays open, before the next line is
# written (./translate must not wait for input that is not there, nor hold a line back).
# live.txt exists before the reader starts: the background shell opens the FIFO (blocking until
# fd 3 opens it for writing) before it would create its output file, so wc could find none.
mkfifo "$T/live.fifo"
: > "$T/live.txt"
tr > "$T/live.txt" 2>&1 < "$T/live.fifo" &
live=$!
exec 3> "$T/live.fifo"
printf 'the cat\n' >&3
n=0
while [ "$(wc -l < "$T/live.txt")" -lt 1 ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
first=$(wc -l < "$T/live.txt")
printf 'a dog\n' >&3
exec 3>&-
wait $live; s=$?
[ "$first" -eq 1 ] && [ $s -eq 0 ] && [ "$(wc -l < "$T/live.txt")" -eq 2 ]
check $? "interactive: line 1 translated while stdin stays open ($first line(s) after $n tenths of a second), then line 2 (exit $s, $(wc -l < "$T/live.txt") lines)"

check_summary translate_options
