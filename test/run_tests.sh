#!/bin/sh
# test/run_tests.sh BUILD_DIR [PROGRAM_DIR] — runs every test of `make test` from the repository
# root, each to its end even when an earlier one fails, and adds up their closing lines
# ("NAME: N passed, M failed[, K skipped]"). test/suite_runner.sh runs them (TEST_JOBS at a
# time, printed in order) and counts: it ends with "tests: N passed, M failed, K skipped" and
# exits 1 on any failure, on a test that crashed or printed no closing line, on a suite that
# checked nothing without a SKIP line saying why (skips are counted apart, never passed), and on
# one with more SKIP lines than its closing line counts skipped.
set -u
BUILD=${1:-build}
BIN=${2:-.}
. test/suite_runner.sh

# the interface, the CPU's and the GPU's backends: the same ops in the same order, the same names
run layout python3 test/test_layout.py .
# make mutants' list of wrong edits: each still applies to the code as it is (the run itself is make mutants)
run mutants_list python3 test/mutants.py --check
# the Python tests' counting (test/checks.py): a SKIP is counted apart, never passed over
run checks python3 test/checks.py
# the suites' runner and counting (test/suite_runner.sh), on made-up suites
run suite_runner sh test/test_suite_runner.sh
run core "$BUILD/test_core"
run ops "$BUILD/test_ops"
run decode "$BUILD/test_decode"
run train "$BUILD/test_train"
run gemm "$BUILD/test_gemm"
run gemm_int8 "$BUILD/test_gemm_int8"
run gemm_bf16 "$BUILD/test_gemm_bf16"
# --precision bf16 on the CPU: every op with the linear layers' products on bf16 operands,
# against float64 and the CPU's fp32 at bf16's tolerances
run ops_cpu_bf16 "$BUILD/test_ops" --device cpu --precision bf16 --against-cpu
# the same with the products through sgemm on rounded operands, the path of CPUs without AMX or
# AVX512-BF16 (TRANSFORMER_BF16_KERNEL=sgemm; the run above took the fastest this CPU has)
run ops_cpu_bf16_sgemm env TRANSFORMER_BF16_KERNEL=sgemm "$BUILD/test_ops" --device cpu --precision bf16 --against-cpu
skipped() {   # NAME WHY: a suite not run, its SKIP line saying why and its closing line counting it
    run "$1" sh -c 'echo "SKIP $2"; echo "$1: 0 passed, 0 failed, 1 skipped"' skipped "$1" "$2"
}
# The same two for each instruction set the kernels are written for (the Makefile's KERNEL_ISAS;
# x86-64 only), where this CPU has what the build asks for.
isa_flags() {
    case $1 in
        avx512) echo "avx512f avx512bw avx512dq avx512vl avx512cd avx512_vnni avx2 fma bmi2 movbe" ;;
        avx2) echo "avx2 fma bmi1 bmi2 f16c movbe abm" ;;
        plain) echo "sse2" ;;
    esac
}
for isa in avx512 avx2 plain; do
    for t in gemm gemm_int8 gemm_bf16; do
        [ -x "$BUILD/test_$t.$isa" ] || continue
        missing=""
        for flag in $(isa_flags $isa); do
            grep -qw "$flag" /proc/cpuinfo 2> /dev/null || missing="$missing $flag"
        done
        if [ -z "$missing" ]; then
            run "${t}_$isa" "$BUILD/test_$t.$isa"
        else
            skipped "${t}_$isa" "test_$t.$isa: this CPU lacks$missing"
        fi
    done
done
run openmp_wait "$BUILD/test_openmp_wait"
run tokenizer "$BUILD/test_tokenizer"
run sentences "$BUILD/test_sentences"
run data "$BUILD/test_data"
run bleu "$BUILD/test_bleu"
run sacrebleu python3 test/test_sacrebleu.py "$BIN" "$BUILD"
run metric_options python3 test/test_metric_options.py "$BIN" "$BUILD"
run ter_options python3 test/test_ter_options.py "$BIN" "$BUILD"
run significance python3 test/test_significance.py "$BIN" "$BUILD"
run cuda "$BUILD/test_cuda"
# The GPU tests again with transformer.cu built for the CPU emulator (test/cuda_emulator): the
# kernels' logic and the host code around them, on any machine; a GPU's numbers come from the
# runs above and make gpu-check.
EMU="$BUILD/emu/libtransformer_cuda.so"
run emulator "$BUILD/test_emulator"
run ops_emulated_fp32 env TRANSFORMER_CUDA_EMULATOR="$EMU" "$BUILD/test_ops" --device cuda --precision fp32
run ops_emulated_bf16 env TRANSFORMER_CUDA_EMULATOR="$EMU" "$BUILD/test_ops" --device cuda --precision bf16
run cuda_emulated env TRANSFORMER_CUDA_EMULATOR="$EMU" "$BUILD/test_cuda" --quick
# bf16's attention by default takes the fused tensor-core kernels (fp32 the tiled ones); in
# bf16 the others too: attention's products by cuBLASLt (TRANSFORMER_ATTENTION=batched), the tiled kernels
ATTN="Scaled Dot-Product Attention"
run ops_emulated_batched_bf16 env TRANSFORMER_ATTENTION=batched TRANSFORMER_CUDA_EMULATOR="$EMU" "$BUILD/test_ops" --device cuda --precision bf16 --section "$ATTN"
run cuda_emulated_batched env TRANSFORMER_ATTENTION=batched TRANSFORMER_CUDA_EMULATOR="$EMU" "$BUILD/test_cuda" --quick
run ops_emulated_tiled_bf16 env TRANSFORMER_ATTENTION=tiled TRANSFORMER_CUDA_EMULATOR="$EMU" "$BUILD/test_ops" --device cuda --precision bf16 --section "$ATTN"
# the fused kernels take 4 warps a block up to 32 tokens, 8 past them: each count on every shape
run ops_emulated_fused_w4_bf16 env TRANSFORMER_FUSED_WARPS=4 TRANSFORMER_CUDA_EMULATOR="$EMU" "$BUILD/test_ops" --device cuda --precision bf16 --section "$ATTN"
run ops_emulated_fused_w8_bf16 env TRANSFORMER_FUSED_WARPS=8 TRANSFORMER_CUDA_EMULATOR="$EMU" "$BUILD/test_ops" --device cuda --precision bf16 --section "$ATTN"
# the ops again with the blocks, warps and lanes run last first (CUDA_EMULATOR_ORDER=reverse): a
# kernel missing a barrier reads what another thread has not written yet in one order or the other
REV="env CUDA_EMULATOR_ORDER=reverse TRANSFORMER_CUDA_EMULATOR=$EMU"
run emulator_reversed env CUDA_EMULATOR_ORDER=reverse "$BUILD/test_emulator"
run cuda_emulated_tiled env TRANSFORMER_ATTENTION=tiled TRANSFORMER_CUDA_EMULATOR="$EMU" "$BUILD/test_cuda" --quick
# Under AddressSanitizer (make test-asan) the four reversed runs of test_ops are skipped: the same
# kernels on the same buffers as the runs in order, whose accesses the sanitizer has checked; the
# order finds a missing barrier by the values, which make test compares (about 120 s of CI's 90
# minutes under the sanitizer, 2026-12-04).
reversed() {   # NAME ARGS...: a reversed run of test_ops, or its SKIP under the sanitizer
    name=$1; shift
    if [ "${SANITIZED:-0}" = 1 ]; then
        skipped "$name" "$name under AddressSanitizer: the runs in order checked the accesses of these kernels, make test runs it"
    else
        run "$name" $REV "$@"
    fi
}
reversed ops_emulated_reversed_fp32 "$BUILD/test_ops" --device cuda --precision fp32
reversed ops_emulated_reversed_bf16 "$BUILD/test_ops" --device cuda --precision bf16
reversed ops_emulated_reversed_batched_bf16 TRANSFORMER_ATTENTION=batched "$BUILD/test_ops" --device cuda --precision bf16 --section "$ATTN"
reversed ops_emulated_reversed_tiled_bf16 TRANSFORMER_ATTENTION=tiled "$BUILD/test_ops" --device cuda --precision bf16 --section "$ATTN"
run cli_cuda_emulated env TRANSFORMER_CUDA_EMULATOR="$EMU" sh test/test_cli_cuda.sh "$BIN"
# data parallel on (emulated) GPUs: 2 ranks summing by the NCCL path (an MPI stand-in of NCCL)
run dist_cuda_emulated env TRANSFORMER_CUDA_EMULATOR="$EMU" TRANSFORMER_NCCL_LIB="$BUILD/emu/libtransformer_nccl.so" \
    sh test/test_dist_cuda.sh "$BIN"
run corpus sh test/test_corpus.sh
run cli sh test/test_cli.sh "$BIN"
run dist env DIST_TEST_EMULATOR="$EMU" sh test/test_dist.sh "$BIN"
run train_cli sh test/test_train_cli.sh "$BIN"
run pictures sh test/test_pictures.sh "$BUILD" "$BIN"
run robust bash test/test_robust.sh "$BIN"
run soak bash test/soak.sh 3 "$BIN"
run translate_options sh test/test_translate_options.sh "$BIN"
run serve python3 test/test_serve.py "$BIN"
run serve_without_http python3 test/test_serve.py "$BUILD/translate_nohttp"
# the service on the GPU (emulated): concurrent requests batched on the device, the CPU's answers
run serve_cuda_emulated env SERVE_DEVICE=cuda TRANSFORMER_CUDA_EMULATOR="$EMU" python3 test/test_serve.py "$BIN"
run bench_env sh test/test_bench_env.sh "$BUILD" "$BIN"
# the GPU benchmarks' scripts end to end on the emulator (tiny configs), before a GPU session needs them
run gpu_bench_emulated env TRANSFORMER_CUDA_EMULATOR="$EMU" sh test/test_gpu_bench.sh "$BUILD" "$BIN"
# make gpu-check's plan (its dry run): the order, the budget, the state across calls and machines
run gpu_check bash test/test_gpu_check.sh "$BUILD"
for t in tokenizer vocab safetensors checkpoint parallel translate metrics; do   # fuzz seeds + regressions
    run "fuzz_$t" "$BUILD/fuzz_replay_$t" "test/fuzz/$t"
done
suites_total
