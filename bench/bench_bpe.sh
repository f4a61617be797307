#!/usr/bin/env bash
# bench/bench_bpe.sh — times our BPE (./bpe) against SentencePiece on the same text.
#
# Usage (from the repository root, after building ./bpe):
#   bench/bench_bpe.sh [EN_FILE ES_FILE]      default: data/corpus/default/train.{en,es}
#   VOCAB_SIZE=37000 bench/bench_bpe.sh       another vocabulary size (default 8000)
# Compares `bpe learn` with `spm_train --model_type=bpe --character_coverage=1.0` and
# `bpe encode` with `spm_encode` (Debian package sentencepiece), prints seconds and ratios,
# checks that decode(encode(text)) reproduces the text, and exits 1 if ours is slower.
# The same threads on both sides: learning on THREADS (default: all cores; spm_train
# --num_threads, ours OMP_NUM_THREADS), encoding on one (spm_encode has no threads).
set -euo pipefail

EN=${1:-data/corpus/default/train.en}
ES=${2:-data/corpus/default/train.es}
VOCAB_SIZE=${VOCAB_SIZE:-8000}
BPE=${BPE:-./bpe}
THREADS=${THREADS:-$(nproc)}

for f in "$EN" "$ES"; do
    [ -r "$f" ] || { echo "bench_bpe: cannot read $f (run 'make data' first, or pass two files)" >&2; exit 1; }
done
[ -x "$BPE" ] || { echo "bench_bpe: $BPE not built (make bpe)" >&2; exit 1; }
if ! command -v spm_train >/dev/null || ! command -v spm_encode >/dev/null; then
    echo "bench_bpe: SKIP, spm_train/spm_encode not installed (apt-get install sentencepiece)"
    exit 0
fi
echo "# CPU: $(sh "$(dirname "$0")/cpu_name.sh"); $(nproc) cores; learning on $THREADS threads, encoding on 1; load average $(cut -d' ' -f1 /proc/loadavg)"
echo "# SentencePiece $(dpkg-query -W -f='${Version}' sentencepiece 2> /dev/null || echo '(version unknown)'); ours: ./bpe"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat "$EN" "$ES" > "$tmp/all.txt"

now() { date +%s.%N; }
calc() { awk "BEGIN { print $1 }"; }   # calc EXPR: floating-point arithmetic and comparisons
# seconds CMD...: runs CMD, prints the elapsed wall-clock seconds.
seconds() { local t0; t0=$(now); "$@"; calc "$(now) - $t0"; }

ours_learn=$(seconds env OMP_NUM_THREADS="$THREADS" "$BPE" learn --vocab-size "$VOCAB_SIZE" --out "$tmp/vocab.bpe" "$EN" "$ES" 2>/dev/null)
spm_learn=$(seconds spm_train --input="$EN,$ES" --model_prefix="$tmp/spm" --model_type=bpe \
    --vocab_size="$VOCAB_SIZE" --character_coverage=1.0 --num_threads="$THREADS" --minloglevel=2 2>/dev/null)
ours_enc=$(seconds sh -c "OMP_NUM_THREADS=1 '$BPE' encode --vocab '$tmp/vocab.bpe' < '$tmp/all.txt' > '$tmp/ours.ids'")
spm_enc=$(seconds sh -c "spm_encode --model='$tmp/spm.model' < '$tmp/all.txt' > '$tmp/spm.pieces'")

"$BPE" decode --vocab "$tmp/vocab.bpe" < "$tmp/ours.ids" > "$tmp/ours.txt"
if cmp -s "$tmp/ours.txt" "$tmp/all.txt"; then rt=PASS; else rt=FAIL; fi

lines=$(wc -l < "$tmp/all.txt")
words=$(wc -w < "$tmp/all.txt")
ours_tok=$(wc -w < "$tmp/ours.ids")
spm_tok=$(wc -w < "$tmp/spm.pieces")
printf 'corpus: %s + %s: %d lines, %d words; vocabulary size %d\n' "$EN" "$ES" "$lines" "$words" "$VOCAB_SIZE"
printf '%-8s %12s %14s %16s\n' step "bpe (s)" "sentencepiece" "spm / bpe"
printf '%-8s %12.3f %14.3f %15.1fx\n' learn "$ours_learn" "$spm_learn" "$(calc "$spm_learn / $ours_learn")"
printf '%-8s %12.3f %14.3f %15.1fx\n' encode "$ours_enc" "$spm_enc" "$(calc "$spm_enc / $ours_enc")"
printf 'tokens: bpe %d, sentencepiece %d (%.3f per word vs %.3f)\n' "$ours_tok" "$spm_tok" \
    "$(calc "$ours_tok / $words")" "$(calc "$spm_tok / $words")"
printf '%s round trip: decode(encode(corpus)) == corpus\n' "$rt"

status=0
[ "$rt" = PASS ] || status=1
for step in learn encode; do
    o=ours_${step%ode} s=spm_${step%ode}
    if [ "$(calc "${!o} < ${!s}")" = 1 ]; then echo "PASS $step faster than sentencepiece"
    else echo "FAIL $step slower than sentencepiece"; status=1; fi
done
exit $status
