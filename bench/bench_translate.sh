#!/bin/bash
# bench/bench_translate.sh [MODEL] — decoding speed and BLEU on the real test set: ours (fp32,
# bf16 and int8) against test/reference.py's batched, cached PyTorch decoder and CTranslate2, same
# weights, same token ids, same machine, greedy and beam 4. `make bench-translate` runs it on
# the model that `make && ./train` leaves in runs/default/.
#   MODEL        checkpoint (default runs/default/average.safetensors); its vocab.bpe beside it
#   DATA         corpus folder with test.en / test.es (default data/corpus/default)
#   THREADS      cores for every decoder (default: all)
#   BATCH_TOKENS the batches every decoder gets (default 4000, ./translate's on the CPU)
#   WARMUP       the warm-up every decoder gets (default 8 sentences)
#   SMOKE=1      a smoke run (test_bench_env.sh: a tiny model and test set): every decoder is run
#                whatever its anchor says, and each one's batches are printed; its numbers mean
#                nothing
# Every decoder decodes the same batches: sorted by length (stable), as many sentences as keep
# their count x the longest's length within BATCH_TOKENS (toolkit/decode.cpp's decode_sorted;
# bench/batching.py's sorted_batches for the others, given --batch-tokens). ./translate's own
# default for int8 with a beam is 2,000 tokens: here int8 too takes BATCH_TOKENS, so that no
# decoder's batches differ (BATCH_TOKENS=2000 for int8's beam at its default). Each prints the
# sentences of each batch it decoded ("# batches ..."); the script compares them with ours fp32's
# (bench/reported.sh's alike; a decoder reporting none differs) and says "the same batches" or
# which decoder's differ. Every decoder warms up alike: before each timed search, the same search
# on the first WARMUP sentences in one batch, untimed (--warmup). All run THREADS threads: ours
# and PyTorch OMP_NUM_THREADS (PyTorch torch.set_num_threads too), CTranslate2 in both its
# layouts: one batch at a time on THREADS threads (intra_threads THREADS, inter_threads 1), and
# THREADS batches at once on one thread each (intra_threads 1, inter_threads THREADS: its layout
# for throughput, the rows marked "inter"; with THREADS=1 the two are one). On the 2-core VM the
# second was 1.1-4.0x the first (2026-12-01). Each decoder, precision and search is its own
# process and its own timed run (one pass over the test set), and just before each the load is
# checked (bench/torch_env.sh's load_check: the cores other work held over a second); a run that
# began on a busy machine is marked, and the count printed under the table.
# Ours: build/bench_decode --input --batch-tokens. PyTorch: bench/bench_torch.py decode --input
# --batch-tokens in bench/torch_env.sh's environment, fp32 and bf16 (CPU autocast: the linear
# layers in bf16, the log-softmax in fp32, as ours bf16). CTranslate2 (int8 and float32,
# bench/bench_ct2.py --batch-tokens) with `python3` (CT2_PYTHON), which needs the ctranslate2
# wheel (make bench-deps). The speed-up column is against PyTorch fp32.
#
# The anchors are checked first (bench/torch_check.py, bench/bench_ct2.py --check) and the
# environment printed: a decoder not at its best is not run, and its rows say why
# ("no ratio: ..."); without PyTorch at its best there is no speed-up column at all.
set -eu
MODEL=${1:-runs/default/average.safetensors}
VOCAB=${VOCAB:-$(dirname "$MODEL")/vocab.bpe}
DATA=${DATA:-data/corpus/default}
BUILD=${BUILD:-build}
BATCH_TOKENS=${BATCH_TOKENS:-4000}
WARMUP=${WARMUP:-8}
SMOKE=${SMOKE:-0}
. bench/torch_env.sh   # PY, CT2, THREADS, TORCH, print_environment, torch_anchor, ct2_anchor
. bench/reported.sh    # warmup, batches, alike, lines_differ
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
[ "$SMOKE" = 1 ] && echo "# SMOKE=1: a smoke run, every decoder run whatever its anchor says: the numbers mean nothing"
print_environment
echo "# $MODEL, $(wc -l < "$tmp/src.ids") test sentences; every decoder: batches of $BATCH_TOKENS tokens (--batch-tokens), warm-up $WARMUP sentences a search, $THREADS threads"
torch_ok=1; ct2_ok=1
torch_anchor > "$tmp/torch.anchor" || torch_ok=0
ct2_anchor "$MODEL" > "$tmp/ct2.anchor" || ct2_ok=0
cat "$tmp/torch.anchor" "$tmp/ct2.anchor"
if [ "$SMOKE" = 1 ]; then
    [ $torch_ok = 1 ] || ! $PY -c 'import torch' 2> /dev/null || { torch_ok=1; echo "# SMOKE: PyTorch run all the same"; }
    [ $ct2_ok = 1 ] || ! $CT2 -c 'import ctranslate2' 2> /dev/null || { ct2_ok=1; echo "# SMOKE: CTranslate2 run all the same"; }
fi
runs=0; busy=0
exec 3>&1   # the load lines go to the output, whatever the decoder's is redirected to
# timed WHAT COMMAND...: the load checked, then the command (one timed run)
timed() {
    runs=$((runs + 1))
    load_check "$1" >&3 || busy=$((busy + 1))
    shift
    "$@"
}
common="--input $tmp/src.ids --batch-tokens $BATCH_TOKENS --warmup $WARMUP"
for p in fp32 bf16 int8; do
    for k in greedy beam4; do
        timed "ours $p $k" "$BUILD/bench_decode" --model "$MODEL" $common --precision $p --searches $k \
            --output "$tmp/ours-$p" > "$tmp/ours-$p.$k.txt"
    done
    cat "$tmp/ours-$p.greedy.txt" "$tmp/ours-$p.beam4.txt" > "$tmp/ours-$p.txt"
done
: > "$tmp/torch.txt"; : > "$tmp/ct2.txt"; : > "$tmp/ct2x.txt"
if [ $torch_ok = 1 ]; then   # fp32, and bf16 under CPU autocast (the baseline of ours bf16)
    for p in fp32 bf16; do
        for k in greedy beam4; do
            timed "PyTorch $p $k" $TORCH $PY bench/bench_torch.py decode --weights "$MODEL" $common \
                --searches ${k%4} --threads "$THREADS" --precision $p --output "$tmp/torch-$p" > "$tmp/torch-$p.$k.txt"
        done
        cat "$tmp/torch-$p.greedy.txt" "$tmp/torch-$p.beam4.txt" > "$tmp/torch-$p.txt"
    done
    cp "$tmp/torch-fp32.txt" "$tmp/torch.txt"
    for k in greedy beam4; do cp "$tmp/torch-fp32.$k" "$tmp/torch.$k"; cp "$tmp/torch-bf16.$k" "$tmp/torch_bf16.$k"; done
fi
if [ $ct2_ok = 1 ]; then
    for q in float32 int8; do
        for k in greedy beam4; do
            timed "CTranslate2 $q $k" $CT2 bench/bench_ct2.py --weights "$MODEL" $common --threads "$THREADS" \
                --types $q --modes ${k%4} --output "$tmp/ct2" >> "$tmp/ct2.txt"
            [ "$THREADS" -gt 1 ] || continue
            timed "CTranslate2 $q $k inter" $CT2 bench/bench_ct2.py --weights "$MODEL" $common --threads 1 \
                --inter-threads "$THREADS" --types $q --modes ${k%4} --output "$tmp/ct2x" >> "$tmp/ct2x.txt"
        done
    done
fi
printf '%-7s | %-25s | %12s %10s | %9s | %6s\n' search decoder "sentences/s" "tokens/s" "speed-up" BLEU
for k in greedy beam4; do
    base=$(value "$(grep "^torch decode $k " "$tmp/torch.txt" || true)" sentences_per_s)
    for side in torch torch_bf16 ct2-float32 ct2-int8 ct2x-float32 ct2x-int8 ours-fp32 ours-bf16 ours-int8; do
        case $side in
            torch*) p=$([ $side = torch ] && echo fp32 || echo bf16) key=$k file=$tmp/torch-$p.txt
                   line=$(grep "^torch decode $k " "$file" 2> /dev/null || true); name="PyTorch $p"
                   [ -n "$line" ] || { printf '%-7s | %-25s | %s\n' $k "$name" "not run: $(grep '^no ratio' "$tmp/torch.anchor")"; continue; } ;;
            ct2*) c=${side%%-*} q=${side#*-}; key="$k $q" file=$tmp/$c.txt
                  line=$(grep "^ct2 decode $key " "$file" || true); name="CTranslate2 $q"; [ $c = ct2 ] || name="$name inter"
                  [ $c = ct2 ] || [ "$THREADS" -gt 1 ] || continue   # one layout on one thread
                  [ -n "$line" ] || { printf '%-7s | %-25s | %s\n' $k "$name" "not run: $(grep '^no ratio' "$tmp/ct2.anchor")"; continue; }
                  cp "$tmp/$c.$k.$q" "$tmp/$side.$k" ;;
            *) key=$k file=$tmp/$side.txt line=$(grep "decode $k " "$file"); name="ours ${side#ours-}" ;;
        esac
        [ "$SMOKE" = 1 ] && echo "# batches $k, $name: $(batches "$key" "$file"); warm-up: $(warmup "$key" "$file")"
        s=$(value "$line" sentences_per_s)
        speedup=$([ -n "$base" ] && awk "BEGIN { printf \"%.2fx\", $s / $base }" || echo "no ratio")
        printf '%-7s | %-25s | %12s %10s | %9s | %6s\n' $k "$name" "$s" "$(value "$line" tokens_per_s)" \
            "$speedup" "$(bleu "$tmp/$side.$k")"
    done
    alike $k "$BATCH_TOKENS" "ours fp32:$tmp/ours-fp32.txt" "ours bf16:$tmp/ours-bf16.txt" "ours int8:$tmp/ours-int8.txt" \
        "PyTorch fp32:$tmp/torch-fp32.txt" "PyTorch bf16:$tmp/torch-bf16.txt" "CTranslate2 float32:$tmp/ct2.txt:float32" \
        "CTranslate2 int8:$tmp/ct2.txt:int8" "CTranslate2 float32 inter:$tmp/ct2x.txt:float32" \
        "CTranslate2 int8 inter:$tmp/ct2x.txt:int8"
    if [ -f "$tmp/torch.$k" ]; then
        if cmp -s "$tmp/torch.$k" "$tmp/ours-fp32.$k"; then same="identical"; else
            same="$(lines_differ "$tmp/torch.$k" "$tmp/ours-fp32.$k") lines differ"; fi
        echo "#   $k: ours fp32 vs PyTorch outputs: $same"
        ours=$(value "$(grep "decode $k " "$tmp/ours-bf16.txt")" sentences_per_s)
        theirs=$(value "$(grep "^torch decode $k " "$tmp/torch-bf16.txt")" sentences_per_s)
        echo "#   $k: ours bf16 vs PyTorch bf16 (CPU autocast): $(awk "BEGIN { printf \"%.2fx\", $ours / $theirs }")"
    fi
done
echo "# threads: ours $(sed -n 's/.*, \([0-9]*\) OpenMP thread.*/\1/p' "$tmp/ours-fp32.greedy.txt" | head -n 1);$(sed -n 's/^# torch [^,]*, threads \([0-9]*\),.*/ PyTorch \1;/p' "$tmp/torch-fp32.greedy.txt" 2> /dev/null | head -n 1)$(sed -n 's/.*intra_threads \([0-9]*\),.*/ CTranslate2 intra_threads \1/p' "$tmp/ct2.txt" | head -n 1)$(sed -n 's/.*intra_threads \([0-9]*\), inter_threads \([0-9]*\),.*/; inter: \2 batches at once x \1 thread/p' "$tmp/ct2x.txt" | head -n 1)"
if [ $busy -gt 0 ]; then
    echo "# load: $busy of $runs timed runs began on a busy machine (BUSY above): their times and ratios are unreliable; run again on a quiet machine"
else
    echo "# load: all $runs timed runs began on a quiet machine"
fi
[ $torch_ok = 1 ] || grep '^no ratio' "$tmp/torch.anchor"
[ $ct2_ok = 1 ] || grep '^no ratio' "$tmp/ct2.anchor"
exit 0
