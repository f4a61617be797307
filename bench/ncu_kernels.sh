#!/bin/sh
# bench/ncu_kernels.sh [BUILD] — why the base step's slowest hand-written kernels take the time
# they take: Nsight Compute (ncu) reads the hardware counters of one launch of each, in one
# bf16 training step of the base model at the paper's batch (build/bench_train --steps 1, 25,000
# + 25,000 tokens). Per kernel: duration, memory and compute throughput against the peaks
# (SpeedOfLight), theoretical and achieved occupancy and what limits it (Occupancy, LaunchStats:
# registers, shared memory, grid), and where the warps wait (WarpStateStats). make gpu-check runs
# it after the benchmarks; the bench_train --profile table says which kernels are worth it.
#   NCU_KERNELS  the kernels, as regular expressions over their names (default below)
#   NCU          the ncu binary (default: ncu on PATH, else the newest under /opt/nvidia/nsight-compute)
# Clocks are left as they are (--clock-control none, as the device notes ask). Without ncu, or
# where it cannot read the counters (a gVisor machine), it prints SKIP and why, and exits 0.
set -u
BUILD=${1:-build}
NCU=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | sort -V | tail -n 1)}
# the base step's slowest hand-written kernels on 2026-11-27's H100 profile (a run takes ~15 s)
KERNELS=${NCU_KERNELS:-"attention_forward_fused attention_backward_query_fused attention_backward_key_fused
layernorm_backward_fused crossentropy_forward_backward embedding_backward_kernel"}
[ -n "$NCU" ] || { echo "SKIP ncu_kernels: no ncu on PATH (Nsight Compute)"; exit 0; }
[ -x "$BUILD/bench_train" ] || { echo "ncu_kernels: no $BUILD/bench_train (make $BUILD/bench_train)"; exit 1; }
status=0
for k in $KERNELS; do
    echo "=== $k"
    out=$("$NCU" --clock-control none --kernel-name "regex:$k" --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        "$BUILD/bench_train" --device cuda --precision bf16 --config base --tokens 25000 --steps 1 2>&1)
    rc=$?
    # ncu's report lines (==PROF== and the sections), not the benchmark's own output
    printf '%s\n' "$out" | grep -v -E '^(ours|# )'
    if printf '%s\n' "$out" | grep -q -E 'LibraryNotLoaded|ERR_NVGPUCTRPERM|not supported'; then
        echo "SKIP ncu_kernels: ncu cannot read this machine's counters"
        exit 0
    fi
    printf '%s\n' "$out" | grep -q 'Duration' || { echo "ncu_kernels: no launch of $k profiled (exit $rc)"; status=1; }
done
exit $status
