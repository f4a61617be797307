#!/bin/bash
# bench/bench_split_long.sh [MODEL] — `./translate --split-long` on a single line of 50,000,
# 100,000 and 200,000 words: wall-clock and CPU seconds and seconds per 1,000 words, so that
# the cost's linearity in the line's length is visible (`make bench-split-long`).
#   MODEL    checkpoint (default runs/default/average.safetensors); skipped, saying so, when
#            it is missing
#   DATA     text the words are taken from, in order, repeated as needed (default
#            data/corpus/default/train.en)
#   WORDS    line lengths to time (default "50000 100000 200000")
#   THREADS  OpenMP threads (default: all cores); BEAM (default 4, ./translate's default);
#            TRANSLATE the program (default ./translate)
# A line is cut into its sentences (cli/sentences.h; a sentence over the model's input limit,
# 1,024 tokens with sinusoidal positions, at its clauses), each costing what its length does,
# so time per 1,000 words should stay flat.
set -u
MODEL=${1:-runs/default/average.safetensors}
DATA=${DATA:-data/corpus/default/train.en}
THREADS=${THREADS:-$(nproc)}
BEAM=${BEAM:-4}
TRANSLATE=${TRANSLATE:-./translate}
if [ ! -f "$MODEL" ]; then
    echo "bench_split_long: SKIP, no model at $MODEL (train one: make && ./train; or MODEL=FILE)"
    exit 0
fi
[ -f "$DATA" ] || { echo "bench_split_long: SKIP, no text at $DATA (make data, or DATA=FILE)"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# words N: one line of the first N words of DATA (repeated when DATA has fewer).
words() {
    awk -v n="$1" 'BEGIN { RS = "[ \t\r\n]+" } { w[k++] = $0 }
        END { for (i = 0; i < n; i++) printf "%s%s", (i ? " " : ""), w[i % k]; print "" }' "$DATA"
}

echo "# CPU: $(sh "$(dirname "$0")/cpu_name.sh"); $THREADS of $(nproc) cores used; load average $(cut -d' ' -f1 /proc/loadavg)"
echo "# $TRANSLATE --split-long --beam $BEAM --model $MODEL; words from $DATA"
printf '%8s | %9s | %9s %9s | %14s | %9s\n' words bytes "wall s" "CPU s" "wall s/1k words" "vs first"
first=""
for n in ${WORDS:-50000 100000 200000}; do
    words "$n" > "$tmp/line.txt"
    TIMEFORMAT='%R %U'
    t=$( { time OMP_NUM_THREADS=$THREADS "$TRANSLATE" --model "$MODEL" --split-long --beam "$BEAM" \
             < "$tmp/line.txt" > "$tmp/out.txt" 2> "$tmp/err.txt"; } 2>&1 )
    status=$?
    if [ $status -ne 0 ] || [ "$(wc -l < "$tmp/out.txt")" -ne 1 ]; then
        echo "bench_split_long: ./translate failed on $n words (exit $status): $(head -c 200 "$tmp/err.txt")" >&2
        exit 1
    fi
    wall=${t% *}; cpu=${t#* }
    per=$(awk "BEGIN { printf \"%.3f\", $wall / $n * 1000 }")
    first=${first:-$per}
    printf '%8d | %9d | %9.1f %9.1f | %14s | %8.2fx\n' "$n" "$(wc -c < "$tmp/line.txt")" "$wall" "$cpu" "$per" \
        "$(awk "BEGIN { print $per / $first }")"
done
