// backend.cpp — choosing the device: make_backend (--device, --precision) and the loading of
// the CUDA backend.
//
// The CUDA backend (transformer.cu) is built as a shared library beside the programs,
// build/libtransformer_cuda.so, linked with cuBLASLt and the CUDA runtime. The programs link
// none of that: they look for an NVIDIA driver with a GPU first (libcuda.so.1, a few kB), and
// only then load the library. A CPU run, or a machine with the CUDA Toolkit but no GPU (CI),
// never maps the half-gigabyte of cuBLASLt into the process.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <string>

#include "transformer.h"
#include "cpu/amx.h"
#include "cpu/gemm_bf16.h"

// The library's entry point (transformer.cu), and the checksum of the interface headers it was
// built from (the Makefile's BACKEND_ABI, as this file's; 0: built outside the Makefile).
typedef Backend* (*CudaFactory)(int precision, std::string* error);
typedef unsigned (*CudaAbi)();
#ifndef BACKEND_ABI
#define BACKEND_ABI 0u
#endif

// Where a library of this build is: $env_var, else beside the executable (build/test_*), else
// in build/ below it (./train at the repository root); "" when absent.
std::string program_library_path(const char* file, const char* env_var) {
    if (const char* env = std::getenv(env_var)) return env;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    std::string dir = n > 0 ? std::string(exe, (size_t)n) : std::string(".");
    dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
    for (const std::string& p : {dir + "/" + file, dir + "/build/" + file})
        if (access(p.c_str(), R_OK) == 0) return p;
    return "";
}

static std::string cuda_library_path() {
    return program_library_path("libtransformer_cuda.so", "TRANSFORMER_CUDA_LIB");
}

// TRANSFORMER_CUDA_EMULATOR: the emulator's build of the library (make emulator:
// build/emu/libtransformer_cuda.so, test/cuda_emulator), whose kernels run on the CPU; it needs
// no driver. Tests only: it is no GPU.
static const char* emulator_library() {
    const char* lib = std::getenv("TRANSFORMER_CUDA_EMULATOR");
    return lib && *lib ? lib : nullptr;
}

bool cuda_built() { return emulator_library() || !cuda_library_path().empty(); }

// The number of GPUs the driver sees, through the driver library itself; -1 + *error when
// there is no driver.
static int driver_device_count(std::string* error) {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver) {
        *error = "no NVIDIA driver (libcuda.so.1 not found)";
        return -1;
    }
    auto init = (int (*)(unsigned))dlsym(driver, "cuInit");
    auto count = (int (*)(int*))dlsym(driver, "cuDeviceGetCount");
    int n = 0, status = init ? init(0) : -1;
    if (status != 0 || !count || count(&n) != 0) {
        *error = "the NVIDIA driver sees no usable GPU (cuInit returned " + std::to_string(status) + ")";
        return -1;
    }
    if (n == 0) *error = "the NVIDIA driver sees no GPU";
    return n;
}

std::unique_ptr<Backend> make_cuda_backend(Precision precision, std::string* error) {
    const std::string lib = emulator_library() ? emulator_library() : cuda_library_path();
    if (lib.empty()) {
        *error = "this build has no CUDA backend (nvcc was not found when it was built)";
        return nullptr;
    }
    if (!emulator_library() && driver_device_count(error) <= 0) return nullptr;
    void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);   // kept loaded: backends live on
    if (!handle) {
        *error = std::string("cannot load the CUDA backend: ") + dlerror();
        return nullptr;
    }
    auto factory = (CudaFactory)dlsym(handle, "transformer_cuda_backend");
    if (!factory) {
        *error = lib + " has no transformer_cuda_backend";
        return nullptr;
    }
    auto abi = (CudaAbi)dlsym(handle, "transformer_cuda_abi");
    const unsigned theirs = abi ? abi() : 1u;   // a library without the symbol predates the check
    if (theirs != BACKEND_ABI && theirs != 0u && BACKEND_ABI != 0u) {
        *error = lib + " was built from other sources than this program (interface checksum " + std::to_string(theirs) +
                 ", this program's " + std::to_string(BACKEND_ABI) + "): rebuild both (make)";
        return nullptr;
    }
    return std::unique_ptr<Backend>(factory((int)precision, error));
}

std::unique_ptr<Backend> make_backend(const std::string& device, const std::string& precision,
                                      std::string* error, std::string* note) {
    if (device != "auto" && device != "cpu" && device != "cuda") {
        *error = "--device must be auto, cpu or cuda, not '" + device + "'";
        return nullptr;
    }
    amx_from_environment();   // a malformed TRANSFORMER_AMX stops the program here, not mid-run
    bf16_kernel();            // and TRANSFORMER_BF16_KERNEL
    if (precision != "" && precision != "fp32" && precision != "bf16" && precision != "int8") {
        *error = "--precision must be fp32, bf16 or int8 (CPU), not '" + precision + "'";
        return nullptr;
    }
    if (device == "cuda" && precision == "int8") {
        *error = "--precision int8 runs on the CPU, not with --device cuda";
        return nullptr;
    }
    if (device != "cpu" && precision != "int8") {
        std::string why;
        auto gpu = make_cuda_backend(precision == "fp32" ? Precision::FP32 : Precision::BF16, &why);
        if (gpu) return gpu;
        if (device == "cuda") {
            *error = why;
            return nullptr;
        }
        if (note) *note = "no GPU (" + why + "): running on the CPU";
    }
    if (precision == "bf16") {   // the CPU's: bf16 products (AMX or AVX512-BF16 where the CPU has it)
        if (note && std::string(bf16_kernel()) == "sgemm")
            *note = (note->empty() ? "" : *note + "; ") +
                    bf16_kernel_reason() + ": --precision bf16 rounds the products' operands but runs them at fp32 speed";
        return make_cpu_backend(Precision::BF16);
    }
    return make_cpu_backend();   // int8: the caller quantizes once the weights are loaded
}
