#!/bin/sh
# test/test_dist_cuda.sh — data-parallel ./train on GPUs: 2 MPI ranks, a GPU each, their
# gradient buffers summed by NCCL (toolkit/nccl_allreduce.cu), against one process with --accum 2
# on a GPU: every parameter and Adam's m and v bitwise the same after 10 and 20 steps, and the
# logged losses; then the same through the host, as when no NCCL library is there. In make test
# it runs on the CUDA emulator (TRANSFORMER_CUDA_EMULATOR) with TRANSFORMER_NCCL_LIB naming the
# emulator's build of the all-reduce, whose stand-in nccl.h sums over MPI
# (test/cuda_emulator/include/nccl.h): the NCCL path's host code, not NCCL. On a machine with two
# GPUs it runs on them. SKIP (counted as neither) without mpirun, an MPI build of ./train, or
# two GPUs or the emulator. Ends with "dist_cuda: N passed, M failed".
set -u
B=${1:-.}
. test/check.sh
gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
if ! command -v mpirun > /dev/null 2>&1 || ! ldd "$B/train" 2> /dev/null | grep -q libmpi; then
    skip "data parallel on GPUs: no mpirun, or $B/train built without MPI"
elif [ -z "${TRANSFORMER_CUDA_EMULATOR:-}" ] && [ "$gpus" -lt 2 ]; then
    skip "data parallel on GPUs: $gpus GPU(s) here, 2 needed (or the CUDA emulator: TRANSFORMER_CUDA_EMULATOR)"
fi
if [ "$skipped" -gt 0 ]; then
    check_summary dist_cuda
    exit $?
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMP_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none   # (as test_dist.sh)
export LSAN_OPTIONS="suppressions=$(pwd)/test/lsan_mpi.supp:fast_unwind_on_malloc=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export OMPI_MCA_mca_base_component_disable_dlclose=1
MPIRUN="mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS -x LSAN_OPTIONS -x ASAN_OPTIONS -x UBSAN_OPTIONS"
[ -n "${TRANSFORMER_CUDA_EMULATOR:-}" ] && MPIRUN="$MPIRUN -x TRANSFORMER_CUDA_EMULATOR"

toy_corpus "$T/corpus"
A="--config tiny --d-model 32 --d-ff 64 --vocab-size 300 --max-len 60 --data $T/corpus --max-tokens 200
   --warmup 20 --log-every 0 --save-every-steps 10 --eval-every 0 --no-eval --device cuda --precision fp32"
same() {  # same A B DESCRIPTION: every tensor bitwise equal
    out=$(python3 test/same_tensors.py "$1" "$2" 2>&1)
    check $? "$3: $out"
}
losses() { grep '^train,' "$1/log.csv" | cut -d, -f2,4; }   # step,train_loss of every step

"$B"/train $A --accum 2 --max-steps 20 --out "$T/one" > "$T/one.log" 2>&1
check $? "one process on the GPU, --accum 2, 20 steps (exit $?)"
losses "$T/one" > "$T/l1"
for how in nccl host; do
    # NCCL: the library TRANSFORMER_NCCL_LIB names, else the build's; the host: none there
    [ $how = host ] && export TRANSFORMER_NCCL_LIB=/nonexistent/libtransformer_nccl.so
    run=$MPIRUN
    [ -n "${TRANSFORMER_NCCL_LIB:-}" ] && run="$run -x TRANSFORMER_NCCL_LIB"
    $run -np 2 "$B"/train $A --max-steps 20 --out "$T/$how" > "$T/$how.log" 2>&1
    check $? "mpirun -np 2 ./train --device cuda, 20 steps, gradients summed by $how (exit $?)"
    if [ $how = nccl ]; then
        grep -q "^data parallel: NCCL's all-reduce over the 2 GPUs' gradient buffers" "$T/$how.log"
    else
        grep -q "^data parallel: no NCCL library on every rank (/nonexistent/libtransformer_nccl.so)" "$T/$how.log"
    fi
    check $? "the run says how it sums: $(grep -m1 -E "^data parallel: (NCCL|no NCCL)" "$T/$how.log")"
    same "$T/one/ckpt-00000010.safetensors" "$T/$how/ckpt-00000010.safetensors" "2 GPUs ($how) = --accum 2 after 10 steps"
    same "$T/one/ckpt-00000020.safetensors" "$T/$how/ckpt-00000020.safetensors" "2 GPUs ($how) = --accum 2 after 20 steps"
    losses "$T/$how" > "$T/l2"
    [ "$(wc -l < "$T/l1")" -eq 20 ] && cmp -s "$T/l1" "$T/l2"
    check $? "2 GPUs ($how) = --accum 2: the 20 logged losses ($(tail -n 1 "$T/l1") vs $(tail -n 1 "$T/l2"))"
done
# An NCCL library lacking an entry point (every tnccl_* but tnccl_destroy, as a build cut short):
# not used, the gradients go through the host, and the run says so
cat > "$T/partial_nccl.c" << 'EOF'
#include <stdbool.h>
#include <stddef.h>
int tnccl_id_bytes(void) { return 8; }
bool tnccl_unique_id(void* id, void* error) { (void)id; (void)error; return true; }
void* tnccl_init(const void* id, int rank, int size, void* error) { (void)id; (void)rank; (void)size; (void)error; return NULL; }
bool tnccl_all_reduce_sum(void* comm, float* dev, size_t n, void* error) { (void)comm; (void)dev; (void)n; (void)error; return false; }
EOF
if ${CC:-cc} -shared -fPIC -o "$T/partial_nccl.so" "$T/partial_nccl.c" 2> "$T/cc.log"; then
    TRANSFORMER_NCCL_LIB="$T/partial_nccl.so" $MPIRUN -x TRANSFORMER_NCCL_LIB -np 2 "$B"/train $A --max-steps 2 --out "$T/partial" > "$T/partial.log" 2>&1
    status=$?
    [ $status -eq 0 ] && grep -q "^data parallel: no NCCL library on every rank ($T/partial_nccl.so)" "$T/partial.log"
    check $? "an NCCL library without tnccl_destroy: the host path, said (exit $status): $(grep -m1 -E '^data parallel: (NCCL|no NCCL)|NCCL:' "$T/partial.log" | cut -c1-90)"
else
    check 1 "compiling the incomplete NCCL library: $(head -c 100 "$T/cc.log")"
fi
check_summary dist_cuda
