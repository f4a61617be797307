#!/bin/bash
# bench/bench_sentences.sh [MODEL] — what cutting lines into sentences is worth in BLEU
# (`make bench-sentences`): the test set's lines joined GROUP at a time into long lines of
# several sentences (their references joined alike), then translated whole, with --split-long
# at a few --max-input-tokens limits, and with --split-sentences; and, for scale, the lines
# translated one by one and joined afterwards. sacreBLEU's default BLEU (./bleu) of each.
#   MODEL  checkpoint (default runs/default/average.safetensors); skipped, saying so, when missing
#   DATA   folder with test.SRC and test.TGT (default data/corpus/default); SRC=en TGT=es
#   GROUP  lines joined into one (default 8); LIMITS (default "64 128"); BEAM (default 4);
#   PRECISION (default int8: the fastest on the CPU); TRANSLATE, BLEU the programs (./translate, ./bleu)
set -u
MODEL=${1:-runs/default/average.safetensors}
DATA=${DATA:-data/corpus/default}
SRC=${SRC:-en}; TGT=${TGT:-es}
GROUP=${GROUP:-8}; BEAM=${BEAM:-4}; PRECISION=${PRECISION:-int8}
TRANSLATE=${TRANSLATE:-./translate}; BLEU=${BLEU:-./bleu}
if [ ! -f "$MODEL" ]; then
    echo "bench_sentences: SKIP, no model at $MODEL (train one: make && ./train; or MODEL=FILE)"
    exit 0
fi
for f in "$DATA/test.$SRC" "$DATA/test.$TGT"; do
    [ -f "$f" ] || { echo "bench_sentences: SKIP, no $f (make data, or DATA=DIR)"; exit 0; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
join_lines() { awk -v g="$GROUP" '{ printf "%s%s", (NR % g == 1 || g == 1 ? "" : " "), $0; if (NR % g == 0) print "" }
                                  END { if (NR % g) print "" }' "$@"; }
join_lines "$DATA/test.$SRC" > "$tmp/src"
join_lines "$DATA/test.$TGT" > "$tmp/ref"
echo "# $(wc -l < "$DATA/test.$SRC") test lines joined $GROUP at a time: $(wc -l < "$tmp/src") lines of $(awk '{ n += NF } END { printf "%.0f", n / NR }' "$tmp/src") words on average"
echo "# $TRANSLATE --model $MODEL --precision $PRECISION --beam $BEAM"
printf '%-44s | %s\n' "how the long lines are translated" "BLEU"
run() {  # run LABEL OPTIONS...: translate the joined lines, print the BLEU line
    local label=$1; shift
    if ! "$TRANSLATE" --model "$MODEL" --precision "$PRECISION" --beam "$BEAM" --quiet "$@" -i "$tmp/src" -o "$tmp/hyp" 2> "$tmp/err"; then
        echo "bench_sentences: ./translate $* failed: $(head -c 200 "$tmp/err")" >&2
        exit 1
    fi
    printf '%-44s | %s\n' "$label" "$("$BLEU" --hyp "$tmp/hyp" "$tmp/ref" | head -n 1)"
}
run "whole" --max-input-tokens 0
for limit in ${LIMITS:-64 128}; do
    run "--split-long --max-input-tokens $limit" --split-long --max-input-tokens "$limit"
done
run "--split-sentences" --split-sentences
"$TRANSLATE" --model "$MODEL" --precision "$PRECISION" --beam "$BEAM" --quiet -i "$DATA/test.$SRC" -o "$tmp/lines" || exit 1
join_lines "$tmp/lines" > "$tmp/hyp"
printf '%-44s | %s\n' "(the test lines one by one, then joined)" "$("$BLEU" --hyp "$tmp/hyp" "$tmp/ref" | head -n 1)"
