// transformer.h — the model of "Attention Is All You Need" (Vaswani et al., 2017): the
// configuration, the padded batch, the parameter layout, the op interface that every backend
// implements (the CPU in transformer.cpp, the GPU in transformer.cu), and the model API.
//
// Reading order for a newcomer: Config -> ParamLayout (names and shapes of every tensor, one
// contiguous buffer) -> Backend (the ops, grouped by section of the paper: the complete
// contract of a device) -> Model and its functions (model/model.cpp: the encoder, the decoder
// for training and for decoding, the loss, backward and Adam, written once on the ops) ->
// model/checkpoint.cpp. numerics.h holds what both backends compute bit for bit.
// Shapes are written (B, L, C): B sentences, L positions, C channels; rows = B * L.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "numerics.h"   // special token ids, dropout generator, sinusoids

// A padded batch of sentence pairs: the model's input. Row-major, padding id 0.
// Masks are derived from the padding inside the model (key padding: src == PAD_ID).
struct Batch {
    int B = 0;                 // sentences in the batch
    int S = 0;                 // padded source length (longest source incl. </s>)
    int T = 0;                 // padded target length (longest target + 1)
    std::vector<int> src;      // (B, S) source tokens + </s>, then PAD
    std::vector<int> tgt_in;   // (B, T) <s> + target tokens, then PAD
    std::vector<int> labels;   // (B, T) target tokens + </s>, then PAD
    int src_tokens = 0;        // non-pad entries of src
    int tgt_tokens = 0;        // non-pad entries of labels (the loss is a mean over these)
};

// ---------------------------------------------------------------------------------------------
// Every knob of the paper's Table 3.
struct Config {
    int n_enc = 6;             // N, encoder layers
    int n_dec = 6;             // N, decoder layers
    int d_model = 512;
    int d_ff = 2048;
    int n_heads = 8;           // h
    int d_k = 64;              // per-head query/key size (default d_model / h)
    int d_v = 64;              // per-head value size (default d_model / h)
    int vocab = 37000;         // shared source/target vocabulary, specials included
    int max_len = 256;         // longest sentence (tokens incl. </s>) for training; learned PE size
    float p_drop = 0.1f;       // P_drop: sub-layer outputs and embeddings + PE
    float p_attn_drop = 0.0f;  // tensor2tensor option: on attention probabilities
    float p_relu_drop = 0.0f;  // tensor2tensor option: on the FFN's ReLU output
    float label_smoothing = 0.1f;  // epsilon_ls
    bool pre_ln = false;       // false: x = LN(x + Sublayer(x)) (paper); true: x + Sublayer(LN(x))
    bool learned_pos = false;  // false: sinusoids (paper); true: learned table (Table 3 row E)
};

// Named presets: "tiny", "small", "base", "big" (paper Table 3). False if the name is unknown.
bool config_preset(const std::string& name, Config* cfg);
// Empty when the config is usable; otherwise a message naming the first problem.
std::string config_error(const Config& cfg);
// JSON object text with every field (the checkpoint's __metadata__ "config").
std::string config_to_json(const Config& cfg);
// Parses config_to_json's output (unknown keys ignored, missing keys an error).
bool config_from_json(const std::string& json, Config* cfg, std::string* error);
// Empty when equal; otherwise "d_model: 512 vs 256" for the first field that differs.
std::string config_difference(const Config& a, const Config& b);
// Prints the config as a table, with the parameter count.
void config_print(const Config& cfg, size_t n_params);

// ---------------------------------------------------------------------------------------------
// Parameter layout: every tensor is a view (offset, shape) into ONE contiguous float buffer.
// The gradient buffer and Adam's m and v have the same layout, so the same offsets index them.

// A linear layer y = x W^T + b, W [out, in] (PyTorch nn.Linear), b [out].
struct LinearP { size_t w = 0, b = 0; int out = 0, in = 0; };
struct LayerNormP { size_t g = 0, b = 0; };
// q, k, v weights are adjacent ([q; k; v] rows), and so are their biases, so that the
// self-attention input projection is ONE product with W_qkv [h*d_k + h*d_k + h*d_v, d_model]
// and the cross-attention key/value projection one product with W_kv.
struct AttentionP {
    LinearP q, k, v, out;
    LinearP qkv() const { return {q.w, q.b, q.out + k.out + v.out, q.in}; }
    LinearP kv() const { return {k.w, k.b, k.out + v.out, k.in}; }
};
struct FeedForwardP { LinearP fc1, fc2; };
struct EncoderLayerP { AttentionP self_attn; LayerNormP norm1; FeedForwardP ffn; LayerNormP norm2; };
struct DecoderLayerP {
    AttentionP self_attn; LayerNormP norm1;
    AttentionP cross_attn; LayerNormP norm2;
    FeedForwardP ffn; LayerNormP norm3;
};

struct TensorInfo {
    std::string name;          // DESIGN.md name, e.g. "decoder.layers.0.cross_attn.q_proj.weight"
    std::vector<int> shape;
    size_t offset = 0;         // in floats, into the buffer
    size_t numel = 0;
};

struct ParamLayout {
    std::vector<TensorInfo> tensors;   // in buffer order
    size_t total = 0;                  // floats in the buffer
    size_t embed = 0;                  // E [vocab, d_model]
    size_t pos_embed = 0;              // [max_len, d_model], learned positions only
    std::vector<EncoderLayerP> enc;
    std::vector<DecoderLayerP> dec;
    LayerNormP enc_norm, dec_norm;     // pre-LN only
};
ParamLayout make_layout(const Config& cfg);


// =============================================================================================
// The op interface: everything the model sequence asks of a device
// =============================================================================================
// The model sequence (model/model.cpp) never touches an element of a tensor: it plans memory,
// then calls these ops, in this order, on pointers into memory the backend gave it. A backend
// is the device, its precision and the ops; CpuBackend (transformer.cpp) and CudaBackend
// (transformer.cu) implement the same list, in the same order, with the same shape comments.
//
// Memory kinds: parameters, their gradients and Adam's state are float (fp32 master copies);
// activations and the weights as the products read them are floatX; token ids are int; all
// of them live on the device (host memory for the CPU). Backward ops ACCUMULATE into
// parameter gradients and, unless a beta argument says otherwise, overwrite activation
// gradients. Every op may assume its pointers do not alias unless its comment allows it.

// floatX: the element of activations and of the weights the products read. float on the CPU
// and in the GPU's fp32 mode, bfloat16 in its bf16 mode (llm.c's name). Opaque on purpose:
// the model sequence only passes floatX pointers along; the backends read the elements.
struct floatX;

enum class Device { CPU, CUDA };
// fp32: the reference numerics. bf16 on the GPU: bf16 weight copy and activations, fp32 master
// weights, gradients, Adam state, LayerNorm statistics, softmax and loss; on the CPU: the
// linear layers' products on bf16 operands with fp32 sums, everything else fp32. int8 (CPU,
// inference): weight matrices quantized per output row, activations per row on the fly.
enum class Precision { FP32, BF16, INT8 };
inline const char* precision_name(Precision p) {   // "fp32", "bf16", "int8"
    return p == Precision::BF16 ? "bf16" : p == Precision::INT8 ? "int8" : "fp32";
}

// Multi-head attention over B sentences (training and full-prefix passes).
// q: (B, Lq, *) with head h's query at column q_col + h*dk, row stride q_stride; k and v:
// (B, Lk, *) at columns k_col + h*dk and v_col + h*dv, row stride kv_stride.
// key_tokens (B, Lk) masks PAD keys; causal also masks keys j > i.
struct AttentionShape {
    int B, Lq, Lk, H, dk, dv;
    int q_stride, q_col, kv_stride, k_col, v_col;
    bool causal;
};

// Where one (sentence b, head h) of §3.2.2 starts in each operand: q and dq (row stride
// q_stride), the keys, the values and their gradients in kv and dkv (kv_stride), ctx and dctx
// (row stride H*dv), probs and dS ((B, H, Lq, Lk): (Lq, Lk) per head). The CPU ops and the
// CUDA kernels index with it alike.
struct HeadOffsets {
    size_t q, k, v, ctx, probs;
};
HOST_DEVICE inline HeadOffsets head_offsets(const AttentionShape& s, int b, int h) {
    return {(size_t)b * s.Lq * s.q_stride + s.q_col + (size_t)h * s.dk,
            (size_t)b * s.Lk * s.kv_stride + s.k_col + (size_t)h * s.dk,
            (size_t)b * s.Lk * s.kv_stride + s.v_col + (size_t)h * s.dv,
            (size_t)b * s.Lq * s.H * s.dv + (size_t)h * s.dv,
            ((size_t)b * s.H + h) * s.Lq * s.Lk};
}

// Decoding: one query row per hypothesis. q (n, *) with head h's query at column h*dk, row
// stride q_stride; ctx (n, H*dv).
struct StepShape { int n, H, dk, dv, q_stride; };

// Beam search's state for B sentences, in device memory (model/model.cpp allocates it when a
// batch's decoding begins; toolkit/decode.h has the rules). A row is one alive hypothesis at
// the current step, rows sentence by sentence. Step t's rows sit in hist[t] (3, R): the token
// they feed, their parent row at step t - 1, their sentence; a hypothesis' tokens are found by
// walking parents back from its row. model/search.h holds the per-sentence selection.
struct SearchState {
    int B, R;                 // sentences; rows at most (B * beam)
    int beam;                 // k (1: greedy, the argmax)
    int nbest;                // finished hypotheses kept per sentence (>= 1)
    int kc;                   // candidates per row: 2k (beam), 1 (greedy)
    int V, max_steps;
    const int* max_len;       // (B) output length limit (tokens, </s> included)
    const float* lp;          // (max_steps + 1) the length penalty lp(n) = ((5 + n) / 6)^alpha
    int* first_row;           // (B) the sentence's first row at the current step; -1 when done
    int* alive;               // (B) its rows (alive hypotheses) at the current step
    float* alive_logp;        // (B, beam) their log-probabilities, best first
    int* next_n;              // (B) the next step's alive hypotheses (selection scratch)
    int* next_token;          // (B, beam) their last token (scratch)
    int* next_parent;         // (B, beam) the row they came from (scratch)
    float* next_logp;         // (B, beam) (scratch)
    int* fin_n;               // (B) finished hypotheses kept
    float* fin_score;         // (B, nbest) logprob / lp(length), best first, equal scores in
    float* fin_logp;          //            the order they finished
    int* fin_step;            // (B, nbest) the step t it finished at (length t + 1)
    int* fin_row;             // (B, nbest) its row at step t (its first t tokens)
    int* fin_token;           // (B, nbest) its last token (</s>, or any at the length limit)
    int* hist;                // (max_steps + 1, 3, R) every step's rows: token, parent, sentence
    int* count;               // (1) the next step's rows
};

// What Backend::alloc throws when throw_out_of_memory is set and the memory is not there.
struct OutOfMemory : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class Backend {
public:
    virtual ~Backend() = default;

    // ---- The device and its memory ----------------------------------------------------------
    virtual Device device() const = 0;
    virtual Precision precision() const = 0;
    // Bytes of a floatX: 2 for the GPU's bf16, else 4 (the CPU's bf16 keeps float activations).
    virtual size_t floatx_size() const { return precision() == Precision::BF16 ? 2 : 4; }
    virtual std::string describe() const = 0;   // e.g. "CPU, 2 OpenMP threads, fp32"
    // Device memory, uninitialised, 64-byte aligned; nullptr for 0 bytes. Out of memory ends
    // the program with a message naming the size and what to lower, or throws OutOfMemory with
    // it when throw_out_of_memory is set: a server's (cli/serve.cpp) answers the request whose
    // batch asked with an error and goes on, as it lets std::bad_alloc be thrown.
    virtual void* alloc(size_t bytes) = 0;
    bool throw_out_of_memory = false;
    virtual void release(void* p) = 0;
    // Waits until the work queued on the device is done (timing; a no-op on the CPU).
    virtual void synchronize() {}
    // Timing marks (where a step's time goes: model/profile.h). time_mark() notes how far the
    // device's queue has come, without waiting (a CUDA event; the clock on the CPU, which runs
    // each op as it is called), and returns the mark's number; time_between(a, b) is the
    // milliseconds from mark a to mark b, once the device has passed b (synchronize() first);
    // clear_marks() forgets every mark.
    virtual int time_mark() = 0;
    virtual double time_between(int from, int to) = 0;
    virtual void clear_marks() = 0;
    // The most memory this backend held at once, in bytes (0 on the CPU, where the process's
    // peak RSS says it).
    virtual size_t peak_memory() const { return 0; }
    virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
    virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
    virtual void copy(void* dst, const void* src, size_t bytes) = 0;
    virtual void fill_zero(void* dst, size_t bytes) = 0;
    // dst (rows, cols) with row stride ld_dst = src (rows, cols) with row stride ld_src.
    virtual void copy_rows(floatX* dst, int ld_dst, const floatX* src, int ld_src, int rows,
                           int cols) = 0;
    // w (n) = p (n) in floatX: the products' copy of the weights (bf16; in fp32 a copy, which
    // the model never needs: its weights are the parameters themselves).
    virtual void convert_weights(floatX* w, const float* p, size_t n) = 0;

    // ---- §3.4 Embeddings, §3.5 Positional Encoding ------------------------------------------
    // pe (L, d) = sinusoid(pos, c, d) (numerics.h).
    virtual void positional_table(floatX* pe, int L, int d) = 0;
    // x (B, L, d) = dropout(E[tokens] * sqrt(d) + pe[pos0 + l]); tokens (B, L), E (V, d).
    virtual void embedding_forward(floatX* x, const int* tokens, const floatX* E,
                                   const floatX* pe, int pos0, int B, int L, int d, float p,
                                   uint64_t seed) = 0;
    // dE[tokens] += sqrt(d) * dropout'(dx); dpe[l] += dropout'(dx) when dpe (learned PE;
    // training passes start at position 0).
    virtual void embedding_backward(float* dE, float* dpe, const floatX* dx, const int* tokens,
                                    int B, int L, int d, float p, uint64_t seed) = 0;

    // ---- Linear layers: every projection of §3.2.2 and §3.3, and the logits of §3.4 -------
    // Y (rows, out) = X (rows, in) W^T + b; W (out, in) as nn.Linear; b may be nullptr.
    virtual void linear_forward(floatX* Y, const floatX* X, const floatX* W, const floatX* b,
                                int rows, int in, int out) = 0;
    // dX (rows, in) = dY W + dX_beta * dX (dX may be nullptr); dW (out, in) += dY^T X;
    // db (out) += sum over rows of dY (db may be nullptr).
    virtual void linear_backward(floatX* dX, float dX_beta, float* dW, float* db,
                                 const floatX* dY, const floatX* X, const floatX* W, int rows,
                                 int in, int out) = 0;

    // ---- §3.3 Position-wise Feed-Forward Networks: the ReLU ----------------------------------
    // Fused: Y (rows, out) = max(0, X (rows, in) W^T + b), the FFN's first layer in one pass
    // (a cuBLASLt epilogue on the GPU); b may be nullptr. Its backward is relu_backward, then
    // linear_backward (with db nullptr: relu_backward took it).
    virtual void linear_relu_forward(floatX* Y, const floatX* X, const floatX* W, const floatX* b,
                                     int rows, int in, int out) = 0;
    // dx (rows, cols) = dy where y > 0, else 0; in place (dx == dy) allowed. db (cols), when not
    // nullptr, += the column sums of dx as linear_backward's db would add them (the FFN's first
    // bias: the GPU sums dx as it writes it, so dx, d_ff columns wide, is read once less).
    virtual void relu_backward(floatX* dx, float* db, const floatX* dy, const floatX* y, int rows,
                               int cols) = 0;

    // ---- §5.4 Residual Dropout, and the residual connections + LayerNorm of §3.1 ------------
    // Every op with dropout takes p and `seed`, the dropout site's seed (numerics.h's
    // dropout_site_seed of the model's seed, the forward pass and the site): element i is kept
    // iff dropout_keep(seed, i, p), so both devices, and a forward and its backward, make the
    // same mask.
    // y (n) = dropout(x): x * keep / (1 - p); in place allowed. backward: the same mask.
    virtual void dropout_forward(floatX* y, const floatX* x, size_t n, float p,
                                 uint64_t seed) = 0;
    virtual void dropout_backward(floatX* dx, const floatX* dy, size_t n, float p,
                                  uint64_t seed) = 0;
    // y (n) = x + dropout(f): a sub-layer's output joins its residual stream; y may be f.
    virtual void residual_forward(floatX* y, const floatX* f, const floatX* x, size_t n,
                                  float p, uint64_t seed) = 0;
    // y (rows, d) = (x - mean) * rstd * g + b, rstd = 1 / sqrt(var + 1e-5) (biased variance);
    // mean, rstd (rows) saved for backward.
    virtual void layernorm_forward(floatX* y, float* mean, float* rstd, const floatX* x,
                                   const floatX* g, const floatX* b, int rows, int d) = 0;
    // dx (rows, d) = LN'(dy) + dx_beta * dx; dg, db (d) accumulate.
    virtual void layernorm_backward(floatX* dx, float dx_beta, float* dg, float* db,
                                    const floatX* dy, const floatX* x, const float* mean,
                                    const float* rstd, const floatX* g, int rows, int d) = 0;
    // Fused, post-LN (§3.1 LayerNorm(x + Sublayer(x)), §5.4's dropout on the sub-layer):
    // r (rows, d) = x + dropout(f), y (rows, d) = LN(r), in one pass over the row; r may be f.
    // The dropout mask and every value equal residual_forward then layernorm_forward's.
    virtual void residual_layernorm_forward(floatX* y, floatX* r, float* mean, float* rstd,
                                            const floatX* f, const floatX* x, const floatX* g,
                                            const floatX* b, int rows, int d, float p,
                                            uint64_t seed) = 0;
    // Its backward: dx (rows, d) = LN'(dy) (the gradient of r, which flows to x unchanged),
    // df (rows, d) = dropout'(dx) (what flows into the sub-layer); dg, db (d) accumulate.
    // Equal to layernorm_backward, a copy and dropout_backward.
    virtual void residual_layernorm_backward(floatX* dx, floatX* df, float* dg, float* db,
                                             const floatX* dy, const floatX* r, const float* mean,
                                             const float* rstd, const floatX* g, int rows, int d,
                                             float p, uint64_t seed) = 0;

    // ---- §3.2.1 Scaled Dot-Product Attention, §3.2.2 Multi-Head Attention --------------------
    // ctx (B, Lq, H*dv) = dropout(softmax(mask(Q K^T / sqrt(dk)))) V per sentence and head;
    // probs (B, H, Lq, Lk) saves the softmax (masked entries 0). The dropout mask of an entry is
    // dropout_keep(seed, its index in probs, p_attn).
    virtual void attention_forward(floatX* ctx, float* probs, const floatX* q, const floatX* kv,
                                   const int* key_tokens, const AttentionShape& s, float p_attn,
                                   uint64_t seed) = 0;
    // dq, dkv written (not accumulated) at the columns q, kv were read from; dq and dkv may
    // be the same buffer (self-attention reads q, k, v from one projection).
    virtual void attention_backward(floatX* dq, floatX* dkv, const floatX* dctx,
                                    const float* probs, const floatX* q, const floatX* kv,
                                    const AttentionShape& s, float p_attn,
                                    uint64_t seed) = 0;

    // ---- §3.2.3 The decoder one position at a time: attention over cached keys/values -------
    // The self-attention cache of a layer is a slab per step j, one row (H*dk + H*dv: keys,
    // then values) per hypothesis decoded at step j, slab j beginning at cache row step_row[j]
    // (step_row (t + 1) on the device; the decoder lays the slabs one after another, each as
    // many rows as its step had). slots (n, ld_slots): row r's ancestor at step j < t sat in row
    // slots[r * ld_slots + j] of slab j; at step t it is row r.
    // ctx (n, H*dv) = softmax(q k_j / sqrt(dk)) over j = 0..t, summed with the v_j.
    virtual void attention_step_self(floatX* ctx, const floatX* q, const floatX* cache,
                                     const int* step_row, const int* slots, int ld_slots, int t,
                                     const StepShape& s) = 0;
    // slots_dst (n, ld) row r = slots_src row parent[r] for columns < t - 1, and column t - 1
    // = parent[r]: hypotheses that change parent take their ancestors' cache rows.
    virtual void cache_reorder(int* slots_dst, const int* slots_src, const int* parent, int n,
                               int t, int ld) = 0;
    // Cross-attention keys of kv (B*S, ld; head h's key at column h*dk) transposed once per
    // batch: kt (B, H, dk, S).
    virtual void attention_keys_transpose(floatX* kt, const floatX* kv, int B, int S, int H,
                                          int dk, int ld) = 0;
    // Row r attends over its sentence b = sentence[r]: keys kt[b] (H, dk, S), values at
    // column H*dk of kv (B*S, ld) rows b*S .. b*S + len[b] - 1 (the PAD keys after are left out).
    virtual void attention_step_cross(floatX* ctx, const floatX* q, const floatX* kt,
                                      const floatX* kv, int ld, const int* len,
                                      const int* sentence, int S, const StepShape& s) = 0;

    // ---- §3.4's logits and §5.4 Label Smoothing: the loss, decoding's log-softmax ------------
    // Cross-entropy with label smoothing eps, PyTorch's convention: q(y) = 1 - eps + eps/V,
    // q(k) = eps/V; PAD labels ignored. logits (rows, V); lse (rows) saved (0 on PAD rows).
    // Adds the SUM of the rows' losses to *loss, one double in the backend's memory: a batch's
    // chunks accumulate there and the host reads the total once (on the GPU: no wait a chunk).
    virtual void crossentropy_forward(float* lse, double* loss, const floatX* logits,
                                      const int* labels, int rows, int V, float eps) = 0;
    // In place: logits (rows, V) become dlogits = (softmax - q) * scale; PAD rows become 0.
    virtual void crossentropy_backward(floatX* logits, const float* lse, const int* labels,
                                       int rows, int V, float eps, float scale) = 0;
    // Both, one after the other (training): the same lse, *loss and dlogits; a GPU reads the
    // logits once for both.
    virtual void crossentropy_forward_backward(float* lse, double* loss, floatX* logits,
                                               const int* labels, int rows, int V, float eps,
                                               float scale) {
        crossentropy_forward(lse, loss, logits, labels, rows, V, eps);
        crossentropy_backward(logits, lse, labels, rows, V, eps, scale);
    }
    // Decoding: per row of logits (rows, V; row stride ld), the k best tokens (rows, k) and
    // their log-probabilities z - logsumexp(z), best first, ties to the lowest id (token -1,
    // log-probability -inf past V). The token `banned` (or -1 for none) counts as -inf, in the
    // sum too.
    virtual void logsoftmax_topk(int* tokens, float* logp, const floatX* logits, int rows,
                                 int V, int ld, int k, int banned) = 0;
    // Scoring and forced tokens (a target prefix): logp (rows) = z[tokens[r]] - logsumexp(z)
    // per row of logits (rows, V; row stride ld); a PAD_ID token gives 0 (as the loss ignores
    // PAD labels).
    virtual void logsoftmax_gather(float* logp, const floatX* logits, const int* tokens,
                                   int rows, int V, int ld) = 0;
    // Ensembles (decoding with several models): per row, out = log((1/K) sum_k softmax(z_k)),
    // the log of the members' mean probability, from K (1..kMaxEnsemble) models' logits, (rows,
    // V) each with row stride ld, read through the host array logits[0 .. K). out (rows, V;
    // stride ld) may be logits[0]. Its rows are log-probabilities: the ops above leave them as they are (up to
    // rounding: their log-sum-exp is 0), so top-k, forced tokens and sampling read them alike.
    static constexpr int kMaxEnsemble = 16;
    virtual void logsoftmax_ensemble(floatX* out, const floatX* const* logits, int K, int rows,
                                     int V, int ld) = 0;
    // Sampling (back-translation): per row, one token drawn with uniform[r] in [0, 1) from
    // softmax(z / temperature) restricted to the kept tokens: those whose z is at least a
    // threshold, the largest for which (top-k, topk > 0) at least topk tokens are kept and
    // (top-p, topp < 1) the kept tokens' probability reaches topp (both: the larger set);
    // every token when neither is asked. Ties at the threshold are all kept. The draw: the first kept token, in id order, whose cumulative weight
    // exceeds uniform[r] times the kept total. tokens (rows) gets it, logp (rows) its
    // log-probability at temperature 1 (z - logsumexp(z), the model's). logp may be uniform.
    // A row that keeps no token (its logits all NaN: a diverged model) gets EOS_ID, ending its
    // sentence, never an id outside the vocabulary.
    virtual void logsoftmax_sample(int* tokens, float* logp, const float* uniform,
                                   const floatX* logits, int rows, int V, int ld,
                                   float temperature, int topk, float topp) = 0;

    // ---- §6.1 Machine Translation: beam search's bookkeeping, on the device -----------------
    // One step t of the search for every sentence (model/search.h: search_select_sentence):
    // from the n rows' candidates cand_token, cand_logp (n, kc), best first (token -1: none),
    // each sentence's next alive hypotheses, its finished ones (</s>, or the length limit) and
    // tensor2tensor's early stop; then the rows of step t + 1 into hist[t + 1] (sentence by
    // sentence), first_row, alive, alive_logp, and *count. forced (n) (nullptr: none): a row
    // whose forced[r] != PAD_ID takes that token with log-probability forced_logp[r] (a target
    // prefix). Greedy (beam 1) and sampling (a drawn token as the only candidate) included.
    virtual void search_select(const SearchState& st, const int* cand_token,
                               const float* cand_logp, const int* forced,
                               const float* forced_logp, int n, int t) = 0;

    // ---- §5.3 Optimizer -----------------------------------------------------------------------
    // sqrt(sum of g^2) over g (n), in double, in an order that does not depend on threads.
    virtual double global_norm(const float* g, size_t n) = 0;
    // x (n) *= s.
    virtual void scale(float* x, size_t n, float s) = 0;
    // y (n) += x (n), one float sum per element: gradient accumulation and data parallelism
    // sum each batch's gradient into the step's (toolkit/distributed.h).
    virtual void add_inplace(float* y, const float* x, size_t n) = 0;
    // Adam (PyTorch's formulation) over p, g, m, v (n); w (n), the products' bf16 copy, is
    // rewritten from p when not nullptr.
    virtual void adam_step(float* p, const float* g, float* m, float* v, floatX* w, size_t n,
                           float lr, float beta1, float beta2, float eps, int64_t step) = 0;

    // ---- Int8 inference (CPU): products by quantized weights ---------------------------------
    // Quantizes W (N, K) (CPU: cpu/gemm_int8.h); from then on linear_forward(…, W, …) runs in
    // int8 and precision() is INT8. Other backends refuse (false + *error).
    virtual bool quantize_weights(const float* /*W*/, int /*N*/, int /*K*/, std::string* error) {
        *error = std::string("int8 products are a CPU option; this backend runs ") +
                 precision_name(precision());
        return false;
    }
    // Drops every quantized matrix: fp32 again.
    virtual void drop_quantized_weights() {}

    // ---- Inference with weights that no longer change (CPU, fp32 and bf16) --------------------
    // Packs W (N, K) once into the layout the products read it in (cpu/gemm.h's sgemm_pack_b,
    // cpu/gemm_bf16.h's sgemm_bf16_pack_b): linear_forward(…, W, …) then skips packing it at
    // every call, with the same results. W must not change until drop_packed_weights(). Other
    // backends and precisions: nothing to do.
    virtual void pack_weights(const float* /*W*/, int /*N*/, int /*K*/) {}
    virtual void drop_packed_weights() {}
    virtual bool has_packed_weights() const { return false; }
};

// The CPU backend (transformer.cpp): fp32 (int8 after quantize_weights), or bf16: float
// activations and weights, the linear layers' products on bf16-rounded operands with fp32 sums
// (cpu/gemm_bf16.h; Intel AMX where the CPU has it).
std::unique_ptr<Backend> make_cpu_backend(Precision precision = Precision::FP32);
// The CUDA backend (transformer.cu), fp32 or bf16 (model/backend.cpp loads it: it is a shared
// library, build/libtransformer_cuda.so, so that CPU runs never load the CUDA libraries);
// nullptr + *error when this build has no CUDA backend or no GPU is present.
std::unique_ptr<Backend> make_cuda_backend(Precision precision, std::string* error);
// The backend for a --device ("auto": the GPU when one is present, "cpu", "cuda") and a
// --precision ("" = the device's default: fp32 on the CPU, bf16 on the GPU; "int8" = the CPU,
// quantized by model_quantize once the weights are loaded). nullptr + *error when it cannot
// be had; *note (optional) says why "auto" fell back to the CPU.
std::unique_ptr<Backend> make_backend(const std::string& device, const std::string& precision,
                                      std::string* error, std::string* note = nullptr);
// Whether this build includes the CUDA backend (its shared library is there).
bool cuda_built();
// A shared library of this build (e.g. "libtransformer_cuda.so"): $env_var, else beside the
// executable, else in build/ below it; "" when absent.
std::string program_library_path(const char* file, const char* env_var);

// =============================================================================================
// The model
// =============================================================================================
struct Activations;   // model/model.cpp: the arena and what lives in it

struct Model {
    Config cfg;
    ParamLayout layout;
    std::unique_ptr<Backend> backend;   // where the buffers live and the ops run
    // One allocation each, layout.total floats, on the backend's device. The training state
    // (grads, adam_m, adam_v) is allocated only for training (model_init, checkpoint_load with
    // training = true); ./translate holds params alone.
    float* params = nullptr;
    float* grads = nullptr;
    float* adam_m = nullptr;
    float* adam_v = nullptr;
    // The weights as the products read them: the parameters themselves (fp32), or their bf16
    // copy (one more allocation, rewritten by Adam).
    floatX* weights = nullptr;
    int64_t step = 0;             // Adam steps taken
    uint64_t dropout_seed = 0;    // dropout masks are a function of (seed, forward, site, index)
    int64_t train_forwards = 0;   // training forwards run (micro-batches), numbers the masks
    Activations* acts = nullptr;  // owned
    // Rows of logits the classifier computes at once (0: as many as 2^26 logits hold, 1813
    // rows for a 37,000-word vocabulary; fewer when the batch has fewer rows).
    int logit_chunk_rows = 0;
    // Steps of R rows the decoding cache of a batch of R rows starts with: 0, the device's
    // choice (on the CPU the length limit's, whose pages the OS gives as they are written; on
    // the GPU the longest source + 8); -1, the GPU's on any device; N, N steps. Decoding grows it
    // by half (16 steps of R rows at least) when a step's slab does not fit; tests set 1 to
    // make it grow.
    int decode_cache_steps = 0;
    // Decoding with an ensemble: the other models (not owned; same vocabulary, same backend
    // kind and precision, no ensemble of their own) whose probabilities each step averages with
    // this model's (model_decode_step, model_score). This model keeps the search; the members
    // follow its rows. Empty: this model alone.
    std::vector<Model*> ensemble;
    Model() = default;
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;
    ~Model();
};

// Allocates the buffers for cfg on m->backend (a CPU backend when none is set): the
// parameters, plus gradients and Adam state when `training`. Contents undefined.
void model_allocate(Model* m, const Config& cfg, bool training);
// model_allocate(training) and the initial parameters (Xavier-uniform matrices, zero biases,
// LayerNorm g=1 b=0, E ~ N(0, d_model^-0.5)); deterministic in seed, the same on every device.
void model_init(Model* m, const Config& cfg, uint64_t seed);
// Copies host parameters (layout.total floats) in, or out; model_set_params refreshes the
// products' copy of the weights too, and drops the packed and int8 copies of the old ones
// (model_pack_weights, model_quantize: call them again). Adam state likewise (training models).
void model_set_params(Model* m, const float* host);
void model_get_params(const Model* m, float* host);
void model_set_adam(Model* m, const float* host_m, const float* host_v);
void model_get_adam(const Model* m, float* host_m, float* host_v);
void model_get_grads(const Model* m, float* host);

// Forward pass over a batch: the mean label-smoothed cross-entropy over non-pad labels, no
// gradient. train = true applies dropout (masks from dropout_seed and train_forwards).
float model_forward(Model* m, const Batch& batch, bool train);
// A training pass over a batch: the forward with dropout, then the backward pass, ACCUMULATING
// into the gradients; returns the mean loss as model_forward does. The loss gradient is scaled
// by 1/grad_denominator (default: the batch's non-pad labels; gradient accumulation passes the
// total over the micro-batches). The classifier (§3.4's tied projection and §5.4's loss) runs
// chunk by chunk of rows, each chunk's gradient taken while its logits are at hand, so the
// (rows, V) logits never exist at once (Model::logit_chunk_rows).
float model_forward_backward(Model* m, const Batch& batch, double grad_denominator = 0);
// The bytes of the activation arena that a training pass (model_forward_backward) or, when
// not training, model_forward plans for a (B, S, T) batch with floatx_bytes per activation
// (4: fp32, 2: bf16); logit_chunk_rows as Model's.
size_t model_arena_bytes(const Config& cfg, int B, int S, int T, size_t floatx_bytes,
                         bool training, int logit_chunk_rows = 0);
// The rows of logits m's classifier takes at once for `rows` target rows (B * T).
int model_logit_chunk_rows(const Model* m, int rows);
// What m's activation buffers hold now, in bytes (each grows, never shrinks: the largest
// batch's so far): the arena, the decoding cache and the search's state.
struct ActivationBytes { size_t arena = 0, cache = 0, search = 0; };
ActivationBytes model_activation_bytes(const Model* m);
// The (B*T, vocab) logits of the last forward's batch (model_forward, model_forward_backward,
// model_score, model_attention), computed again from the decoder output it left, on the host.
void model_logits(Model* m, std::vector<float>* logits);
void model_zero_grad(Model* m);
// Frees what training holds and decoding does not need: the gradients, the Adam state and the
// activations (the arena, the decoding cache, the search's state: the next forward or decoding
// allocates its own). The trainer calls it before its final evaluations, which load the
// averaged (and best) model beside this one: on a GPU filled by --max-tokens, the training
// step's memory would leave them none. Training forwards are refused after it; the parameters
// stay (decoding, checkpoint_save of parameters).
void model_release_training(Model* m);
// The paper's schedule: lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).
double learning_rate(const Config& cfg, int64_t step, double lr_scale, int warmup);
// Global L2 norm of the gradient buffer.
double grad_norm(const Model* m);
// Adam's hyperparameters (the paper's by default; ./train --adam-beta1 --adam-beta2 --adam-eps).
struct AdamParams {
    float beta1 = 0.9f;
    float beta2 = 0.98f;
    float eps = 1e-9f;
};
// One Adam step (bias-corrected; the paper's 0.9, 0.98, 1e-9 unless adam says otherwise) over
// the whole buffer; increments step.
// clip_norm > 0 first rescales the gradient to that global norm when it is larger.
void adam_update(Model* m, double lr, double clip_norm = 0, const AdamParams& adam = AdamParams());
// The same with the gradient's global norm already computed (grad_norm: the trainer checks it
// for non-finite values before the step, and clipping reuses it instead of a second reduction).
void adam_update(Model* m, double lr, double clip_norm, double norm, const AdamParams& adam = AdamParams());

// Int8 inference (CPU, opt-in: ./translate --precision int8): quantizes every weight matrix
// the products read (gemm_int8.h), so that every forward that is not training runs its
// products in int8. Training forwards are refused while quantized. Call it again after the
// parameters change. False + *error on a backend without int8.
bool model_quantize(Model* m, std::string* error);
// Drops the int8 copies: inference is fp32 again.
void model_dequantize(Model* m);
// Decoding with fixed weights (./translate, the trainer's last evaluations): the CPU's fp32 and
// bf16 products read every weight matrix packed once (Backend::pack_weights) instead of packing
// it at each step (on the test set, fp32: greedy 11-15% less time, beam 4 2-10%; bf16: greedy
// 11-15%, beam 4 5-8%; the same bits).
// Training forwards are refused while packed; model_set_params and checkpoint_load drop the
// packed copies (and the int8 ones).
// Nothing on other backends and precisions.
void model_pack_weights(Model* m);
void model_unpack_weights(Model* m);

// ---- Decoding (§3.2.3's auto-regression): the encoder once, then one position at a time ----
// The search (toolkit/decode.cpp) drives these; the rows, their candidates and the search's
// bookkeeping stay on the device (SearchState), so that a step costs the host one download of
// the next row count. A row is one alive hypothesis decoded at the current step.
struct Hypothesis {
    std::vector<int> tokens;   // generated ids, ending with </s> when it finished
    float logprob = 0;         // sum of token log-probabilities
    float score = 0;           // logprob / lp(|tokens|)
};
// What the search of a batch needs to know: beam (1: greedy), the n-best kept per sentence,
// each sentence's output length limit and the length penalties lp(n) for n = 0 .. the longest
// limit (toolkit/decode.h: length_penalty).
struct SearchSetup {
    int beam = 4;
    int nbest = 1;
    std::vector<int> max_len;   // (B)
    std::vector<float> lp;      // (max of max_len + 1)
};
// Starts a batch: runs the encoder over sources (each ending with </s>) and every decoder
// layer's cross-attention keys/values, sizes the cache and the search state, and sets step 0's
// rows: <s> for every sentence. recompute = true (testing) instead runs the whole decoder over
// <s> + each row's tokens at every step, without a cache. Starts the ensemble's members too.
void model_decode_begin(Model* m, const std::vector<std::vector<int>>& sources,
                        const SearchSetup& setup, bool recompute = false);
// The decoder at position t (t = 0, 1, ... in order) for the current n rows, then log-softmax +
// top-kc of each (2 * beam, greedy 1) on the device, ties to the lowest id; `banned` (or -1)
// is never chosen. With an ensemble (m->ensemble), every member runs its decoder over the same
// rows and the step's log-probabilities are those of the members' mean probability
// (Backend::logsoftmax_ensemble), for the candidates, forced tokens and sampling alike.
void model_decode_step(Model* m, int t, int banned);
// After model_decode_step: the current rows' sentences, downloaded (target prefixes and
// sampling need them; the plain search does not).
std::vector<int> model_decode_row_sentences(Model* m);
// After model_decode_step: row r keeps forced[r] (a target prefix's token; PAD_ID: none) in
// the next model_decode_select, with its log-probability at this step.
void model_decode_force(Model* m, const std::vector<int>& forced);
// After model_decode_step (greedy): each row's candidate becomes one token drawn with
// uniform[r] in [0, 1) by the backend's logsoftmax_sample (temperature, topk, topp), with its
// log-probability at temperature 1.
void model_decode_sample(Model* m, const std::vector<float>& uniform, float temperature,
                         int topk, float topp);
// The search's step t on the device (Backend::search_select) over the step's candidates (and
// forced tokens); returns the next step's row count (0: every sentence is done).
int model_decode_select(Model* m, int t);
// Each sentence's finished hypotheses, best first (at most nbest), their tokens rebuilt from
// the search's history.
std::vector<std::vector<Hypothesis>> model_decode_results(Model* m);

// ---- Scoring: the log-probability of given targets (teacher forcing, one forward) --------
// logp (B*T): each label's log-probability under the model (no dropout, no label smoothing),
// 0 at PAD labels; a sentence's log-probability is the sum of its row. With an ensemble: the
// log of the members' mean probability of each label, as the ensemble's search scores it.
void model_score(Model* m, const Batch& batch, std::vector<float>* logp);

// ---- Looking inside: the attention of a translation (./translate --attention, --alignment) ----
// Every layer's and head's attention probabilities for one (source, target) pair.
struct AttentionMaps {
    int S = 0, T = 0, H = 0, n_enc = 0, n_dec = 0;
    std::vector<float> enc;     // (n_enc, H, S, S) encoder self-attention: query row, key column
    std::vector<float> dec;     // (n_dec, H, T, T) decoder self-attention (causal)
    std::vector<float> cross;   // (n_dec, H, T, S) encoder-decoder attention
};
// One teacher-forced forward without dropout over source (ending with </s>) and target (the
// tokens a search produced, with its </s> when it finished): decoder input <s> + target[0 ..
// T-2], so row i is the step that produced target[i]. Reads back the probabilities that the
// training forward keeps for its backward. The cached decoder (model_decode_step) computes
// the same function up to float rounding (test_decode checks it), so these are the
// probabilities the search used. Leaves the logits of this pass for model_logits.
void model_attention(Model* m, const std::vector<int>& source, const std::vector<int>& target,
                     AttentionMaps* out);
