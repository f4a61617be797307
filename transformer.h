// transformer.h — the model of "Attention Is All You Need" (Vaswani et al., 2017):
// configuration, the padded batch, the parameter layout, the layer ops and the model API.
//
// Reading order for a newcomer: Config -> ParamLayout (names and shapes of every tensor, one
// contiguous buffer) -> the layer ops (ops_cpu.cpp, forward/backward pairs) -> Model
// (model.cpp: the encoder/decoder sequence, loss, backward, Adam) -> checkpoint.cpp.
// Shapes are written (B, L, C): B sentences, L positions, C channels.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

// ---------------------------------------------------------------------------------------------
// Special token ids (DESIGN.md): source = tokens + </s>; decoder input = <s> + tokens;
// labels = tokens + </s>.
enum SpecialToken { PAD_ID = 0, UNK_ID = 1, BOS_ID = 2, EOS_ID = 3 };

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

// ---------------------------------------------------------------------------------------------
// The model: config, the four contiguous buffers, activations for the largest batch so far.
struct Activations;   // model.cpp
struct Int8Model;     // model.cpp: int8 copies of the weight matrices (model_quantize)

struct Model {
    Config cfg;
    ParamLayout layout;
    std::vector<float> params, grads, adam_m, adam_v;   // each layout.total floats
    int64_t step = 0;             // Adam steps taken
    uint64_t dropout_seed = 0;    // dropout masks are a function of (seed, forward, site, index)
    int64_t train_forwards = 0;   // training forwards run (micro-batches), numbers the masks
    Activations* acts = nullptr;  // owned
    Int8Model* int8 = nullptr;    // owned; set by model_quantize: inference runs int8 products
    Model() = default;
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;
    ~Model();
    float* param(size_t offset) { return params.data() + offset; }
};

// Allocates the buffers for cfg and initialises parameters (Xavier-uniform matrices, zero
// biases, LayerNorm g=1 b=0, E ~ N(0, d_model^-0.5)); deterministic in seed.
void model_init(Model* m, const Config& cfg, uint64_t seed);
// Forward pass over a batch: fills the logits and returns the mean label-smoothed
// cross-entropy over non-pad labels. train=true applies dropout (masks from dropout_seed and
// train_forwards) and keeps what backward needs.
float model_forward(Model* m, const Batch& batch, bool train);
// The encoder alone (no dropout): enc_out (B*S, d_model) for the batch's sources; the
// batch's target side is not read beyond its shape (T >= 1).
void model_encode(Model* m, const Batch& batch, std::vector<float>* enc_out);
// Int8 inference (CTranslate2-style, opt-in: ./translate --precision int8). Quantizes every
// weight matrix per output row (gemm_int8.h); from then on every forward that is not training
// (model_encode, model_forward(train=false), decoding) runs its products in int8, with
// activations quantized per row on the fly. Training forwards stay fp32. Call it again after
// the parameters change (it rebuilds the copies).
void model_quantize(Model* m);
// Drops the int8 copies: inference is fp32 again.
void model_dequantize(Model* m);
// Y (rows, p.out) = X (rows, p.in) W^T + b at inference: int8 when quantized, else fp32.
void inference_linear(const Model* m, float* Y, const float* X, const LinearP& p, int rows);
// logits (rows, vocab) = X (rows, d_model) E^T at inference: int8 when quantized, else fp32.
void inference_logits(const Model* m, float* logits, const float* X, int rows);
// (B, T, vocab) logits of the last forward.
const float* model_logits(const Model* m);
// Backward of the last forward(train=true). Accumulates into grads; the loss gradient is
// scaled by 1/grad_denominator (default: the batch's non-pad labels; gradient accumulation
// passes the total over the micro-batches).
void model_backward(Model* m, const Batch& batch, double grad_denominator = 0);
void model_zero_grad(Model* m);
// The paper's schedule: lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).
double learning_rate(const Config& cfg, int64_t step, double lr_scale, int warmup);
// Global L2 norm of the gradient buffer.
double grad_norm(const Model* m);
// One Adam step (0.9, 0.98, 1e-9, bias-corrected) over the whole buffer; increments step.
// clip_norm > 0 first rescales the gradient to that global norm when it is larger.
void adam_update(Model* m, double lr, double clip_norm = 0);

// ---------------------------------------------------------------------------------------------
// Layer ops (ops_cpu.cpp; the CUDA kernels in transformer.cu carry the same names).
// All tensors are row-major float; "rows" = B*L positions.

// Dropout masks are drawn from a counter-based generator: keep(seed, site, i) depends only on
// its arguments, so backward recomputes the forward mask and a step is reproducible.
uint64_t dropout_site_seed(uint64_t seed, int64_t step, uint32_t site);
bool dropout_keep(uint64_t site_seed, size_t i, float p);

// x (rows, d) = E[tokens] * sqrt(d) + PE(position), then dropout. pos_table (L, d).
void embedding_forward(float* x, const int* tokens, const float* E, const float* pos_table,
                       int B, int L, int d, float p, uint64_t site_seed);
// dE[tokens] += sqrt(d) * dx_kept; dpos[position] += dx_kept when dpos != nullptr.
void embedding_backward(float* dE, float* dpos, const float* dx, const int* tokens,
                        int B, int L, int d, float p, uint64_t site_seed);
// Sinusoidal table (L, d): PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...).
void sinusoid_table(float* pe, int L, int d);

// y (n) = dropout(x) with scale 1/(1-p); in place allowed. backward: the same mask.
void dropout_forward(float* y, const float* x, size_t n, float p, uint64_t site_seed);
void dropout_backward(float* dx, const float* dy, size_t n, float p, uint64_t site_seed);

// Y (rows, out) = X (rows, in) W^T + b.
void linear_forward(float* Y, const float* X, const float* W, const float* b,
                    int rows, int in, int out);
// dX (rows, in) = dY W (beta: 0 overwrite, 1 accumulate); dW += dY^T X; db += sum_rows dY.
void linear_backward(float* dX, float dX_beta, float* dW, float* db, const float* dY,
                     const float* X, const float* W, int rows, int in, int out);

// y = max(0, x), and its backward dx = dy * (y > 0); in place allowed.
void relu_forward(float* y, const float* x, size_t n);
void relu_backward(float* dx, const float* dy, const float* y, size_t n);

// y (rows, d) = (x - mean) / sqrt(var + 1e-5) * g + b; saves mean, rstd (rows).
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* g,
                       const float* b, int rows, int d);
// dx (+)= LN backward (dx_beta 0 or 1); dg, db accumulate.
void layernorm_backward(float* dx, float dx_beta, float* dg, float* db, const float* dy,
                        const float* x, const float* mean, const float* rstd, const float* g,
                        int rows, int d);

// Multi-head scaled dot-product attention for B sentences.
// q: (B, Lq, *) with head h's query at column q_col + h*dk, row stride q_stride; likewise k and v
// (B, Lk, *) at k_col / v_col with stride kv_stride. key_tokens (B, Lk) masks PAD keys;
// causal masks keys j > i. probs (B, H, Lq, Lk) saves the softmax; ctx (B, Lq, H*dv).
struct AttentionShape {
    int B, Lq, Lk, H, dk, dv;
    int q_stride, q_col, kv_stride, k_col, v_col;
    bool causal;
};
void attention_forward(float* ctx, float* probs, const float* q, const float* kv,
                       const int* key_tokens, const AttentionShape& s, float p_attn,
                       uint64_t site_seed, float* scratch);
// dq, dkv are written (not accumulated) at the same columns as q, kv.
void attention_backward(float* dq, float* dkv, const float* dctx, const float* probs,
                        const float* q, const float* kv, const AttentionShape& s, float p_attn,
                        uint64_t site_seed, float* scratch);
// Floats of scratch memory attention_forward/backward need.
size_t attention_scratch_floats(int Lq, int Lk);

// Label-smoothed cross-entropy, PyTorch convention: q(y) = 1 - eps + eps/V, q(k) = eps/V,
// PAD labels ignored. logits (rows, V). Returns the SUM over non-pad rows; lse (rows) saved.
double crossentropy_forward(float* lse, const float* logits, const int* labels, int rows, int V,
                            float eps);
// lse (rows) = log(sum_k exp(x_k)) per row of x (rows, V) (decoding's log-softmax).
void logsumexp_rows(float* lse, const float* x, int rows, int V);
// x (rows, n) -> softmax of each row, in place (decoding's attention; serial).
void softmax_rows(float* x, int rows, int n);
// In place: logits (rows, V) becomes dlogits = (softmax - q) * scale; PAD rows become 0.
void crossentropy_backward(float* logits, const float* lse, const int* labels, int rows, int V,
                           float eps, float scale);

// Adam over n floats (PyTorch's formulation).
void adam_step(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
               float beta2, float eps, int64_t step);
