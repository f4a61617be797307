#!/bin/bash
# test/test_gpu_check.sh — make gpu-check's plan, checked here without a GPU through its dry run
# (GPU_CHECK_DRY=1: every step listed in order, none run, each "taking" GPU_CHECK_DRY_STEP
# seconds of a counted clock): the order the issues need (the tests, then the sanitizers, then
# the benchmarks, the training run and the translations, the diagnostics last), racecheck
# leaving the library kernels out and running test_cuda's parts that it knows, the sanitizer
# steps side by side (SANITIZE_JOBS), GPU_CHECK_SKIP, a time budget that cuts and leaves steps (exit status 3), a
# second call that skips what the first finished, and the state carried to a fresh machine,
# which builds again and trains again because their outputs are not there. Runs in a temporary
# folder. Ends with "gpu_check: N passed, M failed".
#   bash test/test_gpu_check.sh [BUILD_DIR]   (default build)
set -u
. test/check.sh
BUILD=${1:-build}             # where test_cuda is (make test-asan: build/asan)
SCRIPT=$PWD/test/gpu_check.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# dry DIR OUTPUT [VAR=VALUE...]: one dry call of gpu_check.sh in DIR; its exit status in $T/rc.
dry() {
    local dir=$1 out=$2
    shift 2
    mkdir -p "$dir"
    (cd "$dir" && env GPU_CHECK_DRY=1 "$@" bash "$SCRIPT" > "$out" 2>&1; echo $? > "$T/rc")
}
started() { grep -E '^=== [a-z0-9-]+: ' "$1" | grep -vE ': (finished|not started|cut at|SKIP)' | sed -E 's/^=== ([a-z0-9-]+): .*/\1/'; }
line_of() { started "$1" | grep -nx "$2" | cut -d: -f1; }   # line_of OUTPUT STEP: its place in the order

# 1. The whole plan, no budget.
dry "$T/a" "$T/a.txt"
[ "$(cat "$T/rc")" = 0 ] && grep -q '^gpu-check: 0 step(s) failed' "$T/a.txt"
check $? "a dry run of every stage ends with status 0, nothing failed ($(tail -n 1 "$T/a.txt"))"
order_ok=1
for pair in "model memcheck-ops" "cli-cuda memcheck-ops" "racecheck-model-decode-profile bench-base-bf16" \
            "bench-vs-torch train" "train gpu-fp32-beam1" "bleu-beam4 bench-decode" "bench-decode ncu-kernels" \
            "bench-decode bench-attention"; do
    set -- $pair
    a=$(line_of "$T/a.txt" "$1") b=$(line_of "$T/a.txt" "$2")
    { [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]; } || { order_ok=0; echo "  $1 (${a:-absent}) is not before $2 (${b:-absent})"; }
done
[ $order_ok = 1 ]
check $? "order: the tests, then the sanitizers, then the benchmark tables, train, translate, bench-decode, the diagnostics last"
n=$(started "$T/a.txt" | wc -l)
[ "$n" -ge 40 ]
check $? "every step is listed ($n)"
grep -E '^=== racecheck-' "$T/a.txt" | grep -v -- '--kernel-name-exclude regex=.*gemm' > /dev/null
[ $? -ne 0 ] && [ "$(grep -c '^=== racecheck-' "$T/a.txt")" -eq 9 ]
check $? "the 9 racecheck steps leave cuBLASLt's and CUB's kernels out (--kernel-name-exclude)"
# test_cuda's parts under racecheck: each one test_cuda knows (with no device visible it says
# SKIP and exits 0; a part it does not know exits 2), and together every part but the loss curve
parts=$(grep -E '^=== racecheck-model-' "$T/a.txt" | sed -E 's/.*--part ([a-z-]+).*/\1/' | sort | tr '\n' ' ')
no_device() { env -u TRANSFORMER_CUDA_EMULATOR CUDA_VISIBLE_DEVICES= "$BUILD/test_cuda" "$@" > /dev/null 2>&1; }
known=1
for p in $parts; do no_device --sanitize --part "$p" || { known=0; echo "  test_cuda refuses --part $p"; }; done
no_device --part no-such-part
[ $? = 2 ] && [ $known = 1 ] && [ "$parts" = "alone decode-profile ensemble reference resume step step-profile " ]
check $? "racecheck runs test_cuda --sanitize over its 7 parts but the curve, each known to it ($parts)"
! grep -E '^=== memcheck-' "$T/a.txt" | grep -q -- --kernel-name-exclude
check $? "memcheck checks every kernel (the library's too: our arguments reach them)"
[ -f "$T/a/.gpu-check/out/state" ] && [ -f "$T/a/.gpu-check/out/summary.txt" ] && [ -f "$T/a/.gpu-check/out/logs.tar.gz" ]
check $? "LOG_DIR receives summary.txt, logs.tar.gz and the state"
! grep -qE ' ok +[0-9]+s' "$T/a/.gpu-check/out/summary.txt" && grep -qE ' dry +[0-9]+s' "$T/a/.gpu-check/out/summary.txt"
check $? "a dry run's summary says dry, never ok"

# The sanitizer steps run side by side (SANITIZE_JOBS at a time, 9 by default): 4 memchecks, then
# 9 racechecks; one at a time with SANITIZE_JOBS=1.
n=$(grep -cE '^=== (memcheck|racecheck)-.*\(one of a batch of up to 9 side by side\)$' "$T/a.txt")
[ "$n" -eq 13 ] && grep -qE '^memcheck-ops +dry +10s' "$T/a/.gpu-check/out/summary.txt"
check $? "the 13 sanitizer steps run in batches side by side, each batch taking its longest step's time ($n)"
# gpu, the 4 memchecks and 4 racechecks take 180 s; the fifth starts with 20 s left and is cut
dry "$T/j" "$T/j.txt" GPU_CHECK_DRY_STEP=20 GPU_CHECK_SECONDS=200 SANITIZE_JOBS=1 STAGES="sanitize"
grep -q 'left for the next call (GPU_CHECK_CONTINUE=1): racecheck-model-step-profile ' "$T/j.txt" &&
    [ "$(grep -c 'one of a batch of up to 1 side by side' "$T/j.txt")" -eq 9 ]
check $? "SANITIZE_JOBS=1: one sanitizer step at a time, so 200 s end within racecheck ($(grep -o 'GPU_CHECK_CONTINUE=1): [a-z-]*' "$T/j.txt"))"
# GPU_CHECK_SKIP: the steps it names (globs) say SKIP and are not recorded as finished.
dry "$T/s" "$T/s.txt" GPU_CHECK_SKIP="memcheck-* gpu-bf16-*" STAGES="sanitize train translate"
[ "$(grep -c '^=== [a-z0-9-]*: SKIP (GPU_CHECK_SKIP=' "$T/s.txt")" -eq 6 ] &&
    ! grep -qE '^(memcheck-|gpu-bf16-)' "$T/s/.gpu-check/state" && grep -q '^racecheck-ops	' "$T/s/.gpu-check/state" &&
    grep -q '^bench-decode	' "$T/s/.gpu-check/state"
check $? "GPU_CHECK_SKIP=\"memcheck-* gpu-bf16-*\": those 6 steps SKIP, unrecorded; the others run"

# GPU_CHECK_SANITIZE_LAST=1 (the next session's call): the training run and bench-decode first,
# then the sanitizer steps with the rest of the budget, before the diagnostics.
dry "$T/l" "$T/l.txt" GPU_CHECK_SANITIZE_LAST=1 GPU_CHECK_SKIP="memcheck-* racecheck-ops gpu-* cpu-* bleu-*" \
    STAGES="build sanitize train translate diagnose"
a=$(line_of "$T/l.txt" train) b=$(line_of "$T/l.txt" bench-decode) c=$(line_of "$T/l.txt" racecheck-ops-bf16)
d=$(line_of "$T/l.txt" racecheck-model-decode-profile) e=$(line_of "$T/l.txt" ncu-kernels)
[ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] && [ -n "$d" ] && [ -n "$e" ] && [ "$a" -lt "$b" ] && [ "$b" -lt "$c" ] &&
    [ "$d" -lt "$e" ] && [ "$(grep -c '^=== racecheck-' "$T/l.txt")" -eq 9 ] && [ "$(cat "$T/rc")" = 0 ]
check $? "GPU_CHECK_SANITIZE_LAST=1: train ($a), bench-decode ($b), then the racechecks ($c-$d), the diagnostics after ($e)"
# The budget cuts that batch: each cut step a LEFT line in summary.txt, none in the state.
dry "$T/m" "$T/m.txt" GPU_CHECK_SANITIZE_LAST=1 GPU_CHECK_SKIP="memcheck-* racecheck-ops gpu-* cpu-* bleu-*" \
    STAGES="build sanitize train translate" GPU_CHECK_DRY_STEP=110 GPU_CHECK_SECONDS=500
[ "$(cat "$T/rc")" = 3 ] && [ "$(grep -c '^racecheck-[a-z0-9-]* *LEFT .*cut at the budget' "$T/m/.gpu-check/out/summary.txt")" -eq 8 ] &&
    grep -q '^bench-decode  *dry ' "$T/m/.gpu-check/out/summary.txt" && ! grep -q '^racecheck-' "$T/m/.gpu-check/state"
check $? "a budget that cuts the racechecks: exit status 3, 8 LEFT lines in summary.txt, none in the state, bench-decode done"

# 2. A budget: gpu, build and the 8 tests (20 s each), the memchecks, then the racechecks (20 s a
# batch) fit 250 s; the rest is left, exit status 3.
dry "$T/b" "$T/b1.txt" GPU_CHECK_DRY_STEP=20 GPU_CHECK_SECONDS=250
rc=$(cat "$T/rc")
[ "$rc" = 3 ] && grep -q 'left for the next call (GPU_CHECK_CONTINUE=1): bench-base-bf16 ' "$T/b1.txt" &&
    grep -q '^=== translate, bench-decode: wait for train' "$T/b1.txt"
check $? "a 250 s budget: exit status 3, the benchmarks left, the translations wait for train (status $rc)"
cp "$T/b/.gpu-check/out/state" "$T/state1"   # what the first call brought back
# 3. The next call on the same (warm) machine: the build is there, so only what was left runs.
mkdir -p "$T/b/build" && touch "$T/b/build/libtransformer_cuda.so"
dry "$T/b" "$T/b2.txt" GPU_CHECK_CONTINUE=1 GPU_CHECK_DRY_STEP=20
[ "$(cat "$T/rc")" = 0 ] && grep -q '^=== build: finished in an earlier call$' "$T/b2.txt" &&
    [ "$(started "$T/b2.txt" | head -n 1)" = bench-base-bf16 ] && [ "$(line_of "$T/b2.txt" train)" != "" ]
check $? "GPU_CHECK_CONTINUE=1 on a warm machine: finished steps skipped, the first run is bench-base-bf16 ($(started "$T/b2.txt" | head -n 1))"
[ "$(grep -c ' finished in an earlier call$' "$T/b2.txt")" -eq 23 ]
check $? "the 23 steps of the first call are carried over ($(grep -c ' finished in an earlier call$' "$T/b2.txt"))"

# 4. A call's state carried to a fresh machine: no build, no model there.
mkdir -p "$T/c/.gpu-check" && cp "$T/state1" "$T/c/.gpu-check/state"
dry "$T/c" "$T/c.txt" GPU_CHECK_CONTINUE=1 GPU_CHECK_DRY_STEP=20
[ "$(started "$T/c.txt" | head -n 2 | tr '\n' ' ')" = "build bench-base-bf16 " ] && ! started "$T/c.txt" | grep -qx ops-fp32
check $? "the state carried to a fresh machine: it builds again, skips the finished tests, goes on ($(started "$T/c.txt" | head -n 2 | tr '\n' ' '))"
mkdir -p "$T/d/.gpu-check" && cp "$T/b/.gpu-check/out/state" "$T/d/.gpu-check/state"   # the second call's: train finished
dry "$T/d" "$T/d.txt" GPU_CHECK_CONTINUE=1 STAGES="train translate"
started "$T/d.txt" | grep -qx train && grep -q 'train: finished in an earlier call, but .gpu-check/run/average.safetensors is not here' "$T/d.txt"
check $? "a finished training run whose model is gone runs again before the translations"

check_summary gpu_check
