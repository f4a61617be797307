// model.cpp — the Transformer's sequence, written once on the op interface (transformer.h):
// embeddings, the encoder stack, the decoder stack (for training over the whole target, and
// for decoding one position at a time over a cache), the tied pre-softmax projection, the
// label-smoothed loss (chunk by chunk of rows, its gradient taken at once), the backward pass
// through all of it in reverse, and Adam.
//
// Each sub-layer sits in a residual block (block_forward / block_backward):
//   post-LN (paper): y = LN(x + Dropout(F(x)))      pre-LN: y = x + Dropout(F(LN(x)))
// with F one of: self-attention, encoder-decoder (cross) attention, position-wise FFN.
// The code here never reads an element of a tensor: memory comes from the backend (four
// parameter-sized buffers and the GPU's bf16 weight copy, one arena planned from the batch
// shape, decoding's cache and search state), and everything between two ops is an op, so
// the same sequence runs on the CPU and on the GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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
// Activations: what lives in the arena
// ---------------------------------------------------------------------------------------------
enum BlockKind { SELF_ATTN, CROSS_ATTN, FFN };

// One residual block: what its forward writes and its backward reads. rows = B * L.
struct Block {
    BlockKind kind;
    bool decoder;         // in the decoder stack: causal self-attention over the target
    int layer;            // decoder layer (decoding: its cache)
    uint32_t site;        // dropout site id of this block
    const floatX* x;      // (rows, d) block input: the previous block's y (not owned)
    floatX* n;            // pre-LN: LN(x) (rows, d), the sub-layer's input
    floatX* r;            // post-LN: x + Dropout(F(x)) (rows, d), the LayerNorm's input
    float* mean;          // (rows)
    float* rstd;          // (rows)
    floatX* y;            // (rows, d) block output
    floatX* proj;         // SELF: qkv (rows, 2*h*dk + h*dv); CROSS: q (rows, h*dk); FFN: ReLU(h1) (rows, d_ff)
    floatX* kv;           // CROSS (training): encoder keys/values (B*S, h*dk + h*dv)
    float* probs;         // attention (training): (B, H, Lq, Lk)
    floatX* ctx;          // attention: (rows, h*dv)
    floatX* h1_drop;      // FFN: Dropout(ReLU(h1)) (rows, d_ff); == proj (in place) unless kept
                          // for backward with p_relu_drop > 0
};

// Decoding a batch: the encoder's keys/values for every decoder layer, the self-attention
// cache, the buffers of one step over at most R rows (hypotheses), and the search's state.
struct DecodeState {
    bool recompute = false;
    std::vector<std::vector<int>> sources;   // recompute mode: the batch, on the host
    int B = 0, S = 0, R = 0, max_steps = 0, kc = 0;
    int n = 0;                               // the current step's rows
    int* src_len = nullptr;                  // (B) source tokens incl. </s>
    std::vector<floatX*> cross_kv;           // [layer] (B*S, h*dk + h*dv)
    std::vector<floatX*> cross_kt;           // [layer] (B, h, dk, S) keys transposed
    // The self-attention cache: per layer (cache_rows, h*dk + h*dv), the steps' slabs one after
    // another, slab t of the n rows decoded at step t from row step_row[t] on.
    std::vector<floatX*> cache;              // [layer]
    size_t cache_rows = 0;                   // rows it holds now (grown as the search goes)
    int* step_row = nullptr;                 // (max_steps + 1) on the device
    std::vector<int> step_row_host;          // (max_steps + 1): step_row[t + 1] = step_row[t] + n
    size_t slab_row = 0;                     // the current step's slab: step_row[t]
    int* slots[2] = {nullptr, nullptr};      // (R, max_steps) ancestors' rows; [cur] is live
    int cur = 0;
    std::vector<Block> blocks;               // 3 per decoder layer, R rows of one position
    floatX *x = nullptr, *out = nullptr, *logits = nullptr;   // (R, d), (R, d), (R, V)
    float *mean = nullptr, *rstd = nullptr;                   // (R)
    int* top = nullptr;                      // (R * kc) tokens, then as many log-probs
    // The current step's rows (in the search's history): token fed, parent row, sentence (n).
    const int *token = nullptr, *parent = nullptr, *sentence = nullptr;
    // The last step's logits (n rows, stride last_ld) and candidates (n, kc): tokens, then
    // log-probabilities.
    const floatX* last_logits = nullptr;
    int last_ld = 0, last_t = -1;
    int* cand = nullptr;
    // The search (its own allocation: recompute mode re-plans the arena at every step).
    void* search_mem = nullptr;
    size_t search_bytes = 0;
    SearchState st{};
    // The self-attention cache (its own allocation, kept across batches: grows, never shrinks).
    void* cache_mem = nullptr;
    size_t cache_bytes = 0;
    int* forced = nullptr;                   // (R) a step's forced tokens (PAD_ID: none)
    float* forced_logp = nullptr;            // (R) their log-probabilities
    bool any_forced = false;                 // model_decode_force ran this step
};

struct Activations {
    void* arena = nullptr;            // ONE allocation: the activations (the decoding cache and
                                      // the search's state have their own: DecodeState)
    size_t arena_bytes = 0;
    floatX* pos_table = nullptr;      // (pos_len, d) sinusoids: a constant table, grown on demand
    int pos_len = 0;
    int B = 0, S = 0, T = 0;
    int64_t dropout_counter = 0;      // the train forward whose masks backward must repeat
    int *src, *tgt_in, *labels;       // (B, S), (B, T), (B, T) token ids on the device
    std::vector<Block> enc, dec;      // 2 blocks per encoder layer, 3 per decoder layer
    floatX *src_x, *tgt_x;            // (B*S, d), (B*T, d) embedding outputs
    floatX* enc_out;                  // (B*S, d) encoder output (pre-LN: final LN)
    float *enc_mean, *enc_rstd;
    floatX* dec_out;                  // (B*T, d) decoder output
    float *dec_mean, *dec_rstd;
    floatX* logits;                   // (logit_rows, V): the logits of one chunk of rows
    int logit_rows = 0;
    float* lse;                       // (B*T)
    double* loss;                     // (1) the batch's summed loss, accumulated chunk by chunk
    // backward temporaries
    floatX *d_a, *d_b, *d_tmp, *d_tmp2;   // (max_rows, d)
    floatX *d_proj, *d_ctx, *d_kv, *d_enc_out;
    int* top;                         // full-recompute decoding: top-k tokens, then log-probs
    DecodeState ds;
};

// A bump allocator over the arena; with base == nullptr it only measures.
struct Plan {
    char* base;
    size_t fx;          // bytes of a floatX
    size_t used = 0;
    void* take(size_t bytes) {
        void* p = base ? base + used : nullptr;
        used += (bytes + 63) & ~(size_t)63;   // 64-byte aligned slices
        return p;
    }
    floatX* fX(size_t n) { return (floatX*)take(n * fx); }
    float* f32(size_t n) { return (float*)take(n * sizeof(float)); }
    int* i32(size_t n) { return (int*)take(n * sizeof(int)); }
    double* f64(size_t n) { return (double*)take(n * sizeof(double)); }
};

static uint32_t site_id(int stack, int layer, int block) {
    return (uint32_t)(((stack * 256 + layer) * 4 + block) * 4);   // + 0 residual, 1 attn, 2 relu
}

// What a block's forward writes besides its output y. keep = false (inference): what only
// backward reads (attention probabilities, cross-attention keys) is not kept either.
static void plan_block(Plan& mem, const Config& c, Block* b, int B, int Lq, int Lk, bool keep) {
    const size_t rows = (size_t)B * Lq, d = c.d_model;
    const size_t qk = (size_t)c.n_heads * c.d_k, vv = (size_t)c.n_heads * c.d_v;
    b->n = c.pre_ln ? mem.fX(rows * d) : nullptr;
    b->r = c.pre_ln ? nullptr : mem.fX(rows * d);
    b->mean = mem.f32(rows);
    b->rstd = mem.f32(rows);
    if (b->kind == FFN) {
        b->proj = mem.fX(rows * c.d_ff);
        b->h1_drop = c.p_relu_drop > 0 && keep ? mem.fX(rows * c.d_ff) : b->proj;
        return;
    }
    b->proj = mem.fX(rows * (b->kind == SELF_ATTN ? 2 * qk + vv : qk));
    if (b->kind == CROSS_ATTN && Lk > 0) b->kv = mem.fX((size_t)B * Lk * (qk + vv));
    if (Lk > 0) b->probs = mem.f32((size_t)B * c.n_heads * Lq * Lk);
    b->ctx = mem.fX(rows * vv);
}

// A stack's blocks (kinds in `pattern`, repeated per layer) for B sentences of Lq positions,
// self-attending over Lq keys (Lk_self) and cross-attending over S keys (Lk_cross; 0 when
// decoding, which reads the cache instead). keep (training): every block its own buffers.
// Otherwise every block shares one set of temporaries, their outputs alternating.
static void plan_stack(Plan& mem, const Config& c, std::vector<Block>& blocks, int stack,
                       int layers, const std::vector<BlockKind>& pattern, int B, int Lq,
                       int Lk_self, int Lk_cross, bool keep) {
    const size_t rows_d = (size_t)B * Lq * c.d_model;
    blocks.assign(layers * pattern.size(), Block{});
    floatX* shared_y[2] = {keep ? nullptr : mem.fX(rows_d), keep ? nullptr : mem.fX(rows_d)};
    const Plan temps = mem;
    size_t used = mem.used;
    for (size_t i = 0; i < blocks.size(); i++) {
        Block& b = blocks[i];
        b.kind = pattern[i % pattern.size()];
        b.decoder = stack == 1;
        b.layer = (int)(i / pattern.size());
        b.site = site_id(stack, b.layer, (int)(i % pattern.size()));
        if (keep) {
            plan_block(mem, c, &b, B, Lq, b.kind == CROSS_ATTN ? Lk_cross : Lk_self, true);
            b.y = mem.fX(rows_d);
            continue;
        }
        Plan t = temps;
        plan_block(t, c, &b, B, Lq, b.kind == CROSS_ATTN ? Lk_cross : Lk_self, false);
        b.y = shared_y[i % 2];
        used = std::max(used, t.used);
    }
    if (!keep) mem.used = used;
}

static const std::vector<BlockKind> ENCODER_LAYER = {SELF_ATTN, FFN};
static const std::vector<BlockKind> DECODER_LAYER = {SELF_ATTN, CROSS_ATTN, FFN};

// The encoder over (B, S): tokens, embedding, blocks, output.
static void plan_encoder(Activations* a, Plan& mem, const Config& c, int B, int S, bool keep) {
    const size_t rs = (size_t)B * S;
    a->src_x = mem.fX(rs * c.d_model);
    plan_stack(mem, c, a->enc, 0, c.n_enc, ENCODER_LAYER, B, S, S, S, keep);
    a->enc_out = mem.fX(rs * c.d_model);
    a->enc_mean = mem.f32(rs);
    a->enc_rstd = mem.f32(rs);
}

// Everything a forward over a (B, S, T) batch needs: keep (training, attention maps) gives
// every block its own buffers, backward adds the gradients' temporaries, logit_rows is the
// chunk of rows whose logits exist at once (classifier_chunk_rows), top_k entries are
// reserved for full-recompute decoding and scoring.
static size_t plan_forward(Activations* a, const Config& c, int B, int S, int T, bool keep,
                           bool backward, int logit_rows, size_t top_k, Plan mem) {
    const size_t d = c.d_model, rs = (size_t)B * S, rt = (size_t)B * T;
    const size_t max_rows = std::max(rs, rt);
    const size_t qk = (size_t)c.n_heads * c.d_k, vv = (size_t)c.n_heads * c.d_v;
    a->src = mem.i32(rs);
    a->tgt_in = mem.i32(rt);
    a->labels = mem.i32(rt);
    plan_encoder(a, mem, c, B, S, keep);
    a->tgt_x = mem.fX(rt * d);
    plan_stack(mem, c, a->dec, 1, c.n_dec, DECODER_LAYER, B, T, T, S, keep);
    a->dec_out = mem.fX(rt * d);
    a->dec_mean = mem.f32(rt);
    a->dec_rstd = mem.f32(rt);
    a->logits = mem.fX((size_t)logit_rows * c.vocab);
    a->logit_rows = logit_rows;
    a->lse = mem.f32(rt);
    a->loss = mem.f64(1);
    a->top = top_k ? mem.i32(2 * top_k) : nullptr;
    if (!backward) return mem.used;
    a->d_a = mem.fX(max_rows * d);
    a->d_b = mem.fX(max_rows * d);
    a->d_tmp = mem.fX(max_rows * d);
    a->d_tmp2 = mem.fX(max_rows * d);
    a->d_proj = mem.fX(max_rows * std::max(2 * qk + vv, (size_t)c.d_ff));
    a->d_ctx = mem.fX(max_rows * vv);
    a->d_kv = mem.fX(rs * (qk + vv));
    a->d_enc_out = mem.fX(rs * d);
    return mem.used;
}

// Decoding a batch: the cross-attention keys/values (kept), then either the encoder pass
// (begin) or one step's buffers, in the same memory. The cache has its own (reserve_cache).
static size_t plan_decoding(Activations* a, const Config& c, Plan mem) {
    DecodeState& ds = a->ds;
    const size_t qk = (size_t)c.n_heads * c.d_k, vv = (size_t)c.n_heads * c.d_v;
    const size_t rs = (size_t)ds.B * ds.S, R = ds.R;
    a->src = mem.i32(rs);
    ds.src_len = mem.i32(ds.B);
    ds.cross_kv.assign(c.n_dec, nullptr);
    ds.cross_kt.assign(c.n_dec, nullptr);
    ds.cache.assign(c.n_dec, nullptr);
    for (int l = 0; l < c.n_dec; l++) {
        ds.cross_kv[l] = mem.fX(rs * (qk + vv));
        ds.cross_kt[l] = mem.fX(rs * qk);
    }
    Plan begin = mem;   // the encoder pass, dead once the keys/values above are computed
    plan_encoder(a, begin, c, ds.B, ds.S, false);
    ds.slots[0] = mem.i32(R * ds.max_steps);
    ds.slots[1] = mem.i32(R * ds.max_steps);
    ds.step_row = mem.i32(ds.max_steps + 1);
    plan_stack(mem, c, ds.blocks, 1, c.n_dec, DECODER_LAYER, (int)R, 1, 0, 0, false);
    ds.x = mem.fX(R * c.d_model);
    ds.out = mem.fX(R * c.d_model);
    ds.mean = mem.f32(R);
    ds.rstd = mem.f32(R);
    ds.logits = mem.fX(R * c.vocab);
    ds.top = mem.i32(2 * R * ds.kc);
    return std::max(mem.used, begin.used);
}

// The self-attention cache made to hold at least `rows` rows (every layer): its allocation is
// reused while large enough (grows, never shrinks), else replaced by a larger one into which
// every layer's first `kept` rows are copied. Its slabs hold the rows each step decoded, not
// the batch's R: a sentence's hypotheses that finish take no more cache.
static void reserve_cache(Model* m, size_t rows, size_t kept) {
    const Config& c = m->cfg;
    DecodeState& ds = m->acts->ds;
    Backend& ops = *m->backend;
    const size_t row_bytes = (size_t)c.n_heads * (c.d_k + c.d_v) * ops.floatx_size();
    const size_t most = (size_t)ds.R * ds.max_steps;   // every row at every step
    const auto held = [&] { return std::min(most, ds.cache_bytes / (row_bytes * c.n_dec)); };
    std::vector<floatX*> old = ds.cache;
    void* old_mem = nullptr;
    if (held() < rows) {   // (the new allocation first: out of memory leaves the old one whole)
        void* grown = ops.alloc(row_bytes * c.n_dec * rows);
        old_mem = ds.cache_mem;
        ds.cache_mem = grown;
        ds.cache_bytes = row_bytes * c.n_dec * rows;
    }
    ds.cache_rows = held();
    ds.cache.assign(c.n_dec, nullptr);
    for (int l = 0; l < c.n_dec; l++) {
        ds.cache[l] = (floatX*)((char*)ds.cache_mem + (size_t)l * ds.cache_rows * row_bytes);
        if (old_mem && kept > 0) ops.copy(ds.cache[l], old[l], kept * row_bytes);
    }
    ops.release(old_mem);
}

// The steps of R rows a batch's cache starts with. On the CPU the length limit's: the OS gives
// memory a page when it is first written, so the pages the search writes are all it takes, and
// growing would only add copies and page faults (measured with slabs of R rows: beam 4 over the
// test set 3.8 -> 4.1 s at 4,000 tokens a batch, 4.9 -> 7.2 s at 16,000). On the GPU, where an
// allocation is memory taken, the longest source + 8 steps, grown by half as the search needs.
static int first_cache_steps(const Model* m) {
    if (m->decode_cache_steps > 0) return m->decode_cache_steps;
    const bool grow = m->decode_cache_steps < 0 || m->backend->device() != Device::CPU;
    return grow ? m->acts->ds.S + 8 : m->acts->ds.max_steps;
}

// Step t's slab: its first row (on the host and the device), the cache grown to hold it.
static size_t place_slab(Model* m, int t) {
    DecodeState& ds = m->acts->ds;
    const size_t first = ds.step_row_host[t], end = first + ds.n, R = ds.R;
    if (end > ds.cache_rows)   // by half again (16 steps of R rows at least), rows so far kept
        reserve_cache(m, std::min(R * ds.max_steps, std::max(end, ds.cache_rows + std::max(16 * R, ds.cache_rows / 2))),
                      first);
    ds.step_row_host[t + 1] = (int)end;
    m->backend->upload(ds.step_row + t, &ds.step_row_host[t], sizeof(int));
    return first;
}

// Makes the arena at least `bytes` large (it grows, never shrinks), by an eighth more than it
// held at least: batches sorted by length ask a little more each, and every new allocation is
// written page by page again (the test set, 4,000 tokens a batch: 9 allocations from 74.8 to
// 77.3 MB before, 2 now (74.8, then 84.2 MB): the greedy and beam-4 runs took 129,000 page
// faults, not 258,000).
static void reserve_arena(Model* m, size_t bytes) {
    Activations* a = m->acts;
    if (bytes <= a->arena_bytes) return;
    bytes = std::max(bytes, a->arena_bytes + a->arena_bytes / 8);
    m->backend->release(a->arena);   // (none held while allocating: out of memory leaves none)
    a->arena = nullptr;
    a->arena_bytes = 0;
    a->arena = m->backend->alloc(bytes);
    a->arena_bytes = bytes;
}

template <class PlanFn>
static void plan_arena(Model* m, PlanFn plan) {
    Plan measure{nullptr, m->backend->floatx_size()};
    reserve_arena(m, plan(measure));
    plan(Plan{(char*)m->acts->arena, m->backend->floatx_size()});
}

// Position table (L, d): the learned parameters, or sinusoids computed up to L.
static const floatX* position_table(Model* m, int L) {
    Activations* a = m->acts;
    const size_t fx = m->backend->floatx_size();
    if (m->cfg.learned_pos) return (const floatX*)((const char*)m->weights + m->layout.pos_embed * fx);
    if (a->pos_len < L) {
        const int len = std::max(L, 2 * a->pos_len);
        m->backend->release(a->pos_table);
        a->pos_table = nullptr;
        a->pos_len = 0;
        a->pos_table = (floatX*)m->backend->alloc((size_t)len * m->cfg.d_model * fx);
        m->backend->positional_table(a->pos_table, len, m->cfg.d_model);
        a->pos_len = len;
    }
    return a->pos_table;
}

// ---------------------------------------------------------------------------------------------
// Buffers and initialisation
// ---------------------------------------------------------------------------------------------
static void release_buffers(Model* m) {
    if (!m->backend) return;
    Backend& ops = *m->backend;
    if (m->weights && (void*)m->weights != (void*)m->params) ops.release(m->weights);
    for (float* p : {m->params, m->grads, m->adam_m, m->adam_v}) ops.release(p);
    m->params = m->grads = m->adam_m = m->adam_v = nullptr;
    m->weights = nullptr;
    if (m->acts) {
        ops.release(m->acts->arena);
        ops.release(m->acts->pos_table);
        ops.release(m->acts->ds.search_mem);
        ops.release(m->acts->ds.cache_mem);
    }
    delete m->acts;
    m->acts = nullptr;
}

Model::~Model() { release_buffers(this); }

void model_allocate(Model* m, const Config& cfg, bool training) {
    std::string err = config_error(cfg);
    MODEL_CHECK(err.empty(), "bad config: %s", err.c_str());
    if (!m->backend) m->backend = make_cpu_backend();
    release_buffers(m);
    m->cfg = cfg;
    m->layout = make_layout(cfg);
    Backend& ops = *m->backend;
    const size_t bytes = m->layout.total * sizeof(float);
    m->params = (float*)ops.alloc(bytes);
    m->weights = ops.floatx_size() == sizeof(float)
                     ? (floatX*)m->params
                     : (floatX*)ops.alloc(m->layout.total * ops.floatx_size());
    if (training) {
        for (float** p : {&m->grads, &m->adam_m, &m->adam_v}) {
            *p = (float*)ops.alloc(bytes);
            ops.fill_zero(*p, bytes);
        }
    }
    m->acts = new Activations();
    m->step = 0;
    m->train_forwards = 0;
}

// splitmix64 draws: uniform in (0, 1) and standard normal (Box-Muller).
struct InitRng {
    uint64_t s;
    double uniform() { return ((splitmix64_next(&s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
    double normal() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); }
};

static bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The initial parameters into p (layout.total floats, host).
static void init_parameters(const ParamLayout& layout, const Config& cfg, uint64_t seed, float* p) {
    InitRng rng{seed};
    for (const TensorInfo& t : layout.tensors) {
        float* v = p + t.offset;
        if (t.name == "embed.weight" || t.name == "pos_embed.weight") {
            const double std_dev = 1.0 / std::sqrt((double)cfg.d_model);
            for (size_t i = 0; i < t.numel; i++) v[i] = (float)(rng.normal() * std_dev);
        } else if (t.shape.size() == 2) {   // Xavier-uniform: U(-a, a), a = sqrt(6 / (in + out))
            const double a = std::sqrt(6.0 / (t.shape[0] + t.shape[1]));
            for (size_t i = 0; i < t.numel; i++) v[i] = (float)((2.0 * rng.uniform() - 1.0) * a);
        } else {
            bool norm_gain = ends_with(t.name, ".weight");   // LayerNorm g = 1; biases 0
            for (size_t i = 0; i < t.numel; i++) v[i] = norm_gain ? 1.0f : 0.0f;
        }
    }
}

void model_init(Model* m, const Config& cfg, uint64_t seed) {
    model_allocate(m, cfg, true);
    m->dropout_seed = seed;
    std::vector<float> host(m->layout.total);
    init_parameters(m->layout, cfg, seed, host.data());
    model_set_params(m, host.data());
}

void model_set_params(Model* m, const float* host) {
    Backend& ops = *m->backend;
    model_unpack_weights(m);   // (the packed and int8 copies of the old weights would go stale)
    model_dequantize(m);
    ops.upload(m->params, host, m->layout.total * sizeof(float));
    if ((void*)m->weights != (void*)m->params) ops.convert_weights(m->weights, m->params, m->layout.total);
}

void model_get_params(const Model* m, float* host) {
    m->backend->download(host, m->params, m->layout.total * sizeof(float));
}

void model_set_adam(Model* m, const float* host_m, const float* host_v) {
    MODEL_CHECK(m->adam_m, "the model holds no Adam state (loaded for inference)");
    m->backend->upload(m->adam_m, host_m, m->layout.total * sizeof(float));
    m->backend->upload(m->adam_v, host_v, m->layout.total * sizeof(float));
}

void model_get_adam(const Model* m, float* host_m, float* host_v) {
    MODEL_CHECK(m->adam_m, "the model holds no Adam state (loaded for inference)");
    m->backend->download(host_m, m->adam_m, m->layout.total * sizeof(float));
    m->backend->download(host_v, m->adam_v, m->layout.total * sizeof(float));
}

void model_get_grads(const Model* m, float* host) {
    MODEL_CHECK(m->grads, "the model holds no gradients (loaded for inference)");
    m->backend->download(host, m->grads, m->layout.total * sizeof(float));
}

// ---------------------------------------------------------------------------------------------
// Inference's weights: int8 copies, or (fp32 and bf16 on the CPU) packed once
// ---------------------------------------------------------------------------------------------
// Every product's weight matrix: each layer's projections, then the classifier's E (x E^T).
static std::vector<LinearP> weight_products(const Model* m) {
    std::vector<LinearP> products;
    for (const EncoderLayerP& L : m->layout.enc)
        for (const LinearP& p : {L.self_attn.qkv(), L.self_attn.out, L.ffn.fc1, L.ffn.fc2})
            products.push_back(p);
    for (const DecoderLayerP& L : m->layout.dec)
        for (const LinearP& p : {L.self_attn.qkv(), L.self_attn.out, L.cross_attn.q,
                                 L.cross_attn.kv(), L.cross_attn.out, L.ffn.fc1, L.ffn.fc2})
            products.push_back(p);
    products.push_back(LinearP{m->layout.embed, 0, m->cfg.vocab, m->cfg.d_model});   // x E^T
    return products;
}

bool model_quantize(Model* m, std::string* error) {
    model_dequantize(m);
    for (const LinearP& p : weight_products(m))
        if (!m->backend->quantize_weights(m->params + p.w, p.out, p.in, error)) return false;
    return true;
}

void model_dequantize(Model* m) { m->backend->drop_quantized_weights(); }

void model_pack_weights(Model* m) {
    model_unpack_weights(m);
    for (const LinearP& p : weight_products(m)) m->backend->pack_weights(m->params + p.w, p.out, p.in);
}

void model_unpack_weights(Model* m) { m->backend->drop_packed_weights(); }

// ---------------------------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------------------------
// Everything a block's forward or backward needs besides the block itself.
struct Pass {
    Model* m;
    Backend& ops;
    Activations* a;
    int B, S, T;                    // the batch (decoding: B rows of one position, T = 1)
    float p_drop, p_attn, p_relu;   // 0 at inference
    bool decoding = false;          // one position over the cache (model_decode_step)
    int t = 0;                      // decoding: the position
    uint64_t site_seed(uint32_t site) const {
        return dropout_site_seed(m->dropout_seed, a->dropout_counter, site);
    }
    floatX* at(const floatX* p, size_t n) const {   // p + n elements
        return (floatX*)((const char*)p + n * ops.floatx_size());
    }
    const floatX* W(size_t off) const { return at(m->weights, off); }
    float* G(size_t off) const { return m->grads + off; }
    // Y (rows, p.out) = X (rows, p.in) W^T + b.
    void linear(floatX* Y, const floatX* X, const LinearP& p, int rows) const {
        ops.linear_forward(Y, X, W(p.w), W(p.b), rows, p.in, p.out);
    }
};

static Pass make_pass(Model* m, int B, int S, int T, bool train) {
    const Config& c = m->cfg;
    return Pass{m, *m->backend, m->acts, B, S, T, train ? c.p_drop : 0.0f,
                train ? c.p_attn_drop : 0.0f, train ? c.p_relu_drop : 0.0f};
}

// Shape of a block's attention: self-attention reads q, k, v from one qkv row (causal in the
// decoder); cross-attention reads q from the decoder and k, v from the encoder's kv rows.
static AttentionShape attention_shape(const Pass& ps, const Block& b) {
    const Config& c = ps.m->cfg;
    const int qk = c.n_heads * c.d_k, vv = c.n_heads * c.d_v;
    if (b.kind == CROSS_ATTN)
        return {ps.B, ps.T, ps.S, c.n_heads, c.d_k, c.d_v, qk, 0, qk + vv, 0, qk, false};
    const int L = b.decoder ? ps.T : ps.S;
    return {ps.B, L, L, c.n_heads, c.d_k, c.d_v, 2 * qk + vv, 0, 2 * qk + vv, qk, 2 * qk, b.decoder};
}

// Key tokens that mask attention: the sentence's own tokens for self-attention, the source
// for cross-attention.
static const int* key_tokens(const Pass& ps, const Block& b) {
    return b.kind == SELF_ATTN && b.decoder ? ps.a->tgt_in : ps.a->src;
}

// §3.2.2 Multi-Head Attention over the whole sequence, and §3.2.3's masking: the query
// attends to the keys the masks allow. ctx (rows, h*dv) from in (rows, d).
static void attention_sublayer(const Pass& ps, Block& b, const AttentionP* attn,
                               const floatX* in, int rows) {
    AttentionShape s = attention_shape(ps, b);
    const floatX* kv = b.proj;
    if (b.kind == SELF_ATTN) {
        ps.linear(b.proj, in, attn->qkv(), rows);
    } else {
        ps.linear(b.proj, in, attn->q, rows);
        ps.linear(b.kv, ps.a->enc_out, attn->kv(), ps.B * ps.S);
        kv = b.kv;
    }
    ps.ops.attention_forward(b.ctx, b.probs, b.proj, kv, key_tokens(ps, b), s, ps.p_attn,
                             ps.site_seed(b.site + 1));
}

// The same attention for one new position per row (decoding): self-attention appends the
// rows' keys/values to the cache and attends over steps 0..t; cross-attention reads the keys
// and values computed once for the batch (model_decode_begin).
static void attention_step_sublayer(const Pass& ps, Block& b, const AttentionP* attn,
                                    const floatX* in, int rows) {
    const Config& c = ps.m->cfg;
    DecodeState& ds = ps.a->ds;
    const int qk = c.n_heads * c.d_k, vv = c.n_heads * c.d_v;
    if (b.kind == SELF_ATTN) {
        const StepShape s{rows, c.n_heads, c.d_k, c.d_v, 2 * qk + vv};
        ps.linear(b.proj, in, attn->qkv(), rows);
        floatX* slab = ps.at(ds.cache[b.layer], ds.slab_row * (qk + vv));
        ps.ops.copy_rows(slab, qk + vv, ps.at(b.proj, qk), 2 * qk + vv, rows, qk + vv);
        ps.ops.attention_step_self(b.ctx, b.proj, ds.cache[b.layer], ds.step_row, ds.slots[ds.cur],
                                   ds.max_steps, ps.t, s);
        return;
    }
    const StepShape s{rows, c.n_heads, c.d_k, c.d_v, qk};
    ps.linear(b.proj, in, attn->q, rows);
    ps.ops.attention_step_cross(b.ctx, b.proj, ds.cross_kt[b.layer], ds.cross_kv[b.layer],
                                qk + vv, ds.src_len, ds.sentence, ds.S, s);
}

// §3.3 Position-wise Feed-Forward Networks: out (rows, d) = max(0, in W1 + b1) W2 + b2, with
// tensor2tensor's optional dropout on the ReLU output.
static void ffn_sublayer(const Pass& ps, Block& b, const FeedForwardP* ffn, const floatX* in,
                         floatX* out, int rows) {
    const size_t n = (size_t)rows * ps.m->cfg.d_ff;
    ps.ops.linear_relu_forward(b.proj, in, ps.W(ffn->fc1.w), ps.W(ffn->fc1.b), rows, ffn->fc1.in,
                               ffn->fc1.out);
    if (ps.p_relu > 0) ps.ops.dropout_forward(b.h1_drop, b.proj, n, ps.p_relu, ps.site_seed(b.site + 2));
    ps.linear(out, b.h1_drop, ffn->fc2, rows);
}

// F(in) -> out (rows, d) for the block's sub-layer.
static void sublayer_forward(const Pass& ps, Block& b, const AttentionP* attn,
                             const FeedForwardP* ffn, const floatX* in, floatX* out, int rows) {
    if (b.kind == FFN) return ffn_sublayer(ps, b, ffn, in, out, rows);
    if (ps.decoding) attention_step_sublayer(ps, b, attn, in, rows);
    else attention_sublayer(ps, b, attn, in, rows);
    ps.linear(out, b.ctx, attn->out, rows);
}

// §3.1 residual connection around the sub-layer, §5.4 dropout on its output, LayerNorm:
// post-LN: r = x + Dropout(F(x)); y = LN(r).   pre-LN: n = LN(x); y = x + Dropout(F(n)).
static void block_forward(const Pass& ps, Block& b, const LayerNormP& ln,
                          const AttentionP* attn, const FeedForwardP* ffn, int rows) {
    const int d = ps.m->cfg.d_model;
    const size_t n = (size_t)rows * d;
    const bool pre = ps.m->cfg.pre_ln;
    if (pre) ps.ops.layernorm_forward(b.n, b.mean, b.rstd, b.x, ps.W(ln.g), ps.W(ln.b), rows, d);
    floatX* out = pre ? b.y : b.r;
    sublayer_forward(ps, b, attn, ffn, pre ? b.n : b.x, out, rows);
    if (pre)
        ps.ops.residual_forward(out, out, b.x, n, ps.p_drop, ps.site_seed(b.site));
    else   // r = x + Dropout(F(x)) and y = LN(r) in one pass
        ps.ops.residual_layernorm_forward(b.y, b.r, b.mean, b.rstd, b.r, b.x, ps.W(ln.g), ps.W(ln.b),
                                          rows, d, ps.p_drop, ps.site_seed(b.site));
}

// §3.1 Encoder and Decoder Stacks: an encoder layer is self-attention, then the FFN, each in its
// residual block.
static void encoder_layer_forward(const Pass& ps, int l, Block* blk, const floatX* x, int rows) {
    const EncoderLayerP& P = ps.m->layout.enc[l];
    blk[0].x = x;
    block_forward(ps, blk[0], P.norm1, &P.self_attn, nullptr, rows);
    blk[1].x = blk[0].y;
    block_forward(ps, blk[1], P.norm2, nullptr, &P.ffn, rows);
}

// §3.1 Encoder and Decoder Stacks: a decoder layer is masked self-attention, encoder-decoder
// attention, the FFN. The same sequence trains over the whole target and decodes one position
// over the cache.
static void decoder_layer_forward(const Pass& ps, int l, Block* blk, const floatX* x, int rows) {
    const DecoderLayerP& P = ps.m->layout.dec[l];
    blk[0].x = x;
    block_forward(ps, blk[0], P.norm1, &P.self_attn, nullptr, rows);
    blk[1].x = blk[0].y;
    block_forward(ps, blk[1], P.norm2, &P.cross_attn, nullptr, rows);
    blk[2].x = blk[1].y;
    block_forward(ps, blk[2], P.norm3, nullptr, &P.ffn, rows);
}

// A stack's output: the final LayerNorm of x (pre-LN) or x itself (post-LN), into out.
static void final_norm_forward(const Pass& ps, const LayerNormP& ln, const floatX* x,
                               floatX* out, float* mean, float* rstd, int rows) {
    const int d = ps.m->cfg.d_model;
    if (ps.m->cfg.pre_ln)
        ps.ops.layernorm_forward(out, mean, rstd, x, ps.W(ln.g), ps.W(ln.b), rows, d);
    else
        ps.ops.copy(out, x, (size_t)rows * d * ps.ops.floatx_size());
}

// The encoder stack over the batch's source: fills a->enc_out (B*S, d).
static void encoder_forward(const Pass& ps) {
    Model* m = ps.m;
    Activations* a = ps.a;
    const Config& c = m->cfg;
    const int rows = ps.B * ps.S;
    ps.ops.embedding_forward(a->src_x, a->src, ps.W(m->layout.embed), position_table(m, ps.S), 0,
                             ps.B, ps.S, c.d_model, ps.p_drop, ps.site_seed(site_id(0, 255, 3)));
    const floatX* x = a->src_x;
    for (int l = 0; l < c.n_enc; l++) {
        encoder_layer_forward(ps, l, &a->enc[2 * l], x, rows);
        x = a->enc[2 * l + 1].y;
    }
    final_norm_forward(ps, m->layout.enc_norm, x, a->enc_out, a->enc_mean, a->enc_rstd, rows);
}

// The decoder stack over <s> + target, attending to enc_out: fills a->dec_out (B*T, d).
static void decoder_forward(const Pass& ps) {
    Model* m = ps.m;
    Activations* a = ps.a;
    const Config& c = m->cfg;
    const int rows = ps.B * ps.T;
    ps.ops.embedding_forward(a->tgt_x, a->tgt_in, ps.W(m->layout.embed), position_table(m, ps.T), 0,
                             ps.B, ps.T, c.d_model, ps.p_drop, ps.site_seed(site_id(1, 255, 3)));
    const floatX* x = a->tgt_x;
    for (int l = 0; l < c.n_dec; l++) {
        decoder_layer_forward(ps, l, &a->dec[3 * l], x, rows);
        x = a->dec[3 * l + 2].y;
    }
    final_norm_forward(ps, m->layout.dec_norm, x, a->dec_out, a->dec_mean, a->dec_rstd, rows);
}

// §3.4 Embeddings and Softmax: the pre-softmax projection shares the embedding matrix,
// logits (rows, V) = h E^T.
static void logits_forward(const Pass& ps, floatX* logits, const floatX* h, int rows) {
    const Config& c = ps.m->cfg;
    ps.ops.linear_forward(logits, h, ps.W(ps.m->layout.embed), nullptr, rows, c.d_model, c.vocab);
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

// The classifier works on chunks of rows, so that only (chunk, V) logits exist at a time: the
// paper's 37,000-word vocabulary at 25,000 target tokens would need 1.85 GB of bf16 logits (3.7
// GB in fp32) at once, a chunk of CLASSIFIER_CHUNK_ELEMENTS logits holds 128 MB (256 MB).
// Model::logit_chunk_rows overrides the size (tests cut small batches into several chunks).
static const size_t CLASSIFIER_CHUNK_ELEMENTS = (size_t)1 << 26;

static int classifier_chunk_rows(int vocab, int chunk_rows, int rows) {
    const size_t automatic = std::max<size_t>(1, CLASSIFIER_CHUNK_ELEMENTS / (size_t)vocab);
    const size_t chunk = chunk_rows > 0 ? (size_t)chunk_rows : automatic;
    return (int)std::min(chunk, (size_t)rows);
}
static int classifier_chunk_rows(const Model* m, int rows) {
    return classifier_chunk_rows(m->cfg.vocab, m->logit_chunk_rows, rows);
}
int model_logit_chunk_rows(const Model* m, int rows) { return classifier_chunk_rows(m, rows); }

size_t model_arena_bytes(const Config& cfg, int B, int S, int T, size_t floatx_bytes, bool training,
                         int logit_chunk_rows) {
    Activations a;
    const int chunk = classifier_chunk_rows(cfg.vocab, logit_chunk_rows, B * T);
    return plan_forward(&a, cfg, B, S, T, training, training, chunk, 0, Plan{nullptr, floatx_bytes});
}

ActivationBytes model_activation_bytes(const Model* m) {
    ActivationBytes b;
    if (m->acts) b.arena = m->acts->arena_bytes, b.cache = m->acts->ds.cache_bytes, b.search = m->acts->ds.search_bytes;
    return b;
}

// fn(r0, n) once a->logits (n, V) = h[r0 .. r0 + n) E^T, chunk after chunk over h (rows, d).
template <class Fn>
static void for_each_logit_chunk(const Pass& ps, const floatX* h, int rows, Fn fn) {
    const int d = ps.m->cfg.d_model;
    for (int r0 = 0; r0 < rows; r0 += ps.a->logit_rows) {
        const int n = std::min(ps.a->logit_rows, rows - r0);
        logits_forward(ps, ps.a->logits, ps.at(h, (size_t)r0 * d), n);
        fn(r0, n);
    }
}

// What a forward pass over a batch does and keeps (plan_forward): train applies dropout;
// keep gives every block its own buffers (so each layer's attention probabilities survive);
// backward (model_forward_backward) keeps them too and adds the gradients' temporaries;
// logit_rows: the classifier's chunk; top_k ints are reserved twice (decoding, scoring).
struct ForwardPlan {
    bool train, keep, backward;
    int logit_rows;
    size_t top_k;
};

// The encoder and decoder stacks over a batch: a->enc_out (B*S, d), a->dec_out (B*T, d).
static Pass forward_stacks(Model* m, const Batch& bt, const ForwardPlan& fp) {
    check_batch(m, bt);
    MODEL_CHECK(!fp.train || m->backend->precision() != Precision::INT8,
                "training forward on an int8-quantized model (model_dequantize first)");
    MODEL_CHECK(!fp.train || !m->backend->has_packed_weights(),
                "training forward on a model with packed weights (model_unpack_weights first)");
    MODEL_CHECK(!fp.backward || m->grads, "training on a model loaded for inference");
    Activations* a = m->acts;
    plan_arena(m, [&](Plan p) {
        return plan_forward(a, m->cfg, bt.B, bt.S, bt.T, fp.keep || fp.backward, fp.backward,
                            fp.logit_rows, fp.top_k, p);
    });
    Backend& ops = *m->backend;
    ops.upload(a->src, bt.src.data(), bt.src.size() * sizeof(int));
    ops.upload(a->tgt_in, bt.tgt_in.data(), bt.tgt_in.size() * sizeof(int));
    ops.upload(a->labels, bt.labels.data(), bt.labels.size() * sizeof(int));
    a->B = bt.B, a->S = bt.S, a->T = bt.T;
    if (fp.train) a->dropout_counter = m->train_forwards++;
    Pass ps = make_pass(m, bt.B, bt.S, bt.T, fp.train);
    encoder_forward(ps);
    decoder_forward(ps);
    return ps;
}

// Full-recompute decoding (testing): the stacks, then every position's logits at once into
// a->logits (B*T, V); top_k entries reserved for the top-k results.
static void forward(Model* m, const Batch& bt, bool train, size_t top_k) {
    const int rows = bt.B * bt.T;
    Pass ps = forward_stacks(m, bt, {train, false, false, rows, top_k});
    logits_forward(ps, m->acts->logits, m->acts->dec_out, rows);
}

// §3.4 Embeddings and Softmax, §5.4 Label Smoothing: the tied pre-softmax projection and the
// loss over the batch's labels, chunk by chunk: the logits, lse, the sum of the rows' losses
// (accumulated on the device in a->loss, read once at the end: one wait for the host a batch).
// backward (training) also turns each chunk's logits into their gradient in place, scaled by
// grad_scale, and takes it through the projection at once: d_dec_out (a->d_a) = dlogits E,
// dE += dlogits^T dec_out. No (rows, V) logits or probabilities are ever kept.
static double classifier(const Pass& ps, bool backward, float grad_scale) {
    Activations* a = ps.a;
    const Config& c = ps.m->cfg;
    const int d = c.d_model;
    ps.ops.fill_zero(a->loss, sizeof(double));
    for_each_logit_chunk(ps, a->dec_out, ps.B * ps.T, [&](int r0, int n) {
        float* lse = a->lse + r0;
        const int* labels = a->labels + r0;
        if (!backward) {
            ps.ops.crossentropy_forward(lse, a->loss, a->logits, labels, n, c.vocab, c.label_smoothing);
            return;
        }
        ps.ops.crossentropy_forward_backward(lse, a->loss, a->logits, labels, n, c.vocab, c.label_smoothing,
                                             grad_scale);
        ps.ops.linear_backward(ps.at(a->d_a, (size_t)r0 * d), 0.0f, ps.G(ps.m->layout.embed), nullptr,
                               a->logits, ps.at(a->dec_out, (size_t)r0 * d), ps.W(ps.m->layout.embed),
                               n, d, c.vocab);
    });
    double sum = 0;
    ps.ops.download(&sum, a->loss, sizeof(double));
    return sum;
}

static float mean_loss(double sum, const Batch& bt) {
    return bt.tgt_tokens > 0 ? (float)(sum / bt.tgt_tokens) : 0.0f;
}

float model_forward(Model* m, const Batch& bt, bool train) {
    Pass ps = forward_stacks(m, bt, {train, false, false, classifier_chunk_rows(m, bt.B * bt.T), 0});
    return mean_loss(classifier(ps, false, 0.0f), bt);
}

// n floatX from the device into host floats.
static void download_floatx(Backend& ops, float* out, const floatX* src, size_t n) {
    if (ops.floatx_size() == sizeof(float)) {
        ops.download(out, src, n * sizeof(float));
        return;
    }
    std::vector<uint16_t> bf(n);   // bfloat16: the upper half of a float
    ops.download(bf.data(), src, n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)bf[i] << 16;
        std::memcpy(&out[i], &bits, sizeof(float));
    }
}

// The logits again, chunk by chunk, from the decoder output the last forward left.
void model_logits(Model* m, std::vector<float>* logits) {
    Activations* a = m->acts;
    MODEL_CHECK(a && a->dec_out && a->B > 0, "model_logits needs a forward over a batch first");
    const size_t V = m->cfg.vocab;
    logits->resize((size_t)a->B * a->T * V);
    Pass ps = make_pass(m, a->B, a->S, a->T, false);
    for_each_logit_chunk(ps, a->dec_out, a->B * a->T, [&](int r0, int n) {
        download_floatx(ps.ops, logits->data() + (size_t)r0 * V, a->logits, (size_t)n * V);
    });
}

// ---------------------------------------------------------------------------------------------
// Looking inside: the attention probabilities of a (source, target) pair
// ---------------------------------------------------------------------------------------------
void model_attention(Model* m, const std::vector<int>& source, const std::vector<int>& target,
                     AttentionMaps* out) {
    MODEL_CHECK(!source.empty() && !target.empty(), "model_attention needs a source and a target");
    const Config& c = m->cfg;
    Batch b;
    b.B = 1;
    b.S = (int)source.size();
    b.T = (int)target.size();
    b.src = source;
    b.tgt_in.assign(1, BOS_ID);
    b.tgt_in.insert(b.tgt_in.end(), target.begin(), target.end() - 1);
    b.labels = target;
    b.src_tokens = b.S;
    b.tgt_tokens = b.T;
    forward_stacks(m, b, {false, true, false, classifier_chunk_rows(m, b.T), 0});
    const Activations* a = m->acts;
    *out = AttentionMaps{};
    out->S = b.S, out->T = b.T, out->H = c.n_heads, out->n_enc = c.n_enc, out->n_dec = c.n_dec;
    const size_t H = c.n_heads, S = b.S, T = b.T;
    out->enc.resize(c.n_enc * H * S * S);
    out->dec.resize(c.n_dec * H * T * T);
    out->cross.resize(c.n_dec * H * T * S);
    Backend& ops = *m->backend;
    for (int l = 0; l < c.n_enc; l++)   // (1, H, S, S) per layer
        ops.download(out->enc.data() + l * H * S * S, a->enc[2 * l].probs, H * S * S * sizeof(float));
    for (int l = 0; l < c.n_dec; l++) {
        ops.download(out->dec.data() + l * H * T * T, a->dec[3 * l].probs, H * T * T * sizeof(float));
        ops.download(out->cross.data() + l * H * T * S, a->dec[3 * l + 1].probs, H * T * S * sizeof(float));
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------
// The search's state (SearchState) in its own allocation, planned like the arena.
static size_t plan_search(DecodeState& ds, int beam, int nbest, int V, Plan mem) {
    SearchState& st = ds.st;
    const size_t B = ds.B, Bk = B * beam, Bn = B * nbest;
    st.B = ds.B, st.R = ds.R, st.beam = beam, st.nbest = nbest, st.kc = ds.kc, st.V = V;
    st.max_steps = ds.max_steps;
    st.max_len = mem.i32(B);
    st.lp = mem.f32(ds.max_steps + 1);
    st.first_row = mem.i32(B);
    st.alive = mem.i32(B);
    st.alive_logp = mem.f32(Bk);
    st.next_n = mem.i32(B);
    st.next_token = mem.i32(Bk);
    st.next_parent = mem.i32(Bk);
    st.next_logp = mem.f32(Bk);
    st.fin_n = mem.i32(B);
    st.fin_score = mem.f32(Bn);
    st.fin_logp = mem.f32(Bn);
    st.fin_step = mem.i32(Bn);
    st.fin_row = mem.i32(Bn);
    st.fin_token = mem.i32(Bn);
    st.hist = mem.i32((size_t)(ds.max_steps + 1) * 3 * ds.R);
    st.count = mem.i32(1);
    ds.forced = mem.i32(ds.R);
    ds.forced_logp = mem.f32(ds.R);
    return mem.used;
}

// Step 0 of the search: one alive hypothesis (<s>, log-probability 0) per sentence, in row s.
static void start_search(Model* m, const SearchSetup& setup) {
    DecodeState& ds = m->acts->ds;
    Backend& ops = *m->backend;
    Plan measure{nullptr, ops.floatx_size()};
    const size_t bytes = plan_search(ds, setup.beam, setup.nbest, m->cfg.vocab, measure);
    if (bytes > ds.search_bytes) {
        ops.release(ds.search_mem);
        ds.search_mem = nullptr;
        ds.search_bytes = 0;
        ds.search_mem = ops.alloc(bytes);
        ds.search_bytes = bytes;
    }
    plan_search(ds, setup.beam, setup.nbest, m->cfg.vocab, Plan{(char*)ds.search_mem, ops.floatx_size()});
    const SearchState& st = ds.st;
    std::vector<int> rows(ds.B), ones(ds.B, 1), step0(3 * (size_t)ds.R, -1);
    for (int s = 0; s < ds.B; s++) rows[s] = s, step0[s] = BOS_ID, step0[2 * (size_t)ds.R + s] = s;
    ops.upload((void*)st.max_len, setup.max_len.data(), ds.B * sizeof(int));
    ops.upload((void*)st.lp, setup.lp.data(), (ds.max_steps + 1) * sizeof(float));
    ops.upload(st.first_row, rows.data(), ds.B * sizeof(int));
    ops.upload(st.alive, ones.data(), ds.B * sizeof(int));
    ops.fill_zero(st.alive_logp, (size_t)ds.B * st.beam * sizeof(float));
    ops.fill_zero(st.fin_n, ds.B * sizeof(int));
    ops.upload(st.hist, step0.data(), step0.size() * sizeof(int));
    ds.n = ds.B;
    ds.last_logits = nullptr;
    ds.last_t = -1;
}

static void check_setup(const SearchSetup& setup, size_t sentences, int* max_steps) {
    MODEL_CHECK(setup.beam >= 1 && setup.nbest >= 1 && setup.max_len.size() == sentences,
                "decoding needs beam >= 1, nbest >= 1 and a length limit per sentence (%d, %d, %zu of %zu)",
                setup.beam, setup.nbest, setup.max_len.size(), sentences);
    *max_steps = 1;
    for (int n : setup.max_len) {
        MODEL_CHECK(n >= 1, "decoding needs a length limit >= 1 (got %d)", n);
        *max_steps = std::max(*max_steps, n);
    }
    MODEL_CHECK(setup.lp.size() >= (size_t)*max_steps + 1, "decoding needs lp(n) for n <= %d (got %zu values)",
                *max_steps, setup.lp.size());
}

// An ensemble's members, checked: at most as many models as the backends take, each another
// model with the same vocabulary, device and numerics, and no ensemble of its own.
static void check_ensemble(const Model* m) {
    MODEL_CHECK(m->ensemble.size() < (size_t)Backend::kMaxEnsemble, "an ensemble of at most %d models (got %zu)",
                Backend::kMaxEnsemble, m->ensemble.size() + 1);
    for (const Model* e : m->ensemble) {
        MODEL_CHECK(e && e != m && e->ensemble.empty() && e->backend,
                    "an ensemble member must be another loaded model without an ensemble of its own");
        MODEL_CHECK(e->cfg.vocab == m->cfg.vocab, "ensemble members need the same vocabulary (%d words against %d)",
                    e->cfg.vocab, m->cfg.vocab);
        MODEL_CHECK(e->backend->device() == m->backend->device() &&
                        e->backend->floatx_size() == m->backend->floatx_size(),
                    "ensemble members need the same device and precision (%s against %s)",
                    e->backend->describe().c_str(), m->backend->describe().c_str());
    }
}

// One model's start of a batch (model_decode_begin).
static void decode_begin(Model* m, const std::vector<std::vector<int>>& sources,
                         const SearchSetup& setup, bool recompute) {
    MODEL_CHECK(!sources.empty(), "decoding needs sentences");
    int max_steps = 0;
    check_setup(setup, sources.size(), &max_steps);
    const Config& c = m->cfg;
    DecodeState& ds = m->acts->ds;
    ds.recompute = recompute;
    ds.B = (int)sources.size();
    ds.S = 0;
    for (const auto& s : sources) ds.S = std::max(ds.S, (int)s.size());
    ds.R = ds.B * setup.beam;
    ds.max_steps = max_steps;
    ds.kc = setup.beam == 1 ? 1 : 2 * setup.beam;
    ds.cur = 0;
    MODEL_CHECK((size_t)ds.R * max_steps < (size_t)INT32_MAX, "decoding %d rows for %d steps: more cache rows than an int counts",
                ds.R, max_steps);
    MODEL_CHECK(!c.learned_pos || (ds.S <= c.max_len && max_steps <= c.max_len),
                "decoding beyond the learned position table (%d > %d)", std::max(ds.S, max_steps),
                c.max_len);
    std::vector<int> src((size_t)ds.B * ds.S, PAD_ID), len(ds.B);
    for (int b = 0; b < ds.B; b++) {
        MODEL_CHECK(!sources[b].empty(), "decoding an empty source (sentence %d)", b);
        for (int t : sources[b]) MODEL_CHECK(t >= 0 && t < c.vocab, "token id %d outside the vocabulary (%d)", t, c.vocab);
        std::copy(sources[b].begin(), sources[b].end(), src.begin() + (size_t)b * ds.S);
        len[b] = (int)sources[b].size();
    }
    start_search(m, setup);
    if (recompute) {
        ds.sources = sources;
        return;
    }
    Activations* a = m->acts;
    plan_arena(m, [&](Plan p) { return plan_decoding(a, c, p); });
    reserve_cache(m, (size_t)ds.R * std::min(max_steps, first_cache_steps(m)), 0);
    ds.step_row_host.assign(max_steps + 1, 0);
    Backend& ops = *m->backend;
    ops.upload(a->src, src.data(), src.size() * sizeof(int));
    ops.upload(ds.src_len, len.data(), len.size() * sizeof(int));
    a->B = ds.B, a->S = ds.S, a->T = 1;
    a->dec_out = nullptr;   // no forward's decoder output for model_logits
    position_table(m, std::max(ds.S, max_steps));
    Pass ps = make_pass(m, ds.B, ds.S, 1, false);
    encoder_forward(ps);
    for (int l = 0; l < c.n_dec; l++) {   // the cross-attention keys/values, once per sentence
        const LinearP kv = m->layout.dec[l].cross_attn.kv();
        ps.linear(ds.cross_kv[l], a->enc_out, kv, ds.B * ds.S);
        ops.attention_keys_transpose(ds.cross_kt[l], ds.cross_kv[l], ds.B, ds.S, c.n_heads, c.d_k, kv.out);
    }
}

void model_decode_begin(Model* m, const std::vector<std::vector<int>>& sources,
                        const SearchSetup& setup, bool recompute) {
    check_ensemble(m);
    decode_begin(m, sources, setup, recompute);
    for (Model* e : m->ensemble) decode_begin(e, sources, setup, recompute);
}

// The search's history hist[0 .. steps] (steps + 1, 3, R) on the host.
static std::vector<int> search_history(Model* m, int steps) {
    const DecodeState& ds = m->acts->ds;
    std::vector<int> h((size_t)(steps + 1) * 3 * ds.R);
    m->backend->download(h.data(), ds.st.hist, h.size() * sizeof(int));
    return h;
}

// The first t tokens of the hypothesis in row r at step t, from the history (parents back).
static std::vector<int> row_tokens(const std::vector<int>& hist, int R, int t, int r) {
    std::vector<int> tokens(t);
    for (int j = t; j >= 1; j--) {
        const int* h = hist.data() + (size_t)j * 3 * R;
        tokens[j - 1] = h[r];
        r = h[R + r];
    }
    return tokens;
}

// Full-recompute mode (testing): the whole decoder over <s> + the tokens of every row (rebuilt
// from the history of `search`'s search: m's own, or its ensemble's lead), the logits of its
// last position.
static void decode_step_recompute(Model* m, Model* search, int t) {
    DecodeState& ds = m->acts->ds;
    const int n = ds.n, V = m->cfg.vocab, R = ds.R;
    const std::vector<int> hist = search_history(search, t);
    const int* sentence = hist.data() + (size_t)t * 3 * R + 2 * R;
    Batch b;
    b.B = n;
    for (int r = 0; r < n; r++) b.S = std::max(b.S, (int)ds.sources[sentence[r]].size());
    b.T = t + 1;
    b.src.assign((size_t)n * b.S, PAD_ID);
    b.tgt_in.assign((size_t)n * b.T, PAD_ID);
    b.labels.assign((size_t)n * b.T, PAD_ID);
    for (int r = 0; r < n; r++) {
        const std::vector<int>& s = ds.sources[sentence[r]];
        std::copy(s.begin(), s.end(), b.src.begin() + (size_t)r * b.S);
        const std::vector<int> tokens = row_tokens(hist, R, t, r);
        b.tgt_in[(size_t)r * b.T] = BOS_ID;
        std::copy(tokens.begin(), tokens.end(), b.tgt_in.begin() + (size_t)r * b.T + 1);
    }
    forward(m, b, false, (size_t)n * ds.kc);
    Activations* a = m->acts;
    ds.last_logits = (floatX*)((char*)a->logits + (size_t)t * V * m->backend->floatx_size());
    ds.last_ld = b.T * V, ds.cand = a->top;
}

// The cached decoder at position t over the current rows: their token through the embedding,
// every decoder layer over the cache, the final norm, the logits.
static void decode_step_cached(Model* m, int t) {
    Activations* a = m->acts;
    DecodeState& ds = a->ds;
    const Config& c = m->cfg;
    Backend& ops = *m->backend;
    const int n = ds.n;
    ds.slab_row = place_slab(m, t);   // (first: its upload finds the device idle)
    if (t > 0) {   // hypotheses that changed parent take their ancestors' cache rows
        ops.cache_reorder(ds.slots[1 - ds.cur], ds.slots[ds.cur], ds.parent, n, t, ds.max_steps);
        ds.cur = 1 - ds.cur;
    }
    Pass ps = make_pass(m, n, ds.S, 1, false);
    ps.decoding = true;
    ps.t = t;
    ops.embedding_forward(ds.x, ds.token, ps.W(m->layout.embed), position_table(m, t + 1), t, n, 1,
                          c.d_model, 0.0f, 0);
    const floatX* x = ds.x;
    for (int l = 0; l < c.n_dec; l++) {
        decoder_layer_forward(ps, l, &ds.blocks[3 * l], x, n);
        x = ds.blocks[3 * l + 2].y;
    }
    final_norm_forward(ps, m->layout.dec_norm, x, ds.out, ds.mean, ds.rstd, n);
    logits_forward(ps, ds.logits, ds.out, n);
    ds.last_logits = ds.logits, ds.last_ld = c.vocab, ds.cand = ds.top;
}

// The logits of step t over the rows of `search`'s step (m's own search, or its ensemble's lead).
static void decode_step_logits(Model* m, Model* search, int t) {
    DecodeState& ds = m->acts->ds;
    const DecodeState& rows = search->acts->ds;
    const int* h = rows.st.hist + (size_t)t * 3 * rows.R;   // this step's rows, as the search left them
    ds.n = rows.n, ds.token = h, ds.parent = h + rows.R, ds.sentence = h + 2 * (size_t)rows.R;
    if (ds.recompute) decode_step_recompute(m, search, t);
    else decode_step_cached(m, t);
    ds.last_t = t;
}

// An ensemble's step: every member's decoder over m's rows, then m's logits become the log of
// the members' mean probability. The members' backends queue on the one device as m's does (the
// CPU runs each op as it is called; on a GPU every backend launches on the default stream, so
// the mean's kernel starts after the members' last), so no member is waited for.
static void ensemble_step(Model* m, int t) {
    DecodeState& ds = m->acts->ds;
    std::vector<const floatX*> logits{ds.last_logits};
    for (Model* e : m->ensemble) {
        decode_step_logits(e, m, t);
        MODEL_CHECK(e->acts->ds.last_ld == ds.last_ld, "ensemble: a member's logits have row stride %d, not %d",
                    e->acts->ds.last_ld, ds.last_ld);
        logits.push_back(e->acts->ds.last_logits);
    }
    m->backend->logsoftmax_ensemble((floatX*)ds.last_logits, logits.data(), (int)logits.size(), ds.n,
                                    m->cfg.vocab, ds.last_ld);
}

void model_decode_step(Model* m, int t, int banned) {
    DecodeState& ds = m->acts->ds;
    MODEL_CHECK(ds.n >= 1 && ds.n <= ds.R && t == ds.last_t + 1 && t < ds.max_steps,
                "decode step out of order (rows %d of %d, step %d after %d of %d)", ds.n, ds.R, t,
                ds.last_t, ds.max_steps);
    decode_step_logits(m, m, t);
    if (!m->ensemble.empty()) ensemble_step(m, t);
    m->backend->logsoftmax_topk(ds.cand, (float*)(ds.cand + (size_t)ds.n * ds.kc), ds.last_logits, ds.n,
                                m->cfg.vocab, ds.last_ld, ds.kc, banned);
    ds.any_forced = false;
}

// The last decoding step, checked to be there.
static DecodeState& last_step(Model* m, const char* what) {
    DecodeState& ds = m->acts->ds;
    MODEL_CHECK(ds.last_logits && ds.last_t >= 0, "%s needs model_decode_step first", what);
    return ds;
}

std::vector<int> model_decode_row_sentences(Model* m) {
    DecodeState& ds = last_step(m, "model_decode_row_sentences");
    std::vector<int> sentence(ds.n);
    m->backend->download(sentence.data(), ds.sentence, sentence.size() * sizeof(int));
    return sentence;
}

void model_decode_force(Model* m, const std::vector<int>& forced) {
    DecodeState& ds = last_step(m, "model_decode_force");
    const int n = ds.n, V = m->cfg.vocab;
    MODEL_CHECK((int)forced.size() == n, "model_decode_force: %zu tokens for %d rows", forced.size(), n);
    for (int t : forced) MODEL_CHECK(t >= 0 && t < V, "token id %d outside the vocabulary (%d)", t, V);
    Backend& ops = *m->backend;
    ops.upload(ds.forced, forced.data(), (size_t)n * sizeof(int));
    ops.logsoftmax_gather(ds.forced_logp, ds.last_logits, ds.forced, n, V, ds.last_ld);
    ds.any_forced = true;
}

void model_decode_sample(Model* m, const std::vector<float>& uniform, float temperature, int topk, float topp) {
    DecodeState& ds = last_step(m, "model_decode_sample");
    MODEL_CHECK(temperature > 0 && topp > 0 && topp <= 1 && topk >= 0,
                "sampling needs temperature > 0, 0 < topp <= 1, topk >= 0 (%g, %g, %d)", temperature, topp, topk);
    MODEL_CHECK(ds.kc == 1 && (int)uniform.size() == ds.n, "sampling needs beam 1 and a number per row (%zu for %d)",
                uniform.size(), ds.n);
    const int n = ds.n;
    Backend& ops = *m->backend;
    float* logp = (float*)(ds.cand + n);   // the candidates (n, 1): the draw replaces them
    ops.upload(logp, uniform.data(), (size_t)n * sizeof(float));
    ops.logsoftmax_sample(ds.cand, logp, logp, ds.last_logits, n, m->cfg.vocab, ds.last_ld, temperature, topk, topp);
}

// The one transfer of a plain step: the next step's row count.
int model_decode_select(Model* m, int t) {
    DecodeState& ds = last_step(m, "model_decode_select");
    MODEL_CHECK(t == ds.last_t, "model_decode_select for step %d after model_decode_step %d", t, ds.last_t);
    Backend& ops = *m->backend;
    ops.search_select(ds.st, ds.cand, (const float*)(ds.cand + (size_t)ds.n * ds.kc),
                      ds.any_forced ? ds.forced : nullptr, ds.forced_logp, ds.n, t);
    ops.download(&ds.n, ds.st.count, sizeof(int));
    ds.last_logits = nullptr;
    return ds.n;
}

std::vector<std::vector<Hypothesis>> model_decode_results(Model* m) {
    const DecodeState& ds = m->acts->ds;
    const SearchState& st = ds.st;
    Backend& ops = *m->backend;
    const size_t B = ds.B, Bn = B * st.nbest;
    std::vector<int> fin_n(B), step(Bn), row(Bn), token(Bn);
    std::vector<float> score(Bn), logp(Bn);
    ops.download(fin_n.data(), st.fin_n, B * sizeof(int));
    ops.download(step.data(), st.fin_step, Bn * sizeof(int));
    ops.download(row.data(), st.fin_row, Bn * sizeof(int));
    ops.download(token.data(), st.fin_token, Bn * sizeof(int));
    ops.download(score.data(), st.fin_score, Bn * sizeof(float));
    ops.download(logp.data(), st.fin_logp, Bn * sizeof(float));
    int steps = 0;
    for (size_t s = 0; s < B; s++)
        for (int i = 0; i < fin_n[s]; i++) steps = std::max(steps, step[s * st.nbest + i]);
    const std::vector<int> hist = search_history(m, steps);
    std::vector<std::vector<Hypothesis>> out(B);
    for (size_t s = 0; s < B; s++)
        for (int i = 0; i < fin_n[s]; i++) {
            const size_t f = s * st.nbest + i;
            Hypothesis h{row_tokens(hist, ds.R, step[f], row[f]), logp[f], score[f]};
            h.tokens.push_back(token[f]);
            out[s].push_back(std::move(h));
        }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Scoring
// ---------------------------------------------------------------------------------------------
// Each label's log-probability under m alone (model_score).
static void score_labels(Model* m, const Batch& bt, std::vector<float>* logp) {
    const size_t rows = (size_t)bt.B * bt.T;
    // a->top: 2 * rows ints, the first rows of them the log-probabilities
    Pass ps = forward_stacks(m, bt, {false, false, false, classifier_chunk_rows(m, (int)rows), rows});
    Activations* a = m->acts;
    float* out = (float*)a->top;
    for_each_logit_chunk(ps, a->dec_out, (int)rows, [&](int r0, int n) {
        ps.ops.logsoftmax_gather(out + r0, a->logits, a->labels + r0, n, m->cfg.vocab, m->cfg.vocab);
    });
    logp->resize(rows);
    m->backend->download(logp->data(), out, rows * sizeof(float));
    a->ds.last_logits = nullptr;   // the arena was re-planned: no decoding step to refer to
}

void model_score(Model* m, const Batch& bt, std::vector<float>* logp) {
    score_labels(m, bt, logp);
    if (m->ensemble.empty()) return;
    check_ensemble(m);
    // The ensemble: per label, log of the members' mean probability (in double, on the host).
    std::vector<std::vector<float>> member(m->ensemble.size());
    for (size_t k = 0; k < member.size(); k++) score_labels(m->ensemble[k], bt, &member[k]);
    const double log_k = std::log((double)member.size() + 1);
    for (size_t i = 0; i < logp->size(); i++) {
        double mx = (*logp)[i];
        for (const auto& l : member) mx = std::max(mx, (double)l[i]);
        double sum = std::exp((*logp)[i] - mx);
        for (const auto& l : member) sum += std::exp(l[i] - mx);
        (*logp)[i] = mx == -INFINITY ? -INFINITY : (float)(mx + std::log(sum) - log_k);
    }
}

// ---------------------------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------------------------
// Given dF (rows, d), the gradient of the sub-layer's output: accumulates parameter gradients
// and writes d_in = dF/d(in) (d_in_beta 0) or adds it (d_in_beta 1).
static void sublayer_backward(const Pass& ps, Block& b, const AttentionP* attn,
                              const FeedForwardP* ffn, const floatX* in, const floatX* dF,
                              floatX* d_in, float d_in_beta, int rows) {
    Activations* a = ps.a;
    Backend& ops = ps.ops;
    const Config& c = ps.m->cfg;
    const int d = c.d_model, vv = c.n_heads * c.d_v;
    if (b.kind == FFN) {
        const size_t nh = (size_t)rows * c.d_ff;
        ops.linear_backward(a->d_proj, 0.0f, ps.G(ffn->fc2.w), ps.G(ffn->fc2.b), dF, b.h1_drop,
                            ps.W(ffn->fc2.w), rows, c.d_ff, d);
        if (ps.p_relu > 0) ops.dropout_backward(a->d_proj, a->d_proj, nh, ps.p_relu, ps.site_seed(b.site + 2));
        ops.relu_backward(a->d_proj, ps.G(ffn->fc1.b), a->d_proj, b.proj, rows, c.d_ff);   // and fc1's db
        ops.linear_backward(d_in, d_in_beta, ps.G(ffn->fc1.w), nullptr, a->d_proj, in,
                            ps.W(ffn->fc1.w), rows, d, c.d_ff);
        return;
    }
    AttentionShape s = attention_shape(ps, b);
    ops.linear_backward(a->d_ctx, 0.0f, ps.G(attn->out.w), ps.G(attn->out.b), dF, b.ctx,
                        ps.W(attn->out.w), rows, vv, d);
    if (b.kind == SELF_ATTN) {
        LinearP qkv = attn->qkv();
        ops.attention_backward(a->d_proj, a->d_proj, a->d_ctx, b.probs, b.proj, b.proj, s,
                               ps.p_attn, ps.site_seed(b.site + 1));
        ops.linear_backward(d_in, d_in_beta, ps.G(qkv.w), ps.G(qkv.b), a->d_proj, in,
                            ps.W(qkv.w), rows, d, qkv.out);
        return;
    }
    LinearP kvp = attn->kv();
    const int rows_s = ps.B * ps.S;
    ops.attention_backward(a->d_proj, a->d_kv, a->d_ctx, b.probs, b.proj, b.kv, s, ps.p_attn,
                           ps.site_seed(b.site + 1));
    ops.linear_backward(d_in, d_in_beta, ps.G(attn->q.w), ps.G(attn->q.b), a->d_proj, in,
                        ps.W(attn->q.w), rows, d, attn->q.out);
    ops.linear_backward(a->d_enc_out, 1.0f, ps.G(kvp.w), ps.G(kvp.b), a->d_kv, a->enc_out,
                        ps.W(kvp.w), rows_s, d, kvp.out);
}

// dy (rows, d) -> dx (rows, d), the gradient of the block's input.
static void block_backward(const Pass& ps, Block& b, const LayerNormP& ln,
                           const AttentionP* attn, const FeedForwardP* ffn, const floatX* dy,
                           floatX* dx, int rows) {
    Activations* a = ps.a;
    Backend& ops = ps.ops;
    const int d = ps.m->cfg.d_model;
    const size_t n = (size_t)rows * d;
    floatX* dF = a->d_tmp;
    if (!ps.m->cfg.pre_ln) {   // y = LN(r), r = x + Dropout(F(x)): dx = dr, dF = Dropout'(dr)
        ops.residual_layernorm_backward(dx, dF, ps.G(ln.g), ps.G(ln.b), dy, b.r, b.mean, b.rstd,
                                        ps.W(ln.g), rows, d, ps.p_drop, ps.site_seed(b.site));
        sublayer_backward(ps, b, attn, ffn, b.x, dF, dx, 1.0f, rows);
        return;
    }
    // y = x + Dropout(F(n)), n = LN(x)
    ops.copy(dx, dy, n * ops.floatx_size());
    ops.dropout_backward(dF, dy, n, ps.p_drop, ps.site_seed(b.site));
    sublayer_backward(ps, b, attn, ffn, b.n, dF, a->d_tmp2, 0.0f, rows);
    ops.layernorm_backward(dx, 1.0f, ps.G(ln.g), ps.G(ln.b), a->d_tmp2, b.x, b.mean, b.rstd, ps.W(ln.g), rows, d);
}

// Through the final LayerNorm (pre-LN) or a copy (post-LN): d_out -> d_last (rows, d).
static void final_norm_backward(const Pass& ps, const LayerNormP& ln, const floatX* d_out,
                                const floatX* last_x, const float* mean, const float* rstd,
                                floatX* d_last, int rows) {
    const int d = ps.m->cfg.d_model;
    if (ps.m->cfg.pre_ln)
        ps.ops.layernorm_backward(d_last, 0.0f, ps.G(ln.g), ps.G(ln.b), d_out, last_x, mean, rstd, ps.W(ln.g), rows, d);
    else
        ps.ops.copy(d_last, d_out, (size_t)rows * d * ps.ops.floatx_size());
}

// d_dec_out in a->d_a -> gradients of the decoder and of enc_out (a->d_enc_out).
static void decoder_backward(const Pass& ps) {
    Model* m = ps.m;
    Activations* a = ps.a;
    const Config& c = m->cfg;
    const int rows = ps.B * ps.T;
    floatX* dy = a->d_b;
    final_norm_backward(ps, m->layout.dec_norm, a->d_a, a->dec.back().y, a->dec_mean, a->dec_rstd, dy, rows);
    floatX* dx = a->d_a;
    ps.ops.fill_zero(a->d_enc_out, (size_t)ps.B * ps.S * c.d_model * ps.ops.floatx_size());
    for (int l = c.n_dec - 1; l >= 0; l--) {
        const DecoderLayerP& P = m->layout.dec[l];
        Block* blk = &a->dec[3 * l];
        block_backward(ps, blk[2], P.norm3, nullptr, &P.ffn, dy, dx, rows);
        std::swap(dx, dy);
        block_backward(ps, blk[1], P.norm2, &P.cross_attn, nullptr, dy, dx, rows);
        std::swap(dx, dy);
        block_backward(ps, blk[0], P.norm1, &P.self_attn, nullptr, dy, dx, rows);
        std::swap(dx, dy);
    }
    ps.ops.embedding_backward(ps.G(m->layout.embed), c.learned_pos ? ps.G(m->layout.pos_embed) : nullptr,
                              dy, a->tgt_in, ps.B, ps.T, c.d_model, ps.p_drop,
                              ps.site_seed(site_id(1, 255, 3)));
}

// a->d_enc_out -> gradients of the encoder.
static void encoder_backward(const Pass& ps) {
    Model* m = ps.m;
    Activations* a = ps.a;
    const Config& c = m->cfg;
    const int rows = ps.B * ps.S;
    floatX* dy = a->d_b;
    final_norm_backward(ps, m->layout.enc_norm, a->d_enc_out, a->enc.back().y, a->enc_mean, a->enc_rstd, dy, rows);
    floatX* dx = a->d_a;
    for (int l = c.n_enc - 1; l >= 0; l--) {
        const EncoderLayerP& P = m->layout.enc[l];
        block_backward(ps, a->enc[2 * l + 1], P.norm2, nullptr, &P.ffn, dy, dx, rows);
        std::swap(dx, dy);
        block_backward(ps, a->enc[2 * l], P.norm1, &P.self_attn, nullptr, dy, dx, rows);
        std::swap(dx, dy);
    }
    ps.ops.embedding_backward(ps.G(m->layout.embed), c.learned_pos ? ps.G(m->layout.pos_embed) : nullptr,
                              dy, a->src, ps.B, ps.S, c.d_model, ps.p_drop,
                              ps.site_seed(site_id(0, 255, 3)));
}

float model_forward_backward(Model* m, const Batch& bt, double grad_denominator) {
    const double denom = grad_denominator > 0 ? grad_denominator : bt.tgt_tokens;
    Pass ps = forward_stacks(m, bt, {true, true, true, classifier_chunk_rows(m, bt.B * bt.T), 0});
    const double sum = classifier(ps, true, denom > 0 ? (float)(1.0 / denom) : 0.0f);
    decoder_backward(ps);
    encoder_backward(ps);
    return mean_loss(sum, bt);
}

void model_zero_grad(Model* m) {
    m->backend->fill_zero(m->grads, m->layout.total * sizeof(float));
}

void model_release_training(Model* m) {
    Backend& ops = *m->backend;
    for (float** p : {&m->grads, &m->adam_m, &m->adam_v}) {
        ops.release(*p);
        *p = nullptr;
    }
    Activations* a = m->acts;
    for (void** p : {&a->arena, &a->ds.cache_mem, &a->ds.search_mem}) {
        ops.release(*p);
        *p = nullptr;
    }
    a->arena_bytes = a->ds.cache_bytes = a->ds.search_bytes = a->ds.cache_rows = 0;
    a->dec_out = nullptr;                       // model_logits: no forward's output left
    a->ds.last_logits = nullptr, a->ds.last_t = -1;   // nor a decoding step's
}

// ---------------------------------------------------------------------------------------------
// §5.3 Optimizer: Adam with the paper's learning-rate schedule
// ---------------------------------------------------------------------------------------------
double learning_rate(const Config& cfg, int64_t step, double lr_scale, int warmup) {
    double s = step < 1 ? 1.0 : (double)step;
    return lr_scale / std::sqrt((double)cfg.d_model) *
           std::min(1.0 / std::sqrt(s), s * std::pow((double)warmup, -1.5));
}

double grad_norm(const Model* m) { return m->backend->global_norm(m->grads, m->layout.total); }

// §5.3 Optimizer: one Adam step over the whole parameter buffer (optional clipping first).
void adam_update(Model* m, double lr, double clip_norm, const AdamParams& adam) {
    adam_update(m, lr, clip_norm, clip_norm > 0 ? grad_norm(m) : 0.0, adam);
}

void adam_update(Model* m, double lr, double clip_norm, double norm, const AdamParams& adam) {
    Backend& ops = *m->backend;
    const size_t n = m->layout.total;
    if (clip_norm > 0 && norm > clip_norm) ops.scale(m->grads, n, (float)(clip_norm / norm));
    m->step++;
    floatX* copy = (void*)m->weights == (void*)m->params ? nullptr : m->weights;
    ops.adam_step(m->params, m->grads, m->adam_m, m->adam_v, copy, n, (float)lr, adam.beta1, adam.beta2,
                  adam.eps, m->step);
}
