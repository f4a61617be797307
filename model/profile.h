// model/profile.h — where a training step's (or a decoding step's) time goes, op by op, on
// any device: ProfiledBackend runs another backend and times each op it is asked for between
// two of that backend's own marks (Backend::time_mark: CUDA events queued on the GPU's stream,
// so that the GPU runs as it runs unprofiled; the clock on the CPU). bench_train --profile
// prints the table (make gpu-check's base-model step has it).
//
// An op's time runs from the mark after the op before it to the mark after it: on a GPU that
// the host does not keep busy, the idle gap before a kernel counts to that kernel (a step
// limited by launches shows as many small ops that take longer than their work). Beside the
// time, each op's work as counted here: matrix FLOPs (the linear layers and attention) and
// the fewest bytes it must move through memory (each input read once, each output written
// once), so that a table row reads as TFLOP/s or GB/s against the device's ceilings.
#pragma once
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transformer.h"

// One op's total over the profiled calls.
struct OpProfile {
    std::string op;       // the Backend method, e.g. "linear_backward"
    long calls = 0;
    double ms = 0;        // summed time
    double flops = 0;     // summed matrix FLOPs (0 for ops without products)
    double bytes = 0;     // summed fewest bytes moved
};

class ProfiledBackend final : public Backend {
public:
    explicit ProfiledBackend(std::unique_ptr<Backend> inner);
    // The ops timed since construction or the last reset, the slowest first (synchronizes).
    // by_shape: the linear layers' calls apart by shape, as "linear_backward 25000x512->2048"
    // (rows x in -> out), the other ops left out: which products run below the device's peak.
    std::vector<OpProfile> report(bool by_shape = false);
    // Forgets every call timed so far; the next op is timed from now.
    void reset();

    // ---- The device and its memory: passed through; the copies are timed -----------------
    Device device() const override { return inner_->device(); }
    Precision precision() const override { return inner_->precision(); }
    size_t floatx_size() const override { return inner_->floatx_size(); }
    std::string describe() const override { return inner_->describe(); }
    void* alloc(size_t bytes) override { return inner_->alloc(bytes); }
    void release(void* p) override { inner_->release(p); }
    void synchronize() override { inner_->synchronize(); }
    int time_mark() override { return inner_->time_mark(); }
    double time_between(int from, int to) override { return inner_->time_between(from, to); }
    void clear_marks() override;
    size_t peak_memory() const override { return inner_->peak_memory(); }
    void upload(void* dst, const void* host_src, size_t bytes) override;
    void download(void* host_dst, const void* src, size_t bytes) override;
    void copy(void* dst, const void* src, size_t bytes) override;
    void fill_zero(void* dst, size_t bytes) override;
    void copy_rows(floatX* dst, int ld_dst, const floatX* src, int ld_src, int rows, int cols) override;
    void convert_weights(floatX* w, const float* p, size_t n) override;

    // ---- The ops, timed, in transformer.h's order ---------------------------------------------
    void positional_table(floatX* pe, int L, int d) override;
    void embedding_forward(floatX* x, const int* tokens, const floatX* E, const floatX* pe, int pos0,
                           int B, int L, int d, float p, uint64_t seed) override;
    void embedding_backward(float* dE, float* dpe, const floatX* dx, const int* tokens, int B, int L,
                            int d, float p, uint64_t seed) override;
    void linear_forward(floatX* Y, const floatX* X, const floatX* W, const floatX* b, int rows, int in,
                        int out) override;
    void linear_backward(floatX* dX, float dX_beta, float* dW, float* db, const floatX* dY,
                         const floatX* X, const floatX* W, int rows, int in, int out) override;
    void linear_relu_forward(floatX* Y, const floatX* X, const floatX* W, const floatX* b, int rows,
                             int in, int out) override;
    void relu_backward(floatX* dx, float* db, const floatX* dy, const floatX* y, int rows, int cols) override;
    void dropout_forward(floatX* y, const floatX* x, size_t n, float p, uint64_t seed) override;
    void dropout_backward(floatX* dx, const floatX* dy, size_t n, float p, uint64_t seed) override;
    void residual_forward(floatX* y, const floatX* f, const floatX* x, size_t n, float p,
                          uint64_t seed) override;
    void layernorm_forward(floatX* y, float* mean, float* rstd, const floatX* x, const floatX* g,
                           const floatX* b, int rows, int d) override;
    void layernorm_backward(floatX* dx, float dx_beta, float* dg, float* db, const floatX* dy,
                            const floatX* x, const float* mean, const float* rstd, const floatX* g,
                            int rows, int d) override;
    void residual_layernorm_forward(floatX* y, floatX* r, float* mean, float* rstd, const floatX* f,
                                    const floatX* x, const floatX* g, const floatX* b, int rows, int d,
                                    float p, uint64_t seed) override;
    void residual_layernorm_backward(floatX* dx, floatX* df, float* dg, float* db, const floatX* dy,
                                     const floatX* r, const float* mean, const float* rstd,
                                     const floatX* g, int rows, int d, float p,
                                     uint64_t seed) override;
    void attention_forward(floatX* ctx, float* probs, const floatX* q, const floatX* kv,
                           const int* key_tokens, const AttentionShape& s, float p_attn,
                           uint64_t seed) override;
    void attention_backward(floatX* dq, floatX* dkv, const floatX* dctx, const float* probs,
                            const floatX* q, const floatX* kv, const AttentionShape& s, float p_attn,
                            uint64_t seed) override;
    void attention_step_self(floatX* ctx, const floatX* q, const floatX* cache, const int* step_row,
                             const int* slots, int ld_slots, int t, const StepShape& s) override;
    void cache_reorder(int* slots_dst, const int* slots_src, const int* parent, int n, int t,
                       int ld) override;
    void attention_keys_transpose(floatX* kt, const floatX* kv, int B, int S, int H, int dk,
                                  int ld) override;
    void attention_step_cross(floatX* ctx, const floatX* q, const floatX* kt, const floatX* kv, int ld,
                              const int* len, const int* sentence, int S, const StepShape& s) override;
    void crossentropy_forward(float* lse, double* loss, const floatX* logits, const int* labels, int rows,
                              int V, float eps) override;
    void crossentropy_backward(floatX* logits, const float* lse, const int* labels, int rows, int V,
                               float eps, float scale) override;
    void crossentropy_forward_backward(float* lse, double* loss, floatX* logits, const int* labels, int rows,
                                       int V, float eps, float scale) override;
    void logsoftmax_topk(int* tokens, float* logp, const floatX* logits, int rows, int V, int ld, int k,
                         int banned) override;
    void logsoftmax_gather(float* logp, const floatX* logits, const int* tokens, int rows, int V,
                           int ld) override;
    void logsoftmax_ensemble(floatX* out, const floatX* const* logits, int K, int rows, int V,
                             int ld) override;
    void logsoftmax_sample(int* tokens, float* logp, const float* uniform, const floatX* logits,
                           int rows, int V, int ld, float temperature, int topk, float topp) override;
    void search_select(const SearchState& st, const int* cand_token, const float* cand_logp,
                       const int* forced, const float* forced_logp, int n, int t) override;
    double global_norm(const float* g, size_t n) override;
    void scale(float* x, size_t n, float s) override;
    void add_inplace(float* y, const float* x, size_t n) override;
    void adam_step(float* p, const float* g, float* m, float* v, floatX* w, size_t n, float lr,
                   float beta1, float beta2, float eps, int64_t step) override;
    bool quantize_weights(const float* W, int N, int K, std::string* error) override {
        return inner_->quantize_weights(W, N, K, error);
    }
    void drop_quantized_weights() override { inner_->drop_quantized_weights(); }
    void pack_weights(const float* W, int N, int K) override { inner_->pack_weights(W, N, K); }
    void drop_packed_weights() override { inner_->drop_packed_weights(); }
    bool has_packed_weights() const override { return inner_->has_packed_weights(); }

private:
    struct Call {
        const char* op;
        int mark;             // the mark taken after it
        double flops, bytes;
        std::string shape;    // the linear layers': "ROWSxIN->OUT"
    };
    std::unique_ptr<Backend> inner_;
    int start_mark_ = 0;      // the mark the first call is timed from
    std::vector<Call> calls_;
    // After an op: marks the device's queue and records the call.
    void done(const char* op, double flops, double bytes, std::string shape = "");
    double fx() const { return (double)floatx_size(); }
};

// 2 x the multiply-adds of every matrix product of one forward pass over batch b (padded rows and
// masked scores included, as computed): the projections, attention's two products per head, the
// FFN and the tied classifier; a training step does 3x (bench_train's MFU).
double forward_matmul_flops(const Config& c, const Batch& b);

// Wraps m's backend in a ProfiledBackend (the model's buffers stay where they are) and returns it.
ProfiledBackend* profile_model(Model* m);
// Prints the report as a table of lines that start with "# profile", per step (a training step;
// unit names it, e.g. "run" for a whole decoding run): ms, share of step_ms (the step's time
// measured without profiling, 0: of the ops' sum), TFLOP/s, GB/s.
void profile_print(FILE* out, const std::vector<OpProfile>& ops, int steps, double step_ms, const char* unit = "step");
