// distributed.cpp — data-parallel training (see distributed.h): MPI start and end, the rank's
// share of a step, the gradient sums, the NCCL path's loading and bootstrapping, the watchdog.
//
// Compiled with MPI when the Makefile finds mpicxx (-DTRANSFORMER_MPI and mpicxx's flags);
// without it every collective is the single-process identity.
#include "toolkit/distributed.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "transformer.h"

#ifdef TRANSFORMER_MPI
#include <mpi.h>
#endif

namespace {

// The NCCL library's entry points (toolkit/nccl_allreduce.cu).
struct Nccl {
    void* lib = nullptr;
    void* comm = nullptr;
    int (*id_bytes)() = nullptr;
    bool (*unique_id)(void*, std::string*) = nullptr;
    void* (*init)(const void*, int, int, std::string*) = nullptr;
    bool (*all_reduce_sum)(void*, float*, size_t, std::string*) = nullptr;
    void (*destroy)(void*) = nullptr;
};

struct State {
    bool active = false;              // MPI started (launched by mpirun)
    int rank = 0, size = 1, local_rank = 0, local_size = 1;
    double timeout_s = 0;
    bool thread_multiple = false;     // MPI_Abort may be called from the watchdog thread
    std::atomic<double> waiting_since{0};   // steady seconds; 0: not inside a collective
    std::atomic<long long> waiting_step{0};
    std::atomic<bool> stop_watchdog{false};
    std::thread watchdog;
    bool replicas_checked = false;    // dist_check_replicas ran (before the first step)
    bool nccl_decided = false;
    Nccl nccl;                        // loaded and initialised when nccl.comm != nullptr
    long long reduces = 0;            // gradient all-reduces, their seconds (with the wait for
    double reduce_seconds = 0;        // the slowest rank) and bytes each
    double reduce_bytes = 0;
};
State g;

// Launched by mpirun (Open MPI, or a PMIx/PMI launcher)?
int launcher_size() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
        if (const char* s = std::getenv(v)) return std::max(1, std::atoi(s));
    return std::getenv("PMIX_RANK") ? 1 : 0;
}

[[noreturn]] void abort_job(int status) {
    std::fflush(stderr);
#ifdef TRANSFORMER_MPI
    if (g.active) MPI_Abort(MPI_COMM_WORLD, status);
#endif
    std::_Exit(status);
}

#ifdef TRANSFORMER_MPI   // from here to the namespace's end: what only MPI builds use
double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Marks the time this rank spends inside a training collective (the watchdog's clock). Step
// kSetUp: the set-up's collectives (rank after rank, then the replicas' comparison).
constexpr long long kSetUp = -1;
struct Waiting {
    explicit Waiting(long long step) { g.waiting_step = step; g.waiting_since = now_s(); }
    ~Waiting() { g.waiting_since = 0; }
};

void watchdog_loop() {
    while (!g.stop_watchdog) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const double since = g.waiting_since;
        if (since > 0 && now_s() - since > g.timeout_s) {
            if (g.waiting_step == kSetUp)
                std::fprintf(stderr,
                             "train: rank %d of %d: the set-up has waited %.0f s for the other ranks "
                             "(--dist-timeout): one of them died or hangs (or rank 0's set-up, the corpus "
                             "and BPE, takes longer: raise --dist-timeout); ending the job\n",
                             g.rank, g.size, now_s() - since);
            else
                std::fprintf(stderr,
                             "train: rank %d of %d: step %lld's all-reduce has waited %.0f s for the other "
                             "ranks (--dist-timeout): one of them died or hangs; ending the job\n",
                             g.rank, g.size, g.waiting_step.load(), now_s() - since);
            if (!g.thread_multiple) std::_Exit(1);   // mpirun ends a job whose rank exits unfinalized
            abort_job(1);
        }
    }
}

// On a machine with several ranks, each takes the GPU of its local rank: the local_rank-th of
// CUDA_VISIBLE_DEVICES when that is set, else GPU local_rank.
void select_gpu() {
    if (g.local_size <= 1) return;
    std::vector<std::string> ids;
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
        std::string s = v, item;
        for (size_t i = 0; i <= s.size(); i++) {
            if (i == s.size() || s[i] == ',') { if (!item.empty()) ids.push_back(item); item.clear(); }
            else item += s[i];
        }
    }
    std::string mine = ids.empty() ? std::to_string(g.local_rank) : ids[g.local_rank % ids.size()];
    setenv("CUDA_VISIBLE_DEVICES", mine.c_str(), 1);
}

uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = 1469598103934665603ull) {
    const unsigned char* p = (const unsigned char*)data;
    for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

// A rank's device and precision as one number (dist_check_replicas), and as words. Ranks on
// different devices would sum their gradients by different collectives (NCCL's or the host's):
// MPI_ERR_TRUNCATE at the first step, or a wait without end.
unsigned long long device_code(const Model& m) {
    return 4 * (unsigned long long)m.backend->device() + (unsigned long long)m.backend->precision();
}
std::string device_text(unsigned long long code) {
    const char* precision[3] = {"fp32", "bf16", "int8"};
    return std::string(code / 4 == (unsigned long long)Device::CUDA ? "the GPU" : "the CPU") + " in " +
           precision[std::min<unsigned long long>(code % 4, 2)];
}

// The rank's GPU as the NVIDIA driver names it (device 0 of its CUDA_VISIBLE_DEVICES: its UUID,
// a MIG instance's under MIG), hashed; 0 when unknown (no driver). Ranks whose
// CUDA_VISIBLE_DEVICES entries differ in name may still be one GPU ("0" and its UUID, or a
// list naming it twice): the driver's name is the GPU's own. Ranks on the CUDA emulator run on
// no GPU (even where a driver is): they ask the test's stand-in driver when
// TRANSFORMER_CUDA_EMULATOR_DRIVER names one (test/cuda_emulator/driver_stub.c), else nothing.
uint64_t gpu_identity() {
    const char* emulator = std::getenv("TRANSFORMER_CUDA_EMULATOR");
    const char* lib = emulator && *emulator ? std::getenv("TRANSFORMER_CUDA_EMULATOR_DRIVER") : "libcuda.so.1";
    if (!lib || !*lib) return 0;
    void* driver = dlopen(lib, RTLD_NOW | RTLD_LOCAL);   // kept loaded (as backend.cpp's)
    if (!driver) return 0;
    auto init = (int (*)(unsigned))dlsym(driver, "cuInit");
    auto get = (int (*)(int*, int))dlsym(driver, "cuDeviceGet");
    auto uuid = (int (*)(unsigned char*, int))dlsym(driver, "cuDeviceGetUuid_v2");
    if (!uuid) uuid = (int (*)(unsigned char*, int))dlsym(driver, "cuDeviceGetUuid");
    unsigned char id[16];
    int dev = 0;
    if (!init || !get || !uuid || init(0) != 0 || get(&dev, 0) != 0 || uuid(id, dev) != 0) return 0;
    return fnv1a(id, sizeof id) | 1;   // never 0
}

// Two ranks on one GPU (CUDA_VISIBLE_DEVICES listing fewer GPUs than the machine's ranks, or
// one twice): NCCL refuses them at the first step; through the host they share its memory and
// time, slower than one process with --accum. False + *error naming the first two.
bool distinct_gpus(const std::vector<unsigned long long>& gpu, std::string* error) {
    for (size_t r = 1; r < gpu.size(); r++)
        for (size_t q = 0; q < r; q++)
            if (gpu[r] != 0 && gpu[r] == gpu[q]) {
                *error = "ranks " + std::to_string(q) + " and " + std::to_string(r) + " run on the same GPU: "
                         "one GPU per rank (each rank takes its local rank's entry of CUDA_VISIBLE_DEVICES: list "
                         "as many GPUs as ranks on each machine, or run fewer ranks)";
                return false;
            }
    return true;
}

// In place over host floats, in chunks that fit MPI's int counts.
void mpi_sum_floats(float* x, size_t n) {
    const size_t chunk = (size_t)1 << 30;
    for (size_t i = 0; i < n; i += chunk)
        MPI_Allreduce(MPI_IN_PLACE, x + i, (int)std::min(chunk, n - i), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

// Every rank loads the NCCL library or none does (a mixed job would wait forever); then rank
// 0's unique id is broadcast and every rank joins the communicator.
bool nccl_start(std::string* error) {
    g.nccl_decided = true;
    const std::string path = program_library_path("libtransformer_nccl.so", "TRANSFORMER_NCCL_LIB");
    Nccl n;
    if (!path.empty()) n.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (n.lib) {
        n.id_bytes = (int (*)())dlsym(n.lib, "tnccl_id_bytes");
        n.unique_id = (bool (*)(void*, std::string*))dlsym(n.lib, "tnccl_unique_id");
        n.init = (void* (*)(const void*, int, int, std::string*))dlsym(n.lib, "tnccl_init");
        n.all_reduce_sum = (bool (*)(void*, float*, size_t, std::string*))dlsym(n.lib, "tnccl_all_reduce_sum");
        n.destroy = (void (*)(void*))dlsym(n.lib, "tnccl_destroy");
    }
    int have = n.lib && n.id_bytes && n.unique_id && n.init && n.all_reduce_sum && n.destroy;
    MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!have) {   // the host path
        if (g.rank == 0)
            std::printf("data parallel: no NCCL library on every rank (%s): the GPU gradients are summed "
                        "through the host\n", path.empty() ? "libtransformer_nccl.so not built" : path.c_str());
        return true;
    }
    std::vector<char> id(n.id_bytes());
    int ok = g.rank != 0 || n.unique_id(id.data(), error);
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) { if (error->empty()) *error = "rank 0 could not create the NCCL id"; return false; }
    MPI_Bcast(id.data(), (int)id.size(), MPI_BYTE, 0, MPI_COMM_WORLD);
    n.comm = n.init(id.data(), g.rank, g.size, error);
    if (!n.comm) return false;
    g.nccl = n;
    if (g.rank == 0) std::printf("data parallel: NCCL's all-reduce over the %d GPUs' gradient buffers\n", g.size);
    return true;
}

// The sum over the ranks of m's gradient buffer, in place.
void all_reduce_grads(Model* m) {
    const size_t n = m->layout.total;
    if (m->backend->device() == Device::CUDA) {
        std::string err;
        if (!g.nccl_decided && !nccl_start(&err)) {
            std::fprintf(stderr, "train: rank %d: NCCL: %s\n", g.rank, err.c_str());
            abort_job(1);
        }
        if (g.nccl.comm) {
            m->backend->synchronize();
            if (!g.nccl.all_reduce_sum(g.nccl.comm, m->grads, n, &err)) {
                std::fprintf(stderr, "train: rank %d: %s\n", g.rank, err.c_str());
                abort_job(1);
            }
            return;
        }
        std::vector<float> host(n);   // no NCCL: through the host
        m->backend->download(host.data(), m->grads, n * sizeof(float));
        mpi_sum_floats(host.data(), n);
        m->backend->upload(m->grads, host.data(), n * sizeof(float));
        return;
    }
    mpi_sum_floats(m->grads, n);
}
#endif  // TRANSFORMER_MPI

}  // namespace

// ---------------------------------------------------------------------------------------------
// Start, end, who we are
// ---------------------------------------------------------------------------------------------
bool dist_init(int* argc, char*** argv, double timeout_s, std::string* error) {
    const int launched = launcher_size();
#ifdef TRANSFORMER_MPI
    if (launched == 0) return true;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        *error = "MPI_Init_thread failed";
        return false;
    }
    g.active = true;
    g.thread_multiple = provided >= MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g.size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g.rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &g.local_rank);
    MPI_Comm_size(node, &g.local_size);
    MPI_Comm_free(&node);
    select_gpu();
    if (g.rank != 0 && !std::freopen("/dev/null", "w", stdout)) {
        *error = "cannot silence stdout on rank " + std::to_string(g.rank);
        return false;
    }
    g.timeout_s = timeout_s;
    if (g.size > 1 && timeout_s > 0) g.watchdog = std::thread(watchdog_loop);
    return true;
#else
    (void)argc, (void)argv, (void)timeout_s;
    if (launched > 1) {
        *error = "launched as one of " + std::to_string(launched) +
                 " MPI ranks, but this ./train was built without MPI (mpicxx was not found): every "
                 "process would train alone. Install libopenmpi-dev and openmpi-bin, then `make clean && make`";
        return false;
    }
    return true;
#endif
}

int dist_finalize(int status) {
    if (!g.active) return status;
    if (g.rank == 0 && g.reduces > 0) {
        std::printf("data parallel: %lld gradient all-reduces of %.1f MB, %.2f ms each on average (rank 0, "
                    "with the wait for the slowest rank)\n", g.reduces, g.reduce_bytes / 1e6,
                    1e3 * g.reduce_seconds / (double)g.reduces);
        std::fflush(stdout);
    }
    g.stop_watchdog = true;
    if (g.watchdog.joinable()) g.watchdog.join();
    if (status != 0 && status != 130 && g.size > 1) {
        std::fprintf(stderr, "train: rank %d of %d failed (exit status %d); ending the job\n", g.rank, g.size, status);
        abort_job(status);
    }
    if (g.nccl.comm) g.nccl.destroy(g.nccl.comm);
#ifdef TRANSFORMER_MPI
    MPI_Finalize();
#endif
    g.active = false;
    return status;
}

int dist_rank() { return g.rank; }
int dist_size() { return g.size; }
bool dist_is_root() { return g.rank == 0; }
bool dist_active() { return g.active; }
bool dist_mpi_built() {
#ifdef TRANSFORMER_MPI
    return true;
#else
    return false;
#endif
}

std::string dist_describe(const Model& m) {
    if (!g.active) return "";
    std::string how = m.backend->device() == Device::CPU ? "MPI_Allreduce on host memory"
                      : g.nccl.comm                       ? "NCCL on the GPU buffer"
                                                          : "NCCL if built (else MPI through the host)";
    char buf[256];
    std::snprintf(buf, sizeof buf, "data parallel: %d ranks (%d on this machine), gradients summed by %s, "
                  "%.1f MB per step", g.size, g.local_size, how.c_str(), m.layout.total * 4.0 / 1e6);
    return buf;
}

void dist_barrier() {
#ifdef TRANSFORMER_MPI
    if (!g.active) return;
    Waiting w(kSetUp);   // the set-up's only collective: a rank that hangs in it ends the job
    MPI_Barrier(MPI_COMM_WORLD);
#endif
}

bool dist_all_agree(bool mine) {
#ifdef TRANSFORMER_MPI
    if (!g.active) return mine;
    Waiting w(g.waiting_step);
    int v = mine;
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return v != 0;
#else
    return mine;
#endif
}

bool dist_check_replicas(const Model& m, uint64_t data_fingerprint, std::string* error) {
#ifdef TRANSFORMER_MPI
    if (!g.active || g.size == 1) return true;
    std::vector<float> p(m.layout.total);
    model_get_params(&m, p.data());
    const unsigned long long mine[5] = {fnv1a(p.data(), p.size() * sizeof(float)), (unsigned long long)m.step,
                                        (unsigned long long)m.train_forwards, data_fingerprint, device_code(m)};
    const bool before_first_step = !g.replicas_checked;
    g.replicas_checked = true;
    std::vector<unsigned long long> all(5 * (size_t)g.size);
    {
        Waiting w(before_first_step ? kSetUp : m.step);   // midway, rank 0 may be evaluating
        MPI_Allgather(mine, 5, MPI_UNSIGNED_LONG_LONG, all.data(), 5, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    }
    if (before_first_step) {   // a rank's GPU stays its own: once
        const unsigned long long gpu = m.backend->device() == Device::CUDA ? gpu_identity() : 0;
        std::vector<unsigned long long> gpus(g.size);
        MPI_Allgather(&gpu, 1, MPI_UNSIGNED_LONG_LONG, gpus.data(), 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
        if (!distinct_gpus(gpus, error)) return false;
    }
    const char* what[5] = {"parameters", "step", "dropout counter", "training data or batching", "device"};
    for (int r = 1; r < g.size; r++)
        for (int k : {1, 0, 2, 3, 4})   // the step first: it names a --resume that read another checkpoint
            if (all[5 * r + k] != all[k]) {
                *error = "rank " + std::to_string(r) + "'s " + what[k] + " differ from rank 0's (every rank "
                         "needs the same data at the same path, and on --resume the same checkpoint)";
                if (!before_first_step)
                    *error = "rank " + std::to_string(r) + "'s " + what[k] + " differ from rank 0's at rank 0's "
                             "step " + std::to_string(m.step) + ": the ranks parted during training (a fault "
                             "on one machine?)";
                if (k == 1 && before_first_step)   // (later, steps apart are a step one rank skipped)
                    *error = "rank " + std::to_string(r) + " is at step " + std::to_string(all[5 * r + 1]) +
                             ", rank 0 at step " + std::to_string(all[1]) + ": --resume read another checkpoint "
                             "(or none) on each; every rank reads the last one in --out, which must be the same "
                             "folder on every rank (on several machines a shared one)";
                if (k == 4)
                    *error = "rank " + std::to_string(r) + " runs on " + device_text(all[5 * r + 4]) + ", rank 0 on " +
                             device_text(all[4]) + ": every rank needs the same --device and --precision (one GPU "
                             "per rank: as many GPUs on each machine as ranks there, or --device cpu)";
                return false;
            }
#else
    (void)m, (void)data_fingerprint, (void)error;
#endif
    return true;
}

// ---------------------------------------------------------------------------------------------
// One global step
// ---------------------------------------------------------------------------------------------
DataParallelStep::~DataParallelStep() {
    if (sum_) m_->backend->release(sum_);
}

bool DataParallelStep::check_accum(int accum, std::string* error) {
    if (accum % g.size == 0) return true;
    *error = "a step of " + std::to_string(accum) + " batches (the checkpoint's --accum x ranks) does not "
             "divide among " + std::to_string(g.size) + " ranks; resume with a number of ranks that divides " +
             std::to_string(accum);
    return false;
}

void DataParallelStep::begin(Model* m, size_t batches) {
    if (m_ && m_ != m && sum_) { m_->backend->release(sum_); sum_ = nullptr; }
    m_ = m;
    batches_ = batches;
    const size_t per_rank = batches / (size_t)g.size;
    begin_ = (size_t)g.rank * per_rank;
    end_ = begin_ + per_rank;
    forwards0_ = m->train_forwards;
    m->train_forwards = forwards0_ + (int64_t)begin_;   // the masks one process would draw
}

void DataParallelStep::before_batch(size_t i) {
    if (i > begin_) m_->backend->fill_zero(m_->grads, m_->layout.total * sizeof(float));
}

// Left fold in batch order: sum = g0, sum += g1, ..., grads = g_last + sum (a float sum is
// commutative, so the last one equals sum + g_last).
void DataParallelStep::after_batch(size_t i) {
    const size_t n = end_ - begin_, j = i - begin_, total = m_->layout.total;
    if (n == 1) return;
    Backend& be = *m_->backend;
    if (j == 0) {
        if (!sum_) sum_ = (float*)be.alloc(total * sizeof(float));
        be.copy(sum_, m_->grads, total * sizeof(float));
    } else if (j + 1 < n) {
        be.add_inplace(sum_, m_->grads, total);
    } else {
        be.add_inplace(m_->grads, sum_, total);
    }
}

double DataParallelStep::end(double loss_sum) {
    m_->train_forwards = forwards0_ + (int64_t)batches_;
    if (!g.active) return loss_sum;
#ifdef TRANSFORMER_MPI
    Waiting w(m_->step + 1);
    m_->backend->synchronize();   // the backward pass done: the time below is the reduction's
    const double t0 = now_s();
    all_reduce_grads(m_);
    g.reduce_seconds += now_s() - t0;
    g.reduces++;
    g.reduce_bytes = (double)m_->layout.total * sizeof(float);
    MPI_Allreduce(MPI_IN_PLACE, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#endif
    return loss_sum;
}
