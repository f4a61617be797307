# Makefile — builds the programs (train, translate, average, bleu, bpe) and the tests.
#
#   make                  the programs (CPU: g++ -O3 -march=native -fno-trapping-math -fno-math-errno, OpenMP when available)
#   make test             builds and runs every test (prints "tests: N passed, M failed, K skipped")
#   make fuzz             libFuzzer on every parser, FUZZ_SECONDS each (default 60; clang)
#   make test-emulated    only the GPU tests that make test runs on the CPU emulator (test/cuda_emulator)
#   make soak             kill -9 ./train at 20 random moments, resume, compare bitwise
#   make bench-deps       install what the benchmarks compare with (apt-get, pip; as CI would)
#   make bench            training-step speed, ours vs PyTorch on this machine (DEVICE=cuda: on the GPU)
#   make gpu-check        on a GPU machine: build, GPU tests, sanitizers, GPU benchmark, 2-min train
#   make gpu-pack         here, before that: the corpus and CTranslate2's wheel to carry, and the call
#   make bench-attention  on a GPU: the attention kernels alone at lengths 10-128, vs PyTorch
#   make bench-decode     decoding speed, ours vs PyTorch
#   make bench-translate  the same on the real test set with the trained model, and BLEU
#                         (DEVICE=cuda: on the GPU, and a synthetic base-model batch)
#   make bench-split-long ./translate --split-long on one line of 50k/100k/200k words
#   make bench-sentences  BLEU of long lines of several sentences: whole, --split-long, --split-sentences
#   make bench-ensemble   BLEU, chrF and speed of two or more models alone and as an ensemble (MODELS=...)
#   make bench-serve      ./translate --serve: lines/s and latency, 1/8/32 clients, vs stdin mode
#   make bench-bpe        BPE learn/encode speed, ours vs SentencePiece
#   make bench-gemm       matrix-product speed, ours vs OpenBLAS
#   make bench-gemm-int8  int8 linear layer (gemm_int8.cpp) speed vs our fp32 sgemm (and AMX vs VNNI)
#   make bench-gemm-bf16  the CPU's bf16 products (gemm_bf16.cpp) speed vs our fp32 sgemm
#   make bench-dist       data-parallel training: 1 and 2 MPI ranks on the CPU, all-reduce on paper
#   make data             the default English->Spanish corpus (data/corpus/default)
#   make reference        regenerate test/ref/* with the PyTorch reference (python3-torch)
#   make reference-check  regenerate into a temporary folder and compare with test/ref/*
#   make info             what the build detected (compiler, OpenMP, nvcc, BLAS)
#   make clean
#
# Variables: MPI=0 (no data parallelism even when mpicxx is found), HTTP=0 (./translate without
# --serve even when cpp-httplib is found), SANITIZE=1 (AddressSanitizer + UBSan, build in build/asan), BLAS=openblas
# (matrix products through OpenBLAS's cblas_sgemm instead of our own cpu/gemm.cpp),
# CXX, PYTHON (the interpreter with torch: Debian's /usr/bin/python3).

CXX ?= g++
PYTHON ?= /usr/bin/python3
WARN := -Wall -Wextra
# -fno-trapping-math: we never unmask floating-point exceptions, and without it GCC keeps the
# comparisons in exp_fast's clamps as branches, so the softmax, log-softmax and cross-entropy
# loops over the vocabulary stay scalar (7-10x slower); results are the same, flags aside.
# -fno-math-errno: no code reads errno after a math function, and with it GCC keeps std::sqrt a
# call for negative inputs, so Adam's loop over every parameter stayed scalar (2x slower).
CXXFLAGS_BASE := -std=c++17 -I. $(WARN) -fno-trapping-math -fno-math-errno

# OpenMP: used when the compiler accepts -fopenmp (checked by compiling a test program).
OPENMP := $(shell printf 'int main(){return 0;}' | $(CXX) -fopenmp -x c++ - -o /dev/null 2>/dev/null && echo -fopenmp)

# CUDA: nvcc on PATH (checked by running it) builds the CUDA backend (transformer.cu, linked
# with cuBLASLt) into every program; the CPU backend is always there, and a build without nvcc
# (or with CUDA=0, or a sanitizer build) is CPU-only. CUDA_ARCH picks the GPU code: sm_90
# (H100/H200) machine code plus PTX that newer GPUs compile at start.
NVCC := $(shell command -v nvcc 2>/dev/null)
NVCC_VERSION := $(if $(NVCC),$(shell $(NVCC) --version 2>/dev/null | grep -o 'release [0-9.]*'))
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
CUDA ?= $(if $(NVCC),1,0)
ifeq ($(SANITIZE),1)
  CUDA := 0
endif

# Programs go to the repository root (./train ...); sanitizer builds keep theirs in build/asan,
# at -O2: AddressSanitizer checks every access that remains, and -O1 left the matrix products'
# accumulators in (checked) memory: decoding's tests took twice as long, in CI's longest pass.
# _GLIBCXX_SANITIZE_VECTOR has libstdc++ mark a vector's spare capacity (size..capacity) as
# poisoned, so that AddressSanitizer sees an access past size() that is still inside the
# allocation (container-overflow); every object of a sanitizer build is compiled with it.
ASAN_VECTOR := -D_GLIBCXX_SANITIZE_VECTOR
ifeq ($(SANITIZE),1)
  BUILD := build/asan
  BIN := build/asan
  OPT := -O2 -g -march=native -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined $(ASAN_VECTOR)
else
  BUILD := build
  BIN := .
  OPT := -O3 -march=native
endif

ifeq ($(BLAS),openblas)
  BLAS_FLAGS := -DUSE_OPENBLAS
  BLAS_LIBS := -lopenblas
endif

CXXFLAGS := $(CXXFLAGS_BASE) $(OPT) $(OPENMP) $(BLAS_FLAGS)
LDLIBS := $(BLAS_LIBS)

LDLIBS += -ldl
ifeq ($(CUDA),1)
  CUDA_HOME := $(patsubst %/bin/,%,$(dir $(realpath $(NVCC))))
  CUDA_LIB := $(BUILD)/libtransformer_cuda.so
  NVCCFLAGS := -std=c++17 -O3 -I. $(CUDA_ARCH) -Xcompiler -fPIC
endif

# MPI (data-parallel ./train, toolkit/distributed.cpp): mpicxx on PATH (Open MPI's wrapper,
# asked for its flags: Debian's libopenmpi-dev) compiles distributed.cpp with MPI and links
# libmpi; without it (or MPI=0) ./train is single-process. NCCL (the GPU all-reduce): with
# the CUDA backend and nccl.h found (the CUDA Toolkit's include folder, /usr/include,
# /usr/local/include), build/libtransformer_nccl.so, which ./train loads in GPU MPI runs.
MPICXX := $(shell command -v mpicxx 2>/dev/null)
MPI ?= $(if $(MPICXX),1,0)
ifeq ($(MPI),1)
  MPI_CFLAGS := -DTRANSFORMER_MPI -DOMPI_SKIP_MPICXX $(shell $(MPICXX) --showme:compile 2>/dev/null)
  MPI_LIBS := $(filter-out -lmpi_cxx,$(shell $(MPICXX) --showme:link 2>/dev/null))
  LDLIBS += $(MPI_LIBS)
endif
ifeq ($(CUDA),1)
  NCCL_H := $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h))
  ifneq ($(NCCL_H),)
    NCCL_HOME := $(patsubst %/include/,%,$(dir $(realpath $(NCCL_H))))
    # the library beside the header (lib64, lib) or in the system's folder; a header alone builds nothing
    NCCL_LIBDIR := $(patsubst %/,%,$(dir $(firstword $(wildcard $(NCCL_HOME)/lib64/libnccl.so $(NCCL_HOME)/lib/libnccl.so \
                   /usr/lib/x86_64-linux-gnu/libnccl.so /usr/lib64/libnccl.so))))
    NCCL_LIB := $(if $(NCCL_LIBDIR),$(BUILD)/libtransformer_nccl.so)
  endif
endif

# HTTP (./translate --serve, cli/serve.cpp): Debian's cpp-httplib, found by its pkg-config file or
# its header; HTTP=0 (or neither found, as on a GPU machine's image) builds ./translate without
# the server, and --serve then says so.
HTTP ?= $(if $(or $(shell pkg-config --exists cpp-httplib 2>/dev/null && echo y),$(wildcard /usr/include/httplib.h /usr/local/include/httplib.h)),1,0)
ifeq ($(HTTP),1)
  HTTP_CFLAGS := -DTRANSFORMER_HTTP $(shell pkg-config --cflags cpp-httplib 2>/dev/null)
  HTTP_LIBS := $(or $(shell pkg-config --libs cpp-httplib 2>/dev/null),-lcpp-httplib) -pthread
endif

# The model library: every layer, the sequence, checkpoints, decoding, data, tokenizer, BLEU.
MODEL_SRC := transformer.cpp model/backend.cpp model/config.cpp model/model.cpp model/checkpoint.cpp \
             model/profile.cpp cpu/gemm.cpp cpu/gemm_int8.cpp cpu/gemm_bf16.cpp
TEXT_SRC := tokenizer.cpp toolkit/decode.cpp toolkit/parallel_data.cpp toolkit/bleu_score.cpp toolkit/ter_score.cpp toolkit/significance.cpp \
            toolkit/svg.cpp toolkit/attention_view.cpp toolkit/curves.cpp \
            toolkit/trainer.cpp toolkit/distributed.cpp toolkit/batch_queue.cpp toolkit/thread_governor.cpp
LIB_SRC := $(MODEL_SRC) $(TEXT_SRC)
LIB_OBJ := $(LIB_SRC:%.cpp=$(BUILD)/%.o)
# The same objects as one archive, so that a program links only those it uses, and with --as-needed
# only the shared libraries those need: ./translate, ./average, ./bleu and ./bpe do not take
# distributed.o, so they do not depend on libmpi (only ./train and what trains do).
LIB_A := $(BUILD)/libtransformer.a
LINK_AS_NEEDED := -Wl,--as-needed

PROGRAMS := train translate average bleu bpe
TESTS := test_core test_ops test_decode test_train test_gemm test_gemm_int8 test_gemm_bf16 test_tokenizer test_sentences test_data test_attention test_openmp_wait \
         test_bleu test_cuda
# libFuzzer targets (test/fuzz/fuzz_*.cpp); make test replays their seeds and regression inputs.
FUZZ_TARGETS := tokenizer vocab safetensors checkpoint parallel translate metrics

.PHONY: FORCE all test test-asan test-emulated emulator fuzz soak mutants mutants-sweep gpu-check gpu-pack bench bench-attention bench-deps bench-decode bench-translate bench-split-long bench-sentences bench-ensemble bench-serve \
        bench-bpe bench-gemm bench-gemm-int8 bench-gemm-bf16 bench-dist data reference reference-check info clean
all: $(PROGRAMS:%=$(BIN)/%)

# keep object files of tests and benchmarks between runs (.PRECIOUS on the pattern of the rule
# that makes them, as written there, and on the fuzz build's below; not an empty .SECONDARY:
# that makes every file secondary, the flags stamp below included, and make does not rebuild a
# target for a missing secondary prerequisite, so a change of flags rebuilt nothing)
.PRECIOUS: $(BUILD)/%.o

# Objects are rebuilt when the flags change (e.g. CUDA=0 after a CUDA build): a stamp per set.
FLAGS_STAMP := $(BUILD)/.flags-$(shell echo '$(CXX) $(CXXFLAGS) $(NVCCFLAGS) $(MPI_CFLAGS)' | md5sum | cut -c1-12)
$(FLAGS_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/.flags-*
	@touch $@

# Header dependencies are generated by the compiler (-MMD -MP: one .d file per object, listing
# every header it includes), so an edited header rebuilds exactly the objects that include it.
$(BUILD)/%.o: %.cpp $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -MMD -MP -c $< -o $@
-include $(wildcard $(BUILD)/*.d $(BUILD)/*/*.d $(BUILD)/*/*/*.d)

# The interface between the programs and the CUDA backend (the headers both compile): a
# checksum of its text, built into each side, which the loader compares (model/backend.cpp), so
# that a program and a library built from different sources refuse to run together instead of
# calling through a changed Backend (a stale build/bench_decode crashed so on a new library).
BACKEND_ABI := $(shell cat transformer.h numerics.h model/search.h 2> /dev/null | cksum | cut -d' ' -f1)
$(BUILD)/model/backend.o: CXXFLAGS += -DBACKEND_ABI=$(BACKEND_ABI)u
$(BUILD)/model/backend.o: transformer.h numerics.h model/search.h

# The CUDA backend: a shared library the programs load only on a machine with a GPU
# (model/backend.cpp), so that a CPU run never maps cuBLASLt.
$(BUILD)/libtransformer_cuda.so: transformer.cu transformer.h numerics.h model/search.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -DBACKEND_ABI=$(BACKEND_ABI)u -shared $< -o $@ -L$(CUDA_HOME)/lib64 -Xlinker -rpath=$(CUDA_HOME)/lib64 -lcublasLt

# The same transformer.cu built for the CUDA emulator (test/cuda_emulator): g++ compiles it as C++
# against the emulator's stand-ins for the CUDA headers and its kernels run on the CPU, so that
# the GPU tests run on a machine without a GPU or nvcc (make test runs them; the programs load
# the library named by TRANSFORMER_CUDA_EMULATOR). The one kernel launch and the extern
# __shared__ arrays are rewritten first; the build fails if one is left. In a SANITIZE=1 build
# it has AddressSanitizer and UBSan too, which see a kernel reading past an allocation.
EMU_BUILD := $(BUILD)/emu
EMU_LIB := $(EMU_BUILD)/libtransformer_cuda.so
comma := ,
# (-Wno-unknown-pragmas: g++ ignores CUDA's #pragma unroll, a hint to nvcc only.)
EMU_FLAGS := -std=c++17 -I test/cuda_emulator/include -I. $(WARN) -Wno-unused-parameter -Wno-unknown-pragmas -fPIC -g \
             -fno-omit-frame-pointer $(if $(filter 1,$(SANITIZE)),-fsanitize=address$(comma)undefined -fno-sanitize-recover=undefined $(ASAN_VECTOR)) -O2
# kernel<<<config>>>(args) -> ::cuda_emulator::launch(kernel, ::cuda_emulator::Config{config}, args);
# extern __shared__ [__align__(n)] T name[]; -> T* name = (T*)::cuda_emulator::dynamic_shared();
EMU_KERNEL := ([A-Za-z_][A-Za-z_0-9:]*(<[^<>]*>)?)
EMU_REWRITE := sed -E -e 's/$(EMU_KERNEL)<<<(.*)>>>\(\)/::cuda_emulator::launch(\1, ::cuda_emulator::Config{\3})/' \
    -e 's/$(EMU_KERNEL)<<<(.*)>>>\(/::cuda_emulator::launch(\1, ::cuda_emulator::Config{\3}, /' \
    -e 's/extern __shared__ (__align__\([0-9]+\) )?([A-Za-z_0-9]+) ([A-Za-z_0-9]+)\[\];/\2* \3 = (\2*)::cuda_emulator::dynamic_shared();/'
$(EMU_BUILD)/%_emu.cpp: %.cu Makefile
	@mkdir -p $(dir $@)
	$(EMU_REWRITE) $< > $@.tmp
	@! grep -nE '^([^/]|/[^/])*(<<<|extern __shared__)' $@.tmp || { echo "$@: a launch or extern __shared__ the emulator build cannot rewrite"; rm -f $@.tmp; exit 1; }
	mv $@.tmp $@
# (the stand-in CUDA headers too: a change to one, such as mma.h, rebuilds what includes them)
EMU_HEADERS := test/cuda_emulator/emulator.h $(wildcard test/cuda_emulator/include/*.h test/cuda_emulator/include/*/*.cuh)
$(EMU_LIB): $(EMU_BUILD)/transformer_emu.cpp test/cuda_emulator/emulator.cpp $(EMU_HEADERS) transformer.h numerics.h model/search.h
	$(CXX) $(EMU_FLAGS) -DBACKEND_ABI=$(BACKEND_ABI)u -shared $(EMU_BUILD)/transformer_emu.cpp test/cuda_emulator/emulator.cpp -o $@ -ldl -pthread
# The emulator checked on its own (kernels with known results, limits, the faults it stops on).
$(BUILD)/test_emulator: $(EMU_BUILD)/test/cuda_emulator/test_emulator_emu.cpp test/cuda_emulator/emulator.cpp $(EMU_HEADERS) test/check.h
	$(CXX) $(EMU_FLAGS) $< test/cuda_emulator/emulator.cpp -o $@ -ldl -pthread
# NCCL's all-reduce (toolkit/nccl_allreduce.cu) for the emulator, against the stand-in nccl.h
# that sums over MPI, so that a GPU MPI run of ./train takes its NCCL path here (an MPI build).
EMU_NCCL_LIB := $(if $(filter 1,$(MPI)),$(EMU_BUILD)/libtransformer_nccl.so)
$(EMU_BUILD)/libtransformer_nccl.so: toolkit/nccl_allreduce.cu test/cuda_emulator/emulator.cpp $(EMU_HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_FLAGS) $(MPI_CFLAGS) -shared -x c++ toolkit/nccl_allreduce.cu -x none test/cuda_emulator/emulator.cpp -o $@ $(MPI_LIBS) -ldl -pthread
emulator: $(EMU_LIB) $(BUILD)/test_emulator $(EMU_NCCL_LIB)


# The metrics reproduce sacreBLEU's Python arithmetic to the last bit: no fused multiply-adds.
$(BUILD)/toolkit/bleu_score.o $(BUILD)/toolkit/ter_score.o $(BUILD)/toolkit/significance.o: CXXFLAGS += -ffp-contract=off

# Only distributed.cpp sees mpi.h.
$(BUILD)/toolkit/distributed.o: CXXFLAGS += $(MPI_CFLAGS)

# The NCCL all-reduce (toolkit/nccl_allreduce.cu), loaded by ./train in GPU MPI runs.
$(BUILD)/libtransformer_nccl.so: toolkit/nccl_allreduce.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -I$(NCCL_HOME)/include -shared $< -o $@ -L$(NCCL_LIBDIR) -Xlinker -rpath=$(NCCL_LIBDIR) -lnccl

$(LIB_A): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(PROGRAMS:%=$(BIN)/%): $(BIN)/%: $(BUILD)/cli/%.o $(LIB_A) | $(CUDA_LIB) $(NCCL_LIB)
	$(CXX) $(CXXFLAGS) $(filter %.o,$^) $(filter %.a,$^) -o $@ $(LINK_AS_NEEDED) $(LDLIBS)

# ./translate --serve: cli/serve.cpp with Debian's cpp-httplib (libcpp-httplib-dev: httplib.h and
# its compiled part, libcpp-httplib.so), flags from its pkg-config file. HTTP_LIBS (defined
# above: HTTP=1 when found) is empty without it, and serve.cpp then only refuses --serve.
$(BUILD)/cli/serve.o: CXXFLAGS += $(HTTP_CFLAGS)
$(BUILD)/cli/serve.o: $(BUILD)/.http   # holds HTTP's value: rewritten (and serve.o rebuilt) when it changes
$(BUILD)/.http: FORCE
	@mkdir -p $(BUILD)
	@echo $(HTTP) | cmp -s - $@ || echo $(HTTP) > $@
FORCE:
$(BIN)/translate: $(BUILD)/cli/serve.o
$(BIN)/translate: LDLIBS += $(HTTP_LIBS)
# ./translate as built without cpp-httplib (only serve.cpp differs): make test checks its refusal.
$(BUILD)/nohttp/serve.o: cli/serve.cpp $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/translate_nohttp: $(BUILD)/cli/translate.o $(BUILD)/nohttp/serve.o $(LIB_A) | $(CUDA_LIB)
	$(CXX) $(CXXFLAGS) $(filter %.o,$^) $(filter %.a,$^) -o $@ $(LINK_AS_NEEDED) $(LDLIBS)
# the line-handling fuzz target includes cli/translate.cpp, so it links the server too
$(BUILD)/fuzz_replay_translate: $(BUILD)/cli/serve.o
$(BUILD)/fuzz_replay_translate: LDLIBS += $(HTTP_LIBS)

$(BUILD)/test_%: $(BUILD)/test/test_%.o $(LIB_A) | $(CUDA_LIB)
	$(CXX) $(CXXFLAGS) $(filter %.o,$^) $(filter %.a,$^) -o $@ $(LINK_AS_NEEDED) $(LDLIBS)

$(BUILD)/bench_%: $(BUILD)/bench/bench_%.o $(LIB_A) | $(CUDA_LIB)
	$(CXX) $(CXXFLAGS) $(filter %.o,$^) $(filter %.a,$^) -o $@ $(LINK_AS_NEEDED) $(LDLIBS)

# A fuzz target without libFuzzer: replays the inputs it is given (test/fuzz/replay_main.cpp).
$(BUILD)/fuzz_replay_%: $(BUILD)/test/fuzz/fuzz_%.o $(BUILD)/test/fuzz/replay_main.o $(LIB_A) | $(CUDA_LIB)
	$(CXX) $(CXXFLAGS) $(filter %.o,$^) $(filter %.a,$^) -o $@ $(LINK_AS_NEEDED) $(LDLIBS)

# The CPU kernels again for each x86-64 instruction set they are written for (cpu/gemm.cpp:
# AVX-512, else AVX2 + FMA, else plain C++; cpu/gemm_int8.cpp: AVX-512 VNNI (and AMX), else AVX2,
# else plain C++; cpu/gemm_bf16.cpp: AMX with AVX-512, else sgemm on rounded operands).
# -march=native builds only the first this machine has, so test_gemm.ISA, test_gemm_int8.ISA
# and test_gemm_bf16.ISA build each of them; run_tests.sh runs those the CPU can and says SKIP
# for the others (it reads the flags from /proc/cpuinfo).
ifeq ($(shell uname -m),x86_64)
  KERNEL_ISAS := avx512 avx2 plain
  ISA_TESTS := $(foreach t,gemm gemm_int8 gemm_bf16,$(KERNEL_ISAS:%=$(BUILD)/test_$(t).%))
endif
ISA_FLAGS_avx512 := -march=x86-64-v4 -mavx512vnni
ISA_FLAGS_avx2 := -march=x86-64-v3
ISA_FLAGS_plain := -march=x86-64
$(BUILD)/test_gemm.%: test/test_gemm.cpp cpu/gemm.cpp cpu/gemm.h cpu/kernel_common.h test/check.h test/gemm_case.h
	@mkdir -p $(BUILD)
	$(CXX) $(CXXFLAGS) $(ISA_FLAGS_$*) -mtune=generic test/test_gemm.cpp cpu/gemm.cpp -o $@
$(BUILD)/test_gemm_int8.%: test/test_gemm_int8.cpp cpu/gemm_int8.cpp cpu/gemm_int8.h cpu/amx.h cpu/kernel_common.h test/check.h test/cpu_flags.h
	@mkdir -p $(BUILD)
	$(CXX) $(CXXFLAGS) $(ISA_FLAGS_$*) -mtune=generic test/test_gemm_int8.cpp cpu/gemm_int8.cpp -o $@
$(BUILD)/test_gemm_bf16.%: test/test_gemm_bf16.cpp cpu/gemm_bf16.cpp cpu/gemm_bf16.h cpu/gemm.cpp cpu/gemm.h cpu/amx.h cpu/kernel_common.h test/check.h test/cpu_flags.h test/gemm_case.h
	@mkdir -p $(BUILD)
	$(CXX) $(CXXFLAGS) $(ISA_FLAGS_$*) -mtune=generic test/test_gemm_bf16.cpp cpu/gemm_bf16.cpp cpu/gemm.cpp -o $@

# The tests run from the repository root; test/run_tests.sh adds up their closing lines. They
# run two suites at a time (TEST_JOBS; 1: one at a time), which takes make test on 2 cores from
# about 11 minutes to 8, and CI's test-asan (the same under the sanitizer, test/run_tests.sh
# skipping there the four reversed runs of test_ops) from 33 to 24 (2026-12-04).
TEST_JOBS ?= 2
test: $(TESTS:%=$(BUILD)/%) $(ISA_TESTS) $(PROGRAMS:%=$(BIN)/%) $(BUILD)/bench_train $(BUILD)/bench_attention $(BUILD)/bench_decode $(BUILD)/fp32_peak $(BUILD)/translate_nohttp \
      $(FUZZ_TARGETS:%=$(BUILD)/fuzz_replay_%) $(EMU_LIB) $(BUILD)/test_emulator $(EMU_NCCL_LIB)
	@SANITIZED=$(if $(filter 1,$(SANITIZE)),1,0) TEST_JOBS=$(TEST_JOBS) sh test/run_tests.sh $(BUILD) $(BIN)

# Only the suites that run transformer.cu on the CPU emulator (part of make test).
EMULATED_SUITES := emulator ops_emulated_fp32 ops_emulated_bf16 cuda_emulated \
                   ops_emulated_batched_bf16 cuda_emulated_batched ops_emulated_tiled_bf16 cuda_emulated_tiled \
                   ops_emulated_fused_w4_bf16 ops_emulated_fused_w8_bf16 \
                   emulator_reversed ops_emulated_reversed_fp32 ops_emulated_reversed_bf16 \
                   ops_emulated_reversed_batched_bf16 ops_emulated_reversed_tiled_bf16 cli_cuda_emulated \
                   dist_cuda_emulated serve_cuda_emulated
test-emulated: $(BUILD)/test_ops $(BUILD)/test_cuda $(PROGRAMS:%=$(BIN)/%) $(EMU_LIB) $(BUILD)/test_emulator $(EMU_NCCL_LIB)
	@SUITES="$(EMULATED_SUITES)" TEST_JOBS=$(TEST_JOBS) sh test/run_tests.sh $(BUILD) $(BIN)

# The kill -9 soak: SIGKILL ./train at 20 random moments, resume each time, every checkpoint
# must load, the end bitwise equal to an uninterrupted run (make test runs it with 3 kills).
soak: $(BIN)/train $(BIN)/translate
	@bash test/soak.sh 20 $(BIN)

# The same tests under AddressSanitizer and UBSan.
test-asan:
	$(MAKE) SANITIZE=1 test

# Fuzzing with libFuzzer (Debian's clang and libclang-rt-dev), ASan and UBSan, CPU-only:
# `make fuzz FUZZ_SECONDS=600` runs each target of FUZZ_TARGETS (FUZZ=name for one), two at a
# time (FUZZ_JOBS=1: in turn), from its seeds in test/fuzz/NAME/; the corpus grows in build/fuzz/corpus/NAME and findings
# land in build/fuzz/findings/ (test/fuzz/run_fuzz.sh prints executions and findings).
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 2
FUZZ ?= $(FUZZ_TARGETS)
FUZZ_CXX ?= clang++
FUZZ_BUILD := build/fuzz
FUZZ_FLAGS := -std=c++17 -I. $(WARN) -Wno-unknown-pragmas -Wno-pass-failed -Wno-unknown-warning-option -O1 -g -march=native -fopenmp \
              -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined $(ASAN_VECTOR)
$(FUZZ_BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
.PRECIOUS: $(FUZZ_BUILD)/%.o
-include $(wildcard $(FUZZ_BUILD)/*.d $(FUZZ_BUILD)/*/*.d $(FUZZ_BUILD)/*/*/*.d)
$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/test/fuzz/fuzz_%.o $(LIB_SRC:%.cpp=$(FUZZ_BUILD)/%.o)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -fsanitize=fuzzer $^ -o $@ -ldl $(FUZZ_LIBS)
$(FUZZ_BUILD)/cli/serve.o: FUZZ_FLAGS += $(HTTP_CFLAGS)
$(FUZZ_BUILD)/fuzz_translate: $(FUZZ_BUILD)/cli/serve.o
$(FUZZ_BUILD)/fuzz_translate: FUZZ_LIBS += $(HTTP_LIBS)

fuzz: $(FUZZ:%=$(FUZZ_BUILD)/fuzz_%)
	@FUZZ_JOBS=$(FUZZ_JOBS) bash test/fuzz/run_fuzz.sh $(FUZZ_SECONDS) $(FUZZ)

# The benchmarks time a fixed thread count, the same as the side they compare with: the thread
# governor (toolkit/thread_governor.h) stays off.
bench bench-attention bench-decode bench-translate bench-split-long bench-sentences bench-ensemble bench-serve bench-dist: export TRANSFORMER_THREADS_GOVERNOR = 0

# What the benchmarks compare with, installed as CI installs its dependencies (root, Debian):
# the OpenMP OpenBLAS and tcmalloc that PyTorch needs to run at its best, PyTorch itself,
# SentencePiece, and CTranslate2 and numpy from PyPI for the `python3` on PATH. The
# benchmarks check at run time that these are in use and print no ratio otherwise.
bench-deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    libopenblas0-openmp libopenblas-openmp-dev libgoogle-perftools4 python3-torch python3-numpy \
	    sentencepiece > /dev/null
	python3 -m pip install -q ctranslate2 numpy

# This machine's fp32 peak (the benchmarks hold PyTorch's matmul against it).
$(BUILD)/fp32_peak: bench/fp32_peak.cpp
	@mkdir -p $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@

# DEVICE=cuda: on the GPU, base and big against PyTorch eager and torch.compile (bench/bench_train_gpu.sh)
bench: $(BUILD)/bench_train $(BUILD)/fp32_peak
	@$(if $(filter cuda,$(DEVICE)),sh bench/bench_train_gpu.sh $(BUILD),BUILD=$(BUILD) sh bench/bench.sh train $(BUILD))

# the attention kernels alone at lengths 10 to 128 on the GPU (TRANSFORMER_ATTENTION's choices), beside PyTorch's
bench-attention: $(BUILD)/bench_attention
	@sh bench/bench_attention.sh $(BUILD)

bench-decode: $(BUILD)/bench_decode $(BUILD)/fp32_peak
	@BUILD=$(BUILD) sh bench/bench.sh decode $(BUILD)

# the real test set with a trained model (MODEL=..., default runs/default/average.safetensors);
# DEVICE=cuda: on the GPU, with a synthetic base-model batch first (bench/bench_translate_gpu.sh)
bench-translate: $(BUILD)/bench_decode $(BUILD)/fp32_peak $(BIN)/bpe $(BIN)/bleu
	@BUILD=$(BUILD) bash bench/$(if $(filter cuda,$(DEVICE)),bench_translate_gpu.sh,bench_translate.sh) $(MODEL)

# Mutation testing: each wrong edit of test/mutants.txt (a scale left out, a mask off by one, ...)
# made in a copy of the tree (build/mutants) must fail the suites it names; MUTANTS=a,b runs
# those alone. About 35-45 minutes on 2 cores (test/mutants.py).
mutants:
	@python3 test/mutants.py $(if $(MUTANTS),--only $(MUTANTS))

# Mutants made by flipping each comparison, logical operator and +-1 of some lines, one at a time:
#   make mutants-sweep SWEEP=model/search.h:14-131 SWEEP_SUITES="ops decode"
# A survivor changes nothing the program does, or is a mistake no test sees (read each).
mutants-sweep:
	@test -n "$(SWEEP)" || { echo 'make mutants-sweep needs SWEEP=FILE:FIRST-LAST and SWEEP_SUITES="suite ..."' >&2; exit 2; }
	@python3 test/mutants.py --sweep "$(SWEEP)" --suites "$(SWEEP_SUITES)"

# The one command for a machine with a GPU: clean sm_90 build, GPU tests, compute-sanitizer,
# the GPU benchmark and a 2-minute ./train; logs in $(LOG_DIR) when set (test/gpu_check.sh).
gpu-check:
	@bash test/gpu_check.sh

# Here, before a GPU session: the corpus and CTranslate2's wheel that gpu-check needs on a GPU
# machine without a package archive, the size check, and the device call to make (test/gpu_pack.sh).
gpu-pack:
	@bash test/gpu_pack.sh

# one very long line (MODEL=..., default runs/default/average.safetensors; skipped without it)
bench-split-long: $(BIN)/translate
	@bash bench/bench_split_long.sh $(MODEL)

# BLEU of long lines of several sentences: whole, --split-long, --split-sentences (MODEL=...)
bench-sentences: $(BIN)/translate $(BIN)/bleu
	@bash bench/bench_sentences.sh $(MODEL)

# each of MODELS (two or more checkpoints with one tokenizer) alone and all as an ensemble:
# BLEU, chrF, time, memory (skipped, saying so, without them)
bench-ensemble: $(BIN)/translate $(BIN)/bleu
	@bash bench/bench_ensemble.sh $(MODELS)

# ./translate --serve against stdin mode (MODEL=..., default runs/default/average.safetensors;
# skipped without it): 1, 8 and 32 clients, dynamic batching on and off (bench/bench_serve.py)
bench-serve: $(BIN)/translate
	@TRANSLATE=$(BIN)/translate python3 bench/bench_serve.py $(MODEL)

bench-bpe: $(BIN)/bpe data
	@bash bench/bench_bpe.sh

$(BUILD)/bench_gemm_blas: bench/bench_gemm.cpp cpu/gemm.cpp cpu/gemm.h
	@mkdir -p $(BUILD)
	$(CXX) $(CXXFLAGS) bench/bench_gemm.cpp cpu/gemm.cpp -o $@ -lopenblas

# OpenBLAS at its best: the OpenMP build, and its kernel named when it does not know the CPU
# (bench/torch_check.py --coretype; OpenBLAS 0.3.21 would fall back to Prescott on new Xeons).
OPENBLAS_DIR := /usr/lib/x86_64-linux-gnu/openblas-openmp
bench-gemm: $(BUILD)/bench_gemm_blas
	@core=$$(LD_LIBRARY_PATH=$(OPENBLAS_DIR) $(PYTHON) bench/torch_check.py --coretype 2> /dev/null); \
	echo "# CPU: $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); 2 threads; OpenBLAS kernel: $${core:-its own choice}"; \
	env -u OPENBLAS_CORETYPE LD_LIBRARY_PATH=$(OPENBLAS_DIR) $${core:+OPENBLAS_CORETYPE=$$core} \
	    OMP_NUM_THREADS=2 $(BUILD)/bench_gemm_blas

# Needs only the two matrix products (not the rest of the model library).
$(BUILD)/bench_gemm_int8: $(BUILD)/bench/bench_gemm_int8.o $(BUILD)/cpu/gemm.o $(BUILD)/cpu/gemm_int8.o
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

bench-gemm-int8: $(BUILD)/bench_gemm_int8
	OMP_NUM_THREADS=2 $(BUILD)/bench_gemm_int8

$(BUILD)/bench_gemm_bf16: $(BUILD)/bench/bench_gemm_bf16.o $(BUILD)/cpu/gemm.o $(BUILD)/cpu/gemm_bf16.o
	$(CXX) $(CXXFLAGS) $^ -o $@ $(LDLIBS)

bench-gemm-bf16: $(BUILD)/bench_gemm_bf16
	OMP_NUM_THREADS=2 $(BUILD)/bench_gemm_bf16

# ./train with 1 and 2 MPI ranks on the CPU (step time, bitwise agreement), and the all-reduce's
# share of a step on paper for base and big on 8 GPUs (NVLink 4, InfiniBand NDR).
bench-dist: $(BIN)/train
	@bash bench/bench_dist.sh $(BIN)

data:
	python3 data/make_corpus.py

reference:
	$(PYTHON) test/reference.py

reference-check:
	$(PYTHON) test/reference.py --check

info:
	@echo "compiler: $(CXX) ($$($(CXX) -dumpfullversion))"
	@echo "flags:    $(CXXFLAGS)"
	@echo "OpenMP:   $(if $(OPENMP),yes ($(OPENMP)),no: serial build)"
	@echo "nvcc:     $(if $(NVCC),$(NVCC) ($(NVCC_VERSION)),not found)"
	@echo "CUDA:     $(if $(filter 1,$(CUDA)),$(CUDA_LIB) ($(CUDA_ARCH); cuBLASLt from $(CUDA_HOME)); loaded when a GPU is present,CPU-only build)"
	@echo "BLAS:     $(if $(BLAS_FLAGS),OpenBLAS (cblas_sgemm),own cpu/gemm.cpp)"
	@echo "MPI:      $(if $(filter 1,$(MPI)),$(MPICXX) ($$($(MPICXX) --showme:version 2>&1 | head -1)): mpirun -np N ./train,not built: ./train is single-process)"
	@echo "HTTP:     $(if $(filter 1,$(HTTP)),cpp-httplib ($(or $(shell pkg-config --modversion cpp-httplib 2>/dev/null),header found)): ./translate --serve,not built: ./translate --serve is refused (no cpp-httplib; Debian: libcpp-httplib-dev))"
	@echo "NCCL:     $(if $(NCCL_LIB),$(NCCL_LIB) ($(NCCL_H); $(NCCL_LIBDIR)/libnccl.so),not built$(if $(filter 1,$(CUDA)),: $(if $(NCCL_H),nccl.h without libnccl.so,no nccl.h),: no CUDA backend))"

clean:
	rm -rf build $(PROGRAMS)
