#!/bin/bash
# bench/bench_translate.sh [MODEL] — decoding speed and BLEU on the real test set: ours (fp32 and
# int8) against test/reference.py's batched, cached PyTorch decoder, same weights, same token
# ids, same machine, greedy and beam 4. `make bench-translate` runs it on the model that
# `make && ./train` leaves in runs/default/.
#   MODEL   checkpoint (default runs/default/average.safetensors); its vocab.bpe beside it
#   DATA    corpus folder with test.en / test.es (default data/corpus/default)
# Ours: build/bench_decode --input (as ./translate: sorted by length, batches of 4,000 padded
# source tokens). PyTorch: bench/bench_torch.py decode --input --batch 100 (sorted, 100
# sentences a batch), 2 threads, OpenMP OpenBLAS, tcmalloc (as bench/bench.sh). CTranslate2
# (int8 and float32, test/bench_ct2.py, 2 threads, batches of 100) when `python3` can import
# ctranslate2 (python3 -m pip install ctranslate2). The speed-up column is against PyTorch.
set -eu
MODEL=${1:-runs/default/average.safetensors}
VOCAB=${VOCAB:-$(dirname "$MODEL")/vocab.bpe}
DATA=${DATA:-data/corpus/default}
BUILD=${BUILD:-build}
. bench/torch_env.sh   # PY, TORCH
for f in "$MODEL" "$VOCAB" "$DATA/test.en" "$DATA/test.es"; do
    [ -f "$f" ] || { echo "bench_translate: $f not found (train first: make && ./train)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
value() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
bleu() { ./bpe decode --vocab "$VOCAB" < "$1" | ./bleu "$DATA/test.es" --score-only; }

./bpe encode --vocab "$VOCAB" < "$DATA/test.en" > "$tmp/src.ids"
echo "# $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "# $MODEL, $(wc -l < "$tmp/src.ids") test sentences"
for p in fp32 int8; do
    "$BUILD/bench_decode" --model "$MODEL" --input "$tmp/src.ids" --precision $p --output "$tmp/ours-$p" > "$tmp/ours-$p.txt"
done
$TORCH $PY bench/bench_torch.py decode --weights "$MODEL" --input "$tmp/src.ids" --batch 100 \
    --output "$tmp/torch" | grep '^torch decode' > "$tmp/torch.txt"
CT2=${CT2_PYTHON:-python3}
if $CT2 -c 'import ctranslate2' 2>/dev/null; then
    $CT2 test/bench_ct2.py --input "$tmp/src.ids" --weights "$MODEL" --output "$tmp/ct2" | grep '^ct2 decode' > "$tmp/ct2.txt"
else
    echo "# CTranslate2 skipped: $CT2 cannot import ctranslate2 ($CT2 -m pip install ctranslate2)"
    : > "$tmp/ct2.txt"
fi
printf '%-7s | %-22s | %12s %10s | %9s | %6s\n' search decoder "sentences/s" "tokens/s" "speed-up" BLEU
for k in greedy beam4; do
    t=$(grep "decode $k " "$tmp/torch.txt")
    base=$(value "$t" sentences_per_s)
    for side in torch ct2-float32 ct2-int8 ours-fp32 ours-int8; do
        case $side in
            torch) line=$t; name="PyTorch fp32" ;;
            ct2-*) line=$(grep "decode $k ${side#ct2-} " "$tmp/ct2.txt" || true); name="CTranslate2 ${side#ct2-}"
                   [ -n "$line" ] || continue; cp "$tmp/ct2.$k.${side#ct2-}" "$tmp/$side.$k" ;;
            *) line=$(grep "decode $k " "$tmp/$side.txt"); name="ours ${side#ours-}" ;;
        esac
        s=$(value "$line" sentences_per_s)
        printf '%-7s | %-22s | %12s %10s | %8.2fx | %6s\n' $k "$name" "$s" "$(value "$line" tokens_per_s)" \
            "$(awk "BEGIN { print $s / $base }")" "$(bleu "$tmp/$side.$k")"
    done
    if cmp -s "$tmp/torch.$k" "$tmp/ours-fp32.$k"; then same="identical"; else
        same="$(paste -d'\n' "$tmp/torch.$k" "$tmp/ours-fp32.$k" | paste - - | awk -F'\t' '$1 != $2' | wc -l) lines differ"; fi
    echo "#   $k: ours fp32 vs PyTorch outputs: $same"
done
