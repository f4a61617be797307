# bench/torch_env.sh — sourced by the benchmark scripts that compare with PyTorch or
# CTranslate2 (bench/bench.sh, bench/bench_translate.sh; bench/bench_split_long.sh uses the
# environment line only). Needs BUILD (default build) holding fp32_peak. Sets
#   PY       the interpreter with Debian's python3-torch (PYTHON, default /usr/bin/python3)
#   CT2      the interpreter with the ctranslate2 wheel (CT2_PYTHON, default python3)
#   THREADS  cores given to each side (default: all, nproc)
#   TORCH    the command prefix that runs PyTorch at its best on this machine: the OpenMP
#            build of OpenBLAS (TORCH_BLAS_DIR, default Debian's openblas-openmp folder, put
#            first on LD_LIBRARY_PATH: Debian's torch loads whatever libblas.so.3 the loader
#            finds), OpenBLAS's kernel named in OPENBLAS_CORETYPE when OpenBLAS does not know
#            the CPU (it would fall back to its slowest, Prescott), tcmalloc preloaded,
#            THREADS OpenMP threads
# and the functions
#   print_environment   "# ..." lines: CPU, cores used, load, compiler, this machine's fp32 peak
#   torch_anchor        the PyTorch side's environment and verdict (bench/torch_check.py);
#                       status 0 when a ratio against PyTorch may be printed
#   ct2_anchor MODEL    the same for CTranslate2 (bench/bench_ct2.py --check)
#   load_check WHAT     just before a timed run (nothing of the benchmark's running): one line
#                       "# load before WHAT: load average L, B of N cores busy over S s" from
#                       /proc/stat over LOAD_SAMPLE seconds (default 1), ending "BUSY: ..." with
#                       status 1 when other work held more than half a core of the THREADS the
#                       run is about to use (its time, and any ratio from it, are then unreliable)
# `make bench-deps` installs what they need; without it they refuse to print ratios.
# Ours runs a fixed THREADS, as the side it is compared with: the thread governor
# (toolkit/thread_governor.h) is turned off here too, for a script run without make.
export TRANSFORMER_THREADS_GOVERNOR=0
PY=${PYTHON:-/usr/bin/python3}
CT2=${CT2_PYTHON:-python3}
THREADS=${THREADS:-$(nproc)}
BUILD=${BUILD:-build}
TORCH_BLAS_DIR=${TORCH_BLAS_DIR:-/usr/lib/x86_64-linux-gnu/openblas-openmp}
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
TORCH="env -u OPENBLAS_CORETYPE LD_LIBRARY_PATH=$TORCH_BLAS_DIR OMP_NUM_THREADS=$THREADS"
_core=$(LD_LIBRARY_PATH=$TORCH_BLAS_DIR $PY bench/torch_check.py --coretype 2> /dev/null)
[ -n "$_core" ] && TORCH="$TORCH OPENBLAS_CORETYPE=$_core"
[ -f "$TCMALLOC" ] && TORCH="$TORCH LD_PRELOAD=$TCMALLOC"
PEAK_GFLOPS=

print_environment() {
    echo "# CPU: $(sh bench/cpu_name.sh); $THREADS of $(nproc) cores used; load average $(cut -d' ' -f1 /proc/loadavg)"
    echo "# ours: $(${CXX:-g++} --version | head -n 1), -O3 -march=native -fno-trapping-math -fno-math-errno, OpenMP, OMP_NUM_THREADS=$THREADS"
    if [ -x "$BUILD/fp32_peak" ]; then
        _peak=$(OMP_NUM_THREADS=$THREADS "$BUILD/fp32_peak")
        PEAK_GFLOPS=$(echo "$_peak" | tr ' ' '\n' | sed -n 's/^gflops=//p')
        echo "# fp32 peak of $THREADS cores (build/fp32_peak): $PEAK_GFLOPS GFLOP/s ($(echo "$_peak" | cut -d' ' -f4-6))"
    fi
}

torch_anchor() {
    if ! $PY -c 'import torch' 2> /dev/null; then
        echo "no ratio: $PY cannot import torch (apt-get install python3-torch, or make bench-deps)"
        return 1
    fi
    $TORCH $PY bench/torch_check.py --threads "$THREADS" ${PEAK_GFLOPS:+--peak-gflops "$PEAK_GFLOPS"}
}

LOAD_SAMPLE=${LOAD_SAMPLE:-1}
load_check() {
    _s0=$(head -n 1 /proc/stat)
    sleep "$LOAD_SAMPLE"
    _s1=$(head -n 1 /proc/stat)
    # cpu user nice system idle iowait irq softirq steal ...: idle = idle + iowait; steal is busy
    awk -v a="$_s0" -v b="$_s1" -v n="$(nproc)" -v t="$THREADS" -v what="$1" -v s="$LOAD_SAMPLE" \
        -v l="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
        split(a, x, " "); split(b, y, " "); tot = 0; idle = 0
        for (i = 2; i <= 9; i++) { d = y[i] - x[i]; tot += d; if (i == 5 || i == 6) idle += d }
        busy = tot > 0 ? n * (tot - idle) / tot : 0
        hot = n - busy < t - 0.5
        printf "# load before %s: load average %s, %.1f of %d cores busy over %s s%s\n", what, l, busy, n, s,
            hot ? sprintf(" BUSY: other work holds more than half a core of the %d threads used; this run'"'"'s time is unreliable", t) : ""
        exit hot }'
}

ct2_anchor() {
    if ! $CT2 -c 'import ctranslate2' 2> /dev/null; then
        echo "no ratio for CTranslate2: $CT2 cannot import ctranslate2 ($CT2 -m pip install ctranslate2, or make bench-deps)"
        return 1
    fi
    $CT2 bench/bench_ct2.py --check --weights "$1" --threads "$THREADS"
}
