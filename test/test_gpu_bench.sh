#!/bin/sh
# test/test_gpu_bench.sh BUILD_DIR [PROGRAM_DIR] — the GPU benchmarks' scripts run end to end here,
# on the CUDA emulator (TRANSFORMER_CUDA_EMULATOR) behind a stand-in nvidia-smi, with tiny
# configs, so that a script that would stop or print no table fails here and not in a GPU
# session's few minutes (a GPU benchmark once stopped there at a tensor left on the CPU):
# bench_train_gpu.sh (make bench DEVICE=cuda), bench_attention.sh, bench_translate_gpu.sh with a
# tiny model and test set, bench_train --profile, bench_decode --profile, ncu_kernels.sh, and
# the launches test_cuda --sanitize saves racecheck (CUDA_EMULATOR_LAUNCHES). Their
# numbers mean nothing here (an emulator is no GPU): what is checked is that each runs to its
# end, prints its table's rows and result lines, and says why the rows it cannot fill are empty
# (no CUDA PyTorch, no CTranslate2 on a GPU, no ncu). Every side of a comparison gets the same
# warm-up: bench_train_gpu.sh's reports its counts (ours, and PyTorch's where it runs), and
# bench_translate_gpu.sh's PyTorch rows run on the CPU here (a stand-in interpreter: the same
# bench_torch.py decode with --device cpu) so that its comparison of the decoders' warm-ups and
# batches has two sides. SKIP without the emulator's library.
# Ends with "gpu_bench: N passed, M failed".
set -u
BUILD=${1:-build}
B=${2:-.}
PY=${PYTHON:-/usr/bin/python3}   # PyTorch's, as test_bench_env.sh's
. test/check.sh
if [ -z "${TRANSFORMER_CUDA_EMULATOR:-}" ] || [ ! -f "$TRANSFORMER_CUDA_EMULATOR" ]; then
    skip "the GPU benchmarks' scripts: no CUDA emulator library (TRANSFORMER_CUDA_EMULATOR)"
    check_summary gpu_bench
    exit $?
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin"
cat > "$T/bin/nvidia-smi" << 'SMI'
#!/bin/sh
# a stand-in: the CUDA emulator is the device
case "$*" in
    *--query-gpu*) echo "CUDA emulator (not a GPU), 0.0, 0 MiB" ;;
    -L) echo "GPU 0: CUDA emulator (not a GPU)" ;;
    *) echo "CUDA emulator (not a GPU)" ;;
esac
SMI
chmod +x "$T/bin/nvidia-smi"
PATH="$T/bin:$PATH"
export PATH

BENCH_CONFIGS=tiny TOKENS=200 STEPS=1 WARMUP_STEPS=0 BENCH_TRAIN_ARGS="--no-peak" sh bench/bench_train_gpu.sh "$BUILD" > "$T/train.txt" 2>&1
s=$?
[ $s -eq 0 ] && grep -q '^tiny .*| ours bf16 ' "$T/train.txt" && grep -qE '^ours train tiny bf16: [0-9]+ tokens/s' "$T/train.txt" &&
    grep -qE '^tiny .*PyTorch eager .*(not run|x)' "$T/train.txt"
check $? "bench_train_gpu.sh: exit $s, the table's rows and the result line ($(grep -m1 '^ours train' "$T/train.txt" | cut -c1-90))"
grep -q '^#   tiny: the same warm-up for every side that ran: 0 warm-up steps, the median of 1$' "$T/train.txt"
check $? "bench_train_gpu.sh STEPS=1 WARMUP_STEPS=0: $(grep -m1 -e '^#   tiny: ' "$T/train.txt" || echo 'no line comparing the warm-ups')"

CONFIG=tiny TOKENS=200 LENGTHS=10,16 sh bench/bench_attention.sh "$BUILD" > "$T/attention.txt" 2>&1
s=$?
[ $s -eq 0 ] && [ "$(grep -c '^ours attention ' "$T/attention.txt")" -ge 6 ] && grep -q '^L=10 ' "$T/attention.txt" &&
    grep -q '^L=16 ' "$T/attention.txt"
check $? "bench_attention.sh: exit $s, $(grep -c '^ours attention ' "$T/attention.txt") timing lines, a row per length"

# a tiny model and a test set of 12 lines, for the decoding benchmark's second part
tiny_model "$T"
check $? "a tiny model for the decoding benchmark (exit $?)"
# PyTorch "on the GPU" on the CPU: a stand-in interpreter answers the script's CUDA question yes and
# runs bench_torch.py with --device cpu in $PY (skipped, its rows "not run", where $PY has no torch)
cat > "$T/bin/torch-on-cpu" << ZZ
#!/bin/sh
case "\$*" in *torch.cuda.is_available*) exec $PY -c 'import torch' ;; esac
prev=
for a; do
    shift
    [ "\$prev" = --device ] && a=cpu
    prev=\$a
    set -- "\$@" "\$a"
done
exec $PY "\$@"
ZZ
chmod +x "$T/bin/torch-on-cpu"
SYNTHETIC="--config tiny --sentences 4 --length 5" DATA="$T/data" BUILD="$BUILD" PYTHON="$T/bin/torch-on-cpu" BATCH_TOKENS=40 \
    bash bench/bench_translate_gpu.sh "$T/run/average.safetensors" > "$T/decode.txt" 2>&1
s=$?
[ $s -eq 0 ] && [ "$(grep -cE '^(greedy|beam4) +\| ours (fp32|bf16) ' "$T/decode.txt")" -eq 8 ] &&
    [ "$(grep -c 'a second pass' "$T/decode.txt")" -eq 4 ] && grep -q '^ours decode synthetic batch (--config tiny --sentences 4 --length 5) beam 4 bf16: ' "$T/decode.txt" &&
    grep -qE '^(greedy|beam4) +\| PyTorch fp32 .*(not run: .+|[0-9])' "$T/decode.txt" &&
    grep -qE '^(greedy|beam4) +\| CTranslate2 float16 .*(not run|[0-9])' "$T/decode.txt"
check $? "bench_translate_gpu.sh: exit $s, ours' 8 rows (synthetic and test set), 4 second-pass lines, the result line"
if $PY -c 'import torch' 2> /dev/null; then
    # the synthetic batch (4 sentences): ours and PyTorch, fp32 and bf16; the test set (12): ours fp32,
    # bf16 and PyTorch fp32 in the same batches (CTranslate2 needs a GPU)
    [ "$(grep -c '^#   \(greedy\|beam4\): the same warm-up for all 4 decoders: 4 sentences in one batch$' "$T/decode.txt")" -eq 2 ] &&
        [ "$(grep -c '^#   \(greedy\|beam4\): the same batches for all 3 decoders: [2-9] batches of 40 tokens, warm-up 8 sentences in one batch$' "$T/decode.txt")" -eq 2 ] &&
        ! grep -q 'DIFFER' "$T/decode.txt"
    check $? "bench_translate_gpu.sh: every decoder warmed up alike (PyTorch on the CPU): $(grep -m1 -e DIFFER -e '^#   beam4: the same batches for all 3' "$T/decode.txt" || echo 'no line comparing the warm-ups')"
else
    skip "bench_translate_gpu.sh's warm-ups, ours against PyTorch's: $PY cannot import torch"
fi
# decoders that report no warm-up and no batches (ours through a stand-in bench_decode that drops
# those lines; PyTorch and CTranslate2 not run) are not "the same": an empty report is no evidence
mkdir -p "$T/unreported"
cat > "$T/unreported/bench_decode" << ZZ
#!/bin/sh
"$(cd "$BUILD" && pwd)/bench_decode" "\$@" | grep -v '^# \(warm-up\|batches\) '
ZZ
chmod +x "$T/unreported/bench_decode"
SYNTHETIC="--config tiny --sentences 4 --length 5" DATA="$T/data" BUILD="$T/unreported" PYTHON=false CT2_PYTHON=false \
    BATCH_TOKENS=40 bash bench/bench_translate_gpu.sh "$T/run/average.safetensors" > "$T/unreported.txt" 2>&1
s=$?
[ $s -eq 0 ] && [ "$(grep -c "^#   \(greedy\|beam4\): WARM-UPS DIFFER from ours fp32's (none): ours fp32's warm-up (none), ours bf16's warm-up (none): no fair ratio$" "$T/unreported.txt")" -eq 2 ] &&
    [ "$(grep -c "^#   \(greedy\|beam4\): BATCHES DIFFER from ours fp32's (0 batches, warm-up none): ours fp32's warm-up (none), ours fp32's batches (0), ours bf16's warm-up (none), ours bf16's batches (0): no fair ratio$" "$T/unreported.txt")" -eq 2 ] &&
    ! grep -q 'the same \(warm-up\|batches\) for all' "$T/unreported.txt"
check $? "bench_translate_gpu.sh, no decoder reporting its warm-up or batches: exit $s, $(grep -m1 -e 'the same \(warm-up\|batches\) for all' -e '^#   beam4: BATCHES DIFFER' "$T/unreported.txt" || echo 'no line comparing the warm-ups')"
# nor where no decoder ran (ours through a stand-in bench_decode that fails)
mkdir -p "$T/failing"
printf '#!/bin/sh\necho "bench_decode: a stand-in that fails" >&2\nexit 1\n' > "$T/failing/bench_decode"
chmod +x "$T/failing/bench_decode"
SYNTHETIC="--config tiny --sentences 4 --length 5" DATA="$T/data" BUILD="$T/failing" PYTHON=false CT2_PYTHON=false \
    BATCH_TOKENS=40 bash bench/bench_translate_gpu.sh "$T/run/average.safetensors" > "$T/failing.txt" 2>&1
s=$?
[ $s -eq 0 ] && [ "$(grep -c '^#   \(greedy\|beam4\): no decoder ran: nothing to compare$' "$T/failing.txt")" -eq 4 ] &&
    ! grep -q 'the same \(warm-up\|batches\) for all' "$T/failing.txt"
check $? "bench_translate_gpu.sh, no decoder run: exit $s, $(grep -m1 -e 'the same \(warm-up\|batches\) for all' -e '^#   beam4: no decoder ran' "$T/failing.txt" || echo 'no line comparing the warm-ups')"

"$BUILD"/bench_train --device cuda --precision bf16 --config tiny --tokens 200 --steps 1 --warmup 0 --no-peak --profile > "$T/profile.txt" 2>&1
s=$?
[ $s -eq 0 ] && grep -q '^# profile linear_forward ' "$T/profile.txt" && grep -q '^# profile .*->' "$T/profile.txt"
check $? "bench_train --profile on the GPU: exit $s, the op table and the linear layers by shape"
"$B"/bpe encode --vocab "$T/run/vocab.bpe" < "$T/data/test.en" > "$T/test.ids" &&
    TRANSFORMER_GEMM_STATS=1 "$BUILD"/bench_decode --device cuda --precision bf16 --model "$T/run/average.safetensors" \
        --input "$T/test.ids" --batch-tokens 16000 --profile > "$T/decode_profile.txt" 2>&1
s=$?
[ $s -eq 0 ] && grep -q '^# profile greedy' "$T/decode_profile.txt" && grep -q '^# profile beam4' "$T/decode_profile.txt" &&
    grep -q '^# profile linear_forward ' "$T/decode_profile.txt" &&
    grep -qE '^cuBLASLt plans: [1-9][0-9]* product shapes in [1-9][0-9]* buckets, [1-9][0-9]* heuristic queries' "$T/decode_profile.txt"
check $? "bench_decode --profile on the GPU (gpu-check's decode-profile): exit $s, greedy's and beam 4's op tables, $(grep -m1 '^cuBLASLt plans' "$T/decode_profile.txt")"
# gpu-check's decode-buckets2-bf16: 2 planned sizes an octave plan fewer buckets than the default 8;
# a count that is not 1, 2, 4, 8 or 16 is refused
buckets() { sed -nE 's/^cuBLASLt plans: [0-9]+ product shapes in ([0-9]+) buckets.*/\1/p' "$1"; }
TRANSFORMER_GEMM_STATS=1 TRANSFORMER_GEMM_BUCKET_STEPS=2 "$BUILD"/bench_decode --device cuda --precision bf16 \
    --model "$T/run/average.safetensors" --input "$T/test.ids" --batch-tokens 16000 > "$T/buckets2.txt" 2>&1
s=$?
TRANSFORMER_GEMM_BUCKET_STEPS=3 "$BUILD"/bench_decode --device cuda --precision bf16 --model "$T/run/average.safetensors" \
    --input "$T/test.ids" > "$T/buckets3.txt" 2>&1
s3=$?
b8=$(buckets "$T/decode_profile.txt") b2=$(buckets "$T/buckets2.txt")
[ $s -eq 0 ] && [ -n "$b8" ] && [ -n "$b2" ] && [ "$b2" -lt "$b8" ] && [ $s3 -eq 1 ] &&
    grep -q "TRANSFORMER_GEMM_BUCKET_STEPS is the planned sizes an octave, 1, 2, 4, 8 or 16, not '3'" "$T/buckets3.txt"
check $? "TRANSFORMER_GEMM_BUCKET_STEPS=2: ${b2:-?} buckets against ${b8:-?} (exit $s); 3 refused (exit $s3)"

# racecheck's steps in gpu-check: test_cuda --sanitize launches the training step's kernels fewer
# times than test_cuda does (racecheck's time grows with the launches), counted by the emulator
launches() { CUDA_EMULATOR_LAUNCHES=1 "$BUILD"/test_cuda --quick "$@" --part step 2>&1 |
    sed -nE 's/^cuda emulator: ([0-9]+) kernel launches, [0-9]+ cuBLASLt products$/\1/p'; }
full=$(launches) short=$(launches --sanitize)
[ -n "$full" ] && [ -n "$short" ] && [ "$short" -gt 0 ] && [ "$short" -lt "$full" ]
check $? "test_cuda --part step: ${short:-?} kernel launches with --sanitize, ${full:-?} without"

if command -v ncu > /dev/null 2>&1 || ls -d /opt/nvidia/nsight-compute/*/ncu > /dev/null 2>&1; then
    skip "ncu_kernels.sh's SKIP without ncu: this machine has ncu"
else
    env -u NCU sh bench/ncu_kernels.sh "$BUILD" > "$T/ncu.txt" 2>&1
    s=$?
    [ $s -eq 0 ] && grep -q '^SKIP ncu_kernels: no ncu' "$T/ncu.txt"
    check $? "ncu_kernels.sh without ncu: exit $s, $(head -n 1 "$T/ncu.txt" | cut -c1-80)"
fi
check_summary gpu_bench
