# bench/torch_env.sh — sourced by the benchmark scripts (bench/bench.sh, bench/bench_translate.sh):
# sets TORCH, the command prefix that runs PyTorch at its best on this machine (OpenMP build of
# OpenBLAS, OPENBLAS_CORETYPE unset, tcmalloc when installed), and PY, the interpreter with
# Debian's python3-torch.
PY=${PYTHON:-/usr/bin/python3}
TORCH="env -u OPENBLAS_CORETYPE LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp"
if [ -f /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 ]; then
    TORCH="$TORCH LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
fi
