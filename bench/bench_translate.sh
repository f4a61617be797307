#!/bin/bash
# bench/bench_translate.sh [MODEL] — decoding speed and BLEU on the real test set: ours (fp32,
# bf16 and int8) against test/reference.py's batched, cached PyTorch decoder and CTranslate2, same
# weights, same token ids, same machine, greedy and beam 4. `make bench-translate` runs it on
# the model that `make && ./train` leaves in runs/default/.
#   MODEL   checkpoint (default runs/default/average.safetensors); its vocab.bpe beside it
#   DATA    corpus folder with test.en / test.es (default data/corpus/default)
#   THREADS cores for every decoder (default: all)
# Ours: build/bench_decode --input (as ./translate: sorted by length, batches of ./translate's
# default size). PyTorch: bench/bench_torch.py decode --input --batch 100 (sorted, 100
# sentences a batch) in bench/torch_env.sh's environment, fp32 and bf16 (CPU autocast: the
# linear layers in bf16, the log-softmax in fp32, as ours bf16). CTranslate2 (int8 and
# float32, bench/bench_ct2.py, batches of 100) with `python3` (CT2_PYTHON), which needs the
# ctranslate2 wheel (make bench-deps). The speed-up column is against PyTorch fp32.
#
# The anchors are checked first (bench/torch_check.py, bench/bench_ct2.py --check) and the
# environment printed: a decoder not at its best is not run, and its rows say why
# ("no ratio: ..."); without PyTorch at its best there is no speed-up column at all.
set -eu
MODEL=${1:-runs/default/average.safetensors}
VOCAB=${VOCAB:-$(dirname "$MODEL")/vocab.bpe}
DATA=${DATA:-data/corpus/default}
BUILD=${BUILD:-build}
. bench/torch_env.sh   # PY, CT2, THREADS, TORCH, print_environment, torch_anchor, ct2_anchor
for f in "$MODEL" "$VOCAB" "$DATA/test.en" "$DATA/test.es"; do
    [ -f "$f" ] || { echo "bench_translate: $f not found (train first: make && ./train)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
value() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# BLEU of a decoder's ids as ./translate would print them: a byte outside a valid character as
# U+FFFD (./bpe decode keeps the bytes, and ./bleu, as sacreBLEU, refuses text that is not UTF-8)
bleu() {
    ./bpe decode --vocab "$VOCAB" < "$1" |
        python3 -c 'import sys; sys.stdout.write(sys.stdin.buffer.read().decode("utf-8", "replace"))' |
        ./bleu "$DATA/test.es" --score-only
}
export OMP_NUM_THREADS=$THREADS

./bpe encode --vocab "$VOCAB" < "$DATA/test.en" > "$tmp/src.ids"
print_environment
echo "# $MODEL, $(wc -l < "$tmp/src.ids") test sentences"
torch_ok=1; ct2_ok=1
torch_anchor > "$tmp/torch.anchor" || torch_ok=0
ct2_anchor "$MODEL" > "$tmp/ct2.anchor" || ct2_ok=0
cat "$tmp/torch.anchor" "$tmp/ct2.anchor"
for p in fp32 bf16 int8; do
    "$BUILD/bench_decode" --model "$MODEL" --input "$tmp/src.ids" --precision $p --output "$tmp/ours-$p" > "$tmp/ours-$p.txt"
done
: > "$tmp/torch.txt"; : > "$tmp/ct2.txt"
if [ $torch_ok = 1 ]; then   # fp32, and bf16 under CPU autocast (the baseline of ours bf16)
    for p in fp32 bf16; do
        $TORCH $PY bench/bench_torch.py decode --weights "$MODEL" --input "$tmp/src.ids" --batch 100 \
            --threads "$THREADS" --precision $p --output "$tmp/torch-$p" | grep '^torch decode' > "$tmp/torch-$p.txt"
    done
    cp "$tmp/torch-fp32.txt" "$tmp/torch.txt"
    for k in greedy beam4; do cp "$tmp/torch-fp32.$k" "$tmp/torch.$k"; cp "$tmp/torch-bf16.$k" "$tmp/torch_bf16.$k"; done
fi
if [ $ct2_ok = 1 ]; then
    $CT2 bench/bench_ct2.py --input "$tmp/src.ids" --weights "$MODEL" --threads "$THREADS" --output "$tmp/ct2" \
        | grep '^ct2 decode' > "$tmp/ct2.txt"
fi
printf '%-7s | %-22s | %12s %10s | %9s | %6s\n' search decoder "sentences/s" "tokens/s" "speed-up" BLEU
for k in greedy beam4; do
    base=$(value "$(grep "decode $k " "$tmp/torch.txt" || true)" sentences_per_s)
    for side in torch torch_bf16 ct2-float32 ct2-int8 ours-fp32 ours-bf16 ours-int8; do
        case $side in
            torch*) p=$([ $side = torch ] && echo fp32 || echo bf16)
                   line=$(grep "decode $k " "$tmp/torch-$p.txt" 2> /dev/null || true); name="PyTorch $p"
                   [ -n "$line" ] || { printf '%-7s | %-22s | %s\n' $k "$name" "not run: $(grep '^no ratio' "$tmp/torch.anchor")"; continue; } ;;
            ct2-*) line=$(grep "decode $k ${side#ct2-} " "$tmp/ct2.txt" || true); name="CTranslate2 ${side#ct2-}"
                   [ -n "$line" ] || { printf '%-7s | %-22s | %s\n' $k "$name" "not run: $(grep '^no ratio' "$tmp/ct2.anchor")"; continue; }
                   cp "$tmp/ct2.$k.${side#ct2-}" "$tmp/$side.$k" ;;
            *) line=$(grep "decode $k " "$tmp/$side.txt"); name="ours ${side#ours-}" ;;
        esac
        s=$(value "$line" sentences_per_s)
        speedup=$([ -n "$base" ] && awk "BEGIN { printf \"%.2fx\", $s / $base }" || echo "no ratio")
        printf '%-7s | %-22s | %12s %10s | %9s | %6s\n' $k "$name" "$s" "$(value "$line" tokens_per_s)" \
            "$speedup" "$(bleu "$tmp/$side.$k")"
    done
    if [ -f "$tmp/torch.$k" ]; then
        if cmp -s "$tmp/torch.$k" "$tmp/ours-fp32.$k"; then same="identical"; else
            same="$(paste -d'\n' "$tmp/torch.$k" "$tmp/ours-fp32.$k" | paste - - | awk -F'\t' '$1 != $2' | wc -l) lines differ"; fi
        echo "#   $k: ours fp32 vs PyTorch outputs: $same"
        ours=$(value "$(grep "decode $k " "$tmp/ours-bf16.txt")" sentences_per_s)
        theirs=$(value "$(grep "decode $k " "$tmp/torch-bf16.txt")" sentences_per_s)
        echo "#   $k: ours bf16 vs PyTorch bf16 (CPU autocast): $(awk "BEGIN { printf \"%.2fx\", $ours / $theirs }")"
    fi
done
[ $torch_ok = 1 ] || grep '^no ratio' "$tmp/torch.anchor"
[ $ct2_ok = 1 ] || grep '^no ratio' "$tmp/ct2.anchor"
exit 0
