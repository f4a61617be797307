#!/bin/sh
# bench/bench.sh train|decode BUILD_DIR — ours against the PyTorch reference, same machine,
# same run: prints each side's figures and the speed ratio (PyTorch time / our time).
# PyTorch runs at its best here: 2 threads, OpenMP OpenBLAS, tcmalloc, OPENBLAS_CORETYPE unset.
set -u
MODE=$1
BUILD=${2:-build}
. bench/torch_env.sh   # PY, TORCH
out=$(mktemp)
trap 'rm -f "$out"' EXIT
value() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

echo "# $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
if [ "$MODE" = train ]; then
    printf '%-6s | %12s %12s | %12s %12s | %9s | %7s | %15s\n' config "ours ms" "torch ms" "ours tok/s" "torch tok/s" "speed-up" GFLOP/s "peak MB ours/pt"
    for c in tiny small base; do
        o=$("$BUILD/bench_train" --config $c) || exit 1
        if $PY -c 'import torch' 2>/dev/null; then t=$($TORCH $PY bench/bench_torch.py train --configs $c | grep '^torch train'); else t=""; fi
        oms=$(value "$o" ms_per_step); tms=$(value "$t" ms_per_step)
        ratio=$( [ -n "$tms" ] && awk "BEGIN { printf \"%.2fx\", $tms / $oms }" || echo "n/a")
        printf '%-6s | %12s %12s | %12s %12s | %9s | %7s | %15s\n' $c "$oms" "${tms:-n/a}" "$(value "$o" tokens_per_s)" \
            "$(value "$t" tokens_per_s)" "$ratio" "$(value "$o" matmul_gflops)" "$(value "$o" peak_rss_mb)/$(value "$t" peak_rss_mb)"
    done
else
    "$BUILD/bench_decode" --precision fp32 > "$out" || exit 1
    "$BUILD/bench_decode" --precision int8 >> "$out" || exit 1
    t=""
    $PY -c 'import torch' 2>/dev/null && t=$($TORCH $PY bench/bench_torch.py decode | grep '^torch decode')
    printf '%-7s | %-9s | %12s %12s | %9s\n' search precision "ours tok/s" "torch tok/s" "speed-up"
    for k in greedy beam4; do
        for p in fp32 int8; do
            o=$(grep "decode $k .*# $p," "$out"); tt=$(echo "$t" | grep "decode $k ")
            a=$(value "$o" tokens_per_s); b=$(value "$tt" tokens_per_s)
            ratio=$( [ -n "$b" ] && awk "BEGIN { printf \"%.2fx\", $a / $b }" || echo "n/a")
            printf '%-7s | %-9s | %12s %12s | %9s\n' $k "ours $p" "$a" "${b:-n/a}" "$ratio"
        done
    done
fi
