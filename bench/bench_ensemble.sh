#!/bin/bash
# bench/bench_ensemble.sh MODEL MODEL [MODEL...] — what an ensemble is worth (`make
# bench-ensemble`): the test set translated by each model alone, then by all of them together
# (./translate --model FIRST --ensemble OTHER...), greedy and beam 4: BLEU and chrF2 (./bleu,
# sacreBLEU's defaults), time, sentences/s and peak memory (GNU time's maximum RSS), in one run
# on this machine. The models must share a tokenizer (trained on the same corpus and vocabulary
# size, e.g. two seeds, or two --precision runs).
#   DATA   folder with test.SRC and test.TGT (default data/corpus/default); SRC=en TGT=es
#   PRECISION (default int8: the fastest on the CPU); BEAMS (default "1 4"); THREADS (0: all)
#   TRANSLATE, BLEU the programs (./translate, ./bleu)
set -u
DATA=${DATA:-data/corpus/default}
SRC=${SRC:-en}; TGT=${TGT:-es}
PRECISION=${PRECISION:-int8}; BEAMS=${BEAMS:-1 4}; THREADS=${THREADS:-0}
TRANSLATE=${TRANSLATE:-./translate}; BLEU=${BLEU:-./bleu}
if [ $# -lt 2 ]; then
    echo "bench_ensemble: SKIP, needs two or more checkpoints with one tokenizer (make bench-ensemble MODELS=\"A B\")"
    exit 0
fi
for m in "$@"; do
    [ -f "$m" ] || { echo "bench_ensemble: SKIP, no model at $m"; exit 0; }
done
for f in "$DATA/test.$SRC" "$DATA/test.$TGT"; do
    [ -f "$f" ] || { echo "bench_ensemble: SKIP, no $f (make data, or DATA=DIR)"; exit 0; }
done
[ -x /usr/bin/time ] || { echo "bench_ensemble: SKIP, needs GNU time (/usr/bin/time) for the peak memory"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(wc -l < "$DATA/test.$SRC") test lines, $TRANSLATE --precision $PRECISION, $(nproc) cores"
printf '%-7s | %-60s | %6s | %6s | %7s | %11s | %8s\n' search models BLEU chrF2 "time s" sentences/s "peak MB"
run() {  # run BEAM MODEL [MODEL...]: one line of the table
    local beam=$1 first=$2; shift 2
    local args=(--model "$first") label
    label=$(basename "$(dirname "$first")")/$(basename "$first")
    for m in "$@"; do
        args+=(--ensemble "$m")
        label="$label + $(basename "$(dirname "$m")")/$(basename "$m")"
    done
    if ! /usr/bin/time -f "%e %M" -o "$tmp/time" "$TRANSLATE" "${args[@]}" --precision "$PRECISION" --beam "$beam" \
            --threads "$THREADS" --quiet -i "$DATA/test.$SRC" -o "$tmp/hyp" 2> "$tmp/err"; then
        echo "bench_ensemble: ./translate ${args[*]} failed: $(head -c 300 "$tmp/err")" >&2
        exit 1
    fi
    local scores secs kb
    scores=$("$BLEU" --metric bleu,chrf --hyp "$tmp/hyp" "$DATA/test.$TGT" | awk '/^BLEU/ { b = $3 } /^chrF2/ { c = $3 } END { print b, c }')
    read -r secs kb < "$tmp/time"
    printf '%-7s | %-60s | %6s | %6s | %7s | %11.1f | %8.0f\n' "$([ "$beam" = 1 ] && echo greedy || echo "beam $beam")" \
        "$label" ${scores} "$secs" "$(awk -v n="$(wc -l < "$DATA/test.$SRC")" -v s="$secs" 'BEGIN { print n / s }')" "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')"
}
for beam in $BEAMS; do
    for m in "$@"; do run "$beam" "$m"; done
    run "$beam" "$@"
done
