#!/bin/sh
# bench/bench.sh train|decode BUILD_DIR — ours against the PyTorch reference, same machine,
# same run: prints the environment measured, each side's figures and the speed ratio
# (PyTorch time / our time).
#
# The ratio is printed only when PyTorch runs at its best (bench/torch_env.sh sets it up,
# bench/torch_check.py verifies it at run time: the OpenMP OpenBLAS loaded, a kernel for this
# CPU, tcmalloc, the same threads, and a large matmul near this machine's measured fp32 peak).
# Otherwise PyTorch is not run: the table shows our figures, "no ratio" in its columns, and
# the refusal says why ("no ratio: PyTorch is running on <lib> ..."; `make bench-deps`
# installs what is missing).
#   THREADS         cores for both sides (default: all)
#   BENCH_CONFIGS   train: the configs to run (default "tiny small base")
#   BENCH_PRECISION train: fp32 (default) or bf16 (ours: the linear layers' products on bf16
#                   operands, AMX or vdpbf16ps where the CPU has it; PyTorch: CPU bf16
#                   autocast, oneDNN)
#   TORCH_BLAS_DIR  the BLAS folder PyTorch loads (default Debian's openblas-openmp)
set -u
MODE=$1
BUILD=${2:-build}
. bench/torch_env.sh   # PY, THREADS, TORCH, print_environment, torch_anchor
out=$(mktemp)
trap 'rm -f "$out"' EXIT
value() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
ratio() { [ -n "$2" ] && [ -n "$1" ] && awk "BEGIN { printf \"%.2fx\", $1 / $2 }" || echo "no ratio"; }

print_environment
if torch_anchor > "$out"; then anchor=1; else anchor=0; fi
cat "$out"
refusal=$(grep '^no ratio' "$out")
export OMP_NUM_THREADS=$THREADS
if [ "$MODE" = train ]; then
    echo "precision: ${BENCH_PRECISION:-fp32}"
    printf '%-6s | %12s %12s | %12s %12s | %9s | %7s | %15s\n' config "ours ms" "torch ms" "ours tok/s" "torch tok/s" "speed-up" GFLOP/s "peak MB ours/pt"
    for c in ${BENCH_CONFIGS:-tiny small base}; do
        o=$("$BUILD/bench_train" --config $c --precision "${BENCH_PRECISION:-fp32}") || exit 1
        t=""
        [ $anchor = 1 ] && t=$($TORCH $PY bench/bench_torch.py train --configs $c --threads "$THREADS" \
            --precision "${BENCH_PRECISION:-fp32}" | grep '^torch train')
        oms=$(value "$o" ms_per_step); tms=$(value "$t" ms_per_step)
        printf '%-6s | %12s %12s | %12s %12s | %9s | %7s | %15s\n' $c "$oms" "${tms:-no ratio}" "$(value "$o" tokens_per_s)" \
            "$(value "$t" tokens_per_s)" "$(ratio "$tms" "$oms")" "$(value "$o" matmul_gflops)" "$(value "$o" peak_rss_mb)/$(value "$t" peak_rss_mb)"
    done
else   # ours fp32 and int8 against PyTorch fp32, ours bf16 against PyTorch's CPU bf16 autocast
    for p in fp32 bf16 int8; do "$BUILD/bench_decode" --precision $p >> "$out" || exit 1; done
    t=""
    [ $anchor = 1 ] && for p in fp32 bf16; do
        t="$t$($TORCH $PY bench/bench_torch.py decode --threads "$THREADS" --precision $p | grep '^torch decode')
"; done
    printf '%-7s | %-9s | %12s | %-12s %12s | %9s\n' search precision "ours tok/s" "against" "torch tok/s" "speed-up"
    for k in greedy beam4; do
        for p in fp32 bf16 int8; do
            tp=$([ $p = bf16 ] && echo bf16 || echo fp32)
            o=$(grep "decode $k .*# $p," "$out"); tt=$(echo "$t" | grep "decode $k .*cpu, $tp\$")
            a=$(value "$o" tokens_per_s); b=$(value "$tt" tokens_per_s)
            printf '%-7s | %-9s | %12s | %-12s %12s | %9s\n' $k "ours $p" "$a" "PyTorch $tp" "${b:-no ratio}" "$(ratio "$a" "$b")"
        done
    done
fi
[ $anchor = 1 ] || echo "$refusal"
