#!/usr/bin/env bash
# bench/bench_dist.sh — data-parallel training (toolkit/distributed.h), measured and on paper.
#
# Usage (from the repository root, after `make`): bench/bench_dist.sh [PROGRAM_DIR]
#   STEPS=12 MAX_TOKENS=2000 CONFIG=small   the measured runs (defaults shown)
#
# 1. Measured, on this machine's CPU, the default corpus: the same global step (2 batches of
#    MAX_TOKENS) three ways: one process with --accum 2 and 1 thread, 2 MPI ranks with 1 thread
#    each, and one process with --accum 2 and 2 threads (the single-process way to use 2 cores).
#    Step time from log.csv (the mean of steps 3..STEPS), the all-reduce's own time as ./train
#    reports it, and whether the 2-rank run's parameters are bitwise the 1-process run's.
#    On 2 cores this checks that the ranks overlap (each computes on its own core), not a
#    speed-up worth having: 2 threads in one process use the same 2 cores.
# 2. On paper: the gradient all-reduce of the base and big configs on 8 GPUs over NVLink 4 and
#    InfiniBand NDR, against step times that are stated assumptions (the CUDA backend has not
#    run on a GPU, so no GPU step time of ours exists).
set -euo pipefail
B=${1:-.}
STEPS=${STEPS:-12}
MAX_TOKENS=${MAX_TOKENS:-2000}
CONFIG=${CONFIG:-small}
DATA=data/corpus/default

if ! command -v mpirun > /dev/null || ! ldd "$B/train" | grep -q libmpi; then
    echo "bench_dist: SKIP the measured part: mpirun not found or $B/train built without MPI (make info)"
    MEASURE=0
elif [ ! -r "$DATA/train.en" ]; then
    echo "bench_dist: SKIP the measured part: no $DATA (make data)"
    MEASURE=0
else
    MEASURE=1
fi

if [ $MEASURE = 1 ]; then
    echo "# CPU: $(sh "$(dirname "$0")/cpu_name.sh"); $(nproc) cores; load average $(cut -d' ' -f1 /proc/loadavg)"
    echo "# $(mpirun --version | head -1); config $CONFIG, 2 batches of <= $MAX_TOKENS + $MAX_TOKENS padded tokens per step, $STEPS steps"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    A="--config $CONFIG --max-tokens $MAX_TOKENS --max-steps $STEPS --log-every 0 --save-every 0 --eval-every 0
       --no-eval --average 0 --time 0"
    # step_ms OUT: mean seconds per step over steps 3..STEPS from log.csv's elapsed column, in ms.
    step_ms() { grep '^train,' "$1/log.csv" | awk -F, -v n="$STEPS" '$2 == 2 { a = $9 } $2 == n { b = $9 } END { printf "%.0f", 1000 * (b - a) / (n - 2) }'; }
    run() {  # run NAME THREADS LAUNCH...: one run, its log in $tmp/NAME.log
        name=$1 threads=$2; shift 2
        OMP_NUM_THREADS=$threads "$@" $A --out "$tmp/$name" > "$tmp/$name.log" 2>&1 \
            || { echo "bench_dist: $name failed:"; tail -5 "$tmp/$name.log"; exit 1; }
    }
    mkdir "$tmp/corpus"   # the training text alone: no dev loss at the end
    cp "$DATA"/train.en "$DATA"/train.es "$tmp/corpus"
    A="$A --data $tmp/corpus"
    run one1 1 "$B/train" --accum 2
    run two 1 mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS -np 2 "$B/train"
    run one2 2 "$B/train" --accum 2
    t11=$(step_ms "$tmp/one1"); t2=$(step_ms "$tmp/two"); t12=$(step_ms "$tmp/one2")
    reduce=$(grep -o 'all-reduces of [0-9.]* MB, [0-9.]* ms each' "$tmp/two.log" || echo "?")
    same=$(python3 test/same_tensors.py "$tmp/one1/ckpt-$(printf %08d "$STEPS").safetensors" \
           "$tmp/two/ckpt-$(printf %08d "$STEPS").safetensors" 2>&1 || true)
    echo
    echo "| run (same global step: 2 batches) | cores used | ms per step | vs 1 process, 1 thread |"
    echo "|---|---|---|---|"
    awk -v a="$t11" -v b="$t2" -v c="$t12" 'BEGIN {
        printf "| 1 process, --accum 2, 1 thread | 1 | %d | 1.00x |\n", a
        printf "| mpirun -np 2, 1 thread each | 2 | %d | %.2fx |\n", b, a / b
        printf "| 1 process, --accum 2, 2 threads | 2 | %d | %.2fx |\n", c, a / c }'
    echo
    echo "2 ranks: $reduce (MPI_Allreduce, shared memory, with the wait for the slower rank)"
    echo "2 ranks vs 1 process after $STEPS steps: $same"
fi

# ---- On paper: 8 GPUs -----------------------------------------------------------------------
echo
echo "# On paper: one ring all-reduce of the fp32 gradient per step on 8 GPUs; each GPU sends and"
echo "# receives 2(N-1)/N x 4 bytes x parameters. NVLink 4 (H100 SXM): 900 GB/s bidirectional,"
echo "# 450 GB/s each way; InfiniBand NDR: 400 Gb/s = 50 GB/s each way (8 machines, one GPU and"
echo "# one NDR port each). Step times are assumptions, not measurements: (a) the paper's on 8"
echo "# P100s (base 0.4 s, big 1.0 s); (b) H100 at 40% of its 989 TFLOP/s dense bf16 peak on"
echo "# 6 x parameters x 6,250 tokens per GPU per step (25,000 + 25,000 tokens over 8 GPUs)."
echo "# The all-reduce runs after the whole backward pass (no buckets), so it never overlaps it:"
echo "# its time adds to the step's."
awk 'function params(d, ff, n, V,   enc, dec) {
        enc = 4 * d * d + 4 * d + 2 * d * ff + ff + d + 4 * d      # attention, FFN, 2 norms
        dec = 2 * (4 * d * d + 4 * d) + 2 * d * ff + ff + d + 6 * d
        return n * (enc + dec) + V * d }
    BEGIN {
        N = 8; ring = 2 * (N - 1) / N; nvlink = 450e9; ib = 50e9; tokens = 6250; flops = 0.4 * 989e12
        printf "\n| config | parameters | MB per step | ring bytes per GPU | NVLink 4 | InfiniBand NDR | step (a) P100 | step (b) H100 est. | all-reduce share (a) NVLink / IB | (b) NVLink / IB |\n"
        printf "|---|---|---|---|---|---|---|---|---|---|\n"
        split("base big", name, " "); split("512 1024", d, " "); split("2048 4096", ff, " "); split("0.4 1.0", pa, " ")
        for (i = 1; i <= 2; i++) {
            p = params(d[i], ff[i], 6, 37000); bytes = 4 * p
            tn = ring * bytes / nvlink; ti = ring * bytes / ib
            tb = 6 * p * tokens / flops
            printf "| %s | %.1f M | %.0f | %.0f MB | %.2f ms | %.1f ms | %.0f ms | %.1f ms | %.1f%% / %.1f%% | %.0f%% / %.0f%% |\n",
                name[i], p / 1e6, bytes / 1e6, ring * bytes / 1e6, 1e3 * tn, 1e3 * ti, 1e3 * pa[i], 1e3 * tb,
                100 * tn / (pa[i] + tn), 100 * ti / (pa[i] + ti), 100 * tn / (tb + tn), 100 * ti / (tb + ti)
        } }'
echo
echo "(share = all-reduce / (compute + all-reduce), since they do not overlap; bandwidths are peak"
echo " link rates: NCCL reaches a fraction of them, so real shares are larger.)"
