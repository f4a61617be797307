// distributed.h — data-parallel training across processes and machines: `mpirun -np N ./train`.
//
// Every rank holds the whole model. A global step takes G = N * A batches (A = --accum per
// rank) in exactly the order one process with --accum G takes them: every rank draws all G
// (the sampler is the same everywhere) and runs its own A of them, rank r the batches
// r*A .. r*A + A - 1, with the dropout masks those batches would have had in one process.
// Each batch's gradient is computed alone (from zero), scaled by 1 / (labels of all G
// batches), and summed in batch order; one all-reduce over the whole contiguous gradient
// buffer then sums the ranks' parts, and every rank applies the same Adam step. With one
// batch per rank and two ranks that sum is g0 + g1 on both sides, so 2 ranks and one process
// with --accum 2 give bitwise the same training (tested).
//
// The all-reduce: MPI_Allreduce on host memory (the CPU backend's buffers; a GPU buffer
// without NCCL goes through the host), or NCCL on the GPU buffer when this build has
// build/libtransformer_nccl.so (toolkit/nccl_allreduce.cu, built when nccl.h is found),
// bootstrapped through MPI (rank 0's ncclUniqueId broadcast).
//
// Without MPI (a build where mpicxx was not found: TRANSFORMER_MPI undefined), or a run not
// launched by mpirun, there is one rank and every function below is the single-process one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

struct Model;

// Starts MPI when this process was launched by mpirun (and this build has MPI): one rank per
// process, stdout silenced on every rank but 0, a watchdog that ends the whole job when a
// collective waits longer than timeout_s (0: none) for the other ranks, and on a GPU machine
// the rank's GPU chosen by its local rank (CUDA_VISIBLE_DEVICES). False + *error on failure.
bool dist_init(int* argc, char*** argv, double timeout_s, std::string* error);
// Ends MPI. A failed rank (status != 0, not 130 = interrupted on every rank) ends the whole
// job (MPI_Abort) with a message naming it, so that the others do not wait for it.
int dist_finalize(int status);

int dist_rank();
int dist_size();
bool dist_is_root();
bool dist_active();          // launched by mpirun with MPI (even with one rank)
bool dist_mpi_built();
std::string dist_describe(const Model& m);   // one line for the log

// Runs fn on every rank, one rank after another in rank order (set-up: the corpus, BPE and
// the token caches are built once, by rank 0, and read by the others). False when fn fails.
template <class F> bool dist_in_rank_order(F fn);
void dist_barrier();

// True on every rank when every rank passes true (the budget: one rank that must stop, by
// its clock or a signal, stops all of them at the same step).
bool dist_all_agree(bool mine);

// Checks that every rank holds the same model (parameters, step, dropout counter, the data's
// fingerprint, the device and precision): after set-up, every --eval-every steps tried, and at
// the end; the first call also refuses two ranks on one GPU. False + *error naming the first
// rank that differs.
bool dist_check_replicas(const Model& m, uint64_t data_fingerprint, std::string* error);

// One global step over `batches` batches (all of them drawn on every rank).
class DataParallelStep {
public:
    ~DataParallelStep();
    // Checks that `accum` (batches per global step) divides among the ranks.
    static bool check_accum(int accum, std::string* error);
    // Starts a step: this rank's batches [begin, end), the model's forward counter set to
    // number begin's dropout masks as one process would. Gradients must be zero.
    void begin(Model* m, size_t batches);
    size_t first() const { return begin_; }
    size_t last() const { return end_; }     // one past
    // Around each of this rank's model_forward_backward calls: each batch's gradient alone,
    // then folded into the step's sum in batch order.
    void before_batch(size_t i);
    void after_batch(size_t i);
    // Sums the gradients (and loss_sum) over the ranks and restores the forward counter to
    // one past the step's last batch; returns the global loss_sum.
    double end(double loss_sum);

private:
    Model* m_ = nullptr;
    size_t begin_ = 0, end_ = 0, batches_ = 0;
    int64_t forwards0_ = 0;
    float* sum_ = nullptr;   // the running sum of this rank's earlier batches' gradients
};

// ---------------------------------------------------------------------------------------------
template <class F> bool dist_in_rank_order(F fn) {
    bool ok = true;
    for (int k = 0; k < dist_size(); k++) {
        if (k == dist_rank()) ok = fn();
        if (!ok) return false;   // a failed rank exits; dist_finalize ends the job
        dist_barrier();
    }
    return ok;
}
