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
# Then every kernel of one step (bench_train --steps 1 --warmup 0 --no-peak), its duration only
# (one pass, no replay) with the caches as the step leaves them, summed by kernel name: where
# the op profile's time goes inside an op (the sort before the embedding's backward, which of
# cuBLASLt's kernels each product took, split-K's reductions). NCU_STEP_TOP: rows shown (30).
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

echo "=== every kernel of one base bf16 step, by name"
csv=$(mktemp)
"$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
    "$BUILD/bench_train" --device cuda --precision bf16 --config base --tokens 25000 --steps 1 --warmup 0 --no-peak \
    > "$csv" 2>&1
rc=$?
grep '^ours' "$csv"
${PYTHON:-python3} - "$csv" "${NCU_STEP_TOP:-30}" << 'EOF' || { echo "ncu_kernels: no kernel durations read (ncu exit $rc)"; status=1; }
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
head = next((i for i, r in enumerate(rows) if "Kernel Name" in r and "Metric Value" in r), None)
if head is None:
    sys.exit(1)
name, value = rows[head].index("Kernel Name"), rows[head].index("Metric Value")
total, by_name = 0.0, {}
for r in rows[head + 1:]:
    if len(r) != len(rows[head]):
        continue
    ns = float(r[value].replace(",", ""))
    n, t = by_name.get(r[name], (0, 0.0))
    by_name[r[name]] = (n + 1, t + ns)
    total += ns
print(f"{sum(n for n, _ in by_name.values())} launches, {total / 1e6:.2f} ms of kernels (ncu's durations, one at a time)")
print(f"{'ms':>8} {'share':>6} {'launches':>8}  kernel")
for k, (n, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[: int(sys.argv[2])]:
    print(f"{t / 1e6:8.3f} {100 * t / total:5.1f}% {n:8d}  {k[:150]}")
EOF
rm -f "$csv"
exit $status
