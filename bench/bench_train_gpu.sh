#!/bin/sh
# bench/bench_train_gpu.sh [BUILD] — training speed on the GPU (make bench DEVICE=cuda; make
# gpu-check runs it): ours (build/bench_train, bf16) against test/reference.py's model in
# PyTorch on the same GPU in the same run, eager under bf16 autocast and torch.compile of it
# (bench/bench_torch.py train --device cuda), the same config and the same synthetic batch:
# pairs of 25 + 25 tokens, TOKENS (default 25,000, the paper's batch) source tokens a step;
# each side the median of STEPS (10) steps after WARMUP_STEPS (3) warm-up steps, both given the
# same counts; each reports its counts, and a line under the table compares them ("the same
# warm-up" or "WARM-UPS DIFFER ...: no fair ratio").
# Prints a table (ms a step, tokens/s counting both sides, ours' MFU against the dense bf16
# peak and against the large product it times, peak GPU memory, PyTorch's time over ours) and,
# last, one line per config:
#   ours train CONFIG bf16: N tokens/s, MFU a% (b% of measured), X.XXx PyTorch eager, Y.YYx torch.compile
# Issue 10's targets on an H100: base-model MFU >= 50%, >= 1.5x eager, >= 1.1x torch.compile.
#   BENCH_CONFIGS   the configs (default "base big")
#   TOKENS          source tokens a step (default 25000)
#   STEPS           timed steps, each side (default 10; test_gpu_bench.sh: 1)
#   WARMUP_STEPS    untimed steps before them, each side (default 3; test_gpu_bench.sh: 0)
#   BENCH_TRAIN_ARGS more options for build/bench_train (test_gpu_bench.sh: --no-peak)
#   PYTHON          the interpreter with a CUDA PyTorch (default python3)
# Without a GPU it prints SKIP and why, and exits 0.
set -u
BUILD=${1:-build}
TOKENS=${TOKENS:-25000}
STEPS=${STEPS:-10}
WARMUP_STEPS=${WARMUP_STEPS:-3}
. bench/gpu_env.sh   # PY, value, ratio, gpu_env
percent() { [ -n "$1" ] && awk "BEGIN { printf \"%.1f%%\", 100 * $1 }" || echo "-"; }
row() { printf '%-6s | %-22s | %9s | %11s | %10s | %10s | %9s | %s\n' "$@" >> "$tmp/table"; }
counts() { echo "$1" | sed -n 's/.*, \([0-9]* warm-up steps, the median of [0-9]*\)$/\1/p'; }   # of a result line

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gpu_env bench_train_gpu
summary=""
row config side "ms/step" "tokens/s" "MFU (989)" "MFU (meas.)" "GPU MB" "PyTorch time / ours"
for c in ${BENCH_CONFIGS:-base big}; do
    "$BUILD/bench_train" --device cuda --precision bf16 --config "$c" --tokens "$TOKENS" --warmup "$WARMUP_STEPS" \
        --steps "$STEPS" ${BENCH_TRAIN_ARGS:-} > "$tmp/ours.txt" 2>&1
    ours=$(grep -h "^ours train $c " "$tmp/ours.txt")
    [ -n "$ours" ] || { echo "# ours $c failed: $(tail -n 1 "$tmp/ours.txt")"; continue; }
    oms=$(value "$ours" ms_per_step)
    if [ $torch_ok = 1 ]; then
        $PY bench/bench_torch.py train --device cuda --configs "$c" --tokens "$TOKENS" --warmup-steps "$WARMUP_STEPS" \
            --steps "$STEPS" > "$tmp/torch.txt" 2>&1 ||
            echo "# PyTorch $c failed: $(tail -n 1 "$tmp/torch.txt")"
        [ -s "$tmp/torch-env" ] || grep -h '^# torch' "$tmp/torch.txt" > "$tmp/torch-env"
    fi
    row "$c" "ours bf16" "$oms" "$(value "$ours" tokens_per_s)" "$(percent "$(value "$ours" mfu_dense)")" \
        "$(percent "$(value "$ours" mfu_measured)")" "$(value "$ours" peak_gpu_mb)" ""
    line="ours train $c bf16: $(value "$ours" tokens_per_s) tokens/s, MFU $(percent "$(value "$ours" mfu_dense)") ($(percent "$(value "$ours" mfu_measured)") of measured)"
    differ=""
    for mode in eager compile; do
        t=$(grep -h "^torch train $c-$mode " "$tmp/torch.txt" 2> /dev/null)
        name="PyTorch $mode"
        [ $mode = compile ] && name="torch.compile"
        if [ -z "$t" ]; then
            row "$c" "$name" - - - - - "not run"
            line="$line, no ratio to $name"
            continue
        fi
        [ "$(counts "$t")" = "$(counts "$ours")" ] || differ="$differ, $name's ($(counts "$t" | grep . || echo unknown))"
        tms=$(value "$t" ms_per_step)
        row "$c" "$name" "$tms" "$(value "$t" tokens_per_s)" - - "$(value "$t" peak_gpu_mb)" "$(ratio "$tms" "$oms")"
        line="$line, $(ratio "$tms" "$oms") $name"
    done
    summary="$summary$line
"
    if [ -z "$differ" ]; then
        echo "#   $c: the same warm-up for every side that ran: $(counts "$ours" | grep . || echo unknown)" >> "$tmp/notes"
    else
        echo "#   $c: WARM-UPS DIFFER from ours' ($(counts "$ours")): ${differ#, }: no fair ratio" >> "$tmp/notes"
    fi
done
cat "$tmp/torch-env" "$tmp/table" "$tmp/notes" 2> /dev/null
echo
printf '%s' "$summary"
