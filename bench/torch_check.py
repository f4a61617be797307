#!/usr/bin/python3
"""bench/torch_check.py -- is the PyTorch anchor at its best on this machine?

A ratio against PyTorch means something only when PyTorch runs as fast as this machine lets
it: Debian's python3-torch does its matrix products in whatever libblas.so.3 the loader
finds, and with the reference BLAS (Debian's default until libopenblas0-openmp is
installed) a training step is 20-50x slower than with the OpenMP build of OpenBLAS. The
benchmark scripts (bench/bench.sh, bench/bench_translate.sh) run this check in the same
environment as the PyTorch side (bench/torch_env.sh) and print a ratio only when it passes:

  1. the BLAS loaded into this process (/proc/self/maps) is the OpenMP OpenBLAS
     (/usr/lib/x86_64-linux-gnu/openblas-openmp/, Debian's libopenblas0-openmp);
  2. OpenBLAS runs a kernel for the CPU's widest vectors (AVX-512: SkylakeX, Cooperlake,
     SapphireRapids; AVX2: Haswell, Zen). OpenBLAS picks its kernel from the CPU model, and
     a model it does not know gets Prescott (SSE3), 10x slower: OpenBLAS 0.3.21 on an
     Emerald Rapids Xeon does that, so bench/torch_env.sh then names the kernel in
     OPENBLAS_CORETYPE (--coretype below says which);
  3. tcmalloc is loaded (libtcmalloc_minimal.so.4, Debian's libgoogle-perftools4);
  4. when 1-3 hold (and unless --no-speed): a 2048 x 2048 x 2048 fp32 torch.matmul on
     --threads threads (the cores the benchmark gives both sides; best of 5) reaches
     --min-fraction (default 0.3) of --peak-gflops, this machine's fp32 peak on those
     threads (build/fp32_peak: the larger of threads x its one-thread FMA rate and its
     all-thread rate; without --peak-gflops the speed is unchecked and there is no ratio).
     Measured on a quiet 2-core Emerald Rapids VM (peak 350 GFLOP/s):
     OpenBLAS with its SkylakeX kernel 312 GFLOP/s = 0.89, with the Prescott kernel it picks
     by itself 65.5 = 0.19, the reference BLAS 3.9 = 0.01. When 1-3 fail the
     verdict is known and the matmul is not timed (the reference BLAS would take a minute),
     unless --always-speed.

Prints the environment measured (CPU, threads, torch, BLAS and its version, allocator) as
"# ..." lines, then either "anchor: PyTorch at its best (...)" and exits 0, or
"no ratio: PyTorch is running on <BLAS>, ..." with every reason and exits 1.

    (bench/torch_env.sh prefix) /usr/bin/python3 bench/torch_check.py --threads 2 --peak-gflops 250
    /usr/bin/python3 bench/torch_check.py --no-speed     # the library checks only (tests)
    LD_LIBRARY_PATH=.../openblas-openmp python3 bench/torch_check.py --coretype
        prints the OPENBLAS_CORETYPE this CPU needs, or nothing when OpenBLAS's own choice
        is right (no torch needed)
"""
import argparse
import ctypes
import os
import subprocess
import sys
import time

OPENMP_OPENBLAS_DIR = "openblas-openmp"
ISA_RANK = {"sse": 0, "avx2": 1, "avx512": 2}
# OpenBLAS kernels (openblas_get_corename, lower case) by the vectors their sgemm uses.
KERNEL_ISA = {"skylakex": "avx512", "cooperlake": "avx512", "sapphirerapids": "avx512",
              "haswell": "avx2", "zen": "avx2"}
BEST_KERNEL = {"avx512": "SkylakeX", "avx2": "Haswell"}   # for a CPU OpenBLAS does not know


def loaded_libraries():
    """Real paths of the shared objects of interest mapped into this process."""
    keys = ("blas", "lapack", "mkl", "omp", "tcmalloc", "jemalloc")
    found = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if path.startswith("/") and any(k in os.path.basename(path).lower() for k in keys):
                found.add(os.path.realpath(path))
    return sorted(found)


def cpu_isa():
    """The widest vectors this CPU has: "avx512", "avx2" or "sse"."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return "avx512" if "avx512f" in flags else "avx2" if {"avx2", "fma"} <= flags else "sse"
    return "sse"


def kernel_problem(corename):
    """Why OpenBLAS's kernel is not the CPU's best, or None."""
    isa, kernel_isa = cpu_isa(), KERNEL_ISA.get(corename.lower(), "sse")
    if ISA_RANK[kernel_isa] >= ISA_RANK[isa]:
        return None
    return (f"OpenBLAS runs its {corename} kernel ({kernel_isa.upper()}) on a CPU with {isa.upper()} "
            f"(OPENBLAS_CORETYPE={BEST_KERNEL[isa]}; bench/torch_env.sh sets it when OpenBLAS does not "
            f"know the CPU)")


def suggested_coretype():
    """OPENBLAS_CORETYPE this machine needs ("" if OpenBLAS's own choice is right)."""
    os.environ.pop("OPENBLAS_CORETYPE", None)
    try:
        so = ctypes.CDLL("libopenblas.so.0")   # found through LD_LIBRARY_PATH, as torch finds it
        so.openblas_get_corename.restype = ctypes.c_char_p
        core = so.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return ""
    return BEST_KERNEL[cpu_isa()] if kernel_problem(core) else ""


def blas_library(libs):
    """The BLAS that torch's products run in: a mapped libblas/libopenblas/MKL, else what
    torch says it was built with (a BLAS linked into libtorch itself)."""
    import torch
    for lib in libs:
        name = os.path.basename(lib).lower()
        if name.startswith(("libblas", "libopenblas", "libmkl")):
            return lib
    for line in torch.__config__.show().splitlines():
        if "BLAS_INFO=" in line:
            return "built-in " + line.split("BLAS_INFO=")[1].split(",")[0]
    return "no BLAS found"


def openblas_config(lib):
    """OpenBLAS's own description ("OpenBLAS 0.3.21 DYNAMIC_ARCH ...") and the kernel core it
    chose, or None when lib is not OpenBLAS."""
    try:
        so = ctypes.CDLL(lib)
        so.openblas_get_config.restype = ctypes.c_char_p
        so.openblas_get_corename.restype = ctypes.c_char_p
        return so.openblas_get_config().decode().strip(), so.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return None


def matmul_gflops(n=2048, runs=5):
    """Best GFLOP/s of an n x n x n fp32 torch.matmul."""
    import torch
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)  # warm-up: threads started, pages touched
    best = 0.0
    for _ in range(runs):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        best = max(best, 2.0 * n ** 3 / (time.perf_counter() - t0) / 1e9)
    return best


def cpu_model():
    """The model name with its family, model and microarchitecture (bench/cpu_name.sh)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_name.sh")
    try:
        return subprocess.run(["sh", script], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown CPU"


def library_problems(blas, openblas, libs):
    """Reasons (strings) why the libraries or settings are not PyTorch's best; empty if none."""
    why = []
    if OPENMP_OPENBLAS_DIR not in blas:
        kind = ("the reference BLAS" if "/blas/" in blas else
                "OpenBLAS, pthreads build" if "openblas-pthread" in blas else "not the OpenMP OpenBLAS")
        why.append(f"PyTorch is running on {blas} ({kind}; needs libopenblas0-openmp, "
                   f"selected by bench/torch_env.sh; install: make bench-deps)")
    elif openblas and kernel_problem(openblas[1]):
        why.append(kernel_problem(openblas[1]))
    if not any("tcmalloc" in x for x in libs):
        why.append("tcmalloc is not loaded (libgoogle-perftools4; bench/torch_env.sh preloads "
                   "libtcmalloc_minimal.so.4)")
    return why


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads (default: all cores)")
    ap.add_argument("--peak-gflops", type=float, default=0,
                    help="this machine's fp32 peak on --threads threads (build/fp32_peak)")
    ap.add_argument("--min-fraction", type=float, default=0.3,
                    help="least fraction of the peak the matmul must reach (default 0.3)")
    ap.add_argument("--no-speed", action="store_true", help="skip the matmul: library checks only")
    ap.add_argument("--always-speed", action="store_true",
                    help="time the matmul even when the library checks already refuse")
    ap.add_argument("--coretype", action="store_true",
                    help="print the OPENBLAS_CORETYPE this CPU needs (empty: none) and exit")
    args = ap.parse_args()
    if args.coretype:
        print(suggested_coretype())
        return 0
    import torch
    torch.set_num_threads(args.threads)
    torch.ones(64, 64) @ torch.ones(64, 64)  # load the BLAS
    libs = loaded_libraries()
    blas = blas_library(libs)
    ob = openblas_config(blas) if blas.startswith("/") else None
    print(f"# CPU: {cpu_model()} ({cpu_isa().upper()}); {args.threads} of {os.cpu_count()} cores used; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"# PyTorch {torch.__version__} ({torch.__file__}), {torch.get_num_threads()} threads")
    print(f"# BLAS: {blas}" + (f" ({ob[0]}; kernel {ob[1]})" if ob else ""))
    print("# loaded: " + " ".join(libs))
    why = library_problems(blas, ob, libs)
    if args.always_speed or not (args.no_speed or why):
        gf = matmul_gflops()
        line = f"# torch.matmul 2048^3 fp32: {gf:.1f} GFLOP/s"
        if args.peak_gflops > 0:
            line += f" = {gf / args.peak_gflops:.2f} of the measured peak {args.peak_gflops:.1f} GFLOP/s"
            if gf < args.min_fraction * args.peak_gflops:
                why.append(f"its 2048^3 matmul runs at {gf:.1f} GFLOP/s, below {args.min_fraction:.2f} "
                           f"of this machine's fp32 peak ({args.peak_gflops:.1f} GFLOP/s; or the machine "
                           f"is busy: load average {os.getloadavg()[0]:.2f})")
        else:
            why.append(f"no fp32 peak to hold its {gf:.1f} GFLOP/s matmul against (--peak-gflops: "
                       f"bench/torch_env.sh measures it with $BUILD/fp32_peak, which is not built)")
        print(line)
    if why:
        print("no ratio: " + "; ".join(why))
        return 1
    print(f"anchor: PyTorch at its best (OpenMP OpenBLAS, kernel {ob[1] if ob else '?'}, tcmalloc, "
          f"{args.threads} threads"
          + (")" if args.no_speed else ", matmul speed checked)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
