#!/bin/bash
# bench/bench_translate_gpu.sh [MODEL] — decoding on the GPU (make bench-translate DEVICE=cuda;
# make gpu-check runs it): ours against test/reference.py's batched, cached PyTorch decoder on
# the same GPU in the same run, and against CTranslate2 on the same GPU when its wheel runs
# there; greedy and beam 4; sentences/s, output tokens/s and the ratio to PyTorch.
#   1. A synthetic base-model batch: 128 source sentences of 25 tokens, random weights, every
#      hypothesis forced to 25 output tokens (</s> never chosen, on both sides), the median of
#      3 runs: ours bf16 and fp32 (build/bench_decode --config base), PyTorch fp32 and under
#      bf16 autocast (bench/bench_torch.py decode --config base). Target (issue 11): ours bf16,
#      beam 4, >= 60,000 output tokens/s on an H100.
#   2. The real test set with a trained model (MODEL, default runs/default/average.safetensors,
#      and its vocab.bpe; skipped when absent): as ./translate decodes it (sorted by length,
#      --batch-tokens BATCH_TOKENS, default 16000, max length len + 50), ours bf16 and fp32,
#      PyTorch fp32 and CTranslate2 float16 and bfloat16 in the same batches (--batch-tokens:
#      sentences x longest <= BATCH_TOKENS), each with its BLEU against the reference translations.
# Every decoder warms up alike (as bench_translate.sh's): before each timed search, the same search
# on the first WARMUP (default 8) sentences in one batch, untimed (--warmup); each reports its
# warm-up ("# warm-up ..."), and under each table the script compares them with ours fp32's (and,
# on the test set, the batches; one reporting none differs; bench/reported.sh's alike): "the same
# warm-up ..." ("the same batches ..."), or "WARM-UPS DIFFER" ("BATCHES DIFFER") "...: no fair
# ratio".
# CTranslate2's PyPI wheel is built for CUDA 12 and loads cuBLAS as libcublas.so.12 (dlopen, then
# its 9 functions by name). Where only CUDA 13's cuBLAS is present (the GPU machine's image), a
# forwarding libcublas.so.12 is made here (no code of its own: it names nvcc's libcublas.so.13
# as its dependency, so the names CTranslate2 looks up resolve there; all 9 exist in CUDA 13),
# and its rows say so; where neither works they say why. PYTHON: the interpreter with a CUDA
# PyTorch (default python3), CT2_PYTHON the one with ctranslate2 (default python3). SYNTHETIC
# replaces the synthetic batch's options (test_gpu_bench.sh: a tiny one on the CUDA emulator).
# Without a GPU it prints SKIP and why, and exits 0.
set -u
MODEL=${1:-runs/default/average.safetensors}
VOCAB=${VOCAB:-$(dirname "$MODEL")/vocab.bpe}
DATA=${DATA:-data/corpus/default}
BUILD=${BUILD:-build}
CT2=${CT2_PYTHON:-python3}
BATCH_TOKENS=${BATCH_TOKENS:-16000}
WARMUP=${WARMUP:-8}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. bench/gpu_env.sh   # PY, value, ratio, gpu_env
. bench/reported.sh  # warmup, batches, alike, lines_differ
row() { printf '%-7s | %-24s | %12s %10s | %9s | %s\n' "$@"; }

gpu_env bench_translate_gpu

# ---- 1. the synthetic base-model batch
synthetic=${SYNTHETIC:-"--config base --sentences 128 --length 25"}
for p in bf16 fp32; do
    "$BUILD/bench_decode" --device cuda --precision $p $synthetic --repeats 3 --warmup "$WARMUP" > "$tmp/ours-$p.syn" 2>&1 ||
        echo "# ours $p failed: $(tail -n 1 "$tmp/ours-$p.syn")"
done
if [ $torch_ok = 1 ]; then
    for p in fp32 bf16; do
        $PY bench/bench_torch.py decode --device cuda --precision $p $synthetic --warmup "$WARMUP" > "$tmp/torch-$p.syn" 2>&1 ||
            echo "# PyTorch $p failed: $(tail -n 1 "$tmp/torch-$p.syn")"
    done
fi
echo
echo "synthetic batch ($synthetic), random weights, output lengths forced:"
row search decoder sentences/s tokens/s "vs PyTorch" ""
for k in greedy beam4; do
    base=$(value "$(grep -h "^torch decode $k " "$tmp/torch-fp32.syn" 2> /dev/null)" tokens_per_s)
    for side in torch-fp32 torch-bf16 ours-fp32 ours-bf16; do
        line=$(grep -h "decode $k " "$tmp/$side.syn" 2> /dev/null)
        case $side in torch-fp32) name="PyTorch fp32" ;; torch-bf16) name="PyTorch bf16 autocast" ;;
                      *) name="ours ${side#ours-}" ;; esac
        [ -n "$line" ] || { row $k "$name" - - - "not run"; continue; }
        t=$(value "$line" tokens_per_s)
        row $k "$name" "$(value "$line" sentences_per_s)" "$t" "$(ratio "$t" "$base")" ""
    done
    alike $k - "ours fp32:$tmp/ours-fp32.syn" "ours bf16:$tmp/ours-bf16.syn" "PyTorch fp32:$tmp/torch-fp32.syn" \
        "PyTorch bf16 autocast:$tmp/torch-bf16.syn"
done
ours_beam=$(value "$(grep -h "decode beam4 " "$tmp/ours-bf16.syn" 2> /dev/null)" tokens_per_s)
torch_beam=$(value "$(grep -h "^torch decode beam4 " "$tmp/torch-fp32.syn" 2> /dev/null)" tokens_per_s)
if [ -z "${SYNTHETIC:-}" ]; then
    summary="ours decode base batch 128 beam 4 bf16: ${ours_beam:-not run} tokens/s (target 60000), $(ratio "$ours_beam" "$torch_beam") PyTorch fp32"
else
    summary="ours decode synthetic batch ($synthetic) beam 4 bf16: ${ours_beam:-not run} tokens/s, $(ratio "$ours_beam" "$torch_beam") PyTorch fp32"
fi
trap 'rm -rf "$tmp"; echo; echo "$summary"' EXIT

# ---- 2. the real test set
echo
for f in "$MODEL" "$VOCAB" "$DATA/test.en" "$DATA/test.es"; do
    [ -f "$f" ] || { echo "# the real test set: not run, $f not found (train first, or MODEL=...)"; exit 0; }
done
# BLEU of a decoder's ids as ./translate would print them: a byte outside a valid character as
# U+FFFD (./bpe decode keeps the bytes, and ./bleu, as sacreBLEU, refuses text that is not UTF-8)
bleu() {
    ./bpe decode --vocab "$VOCAB" < "$1" |
        python3 -c 'import sys; sys.stdout.write(sys.stdin.buffer.read().decode("utf-8", "replace"))' |
        ./bleu "$DATA/test.es" --score-only
}
./bpe encode --vocab "$VOCAB" < "$DATA/test.en" > "$tmp/src.ids"
echo "$MODEL on $(wc -l < "$tmp/src.ids") test sentences (every decoder in ours' batches: --batch-tokens $BATCH_TOKENS, warm-up $WARMUP sentences a search):"
for p in bf16 fp32; do
    "$BUILD/bench_decode" --device cuda --precision $p --model "$MODEL" --input "$tmp/src.ids" \
        --batch-tokens "$BATCH_TOKENS" --warmup "$WARMUP" --output "$tmp/ours-$p" > "$tmp/ours-$p.txt" 2>&1 ||
        echo "# ours $p failed: $(tail -n 1 "$tmp/ours-$p.txt")"
done
[ $torch_ok = 1 ] && $PY bench/bench_torch.py decode --device cuda --weights "$MODEL" --input "$tmp/src.ids" \
    --batch-tokens "$BATCH_TOKENS" --warmup "$WARMUP" --output "$tmp/torch" > "$tmp/torch.txt" 2>&1
ct2_lib=${LD_LIBRARY_PATH:-}
if ! $CT2 -c 'import ctypes; ctypes.CDLL("libcublas.so.12")' 2> /dev/null; then
    # CUDA 13's cuBLAS: beside nvcc (through its links, as the Makefile finds CUDA_HOME), in
    # /usr/local/cuda, or in the Python packages' nvidia/cu13 (PyTorch's); the first that has it
    nvcc_bin=$(command -v nvcc 2> /dev/null || echo /usr/local/cuda/bin/nvcc)
    cuda_lib=$(dirname "$(realpath "$nvcc_bin" 2> /dev/null || echo "$nvcc_bin")")/../lib64
    for d in "$cuda_lib" "$(dirname "$nvcc_bin")/../lib64" /usr/local/cuda/lib64 \
             $($PY -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2> /dev/null); do
        [ -e "$d/libcublas.so.13" ] && { cuda_lib=$(cd "$d" && pwd); break; }
    done
    mkdir -p "$tmp/cublas12"
    if echo | gcc -shared -x c - -o "$tmp/cublas12/libcublas.so.12" -Wl,-soname,libcublas.so.12 -Wl,--no-as-needed \
           -L"$cuda_lib" -l:libcublas.so.13 -Wl,-rpath,"$cuda_lib" 2> "$tmp/cublas12.log"; then
        ct2_lib="$tmp/cublas12${ct2_lib:+:$ct2_lib}"
        echo "# CTranslate2: no libcublas.so.12 here; its CUDA 12 build runs on $cuda_lib/libcublas.so.13 through a forwarding libcublas.so.12"
    else
        echo "# CTranslate2: no libcublas.so.12 here, and no forwarding one could be made: $(head -n 1 "$tmp/cublas12.log")"
    fi
fi
if $CT2 -c 'import ctranslate2' 2> /dev/null; then
    env LD_LIBRARY_PATH="$ct2_lib" $CT2 bench/bench_ct2.py --device cuda --types float16,bfloat16 --input "$tmp/src.ids" \
        --batch-tokens "$BATCH_TOKENS" --warmup "$WARMUP" --weights "$MODEL" --output "$tmp/ct2" > "$tmp/ct2.txt" 2>&1
    ct2_why=$(grep -v '^#' "$tmp/ct2.txt" | grep -v '^ct2 decode' | tail -n 1)
    # no row: its log's end, which the rows' one line may not explain (its folder is removed)
    grep -q '^ct2 decode' "$tmp/ct2.txt" || tail -n 8 "$tmp/ct2.txt" | sed 's/^/# ct2: /'
else
    ct2_why="$CT2 cannot import ctranslate2 (carry its wheel in .whl: make gpu-pack)"
fi
row search decoder sentences/s tokens/s "vs PyTorch" BLEU
for k in greedy beam4; do
    base=$(value "$(grep -h "^torch decode $k " "$tmp/torch.txt" 2> /dev/null)" sentences_per_s)
    for side in torch ct2-float16 ct2-bfloat16 ours-fp32 ours-bf16; do
        case $side in
            torch) line=$(grep -h "^torch decode $k " "$tmp/torch.txt" 2> /dev/null); name="PyTorch fp32"
                   out="$tmp/torch.$k" ;;
            ct2-*) line=$(grep -h "^ct2 decode $k ${side#ct2-} " "$tmp/ct2.txt" 2> /dev/null)
                   name="CTranslate2 ${side#ct2-}"; out="$tmp/ct2.$k.${side#ct2-}" ;;
            *) line=$(grep -h "decode $k " "$tmp/$side.txt" 2> /dev/null); name="ours ${side#ours-}"
               out="$tmp/$side.$k" ;;
        esac
        if [ -z "$line" ]; then
            why="not run"
            [ "${side%%-*}" = ct2 ] && why="not run: ${ct2_why:-see its log}"
            [ $side = torch ] && why="not run: $( [ $torch_ok = 1 ] && tail -n 1 "$tmp/torch.txt" 2> /dev/null || echo "$PY has no CUDA PyTorch")"
            row $k "$name" - - - "$why"
            continue
        fi
        s=$(value "$line" sentences_per_s)
        row $k "$name" "$s" "$(value "$line" tokens_per_s)" "$(ratio "$s" "$base")" "$(bleu "$out")"
    done
    alike $k "$BATCH_TOKENS" "ours fp32:$tmp/ours-fp32.txt" "ours bf16:$tmp/ours-bf16.txt" "PyTorch fp32:$tmp/torch.txt" \
        "CTranslate2 float16:$tmp/ct2.txt:float16" "CTranslate2 bfloat16:$tmp/ct2.txt:bfloat16"
    for p in fp32 bf16; do   # the one-time costs of ours' first pass (bench_decode's second pass)
        sed -n "s/^# $k, a second pass/#   $k: ours $p, a second pass/p" "$tmp/ours-$p.txt"
    done
    if [ -f "$tmp/torch.$k" ] && [ -f "$tmp/ours-fp32.$k" ]; then
        echo "#   $k: ours fp32 on the GPU vs PyTorch fp32: $(lines_differ "$tmp/torch.$k" "$tmp/ours-fp32.$k") of $(wc -l < "$tmp/src.ids") lines differ"
    fi
done
exit 0
