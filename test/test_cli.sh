#!/bin/sh
# test/test_cli.sh — the programs end to end, as a user runs them: ./train on a small
# synthetic corpus, then ./translate (order, empty lines, n-best, bad input, bad model files),
# ./average and ./bleu. Run from the repository root after `make`; the optional argument is
# the folder holding the programs (default: the repository root). Ends with
# "cli: N passed, M failed"; exits non-zero on failure.
set -u
B=${1:-.}
. test/check.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT


toy_corpus "$T/corpus"

"$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data "$T/corpus" --out "$T/run" \
    --max-steps 40 --max-tokens 400 --save-every-steps 10 --warmup 20 --log-every 1000s > "$T/train.log" 2>&1
status=$?
check $status "./train runs, averages and evaluates (exit $status)"
grep -q "BLEU = " "$T/train.log"; check $? "./train prints BLEU"
grep -q "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" "$T/train.log"; check $? "./train prints the BLEU signature"
[ -f "$T/run/average.safetensors" ] && [ -f "$T/run/log.csv" ]; check $? "average.safetensors and log.csv written"
n=$(ls "$T/run"/ckpt-*.safetensors | wc -l); [ "$n" -eq 4 ]; check $? "checkpoints every 10 steps, 4 kept ($n)"

M="$T/run/average.safetensors"
printf 'sun moon\n\nstar sky sea\nrock\n' > "$T/in.txt"
"$B"/translate --model "$M" < "$T/in.txt" > "$T/out.txt" 2> "$T/err.txt"
check $? "./translate exits 0"
cp "$T/out.txt" "$T/out4.txt"
[ "$(wc -l < "$T/out.txt")" -eq 4 ]; check $? "one output line per input line (4)"
[ -z "$(sed -n 2p "$T/out.txt")" ]; check $? "an empty line gives an empty line"
# spaces and tabs at a line's ends are dropped, as training drops them: a line of them is an empty line
printf '  sun moon\t\n \t \nstar sky sea \nrock\n' | "$B"/translate --model "$M" > "$T/blank.txt" 2> /dev/null
s=$?; [ $s -eq 0 ] && cmp -s "$T/blank.txt" "$T/out.txt"
check $? "spaces and tabs around lines, and a line of only them: the same 4 output lines (exit $s)"
# carriage returns at either end too (training drops " \t\r"; a leading \r had been encoded as a
# byte): the same source scores the same
printf 'sun moon ||| sol luna\n\r sun moon \r ||| sol luna\n' | "$B"/translate --model "$M" --score > "$T/cr.txt" 2> /dev/null
s=$?; [ $s -eq 0 ] && [ "$(wc -l < "$T/cr.txt")" -eq 2 ] && [ -n "$(sed -n 1p "$T/cr.txt")" ] && [ "$(sed -n 1p "$T/cr.txt")" = "$(sed -n 2p "$T/cr.txt")" ]
check $? "CR sun moon CR scores as sun moon (exit $s): $(tr '\n' ' ' < "$T/cr.txt")"
"$B"/translate --model "$M" --beam 1 < "$T/in.txt" > "$T/greedy.txt"
s=$?; [ $s -eq 0 ] && [ "$(wc -l < "$T/greedy.txt")" -eq 4 ] && [ -z "$(sed -n 2p "$T/greedy.txt")" ] && [ -n "$(sed -n 1p "$T/greedy.txt")" ]
check $? "greedy (--beam 1): exit 0 ($s), 4 lines, only the empty one empty"
"$B"/translate --model "$M" --precision int8 < "$T/in.txt" > "$T/int8.txt"
s=$?; [ $s -eq 0 ] && [ "$(wc -l < "$T/int8.txt")" -eq 4 ] && [ -z "$(sed -n 2p "$T/int8.txt")" ]
check $? "--precision int8: exit 0 ($s), 4 lines, the empty one empty"
# int8 is quantized, fp32 is not: their log-probabilities of the same pairs differ (at 6 decimals),
# by little (a flip quantized fp32 and left int8 unquantized; --precision int8 had no test of
# being int8 at all)
printf 'sun moon ||| suno moono\nstar sky sea ||| staro skyo seao\n' > "$T/pairs.txt"
"$B"/translate --model "$M" --score < "$T/pairs.txt" > "$T/s_fp32.txt" 2> /dev/null
"$B"/translate --model "$M" --precision int8 --score < "$T/pairs.txt" > "$T/s_int8.txt" 2> /dev/null
paste -d' ' "$T/s_fp32.txt" "$T/s_int8.txt" | awk '{ d = $3 - $6; if (d < 0) d = -d; if (d == 0 || d > 0.5) bad = 1 } END { exit bad || NR != 2 }'
check $? "--precision int8 --score: log-probabilities near fp32's, not equal: fp32 $(cut -d' ' -f3 "$T/s_fp32.txt" | paste -sd' '), int8 $(cut -d' ' -f3 "$T/s_int8.txt" | paste -sd' ')"
# TRANSFORMER_AMX=0: the int8 products without Intel AMX (the VNNI kernel): the same lines.
TRANSFORMER_AMX=0 "$B"/translate --model "$M" --precision int8 < "$T/in.txt" > "$T/int8_noamx.txt"
s=$?; [ $s -eq 0 ] && cmp -s "$T/int8.txt" "$T/int8_noamx.txt"
check $? "TRANSFORMER_AMX=0: exit 0 ($s), the same int8 translations"
# --precision bf16 on the CPU: the linear layers' products on bf16 operands (AMX where the CPU has it)
"$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data "$T/corpus" --out "$T/bf16" \
    --device cpu --precision bf16 --max-steps 10 --max-tokens 400 --warmup 20 --log-every 1000s --no-eval > "$T/bf16.log" 2>&1
s=$?; [ $s -eq 0 ] && grep -q "^device: CPU, .*bf16" "$T/bf16.log" && [ -f "$T/bf16/average.safetensors" ]
check $? "./train --device cpu --precision bf16: exit $s, $(grep '^device:' "$T/bf16.log")"
TRANSFORMER_AMX=0 "$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data "$T/corpus" --out "$T/bf16-noamx" \
    --device cpu --precision bf16 --max-steps 2 --max-tokens 400 --log-every 1000s --no-eval > "$T/bf16-noamx.log" 2>&1
s=$?; [ $s -eq 0 ] && grep -q "^device: CPU, .*bf16 (\(avx512bf16 products\|products: sgemm on bf16-rounded operands\))" "$T/bf16-noamx.log"
check $? "TRANSFORMER_AMX=0 ./train --precision bf16: exit $s, off AMX: $(grep '^device:' "$T/bf16-noamx.log")"
# TRANSFORMER_BF16_KERNEL=sgemm: the products through sgemm on rounded operands, and ./train says
# that this runs at fp32 speed; a path that is not one is refused at start
TRANSFORMER_BF16_KERNEL=sgemm "$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data "$T/corpus" --out "$T/bf16-sgemm" \
    --device cpu --precision bf16 --max-steps 2 --max-tokens 400 --log-every 1000s --no-eval > "$T/bf16-sgemm.log" 2>&1
s=$?; [ $s -eq 0 ] && grep -q "TRANSFORMER_BF16_KERNEL=sgemm: --precision bf16 rounds the products' operands but runs them at fp32 speed" "$T/bf16-sgemm.log" &&
    grep -q "^device: CPU, .*bf16 (products: sgemm on bf16-rounded operands)" "$T/bf16-sgemm.log"
check $? "TRANSFORMER_BF16_KERNEL=sgemm ./train --precision bf16: exit $s, says bf16 runs at fp32 speed: $(grep '^device:' "$T/bf16-sgemm.log")"
echo sun | TRANSFORMER_BF16_KERNEL=fast "$B"/translate --model "$M" > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && grep -q "^translate: error: TRANSFORMER_BF16_KERNEL=fast: amx, avx512bf16 or sgemm" "$T/err.txt"
check $? "TRANSFORMER_BF16_KERNEL=fast is refused (exit $s): $(head -n 1 "$T/err.txt")"
"$B"/translate --model "$M" --device cpu --precision bf16 < "$T/in.txt" > "$T/bf16.txt"
s=$?; [ $s -eq 0 ] && [ "$(wc -l < "$T/bf16.txt")" -eq 4 ] && [ -z "$(sed -n 2p "$T/bf16.txt")" ]
check $? "./translate --device cpu --precision bf16: exit 0 ($s), 4 lines, the empty one empty"
echo sun | TRANSFORMER_AMX=2 "$B"/translate --model "$M" --precision int8 > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && grep -q "^translate: error: TRANSFORMER_AMX=2: 0 (no AMX) or 1" "$T/err.txt"
check $? "TRANSFORMER_AMX=2 is refused (exit $s): $(head -n 1 "$T/err.txt")"
# OMP_NUM_THREADS past 4096 (any level) is refused before libgomp starts threads (it crashed at 65534).
for v in 70000 2,70000; do
    echo sun | OMP_NUM_THREADS=$v "$B"/translate --model "$M" > /dev/null 2> "$T/err.txt"; s=$?
    echo sun | OMP_NUM_THREADS=$v "$B"/bpe encode --vocab "$T/run/vocab.bpe" > /dev/null 2> "$T/err2.txt"; s2=$?
    [ $s -eq 2 ] && [ $s2 -eq 2 ] && grep -q "OMP_NUM_THREADS=$v: at most 4096 threads" "$T/err.txt" &&
        grep -q "OMP_NUM_THREADS=$v: at most 4096 threads" "$T/err2.txt"
    check $? "OMP_NUM_THREADS=$v is refused by ./translate and ./bpe (exit $s, $s2): $(head -n 1 "$T/err.txt")"
done
echo sun | "$B"/translate --model "$M" --precision fp16 > /dev/null 2> "$T/err.txt"; [ $? -eq 2 ] && grep -q precision "$T/err.txt"
check $? "--precision fp16 is refused (exit 2, message names --precision)"
"$B"/translate --model "$M" --nbest 3 < "$T/in.txt" > "$T/nbest.txt"
s=$?; [ $s -eq 0 ] && [ "$(grep -c '|||' "$T/nbest.txt")" -eq 10 ]; check $? "--nbest 3: 3 scored hypotheses per non-empty line, 1 empty entry for the empty line"

printf 'sun \377 moon\n' | "$B"/translate --model "$M" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "line 1: invalid UTF-8" "$T/err.txt"; check $? "invalid UTF-8: error naming the line, exit 1 ($s)"
printf 'sun \377 moon\n' > "$T/invalid.txt"
"$B"/translate --model "$M" --replace-invalid < "$T/invalid.txt" > "$T/out.txt"
s=$?; [ $s -eq 0 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ]; check $? "--replace-invalid translates it: exit 0 ($s), 1 line"
awk 'BEGIN { for (i = 0; i < 3000; i++) printf "sun "; print "" }' > "$T/long.txt"
"$B"/translate --model "$M" < "$T/long.txt" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "more than --max-input-tokens" "$T/err.txt"; check $? "over-long line: clear error, exit 1 ($s)"
"$B"/translate --model "$M" --split-long --max-len-b 5 < "$T/long.txt" > "$T/out.txt"
s=$?; [ $s -eq 0 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ] && [ -n "$(cat "$T/out.txt")" ]
check $? "--split-long translates it as one non-empty line (exit $s)"
# A line longer than several reads of stdin (64 KiB each), then short lines: each line found once.
awk 'BEGIN { for (i = 0; i < 40000; i++) printf "sun "; print ""; print "moon"; print "star" }' > "$T/longer.txt"
"$B"/translate --model "$M" --split-long --beam 1 --max-len-a 0 --max-len-b 3 < "$T/longer.txt" > "$T/longer.out"
s=$?; [ $s -eq 0 ] && [ "$(wc -l < "$T/longer.out")" -eq 3 ]
check $? "--split-long on a 160 KB line followed by 2 lines: 3 output lines (exit $s, $(wc -l < "$T/longer.out") lines)"
"$B"/translate --model "$M" < / > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "cannot read stdin" "$T/err.txt"; check $? "stdin unreadable (a directory): error, exit 1 ($s)"

echo sun | "$B"/translate --model "$T/missing.safetensors" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "cannot open" "$T/err.txt" && ! grep -q "train a model first" "$T/err.txt"
check $? "missing model: clear error, exit 1 ($s), no advice to train (a --model was given)"
# without --model, where runs/default/average.safetensors is missing: the advice to train first
mkdir -p "$T/nowhere"; BA=$(cd "$B" && pwd); (cd "$T/nowhere" && echo sun | "$BA"/translate > /dev/null 2> "$T/err.txt"); s=$?
[ $s -eq 1 ] && grep -q "runs/default/average.safetensors: cannot open" "$T/err.txt" &&
    grep -q "^translate: (train a model first: make && ./train; or pass --model FILE)" "$T/err.txt"
check $? "no --model and no runs/default/average.safetensors: exit 1 ($s), says to train first: $(tail -n 1 "$T/err.txt")"
head -c 5000 "$M" > "$T/trunc.safetensors"
echo sun | "$B"/translate --model "$T/trunc.safetensors" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "truncated" "$T/err.txt"; check $? "truncated model: clear error, exit 1 ($s)"
echo sun | "$B"/translate --model "$T" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "is a folder, not a checkpoint file" "$T/err.txt"; check $? "a folder as the model: clear error, exit 1 ($s)"
"$B"/average --out "$T/avg_dir.safetensors" "$M" "$T/run" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 2 ] && grep -q "is a folder (--last N" "$T/err.txt"; check $? "./average of a folder without --last: exit 2 ($s), $(head -c 100 "$T/err.txt")"
echo sun | "$B"/translate --model "$M" --max-input-tokens 5000 > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 0 ] && grep -q "max-input-tokens 5000 is more than the model takes: 1024" "$T/err.txt"
check $? "--max-input-tokens past the model's limit: said ($(head -c 100 "$T/err.txt")), exit 0 ($s)"
echo sun | "$B"/translate --model "$M" --max-input-tokens 1024 --quiet > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 0 ] && [ ! -s "$T/err.txt" ]
check $? "--max-input-tokens 1024, the model's limit itself: nothing said, exit 0 ($s) $(head -c 100 "$T/err.txt")"
echo "not a model" > "$T/text.safetensors"
echo sun | "$B"/translate --model "$T/text.safetensors" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "not a safetensors file" "$T/err.txt"; check $? "foreign file: clear error, exit 1 ($s)"
"$B"/translate --bogus > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 2 ] && grep -q -- "--bogus" "$T/err.txt"; check $? "unknown option: exit 2 ($s), message names it"
"$B"/translate --help > "$T/help.txt"; s=$?; [ $s -eq 0 ] && grep -q -- "--beam" "$T/help.txt"
check $? "--help lists the options (exit $s)"

"$B"/average --out "$T/avg2.safetensors" "$T/run"/ckpt-*.safetensors > /dev/null
s=$?; [ $s -eq 0 ] && cmp -s "$T/avg2.safetensors" "$M"
check $? "./average of the kept checkpoints (exit $s) is byte-identical to ./train's average.safetensors"
kept=$(ls "$T/run"/ckpt-*.safetensors | wc -l)
"$B"/average --last "$kept" --out "$T/avg-last.safetensors" "$T/run" > /dev/null; s=$?
[ $s -eq 0 ] && cmp -s "$T/avg-last.safetensors" "$M"
check $? "./average --last $kept of a folder holding exactly $kept checkpoints: all of them, ./train's average (exit $s)"
"$B"/average "$M" > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 2 ] && grep -q "need --out FILE and at least one checkpoint" "$T/err.txt"
check $? "./average without --out: exit 2 ($s), says what it needs"
"$B"/translate --model "$T/avg2.safetensors" < "$T/in.txt" > "$T/avg2.txt"
s=$?; [ $s -eq 0 ] && cmp -s "$T/avg2.txt" "$T/out4.txt"; check $? "the averaged model translates as ./train's average (exit $s)"
"$B"/bleu "$T/corpus/test.es" < "$T/corpus/test.es" > "$T/bleu.txt"; s=$?
[ $s -eq 0 ] && grep -q "BLEU = 100.00" "$T/bleu.txt"; check $? "./bleu: a reference scored against itself is 100 (exit $s)"
head -n 3 "$T/corpus/test.es" > "$T/three.txt"
"$B"/bleu "$T/corpus/test.es" < "$T/three.txt" > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && [ -s "$T/err.txt" ]; check $? "./bleu: mismatched line counts exit 1 ($s): $(head -c 100 "$T/err.txt")"
"$B"/bleu - < "$T/corpus/test.es" > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 2 ] && grep -q "stdin (-) is read once" "$T/err.txt"
check $? "./bleu - (the reference on stdin, the hypotheses too): refused, exit 2 ($s), not read twice: $(head -c 100 "$T/err.txt")"
"$B"/bleu - --hyp "$T/corpus/test.es" < "$T/corpus/test.es" > "$T/bleu-stdin-ref.txt"; s=$?
[ $s -eq 0 ] && grep -q "BLEU = 100.00" "$T/bleu-stdin-ref.txt"; check $? "./bleu - --hyp FILE: the reference from stdin (exit $s)"
"$B"/bleu "$T" < "$T/corpus/test.es" > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && grep -q "Is a directory" "$T/err.txt"; check $? "./bleu FOLDER: exit 1 ($s), the reason: $(head -c 100 "$T/err.txt")"
"$B"/bleu "$T/no-such-ref.txt" < "$T/corpus/test.es" > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && grep -q "cannot read .*no-such-ref.txt: No such file" "$T/err.txt"
check $? "./bleu MISSING: exit 1 ($s), the reason: $(head -c 100 "$T/err.txt")"
# text that is not UTF-8 is refused, as sacreBLEU refuses it (its bytes had been scored as characters)
printf 'un caf\351 noir\n' > "$T/latin1.txt"
"$B"/bleu "$T/latin1.txt" < "$T/latin1.txt" > "$T/bleu-bad.txt" 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && [ ! -s "$T/bleu-bad.txt" ] && grep -q "latin1.txt:1: invalid UTF-8 (byte 0xE9 at byte 7)" "$T/err.txt"
check $? "./bleu on Latin-1 text: exit 1 ($s), no score ($(head -c 40 "$T/bleu-bad.txt")), the reason: $(head -c 100 "$T/err.txt")"
# the first byte (a position of 0, which a flip of `bad < 0` had let through as valid)
printf '\351t\351 chaud\n' > "$T/latin1-first.txt"
"$B"/bleu "$T/corpus/test.es" --hyp "$T/latin1-first.txt" > "$T/bleu-bad.txt" 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && [ ! -s "$T/bleu-bad.txt" ] && grep -q "latin1-first.txt:1: invalid UTF-8 (byte 0xE9 at byte 1)" "$T/err.txt"
check $? "./bleu on Latin-1 text from its first byte: exit 1 ($s), no score ($(head -c 40 "$T/bleu-bad.txt")), the reason: $(head -c 100 "$T/err.txt")"
gzip -c "$T/corpus/test.es" > "$T/test.es.gz"
"$B"/bleu "$T/test.es.gz" --hyp "$T/test.es.gz" > "$T/bleu-bad.txt" 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && [ ! -s "$T/bleu-bad.txt" ] && grep -q "test.es.gz is gzip-compressed" "$T/err.txt"
check $? "./bleu FILE.gz (sacreBLEU decompresses it): exit 1 ($s), no score ($(head -c 40 "$T/bleu-bad.txt")), the reason: $(head -c 100 "$T/err.txt")"
: > "$T/empty.txt"   # no lines: no score, as sacreBLEU ("contains no sentence"); an empty line is scored
"$B"/bleu "$T/empty.txt" < "$T/empty.txt" > "$T/bleu-bad.txt" 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && [ ! -s "$T/bleu-bad.txt" ] && grep -q "no lines to score" "$T/err.txt"
check $? "./bleu EMPTY < EMPTY: exit 1 ($s), no score ($(head -c 40 "$T/bleu-bad.txt")), the reason: $(head -c 100 "$T/err.txt")"
echo > "$T/empty-line.txt"
"$B"/bleu "$T/empty-line.txt" < "$T/empty-line.txt" > "$T/bleu.txt"; s=$?
[ $s -eq 0 ] && grep -q "BLEU = 0.00 .*hyp_len = 0 ref_len = 0" "$T/bleu.txt"; check $? "./bleu on one empty line: BLEU 0, as sacreBLEU (exit $s)"

# Every program's --help (and each ./bpe command's) exits 0, lists its options and shows each
# default (an unset choice said "[]").
for cmd in "train:--max-tokens" "translate:--beam" "average:--out" "bleu:--score-only" "bpe learn:--vocab-size" \
           "bpe encode:--pieces" "bpe decode:--vocab"; do
    prog=${cmd%%:*}; opt=${cmd#*:}
    "$B"/$prog --help > "$T/help.txt" 2>&1; s=$?
    [ $s -eq 0 ] && grep -q -- "$opt" "$T/help.txt" && ! grep -q -- "--.* \[\]$" "$T/help.txt"
    check $? "./$prog --help: exit 0 ($s), lists $opt, no empty default: $(grep -- "--.* \[\]$" "$T/help.txt" | head -c 80)"
done
# A default that depends on others is said in words: --batch-tokens' (it had shown "[0]", the
# unset value, under a flip)
"$B"/translate --help > "$T/help.txt" 2>&1
grep -q -- "--batch-tokens INT .*\[4000 on the CPU (2000 in int8 with a beam), 16000 on the GPU\]$" "$T/help.txt"
check $? "./translate --help: --batch-tokens' default in words: $(grep -- "--batch-tokens" "$T/help.txt" | head -c 160)"
for cmd in "learn:INPUT...:Learns a joint BPE" "encode:< text > ids:Encodes text lines" "decode:< ids > text:Decodes lines"; do
    c=${cmd%%:*}; rest=${cmd#*:}; usage=${rest%%:*}; what=${rest#*:}
    "$B"/bpe $c --help > "$T/help.txt" 2>&1
    grep -qxF "usage: bpe $c [options] $usage" "$T/help.txt" && grep -q "^$what" "$T/help.txt"
    check $? "./bpe $c --help: usage: bpe $c [options] $usage; says what it does: $what ..."
done

# Option values: finite numbers, sizes >= 1, beam and n-best within their bounds; a bad value
# is refused before any work, exit 2, with a message naming the option. ./train gets a tiny
# run's options first, so that a value wrongly accepted costs seconds, not a default run.
TA="--config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data $T/corpus --max-steps 3 --max-tokens 400 --no-eval"
refused() {  # refused OPTION PROGRAM ARGS...: exit 2 and a message naming OPTION
    opt=$1; shift
    echo sun | "$B"/"$@" > "$T/out.txt" 2> "$T/err.txt"; s=$?
    [ $s -eq 2 ] && grep -q -- "$opt" "$T/err.txt" && [ ! -s "$T/out.txt" ]
    check $? "./$1 $opt: bad value refused, exit 2 ($s), message: $(head -c 100 "$T/err.txt")"
}
refused --alpha translate --model "$M" --alpha nan
refused --alpha translate --model "$M" --alpha inf
refused "--alpha must be a finite number, not 'NaN'" translate --model "$M" --alpha NaN
refused --beam translate --model "$M" --beam 0
refused --beam translate --model "$M" --beam 2000
refused --beam translate --model "$M" --beam 99999999999999999999
refused --nbest translate --model "$M" --nbest 0
refused --nbest translate --model "$M" --beam 2 --nbest 3
refused --batch-tokens translate --model "$M" --batch-tokens 0
refused --max-len-a translate --model "$M" --max-len-a 1e999
refused --max-len-b translate --model "$M" --max-len-b -1
refused --max-input-tokens translate --model "$M" --max-input-tokens -5
refused --split-long translate --model "$M" --split-long=no
refused --max-tokens train $TA --max-tokens 0 --out "$T/never"
refused --lr-scale train $TA --lr-scale nan --out "$T/never"
refused --dropout train $TA --dropout 1 --out "$T/never"
refused --warmup train $TA --warmup 0 --out "$T/never"
refused --vocab-size train $TA --vocab-size 100 --out "$T/never"
refused --time train $TA --time inf --out "$T/never"
refused --beam train $TA --beam 0 --out "$T/never"
refused --seed train $TA --seed -1 --out "$T/never"
refused --vocab-size bpe learn --vocab-size 12 --out "$T/never.bpe" "$T/corpus/train.en"
# ./bpe encode and decode without --vocab or with a stray argument: usage errors, exit 2 as learn's
# (they had exited 1, the status of a failure while working)
refused "unexpected argument 'extra'" bpe encode --vocab "$T/never.bpe" extra
refused "unexpected argument 'extra'" bpe decode --vocab "$T/never.bpe" extra
refused "--vocab FILE is required" bpe encode
[ ! -e "$T/never" ]; check $? "refused ./train runs created nothing"

# Write errors: output to a full disk (/dev/full) or a closed stdout is an error naming what
# failed, exit status 1, never exit 0 with the output lost. Files written by rename
# (checkpoints) are tested with a size limit (ulimit -f) instead of /dev/full.
write_fails() {  # write_fails WHAT PATTERN STATUS: STATUS is 1 and stderr ($T/err.txt) matches PATTERN
    grep -q -- "$2" "$T/err.txt" && [ "$3" = 1 ]
    check $? "$1: exit 1 ($3), message: $(tail -n 1 "$T/err.txt" | head -c 150)"
}
"$B"/translate --model "$M" < "$T/in.txt" > /dev/full 2> "$T/err.txt"
write_fails "./translate > /dev/full" "standard output: No space left" $?
"$B"/translate --model "$M" < "$T/in.txt" >&- 2> "$T/err.txt"
write_fails "./translate with stdout closed" "standard output is closed" $?
# -o FILE writes nothing to stdout: a closed one is no reason to refuse (it had been refused)
"$B"/translate --model "$M" < "$T/in.txt" -o "$T/closed_out.txt" >&- 2> "$T/err.txt"
s=$?
"$B"/translate --model "$M" < "$T/in.txt" > "$T/open_out.txt" 2> /dev/null
cmp -s "$T/closed_out.txt" "$T/open_out.txt" && [ $s = 0 ] && [ -s "$T/closed_out.txt" ]
check $? "./translate -o FILE with stdout closed: exit $s, FILE holds stdout's translation ($(head -c 100 "$T/err.txt"))"
"$B"/translate --help >&- 2> "$T/err.txt"
write_fails "./translate --help with stdout closed" "standard output is closed" $?
# A closed stderr is given /dev/null first thing, so that no file the program opens takes
# descriptor 2 and receives its messages: a ./translate waiting on a FIFO after its first line
mkfifo "$T/wait.fifo"
: > "$T/wait_out.txt"
"$B"/translate --model "$M" < "$T/wait.fifo" > "$T/wait_out.txt" 2>&- &
waiting=$!
exec 7> "$T/wait.fifo"
echo sun >&7
n=0
while [ "$(wc -l < "$T/wait_out.txt")" -lt 1 ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
fd2=$(readlink "/proc/$waiting/fd/2" 2> /dev/null || echo none)
exec 7>&-
wait $waiting; s=$?
[ "$fd2" = /dev/null ] && [ $s -eq 0 ]
check $? "./translate with stderr closed: descriptor 2 is $fd2 (want /dev/null) after line 1 ($n tenths of a second), exit $s"
"$B"/bleu "$T/corpus/test.es" < "$T/corpus/test.es" > /dev/full 2> "$T/err.txt"
write_fails "./bleu > /dev/full" "standard output: No space left" $?
"$B"/bleu "$T/corpus/test.es" < "$T/corpus/test.es" >&- 2> "$T/err.txt"
write_fails "./bleu with stdout closed" "standard output is closed" $?
"$B"/bpe encode --vocab "$T/run/vocab.bpe" < "$T/corpus/test.en" > /dev/full 2> "$T/err.txt"
write_fails "./bpe encode > /dev/full" "standard output: No space left" $?
"$B"/bpe encode --vocab "$T/run/vocab.bpe" < "$T/corpus/test.en" > "$T/ids.txt"
"$B"/bpe decode --vocab "$T/run/vocab.bpe" < "$T/ids.txt" >&- 2> "$T/err.txt"
write_fails "./bpe decode with stdout closed" "standard output is closed" $?
"$B"/bpe learn --vocab-size 280 --out /dev/full "$T/corpus/train.en" 2> "$T/err.txt"
write_fails "./bpe learn --out /dev/full" "/dev/full.*No space left" $?
"$B"/bpe --help > /dev/full 2> "$T/err.txt"
write_fails "./bpe --help > /dev/full" "standard output: No space left" $?
"$B"/average --out "$T/avg3.safetensors" "$T/run"/ckpt-*.safetensors > /dev/full 2> "$T/err.txt"
write_fails "./average > /dev/full" "standard output: No space left" $?
"$B"/average --out "$T/avg3.safetensors" "$T/run"/ckpt-*.safetensors >&- 2> "$T/err.txt"
write_fails "./average with stdout closed" "standard output is closed" $?
(trap '' XFSZ; ulimit -f 8; exec "$B"/average --out "$T/big.safetensors" "$T/run"/ckpt-*.safetensors) \
    > /dev/null 2> "$T/err.txt"
write_fails "./average --out past a file-size limit (ulimit -f)" "big.safetensors.*File too large" $?
mkfifo "$T/fifo"
"$B"/average --out "$T/fifo" "$T/run"/ckpt-00000040.safetensors > /dev/null 2> "$T/err.txt"
s=$?; [ -p "$T/fifo" ] || s="$s, the FIFO replaced"
write_fails "./average --out FIFO: refused, the FIFO left alone" "not a regular file" "$s"

# An output that is one of the run's inputs is refused, exit 2, the input untouched (each had been
# replaced: a checkpoint by translations, a checkpoint by an average, a corpus by a vocabulary);
# -o = -i stays allowed (the input is read first).
cp "$T/run/ckpt-00000040.safetensors" "$T/in.safetensors"; cp "$T/corpus/train.en" "$T/in.en"
ln -sf "$T/in.safetensors" "$T/in-link.safetensors"
same_input_refused() {  # same_input_refused WHAT FILE PATTERN COMMAND...: exit 2, FILE unchanged
    what=$1 file=$2 pattern=$3; shift 3
    cp "$file" "$T/before"
    "$@" < "$T/in.txt" > /dev/null 2> "$T/err.txt"; s=$?
    [ $s -eq 2 ] && grep -q -- "$pattern" "$T/err.txt" && cmp -s "$file" "$T/before"
    check $? "$what: refused, exit 2 ($s), the input unchanged: $(head -c 150 "$T/err.txt")"
}
same_input_refused "./translate -o the --model" "$T/in.safetensors" "is --model" "$B"/translate --model "$T/in.safetensors" -o "$T/in.safetensors"
same_input_refused "./translate -o a link to the --model" "$T/in.safetensors" "is --model" "$B"/translate --model "$T/in.safetensors" -o "$T/in-link.safetensors"
same_input_refused "./translate -o the --ensemble" "$T/in.safetensors" "is --ensemble" "$B"/translate --model "$M" --ensemble "$T/in.safetensors" -o "$T/in.safetensors"
same_input_refused "./translate -o the --ref (--score)" "$T/in.en" "is --ref" "$B"/translate --model "$M" --score --ref "$T/in.en" -o "$T/in.en"
same_input_refused "./average --out one of its inputs" "$T/in.safetensors" "is the input" "$B"/average --out "$T/in.safetensors" "$M" "$T/in.safetensors"
same_input_refused "./bpe learn --out one of its inputs" "$T/in.en" "is the input" "$B"/bpe learn --vocab-size 280 --out "$T/in.en" "$T/in.en"
# One checkpoint given twice (by its name, or by a link) would weigh double in the average.
for twice in "$T/in.safetensors" "$T/in-link.safetensors"; do
    "$B"/average --out "$T/twice.safetensors" "$T/in.safetensors" "$M" "$twice" > /dev/null 2> "$T/err.txt"; s=$?
    [ $s -eq 2 ] && grep -q "are the same checkpoint: it would count twice" "$T/err.txt" && [ ! -e "$T/twice.safetensors" ]
    check $? "./average A M $(basename "$twice"): refused, exit 2 ($s), nothing written: $(head -c 150 "$T/err.txt")"
done
cp "$T/in.txt" "$T/io.txt"; "$B"/translate --model "$M" -i "$T/io.txt" -o "$T/io.txt" 2> /dev/null
s=$?; [ $s -eq 0 ] && cmp -s "$T/io.txt" "$T/out4.txt"; check $? "./translate -i F -o F: F becomes its translation (exit $s)"
# Through a link, the file it names is replaced and the link stays (as ./translate -o does).
"$B"/average --out "$T/avg-of-one.safetensors" "$M" > /dev/null 2>&1
"$B"/average --out "$T/in-link.safetensors" "$M" > /dev/null 2>&1; s=$?
[ $s -eq 0 ] && [ -L "$T/in-link.safetensors" ] && cmp -s "$T/in.safetensors" "$T/avg-of-one.safetensors"
check $? "./average --out LINK: the file it names is the average, the link stays (exit $s)"
ln -sf "$T/linked.bpe" "$T/link.bpe"; : > "$T/linked.bpe"
"$B"/bpe learn --vocab-size 280 --out "$T/link.bpe" "$T/corpus/train.en" 2> /dev/null; s=$?
"$B"/bpe learn --vocab-size 280 --out "$T/plain.bpe" "$T/corpus/train.en" 2> /dev/null
[ $s -eq 0 ] && [ -L "$T/link.bpe" ] && cmp -s "$T/linked.bpe" "$T/plain.bpe"
check $? "./bpe learn --out LINK: the file it names is the vocabulary, the link stays (exit $s)"
# ./bpe learn's required parts, ./bpe without a command, and its summary
for missing in "--out $T/never.bpe $T/corpus/train.en" "--vocab-size 280 $T/corpus/train.en" "--vocab-size 280 --out $T/never.bpe"; do
    "$B"/bpe learn $missing > /dev/null 2> "$T/err.txt"; s=$?
    [ $s -eq 2 ] && grep -q "learn needs --vocab-size N, --out FILE and at least one input file" "$T/err.txt" && [ ! -e "$T/never.bpe" ]
    check $? "./bpe learn $(echo "$missing" | sed "s|$T/||g"): exit 2 ($s), says what learn needs"
done
"$B"/bpe > "$T/out.txt" 2> "$T/err.txt"; s=$?
"$B"/bpe --help > "$T/help.txt" 2> /dev/null; s2=$?
[ $s -eq 2 ] && [ ! -s "$T/out.txt" ] && grep -q "^usage: bpe COMMAND" "$T/err.txt" && [ $s2 -eq 0 ] && cmp -s "$T/err.txt" "$T/help.txt"
check $? "./bpe without a command: usage on stderr, exit 2 ($s); ./bpe --help: the same on stdout, exit 0 ($s2)"
"$B"/bpe learn --vocab-size 280 --out "$T/full.bpe" "$T/corpus/train.en" 2> "$T/err.txt"; s=$?
"$B"/bpe learn --vocab-size 100000 --out "$T/exhausted.bpe" "$T/corpus/test.en" 2> "$T/err2.txt"; s2=$?
[ $s -eq 0 ] && ! grep -q "corpus exhausted" "$T/err.txt" && [ $s2 -eq 0 ] && grep -q "note: corpus exhausted before 100000 ids" "$T/err2.txt"
check $? "./bpe learn: no note at exactly --vocab-size ids, 'corpus exhausted before 100000 ids' short of them (exit $s, $s2)"
s=$( { "$B"/bpe learn --vocab-size 280 --out /dev/stdout "$T/corpus/train.en" 2> /dev/null; echo $? > "$T/status"; } | cat > "$T/stdout.bpe"; cat "$T/status")
[ "$s" -eq 0 ] && cmp -s "$T/stdout.bpe" "$T/plain.bpe"
check $? "./bpe learn --out /dev/stdout into a pipe: the vocabulary, as a file gets it (exit $s)"
# ./bpe learn on ./train's files learns ./train's vocabulary, also when the lines end in spaces
# and CRLF (each line's ends trimmed as ./train trims its data; they had been merged as pieces)
for l in en es; do sed 's/$/ \r/' "$T/corpus/train.$l" > "$T/crlf.$l"; done
"$B"/bpe learn --vocab-size 300 --out "$T/learnt.bpe" "$T/corpus/train.en" "$T/corpus/train.es" 2> /dev/null; s=$?
"$B"/bpe learn --vocab-size 300 --out "$T/learnt-crlf.bpe" "$T/crlf.en" "$T/crlf.es" 2> /dev/null; s2=$?
[ $s -eq 0 ] && [ $s2 -eq 0 ] && cmp -s "$T/learnt.bpe" "$T/run/vocab.bpe" && cmp -s "$T/learnt-crlf.bpe" "$T/run/vocab.bpe"
check $? "./bpe learn train.en train.es (and the same with space-CR line ends) = ./train's vocab.bpe (exit $s, $s2)"
# ... and refuses the files ./train refuses, with its message (it had learnt a vocabulary from a
# gzip file's bytes, from invalid UTF-8 and NUL bytes, exit 0)
gzip -c "$T/corpus/train.en" > "$T/train.en.gz"; printf 'sun\nmo\377on\n' > "$T/bad.en"
"$B"/bpe learn --vocab-size 300 --out "$T/gz.bpe" "$T/train.en.gz" 2> "$T/err.txt"; s=$?
"$B"/bpe learn --vocab-size 300 --out "$T/bad.bpe" "$T/corpus/train.es" "$T/bad.en" 2> "$T/err2.txt"; s2=$?
[ $s -eq 1 ] && [ $s2 -eq 1 ] && grep -q "train.en.gz is gzip-compressed" "$T/err.txt" && grep -q "bad.en:2: invalid UTF-8 (byte 0xFF at byte 3)" "$T/err2.txt" &&
    [ ! -e "$T/gz.bpe" ] && [ ! -e "$T/bad.bpe" ]
check $? "./bpe learn of a gzip file, of invalid UTF-8: refused as ./train refuses them (exit $s, $s2: $(cat "$T/err.txt" "$T/err2.txt" | tr '\n' ' ' | head -c 160))"
# A write that fails (past a file-size limit) leaves the old vocabulary whole, no temporary file.
(trap '' XFSZ; ulimit -f 1; exec "$B"/bpe learn --vocab-size 300 --out "$T/plain.bpe" "$T/corpus/train.en" "$T/corpus/train.es") 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "File too large" "$T/err.txt" && "$B"/bpe learn --vocab-size 280 --out "$T/again.bpe" "$T/corpus/train.en" 2> /dev/null &&
    cmp -s "$T/plain.bpe" "$T/again.bpe" && [ -z "$(ls "$T" | grep 'plain.bpe.tmp')" ]
check $? "./bpe learn --out past a file-size limit: exit 1 ($s), File too large, the old vocabulary whole, no temporary file left"

# Killed while writing -o (SIGTERM, as Ctrl-C's SIGINT): the temporary file goes with it, the
# exit status says the signal (143), the old output stays as it was.
for i in $(seq 1 2000); do cat "$T/corpus/train.en"; done > "$T/many.txt"
echo "old output" > "$T/killed.txt"
"$B"/translate --model "$M" -i "$T/many.txt" -o "$T/killed.txt" 2> /dev/null &
pid=$!; i=0
while [ $i -lt 100 ] && ! ls "$T" | grep -q '^killed.txt.tmp'; do sleep 0.05; i=$((i + 1)); done
sleep 0.3; kill -TERM $pid; wait $pid; s=$?
[ $s -eq 143 ] && [ "$(cat "$T/killed.txt")" = "old output" ] && ! ls "$T" | grep -q '^killed.txt.tmp'
check $? "./translate -o killed (SIGTERM) mid-run: exit 143 ($s), the old output as it was, no temporary file left"
# A SIGHUP the caller ignores (nohup) stays ignored: the run goes on (it had died, exit 129).
(trap '' HUP; exec "$B"/translate --model "$M" -i "$T/many.txt" -o "$T/hup.txt" 2> /dev/null) &
pid=$!; i=0
while [ $i -lt 100 ] && ! ls "$T" | grep -q '^hup.txt.tmp'; do sleep 0.05; i=$((i + 1)); done
kill -HUP $pid; sleep 0.5; kill -0 $pid 2> /dev/null; alive=$?
kill -TERM $pid; wait $pid
[ $alive -eq 0 ]; check $? "./translate -o under nohup (SIGHUP ignored): SIGHUP leaves it running"
# Replacing a file keeps its permissions (a private vocabulary or checkpoint stays private).
cp "$T/run/vocab.bpe" "$T/private.bpe"; chmod 600 "$T/private.bpe"; cp "$M" "$T/private.safetensors"; chmod 640 "$T/private.safetensors"
"$B"/bpe learn --vocab-size 280 --out "$T/private.bpe" "$T/corpus/train.en" 2> /dev/null &&
    "$B"/average --out "$T/private.safetensors" "$T/run/ckpt-00000040.safetensors" > /dev/null
s=$?; modes="$(stat -c %a "$T/private.bpe") $(stat -c %a "$T/private.safetensors")"
[ $s -eq 0 ] && [ "$modes" = "600 640" ]; check $? "./bpe learn and ./average over files of modes 600 and 640 keep them ($modes; exit $s)"

# Out of memory (ulimit -v) on a 20 MB line: a message and exit 1, the -o temporary file removed
# (std::bad_alloc had aborted, exit 134, the temporary file left).
if [ "${SANITIZED:-0}" = 1 ]; then
    skip "out of memory under ulimit -v: AddressSanitizer reserves more address space than the limit (make test checks it)"
else
    head -c 20000000 /dev/zero | tr '\0' a > "$T/huge-line.txt"
    (ulimit -v 150000; exec "$B"/bpe encode --vocab "$T/run/vocab.bpe" < "$T/huge-line.txt" > /dev/null 2> "$T/err.txt"); s1=$?
    grep -q "^bpe: out of memory" "$T/err.txt"; m1=$?
    (ulimit -v 400000; exec "$B"/translate --model "$M" --split-long -i "$T/huge-line.txt" -o "$T/oom.txt" > /dev/null 2> "$T/err.txt"); s2=$?
    [ $s1 -eq 1 ] && [ $m1 -eq 0 ] && [ $s2 -eq 1 ] && grep -q "^translate: out of memory" "$T/err.txt" && ! ls "$T" | grep -q "^oom.txt"
    check $? "out of memory on a 20 MB line (ulimit -v): ./bpe encode and ./translate -o say so, exit 1 ($s1, $s2), no output or temporary file left"
fi

"$B"/train $TA --out "$T/w1" > /dev/full 2> "$T/err.txt"
write_fails "./train > /dev/full" "standard output: No space left" $?
"$B"/train $TA --out "$T/w2" >&- 2> "$T/err.txt"
write_fails "./train with stdout closed" "standard output is closed" $?
mkdir -p "$T/w3" && ln -s /dev/full "$T/w3/log.csv"
"$B"/train $TA --out "$T/w3" --log-every 0 > /dev/null 2> "$T/err.txt"
write_fails "./train, log.csv on a full disk" "log.csv: No space left" $?

# ./bpe as a user runs it: learn from two files = learn from the two concatenated; encode then
# decode gives the text back (accents and a word the corpus lacks too); --pieces are the ids'
# pieces (▁ a space), and --ids after --pieces means ids; an id past the vocabulary is refused.
V="$T/bpe"; mkdir -p "$V"
cat "$T/corpus/train.en" "$T/corpus/train.es" > "$V/both.txt"
"$B"/bpe learn --vocab-size 300 --out "$V/two.bpe" "$T/corpus/train.en" "$T/corpus/train.es" 2> /dev/null &&
    "$B"/bpe learn --vocab-size 300 --out "$V/one.bpe" "$V/both.txt" 2> /dev/null &&
    "$B"/bpe learn --vocab-size 300 --out "$V/en.bpe" "$T/corpus/train.en" 2> /dev/null
s=$?; [ $s -eq 0 ] && cmp -s "$V/two.bpe" "$V/one.bpe" && ! cmp -s "$V/two.bpe" "$V/en.bpe"
check $? "./bpe learn A B = ./bpe learn cat(A, B), and differs from ./bpe learn A (exit $s)"
{ cat "$T/corpus/test.es"; printf 'café über naïve  dos  espacios\nzebra\n'; } > "$V/text.txt"
"$B"/bpe encode --vocab "$V/two.bpe" < "$V/text.txt" > "$V/ids.txt" &&
    "$B"/bpe decode --vocab "$V/two.bpe" < "$V/ids.txt" > "$V/back.txt"
s=$?; [ $s -eq 0 ] && cmp -s "$V/text.txt" "$V/back.txt"
check $? "./bpe encode | ./bpe decode gives the $(wc -l < "$V/text.txt") lines back, accents and double spaces too (exit $s)"
"$B"/bpe encode --vocab "$V/two.bpe" --pieces < "$V/text.txt" > "$V/pieces.txt"
n_ids=$(wc -w < "$V/ids.txt"); n_pieces=$(wc -w < "$V/pieces.txt")
"$B"/bpe encode --vocab "$V/two.bpe" --pieces < "$T/corpus/test.es" | sed 's/ //g; s/▁/ /g' | cmp -s - "$T/corpus/test.es" &&
    [ "$n_ids" -eq "$n_pieces" ] && grep -q '^c a f \\xC3 \\xA9 ▁' "$V/pieces.txt"
check $? "--pieces: one piece per id ($n_pieces, $n_ids); joined (▁ a space) they are test.es; bytes not learned as \\xC3"
"$B"/bpe encode --vocab "$V/two.bpe" --pieces --ids < "$V/text.txt" | cmp -s - "$V/ids.txt"
check $? "--pieces --ids: the last one counts (ids)"
echo "5 300" | "$B"/bpe decode --vocab "$V/two.bpe" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "line 1: expected ids in \[0, 300), got '300'" "$T/err.txt"
check $? "./bpe decode of id 300 with a 300-id vocabulary: refused, exit 1 ($s): $(head -c 80 "$T/err.txt")"
printf '0 105\t106\r\n' | "$B"/bpe decode --vocab "$V/two.bpe" > "$V/tabbed.txt" 2> "$T/err.txt"; s=$?
printf '105 106\n' | "$B"/bpe decode --vocab "$V/two.bpe" > "$V/spaced.txt" 2> /dev/null
[ $s -eq 0 ] && [ -s "$V/tabbed.txt" ] && cmp -s "$V/tabbed.txt" "$V/spaced.txt"
check $? "./bpe decode '0 105<TAB>106<CR>': id 0 (<pad>) taken and skipped, tabs and CR separate ids as spaces do (exit $s)"
echo "5 x7" | "$B"/bpe decode --vocab "$V/two.bpe" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "line 1: expected ids in \[0, 300), got 'x7'" "$T/err.txt"
check $? "./bpe decode of 'x7': refused, exit 1 ($s): $(head -c 80 "$T/err.txt")"
printf '105 14 106\n' | "$B"/bpe decode --vocab "$V/two.bpe" > "$V/split.txt" 2> "$T/err.txt"   # id 14: byte 0x0A
s=$?; [ $s -eq 1 ] && [ ! -s "$V/split.txt" ] && grep -q "line 1: the ids decode to a newline byte (id 14)" "$T/err.txt"
check $? "./bpe decode of the newline byte's id: refused, exit 1 ($s), not 2 lines for 1 ($(wc -l < "$V/split.txt")): $(head -c 80 "$T/err.txt")"

# A broken pipe ends quietly with the conventional status (SIGPIPE: 141 in sh), not an error.
awk 'BEGIN { for (i = 0; i < 20000; i++) print "sun moon star" }' > "$T/many.txt"
s=$( { "$B"/bpe encode --vocab "$T/run/vocab.bpe" < "$T/many.txt" 2> "$T/err.txt"; echo $? > "$T/status"; } | head -n 1 > /dev/null; cat "$T/status")
[ "$s" -eq 141 ] && [ ! -s "$T/err.txt" ]; check $? "./bpe encode | head -1: ends by SIGPIPE ($s), no message"

# The checkpoint is read by Hugging Face's own safetensors library, when it is installed
# (.ci/run installs it from PyPI).
if python3 -c 'import safetensors.numpy' 2> /dev/null; then
    python3 - "$M" "$T/run/ckpt-00000040.safetensors" <<'PY'
import sys, json
from safetensors.numpy import load_file
from safetensors import safe_open
avg, ckpt = load_file(sys.argv[1]), load_file(sys.argv[2])
with safe_open(sys.argv[1], "np") as f:
    cfg = json.loads(f.metadata()["config"])
ok = (avg["embed.weight"].shape == (cfg["vocab"], cfg["d_model"]) and
      avg["decoder.layers.0.cross_attn.out_proj.weight"].shape == (cfg["d_model"], cfg["n_heads"] * cfg["d_v"]) and
      ckpt["optimizer.m"].shape == (sum(v.size for k, v in ckpt.items() if not k.startswith("optimizer.")),))
sys.exit(0 if ok else 1)
PY
    check $? "Hugging Face safetensors reads the checkpoints (names, shapes, config, optimizer state)"
    # The average's header names its inputs (averaged_from): a file name that is not UTF-8 (Latin-1 'é')
    # had gone into the header as it was, which the library refuses (a header must be UTF-8).
    L1="$T/$(printf 'ckpt-caf\351.safetensors')"
    cp "$T/run/ckpt-00000040.safetensors" "$L1"
    "$B"/average --out "$T/avg-latin1.safetensors" "$L1" "$M" > /dev/null 2>&1; s=$?
    from=$(python3 -c 'import sys; from safetensors import safe_open; sys.stdout.buffer.write(safe_open(sys.argv[1], "np").metadata()["averaged_from"].encode())' \
        "$T/avg-latin1.safetensors" 2>&1 | tail -n 1)
    [ $s -eq 0 ] && [ "$from" = "ckpt-caf�.safetensors average.safetensors" ]
    check $? "Hugging Face safetensors reads an average of a file named in Latin-1 (exit $s): averaged_from '$from'"
elif [ "${REQUIRE_SAFETENSORS:-0}" = 1 ]; then   # .ci/run sets it: CI installs the library
    check 1 "Hugging Face safetensors: not importable by python3, and REQUIRE_SAFETENSORS=1"
else
    skip "safetensors (PyPI) not installed: checkpoint read by the reference library not checked"
fi

# Only ./train takes the data-parallel code (toolkit/distributed.cpp): the other programs link
# what they use (the model library is an archive, linked --as-needed), so they run without Open MPI.
if ! command -v ldd > /dev/null; then
    skip "ldd not found: the programs' shared libraries not checked"
elif ! ldd "$B"/train | grep -q libmpi; then
    skip "./train is built without MPI (no mpicxx, or MPI=0): nothing to keep out of the other programs"
else
    with=$(for p in translate average bleu bpe; do ldd "$B/$p" | grep -q libmpi && printf ' %s' "$p"; done)
    [ -z "$with" ]; check $? "./translate, ./average, ./bleu and ./bpe do not load libmpi (only ./train does)${with:+; these do:$with}"
fi

check_summary cli
