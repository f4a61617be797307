# bench/gpu_env.sh — sourced by the GPU benchmarks (bench_train_gpu.sh, bench_translate_gpu.sh):
#   gpu_env NAME    without a GPU: prints "SKIP NAME: ..." and exits 0; else prints the GPU
#                   and sets torch_ok to 1 when $PY (default python3) has a CUDA PyTorch, else 0
#   value LINE KEY  the value of KEY=.. in a benchmark's result line
#   ratio A B       A / B as "1.23x", or "no ratio" when either is missing
PY=${PYTHON:-python3}
value() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk "BEGIN { printf \"%.2fx\", $1 / $2 }" || echo "no ratio"; }
gpu_env() {
    if ! nvidia-smi > /dev/null 2>&1; then
        echo "SKIP $1: no GPU (nvidia-smi does not answer)"
        exit 0
    fi
    echo "# GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)"
    torch_ok=1
    $PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null || torch_ok=0
    [ $torch_ok = 1 ] || echo "# PyTorch: $PY has no CUDA PyTorch: its rows are not run"
}
