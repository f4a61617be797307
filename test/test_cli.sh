#!/bin/sh
# test/test_cli.sh — the programs end to end, as a user runs them: ./train on a small
# synthetic corpus, then ./translate (order, empty lines, n-best, bad input, bad model files),
# ./average and ./bleu. Run from the repository root after `make`; the optional argument is
# the folder holding the programs (default: the repository root). Ends with
# "cli: N passed, M failed"; exits non-zero on failure.
set -u
B=${1:-.}
passed=0
failed=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

check() {  # check STATUS DESCRIPTION (STATUS 0 = pass)
    if [ "$1" -eq 0 ]; then echo "PASS $2"; passed=$((passed + 1));
    else echo "FAIL $2"; failed=$((failed + 1)); fi
}

# A toy corpus: Spanish-like suffixes on reversed words.
mkdir -p "$T/corpus"
awk 'BEGIN { srand(3); split("sun moon star sky sea land tree rock fire rain", w, " ");
  for (i = 0; i < 600; i++) { n = 2 + int(rand() * 5); en = ""; es = "";
    for (j = 0; j < n; j++) { x = w[1 + int(rand() * 10)]; en = en (j ? " " : "") x; es = x "o" (j ? " " : "") es }
    print en > "'"$T"'/corpus/train.en"; print es > "'"$T"'/corpus/train.es";
    if (i < 20) { print en > "'"$T"'/corpus/test.en"; print es > "'"$T"'/corpus/test.es" } } }'

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
[ "$(wc -l < "$T/out.txt")" -eq 4 ]; check $? "one output line per input line (4)"
[ -z "$(sed -n 2p "$T/out.txt")" ]; check $? "an empty line gives an empty line"
"$B"/translate --model "$M" --beam 1 < "$T/in.txt" > /dev/null; check $? "greedy (--beam 1) runs"
"$B"/translate --model "$M" --precision int8 < "$T/in.txt" > "$T/int8.txt"; check $? "--precision int8 runs"
[ "$(wc -l < "$T/int8.txt")" -eq 4 ] && [ -z "$(sed -n 2p "$T/int8.txt")" ]; check $? "--precision int8: 4 lines, the empty one empty"
echo sun | "$B"/translate --model "$M" --precision fp16 > /dev/null 2> "$T/err.txt"; [ $? -eq 2 ] && grep -q precision "$T/err.txt"
check $? "--precision fp16 is refused (exit 2, message names --precision)"
"$B"/translate --model "$M" --nbest 3 < "$T/in.txt" > "$T/nbest.txt"
grep -c '|||' "$T/nbest.txt" | grep -qx 10; check $? "--nbest 3: 3 scored hypotheses per non-empty line, 1 empty entry for the empty line"

printf 'sun \377 moon\n' | "$B"/translate --model "$M" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "line 1: invalid UTF-8" "$T/err.txt"; check $? "invalid UTF-8: error naming the line, exit 1 ($s)"
printf 'sun \377 moon\n' | "$B"/translate --model "$M" --replace-invalid > /dev/null; check $? "--replace-invalid translates it"
awk 'BEGIN { for (i = 0; i < 3000; i++) printf "sun "; print "" }' > "$T/long.txt"
"$B"/translate --model "$M" < "$T/long.txt" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "more than --max-input-tokens" "$T/err.txt"; check $? "over-long line: clear error, exit 1 ($s)"
"$B"/translate --model "$M" --split-long --max-len-b 5 < "$T/long.txt" | wc -l | grep -qx 1; check $? "--split-long translates it as one line"

echo sun | "$B"/translate --model "$T/missing.safetensors" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "cannot open" "$T/err.txt"; check $? "missing model: clear error, exit 1 ($s)"
head -c 5000 "$M" > "$T/trunc.safetensors"
echo sun | "$B"/translate --model "$T/trunc.safetensors" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "truncated" "$T/err.txt"; check $? "truncated model: clear error, exit 1 ($s)"
echo "not a model" > "$T/text.safetensors"
echo sun | "$B"/translate --model "$T/text.safetensors" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "not a safetensors file" "$T/err.txt"; check $? "foreign file: clear error, exit 1 ($s)"
"$B"/translate --bogus > /dev/null 2>&1; [ $? -eq 2 ]; check $? "unknown option: exit 2"
"$B"/translate --help | grep -q -- "--beam"; check $? "--help lists the options"

"$B"/average --out "$T/avg2.safetensors" "$T/run"/ckpt-*.safetensors > /dev/null; check $? "./average averages the kept checkpoints"
"$B"/translate --model "$T/avg2.safetensors" < "$T/in.txt" > /dev/null; check $? "the averaged model translates"
"$B"/bleu "$T/corpus/test.es" < "$T/corpus/test.es" | grep -q "BLEU = 100.00"; check $? "./bleu: a reference scored against itself is 100"
head -n 3 "$T/corpus/test.es" | "$B"/bleu "$T/corpus/test.es" > /dev/null 2>&1; [ $? -eq 1 ]; check $? "./bleu: mismatched line counts exit 1"

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
else
    echo "SKIP safetensors (PyPI) not installed: checkpoint read by the reference library not checked"
fi

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
