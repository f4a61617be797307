#!/bin/sh
# test/test_train_cli.sh — ./train's validation, early stopping, fine-tuning and vocabulary
# options end to end, and ./average --last, each checked by its effect:
#   dev BLEU in log.csv == ./translate (--beam 1, or --eval-beam) of the same dev lines scored
#   by ./bleu; the final report's test BLEU, chrF and TER == ./translate | ./bleu --metric
#   bleu,chrf,ter; best.safetensors translates as the checkpoint of the logged best; early
#   stopping ends at the evaluation the logged metric sequence predicts (and, with a learning
#   rate that cannot move a parameter, at evaluation 1 + N); --max-epochs ends after that many
#   epochs of batches; --vocab trains with the given vocabulary; --init-from keeps the
#   checkpoint's tokenizer; --keep K leaves the last K checkpoints; ./average --last N ==
#   averaging those N files (bitwise); bad values
#   exit 2 naming the option; Ctrl-C saves the step reached and exits 130, and the run resumed
#   from there equals the uninterrupted one bitwise. (test_train checks --init-from's first loss and Adam's options
#   numerically.) Run from the repository root after `make`; the optional argument is the
#   folder holding the programs. Ends with "train_cli: N passed, M failed".
set -u
B=${1:-.}
. test/check.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# A toy corpus a tiny model starts to learn in a few dozen steps: each word + "o", in order.
mkdir -p "$T/corpus" "$T/other" "$T/nodev"
awk 'BEGIN { srand(5); split("sun moon star sky sea land tree rock fire rain", w, " ");
  for (i = 0; i < 1000; i++) { n = 2 + int(rand() * 4); en = ""; es = "";
    for (j = 0; j < n; j++) { x = w[1 + int(rand() * 10)]; en = en (j ? " " : "") x; es = es (j ? " " : "") x "o" }
    f = i < 40 ? "dev" : i < 60 ? "test" : "train";
    print en > "'"$T"'/corpus/" f ".en"; print es > "'"$T"'/corpus/" f ".es" } }'
# Other data for fine-tuning: the same words, reversed order.
awk '{ n = split($0, w, " "); s = ""; for (i = n; i > 0; i--) s = s (s ? " " : "") w[i]; print s }' \
    "$T/corpus/train.es" > "$T/other/train.es"
cp "$T/corpus/train.en" "$T/other/train.en"
cp "$T/corpus/train.en" "$T/corpus/train.es" "$T/nodev/"

TB="--data $T/corpus --max-tokens 500 --warmup 50 --log-every 1000s"   # no model options (--init-from)
TA="--config tiny --d-model 32 --d-ff 64 --dropout 0 $TB"
V="--vocab-size 300"
field() {  # field FILE EVENT STEP COLUMN: a log.csv value
    awk -F, -v e="$2" -v s="$3" -v c="$4" '$1 == e && $2 == s { print $c }' "$1"
}
ckpt() { printf '%s/ckpt-%08d.safetensors' "$1" "$2"; }
dev_bleu() {  # dev_bleu MODEL BEAM: ./translate the first 30 dev lines, ./bleu them
    head -n 30 "$T/corpus/dev.en" | "$B"/translate --model "$1" --beam "$2" > "$T/hyp.txt" &&
    head -n 30 "$T/corpus/dev.es" > "$T/ref.txt" && "$B"/bleu --score-only "$T/ref.txt" < "$T/hyp.txt"
}
same_number() {  # same_number LOGGED SCORED: the log's 9 digits against ./bleu's 2 decimals
    awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d <= 0.0050001 && d >= -0.0050001) }'
}
# Each evaluation's dev BLEU in RUN/log.csv against ./translate --beam BEAM of that step's
# checkpoint scored by ./bleu, and at least one of them above 0 (so not only 0 == 0).
logged_bleu_is_scored() {  # logged_bleu_is_scored RUN BEAM STEP...
    run=$1 beam=$2; shift 2
    nonzero=0
    for s in "$@"; do
        logged=$(field "$run/log.csv" dev "$s" 7)
        scored=$(dev_bleu "$(ckpt "$run" "$s")" "$beam")
        same_number "$logged" "$scored"
        check $? "step $s: dev BLEU in log.csv ($logged) == ./translate --beam $beam of ckpt-$s | ./bleu ($scored)"
        awk -v x="$logged" 'BEGIN { exit !(x > 0) }' && nonzero=1
    done
    [ $nonzero -eq 1 ]; check $? "some logged dev BLEU (beam $beam) is above 0: the comparison is not only 0 == 0"
}
# best.safetensors translates the dev lines as the checkpoint of the logged best evaluation
# (column 7, dev BLEU, highest; column 6, dev loss, lowest); prints that step.
best_step() {  # best_step RUN COLUMN
    awk -F, -v c="$2" '$1 == "dev" && (!seen || (c == 7 ? $c > b : $c < b)) { b = $c; s = $2; seen = 1 }
        END { print s }' "$1/log.csv"
}
best_is_logged() {  # best_is_logged RUN COLUMN WHAT
    best=$(best_step "$1" "$2")
    head -n 30 "$T/corpus/dev.en" | "$B"/translate --model "$1/best.safetensors" > "$T/best.txt"; s1=$?
    head -n 30 "$T/corpus/dev.en" | "$B"/translate --model "$(ckpt "$1" "$best")" > "$T/at_best.txt"; s2=$?
    [ $s1 -eq 0 ] && [ $s2 -eq 0 ] && [ -n "$best" ] && [ "$(wc -l < "$T/best.txt")" -eq 30 ] && cmp -s "$T/best.txt" "$T/at_best.txt"
    check $? "best.safetensors translates as ckpt-$best, the $3 (exit $s1, $s2)"
}
# The step at which early stopping with patience N ends, from log.csv's evaluations of
# column C (7: dev BLEU, higher is better; 6: dev loss, lower is better); else the last one.
predicted_stop() {  # predicted_stop LOG C N
    awk -F, -v c="$2" -v n="$3" '$1 == "dev" { v = $c + 0; last = $2
        if (!seen || (c == 7 ? v > best : v < best)) { best = v; seen = 1; since = 0 } else since++
        if (since >= n) { print $2; stopped = 1; exit } }
      END { if (!stopped) print last }' "$1"
}

# ---- dev BLEU during training, the best checkpoint by BLEU ----------------------------------
"$B"/train $TA $V --out "$T/run" --max-steps 50 --eval-every 25 --eval-lines 30 --save-every-steps 25 \
    --no-eval > "$T/train.log" 2>&1
check $? "./train with dev BLEU every 25 steps on 30 dev lines (exit $?)"
grep -q "dev BLEU .*(30 lines, greedy" "$T/train.log"; check $? "the progress line shows dev BLEU: $(grep -m1 'dev BLEU' "$T/train.log")"
logged_bleu_is_scored "$T/run" 1 25 50
best_is_logged "$T/run" 7 "highest logged dev BLEU"

# ---- the final report: its test line (averaged, beam 4) is what ./translate | ./bleu gives -
"$B"/train $TA $V --out "$T/final" --max-steps 600 --save-every-steps 200 --eval-every 0 > "$T/final.log" 2>&1
check $? "./train --max-steps 600, then the final evaluation (exit $?)"
reported=$(sed -n 's/^test, averaged, beam  *\(.*\)  (.*/\1/p' "$T/final.log")
"$B"/translate --model "$T/final/average.safetensors" < "$T/corpus/test.en" 2> /dev/null |
    "$B"/bleu --metric bleu,chrf,ter "$T/corpus/test.es" > "$T/scored.txt"
scored=$(grep -v '^signature: ' "$T/scored.txt" | paste -sd, - | sed 's/,/, /g')
case "$reported" in "BLEU = 0.00 "*|*", TER = 100.00"|*", TER = 0.00") known=1 ;;
                    "BLEU = "*", chrF2 = "*", TER = "*) known=0 ;; *) known=1 ;; esac
[ $known -eq 0 ] && [ "$reported" = "$scored" ]
check $? "./train's final test line, neither BLEU 0 nor TER 0 or 100 ($reported) == ./translate | ./bleu --metric bleu,chrf,ter ($scored)"
grep -q "signatures nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp; nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no; nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no)" "$T/final.log"
check $? "./train prints the three metrics' signatures"

# ---- --eval-beam ---------------------------------------------------------------------------
"$B"/train $TA $V --out "$T/run2" --max-steps 60 --eval-every 10 --eval-lines 30 --eval-beam 2 \
    --save-every-steps 10 --keep 10 --no-eval > "$T/train2.log" 2>&1
check $? "./train --eval-beam 2 (exit $?)"
logged_bleu_is_scored "$T/run2" 2 10 20 30 40 50 60

# ---- early stopping against the logged sequence, --best-metric loss -------------------------
# A learning rate too high on purpose: the dev loss falls, then climbs.
"$B"/train $TA $V --out "$T/run2b" --lr-scale 30 --max-steps 100 --eval-every 5 --eval-lines 30 \
    --best-metric loss --early-stopping 2 --save-every-steps 5 --keep 30 --no-eval > "$T/train2b.log" 2>&1
check $? "./train --lr-scale 30 --best-metric loss --early-stopping 2 (exit $?)"
want=$(predicted_stop "$T/run2b/log.csv" 6 2)
last=$(awk -F, '$1 == "dev" { s = $2 } END { print s }' "$T/run2b/log.csv")
end=$(ls "$T/run2b"/ckpt-*.safetensors | tail -n 1 | sed 's/.*ckpt-0*//; s/\.safetensors//')
[ -n "$want" ] && [ "$want" -lt 100 ] && [ "$last" = "$want" ] && [ "$end" = "$want" ]
check $? "early stopping ends where the logged dev losses predict, before --max-steps: step $want (last evaluation $last, last checkpoint $end)"
[ "$(best_step "$T/run2b" 6)" != "$want" ]; check $? "the lowest dev loss is not the last evaluation's"
best_is_logged "$T/run2b" 6 "lowest logged dev loss (--best-metric loss)"

# ---- early stopping, constructed: a learning rate too small to change any parameter --------
"$B"/train $TA $V --out "$T/run3" --lr-scale 1e-12 --max-steps 100 --eval-every 5 --eval-lines 30 \
    --early-stopping 2 --save-every-steps 0 > "$T/train3.log" 2>&1
check $? "./train --lr-scale 1e-12 --early-stopping 2 --eval-every 5, then the final evaluation (exit $?)"
rows=$(awk -F, '$1 == "dev" { printf "%s ", $2 }' "$T/run3/log.csv")
[ "$rows" = "5 10 15 " ] && [ "$(predicted_stop "$T/run3/log.csv" 7 2)" = 15 ] && [ -f "$(ckpt "$T/run3" 15)" ]
check $? "nothing can improve: stops at evaluation 1 + 2, step 15 (evaluations at: $rows)"
grep -q "^early stopping: dev bleu did not improve in 2 evaluations" "$T/train3.log" && grep -q "^final," "$T/run3/log.csv" &&
    grep -q "test, best (dev bleu), beam *BLEU = " "$T/train3.log"
check $? "it says so, then averages and evaluates as usual (final row, best checkpoint's test BLEU)"
bests=$(sed -n 's/^step *\([0-9]*\) | dev loss .* | best dev BLEU \(.*\)/\1: \2/p' "$T/train3.log" | paste -sd';' -)
[ "$bests" = "5: -> best.safetensors;10: 0 at step 5 (1 evaluation ago);15: 0 at step 5 (2 evaluations ago)" ]
check $? "the progress lines say where the best is: the first evaluation -> best.safetensors, then 'at step 5' 1 and 2 evaluations ago ($bests)"
final_step=$(awk -F, '$1 == "final" { print $2 }' "$T/run3/log.csv")
[ "$final_step" = 15 ]; check $? "log.csv's final row is at step 15, where training ended ($final_step; it had taken the best checkpoint's step, 5)"

# The same by dev loss: equal losses are no improvement either (a tie had counted as one: no stop).
"$B"/train $TA $V --out "$T/run3l" --lr-scale 1e-12 --max-steps 100 --eval-every 5 --eval-lines 30 \
    --best-metric loss --early-stopping 2 --save-every-steps 0 --no-eval > "$T/train3l.log" 2>&1; s=$?
rows=$(awk -F, '$1 == "dev" { printf "%s ", $2 }' "$T/run3l/log.csv")
losses=$(awk -F, '$1 == "dev" { printf "%s ", $6 }' "$T/run3l/log.csv")
[ $s -eq 0 ] && [ "$rows" = "5 10 15 " ] && grep -q "^early stopping: dev loss did not improve in 2 evaluations" "$T/train3l.log"
check $? "--best-metric loss, nothing can improve: stops at evaluation 1 + 2, step 15 (evaluations at: $rows; dev losses $losses; exit $s)"

# The same run stopped at step 10, then --resume --max-steps 100 without the validation options:
# the run's --eval-every 5 and --early-stopping 2 go on (they had fallen back to 500 and off: no
# evaluation after the resume, 100 steps trained).
"$B"/train $TA $V --out "$T/run3r" --lr-scale 1e-12 --max-steps 10 --eval-every 5 --eval-lines 30 \
    --early-stopping 2 --save-every-steps 0 --no-eval > /dev/null 2>&1
"$B"/train --out "$T/run3r" --resume --max-steps 100 --no-eval > "$T/train3r.log" 2>&1; s=$?
rows=$(awk -F, '$1 == "dev" { printf "%s ", $2 }' "$T/run3r/log.csv")
end=$(ls "$T/run3r"/ckpt-*.safetensors | tail -n 1 | sed 's/.*ckpt-0*//; s/\.safetensors//')
[ $s -eq 0 ] && [ "$rows" = "5 10 15 " ] && [ "$end" = 15 ] && grep -q "^early stopping: dev bleu did not improve in 2 evaluations" "$T/train3r.log"
check $? "--resume alone keeps --eval-every 5 and --early-stopping 2: evaluations at '$rows' (want '5 10 15 '), stops at step $end (want 15), exit $s"

# A run with --no-eval-bleu, and one with --best-metric loss, resumed alone: they go on by dev
# loss, the first still without dev BLEU (both had been refused: 'the run keeps its best
# checkpoint by dev loss, this resume by dev bleu', exit 1).
for opt in --no-eval-bleu "--best-metric loss"; do
    out="$T/res-$(echo "$opt" | cut -c3-9)"
    "$B"/train $TA $V --out "$out" --max-steps 5 --eval-every 5 --eval-lines 30 $opt --save-every-steps 5 --no-eval > /dev/null 2>&1
    "$B"/train --out "$out" --resume --max-steps 10 --no-eval > "$out.log" 2>&1; s=$?
    bleu10=$(field "$out/log.csv" dev 10 7)
    case "$opt" in --no-eval-bleu) [ -z "$bleu10" ] ;; *) [ -n "$bleu10" ] ;; esac; b=$?
    [ $s -eq 0 ] && [ $b -eq 0 ] && [ -n "$(field "$out/log.csv" dev 10 6)" ] && grep -q "^step .* | best dev loss " "$out.log"
    check $? "./train $opt, then --resume alone: exit $s, step 10 evaluated by dev loss (dev BLEU '$bleu10'): $(grep -m1 -E '^step|error' "$out.log")"
done
# --eval-bleu undoes a run's --no-eval-bleu on --resume: dev BLEU again, the best still by dev loss
"$B"/train --out "$T/res-no-eval" --resume --max-steps 15 --eval-bleu --no-eval > "$T/res-eval-bleu.log" 2>&1; s=$?
bleu15=$(field "$T/res-no-eval/log.csv" dev 15 7)
[ $s -eq 0 ] && [ -n "$bleu15" ] && grep -q "^step .* | best dev loss " "$T/res-eval-bleu.log"
check $? "--no-eval-bleu run resumed with --eval-bleu: exit $s, step 15 has dev BLEU '$bleu15', best still by dev loss: $(grep -m1 -E '^step|error' "$T/res-eval-bleu.log")"
# A run keeping its best by dev BLEU, resumed without dev BLEU: refused, saying what is missing
# (it had said "resume with --best-metric bleu", which --no-eval-bleu refuses in turn).
"$B"/train $TA $V --out "$T/res-bleu" --max-steps 2 --eval-every 2 --eval-lines 0 --no-eval > "$T/res-bleu0.log" 2>&1; s=$?
n=$(wc -l < "$T/corpus/dev.en")
[ $s -eq 0 ] && grep -q "^step *2 | dev loss .* | dev BLEU [0-9.]* ($n lines, greedy" "$T/res-bleu0.log"
check $? "--eval-lines 0: dev BLEU on all $n dev lines (exit $s: $(grep -m1 '^step *2 |' "$T/res-bleu0.log" | cut -c1-80))"
"$B"/train --out "$T/res-bleu" --resume --max-steps 4 --no-eval-bleu --no-eval > "$T/res-bleu.log" 2>&1; s=$?
[ $s -eq 1 ] && grep -q "^train: error: the run keeps its best checkpoint by dev BLEU, which this resume does not compute" "$T/res-bleu.log" &&
    [ ! -e "$(ckpt "$T/res-bleu" 4)" ]
check $? "a run by dev BLEU resumed with --no-eval-bleu: refused, exit $s ($(grep -m1 error "$T/res-bleu.log" | cut -c1-110))"
# A run that never evaluated (--eval-every 0: its metric, by default, dev loss) holds no best:
# resumed with evaluations, it keeps its best by dev BLEU as a new run would (it had kept dev
# loss, and refused --best-metric bleu: 'the run keeps its best checkpoint by dev loss'); one
# whose --best-metric loss was given keeps it, evaluated or not.
"$B"/train $TA $V --out "$T/res-noev" --max-steps 2 --eval-every 0 --no-eval > /dev/null 2>&1
cp -r "$T/res-noev" "$T/res-noev2"
"$B"/train --out "$T/res-noev" --resume --max-steps 4 --eval-every 2 --eval-lines 30 --no-eval > "$T/res-noev.log" 2>&1; s1=$?
"$B"/train --out "$T/res-noev2" --resume --max-steps 4 --eval-every 2 --eval-lines 30 --best-metric bleu --no-eval \
    > "$T/res-noev2.log" 2>&1; s2=$?
"$B"/train $TA $V --out "$T/res-lossgiven" --max-steps 2 --eval-every 1000 --best-metric loss --no-eval > /dev/null 2>&1
"$B"/train --out "$T/res-lossgiven" --resume --max-steps 4 --eval-every 2 --eval-lines 30 --no-eval > "$T/res-lossgiven.log" 2>&1; s3=$?
[ "$s1 $s2 $s3" = "0 0 0" ] && grep -q "^step *4 | dev loss .* | dev BLEU .* | best dev BLEU -> best.safetensors" "$T/res-noev.log" &&
    grep -q "^step *4 | .* | best dev BLEU -> best.safetensors" "$T/res-noev2.log" &&
    grep -q "^step *4 | .* | best dev loss -> best.safetensors" "$T/res-lossgiven.log"
check $? "a run of --eval-every 0 resumed with evaluations: best by dev BLEU, alone and with --best-metric bleu; a run of --best-metric loss not yet evaluated keeps dev loss (exits $s1 $s2 $s3: $(grep -h -m1 -E '^step *4|error' "$T/res-noev.log" "$T/res-noev2.log" "$T/res-lossgiven.log" | cut -c1-60 | tr '\n' ';'))"
"$B"/train --out "$T/res-lossgiven" --resume --max-steps 6 --best-metric bleu --no-eval > "$T/res-lossgiven2.log" 2>&1; s=$?
[ $s -eq 1 ] && grep -q "^train: error: the run keeps its best checkpoint by dev loss, this resume by dev bleu: resume with --best-metric loss" "$T/res-lossgiven2.log"
check $? "... resumed with --best-metric bleu: refused, exit $s ($(grep -m1 error "$T/res-lossgiven2.log" | cut -c1-100))"

# ---- the learning rate of each step --------------------------------------------------------
# log.csv's lr of step s (counted from 1) is §5.3's schedule at s: --lr-scale x d_model^-0.5 x
# min(s^-0.5, s x warmup^-1.5), here 2 x 32^-0.5 with --warmup 4: rising to step 4, then falling.
"$B"/train $TA $V --out "$T/lr" --warmup 4 --lr-scale 2 --log-every 0s --max-steps 8 --no-eval > "$T/lr.log" 2>&1
s=$?
awk -F, '$1 == "train" { n++; up = $2 * 4 ^ -1.5; down = $2 ^ -0.5; want = 2 / sqrt(32) * (up < down ? up : down);
    got = got " " $5; if ($5 - want > 1e-7 * want || want - $5 > 1e-7 * want) bad = bad ", step " $2 " wants " want }
    END { printf "%d rows:%s%s", n, got, bad; exit !(n == 8 && bad == "") }' "$T/lr/log.csv" > "$T/lr.txt" 2>&1
check $(( $? + s )) "log.csv's lr of steps 1-8 is 2 x 32^-0.5 x min(step^-0.5, step x 4^-1.5) within 1e-7 relative (exit $s; $(cat "$T/lr.txt"))"
# A warmup's small rates keep their digits (written with 6 decimals, step 1 of --warmup 4000
# had read 0.000000, and the base model's first steps too): 32^-0.5 x 4000^-1.5 = 6.99e-7.
"$B"/train $TA $V --out "$T/lrsmall" --warmup 4000 --log-every 0s --max-steps 2 --no-eval > "$T/lrsmall.log" 2>&1
s=$?
awk -F, '$1 == "train" { n++; want = $2 / sqrt(32) * 4000 ^ -1.5; got = got " " $5
    if ($5 - want > 1e-7 * want || want - $5 > 1e-7 * want) bad = bad ", step " $2 " wants " want }
    END { printf "%d rows:%s%s", n, got, bad; exit !(n == 2 && bad == "") }' "$T/lrsmall/log.csv" > "$T/lr.txt" 2>&1
check $(( $? + s )) "--warmup 4000: log.csv's lr of steps 1-2 is step x 32^-0.5 x 4000^-1.5 within 1e-7 relative (exit $s; $(cat "$T/lr.txt"))"
! grep -q "^skipped" "$T/lr.log"; check $? "a run that skipped no step does not say 'skipped 0 steps'"

# ---- the default model on the CPU keeps the CPU's budget ----------------------------------------
# (no --time and no model option: 55 minutes, the GPU's 2 minutes only on a GPU) and prints no
# blank line where no note is due
"$B"/train --data "$T/corpus" --out "$T/dflt" --max-steps 1 --no-eval --device cpu > "$T/dflt.log" 2>&1; s=$?
limit=$(meta_value "$(ckpt "$T/dflt" 1)" time_limit 2>&1)
[ $s -eq 0 ] && [ "$limit" = 3300 ] && ! grep -q "budget on the GPU" "$T/dflt.log" && ! grep -q '^$' "$T/dflt.log" &&
    ! grep -q "starting afresh" "$T/dflt.log"
check $? "./train with the default model on the CPU: a budget of 3300 s ($limit), no GPU budget said, no blank line, no 'starting afresh' (exit $s)"
# --resume in a folder without checkpoints starts afresh and says so; a resume says nothing of
# log.csv being left by an earlier run (it continues that log)
"$B"/train --data "$T/corpus" --out "$T/fresh" --resume --max-steps 1 --log-every 0s --no-eval --device cpu > "$T/fresh.log" 2>&1; s=$?
"$B"/train --data "$T/corpus" --out "$T/fresh" --resume --max-steps 2 --log-every 0s --no-eval --device cpu > "$T/fresh2.log" 2>&1; s2=$?
[ $s -eq 0 ] && grep -q "^--resume: no checkpoint in $T/fresh, starting afresh" "$T/fresh.log" && [ -e "$(ckpt "$T/fresh" 1)" ] &&
    [ $s2 -eq 0 ] && [ -e "$(ckpt "$T/fresh" 2)" ] && ! grep -q "left by an earlier run" "$T/fresh2.log" &&
    [ "$(grep -c '^train,' "$T/fresh/log.csv")" -eq 2 ]
check $? "--resume without a checkpoint starts afresh, said (exit $s); resumed again, log.csv continued, not called an earlier run's (exit $s2)"

# ---- --max-epochs ---------------------------------------------------------------------------
"$B"/train $TA $V --out "$T/run4" --max-epochs 2 --max-steps 0 --time 0 --eval-every 0 --no-eval \
    --max-tokens 2000 > "$T/train4.log" 2>&1
check $? "./train --max-epochs 2 (exit $?)"
per=$(sed -n 's/^batches: \([0-9]*\) per epoch.*/\1/p' "$T/train4.log")
end=$(ls "$T/run4"/ckpt-*.safetensors | tail -n 1 | sed 's/.*ckpt-0*//; s/\.safetensors//')
[ -n "$per" ] && [ "$end" = $((2 * per)) ]; check $? "--max-epochs 2 ends after 2 x $per batches: step $end"

# ---- --vocab, --init-from -------------------------------------------------------------------
"$B"/bpe learn --vocab-size 280 --out "$T/given.bpe" "$T/corpus/test.en" "$T/corpus/test.es" > /dev/null 2>&1
"$B"/train $TA --vocab "$T/given.bpe" --out "$T/run5" --max-steps 1 --no-eval > "$T/train5.log" 2>&1
check $? "./train --vocab FILE (exit $?)"
cmp -s "$T/given.bpe" "$T/run5/vocab.bpe" && ! cmp -s "$T/run/vocab.bpe" "$T/run5/vocab.bpe"
check $? "--vocab: the run's vocab.bpe is the given file (the one learned from the data differs)"
echo "sun moon" | "$B"/translate --model "$T/run5/ckpt-00000001.safetensors" > /dev/null
check $? "its checkpoint translates"
"$B"/train $TA --vocab "$T/run5/ckpt-00000001.safetensors" --out "$T/run5c" --max-steps 1 --no-eval > /dev/null 2>&1; s=$?
[ $s -eq 0 ] && cmp -s "$T/given.bpe" "$T/run5c/vocab.bpe"
check $? "--vocab CHECKPOINT: the vocabulary it carries (exit $s)"
echo "sun moon" | "$B"/bpe encode --pieces --vocab "$T/run5/ckpt-00000001.safetensors" > "$T/pieces-ckpt.txt" &&
    echo "sun moon" | "$B"/bpe encode --pieces --vocab "$T/given.bpe" | cmp -s - "$T/pieces-ckpt.txt"
check $? "./bpe encode --vocab CHECKPOINT: the pieces of its vocab.bpe ($(cat "$T/pieces-ckpt.txt"); it had said 'last line has no newline')"
"$B"/train $TB --data "$T/other" --init-from "$T/run/ckpt-00000050.safetensors" --out "$T/tuned" --max-steps 2 \
    --no-eval > "$T/train6.log" 2>&1
check $? "./train --init-from ckpt-50 on other data (exit $?)"
cmp -s "$T/run/vocab.bpe" "$T/tuned/vocab.bpe" && grep -q "^Fine-tuning from .*(step 50 of its run)" "$T/train6.log" &&
    [ -f "$T/tuned/ckpt-00000002.safetensors" ]
check $? "--init-from: the checkpoint's vocabulary, a fresh schedule (ckpt-00000002 after 2 steps)"

# ---- --resume takes the run's data and budget when not given again ---------------------------
# From another folder (no data/corpus/default there), without --data, --src, --tgt or a budget:
# the checkpoint's are used (they had fallen back to the defaults: the default corpus built, or
# 55 minutes for a 1-minute run); a spent budget trains nothing and says so; a larger one goes on.
BA=$(cd "$B" && pwd)
mkdir -p "$T/deen"
for s in train dev test; do cp "$T/corpus/$s.en" "$T/deen/$s.de"; cp "$T/corpus/$s.es" "$T/deen/$s.en"; done
"$B"/train --config tiny --d-model 32 --d-ff 64 $V --data "$T/deen" --src de --tgt en --out "$T/res" --max-steps 4 \
    --save-every-steps 2 --no-eval > /dev/null 2>&1
(cd "$T" && "$BA"/train --out res --resume --no-eval > "$T/res1.log" 2>&1); s=$?
[ $s -eq 0 ] && grep -q "^--resume: the run's data, from its checkpoint: --data $T/deen, --src de, --tgt en" "$T/res1.log" &&
    grep -q "^--resume: the run's budget is spent (step 4" "$T/res1.log" && [ ! -e "$(ckpt "$T/res" 5)" ] && [ ! -e "$(ckpt "$T/res" 6)" ]
check $? "--resume alone from another folder: the run's data (de-en) and budget (4 steps, spent: nothing trained, said), exit $s"
(cd "$T" && "$BA"/train --out res --resume --max-steps 6 --no-eval > "$T/res2.log" 2>&1); s=$?
[ $s -eq 0 ] && [ -e "$(ckpt "$T/res" 6)" ] && ! grep -q "budget is spent" "$T/res2.log"
check $? "--resume --max-steps 6: goes on to step 6 on the run's data, not saying its budget is spent (exit $s)"
# A budget of an hour, spent (the checkpoint's time_used edited to 3600.5 s, time_limit 3600):
# the time used reads 1h00m00s, as every duration of an hour or more does.
mkdir -p "$T/hour" && cp "$T/res/vocab.bpe" "$T/hour/" &&
    rewrite_meta "$(ckpt "$T/res" 6)" "$(ckpt "$T/hour" 6)" 'h["__metadata__"].update(time_used="3600.5", time_limit="3600", max_steps="0")'
"$B"/train --out "$T/hour" --resume --no-eval > "$T/hour.log" 2>&1; s=$?
[ $s -eq 0 ] && grep -q "^--resume: the run's budget is spent (step 6, 1h00m00s used)" "$T/hour.log"
check $? "--resume of a run that used its hour: '$(grep -m1 "budget is spent" "$T/hour.log" | cut -c1-60)', exit $s"
# A budget spent before the first step (--time of a picosecond): nothing trained, nothing to
# average or evaluate; said, exit 1, no checkpoint (a run of no step had crashed on the empty list)
"$B"/train $TA $V --out "$T/nostep" --time 0.000000000001s --no-eval > /dev/null 2> "$T/nostep.err"; s=$?
[ $s -eq 1 ] && grep -q "^train: error: no step completed within the budget; nothing saved (give a larger --time)" "$T/nostep.err" &&
    ! ls "$T/nostep"/*.safetensors > /dev/null 2>&1
check $? "--time 0.000000000001s: '$(grep -m1 "error" "$T/nostep.err" | cut -c1-70)', no checkpoint, exit $s"
# A data folder whose name is not UTF-8 is not recorded (a safetensors header is UTF-8 JSON: its
# raw byte had made Hugging Face's reader refuse every checkpoint), said at start; --resume
# with --data goes on.
header_encoding() {  # header_encoding CHECKPOINT: "UTF-8", or where its header is not
    python3 -c 'import struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
try: f.read(n).decode("utf-8"); print("UTF-8")
except UnicodeDecodeError as e: print(e)' "$1"
}
NU="$T/$(printf 'latin\351')"
mkdir -p "$NU" && cp "$T/corpus"/* "$NU/"
"$B"/train --config tiny --d-model 32 --d-ff 64 $V --data "$NU" --out "$T/nonutf8" --max-steps 2 --save-every-steps 2 \
    --no-eval > "$T/nonutf8.log" 2>&1; s=$?
"$B"/train --out "$T/nonutf8" --data "$NU" --resume --max-steps 4 --save-every-steps 2 --no-eval > /dev/null 2>&1; s2=$?
header=$(header_encoding "$(ckpt "$T/nonutf8" 2)")
[ $s -eq 0 ] && [ $s2 -eq 0 ] && [ "$header" = UTF-8 ] && [ -e "$(ckpt "$T/nonutf8" 4)" ] &&
    grep -q "^note: --data, --src or --tgt is not UTF-8: checkpoints cannot record it" "$T/nonutf8.log"
check $? "--data naming a folder in Latin-1: the checkpoint's header is $header, said, resumed with --data (exit $s, $s2)"
# Language names not UTF-8 from their first byte (--src, --tgt): the same.
L1=$(printf '\351n') L2=$(printf '\351s')
mkdir -p "$T/nonutf8lang"
for f in train dev test; do cp "$T/corpus/$f.en" "$T/nonutf8lang/$f.$L1"; cp "$T/corpus/$f.es" "$T/nonutf8lang/$f.$L2"; done
"$B"/train --config tiny --d-model 32 --d-ff 64 $V --data "$T/nonutf8lang" --src "$L1" --tgt "$L2" --out "$T/nonutf8l" \
    --max-steps 2 --save-every-steps 2 --no-eval > "$T/nonutf8l.log" 2>&1; s=$?
header=$(header_encoding "$(ckpt "$T/nonutf8l" 2)")
[ $s -eq 0 ] && [ "$header" = UTF-8 ] && grep -q "^note: --data, --src or --tgt is not UTF-8: checkpoints cannot record it" "$T/nonutf8l.log"
check $? "--src and --tgt in Latin-1 from their first byte: the checkpoint's header is $header, said (exit $s)"
# One budget option given again leaves the others the run's: --time 7m stays with --max-steps
# given (it had fallen back to 55 minutes).
"$B"/train --config tiny --d-model 32 --d-ff 64 $V --data "$T/corpus" --out "$T/res7" --time 7m --max-steps 2 \
    --save-every-steps 2 --no-eval > /dev/null 2>&1
"$B"/train --out "$T/res7" --resume --max-steps 4 --save-every-steps 2 --no-eval > /dev/null 2>&1; s=$?
limit=$(head -c 20000 "$(ckpt "$T/res7" 4)" | tr ',' '\n' | sed -n 's/.*"time_limit": *"\([^"]*\)".*/\1/p')
[ $s -eq 0 ] && [ "$limit" = 420 ]; check $? "--resume --max-steps 4 of a --time 7m run: its time limit stays 420 s ($limit; exit $s)"
# The bookkeeping too: a --save-every-steps 2 --keep 2 --average 2 run resumed alone to step 8
# keeps checkpoints 6 and 8 and averages 2 (it had fallen back to --save-every 5m, --keep 5 and
# --average 5: no checkpoint before the end, the 3 there averaged).
"$B"/train --config tiny --d-model 32 --d-ff 64 $V --data "$T/corpus" --out "$T/resbk" --max-steps 4 \
    --save-every-steps 2 --keep 2 --average 2 --no-eval > /dev/null 2>&1
"$B"/train --out "$T/resbk" --resume --max-steps 8 --no-eval > "$T/resbk.log" 2>&1; s=$?
kept=$(cd "$T/resbk" && echo ckpt-*.safetensors)
[ $s -eq 0 ] && [ "$kept" = "ckpt-00000006.safetensors ckpt-00000008.safetensors" ] && grep -q "^averaged 2 checkpoints" "$T/resbk.log" &&
    ! grep -q "^--average 2: only" "$T/resbk.log"
check $? "--resume alone keeps --save-every-steps 2, --keep 2, --average 2: checkpoints '$kept', $(grep -m1 '^averaged' "$T/resbk.log"), exit $s"
# Any value the options take reads back from the checkpoint: durations past 10^15 s, a --lr-scale
# below 1e-300 and a --clip-norm past 1e300 (a --log-every of 10^16 s had been refused as 'a
# damaged or edited checkpoint').
big=10000000000000000
"$B"/train --config tiny --d-model 32 --d-ff 64 $V --data "$T/corpus" --out "$T/resbig" --max-steps 2 --time $big \
    --save-every $big --log-every $big --lr-scale 1e-310 --clip-norm 1.7976931348623157e308 --no-eval > /dev/null 2>&1
"$B"/train --out "$T/resbig" --resume --max-steps 4 --no-eval > "$T/resbig.log" 2>&1; s=$?
[ $s -eq 0 ] && [ -e "$(ckpt "$T/resbig" 4)" ]
check $? "--resume of a run with --time, --save-every, --log-every $big s, --lr-scale 1e-310, --clip-norm 1.7976931348623157e308 (the largest double): exit $s $(grep -m1 error "$T/resbig.log")"
# --early-stopping given to the resume of a run without evaluations (its --eval-every 0 kept):
# refused as for a new run, not a patience that no evaluation would ever count.
"$B"/train --config tiny --d-model 32 --d-ff 64 $V --data "$T/corpus" --out "$T/noevals" --max-steps 2 --eval-every 0 \
    --no-eval > /dev/null 2>&1
"$B"/train --out "$T/noevals" --resume --early-stopping 2 --max-steps 4 --no-eval > "$T/noevals.log" 2>&1; s=$?
[ $s -eq 1 ] && grep -q "^train: error: --early-stopping needs evaluations: --eval-every > 0" "$T/noevals.log" &&
    [ ! -e "$(ckpt "$T/noevals" 4)" ]
check $? "--resume --early-stopping 2 of a run of --eval-every 0: refused, exit $s ($(grep -m1 error "$T/noevals.log"))"
# Without --data: from another folder, or for other languages, a message saying what to do (it
# had run the default corpus's script, not found there, or built English-Spanish for de-en).
(cd "$T" && "$BA"/train --max-steps 1 --out "$T/nodata" > /dev/null 2> "$T/err.txt"); s=$?
[ $s -eq 1 ] && grep -q "no data/make_corpus.py to build the default corpus: run ./train from the repository's folder, or give --data" "$T/err.txt"
check $? "./train from another folder without --data: exit 1 ($s), $(head -c 150 "$T/err.txt")"
# A default corpus cut short (train.* written, no .complete stamp: make_corpus.py writes it last,
# after dev and test): the script runs again (here a stand-in that stamps the folder). It had
# trained on the half-built folder without dev and test, silently (data: ..., 0 dev, 0 test).
mkdir -p "$T/half/data/corpus/default"; cp "$T/corpus/train.en" "$T/corpus/train.es" "$T/half/data/corpus/default/"
printf 'import sys\nprint("stand-in make_corpus ran")\nopen(sys.argv[2] + "/.complete", "w").close()\n' > "$T/half/data/make_corpus.py"
(cd "$T/half" && "$BA"/train --config tiny --d-model 32 --d-ff 64 $V --no-eval --max-steps 1 --out run1 > "$T/half1.txt" 2>&1); s1=$?
(cd "$T/half" && "$BA"/train --config tiny --d-model 32 --d-ff 64 $V --no-eval --max-steps 1 --out run2 > "$T/half2.txt" 2>&1); s2=$?
[ $s1 -eq 0 ] && [ $s2 -eq 0 ] && grep -q "stand-in make_corpus ran" "$T/half1.txt" && ! grep -q "stand-in" "$T/half2.txt"
check $? "default corpus without its .complete stamp: make_corpus.py runs again; once stamped, not (exit $s1, $s2)"
"$B"/train --src de --tgt en --max-steps 1 --out "$T/nodata" > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 1 ] && grep -q "the default corpus is English-Spanish (en, es): for de-en give --data DIR" "$T/err.txt"
check $? "./train --src de --tgt en without --data: exit 1 ($s), $(head -c 150 "$T/err.txt")"
"$B"/train --tgt fr --max-steps 1 --out "$T/nodata" > /dev/null 2> "$T/err.txt"; s=$?   # one side other than the corpus's
[ $s -eq 1 ] && grep -q "the default corpus is English-Spanish (en, es): for en-fr give --data DIR" "$T/err.txt"
check $? "./train --tgt fr without --data: exit 1 ($s), $(head -c 150 "$T/err.txt")"

# A run that ended after logging steps past its last checkpoint (kill -9, a full disk; here the
# checkpoint of step 6 removed): --resume trains steps 5 and 6 again, and log.csv holds each step
# once (it had held 5 and 6 twice, curves.svg going back).
"$B"/train $TA $V --out "$T/relog" --max-steps 6 --save-every-steps 4 --log-every 0 --eval-every 0 --no-eval > /dev/null 2>&1
rm -f "$(ckpt "$T/relog" 6)"
"$B"/train --out "$T/relog" --resume --log-every 0 --no-eval > "$T/relog.log" 2>&1; s=$?
steps=$(awk -F, '$1 == "train" { printf "%s ", $2 }' "$T/relog/log.csv")
[ $s -eq 0 ] && [ "$steps" = "1 2 3 4 5 6 " ] && grep -q "log.csv: 2 rows past step 4 (logged after that checkpoint) dropped" "$T/relog.log"
check $? "--resume from step 4 of a run that had logged to step 6: log.csv's train rows '$steps' (want '1 2 3 4 5 6 '), exit $s"

# ---- --keep K: the last K checkpoints stay --------------------------------------------------
"$B"/train $TA $V --out "$T/keep" --max-steps 12 --save-every-steps 2 --keep 3 --no-eval --average 0 > "$T/keep.log" 2>&1
check $? "./train --save-every-steps 2 --keep 3, 12 steps (exit $?)"
kept=$(cd "$T/keep" && echo ckpt-*.safetensors)
[ "$kept" = "ckpt-00000008.safetensors ckpt-00000010.safetensors ckpt-00000012.safetensors" ]
check $? "--keep 3 leaves the last 3 of the 6 checkpoints: $kept"

# ---- a new run in a folder an earlier run left without a checkpoint (killed before its first) --
# Its log.csv and best.safetensors are not this run's: log.csv is started afresh, best.safetensors
# removed, and both said (log.csv had been appended to, two runs' steps in one log and curve;
# best.safetensors had stayed).
mkdir -p "$T/stale"
printf 'event,step,epoch,train_loss,lr,dev_loss,bleu_dev,bleu_test,elapsed_s\ntrain,900,3.0,9.9,0.001,,,,100.0\n' > "$T/stale/log.csv"
cp "$T/run/best.safetensors" "$T/stale/best.safetensors"
"$B"/train $TA $V --out "$T/stale" --max-steps 2 --log-every 0 --eval-every 0 --no-eval > "$T/stale.log" 2>&1; s=$?
steps=$(awk -F, 'NR > 1 { printf "%s ", $2 }' "$T/stale/log.csv")
[ $s -eq 0 ] && [ "$steps" = "1 2 " ] && [ ! -e "$T/stale/best.safetensors" ] &&
    grep -q "log.csv: left by an earlier run, started afresh" "$T/stale.log" &&
    grep -q "best.safetensors: left by an earlier run, removed" "$T/stale.log"
check $? "a new run where an earlier one left log.csv and best.safetensors: log.csv holds its steps alone ('$steps', want '1 2 '), best.safetensors gone ($(ls "$T/stale" | tr '\n' ' ')), exit $s"
# ... but not a best.safetensors the new run reads: --init-from DIR/best.safetensors --out DIR
# fine-tunes from it (it had been removed before it was read: "cannot open", the model lost).
mkdir -p "$T/ftbest" && cp "$T/run/best.safetensors" "$T/ftbest/best.safetensors"
"$B"/train $TB --init-from "$T/ftbest/best.safetensors" --out "$T/ftbest" --max-steps 2 --eval-every 0 \
    > "$T/ftbest.log" 2>&1; s=$?
[ $s -eq 0 ] && cmp -s "$T/run/best.safetensors" "$T/ftbest/best.safetensors" && [ -e "$(ckpt "$T/ftbest" 2)" ] &&
    grep -q "^test, last checkpoint" "$T/ftbest.log" && ! grep -q "^test, best" "$T/ftbest.log"
check $? "--init-from DIR/best.safetensors --out DIR: fine-tunes from it, the file kept, its final report without a 'test, best' line (the file is not this run's best; exit $s: $(grep -m1 'error' "$T/ftbest.log"))"

# ---- one ./train at a time in a folder; a cut-short write's temporary file removed ----------
# A second run in the folder of one that is running is refused, naming its pid (two runs had
# written one folder's checkpoints, log.csv and average over each other).
"$B"/train $TA $V --out "$T/locked" --max-steps 100000 --time 60s --save-every-steps 2 --keep 1 --log-every 0 \
    --eval-every 0 --no-eval > "$T/locked1.log" 2>&1 &
first=$!
for i in $(seq 300); do ls "$T/locked"/ckpt-*.safetensors > /dev/null 2>&1 && break; sleep 0.1; done
"$B"/train --out "$T/locked" --resume --max-steps 3 --no-eval > "$T/locked2.log" 2>&1; s=$?
kill -TERM $first; wait $first; s1=$?
[ $s -eq 1 ] && grep -q "another ./train (pid $first) is running in $T/locked: wait for it" "$T/locked2.log" && [ $s1 -eq 130 ]
check $? "./train --resume in the folder of a running ./train: refused, exit $s ($(grep -m1 error "$T/locked2.log")); the first ended by SIGTERM, exit $s1"
# A second Ctrl-C or kill -9 in a checkpoint's write leaves NAME.tmp.PID: the next start removes
# those of the run's files whose process is gone, and keeps a live process's and other files.
sh -c 'exit 0' & gone=$!; wait $gone
for f in ckpt-00000007.safetensors.tmp.$gone best.safetensors.tmp.$gone average.safetensors.tmp.$$ notes.txt.tmp.$gone \
    average.safetensors.tmp.$gone vocab.bpe.tmp.$gone log.csv.tmp.$gone curves.svg.tmp.$gone \
    other.safetensors.tmp.$gone ckpt-notes.txt.tmp.$gone; do
    echo partial > "$T/locked/$f"
done
"$B"/train --out "$T/locked" --resume --max-steps 1 --no-eval > "$T/locked3.log" 2>&1; s=$?
left=$(cd "$T/locked" && ls | grep '[.]tmp[.]' | tr '\n' ' ')
[ $s -eq 0 ] && [ "$left" = "average.safetensors.tmp.$$ ckpt-notes.txt.tmp.$gone notes.txt.tmp.$gone other.safetensors.tmp.$gone " ] &&
    grep -q "ckpt-00000007.safetensors.tmp.$gone: left by a write that was cut short (process $gone is gone), removed" "$T/locked3.log"
check $? "a resumed run removes its files' temporaries of a process that is gone, keeps '$left' (exit $s)"

# ---- the final report's test set, changed while the run trained --------------------------------
# test.es cut to 5 lines once training started: the report's scoring is refused, exit 1 (it had
# said "train: error: BLEU: ..." and exited 0).
mkdir -p "$T/changing" && cp "$T/corpus"/* "$T/changing/"
"$B"/train $TA $V --data "$T/changing" --out "$T/changed" --time 3s --max-steps 0 --eval-every 0 --no-eval-bleu \
    > "$T/changed.log" 2>&1 &
pid=$!
i=0
while [ $i -lt 300 ] && ! grep -q "^batches:" "$T/changed.log"; do sleep 0.05; i=$((i + 1)); done
head -n 5 "$T/corpus/test.es" > "$T/changing/test.es"
wait $pid; s=$?
[ $s -eq 1 ] && grep -q "^train: error: $T/changing/test.en has [0-9]* lines, $T/changing/test.es 5 (changed while the run trained?): not scored" "$T/changed.log"
check $? "test.es cut while the run trained: the final report refuses it, exit $s ($(grep -m1 'error' "$T/changed.log" | sed "s|$T/||g"))"

# ---- --average 1: the final report names the model it scored, the last checkpoint -----------
# (its lines had said "averaged", and "test, last checkpoint, beam" repeated the same score)
"$B"/train $TA $V --out "$T/avg1" --max-steps 4 --save-every-steps 2 --eval-every 0 --average 1 > "$T/avg1.log" 2>&1; s=$?
lines=$(sed -n 's/^\(dev\|test\), \([a-z ]*\), \(beam\|greedy\) .*/\1 \2 \3;/p' "$T/avg1.log" | tr -d '\n')
[ $s -eq 0 ] && [ "$lines" = "dev last checkpoint beam;test last checkpoint beam;test last checkpoint greedy;" ]
check $? "--average 1: the report's lines '$lines' name the last checkpoint, once each (exit $s)"

# --keep 2 below --average 5: the 2 kept are averaged, and the run says why not 5 (it had said
# only "averaged 2 checkpoints")
"$B"/train $TA $V --out "$T/keep2" --max-steps 6 --save-every-steps 2 --keep 2 --average 5 --no-eval > "$T/keep2.log" 2>&1; s=$?
[ $s -eq 0 ] && grep -q "^--average 5: only 2 checkpoints in $T/keep2 (--keep 2)" "$T/keep2.log" && grep -q "^averaged 2 checkpoints" "$T/keep2.log"
check $? "--keep 2 --average 5: $(grep -m1 -- '^--average' "$T/keep2.log"), exit $s"
# with --keep 5 the run wrote only 2: the line does not blame --keep (it had said '(--keep 5)')
"$B"/train $TA $V --out "$T/keep5" --max-steps 4 --save-every-steps 2 --no-eval > "$T/keep5.log" 2>&1; s=$?
[ $s -eq 0 ] && grep -q "^--average 5: only 2 checkpoints in $T/keep5\$" "$T/keep5.log"
check $? "--keep 5 --average 5, 2 checkpoints written: $(grep -m1 -- '^--average' "$T/keep5.log"), exit $s"

# ---- ./average --last N DIR -----------------------------------------------------------------
"$B"/average --last 3 --out "$T/last.safetensors" "$T/run2" > /dev/null
check $? "./average --last 3 DIR (exit $?)"
set -- $(ls "$T/run2"/ckpt-*.safetensors | tail -n 3)
"$B"/average --out "$T/explicit.safetensors" "$@" > /dev/null
cmp -s "$T/last.safetensors" "$T/explicit.safetensors"
check $? "--last 3 == averaging the last 3 files explicitly, bitwise ($(basename "$1") .. $(basename "$3"))"
"$B"/average --last 9 --out "$T/x.safetensors" "$T/run" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "holds 2 checkpoints" "$T/err.txt"; check $? "--last 9 with 2 checkpoints: exit 1 ($s), $(cat "$T/err.txt")"
"$B"/average --last 2 --out "$T/x.safetensors" "$T/run" "$T/run2" > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 2 ] && grep -q "one run folder" "$T/err.txt"; check $? "--last with two folders: exit 2 ($s)"

# ---- --config: a preset the other options override, whether given before or after it -------
table_row() { sed -n "s/^| $1  *| *\([^ ]*\) *|\$/\1/p" "$2"; }   # table_row NAME LOG: the summary's value
for order in "--d-model 48 --heads 2 --dropout 0.2 --config tiny" "--config tiny --d-model 48 --heads 2 --dropout 0.2"; do
    out="$T/cfg-$(echo "$order" | cut -c3-5)"
    "$B"/train $order --data "$T/corpus" $V --max-steps 1 --out "$out" --no-eval > "$out.log" 2>&1
    s=$?
    got="$(table_row d_model "$out.log") $(table_row 'heads h' "$out.log") $(table_row 'd_ff' "$out.log")"
    p=$(sed -n 's/^| P_drop (attn \/ relu)  *| *\([0-9.]*\) .*/\1/p' "$out.log")
    [ $s -eq 0 ] && [ "$got" = "48 2 512" ] && [ "$p" = 0.2 ]
    check $? "./train $order: d_model, heads, d_ff '$got' == '48 2 512' (tiny's d_ff), P_drop $p == 0.2 (exit $s)"
done
"$B"/train --vocab-size 16000 --config base --help > "$T/help16k.txt"; "$B"/train --config base --help > "$T/help37k.txt"
grep -q -- "--vocab-size INT .*\[16000\]" "$T/help16k.txt" && grep -q -- "--vocab-size INT .*\[37000\]" "$T/help37k.txt"
check $? "--vocab-size 16000 before --config base stays 16000; --config base alone: 37000"

# ---- bad values: exit 2 before any work, the message naming the option ----------------------
refused() {  # refused OPTION ARGS...: ./train ARGS exits 2, says OPTION, prints nothing on stdout
    opt=$1; shift
    "$B"/train --max-steps 3 --no-eval --out "$T/never" "$@" > "$T/out.txt" 2> "$T/err.txt"; s=$?
    [ $s -eq 2 ] && grep -q -- "$opt" "$T/err.txt" && [ ! -s "$T/out.txt" ]
    check $? "./train $*: refused, exit 2 ($s), message: $(head -c 120 "$T/err.txt")"
}
C="$T/run/ckpt-00000050.safetensors"
refused --adam-beta1 $TA --adam-beta1 1
refused --adam-beta2 $TA --adam-beta2 -0.1
refused --adam-beta2 $TA --adam-beta2 0.99999999
refused --adam-eps $TA --adam-eps 0
refused --adam-eps $TA --adam-eps 1e-50
refused --adam-eps $TA --adam-eps nan
refused "--adam-eps overflows single precision" $TA --adam-eps 1e39   # inf: no step moved, no resume
refused --eval-beam $TA --eval-beam 0
refused --eval-lines $TA --eval-lines -1
refused --best-metric $TA --best-metric bleu4
refused --early-stopping $TA --early-stopping -1
refused --max-epochs $TA --max-epochs -2
refused --early-stopping $TA --early-stopping 3 --eval-every 0
refused --no-eval-bleu $TA --best-metric bleu --no-eval-bleu
refused --resume $TB --init-from "$C" --resume
refused --d-model $TB --init-from "$C" --d-model 64
refused --vocab-size $TB --init-from "$C" --vocab-size 300
refused --vocab $TB --init-from "$C" --vocab "$T/given.bpe"
refused --vocab-size $TA --vocab "$T/given.bpe" --vocab-size 300
refused "is not a multiple of --heads 3" $TA --heads 3                 # d_k had been floored to 10
refused "is not a multiple of --heads 64" $TA --heads 64               # "must be positive", after BPE
refused "--time expects TIME" $TA --time 0x10                          # hex had read as 16 s
refused "--time expects TIME" $TA --time 1.2.3m                        # and this as 72 s
refused "--lr-scale expects a number" $TA --lr-scale 0x1p3
refused "--out expects DIR, not an empty value" $TA --out ""
refused "option --src needs a value (EXT), got the option --tgt" $TA --src --tgt en   # "unexpected argument 'en'"
refused "option --out needs a value (DIR), got the option --help" $TA --out --help   # had been taken as the folder --help
[ ! -e "$T/never" ]; check $? "refused runs created nothing"
"$B"/train $TA $V --data "$T/nodev" --early-stopping 2 --out "$T/nodev_run" --max-steps 3 > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "need a dev set" "$T/err.txt"; check $? "--early-stopping without dev data: exit 1 ($s), $(tail -n 1 "$T/err.txt")"
# Dev data without a test set: the final report averages and scores dev alone, no error said
# (a flip scored the missing test set for the last checkpoint's line anyway: "cannot read", exit
# 0), and curves.svg, drawn first at the end of a run without evaluations, holds the final row
mkdir -p "$T/notest"; cp "$T/corpus"/train.* "$T/corpus"/dev.* "$T/notest/"
"$B"/train $TA $V --data "$T/notest" --out "$T/notest_run" --max-steps 2 --save-every-steps 1 --eval-every 0 \
    > "$T/notest.log" 2> "$T/err.txt"
s=$?; [ $s -eq 0 ] && grep -q "^trained 2 steps in " "$T/notest.log" && grep -q "^averaged 2 checkpoints" "$T/notest.log" && grep -q "^dev, averaged, beam " "$T/notest.log" &&
    ! grep -q "^test" "$T/notest.log" && ! grep -q "error" "$T/err.txt" &&
    grep -q "(1 row of log.csv)" "$T/notest_run/curves.svg"
check $? "dev data without a test set: exit 0 ($s), dev scored on the average, no test line, no error ($(grep -m1 error "$T/err.txt")), curves.svg of log.csv's final row: $(grep -o '([0-9]* rows* of log.csv)' "$T/notest_run/curves.svg")"
"$B"/train $TB --init-from "$T/missing.safetensors" --out "$T/missing_run" --max-steps 3 > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "missing.safetensors: cannot open" "$T/err.txt"; check $? "--init-from a missing file: exit 1 ($s)"

# Learned positions and a dev/test line longer than the position table: dev BLEU and the final
# evaluation translate its first max_len - 1 tokens and say so (the run had stopped at its first
# evaluation: "decoding beyond the learned position table", exit 1, no checkpoint).
mkdir -p "$T/long" && cp "$T/corpus"/train.* "$T/long/"
long=$(awk 'BEGIN { for (i = 0; i < 30; i++) printf "%s%s", (i ? " " : ""), (i % 2 ? "sun" : "rain") }')
for split in dev test; do
    { head -n 5 "$T/corpus/$split.en"; echo "$long"; } > "$T/long/$split.en"
    { head -n 5 "$T/corpus/$split.es"; echo "suno"; } > "$T/long/$split.es"
done
"$B"/train $TA $V --data "$T/long" --learned-pos --max-len 16 --out "$T/long_run" --max-steps 4 --eval-every 2 \
    --save-every-steps 2 > "$T/long.log" 2> "$T/err.txt"
s=$?; [ $s -eq 0 ] && [ -n "$(field "$T/long_run/log.csv" dev 2 7)" ] &&
    grep -q "^test, averaged, beam .*\[1 source line longer than the learned position table (16): its first 15 tokens translated\]" "$T/long.log"
check $? "--learned-pos --max-len 16, a 30-word dev and test line: exit 0 ($s), dev BLEU at step 2 ($(field "$T/long_run/log.csv" dev 2 7)), the report says the line was cut: $(grep -o '\[1 source line[^]]*\]' "$T/long.log" | head -n 1) (stderr: $(tail -n 1 "$T/err.txt"))"
grep -q "^data: .*, 6 dev (1 past the learned position table: not in the dev loss), 6 test" "$T/long.log"
check $? "--learned-pos: the data line says the dev pair left out of the dev loss: $(grep -m1 '^data: .* dev' "$T/long.log")"

# Ctrl-C (SIGINT) during training: a checkpoint of the step reached, exit status 130, and the run
# resumed from it equals the same steps uninterrupted, bitwise.
interrupt_and_resume "$T/int" "./train" $TA $V --no-eval
# A second Ctrl-C before the step in progress ends: at once, without that step's checkpoint. A
# model whose step takes about a second on 2 cores; the first signal once step 1 is logged, the
# second once the first is answered (sent together, the two would arrive as one).
"$B"/train --config tiny --d-model 512 --d-ff 2048 $V --data "$T/corpus" --max-tokens 2000 --no-eval --time 0 \
    --save-every 0 --log-every 0s --max-steps 100000 --out "$T/int2" > "$T/int2.log" 2>&1 &
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q "^step *1 |" "$T/int2.log"; do sleep 0.1; i=$((i + 1)); done
kill -INT $pid 2> /dev/null
i=0
while [ $i -lt 500 ] && ! grep -q "^stopping after this step" "$T/int2.log"; do sleep 0.01; i=$((i + 1)); done
kill -INT $pid 2> /dev/null
wait $pid; s=$?
[ $s -eq 130 ] && grep -q "^interrupted again: stopping now, without a checkpoint of this step$" "$T/int2.log" &&
    ! grep -q "^interrupted: checkpoint saved" "$T/int2.log" && [ "$(tr -cd '\000' < "$T/int2.log" | wc -c)" -eq 0 ]
check $? "two SIGINTs in one step: exit $s, '$(grep -m1 '^interrupted' "$T/int2.log")' (no NUL byte written)"

check_summary train_cli
