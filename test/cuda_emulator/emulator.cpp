// test/cuda_emulator/emulator.cpp — the CUDA emulator's machinery (emulator.h says what it is
// for and what it cannot tell): the launch, run as fibers block by block on a few CPU threads
// with __syncthreads, __syncwarp and the shuffles as barriers; the runtime's memory calls with
// their arguments checked; cuBLASLt's product; the device's description.
#include <cxxabi.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "emulator.h"

namespace cuda_emulator {

// ---------------------------------------------------------------------------------------------
// Errors: a kernel that a GPU would hang on or run undefined stops the program here.
// ---------------------------------------------------------------------------------------------
[[noreturn]] static void fail(const char* what);
[[noreturn]] static void fail_at(const struct Fiber* f, const char* what);

// ---------------------------------------------------------------------------------------------
// The CPU threads: the caller and n - 1 more, each running the same job.
// ---------------------------------------------------------------------------------------------
class Pool {
public:
    explicit Pool(int n) {
        for (int i = 1; i < n; i++) threads_.emplace_back([this, i] { loop(i); });
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> lock(m_);
            stop_ = true;
        }
        wake_.notify_all();
        for (auto& t : threads_) t.join();
    }
    int size() const { return (int)threads_.size() + 1; }
    // job(worker) on every thread, the caller being worker 0; returns when all have finished.
    void run(const std::function<void(int)>& job) {
        {
            std::lock_guard<std::mutex> lock(m_);
            job_ = &job;
            busy_ = (int)threads_.size();
            generation_++;
        }
        wake_.notify_all();
        job(0);
        std::unique_lock<std::mutex> lock(m_);
        done_.wait(lock, [this] { return busy_ == 0; });
        job_ = nullptr;
    }

private:
    void loop(int worker) {
        uint64_t seen = 0;
        for (;;) {
            const std::function<void(int)>* job;
            {
                std::unique_lock<std::mutex> lock(m_);
                wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
                if (stop_) return;
                seen = generation_;
                job = job_;
            }
            (*job)(worker);
            std::lock_guard<std::mutex> lock(m_);
            if (--busy_ == 0) done_.notify_all();
        }
    }
    std::vector<std::thread> threads_;
    std::mutex m_;
    std::condition_variable wake_, done_;
    const std::function<void(int)>* job_ = nullptr;
    uint64_t generation_ = 0;
    int busy_ = 0;
    bool stop_ = false;
};

static int worker_count() {
    if (const char* env = std::getenv("CUDA_EMULATOR_THREADS")) return std::max(1, std::atoi(env));
    return (int)std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
}
static Pool& pool() {
    static Pool p(worker_count());
    return p;
}

// CUDA_EMULATOR_ORDER=reverse runs the blocks of a grid, the warps of a block and the lanes of a
// warp last first. A kernel whose result depends on that order lacks a barrier (a thread reads
// what another writes, or overwrites what another still reads, with no __syncthreads or
// __syncwarp between): a GPU gives no order, so a correct kernel gives the same result both
// ways, and make test runs the GPU ops both ways.
static bool reversed_order() {
    static const bool reverse = [] {
        const char* env = std::getenv("CUDA_EMULATOR_ORDER");
        if (env && std::strcmp(env, "reverse") != 0 && std::strcmp(env, "forward") != 0)
            fail("CUDA_EMULATOR_ORDER takes forward or reverse");
        return env && std::strcmp(env, "reverse") == 0;
    }();
    return reverse;
}

// ---------------------------------------------------------------------------------------------
// Fibers: a stack each and an x86-64 switch that saves the registers the calling convention says
// a call preserves (ucontext's swapcontext would cost two system calls a switch, and
// AddressSanitizer clears a whole stack's shadow on each). The floating-point control state
// (MXCSR, x87) is the CPU thread's, which no kernel changes. AddressSanitizer is told of every
// switch.
// ---------------------------------------------------------------------------------------------
extern "C" void cuda_emulator_switch(void** save_sp, void* load_sp);
asm(R"(
    .text
    .globl cuda_emulator_switch
    .hidden cuda_emulator_switch
    .type cuda_emulator_switch, @function
cuda_emulator_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cuda_emulator_switch, .-cuda_emulator_switch
)");

#ifdef __SANITIZE_ADDRESS__
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old);
extern "C" void __asan_unpoison_memory_region(const volatile void* addr, size_t size);
#else
static void __sanitizer_start_switch_fiber(void**, const void*, size_t) {}
static void __sanitizer_finish_switch_fiber(void*, const void**, size_t*) {}
static void __asan_unpoison_memory_region(const volatile void*, size_t) {}
#endif

enum class State { READY, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };

struct Worker;
struct Fiber {
    Place place;         // first: what here() finds through the stack
    Worker* worker;
    void* sp;            // saved stack pointer while switched out
    void* fake_stack;    // AddressSanitizer's, across a switch
    State state;
    bool started;
    char* stack;
};

// What one CPU thread needs to run blocks: its fibers, their stacks, the shuffle slots.
struct Worker {
    void* scheduler_sp = nullptr;
    void* scheduler_fake_stack = nullptr;
    const void* scheduler_bottom = nullptr;   // the CPU thread's own stack, for AddressSanitizer
    size_t scheduler_size = 0;
    std::vector<Fiber> fibers;
    std::vector<char*> free_stacks;
    unsigned stacks_made = 0;
    uint64_t exchange[2 * 1024];
    unsigned exchange_number[2 * 1024];
    int warp_begin = 0, warp_end = 0;   // the fibers of the warp running (run_warp)
    bool reverse = false;               // reversed_order(), read once a launch
    char* retired = nullptr;            // the stack of a fiber that has just ended (arrived)
    const Fiber* retired_fiber = nullptr;   // that fiber, its last stack pointer saved
    void* dynamic_shared = nullptr;
    size_t dynamic_shared_bytes = 0;
    void (*body)(void*) = nullptr;
    void* payload = nullptr;
    const void* kernel = nullptr;   // named (demangled) only in an error message
    uint3 block_index;
    dim3 block_dim, grid_dim;

    // A stack aligned to its size: its first page holds the StackBase, the second is a guard
    // page (an overflow faults there), the rest is the stack.
    char* take_stack() {
        if (!free_stacks.empty()) {
            char* s = free_stacks.back();
            free_stacks.pop_back();
            return s;
        }
        const size_t page = (size_t)sysconf(_SC_PAGE_SIZE);
        char* m = (char*)mmap(nullptr, 2 * STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) fail("cannot map a fiber stack");
        char* s = (char*)(((uintptr_t)m + STACK_BYTES - 1) & ~(uintptr_t)(STACK_BYTES - 1));
        if (s > m) munmap(m, (size_t)(s - m));
        if (s + STACK_BYTES < m + 2 * STACK_BYTES) munmap(s + STACK_BYTES, (size_t)(m + 2 * STACK_BYTES - (s + STACK_BYTES)));
        mprotect(s + page, page, PROT_NONE);
        ((StackBase*)s)->magic = STACK_MAGIC;
        // Where the stack starts, 256 bytes further down for each stack made (within 64 KB):
        // stacks aligned alike would put every fiber's hot frames in the same cache sets.
        ((StackBase*)s)->top_offset = (stacks_made++ % 256) * 256;
        return s;
    }
};

static thread_local Worker* worker = nullptr;   // this CPU thread's, during a launch

static Fiber* fiber_here() { return (Fiber*)&here(); }   // Place is Fiber's first member

static std::string kernel_name(const void* kernel) {
    Dl_info info;
    if (!dladdr(kernel, &info) || !info.dli_sname) return "a kernel";
    int status = 0;
    char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string name = status == 0 && demangled ? demangled : info.dli_sname;
    std::free(demangled);
    return name;
}

static std::string describe_place(const Fiber* f) {
    char buf[512];
    if (!worker) return "outside a kernel";
    const Worker& w = *worker;
    std::snprintf(buf, sizeof buf, "%s, block (%u,%u,%u) of (%u,%u,%u), %u x %u x %u threads", kernel_name(w.kernel).c_str(),
                  w.block_index.x, w.block_index.y, w.block_index.z, w.grid_dim.x, w.grid_dim.y, w.grid_dim.z,
                  w.block_dim.x, w.block_dim.y, w.block_dim.z);
    if (f)
        std::snprintf(buf + std::strlen(buf), sizeof buf - std::strlen(buf), ", thread (%u,%u,%u)",
                      f->place.thread_index.x, f->place.thread_index.y, f->place.thread_index.z);
    return buf;
}

[[noreturn]] static void fail_at(const Fiber* f, const char* what) {
    std::fprintf(stderr, "CUDA emulator: %s\n  in %s\n", what, describe_place(f).c_str());
    std::fflush(stderr);
    std::abort();
}
[[noreturn]] static void fail(const char* what) { fail_at(nullptr, what); }
void not_in_kernel() { fail("threadIdx, blockIdx or a barrier used outside a kernel"); }

void partial_mask() { fail_at(fiber_here(), "a warp operation with a partial mask (the emulator knows only the full one)"); }
void lane_not_running(int linear) {
    Fiber* f = fiber_here();
    char what[160];
    std::snprintf(what, sizeof what, "a shuffle reads thread %d of the block, which %s (undefined on a GPU)", linear,
                  linear >= f->place.block_threads ? "does not exist" : "is not at the same shuffle (has it returned?)");
    fail_at(f, what);
}
void wmma_misuse(const char* op, const char* why) {
    char what[200];
    std::snprintf(what, sizeof what, "wmma::%s: %s (undefined on a GPU)", op, why);
    fail_at(fiber_here(), what);
}
void* dynamic_shared() { return fiber_here()->worker->dynamic_shared; }

// The bytes of a fiber's stack below its top, where its frames begin (stack + stack_size):
// AddressSanitizer's bounds of the stack.
static size_t stack_size(const char* stack) { return STACK_BYTES - ((const StackBase*)stack)->top_offset; }

// A new fiber's stack as cuda_emulator_switch leaves one: its saved registers, then
// fiber_main as the return address, the stack 16-byte aligned at fiber_main's entry.
static void fiber_main();
static void start_fiber(Worker& w, Fiber& f) {
    f.stack = w.take_stack();
    ((StackBase*)f.stack)->place = &f.place;
    uint64_t* top = (uint64_t*)(f.stack + stack_size(f.stack));
    top[-1] = 0;                          // fiber_main's (never used) return address
    top[-2] = (uint64_t)&fiber_main;
    for (int r = 3; r <= 8; r++) top[-r] = 0;   // rbp rbx r12 r13 r14 r15
    f.sp = &top[-8];
    f.fake_stack = nullptr;
    f.started = true;
}

// The warp's next lane to run after lane `after` (-1: its first), in the launch's order, that is
// ready; nullptr when none is.
static Fiber* next_ready(Worker& w, int after) {
    const bool reverse = w.reverse;
    const int step = reverse ? -1 : 1;
    int k = after < 0 ? (reverse ? w.warp_end - 1 : w.warp_begin) : after + step;
    for (; k >= w.warp_begin && k < w.warp_end; k += step)
        if (w.fibers[(size_t)k].state == State::READY) return &w.fibers[(size_t)k];
    return nullptr;
}

// What runs first on a stack just switched to: the stack of a fiber that ended is free now that
// nothing runs on it (it was not before the switch: the next fiber started may take it).
static void arrived(Worker& w) {
    if (!w.retired) return;
    // Its frames from its last stack pointer up never returned: AddressSanitizer still has their
    // redzones marked, where the next fiber on this stack will put its first frames.
    const char* top = w.retired + stack_size(w.retired);
    __asan_unpoison_memory_region(w.retired_fiber->sp, (size_t)(top - (const char*)w.retired_fiber->sp));
    w.free_stacks.push_back(w.retired), w.retired = nullptr;
}

// The running fiber stops at a barrier (or ends) and hands over straight to the warp's next
// ready lane, or, after the warp's last, to the scheduler: one switch a lane, not two.
static void leave(Fiber* f, State state) {
    Worker& w = *f->worker;
    f->state = state;
    if (state == State::DONE) w.retired = f->stack, w.retired_fiber = f;
    void** save = state == State::DONE ? nullptr : &f->fake_stack;
    if (Fiber* next = next_ready(w, f->place.linear)) {
        if (!next->started) start_fiber(w, *next);
        __sanitizer_start_switch_fiber(save, next->stack, stack_size(next->stack));
        cuda_emulator_switch(&f->sp, next->sp);
    } else {
        __sanitizer_start_switch_fiber(save, w.scheduler_bottom, w.scheduler_size);
        cuda_emulator_switch(&f->sp, w.scheduler_sp);
    }
    __sanitizer_finish_switch_fiber(f->fake_stack, nullptr, nullptr);
    arrived(w);
}
void syncthreads() { leave(fiber_here(), State::AT_BLOCK_BARRIER); }
void syncwarp() { leave(fiber_here(), State::AT_WARP_BARRIER); }

// A fiber's first instruction: the kernel, then on to the next lane for good. The first fiber a
// CPU thread starts is started by its scheduler, whose stack AddressSanitizer then reports.
static void fiber_main() {
    Fiber* f = fiber_here();
    Worker& w = *f->worker;
    if (w.scheduler_size == 0) __sanitizer_finish_switch_fiber(nullptr, &w.scheduler_bottom, &w.scheduler_size);
    else __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
    arrived(w);
    w.body(w.payload);
    leave(f, State::DONE);
    __builtin_unreachable();
}

// Runs the lanes of one warp until each has ended or waits at __syncthreads, opening their
// __syncwarp/shuffle barriers as all lanes still running reach them. The scheduler starts the
// first ready lane of a round; each lane hands over to the next (leave).
static void run_warp(Worker& w, int begin, int end) {
    w.warp_begin = begin, w.warp_end = end;
    for (;;) {
        if (Fiber* f = next_ready(w, -1)) {
            if (!f->started) start_fiber(w, *f);
            __sanitizer_start_switch_fiber(&w.scheduler_fake_stack, f->stack, stack_size(f->stack));
            cuda_emulator_switch(&w.scheduler_sp, f->sp);
            __sanitizer_finish_switch_fiber(w.scheduler_fake_stack, nullptr, nullptr);
            arrived(w);
        }
        int at_warp = 0, at_block = 0;
        for (int k = begin; k < end; k++) {
            at_warp += w.fibers[(size_t)k].state == State::AT_WARP_BARRIER;
            at_block += w.fibers[(size_t)k].state == State::AT_BLOCK_BARRIER;
        }
        if (at_warp == 0) return;
        if (at_block > 0)
            fail("deadlock: lanes of one warp wait at __syncwarp or a shuffle while others wait at __syncthreads");
        for (int i = begin; i < end; i++)
            if (w.fibers[(size_t)i].state == State::AT_WARP_BARRIER) w.fibers[(size_t)i].state = State::READY;
    }
}

static void run_block(Worker& w, uint3 block) {
    w.block_index = block;
    const dim3 bd = w.block_dim;
    const int n = (int)(bd.x * bd.y * bd.z);
    w.fibers.resize((size_t)n);
    for (int i = 0; i < n; i++) {
        Fiber& f = w.fibers[(size_t)i];
        f.place = Place{uint3{(unsigned)i % bd.x, (unsigned)i / bd.x % bd.y, (unsigned)i / (bd.x * bd.y)}, i,
                        &w.block_index, &w.block_dim, &w.grid_dim, w.exchange, w.exchange_number, n, 0};
        w.exchange_number[i] = w.exchange_number[1024 + i] = 0;
        f.worker = &w;
        f.state = State::READY;
        f.started = false;
    }
    if (w.dynamic_shared_bytes) std::memset(w.dynamic_shared, 0xff, w.dynamic_shared_bytes);   // NaN, -1
    for (;;) {
        const int warps = (n + 31) / 32;
        for (int k = 0; k < warps; k++) {
            const int base = 32 * (w.reverse ? warps - 1 - k : k);
            run_warp(w, base, std::min(n, base + 32));
        }
        bool waiting = false;   // every thread still running waits at __syncthreads: open it
        for (Fiber& f : w.fibers)
            if (f.state == State::AT_BLOCK_BARRIER) f.state = State::READY, waiting = true;
        if (!waiting) return;
    }
}


static thread_local cudaError_t last_error = cudaSuccess;

constexpr size_t SHARED_DEFAULT = 48 * 1024, SHARED_OPTIN = 227 * 1024;   // sm_90's
static std::mutex shared_limits_mutex;
static std::map<const void*, size_t> shared_limits;   // kernel -> cudaFuncAttributeMaxDynamicSharedMemorySize

static bool launch_fits(const void* kernel, dim3 grid, dim3 block, size_t smem) {
    const uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
        threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u ||
        grid.y > 65535 || grid.z > 65535) {
        last_error = cudaErrorInvalidConfiguration;
        return false;
    }
    size_t limit = SHARED_DEFAULT;
    {
        std::lock_guard<std::mutex> lock(shared_limits_mutex);
        auto it = shared_limits.find(kernel);
        if (it != shared_limits.end()) limit = it->second;
    }
    if (smem > limit) {   // as the runtime: more than 48 KB needs the kernel's attribute raised
        last_error = cudaErrorInvalidValue;
        return false;
    }
    return true;
}

// CUDA_EMULATOR_LAUNCHES=1: at the program's end, how many kernels it launched and how many
// cuBLASLt products it asked for (compute-sanitizer's racecheck costs a time per launch of ours:
// this counts them without a GPU).
static std::atomic<uint64_t> kernel_launches{0}, library_products{0};
static struct LaunchReport {
    ~LaunchReport() {
        const char* env = std::getenv("CUDA_EMULATOR_LAUNCHES");
        if (env && env[0] == '1')
            std::fprintf(stderr, "cuda emulator: %llu kernel launches, %llu cuBLASLt products\n",
                         (unsigned long long)kernel_launches.load(), (unsigned long long)library_products.load());
    }
} launch_report;

void launch_erased(const void* kernel, void (*body)(void*), void* payload, dim3 grid, dim3 block,
                   size_t dynamic_shared_bytes) {
    if (!launch_fits(kernel, grid, block, dynamic_shared_bytes)) return;
    kernel_launches++;
    const uint64_t blocks = (uint64_t)grid.x * grid.y * grid.z;
    std::atomic<uint64_t> next{0};
    pool().run([&](int) {
        static thread_local Worker w;
        worker = &w;
        w.body = body, w.payload = payload, w.kernel = kernel;
        w.dynamic_shared_bytes = dynamic_shared_bytes;
        // 128-byte aligned, as transformer.cu's __align__(128) asks (the WMMA loads check for 32)
        if (posix_memalign(&w.dynamic_shared, 128, std::max<size_t>(1, dynamic_shared_bytes))) fail("out of memory");
        w.block_dim = block, w.grid_dim = grid;
        w.reverse = reversed_order();
        for (uint64_t k; (k = next++) < blocks;) {
            const uint64_t b = w.reverse ? blocks - 1 - k : k;
            run_block(w, uint3{(unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y), (unsigned)(b / ((uint64_t)grid.x * grid.y))});
        }
        std::free(w.dynamic_shared);
        w.dynamic_shared = nullptr;
        worker = nullptr;
    });
}

// ---------------------------------------------------------------------------------------------
// Memory: every allocation known, so that a copy past one is refused as the runtime would
// ---------------------------------------------------------------------------------------------
static std::mutex allocations_mutex;
static std::map<uintptr_t, size_t> allocations;   // start -> bytes
static size_t allocated_bytes = 0;                 // their sum

// CUDA_EMULATOR_MEMORY_MB=N: the device's memory, N MB (default: the machine's); a cudaMalloc
// past it fails with cudaErrorMemoryAllocation, as on a GPU that is full, so that the tests can
// see what the programs say and do then.
static size_t device_memory() {
    static const size_t bytes = [] {
        const char* env = std::getenv("CUDA_EMULATOR_MEMORY_MB");
        if (!env) return (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGE_SIZE);
        char* end = nullptr;
        const double mb = std::strtod(env, &end);
        if (end == env || *end || !(mb > 0)) fail("CUDA_EMULATOR_MEMORY_MB takes a number of megabytes above 0");
        return (size_t)(mb * 1e6);
    }();
    return bytes;
}

static bool inside_allocation(const void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(allocations_mutex);
    auto it = allocations.upper_bound((uintptr_t)p);
    if (it == allocations.begin()) return false;
    --it;
    return (uintptr_t)p + bytes <= it->first + it->second;
}

static cudaError_t copy_checked(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if ((dst_device && !inside_allocation(dst, bytes)) || (src_device && !inside_allocation(src, bytes))) {
        std::fprintf(stderr, "CUDA emulator: cudaMemcpy of %zu bytes outside a cudaMalloc allocation\n", bytes);
        return cudaErrorInvalidValue;
    }
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}

}  // namespace cuda_emulator

using namespace cuda_emulator;

cudaError_t cudaFuncSetAttribute_erased(const void* kernel, cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || (size_t)value > SHARED_OPTIN)
        return cudaErrorInvalidValue;
    std::lock_guard<std::mutex> lock(shared_limits_mutex);
    shared_limits[kernel] = (size_t)value;
    return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor_erased(int* blocks, const void* kernel, int threads,
                                                                 size_t smem) {
    if (!blocks || threads <= 0) return cudaErrorInvalidValue;
    const cudaError_t before = last_error;
    *blocks = launch_fits(kernel, dim3(1), dim3((unsigned)threads), smem) ? 1 : 0;
    last_error = before;   // a query, not a launch: it leaves no error behind
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int* count) {
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
    if (device != 0) return cudaErrorInvalidValue;
    *prop = cudaDeviceProp{};
    std::snprintf(prop->name, sizeof prop->name, "CUDA emulator on %d CPU threads (not a GPU)", pool().size());
    prop->major = 9, prop->minor = 0, prop->multiProcessorCount = pool().size();
    prop->maxThreadsPerBlock = 1024, prop->warpSize = 32, prop->sharedMemPerBlock = SHARED_DEFAULT;
    prop->sharedMemPerBlockOptin = SHARED_OPTIN;
    prop->totalGlobalMem = device_memory();
    return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t bytes) {
    {   // the bytes reserved first, so that the memory's limit holds
        std::lock_guard<std::mutex> lock(allocations_mutex);
        if (bytes > device_memory() - allocated_bytes) return cudaErrorMemoryAllocation;
        allocated_bytes += bytes;
    }
    void* q = nullptr;
    if (posix_memalign(&q, 256, std::max<size_t>(bytes, 1)) != 0) {
        std::lock_guard<std::mutex> lock(allocations_mutex);
        allocated_bytes -= bytes;
        return cudaErrorMemoryAllocation;
    }
    std::memset(q, 0xff, bytes);   // not zeroed, as on a GPU: a read before a write shows as NaN or -1
    std::lock_guard<std::mutex> lock(allocations_mutex);
    allocations[(uintptr_t)q] = bytes;
    *p = q;
    return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
    if (!p) return cudaSuccess;
    {
        std::lock_guard<std::mutex> lock(allocations_mutex);
        auto it = allocations.find((uintptr_t)p);
        if (it == allocations.end()) return cudaErrorInvalidValue;
        allocated_bytes -= it->second;
        allocations.erase(it);
    }
    std::free(p);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
    *p = std::malloc(std::max<size_t>(bytes, 1));
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void* p) {
    std::free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    return copy_checked(dst, src, bytes, kind);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
    return copy_checked(dst, src, bytes, kind);
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                              size_t height, cudaMemcpyKind kind, cudaStream_t) {
    if (width > dpitch || width > spitch) return cudaErrorInvalidValue;
    for (size_t r = 0; r < height; r++) {
        cudaError_t e = copy_checked((char*)dst + r * dpitch, (const char*)src + r * spitch, width, kind);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
    if (!inside_allocation(p, bytes)) return cudaErrorInvalidValue;
    std::memset(p, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaGetLastError() {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
struct cuda_emulator_event {
    std::chrono::steady_clock::time_point when;
    bool recorded = false;
};
cudaError_t cudaEventCreate(cudaEvent_t* event) {
    *event = new cuda_emulator_event;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
    if (!event) return cudaErrorInvalidResourceHandle;
    event->when = std::chrono::steady_clock::now();
    event->recorded = true;
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!start || !end || !start->recorded || !end->recorded) return cudaErrorInvalidResourceHandle;
    *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    return event ? cudaSuccess : cudaErrorInvalidResourceHandle;   // unrecorded: at once, as on a GPU
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    delete event;
    return cudaSuccess;
}
const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    default: return "unknown error";
    }
}

// ---------------------------------------------------------------------------------------------
// cuBLASLt
// ---------------------------------------------------------------------------------------------
struct cuda_emulator_lt {};
struct cuda_emulator_matmul_desc {
    cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const void* bias = nullptr;
    int bias_type = -1;   // -1: D's type
    cublasComputeType_t compute;
};
struct cuda_emulator_layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch = 1;      // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT
    int64_t stride = 0;     // CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, elements
};
struct cuda_emulator_preference {};

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
    *handle = new cuda_emulator_lt;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}
const char* cublasLtGetStatusString(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_NOT_INITIALIZED";
    }
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
    if (scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    *desc = new cuda_emulator_matmul_desc;
    (*desc)->compute = compute;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    delete desc;
    return CUBLAS_STATUS_SUCCESS;
}
template <class T>
static cublasStatus_t read_attribute(T* out, const void* value, size_t bytes) {
    if (bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(out, value, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* value, size_t bytes) {
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return read_attribute(&desc->ta, value, bytes);
    case CUBLASLT_MATMUL_DESC_TRANSB: return read_attribute(&desc->tb, value, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return read_attribute(&desc->epilogue, value, bytes);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return read_attribute(&desc->bias, value, bytes);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return read_attribute(&desc->bias_type, value, bytes);
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
    if (type != CUDA_R_32F && type != CUDA_R_16BF) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (ld < (int64_t)rows || ld < 1) return CUBLAS_STATUS_INVALID_VALUE;
    *layout = new cuda_emulator_layout{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    delete layout;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: {
        cublasStatus_t s = read_attribute(&layout->batch, buf, bytes);
        return s == CUBLAS_STATUS_SUCCESS && layout->batch < 1 ? CUBLAS_STATUS_INVALID_VALUE : s;
    }
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return read_attribute(&layout->stride, buf, bytes);
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    *pref = new cuda_emulator_preference;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, size_t) {
    return CUBLAS_STATUS_SUCCESS;
}

// An algorithm's first word when the heuristic made it (then m, n, k of the product it was for).
static const uint64_t ALGO_MADE = 0x616c676f;

// The product's shapes: op(A) (m, k), op(B) (k, n), C and D (m, n), A and B of one type, C and
// D of one type, compute and scale in fp32 with TF32 off.
static cublasStatus_t check_product(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d) {
    const uint64_t m = d->rows, n = d->cols;
    const uint64_t k = desc->ta == CUBLAS_OP_N ? a->cols : a->rows;
    const uint64_t am = desc->ta == CUBLAS_OP_N ? a->rows : a->cols;
    const uint64_t bk = desc->tb == CUBLAS_OP_N ? b->rows : b->cols;
    const uint64_t bn = desc->tb == CUBLAS_OP_N ? b->cols : b->rows;
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
        if (l->ld < (int64_t)l->rows) return CUBLAS_STATUS_INVALID_VALUE;   // column-major: ld >= rows
    if (am != m || bk != k || bn != n || c->rows != m || c->cols != n || a->type != b->type || c->type != d->type ||
        c->ld != d->ld || desc->compute != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_INVALID_VALUE;
    // A strided batch: every operand the same count (no broadcasting here), C and D one stride.
    if (a->batch != d->batch || b->batch != d->batch || c->batch != d->batch || c->stride != d->stride)
        return CUBLAS_STATUS_INVALID_VALUE;
    const int e = desc->epilogue;
    if (e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_BIAS && e != CUBLASLT_EPILOGUE_RELU &&
        e != CUBLASLT_EPILOGUE_RELU_BIAS)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if ((e & CUBLASLT_EPILOGUE_BIAS) && !desc->bias) return CUBLAS_STATUS_INVALID_VALUE;
    // The bias epilogue reads its vector with wide loads: refused below a 16-byte boundary, as
    // Marian NMT reports of the library on an A100 (a conservative model of a GPU).
    if ((e & CUBLASLT_EPILOGUE_BIAS) && (uintptr_t)desc->bias % 16 != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* found) {
    *found = 0;
    if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t s = check_product(desc, a, b, c, d);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    // up to 3 algorithms (a tuner has some to choose from), alike but for their index in data[4]
    for (int i = 0; i < std::min(requested, 3); i++) {
        results[i] = cublasLtMatmulHeuristicResult_t{};
        results[i].algo.data[0] = ALGO_MADE;
        results[i].algo.data[1] = d->rows, results[i].algo.data[2] = d->cols;
        results[i].algo.data[3] = desc->ta == CUBLAS_OP_N ? a->cols : a->rows;
        results[i].algo.data[4] = i;
        results[i].state = CUBLAS_STATUS_SUCCESS;
        *found = i + 1;
    }
    return CUBLAS_STATUS_SUCCESS;
}

// Whether an algorithm runs a product: one the heuristic made, for a product at least as large
// in m, n and k (the emulator's model of a library whose algorithms fit some shapes and not
// others: a backend that runs an algorithm on a shape it was not checked for fails here).
static cublasStatus_t check_algorithm(const cublasLtMatmulAlgo_t* algo, cublasLtMatmulDesc_t desc,
                                      cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t d) {
    if (!algo) return CUBLAS_STATUS_SUCCESS;   // none: the library chooses
    if (algo->data[0] != ALGO_MADE) return CUBLAS_STATUS_INVALID_VALUE;
    const uint64_t k = desc->ta == CUBLAS_OP_N ? a->cols : a->rows;
    return d->rows <= algo->data[1] && d->cols <= algo->data[2] && k <= algo->data[3] ? CUBLAS_STATUS_SUCCESS
                                                                                      : CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                       cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                       const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result) {
    cublasStatus_t s = check_product(desc, a, b, c, d);
    if (s == CUBLAS_STATUS_SUCCESS) s = check_algorithm(algo, desc, a, d);
    *result = cublasLtMatmulHeuristicResult_t{};
    result->state = s;
    if (s == CUBLAS_STATUS_SUCCESS) result->algo = *algo;
    return s;
}

static float load(const void* p, cudaDataType type, size_t i) {
    return type == CUDA_R_16BF ? __bfloat162float(((const __nv_bfloat16*)p)[i]) : ((const float*)p)[i];
}
static void store(void* p, cudaDataType type, size_t i, float v) {
    if (type == CUDA_R_16BF) ((__nv_bfloat16*)p)[i] = __float2bfloat16(v);
    else ((float*)p)[i] = v;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha_p, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta_p,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t* algo, void*, size_t, cudaStream_t) {
    library_products++;
    cublasStatus_t s = check_product(desc, a, b, c, d);
    if (s == CUBLAS_STATUS_SUCCESS) s = check_algorithm(algo, desc, a, d);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    const float alpha = *(const float*)alpha_p, beta = *(const float*)beta_p;
    const size_t m = d->rows, n = d->cols, k = desc->ta == CUBLAS_OP_N ? a->cols : a->rows;
    const size_t lda = (size_t)a->ld, ldb = (size_t)b->ld, ldc = (size_t)c->ld;
    const bool ta = desc->ta == CUBLAS_OP_T, tb = desc->tb == CUBLAS_OP_T;
    const cudaDataType bias_type = desc->bias_type < 0 ? d->type : (cudaDataType)desc->bias_type;
    const bool with_bias = desc->epilogue & CUBLASLT_EPILOGUE_BIAS;   // RELU_BIAS: both bits
    const bool with_relu = desc->epilogue & CUBLASLT_EPILOGUE_RELU;
    const size_t bytes_ab = a->type == CUDA_R_16BF ? 2 : 4, bytes_cd = d->type == CUDA_R_16BF ? 2 : 4;
    for (int32_t z = 0; z < d->batch; z++) {   // matrix z of a strided batch (z = 0 alone: a plain product)
        const void* Az = (const char*)A + z * a->stride * bytes_ab;
        const void* Bz = (const char*)B + z * b->stride * bytes_ab;
        const void* Cz = (const char*)C + z * c->stride * bytes_cd;
        void* Dz = (char*)D + z * d->stride * bytes_cd;
        std::vector<float> rows(m * k);   // op(A) as floats, row by row: each row's k values in a run
        for (size_t l = 0; l < k; l++)
            for (size_t i = 0; i < m; i++) rows[i * k + l] = load(Az, a->type, ta ? l + i * lda : i + l * lda);
        std::atomic<size_t> next{0};
        pool().run([&](int) {
            std::vector<float> col(k);
            for (size_t j; (j = next++) < n;) {
                for (size_t l = 0; l < k; l++) col[l] = load(Bz, b->type, tb ? j + l * ldb : l + j * ldb);
                for (size_t i = 0; i < m; i++) {
                    const float* row = &rows[i * k];
                    float acc = 0.0f;
                    for (size_t l = 0; l < k; l++) acc += row[l] * col[l];
                    float v = alpha * acc;
                    if (beta != 0.0f) v += beta * load(Cz, c->type, i + j * ldc);   // beta 0: C is not read
                    if (with_bias) v += load(desc->bias, bias_type, i);
                    if (with_relu) v = v > 0.0f ? v : 0.0f;   // in fp32, before D's rounding
                    store(Dz, d->type, i + j * ldc, v);
                }
            }
        });
    }
    return CUBLAS_STATUS_SUCCESS;
}
