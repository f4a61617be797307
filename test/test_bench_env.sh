#!/bin/sh
# test/test_bench_env.sh BUILD_DIR [PROGRAM_DIR] — the benchmarks' anchor checks: a benchmark
# prints a ratio against PyTorch or CTranslate2 only when that side runs at its best
# (bench/torch_check.py, bench/bench_ct2.py --check). Each check is run in a deliberately
# crippled environment and must print the refusal; the verdicts come from the libraries
# loaded and the backends selected, never from timing:
#   - bench/bench.sh train with PyTorch forced onto the reference BLAS (TORCH_BLAS_DIR):
#     the refusal naming the library, no ratio anywhere, PyTorch not run;
#   - OpenBLAS pinned to its Prescott kernel (OPENBLAS_CORETYPE), and tcmalloc left out;
#   - CTranslate2 forced to its generic kernels (CT2_FORCE_CPU_ISA=GENERIC);
#   - and bench/torch_env.sh's own environment passes the same checks when the packages of
#     `make bench-deps` are installed, and turns our thread governor off; without this
#     machine's fp32 peak (build/fp32_peak) the matmul's speed is unchecked: no ratio;
#   - bench_torch.py decode times the median of as many runs as bench_decode, and it and
#     bench_ct2.py take ours' batches with --batch-tokens (bench_translate_gpu.sh);
#   - bench_translate.sh (the CPU test set) in its smoke mode (SMOKE=1, a tiny model and 12
#     test lines at 40 tokens a batch): every decoder that runs here reports the same batches
#     (more than one) and the same warm-up as ours fp32, and the script says so; a load line
#     before each timed run; the same threads for all; and with PyTorch put back on batches of
#     100 sentences (a stand-in interpreter rewriting --batch-tokens), it says they differ.
#   - the "# CPU:" lines name the family, model and microarchitecture (bench/cpu_name.sh, on
#     saved /proc/cpuinfo excerpts).
# What cannot run here (no torch, no OpenBLAS, no ctranslate2, an older CPU) prints SKIP and
# why, and is not counted. Ends with "bench_env: N passed, M failed".
set -u
BUILD=${1:-build}
B=${2:-.}
PY=${PYTHON:-/usr/bin/python3}
CT2=${CT2_PYTHON:-python3}
LIB=/usr/lib/x86_64-linux-gnu
. test/check.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

refusal() { grep -m1 '^no ratio' "$1" | head -c 300; }
avx2=$(grep -m1 '^flags' /proc/cpuinfo | grep -qw avx2 && echo 1 || echo 0)

torch_checks() {
    # bench.sh end to end on the reference BLAS (the state of a fresh Debian with python3-torch).
    TORCH_BLAS_DIR=$LIB/blas BENCH_CONFIGS=tiny BUILD=$BUILD sh bench/bench.sh train "$BUILD" > "$T/bench.txt" 2>&1
    s=$?
    grep -q "^no ratio: PyTorch is running on $LIB/blas/libblas.so" "$T/bench.txt" &&
        grep -q '^tiny .*no ratio' "$T/bench.txt" && ! grep -Eq '[0-9]\.[0-9]+x' "$T/bench.txt" &&
        ! grep -q '^torch train' "$T/bench.txt" && [ $s -eq 0 ]
    check $? "bench.sh train, PyTorch on the reference BLAS: refusal, no ratio, PyTorch not run: $(refusal "$T/bench.txt")"
    grep -q '^# CPU: .* (family [0-9]* model [0-9]*' "$T/bench.txt" && grep -q '^# PyTorch [0-9]' "$T/bench.txt" &&
        grep -q '^# BLAS: ' "$T/bench.txt"
    check $? "bench.sh prints the environment it measured (CPU with family and model, cores, PyTorch version, BLAS): $(grep -m1 '^# CPU: ' "$T/bench.txt")"
    # the synthetic decode (bench.sh decode): PyTorch's time is the median of as many runs as ours
    runs=$("$BUILD/bench_decode" --help 2>&1 | sed -n 's/.*--repeats .*\[\([0-9]*\)\]$/\1/p')
    $PY bench/bench_torch.py decode --config tiny --sentences 2 --length 3 --threads 1 > "$T/decode.txt" 2>&1
    grep -q "^torch decode greedy .* median of ${runs:-?} runs" "$T/decode.txt" &&
        grep -q "^torch decode beam4 .* median of ${runs:-?} runs" "$T/decode.txt"
    check $? "bench_torch.py decode times the median of bench_decode's ${runs:-?} runs: $(grep -m1 -e '^torch decode beam4' -e Error "$T/decode.txt")"
    # --batch-tokens (bench_translate_gpu.sh): ours' batches, toolkit/decode.cpp's decode_sorted
    # (sorted by length, stable; sentences x longest <= N): lengths 3 5 5 9 2 at N = 10
    $PY -B -c 'import sys; sys.path.insert(0, "bench"); import bench_torch as b
sys.exit(list(b.sorted_batches([3, 5, 5, 9, 2], 100, 10)) != [[4, 0], [1, 2], [3]])' > "$T/batches.txt" 2>&1
    check $? "bench_torch.py --batch-tokens decodes in ours' batches $(tail -n 1 "$T/batches.txt")"

    . bench/torch_env.sh   # TORCH: the environment bench.sh gives PyTorch
    if [ ! -f "$LIB/openblas-openmp/libblas.so.3" ] || [ ! -f "$TCMALLOC" ]; then
        skip "OpenBLAS kernel, tcmalloc and the at-its-best environment: libopenblas0-openmp or" \
             "libgoogle-perftools4 not installed (make bench-deps)"
        return
    fi
    if [ "$avx2" = 1 ]; then
        env LD_LIBRARY_PATH="$LIB/openblas-openmp" LD_PRELOAD="$TCMALLOC" OPENBLAS_CORETYPE=Prescott \
            $PY bench/torch_check.py --no-speed > "$T/prescott.txt" 2>&1
        [ $? -eq 1 ] && grep -q '^no ratio: OpenBLAS runs its Prescott kernel' "$T/prescott.txt"
        check $? "OpenBLAS pinned to Prescott on an AVX2+ CPU: $(refusal "$T/prescott.txt")"
    else
        skip "OpenBLAS kernel check: this CPU has no AVX2, so Prescott may be its best kernel"
    fi
    $(echo "$TORCH" | sed 's/LD_PRELOAD=[^ ]*//') $PY bench/torch_check.py --no-speed > "$T/nomalloc.txt" 2>&1
    [ $? -eq 1 ] && grep -q '^no ratio: tcmalloc is not loaded' "$T/nomalloc.txt"
    check $? "without tcmalloc: $(refusal "$T/nomalloc.txt")"
    $TORCH $PY bench/torch_check.py --no-speed > "$T/best.txt" 2>&1
    check $? "bench/torch_env.sh's environment passes: $(grep -m1 -e '^anchor' -e '^no ratio' "$T/best.txt")"
    # the matmul timed but no fp32 peak to hold it against (BUILD without fp32_peak): no verdict of speed
    $TORCH $PY bench/torch_check.py --threads "$THREADS" > "$T/nopeak.txt" 2>&1
    [ $? -eq 1 ] && grep -q '^no ratio: no fp32 peak' "$T/nopeak.txt"
    check $? "the matmul with no fp32 peak to hold it against: $(grep -m1 -e '^anchor' -e '^no ratio' "$T/nopeak.txt")"
}

ct2_checks() {
    mkdir -p "$T/corpus"
    awk 'BEGIN { srand(5); split("sun moon star sky sea", w, " ");
        for (i = 0; i < 200; i++) { n = 2 + int(rand() * 4); s = "";
            for (j = 0; j < n; j++) s = s (j ? " " : "") w[1 + int(rand() * 5)];
            print s > "'"$T"'/corpus/train.en"; print s > "'"$T"'/corpus/train.es" } }'
    "$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 280 --data "$T/corpus" --out "$T/run" \
        --max-steps 2 --max-tokens 400 --no-eval > "$T/train.log" 2>&1
    M="$T/run/average.safetensors"
    [ -f "$M" ] || { check 1 "a tiny model for CTranslate2 to load: $(tail -n 1 "$T/train.log")"; return; }
    CT2_FORCE_CPU_ISA=GENERIC $CT2 bench/bench_ct2.py --check --weights "$M" > "$T/ct2.txt" 2>&1
    [ $? -eq 1 ] && grep -q '^no ratio for CTranslate2: its kernels run with ISA GENERIC' "$T/ct2.txt"
    check $? "CTranslate2 forced to its generic kernels: $(refusal "$T/ct2.txt")"
    $CT2 -B -c 'import sys; sys.path.insert(0, "bench"); import bench_ct2 as b
sys.exit(list(b.sorted_batches([3, 5, 5, 9, 2], 100, 10)) != [[4, 0], [1, 2], [3]])' > "$T/batches.txt" 2>&1
    check $? "bench_ct2.py --batch-tokens decodes in ours' batches $(tail -n 1 "$T/batches.txt")"
    grep -q '^# CTranslate2 [0-9]' "$T/ct2.txt"
    check $? "CTranslate2's version is printed: $(grep -m1 '^# CTranslate2 [0-9]' "$T/ct2.txt")"
    env -u CT2_FORCE_CPU_ISA -u CT2_USE_MKL -u MKL_ENABLE_INSTRUCTIONS -u MKL_CBWR \
        $CT2 bench/bench_ct2.py --check --weights "$M" > "$T/ct2best.txt" 2>&1
    check $? "CTranslate2 as installed passes: $(grep -m1 -e '^anchor' -e '^no ratio' "$T/ct2best.txt")"
}

# bench_translate.sh's smoke run: a tiny model, 12 test lines, batches of 40 tokens (3 batches)
translate_checks() {
    tiny_model "$T/tiny"
    [ -f "$T/tiny/run/average.safetensors" ] || { check 1 "a tiny model for bench_translate.sh: $(tail -n 1 "$T/tiny/run.log")"; return; }
    n=3 sides=1   # ours fp32, bf16, int8; PyTorch's two and CTranslate2's two (four in both its
    # layouts, on more than one core) where they import
    $PY -c 'import torch' 2> /dev/null && n=$((n + 2)) sides=$((sides + 1))
    $CT2 -c 'import ctranslate2' 2> /dev/null && n=$((n + $([ "$(nproc)" -gt 1 ] && echo 4 || echo 2))) sides=$((sides + 1))
    SMOKE=1 LOAD_SAMPLE=0.1 BATCH_TOKENS=40 DATA="$T/tiny/data" BUILD="$BUILD" \
        bash bench/bench_translate.sh "$T/tiny/run/average.safetensors" > "$T/translate.txt" 2>&1
    s=$?
    ok=0
    for k in greedy beam4; do
        lists=$(sed -n "s/^# batches $k, [^:]*: //p" "$T/translate.txt")
        [ "$(echo "$lists" | grep -c .)" -eq $n ] && [ "$(echo "$lists" | sort -u | wc -l)" -eq 1 ] &&
            [ "$(echo "$lists" | head -n 1 | cut -d';' -f1 | wc -w)" -ge 2 ] &&
            grep -q "^#   $k: the same batches for all $n decoders: " "$T/translate.txt" || ok=1
    done
    [ $s -eq 0 ] && [ $ok -eq 0 ]
    check $? "bench_translate.sh SMOKE=1: exit $s, the same batches and warm-up for all $n decoders: $(sed -n 's/^# batches greedy, ours fp32: //p' "$T/translate.txt")"
    [ "$(grep -c '^# load before ' "$T/translate.txt")" -eq $((2 * n)) ] && grep -q '^# load: ' "$T/translate.txt"
    check $? "bench_translate.sh checks the load before each of its $((2 * n)) timed runs ($(grep -c '^# load before ' "$T/translate.txt") lines)"
    th=$(grep '^# threads: ' "$T/translate.txt" | grep -oE '(=| )[0-9]+(;|$)' | tr -d '=; ')
    [ "$(echo "$th" | grep -c .)" -eq $sides ] && [ "$(echo "$th" | sort -u | wc -l)" -eq 1 ]
    check $? "bench_translate.sh: every decoder on the same threads: $(grep '^# threads: ' "$T/translate.txt")"
    # PyTorch back on 100-sentence batches (the script before 2026-11-30): the comparison says so
    if $PY -c 'import torch' 2> /dev/null; then
        cat > "$T/py100" << ZZ
#!/bin/sh
# $PY with bench_torch.py's --batch-tokens N replaced by --batch 100
prev=
for a; do
    shift
    if [ "\$prev" = --batch-tokens ]; then set -- "\$@" 100; prev=; continue; fi
    prev=\$a
    if [ "\$a" = --batch-tokens ]; then set -- "\$@" --batch; else set -- "\$@" "\$a"; fi
done
exec $PY "\$@"
ZZ
        chmod +x "$T/py100"
        SMOKE=1 LOAD_SAMPLE=0.1 BATCH_TOKENS=40 DATA="$T/tiny/data" BUILD="$BUILD" PYTHON="$T/py100" CT2_PYTHON=false \
            bash bench/bench_translate.sh "$T/tiny/run/average.safetensors" > "$T/translate100.txt" 2>&1
        s=$?
        [ $s -eq 0 ] && grep -q "^#   greedy: BATCHES DIFFER from ours fp32's (3 batches, .*PyTorch fp32's batches (1)" "$T/translate100.txt" &&
            ! grep -q "the same batches for all" "$T/translate100.txt"
        check $? "bench_translate.sh with PyTorch on 100-sentence batches: exit $s, $(grep -m1 'BATCHES DIFFER' "$T/translate100.txt" | cut -c1-160)"
    else
        skip "bench_translate.sh with PyTorch on 100-sentence batches: $PY cannot import torch"
    fi
}

# a comparison script run by hand (not through make) times ours at fixed threads too
(unset TRANSFORMER_THREADS_GOVERNOR; BUILD=$BUILD; . bench/torch_env.sh; [ "${TRANSFORMER_THREADS_GOVERNOR:-}" = 0 ] &&
    env | grep -q '^TRANSFORMER_THREADS_GOVERNOR=0$')
check $? "bench/torch_env.sh turns the thread governor off (TRANSFORMER_THREADS_GOVERNOR=0, exported)"

# The "# CPU:" lines name the machine by family and model (bench/cpu_name.sh): a VM's model name
# ("AMD EPYC") does not tell Zen 4 from Zen 5, whose peaks differ by 2x.
cpu_name_is() {   # VENDOR FAMILY MODEL NAME EXPECTED
    printf 'vendor_id\t: %s\ncpu family\t: %s\nmodel\t\t: %s\nmodel name\t: %s\n' "$1" "$2" "$3" "$4" > "$T/cpuinfo"
    got=$(sh bench/cpu_name.sh "$T/cpuinfo")
    [ "$got" = "$5" ]
    check $? "cpu_name.sh: $1 family $2 model $3 -> '$got' (expected '$5')"
}
cpu_name_checks() {
    cpu_name_is AuthenticAMD 25 17 "AMD EPYC" "AMD EPYC (family 25 model 17: Zen 4)"
    cpu_name_is AuthenticAMD 25 1 "AMD EPYC 7763" "AMD EPYC 7763 (family 25 model 1: Zen 3)"
    cpu_name_is AuthenticAMD 26 2 "AMD EPYC" "AMD EPYC (family 26 model 2: Zen 5)"
    cpu_name_is GenuineIntel 6 207 "Intel Xeon" "Intel Xeon (family 6 model 207: Emerald Rapids)"
    cpu_name_is GenuineIntel 6 42 "Old CPU" "Old CPU (family 6 model 42)"
}

if ! $PY -c 'import torch' 2> /dev/null; then
    skip "PyTorch anchor checks: $PY cannot import torch (apt-get install python3-torch)"
elif [ ! -f "$LIB/blas/libblas.so.3" ]; then
    skip "PyTorch anchor checks: no reference BLAS at $LIB/blas to cripple PyTorch with (libblas3)"
else
    torch_checks
fi
if ! $CT2 -c 'import ctranslate2' 2> /dev/null; then
    skip "CTranslate2 anchor checks: $CT2 cannot import ctranslate2 ($CT2 -m pip install ctranslate2)"
elif [ "$avx2" != 1 ]; then
    skip "CTranslate2 anchor checks: this CPU has no AVX2 (GENERIC may be its best)"
else
    ct2_checks
fi
translate_checks
cpu_name_checks

check_summary bench_env
