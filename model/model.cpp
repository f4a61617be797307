// model.cpp — the Transformer's sequence, written once: embeddings, the encoder stack, the
// decoder stack, the tied pre-softmax projection, the label-smoothed loss, the backward pass
// through all of it in reverse, and Adam over the contiguous buffers.
//
// Each sub-layer sits in a residual block (residual_forward / residual_backward):
//   post-LN (paper): y = LN(x + Dropout(F(x)))      pre-LN: y = x + Dropout(F(LN(x)))
// with F one of: self-attention, encoder-decoder (cross) attention, position-wise FFN.
// Activations live in one arena, planned from the batch shape; it grows only when a batch
// is larger than any before.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "cpu/gemm.h"
#include "cpu/gemm_int8.h"
#include "transformer.h"

#define MODEL_CHECK(cond, ...)                                                     \
    do {                                                                           \
        if (!(cond)) {                                                             \
            std::fprintf(stderr, "error (%s:%d): ", __FILE__, __LINE__);           \
            std::fprintf(stderr, __VA_ARGS__);                                     \
            std::fprintf(stderr, "\n");                                            \
            std::exit(1);                                                          \
        }                                                                          \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Activations
// ---------------------------------------------------------------------------------------------
enum BlockKind { SELF_ATTN, CROSS_ATTN, FFN };

// What one residual block keeps for backward. rows = B * L of its stream.
struct Block {
    BlockKind kind;
    uint32_t site;        // dropout site id of this block
    const float* x;       // (rows, d) block input: the previous block's y (not owned)
    float* n;             // pre-LN: LN(x) (rows, d), the sub-layer's input
    float* r;             // post-LN: x + Dropout(F(x)) (rows, d), the LayerNorm's input
    float* mean;          // (rows)
    float* rstd;          // (rows)
    float* y;             // (rows, d) block output
    float* proj;          // SELF: qkv (rows, 2*h*dk + h*dv); CROSS: q (rows, h*dk); FFN: ReLU(h1) (rows, d_ff)
    float* kv;            // CROSS: encoder keys/values (B*S, h*dk + h*dv)
    float* probs;         // attention: (B, H, Lq, Lk)
    float* ctx;           // attention: (rows, h*dv)
    float* h1_drop;       // FFN: Dropout(ReLU(h1)) (rows, d_ff), == proj when p_relu_drop = 0
};

struct Activations {
    std::vector<float> arena;
    int B = 0, S = 0, T = 0;
    std::vector<float> sinusoids;   // (pe_len, d) table, grown on demand
    int pe_len = 0;
    std::vector<Block> enc, dec;    // 2 blocks per encoder layer, 3 per decoder layer
    float *src_x, *tgt_x;           // (B*S, d), (B*T, d) embedding outputs
    float *enc_out, *enc_mean, *enc_rstd;   // (B*S, d) encoder output (pre-LN: final LN)
    float *dec_out, *dec_mean, *dec_rstd;   // (B*T, d) decoder output
    float *logits, *lse;            // (B*T, V), (B*T)
    // backward temporaries
    float *d_a, *d_b, *d_tmp, *d_tmp2;   // (max_rows, d)
    float *d_proj, *d_ctx, *d_kv, *d_enc_out, *scratch;
    bool train = false;
    int64_t dropout_counter = 0;     // the train forward whose masks backward must repeat
};

// ---------------------------------------------------------------------------------------------
// Inference products: fp32, or int8 after model_quantize
// ---------------------------------------------------------------------------------------------
// The int8 copy of each weight matrix the sequence multiplies by, keyed by the offset of its
// (first) weight: fused views (qkv, kv) are quantized as the one matrix they are used as.
struct Int8Model {
    std::map<size_t, Int8Weights> by_weight;
    const Int8Weights& at(const LinearP& p) const {
        auto it = by_weight.find(p.w);
        MODEL_CHECK(it != by_weight.end() && it->second.N == p.out && it->second.K == p.in,
                    "no int8 weights for the linear layer at offset %zu (%d x %d)", p.w, p.out, p.in);
        return it->second;
    }
};

Model::~Model() {
    delete acts;
    delete int8;
}

void model_quantize(Model* m) {
    delete m->int8;
    m->int8 = new Int8Model;
    auto add = [m](const LinearP& p) {
        int8_weights_init(&m->int8->by_weight[p.w], m->param(p.w), p.out, p.in);
    };
    for (const EncoderLayerP& L : m->layout.enc)
        for (const LinearP& p : {L.self_attn.qkv(), L.self_attn.out, L.ffn.fc1, L.ffn.fc2}) add(p);
    for (const DecoderLayerP& L : m->layout.dec)
        for (const LinearP& p : {L.self_attn.qkv(), L.self_attn.out, L.cross_attn.q,
                                 L.cross_attn.kv(), L.cross_attn.out, L.ffn.fc1, L.ffn.fc2})
            add(p);
    add(LinearP{m->layout.embed, 0, m->cfg.vocab, m->cfg.d_model});   // logits = x E^T
}

void model_dequantize(Model* m) {
    delete m->int8;
    m->int8 = nullptr;
}

// Y (rows, p.out) = X W^T + b, and logits (rows, V) = X E^T: the int8 product when int8 is
// asked for (the model must be quantized), else fp32. Training and inference share these.
static void linear_product(const Model* m, float* Y, const float* X, const LinearP& p, int rows,
                           bool int8) {
    const float* b = m->params.data() + p.b;
    if (int8) linear_int8(Y, p.out, X, rows, m->int8->at(p), b, false);
    else linear_forward(Y, X, m->params.data() + p.w, b, rows, p.in, p.out);
}

static void logits_product(const Model* m, float* logits, const float* X, int rows, bool int8) {
    const Config& c = m->cfg;
    const LinearP E{m->layout.embed, 0, c.vocab, c.d_model};   // no bias
    if (int8)
        linear_int8(logits, c.vocab, X, rows, m->int8->at(E), nullptr, false);
    else
        sgemm(false, true, rows, c.vocab, c.d_model, 1.0f, X, c.d_model, m->params.data() + E.w,
              c.d_model, 0.0f, logits, c.vocab);
}

void inference_linear(const Model* m, float* Y, const float* X, const LinearP& p, int rows) {
    linear_product(m, Y, X, p, rows, m->int8 != nullptr);
}

void inference_logits(const Model* m, float* logits, const float* X, int rows) {
    logits_product(m, logits, X, rows, m->int8 != nullptr);
}

// A bump allocator over the arena; with base == nullptr it only measures.
struct Bump {
    float* base;
    size_t used = 0;
    float* take(size_t n) {
        float* p = base ? base + used : nullptr;
        used += (n + 15) & ~(size_t)15;   // 64-byte aligned slices
        return p;
    }
};

static uint32_t site_id(int stack, int layer, int block) {
    return (uint32_t)(((stack * 256 + layer) * 4 + block) * 4);   // + 0 residual, 1 attn, 2 relu
}

static Block plan_block(Bump& mem, const Config& c, BlockKind kind, uint32_t site, int B, int Lq,
                        int Lk) {
    const size_t rows = (size_t)B * Lq, d = c.d_model;
    const size_t qk = (size_t)c.n_heads * c.d_k, vv = (size_t)c.n_heads * c.d_v;
    Block b{};
    b.kind = kind;
    b.site = site;
    b.n = c.pre_ln ? mem.take(rows * d) : nullptr;
    b.r = c.pre_ln ? nullptr : mem.take(rows * d);
    b.mean = mem.take(rows);
    b.rstd = mem.take(rows);
    b.y = mem.take(rows * d);
    if (kind == FFN) {
        b.proj = mem.take(rows * c.d_ff);
        b.h1_drop = c.p_relu_drop > 0 ? mem.take(rows * c.d_ff) : b.proj;
        return b;
    }
    b.proj = mem.take(rows * (kind == SELF_ATTN ? 2 * qk + vv : qk));
    if (kind == CROSS_ATTN) b.kv = mem.take((size_t)B * Lk * (qk + vv));
    b.probs = mem.take((size_t)B * c.n_heads * Lq * Lk);
    b.ctx = mem.take(rows * vv);
    return b;
}

// Lays out every activation for a (B, S, T) batch; returns the floats needed.
static size_t plan_activations(Activations* a, const Config& c, int B, int S, int T, float* base) {
    Bump mem{base};
    const size_t d = c.d_model, rs = (size_t)B * S, rt = (size_t)B * T;
    const size_t max_rows = rs > rt ? rs : rt;
    const size_t qk = (size_t)c.n_heads * c.d_k, vv = (size_t)c.n_heads * c.d_v;
    a->src_x = mem.take(rs * d);
    a->tgt_x = mem.take(rt * d);
    a->enc.clear();
    a->dec.clear();
    for (int l = 0; l < c.n_enc; l++) {
        a->enc.push_back(plan_block(mem, c, SELF_ATTN, site_id(0, l, 0), B, S, S));
        a->enc.push_back(plan_block(mem, c, FFN, site_id(0, l, 1), B, S, S));
    }
    for (int l = 0; l < c.n_dec; l++) {
        a->dec.push_back(plan_block(mem, c, SELF_ATTN, site_id(1, l, 0), B, T, T));
        a->dec.push_back(plan_block(mem, c, CROSS_ATTN, site_id(1, l, 1), B, T, S));
        a->dec.push_back(plan_block(mem, c, FFN, site_id(1, l, 2), B, T, T));
    }
    a->enc_out = mem.take(rs * d);
    a->enc_mean = mem.take(rs);
    a->enc_rstd = mem.take(rs);
    a->dec_out = mem.take(rt * d);
    a->dec_mean = mem.take(rt);
    a->dec_rstd = mem.take(rt);
    a->logits = mem.take(rt * c.vocab);
    a->lse = mem.take(rt);
    a->d_a = mem.take(max_rows * d);
    a->d_b = mem.take(max_rows * d);
    a->d_tmp = mem.take(max_rows * d);
    a->d_tmp2 = mem.take(max_rows * d);
    size_t proj_w = 2 * qk + vv > (size_t)c.d_ff ? 2 * qk + vv : (size_t)c.d_ff;
    a->d_proj = mem.take(max_rows * proj_w);
    a->d_ctx = mem.take(max_rows * vv);
    a->d_kv = mem.take(rs * (qk + vv));
    a->d_enc_out = mem.take(rs * d);
    int L = S > T ? S : T;
    a->scratch = mem.take(attention_scratch_floats(L, L));
    return mem.used;
}

static void prepare_activations(Model* m, int B, int S, int T) {
    if (!m->acts) m->acts = new Activations();
    Activations* a = m->acts;
    size_t need = plan_activations(a, m->cfg, B, S, T, nullptr);
    if (need > a->arena.size()) a->arena.assign(need, 0.0f);   // grows, never shrinks
    plan_activations(a, m->cfg, B, S, T, a->arena.data());
    a->B = B, a->S = S, a->T = T;
}

// Position table (L, d): the learned parameters, or sinusoids computed up to L.
static const float* position_table(Model* m, int L) {
    if (m->cfg.learned_pos) return m->param(m->layout.pos_embed);
    Activations* a = m->acts;
    if (a->pe_len < L) {
        a->sinusoids.resize((size_t)L * m->cfg.d_model);
        sinusoid_table(a->sinusoids.data(), L, m->cfg.d_model);
        a->pe_len = L;
    }
    return a->sinusoids.data();
}

// ---------------------------------------------------------------------------------------------
// Initialisation
// ---------------------------------------------------------------------------------------------
struct InitRng {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform() { return ((next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }   // (0, 1)
    double normal() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); }
};

static bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void model_init(Model* m, const Config& cfg, uint64_t seed) {
    std::string err = config_error(cfg);
    MODEL_CHECK(err.empty(), "bad config: %s", err.c_str());
    m->cfg = cfg;
    m->layout = make_layout(cfg);
    const size_t n = m->layout.total;
    m->params.assign(n, 0.0f);
    m->grads.assign(n, 0.0f);
    m->adam_m.assign(n, 0.0f);
    m->adam_v.assign(n, 0.0f);
    m->step = 0;
    m->train_forwards = 0;
    m->dropout_seed = seed;
    InitRng rng{seed};
    for (const TensorInfo& t : m->layout.tensors) {
        float* p = m->param(t.offset);
        if (t.name == "embed.weight" || t.name == "pos_embed.weight") {
            const double std_dev = 1.0 / std::sqrt((double)cfg.d_model);
            for (size_t i = 0; i < t.numel; i++) p[i] = (float)(rng.normal() * std_dev);
        } else if (t.shape.size() == 2) {   // Xavier-uniform: U(-a, a), a = sqrt(6 / (in + out))
            const double a = std::sqrt(6.0 / (t.shape[0] + t.shape[1]));
            for (size_t i = 0; i < t.numel; i++) p[i] = (float)((2.0 * rng.uniform() - 1.0) * a);
        } else {
            bool norm_gain = ends_with(t.name, ".weight");   // LayerNorm g = 1; biases 0
            for (size_t i = 0; i < t.numel; i++) p[i] = norm_gain ? 1.0f : 0.0f;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------------------------
// Everything a block's forward or backward needs besides the block itself.
struct Pass {
    Model* m;
    const Batch* batch;
    float p_drop, p_attn, p_relu;   // 0 at inference
    uint64_t site_seed(uint32_t site) const {
        return dropout_site_seed(m->dropout_seed, m->acts->dropout_counter, site);
    }
    const float* P(size_t off) const { return m->params.data() + off; }
    float* G(size_t off) const { return m->grads.data() + off; }
    // Products in int8 when the model is quantized and this is not a training pass.
    bool int8() const { return m->int8 && !m->acts->train; }
    void linear(float* Y, const float* X, const LinearP& p, int rows) const {
        linear_product(m, Y, X, p, rows, int8());
    }
};

static bool in_decoder(const Pass& ps, const Block& b) {
    const std::vector<Block>& dec = ps.m->acts->dec;
    return !dec.empty() && &b >= &dec.front() && &b <= &dec.back();
}

// Shape of a block's attention: self-attention reads q, k, v from one qkv row (causal in the
// decoder); cross-attention reads q from the decoder and k, v from the encoder's kv rows.
static AttentionShape attention_shape(const Pass& ps, const Block& b) {
    const Config& c = ps.m->cfg;
    const int qk = c.n_heads * c.d_k, vv = c.n_heads * c.d_v;
    const Batch& bt = *ps.batch;
    if (b.kind == CROSS_ATTN)
        return {bt.B, bt.T, bt.S, c.n_heads, c.d_k, c.d_v, qk, 0, qk + vv, 0, qk, false};
    const bool dec = in_decoder(ps, b);
    const int L = dec ? bt.T : bt.S;
    return {bt.B, L, L, c.n_heads, c.d_k, c.d_v, 2 * qk + vv, 0, 2 * qk + vv, qk, 2 * qk, dec};
}

// Key tokens that mask attention: the sentence's own tokens for self-attention, the source
// for cross-attention.
static const int* key_tokens(const Pass& ps, const Block& b) {
    if (b.kind == CROSS_ATTN || !in_decoder(ps, b)) return ps.batch->src.data();
    return ps.batch->tgt_in.data();
}

// F(in) -> out (rows, d) for the block's sub-layer.
static void sublayer_forward(const Pass& ps, Block& b, const AttentionP* attn,
                             const FeedForwardP* ffn, const float* in, float* out, int rows) {
    const Config& c = ps.m->cfg;
    if (b.kind == FFN) {
        ps.linear(b.proj, in, ffn->fc1, rows);
        relu_forward(b.proj, b.proj, (size_t)rows * c.d_ff);
        if (b.h1_drop != b.proj)
            dropout_forward(b.h1_drop, b.proj, (size_t)rows * c.d_ff, ps.p_relu, ps.site_seed(b.site + 2));
        ps.linear(out, b.h1_drop, ffn->fc2, rows);
        return;
    }
    AttentionShape s = attention_shape(ps, b);
    const float* kv = b.proj;
    if (b.kind == SELF_ATTN) {
        ps.linear(b.proj, in, attn->qkv(), rows);
    } else {
        ps.linear(b.proj, in, attn->q, rows);
        ps.linear(b.kv, ps.m->acts->enc_out, attn->kv(), ps.batch->B * ps.batch->S);
        kv = b.kv;
    }
    attention_forward(b.ctx, b.probs, b.proj, kv, key_tokens(ps, b), s, ps.p_attn,
                      ps.site_seed(b.site + 1), ps.m->acts->scratch);
    ps.linear(out, b.ctx, attn->out, rows);
}

// post-LN: r = x + Dropout(F(x)); y = LN(r).   pre-LN: n = LN(x); y = x + Dropout(F(n)).
static void residual_forward(const Pass& ps, Block& b, const LayerNormP& ln,
                             const AttentionP* attn, const FeedForwardP* ffn, int rows) {
    const int d = ps.m->cfg.d_model;
    const size_t n = (size_t)rows * d;
    const bool pre = ps.m->cfg.pre_ln;
    if (pre) layernorm_forward(b.n, b.mean, b.rstd, b.x, ps.P(ln.g), ps.P(ln.b), rows, d);
    float* out = pre ? b.y : b.r;
    sublayer_forward(ps, b, attn, ffn, pre ? b.n : b.x, out, rows);
    dropout_forward(out, out, n, ps.p_drop, ps.site_seed(b.site));
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] += b.x[i];
    if (!pre) layernorm_forward(b.y, b.mean, b.rstd, b.r, ps.P(ln.g), ps.P(ln.b), rows, d);
}

static void check_batch(const Model* m, const Batch& bt) {
    MODEL_CHECK(bt.B > 0 && bt.S > 0 && bt.T > 0, "empty batch (B=%d S=%d T=%d)", bt.B, bt.S, bt.T);
    MODEL_CHECK(bt.src.size() == (size_t)bt.B * bt.S && bt.tgt_in.size() == (size_t)bt.B * bt.T &&
                    bt.labels.size() == (size_t)bt.B * bt.T,
                "batch arrays do not match B=%d S=%d T=%d", bt.B, bt.S, bt.T);
    MODEL_CHECK(!m->cfg.learned_pos || (bt.S <= m->cfg.max_len && bt.T <= m->cfg.max_len),
                "sentence longer than the learned position table (%d > %d)",
                bt.S > bt.T ? bt.S : bt.T, m->cfg.max_len);
    for (const std::vector<int>* v : {&bt.src, &bt.tgt_in, &bt.labels})
        for (int t : *v)
            MODEL_CHECK(t >= 0 && t < m->cfg.vocab, "token id %d outside the vocabulary (%d)", t,
                        m->cfg.vocab);
}

// A stack's output: the final LayerNorm of x (pre-LN) or x itself (post-LN), into out.
static void final_norm_forward(const Pass& ps, const LayerNormP& ln, const float* x, float* out,
                               float* mean, float* rstd, int rows) {
    const int d = ps.m->cfg.d_model;
    if (ps.m->cfg.pre_ln)
        layernorm_forward(out, mean, rstd, x, ps.P(ln.g), ps.P(ln.b), rows, d);
    else
        std::memcpy(out, x, (size_t)rows * d * sizeof(float));
}

// The encoder stack over the batch's source: fills acts->enc_out (B*S, d).
static void encoder_forward(const Pass& ps) {
    Model* m = ps.m;
    Activations* a = m->acts;
    const Config& c = m->cfg;
    const Batch& bt = *ps.batch;
    const int rows = bt.B * bt.S;
    embedding_forward(a->src_x, bt.src.data(), ps.P(m->layout.embed), position_table(m, bt.S),
                      bt.B, bt.S, c.d_model, ps.p_drop, ps.site_seed(site_id(0, 255, 3)));
    const float* x = a->src_x;
    for (int l = 0; l < c.n_enc; l++) {
        const EncoderLayerP& P = m->layout.enc[l];
        Block& att = a->enc[2 * l];
        Block& ff = a->enc[2 * l + 1];
        att.x = x;
        residual_forward(ps, att, P.norm1, &P.self_attn, nullptr, rows);
        ff.x = att.y;
        residual_forward(ps, ff, P.norm2, nullptr, &P.ffn, rows);
        x = ff.y;
    }
    final_norm_forward(ps, m->layout.enc_norm, x, a->enc_out, a->enc_mean, a->enc_rstd, rows);
}

// The decoder stack over <s> + target, attending to enc_out: fills acts->dec_out (B*T, d).
static void decoder_forward(const Pass& ps) {
    Model* m = ps.m;
    Activations* a = m->acts;
    const Config& c = m->cfg;
    const Batch& bt = *ps.batch;
    const int rows = bt.B * bt.T;
    embedding_forward(a->tgt_x, bt.tgt_in.data(), ps.P(m->layout.embed), position_table(m, bt.T),
                      bt.B, bt.T, c.d_model, ps.p_drop, ps.site_seed(site_id(1, 255, 3)));
    const float* x = a->tgt_x;
    for (int l = 0; l < c.n_dec; l++) {
        const DecoderLayerP& P = m->layout.dec[l];
        Block* blk = &a->dec[3 * l];
        blk[0].x = x;
        residual_forward(ps, blk[0], P.norm1, &P.self_attn, nullptr, rows);
        blk[1].x = blk[0].y;
        residual_forward(ps, blk[1], P.norm2, &P.cross_attn, nullptr, rows);
        blk[2].x = blk[1].y;
        residual_forward(ps, blk[2], P.norm3, nullptr, &P.ffn, rows);
        x = blk[2].y;
    }
    final_norm_forward(ps, m->layout.dec_norm, x, a->dec_out, a->dec_mean, a->dec_rstd, rows);
}

float model_forward(Model* m, const Batch& bt, bool train) {
    check_batch(m, bt);
    prepare_activations(m, bt.B, bt.S, bt.T);
    Activations* a = m->acts;
    const Config& c = m->cfg;
    a->train = train;
    if (train) a->dropout_counter = m->train_forwards++;
    Pass ps{m, &bt, train ? c.p_drop : 0.0f, train ? c.p_attn_drop : 0.0f,
            train ? c.p_relu_drop : 0.0f};
    encoder_forward(ps);
    decoder_forward(ps);
    const int rows = bt.B * bt.T;
    // logits (B*T, V) = dec_out E^T: the pre-softmax projection shares the embedding matrix.
    logits_product(m, a->logits, a->dec_out, rows, ps.int8());
    double sum = crossentropy_forward(a->lse, a->logits, bt.labels.data(), rows, c.vocab,
                                      c.label_smoothing);
    return bt.tgt_tokens > 0 ? (float)(sum / bt.tgt_tokens) : 0.0f;
}

const float* model_logits(const Model* m) { return m->acts ? m->acts->logits : nullptr; }

void model_encode(Model* m, const Batch& bt, std::vector<float>* enc_out) {
    check_batch(m, bt);
    prepare_activations(m, bt.B, bt.S, bt.T);
    m->acts->train = false;
    Pass ps{m, &bt, 0.0f, 0.0f, 0.0f};
    encoder_forward(ps);
    const float* out = m->acts->enc_out;
    enc_out->assign(out, out + (size_t)bt.B * bt.S * m->cfg.d_model);
}

// ---------------------------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------------------------
// Given dF (rows, d), the gradient of the sub-layer's output: accumulates parameter gradients
// and writes d_in = dF/d(in) (d_in_beta 0) or adds it (d_in_beta 1).
static void sublayer_backward(const Pass& ps, Block& b, const AttentionP* attn,
                              const FeedForwardP* ffn, const float* in, const float* dF,
                              float* d_in, float d_in_beta, int rows) {
    Activations* a = ps.m->acts;
    const Config& c = ps.m->cfg;
    const int d = c.d_model, vv = c.n_heads * c.d_v;
    if (b.kind == FFN) {
        const size_t nh = (size_t)rows * c.d_ff;
        linear_backward(a->d_proj, 0.0f, ps.G(ffn->fc2.w), ps.G(ffn->fc2.b), dF, b.h1_drop,
                        ps.P(ffn->fc2.w), rows, c.d_ff, d);
        if (b.h1_drop != b.proj)
            dropout_backward(a->d_proj, a->d_proj, nh, ps.p_relu, ps.site_seed(b.site + 2));
        relu_backward(a->d_proj, a->d_proj, b.proj, nh);
        linear_backward(d_in, d_in_beta, ps.G(ffn->fc1.w), ps.G(ffn->fc1.b), a->d_proj, in,
                        ps.P(ffn->fc1.w), rows, d, c.d_ff);
        return;
    }
    AttentionShape s = attention_shape(ps, b);
    linear_backward(a->d_ctx, 0.0f, ps.G(attn->out.w), ps.G(attn->out.b), dF, b.ctx,
                    ps.P(attn->out.w), rows, vv, d);
    if (b.kind == SELF_ATTN) {
        LinearP qkv = attn->qkv();
        attention_backward(a->d_proj, a->d_proj, a->d_ctx, b.probs, b.proj, b.proj, s, ps.p_attn,
                           ps.site_seed(b.site + 1), a->scratch);
        linear_backward(d_in, d_in_beta, ps.G(qkv.w), ps.G(qkv.b), a->d_proj, in, ps.P(qkv.w),
                        rows, d, qkv.out);
        return;
    }
    LinearP kvp = attn->kv();
    const int rows_s = ps.batch->B * ps.batch->S;
    attention_backward(a->d_proj, a->d_kv, a->d_ctx, b.probs, b.proj, b.kv, s, ps.p_attn,
                       ps.site_seed(b.site + 1), a->scratch);
    linear_backward(d_in, d_in_beta, ps.G(attn->q.w), ps.G(attn->q.b), a->d_proj, in,
                    ps.P(attn->q.w), rows, d, attn->q.out);
    linear_backward(a->d_enc_out, 1.0f, ps.G(kvp.w), ps.G(kvp.b), a->d_kv, a->enc_out,
                    ps.P(kvp.w), rows_s, d, kvp.out);
}

// dy (rows, d) -> dx (rows, d), the gradient of the block's input.
static void residual_backward(const Pass& ps, Block& b, const LayerNormP& ln,
                              const AttentionP* attn, const FeedForwardP* ffn, const float* dy,
                              float* dx, int rows) {
    Activations* a = ps.m->acts;
    const int d = ps.m->cfg.d_model;
    const size_t n = (size_t)rows * d;
    float* dF = a->d_tmp;
    if (!ps.m->cfg.pre_ln) {   // y = LN(r), r = x + Dropout(F(x))
        layernorm_backward(dF, 0.0f, ps.G(ln.g), ps.G(ln.b), dy, b.r, b.mean, b.rstd, ps.P(ln.g), rows, d);
        std::memcpy(dx, dF, n * sizeof(float));
        dropout_backward(dF, dF, n, ps.p_drop, ps.site_seed(b.site));
        sublayer_backward(ps, b, attn, ffn, b.x, dF, dx, 1.0f, rows);
        return;
    }
    // y = x + Dropout(F(n)), n = LN(x)
    std::memcpy(dx, dy, n * sizeof(float));
    dropout_backward(dF, dy, n, ps.p_drop, ps.site_seed(b.site));
    sublayer_backward(ps, b, attn, ffn, b.n, dF, a->d_tmp2, 0.0f, rows);
    layernorm_backward(dx, 1.0f, ps.G(ln.g), ps.G(ln.b), a->d_tmp2, b.x, b.mean, b.rstd, ps.P(ln.g), rows, d);
}

// Through the final LayerNorm (pre-LN) or a copy (post-LN): d_out -> d_last (rows, d).
static void final_norm_backward(const Pass& ps, const LayerNormP& ln, const float* d_out,
                                const float* last_x, const float* mean, const float* rstd,
                                float* d_last, int rows) {
    const int d = ps.m->cfg.d_model;
    if (ps.m->cfg.pre_ln)
        layernorm_backward(d_last, 0.0f, ps.G(ln.g), ps.G(ln.b), d_out, last_x, mean, rstd, ps.P(ln.g), rows, d);
    else
        std::memcpy(d_last, d_out, (size_t)rows * d * sizeof(float));
}

// d_dec_out in acts->d_a -> gradients of the decoder and of enc_out (acts->d_enc_out).
static void decoder_backward(const Pass& ps) {
    Model* m = ps.m;
    Activations* a = m->acts;
    const Config& c = m->cfg;
    const Batch& bt = *ps.batch;
    const int rows = bt.B * bt.T;
    float* dy = a->d_b;
    final_norm_backward(ps, m->layout.dec_norm, a->d_a, a->dec.back().y, a->dec_mean, a->dec_rstd, dy, rows);
    float* dx = a->d_a;
    std::memset(a->d_enc_out, 0, (size_t)bt.B * bt.S * c.d_model * sizeof(float));
    for (int l = c.n_dec - 1; l >= 0; l--) {
        const DecoderLayerP& P = m->layout.dec[l];
        Block* blk = &a->dec[3 * l];
        residual_backward(ps, blk[2], P.norm3, nullptr, &P.ffn, dy, dx, rows);
        std::swap(dx, dy);
        residual_backward(ps, blk[1], P.norm2, &P.cross_attn, nullptr, dy, dx, rows);
        std::swap(dx, dy);
        residual_backward(ps, blk[0], P.norm1, &P.self_attn, nullptr, dy, dx, rows);
        std::swap(dx, dy);
    }
    embedding_backward(ps.G(m->layout.embed), c.learned_pos ? ps.G(m->layout.pos_embed) : nullptr,
                       dy, bt.tgt_in.data(), bt.B, bt.T, c.d_model, ps.p_drop,
                       ps.site_seed(site_id(1, 255, 3)));
}

// acts->d_enc_out -> gradients of the encoder.
static void encoder_backward(const Pass& ps) {
    Model* m = ps.m;
    Activations* a = m->acts;
    const Config& c = m->cfg;
    const Batch& bt = *ps.batch;
    const int rows = bt.B * bt.S;
    float* dy = a->d_b;
    final_norm_backward(ps, m->layout.enc_norm, a->d_enc_out, a->enc.back().y, a->enc_mean, a->enc_rstd, dy, rows);
    float* dx = a->d_a;
    for (int l = c.n_enc - 1; l >= 0; l--) {
        const EncoderLayerP& P = m->layout.enc[l];
        residual_backward(ps, a->enc[2 * l + 1], P.norm2, nullptr, &P.ffn, dy, dx, rows);
        std::swap(dx, dy);
        residual_backward(ps, a->enc[2 * l], P.norm1, &P.self_attn, nullptr, dy, dx, rows);
        std::swap(dx, dy);
    }
    embedding_backward(ps.G(m->layout.embed), c.learned_pos ? ps.G(m->layout.pos_embed) : nullptr,
                       dy, bt.src.data(), bt.B, bt.S, c.d_model, ps.p_drop,
                       ps.site_seed(site_id(0, 255, 3)));
}

void model_backward(Model* m, const Batch& bt, double grad_denominator) {
    Activations* a = m->acts;
    MODEL_CHECK(a && a->train && a->B == bt.B && a->S == bt.S && a->T == bt.T,
                "model_backward needs the same batch's forward with train=true first");
    const Config& c = m->cfg;
    const double denom = grad_denominator > 0 ? grad_denominator : bt.tgt_tokens;
    Pass ps{m, &bt, c.p_drop, c.p_attn_drop, c.p_relu_drop};
    const int rows = bt.B * bt.T;
    crossentropy_backward(a->logits, a->lse, bt.labels.data(), rows, c.vocab, c.label_smoothing,
                          denom > 0 ? (float)(1.0 / denom) : 0.0f);
    // logits = dec_out E^T:  d_dec_out = dlogits E;  dE += dlogits^T dec_out.
    sgemm(false, false, rows, c.d_model, c.vocab, 1.0f, a->logits, c.vocab, ps.P(m->layout.embed),
          c.d_model, 0.0f, a->d_a, c.d_model);
    sgemm(true, false, c.vocab, c.d_model, rows, 1.0f, a->logits, c.vocab, a->dec_out, c.d_model,
          1.0f, ps.G(m->layout.embed), c.d_model);
    decoder_backward(ps);
    encoder_backward(ps);
    a->train = false;   // the logits were overwritten by their gradient
}

void model_zero_grad(Model* m) { std::memset(m->grads.data(), 0, m->grads.size() * sizeof(float)); }

// ---------------------------------------------------------------------------------------------
// Optimiser
// ---------------------------------------------------------------------------------------------
double learning_rate(const Config& cfg, int64_t step, double lr_scale, int warmup) {
    double s = step < 1 ? 1.0 : (double)step;
    return lr_scale / std::sqrt((double)cfg.d_model) *
           std::min(1.0 / std::sqrt(s), s * std::pow((double)warmup, -1.5));
}

double grad_norm(const Model* m) {
    const size_t n = m->grads.size();
    const float* g = m->grads.data();
    const size_t chunks = 64;
    std::vector<double> part(chunks, 0.0);   // fixed chunks: the same sum for any thread count
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        size_t i0 = n * c / chunks, i1 = n * (c + 1) / chunks;
        double s = 0;
        for (size_t i = i0; i < i1; i++) s += (double)g[i] * g[i];
        part[c] = s;
    }
    double total = 0;
    for (double p : part) total += p;
    return std::sqrt(total);
}

void adam_update(Model* m, double lr, double clip_norm) {
    if (clip_norm > 0) {
        double norm = grad_norm(m);
        if (norm > clip_norm) {
            float s = (float)(clip_norm / norm);
            for (float& g : m->grads) g *= s;
        }
    }
    m->step++;
    adam_step(m->params.data(), m->grads.data(), m->adam_m.data(), m->adam_v.data(),
              m->params.size(), (float)lr, 0.9f, 0.98f, 1e-9f, m->step);
}
