#!/bin/bash
# test/gpu_check.sh — the first and only command to run on a machine with a GPU (make
# gpu-check): builds for sm_90 from a clean tree, runs the GPU tests (every op against float64
# and against the CPU in fp32 and bf16, then the whole model: test_cuda; the programs with
# --device cuda: test_cli_cuda.sh), compute-sanitizer (memcheck and racecheck) over the GPU
# tests, the GPU training benchmark against PyTorch (with a per-op profile), ./train with its
# defaults on the default corpus (2 minutes on the GPU), ./translate on the GPU against the CPU
# and the GPU decoding benchmark, then the measurements that say where a step's time goes (ncu,
# tuned products, the classifier's chunks, the attention kernels alone); prints a summary table
# last. The order is what resolving the GPU issues needs first: tests, sanitizers, the
# benchmark tables, the training run and the translations; the diagnostics last.
#
#   LOG_DIR=/some/folder make gpu-check     (in a device call: LOG_DIR=$OUT)
#   STAGES="build tests" make gpu-check     (a subset of: build tests sanitize bench train
#                                            translate diagnose; all by default, in that order;
#                                            and, asked for by name, bench-kernels: the base
#                                            step with the other attention kernels, and
#                                            train-base: the base model, dropout 0.3, for the
#                                            same time, to weigh against the default small one)
#   MODEL=runs/default/average.safetensors  (translate this model instead of the 2-minute one)
#   GPU_CHECK_TRAIN_TIME=1m                 (the training step's --time; unset: ./train's own
#                                            budget on the GPU, 2 minutes for the default model)
#   GPU_CHECK_SECONDS=540 make gpu-check    (a time budget: no step starts after it, a step
#                                            that would run past it is cut and left for later)
#   GPU_CHECK_CONTINUE=1 make gpu-check     (the next call: skips the steps an earlier call
#                                            finished, as .gpu-check/state says)
#   GPU_CHECK_DRY=1 [GPU_CHECK_DRY_STEP=30] (runs nothing: lists the steps in order as if each
#                                            took that many seconds, budget and state included)
#   GPU_CHECK_SKIP="memcheck-* gpu-bf16-*"  (the steps these globs name say SKIP and stay
#                                            unfinished: a short call spent on what is missing)
#   SANITIZE_JOBS=9                         (compute-sanitizer steps run this many at a time,
#                                            side by side: the memchecks, then the racechecks;
#                                            1: one after another)
#   GPU_CHECK_SANITIZE_LAST=1               (the sanitizer steps after the translations and
#                                            bench-decode instead of after the tests: a call
#                                            that owes both spends what is left on racecheck)
# A device call may run 10 minutes: run `GPU_CHECK_SECONDS=540 LOG_DIR=$OUT make gpu-check`, then
# the same with GPU_CHECK_CONTINUE=1 while it says steps are left (exit status 3), each call
# soon after the last (the machine stays warm only briefly). Every step's log, the 2-minute
# model and the translations stay on the machine between calls, in .gpu-check/ (ignored by git;
# a device call empties $OUT before each command); after every step and at the end of each call
# (a SIGTERM included) $LOG_DIR (default .gpu-check/out) receives summary.txt (steps the budget
# cut or left say LEFT), logs.tar.gz and state (three files, since a device call brings back at
# most 8 from $OUT), so that a call killed at its timeout_s still brings back what it did. If
# the machine went cold between calls, copy that state to .gpu-check/state here and carry it
# with GPU_CHECK_CONTINUE=1: the fresh machine skips what was finished, but builds again and
# trains again where the build or the model is missing. The default corpus cannot be built on a
# machine without Debian's package archive: carry data/corpus (built here by `make data`) with
# the working tree, or the training step says SKIP. What a GPU machine's image lacks is left out, not a failure: cpp-httplib (./translate
# is built without --serve), MPI, CTranslate2 (carry its wheel in .whl: `make gpu-pack`
# prepares both and prints the calls).
set -u
WORK=.gpu-check               # kept between calls: the state, the logs, the model, the translations
[ "${GPU_CHECK_CONTINUE:-0}" = 1 ] || rm -rf "$WORK"
LOGS=$WORK/logs               # one log per step
mkdir -p "$LOGS"
LOG_DIR=${LOG_DIR:-$WORK/out}
mkdir -p "$LOG_DIR"
JOBS=$(nproc)
DRY=${GPU_CHECK_DRY:-0}       # 1: list the steps, run none (each "takes" GPU_CHECK_DRY_STEP seconds)
DRY_STEP=${GPU_CHECK_DRY_STEP:-10}
export PYTHON=${PYTHON:-python3}   # the one with a CUDA PyTorch, for every script below
failed=0
left=()                       # steps the time budget left for the next call
clock=0                       # a dry run's seconds so far
now() { [ "$DRY" = 1 ] && echo "$clock" || date +%s; }
START=$(now)                  # the budget counts from here, the wheel's install included
BUDGET=${GPU_CHECK_SECONDS:-0}
# CTranslate2 carried as a wheel (make gpu-pack): installed beside the machine's packages.
if [ "$DRY" != 1 ] && ls .whl/ctranslate2-*.whl > /dev/null 2>&1; then
    $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/ct2-site \
        .whl/*.whl > "$LOGS/ct2-install.log" 2>&1 && export CT2_PYTHON="env PYTHONPATH=/tmp/ct2-site $PYTHON"
fi
SUMMARY=$WORK/summary.txt
STATE=$WORK/state             # "name<TAB>summary line" of every finished step, across calls
touch "$STATE"
: > "$SUMMARY"
# The summary, the state and every log so far (this call's and the earlier ones') to $LOG_DIR:
# after every step (a call killed at its timeout_s, past any trap, still brings them back) and
# on every exit. The archive is made in $WORK and copied, so a kill while it is written leaves
# the last whole one in $LOG_DIR.
save_out() {
    cp "$SUMMARY" "$LOG_DIR/summary.txt"
    cp "$STATE" "$LOG_DIR/state"
    tar czf "$WORK/logs.tar.gz" -C "$WORK" logs 2> /dev/null && cp "$WORK/logs.tar.gz" "$LOG_DIR/logs.tar.gz"
}
trap save_out EXIT
STEP_TIMEOUT=${STEP_TIMEOUT:-1800}   # seconds one step may take (a hung kernel ends there)
STAGES=${STAGES:-build tests sanitize bench train translate diagnose}
want() { [[ " $STAGES " == *" $1 "* ]]; }   # want STAGE: is it among those asked for?
M=${MODEL:-$WORK/run/average.safetensors}    # the model the translation steps take
# What a finished step left that later steps need: a step whose output is gone (a machine that
# went cold between calls, its state carried over) is not finished.
declare -A OUTPUT=([build]=build/libtransformer_cuda.so [train]=$WORK/run/average.safetensors)

# finished_before NAME: an earlier call finished it (its summary line is carried over).
finished_before() {
    local line
    line=$(awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$STATE" | tail -n 1)
    [ -n "$line" ] || return 1
    if [ -n "${OUTPUT[$1]-}" ] && [ ! -e "${OUTPUT[$1]}" ]; then
        echo "=== $1: finished in an earlier call, but ${OUTPUT[$1]} is not here (a fresh machine): again"
        return 1
    fi
    echo "=== $1: finished in an earlier call"
    echo "$line" >> "$SUMMARY"
    [[ "$line" != *" FAIL "* ]] || failed=$((failed + 1))
}

# leave NAME TIME WHY: a step the budget left for the next call: listed at the end, and a LEFT
# line in this call's summary (not in the state, so that the next call runs it).
leave() {
    left+=("$1")
    printf '%-22s %-5s %5s   %s\n' "$1" LEFT "$2" "$3" >> "$SUMMARY"
}

# record NAME LINE: the step's summary line, in this call's summary and in the state.
record() {
    echo "$2" >> "$SUMMARY"
    printf '%s\t%s\n' "$1" "$2" >> "$STATE"
    save_out
}

# step_start NAME: whether NAME runs now: not finished by an earlier call, not named by
# GPU_CHECK_SKIP, and with at least 20 s of the budget left (else it is left for the next call).
# Sets LIMIT (the seconds it may take) and CUT (1: the budget, not STEP_TIMEOUT, sets LIMIT).
step_start() {
    local name=$1 pattern
    finished_before "$name" && return 1
    for pattern in ${GPU_CHECK_SKIP-}; do
        # shellcheck disable=SC2053   # a glob on purpose
        [[ "$name" == $pattern ]] && { skip "$name" "GPU_CHECK_SKIP=\"$GPU_CHECK_SKIP\""; return 1; }
    done
    LIMIT=$STEP_TIMEOUT CUT=0
    if [ "$BUDGET" -gt 0 ]; then
        local remaining=$(( BUDGET - ($(now) - START) ))
        if [ "$remaining" -lt 20 ]; then
            echo "=== $name: not started (GPU_CHECK_SECONDS=$BUDGET spent)"
            leave "$name" - "not started: GPU_CHECK_SECONDS=$BUDGET spent"
            return 1
        fi
        [ "$remaining" -lt "$LIMIT" ] && LIMIT=$remaining && CUT=1
    fi
    return 0
}

# step_run NAME LIMIT COMMAND...: the command, its output in $LOGS/NAME.log, ended after LIMIT
# seconds (status 124); its status. A dry run runs nothing: status 124 when DRY_STEP would
# reach LIMIT, else 0.
step_run() {
    local name=$1 limit=$2
    shift 2
    if [ "$DRY" = 1 ]; then
        echo "dry run" > "$LOGS/$name.log"
        [ "$DRY_STEP" -lt "$limit" ] || return 124
        return 0
    fi
    # -k: a step that ignores the TERM at its limit is killed 15 s later
    timeout -k 15 "$limit" "$@" > "$LOGS/$name.log" 2>&1
}

# step_end NAME STATUS START CUT [END]: records the step that ran from START to END (default:
# now): its status, time and the line that says what it measured (a test's closing line, a
# benchmark's result line); or, cut at the budget, leaves it for the next call.
step_end() {
    local name=$1 status=$2 start=$3 cut=$4 end=${5:-$(now)} line
    if [ "$status" -eq 124 ] && [ "$cut" -eq 1 ]; then
        echo "=== $name: cut at the budget after $(( end - start )) s; left for the next call"
        leave "$name" $(( end - start ))s "cut at the budget (GPU_CHECK_SECONDS=$BUDGET): $(tail -n 1 "$LOGS/$name.log" | cut -c1-80)"
        return 0
    fi
    line=$(grep -E '(passed, [0-9]+ failed|^ours |^torch |^SKIP|ERROR SUMMARY|BLEU =|identical|lines differ|^real|^attention, |^dry run)' "$LOGS/$name.log" | tail -n 1)
    tail -n 3 "$LOGS/$name.log"
    if grep -q '^SKIP' "$LOGS/$name.log" && ! grep -qE '[1-9][0-9]* passed' "$LOGS/$name.log"; then
        record "$name" "$(printf '%-22s %-5s %5ss  %s' "$name" SKIP $(( end - start )) "$line")"
        return 0
    fi
    [ "$status" -eq 0 ] || failed=$((failed + 1))
    local verdict=ok
    [ "$status" -eq 0 ] || verdict=FAIL
    [ "$DRY" = 1 ] && verdict=dry
    record "$name" "$(printf '%-22s %-5s %5ss  %s' "$name" "$verdict" $(( end - start )) "$line")"
}

# step NAME COMMAND...: runs it now (step_start, step_run, step_end).
step() {
    local name=$1 start status
    shift
    step_start "$name" || return 0
    echo "=== $name: $*"
    start=$(now)
    step_run "$name" "$LIMIT" "$@"
    status=$?
    [ "$DRY" = 1 ] && clock=$((clock + (status == 124 ? LIMIT : DRY_STEP)))
    step_end "$name" "$status" "$start" "$CUT"
}

# queue NAME COMMAND...: a step for run_queue, which runs the queued steps SANITIZE_JOBS at a
# time, each its own process (compute-sanitizer's cost on 2026-11-28 was the host's, about 50 ms
# a launch, whatever the kernel: processes side by side on the GPU machine's 16 cores should
# each keep that pace). SANITIZE_JOBS=1: one after another, as step would.
QUEUE=()
declare -A QUEUED
queue() {
    local name=$1
    shift
    QUEUE+=("$name")
    QUEUED[$name]=$(printf '%q ' "$@")
}
run_queue() {
    local jobs=${SANITIZE_JOBS:-9} i=0 n=${#QUEUE[@]}
    while [ "$i" -lt "$n" ]; do
        local batch=() pids=() starts=() cuts=() statuses=() ends=() name k t longest=0
        while [ "$i" -lt "$n" ] && [ "${#batch[@]}" -lt "$jobs" ]; do
            name=${QUEUE[$i]}
            i=$((i + 1))
            step_start "$name" || continue
            echo "=== $name: ${QUEUED[$name]} (one of a batch of up to $jobs side by side)"
            starts+=("$(now)") cuts+=("$CUT")
            # each job writes its end time beside its log
            rm -f "$LOGS/$name.end"
            eval "{ step_run \"\$name\" \"\$LIMIT\" ${QUEUED[$name]}; s=\$?; now > \"\$LOGS/\$name.end\"; exit \$s; }" &
            pids+=($!) batch+=("$name")
            # a dry job "takes" DRY_STEP, or its limit when that is shorter: the batch its longest
            [ "$DRY" = 1 ] && { t=$(( DRY_STEP < LIMIT ? DRY_STEP : LIMIT )); [ "$t" -gt "$longest" ] && longest=$t; }
        done
        for k in "${!batch[@]}"; do
            wait "${pids[$k]}"
            statuses+=($?)
        done
        [ "$DRY" = 1 ] && clock=$((clock + longest))
        for k in "${!batch[@]}"; do
            name=${batch[$k]}
            ends[k]=$(cat "$LOGS/$name.end" 2> /dev/null || now)
            [ "$DRY" = 1 ] && ends[k]=$clock
            step_end "$name" "${statuses[$k]}" "${starts[$k]}" "${cuts[$k]}" "${ends[$k]}"
        done
    done
    QUEUE=()
}

skip() {   # skip NAME REASON
    echo "=== $1: SKIP ($2)"
    printf '%-22s %-5s %5s   %s\n' "$1" SKIP - "$2" >> "$SUMMARY"
}

# What this machine has: the GPU, the tools the steps use and what the build will find.
step gpu bash -c "nvidia-smi; s=\$?; for t in g++ make nvcc compute-sanitizer pkg-config mpicxx $PYTHON; do \
    printf '%-18s %s\n' \$t \"\$(command -v \$t || echo 'not found')\"; done; make info; \
    $PYTHON -c 'import torch; print(\"torch\", torch.__version__, \"CUDA\", torch.cuda.is_available())'; exit \$s"
want build && step build bash -c "make clean > /dev/null && make -j$JOBS all build/test_ops build/test_cuda build/bench_train build/bench_decode build/bench_attention"
[ "$DRY" = 1 ] || [ -f build/libtransformer_cuda.so ] ||
    { echo "no CUDA backend was built (is nvcc on PATH?)"; cat "$SUMMARY"; exit 1; }

if want tests; then
    step ops-fp32 build/test_ops --device cuda --precision fp32
    step ops-bf16 build/test_ops --device cuda --precision bf16
    step model build/test_cuda
    step cli-cuda sh test/test_cli_cuda.sh .
    # bf16's other attention kernels (the fused ones are its default; fp32 takes the tiled
    # ones): the products by cuBLASLt (TRANSFORMER_ATTENTION=batched), the tiled kernels
    for k in batched tiled; do
        step ops-$k-bf16 env TRANSFORMER_ATTENTION=$k build/test_ops --device cuda --precision bf16 --section "Scaled Dot-Product Attention"
        step model-$k env TRANSFORMER_ATTENTION=$k build/test_cuda --quick
    done
fi

# compute-sanitizer over the GPU tests, right after them: with the tests, what the issues need
# before any benchmark. compute-sanitizer: on PATH, or in the CUDA Toolkit beside nvcc (CUDA
# 12+: compute-sanitizer/).
SANITIZER=$(command -v compute-sanitizer || ls "$(dirname "$(command -v nvcc)")"/../compute-sanitizer/compute-sanitizer 2> /dev/null)
[ "$DRY" = 1 ] && SANITIZER=${SANITIZER:-compute-sanitizer}
SAN="$SANITIZER --error-exitcode 1"
# racecheck looks at our kernels alone: cuBLASLt's products and CUB's sort (library kernels,
# whose shared memory racecheck would follow access by access: the whole of test_cuda --quick
# ran past 5 minutes on 2026-11-27) run unchecked. Leaving theirs out, rather than naming ours,
# keeps every kernel of ours checked whatever its name (a filter that matched none would check
# nothing and report no hazard). A sanitizer that refuses the option checks every kernel.
RACE=($SAN --tool racecheck)
LIBRARY_KERNELS="regex=.*(gemm|nvjet|xmma|cutlass|cublas|splitK|DeviceRadixSort|DeviceScan).*"
if [ "$DRY" = 1 ] || { want sanitize && [ -n "$SANITIZER" ] &&
        $SANITIZER --tool racecheck --kernel-name-exclude "$LIBRARY_KERNELS" "$(command -v true)" > /dev/null 2>&1; }; then
    RACE+=(--kernel-name-exclude "$LIBRARY_KERNELS")
fi
# sanitize_stage: the memchecks side by side, then the racechecks side by side. Here, after the
# tests; with GPU_CHECK_SANITIZE_LAST=1 after the translations instead (before the diagnostics),
# so that a call that needs both the racechecks and bench-decode runs the steps whose time is
# known first and gives the racechecks, whose time side by side is not measured yet, the rest
# of its budget, rather than the other way round.
sanitize_stage() {
    if want sanitize && [ -n "$SANITIZER" ]; then
        queue memcheck-ops $SAN --tool memcheck build/test_ops --device cuda --precision bf16
        queue memcheck-model $SAN --tool memcheck build/test_cuda --quick
        queue memcheck-batched env TRANSFORMER_ATTENTION=batched $SAN --tool memcheck build/test_ops --device cuda --precision bf16 --section "Scaled Dot-Product Attention"
        queue memcheck-tiled env TRANSFORMER_ATTENTION=tiled $SAN --tool memcheck build/test_ops --device cuda --precision bf16 --section "Scaled Dot-Product Attention"
        run_queue
        # every op in both precisions: bf16 has kernels of its own (the fused attention, the
        # decoding step's attention, the loss and top-k over bf16 logits)
        queue racecheck-ops "${RACE[@]}" build/test_ops --device cuda --precision fp32
        queue racecheck-ops-bf16 "${RACE[@]}" build/test_ops --device cuda --precision bf16
        # test_cuda a part at a time, each launching its kernels fewer times (--sanitize: racecheck
        # took about 50 ms a launch on an H100, and the training part whole ran past 313 s); the
        # bf16 loss curve (--part curve) runs the training part's kernels for more steps, so it is
        # left out
        for part in step resume step-profile reference alone ensemble decode-profile; do
            queue racecheck-model-$part "${RACE[@]}" build/test_cuda --quick --sanitize --part $part
        done
        run_queue
    elif want sanitize; then
        skip sanitizer "compute-sanitizer not on PATH nor beside nvcc"
    fi
}
[ "${GPU_CHECK_SANITIZE_LAST:-0}" = 1 ] || sanitize_stage

# The training benchmark: the paper's batches of about 25,000 source + 25,000 target tokens.
if want bench; then
    # the base step op by op (the per-op profile and the products by shape), then base and big
    # against PyTorch eager and torch.compile on the same batch with the ratios (the issue's
    # table), then base in fp32
    step bench-base-bf16 build/bench_train --device cuda --precision bf16 --config base --tokens 25000 --profile
    step bench-vs-torch sh bench/bench_train_gpu.sh build
    step bench-base-fp32 build/bench_train --device cuda --precision fp32 --config base --tokens 25000
fi
# The base step with the other attention kernels (asked for by name: measured on 2026-11-27,
# 86.4 ms row-wise, 50.0 tiled, 42.5 batched against the fused kernels' 41.1).
if want bench-kernels; then
    step bench-base-rowwise env TRANSFORMER_ATTENTION=rowwise build/bench_train --device cuda --precision bf16 --config base --tokens 25000
    step bench-base-tiled env TRANSFORMER_ATTENTION=tiled build/bench_train --device cuda --precision bf16 --config base --tokens 25000 --profile
    step bench-base-batched env TRANSFORMER_ATTENTION=batched build/bench_train --device cuda --precision bf16 --config base --tokens 25000 --profile
fi

# ./train on the default corpus, with its defaults (2 minutes on the GPU).
if want train && { [ "$DRY" = 1 ] || [ -f data/corpus/default/train.en ]; }; then
    step train bash -c "rm -rf $WORK/run && ./train --device cuda ${GPU_CHECK_TRAIN_TIME:+--time $GPU_CHECK_TRAIN_TIME} --out $WORK/run"
elif want train; then
    skip train "no data/corpus/default (make data here, carry data/corpus)"
fi
if want train-base && [ -f data/corpus/default/train.en ]; then
    step train-base bash -c "rm -rf $WORK/run-base && ./train --device cuda --config base --dropout 0.3 \
        --max-tokens 12500 --time ${GPU_CHECK_TRAIN_TIME:-2m} --save-every 1m --out $WORK/run-base"
fi

# ./translate on the GPU (fp32, bf16) against the CPU, greedy and beam 4, on the test set.
# translate_on NAME DEVICE PRECISION BEAM: translates test.en into $WORK/NAME.txt, scores it.
translate_on() {
    step "$1" bash -c "time ./translate --device $2 --precision $3 --beam $4 --model $M \
        < data/corpus/default/test.en > $WORK/$1.txt && ./bleu data/corpus/default/test.es < $WORK/$1.txt"
}
if want translate && [ -z "${MODEL-}" ] && [[ " ${left[*]-} " == *" train "* ]]; then
    echo "=== translate, bench-decode: wait for train's model (left for the next call)"
    leave translate - "waits for train's model"
    leave bench-decode - "waits for train's model"
elif want translate && { [ "$DRY" = 1 ] || { [ -f "$M" ] && [ -f data/corpus/default/test.en ]; }; }; then
    for beam in 1 4; do
        translate_on "gpu-fp32-beam$beam" cuda fp32 $beam
        translate_on "gpu-bf16-beam$beam" cuda bf16 $beam
        translate_on "cpu-fp32-beam$beam" cpu fp32 $beam
        # >= 99.5% of the 1,581 lines identical: at most 7 differ
        step "gpu-vs-cpu-beam$beam" bash -c "n=\$(paste -d '\n' $WORK/gpu-fp32-beam$beam.txt $WORK/cpu-fp32-beam$beam.txt \
            | paste - - | awk -F'\t' '\$1 != \$2' | wc -l); \
            echo \"GPU fp32 vs CPU, beam $beam: \$n lines differ of \$(wc -l < $WORK/cpu-fp32-beam$beam.txt)\"; [ \$n -le 7 ]"
        # BLEU: GPU fp32 within 0.05 of the CPU's, bf16 within 0.2 of fp32's
        step "bleu-beam$beam" bash -c "b() { ./bleu data/corpus/default/test.es --score-only < $WORK/\$1-beam$beam.txt; }; \
            c=\$(b cpu-fp32); g=\$(b gpu-fp32); h=\$(b gpu-bf16); \
            echo \"BLEU = beam $beam: CPU fp32 \$c, GPU fp32 \$g, GPU bf16 \$h\"; \
            [ -n \"\$c\" ] && [ -n \"\$g\" ] && [ -n \"\$h\" ] && awk -v c=\$c -v g=\$g -v h=\$h 'BEGIN { d1 = c - g; d2 = g - h; exit !(d1 <= 0.05 && d1 >= -0.05 && d2 <= 0.2 && d2 >= -0.2) }'"
    done
    # Decoding speed on the GPU: a synthetic base-model batch, then the test set with the model
    # above (ours vs PyTorch and CTranslate2 on the same GPU).
    step bench-decode bash bench/bench_translate_gpu.sh "$M"
elif want translate; then
    skip translate "no model at $M, or no data/corpus/default"
    step bench-decode bash bench/bench_translate_gpu.sh "$M"   # the synthetic batch alone
fi

[ "${GPU_CHECK_SANITIZE_LAST:-0}" = 1 ] && sanitize_stage

# Where a step's time goes, for the speed work that follows (last: the issues' checks come
# first): every kernel of a step (ncu), the products tuned, the classifier's chunks, big op by
# op, the fused attention kernels at 8 warps a block, the attention kernels alone.
if want diagnose; then
    # decoding the test set op by op (bench_decode --profile, after the timed pass and a second
    # one that says what the first spent once, and what choosing the products' algorithms cost the
    # host: TRANSFORMER_GEMM_STATS): where bf16's time went on 2026-11-27, when it decoded the
    # test set at less than half fp32's speed (2,382 against 6,172 sentences/s)
    if [ "$DRY" = 1 ] || { [ -f "$M" ] && [ -f data/corpus/default/test.en ]; }; then
        for p in bf16 fp32; do
            step decode-profile-$p bash -c "./bpe encode --vocab $(dirname "$M")/vocab.bpe < data/corpus/default/test.en \
                > $WORK/test.ids && TRANSFORMER_GEMM_STATS=1 build/bench_decode --device cuda --precision $p --model $M \
                --input $WORK/test.ids --batch-tokens 16000 --profile"
        done
        # and bf16 with 2 planned sizes an octave instead of 8: fewer buckets, fewer heuristic
        # queries (if those are what bf16's first pass spends, this pass is the faster one)
        step decode-buckets2-bf16 bash -c "TRANSFORMER_GEMM_STATS=1 TRANSFORMER_GEMM_BUCKET_STEPS=2 build/bench_decode \
            --device cuda --precision bf16 --model $M --input $WORK/test.ids --batch-tokens 16000"
    fi
    # the hardware counters of one launch of each of the slowest hand-written kernels, then
    # every kernel of one step by name and duration (ncu)
    step ncu-kernels sh bench/ncu_kernels.sh build
    # the products with the fastest of cuBLASLt's first 8 algorithms for each shape, timed (a
    # "gemm-tune:" line each), against the heuristic's first, the default: the by-shape table
    # beside bench-base-bf16's says what the default choice leaves (the products ran at 60% of
    # the measured peak on 2026-11-27)
    step bench-base-gemm-tune env TRANSFORMER_GEMM_TUNE=8 build/bench_train --device cuda --precision bf16 --config base --tokens 25000 --profile
    # the classifier's chunk of rows: 1,813 (2^26 logits, the default), all 25,000 at once,
    # 7,255 (2^28; its products' shapes by the --profile table's second part) and 453 (2^24: 34 MB
    # of bf16 logits, within the H100's 50 MB L2 cache, so that the loss kernel and the two
    # products after it may read them from there, at the price of smaller products)
    for r in 25000 7255 453; do
        step bench-base-chunk$r build/bench_train --device cuda --precision bf16 --config base --tokens 25000 --logit-chunk-rows $r
    done
    step bench-big-bf16 build/bench_train --device cuda --precision bf16 --config big --tokens 25000 --profile
    # the fused attention kernels with 8 warps a block in the base step (the default takes 4 up
    # to 32 tokens), and the attention kernels alone at lengths 10 to 128 (beside PyTorch's)
    step bench-base-fused-w8 env TRANSFORMER_FUSED_WARPS=8 build/bench_train --device cuda --precision bf16 --config base --tokens 25000
    step bench-attention sh bench/bench_attention.sh build
fi

echo
echo "gpu-check summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -n 1); logs in $LOG_DIR):"
cat "$SUMMARY"
echo "gpu-check: $failed step(s) failed"
if [ "${#left[@]}" -gt 0 ]; then
    echo "gpu-check: ${#left[@]} step(s) left for the next call (GPU_CHECK_CONTINUE=1): ${left[*]}"
    exit 3
fi
[ "$failed" -eq 0 ]
