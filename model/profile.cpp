// model/profile.cpp — ProfiledBackend (model/profile.h): each op passed to the backend it
// wraps, then a mark; the report sums the time between marks by op. The work counted per call:
// matrix FLOPs (2 per multiply-add) and the fewest bytes moved, with fx = bytes per floatX.
#include "model/profile.h"

#include <algorithm>

ProfiledBackend::ProfiledBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) { reset(); }

void ProfiledBackend::reset() {
    inner_->synchronize();
    inner_->clear_marks();
    calls_.clear();
    start_mark_ = inner_->time_mark();
}

void ProfiledBackend::clear_marks() { reset(); }

void ProfiledBackend::done(const char* op, double flops, double bytes, std::string shape) {
    calls_.push_back({op, inner_->time_mark(), flops, bytes, std::move(shape)});
}

std::vector<OpProfile> ProfiledBackend::report(bool by_shape) {
    inner_->synchronize();
    std::map<std::string, OpProfile> by_op;
    int from = start_mark_;
    for (const Call& c : calls_) {
        if (by_shape && c.shape.empty()) {
            from = c.mark;
            continue;
        }
        const std::string key = by_shape ? std::string(c.op) + " " + c.shape : c.op;
        OpProfile& p = by_op[key];
        p.op = key;
        p.calls++;
        p.ms += inner_->time_between(from, c.mark);
        p.flops += c.flops;
        p.bytes += c.bytes;
        from = c.mark;
    }
    std::vector<OpProfile> ops;
    for (auto& kv : by_op) ops.push_back(kv.second);
    std::sort(ops.begin(), ops.end(), [](const OpProfile& a, const OpProfile& b) { return a.ms > b.ms; });
    return ops;
}

double forward_matmul_flops(const Config& c, const Batch& b) {
    const double d = c.d_model, qk = (double)c.n_heads * c.d_k, vv = (double)c.n_heads * c.d_v, ff = c.d_ff;
    const double rs = (double)b.B * b.S, rt = (double)b.B * b.T;
    const double enc = rs * (d * (2 * qk + vv) + vv * d + 2 * d * ff) + rs * b.S * (qk + vv);
    const double dec = rt * (d * (2 * qk + vv) + vv * d + b.T * (qk + vv))           // self-attention
                     + rt * (d * qk + vv * d + b.S * (qk + vv)) + rs * d * (qk + vv)  // cross-attention
                     + rt * 2 * d * ff;                                                // FFN
    return 2.0 * (c.n_enc * enc + c.n_dec * dec + rt * d * c.vocab);
}

ProfiledBackend* profile_model(Model* m) {
    auto profiled = std::make_unique<ProfiledBackend>(std::move(m->backend));
    ProfiledBackend* p = profiled.get();
    m->backend = std::move(profiled);
    return p;
}

void profile_print(FILE* out, const std::vector<OpProfile>& ops, int steps, double step_ms, const char* unit) {
    double total = 0, flops = 0;
    for (const OpProfile& p : ops) total += p.ms, flops += p.flops;
    total /= steps;
    const double whole = step_ms > 0 ? step_ms : total;
    std::fprintf(out, "# profile: %.2f ms a %s in the ops below (%d %s%s timed op by op)", total, unit, steps, unit,
                 steps == 1 ? "" : "s");
    if (step_ms > 0) std::fprintf(out, "; %.2f ms a %s unprofiled", step_ms, unit);
    std::fprintf(out, "; matrix work %.3g TFLOP/s over the ops' time\n", total > 0 ? flops / steps / (total * 1e9) : 0.0);
    const std::string per = std::string("ms/") + unit;
    std::fprintf(out, "# profile %-40s %7s %10s %7s %9s %9s\n", "op", "calls", per.c_str(), "share", "TFLOP/s", "GB/s");
    for (const OpProfile& p : ops) {
        const double ms = p.ms / steps;
        char tflops[16] = "-", gbs[16] = "-";
        if (p.flops > 0 && p.ms > 0) std::snprintf(tflops, sizeof tflops, "%.3g", p.flops / (p.ms * 1e9));
        if (p.bytes > 0 && p.ms > 0) std::snprintf(gbs, sizeof gbs, "%.0f", p.bytes / (p.ms * 1e6));
        std::fprintf(out, "# profile %-40s %7ld %10.3f %6.1f%% %9s %9s\n", p.op.c_str(), p.calls / steps, ms,
                     whole > 0 ? 100.0 * ms / whole : 0.0, tflops, gbs);
    }
}

// ---- The device and its memory --------------------------------------------------------------
void ProfiledBackend::upload(void* dst, const void* host_src, size_t bytes) {
    inner_->upload(dst, host_src, bytes);
    done("upload", 0, (double)bytes);
}
void ProfiledBackend::download(void* host_dst, const void* src, size_t bytes) {
    inner_->download(host_dst, src, bytes);
    done("download", 0, (double)bytes);
}
void ProfiledBackend::copy(void* dst, const void* src, size_t bytes) {
    inner_->copy(dst, src, bytes);
    done("copy", 0, 2.0 * bytes);
}
void ProfiledBackend::fill_zero(void* dst, size_t bytes) {
    inner_->fill_zero(dst, bytes);
    done("fill_zero", 0, (double)bytes);
}
void ProfiledBackend::copy_rows(floatX* dst, int ld_dst, const floatX* src, int ld_src, int rows, int cols) {
    inner_->copy_rows(dst, ld_dst, src, ld_src, rows, cols);
    done("copy_rows", 0, 2.0 * rows * cols * fx());
}
void ProfiledBackend::convert_weights(floatX* w, const float* p, size_t n) {
    inner_->convert_weights(w, p, n);
    done("convert_weights", 0, n * (4 + fx()));
}

// ---- §3.4 Embeddings, §3.5 Positional Encoding ----------------------------------------------
void ProfiledBackend::positional_table(floatX* pe, int L, int d) {
    inner_->positional_table(pe, L, d);
    done("positional_table", 0, (double)L * d * fx());
}
void ProfiledBackend::embedding_forward(floatX* x, const int* tokens, const floatX* E, const floatX* pe,
                                        int pos0, int B, int L, int d, float p, uint64_t seed) {
    inner_->embedding_forward(x, tokens, E, pe, pos0, B, L, d, p, seed);
    done("embedding_forward", 0, (double)B * L * (4 + 3.0 * d * fx()));   // E row, pe row, x row
}
void ProfiledBackend::embedding_backward(float* dE, float* dpe, const floatX* dx, const int* tokens, int B,
                                         int L, int d, float p, uint64_t seed) {
    inner_->embedding_backward(dE, dpe, dx, tokens, B, L, d, p, seed);
    done("embedding_backward", 0, (double)B * L * (4 + d * (fx() + 8.0)));   // dx row, dE row read + written
}

// ---- Linear layers ----------------------------------------------------------------------------
// Y (rows, out) = X (rows, in) W^T: X and W read, Y written.
static double product_bytes(int rows, int in, int out, double fx) {
    return ((double)rows * in + (double)out * in + (double)rows * out) * fx;
}
static std::string shape(int rows, int in, int out) {
    return std::to_string(rows) + "x" + std::to_string(in) + "->" + std::to_string(out);
}
void ProfiledBackend::linear_forward(floatX* Y, const floatX* X, const floatX* W, const floatX* b, int rows,
                                     int in, int out) {
    inner_->linear_forward(Y, X, W, b, rows, in, out);
    done("linear_forward", 2.0 * rows * in * out, product_bytes(rows, in, out, fx()), shape(rows, in, out));
}
void ProfiledBackend::linear_backward(floatX* dX, float dX_beta, float* dW, float* db, const floatX* dY,
                                      const floatX* X, const floatX* W, int rows, int in, int out) {
    inner_->linear_backward(dX, dX_beta, dW, db, dY, X, W, rows, in, out);
    const double mac = (double)rows * in * out;
    double bytes = ((double)rows * out + (double)rows * in) * fx() + 8.0 * out * in;   // dY, X; dW read + written
    if (dX) bytes += ((double)out * in + (dX_beta != 0 ? 2.0 : 1.0) * rows * in) * fx();   // W; dX
    done("linear_backward", 2.0 * mac * (dX ? 2 : 1), bytes, shape(rows, in, out) + (dX ? "" : " no dX"));
}
void ProfiledBackend::linear_relu_forward(floatX* Y, const floatX* X, const floatX* W, const floatX* b, int rows,
                                          int in, int out) {
    inner_->linear_relu_forward(Y, X, W, b, rows, in, out);
    done("linear_relu_forward", 2.0 * rows * in * out, product_bytes(rows, in, out, fx()), shape(rows, in, out));
}
void ProfiledBackend::relu_backward(floatX* dx, float* db, const floatX* dy, const floatX* y, int rows, int cols) {
    inner_->relu_backward(dx, db, dy, y, rows, cols);
    done("relu_backward", 0, 3.0 * rows * cols * fx() + (db ? 8.0 * cols : 0.0));
}

// ---- §5.4 Residual Dropout, residual connections, LayerNorm ------------------------------------
void ProfiledBackend::dropout_forward(floatX* y, const floatX* x, size_t n, float p, uint64_t seed) {
    inner_->dropout_forward(y, x, n, p, seed);
    done("dropout_forward", 0, 2.0 * n * fx());
}
void ProfiledBackend::dropout_backward(floatX* dx, const floatX* dy, size_t n, float p, uint64_t seed) {
    inner_->dropout_backward(dx, dy, n, p, seed);
    done("dropout_backward", 0, 2.0 * n * fx());
}
void ProfiledBackend::residual_forward(floatX* y, const floatX* f, const floatX* x, size_t n, float p,
                                       uint64_t seed) {
    inner_->residual_forward(y, f, x, n, p, seed);
    done("residual_forward", 0, 3.0 * n * fx());
}
void ProfiledBackend::layernorm_forward(floatX* y, float* mean, float* rstd, const floatX* x, const floatX* g,
                                        const floatX* b, int rows, int d) {
    inner_->layernorm_forward(y, mean, rstd, x, g, b, rows, d);
    done("layernorm_forward", 0, 2.0 * rows * d * fx() + 8.0 * rows);
}
void ProfiledBackend::layernorm_backward(floatX* dx, float dx_beta, float* dg, float* db, const floatX* dy,
                                         const floatX* x, const float* mean, const float* rstd, const floatX* g,
                                         int rows, int d) {
    inner_->layernorm_backward(dx, dx_beta, dg, db, dy, x, mean, rstd, g, rows, d);
    done("layernorm_backward", 0, (dx_beta != 0 ? 4.0 : 3.0) * rows * d * fx() + 8.0 * rows);
}
void ProfiledBackend::residual_layernorm_forward(floatX* y, floatX* r, float* mean, float* rstd, const floatX* f,
                                                 const floatX* x, const floatX* g, const floatX* b, int rows,
                                                 int d, float p, uint64_t seed) {
    inner_->residual_layernorm_forward(y, r, mean, rstd, f, x, g, b, rows, d, p, seed);
    done("residual_layernorm_forward", 0, 4.0 * rows * d * fx() + 8.0 * rows);   // f, x; r, y
}
void ProfiledBackend::residual_layernorm_backward(floatX* dx, floatX* df, float* dg, float* db,
                                                  const floatX* dy, const floatX* r, const float* mean,
                                                  const float* rstd, const floatX* g, int rows, int d, float p,
                                                  uint64_t seed) {
    inner_->residual_layernorm_backward(dx, df, dg, db, dy, r, mean, rstd, g, rows, d, p, seed);
    done("residual_layernorm_backward", 0, 4.0 * rows * d * fx() + 8.0 * rows);   // dy, r; dx, df
}

// ---- §3.2 Attention ------------------------------------------------------------------------------
// Per (sentence, head): Lq x Lk scores of dk and Lq x Lk weights of dv, with q, k, v read once,
// the context written once and the fp32 probabilities written (forward) or read (backward).
void ProfiledBackend::attention_forward(floatX* ctx, float* probs, const floatX* q, const floatX* kv,
                                        const int* key_tokens, const AttentionShape& s, float p_attn,
                                        uint64_t seed) {
    inner_->attention_forward(ctx, probs, q, kv, key_tokens, s, p_attn, seed);
    const double pairs = (double)s.B * s.H * s.Lq * s.Lk;
    const double io = (double)s.B * s.H * ((double)s.Lq * (s.dk + s.dv) + (double)s.Lk * (s.dk + s.dv)) * fx();
    done("attention_forward", 2.0 * pairs * (s.dk + s.dv), io + 4.0 * pairs);
}
void ProfiledBackend::attention_backward(floatX* dq, floatX* dkv, const floatX* dctx, const float* probs,
                                         const floatX* q, const floatX* kv, const AttentionShape& s, float p_attn,
                                         uint64_t seed) {
    inner_->attention_backward(dq, dkv, dctx, probs, q, kv, s, p_attn, seed);
    const double pairs = (double)s.B * s.H * s.Lq * s.Lk;
    // dP = dctx V^T, dQ = dS K, dK = dS^T Q, dV = P^T dctx; q, dctx, k, v read, dq, dk, dv written
    const double io = 2.0 * s.B * s.H * ((double)s.Lq * (s.dk + s.dv) + (double)s.Lk * (s.dk + s.dv)) * fx();
    done("attention_backward", 4.0 * pairs * (s.dk + s.dv), io + 4.0 * pairs);
}
void ProfiledBackend::attention_step_self(floatX* ctx, const floatX* q, const floatX* cache, const int* step_row,
                                          const int* slots, int ld_slots, int t, const StepShape& s) {
    inner_->attention_step_self(ctx, q, cache, step_row, slots, ld_slots, t, s);
    const double keys = (double)s.n * s.H * (t + 1);
    done("attention_step_self", 2.0 * keys * (s.dk + s.dv),
         keys * (s.dk + s.dv) * fx() + (double)s.n * s.H * (s.dk + s.dv) * fx());
}
void ProfiledBackend::cache_reorder(int* slots_dst, const int* slots_src, const int* parent, int n, int t, int ld) {
    inner_->cache_reorder(slots_dst, slots_src, parent, n, t, ld);
    done("cache_reorder", 0, 8.0 * n * t);
}
void ProfiledBackend::attention_keys_transpose(floatX* kt, const floatX* kv, int B, int S, int H, int dk, int ld) {
    inner_->attention_keys_transpose(kt, kv, B, S, H, dk, ld);
    done("attention_keys_transpose", 0, 2.0 * B * S * H * dk * fx());
}
void ProfiledBackend::attention_step_cross(floatX* ctx, const floatX* q, const floatX* kt, const floatX* kv, int ld,
                                           const int* len, const int* sentence, int S, const StepShape& s) {
    inner_->attention_step_cross(ctx, q, kt, kv, ld, len, sentence, S, s);
    const double keys = (double)s.n * s.H * S;   // at most: each row's sentence length
    done("attention_step_cross", 2.0 * keys * (s.dk + s.dv),
         keys * (s.dk + s.dv) * fx() + (double)s.n * s.H * (s.dk + s.dv) * fx());
}

// ---- §3.4 The loss, and decoding's choices ------------------------------------------------------
void ProfiledBackend::crossentropy_forward(float* lse, double* loss, const floatX* logits, const int* labels,
                                           int rows, int V, float eps) {
    inner_->crossentropy_forward(lse, loss, logits, labels, rows, V, eps);
    done("crossentropy_forward", 0, (double)rows * V * fx() + 8.0 * rows);
}
void ProfiledBackend::crossentropy_backward(floatX* logits, const float* lse, const int* labels, int rows, int V,
                                            float eps, float scale) {
    inner_->crossentropy_backward(logits, lse, labels, rows, V, eps, scale);
    done("crossentropy_backward", 0, 2.0 * rows * V * fx() + 8.0 * rows);
}
void ProfiledBackend::crossentropy_forward_backward(float* lse, double* loss, floatX* logits, const int* labels,
                                                    int rows, int V, float eps, float scale) {
    inner_->crossentropy_forward_backward(lse, loss, logits, labels, rows, V, eps, scale);
    done("crossentropy_forward_backward", 0, 2.0 * rows * V * fx() + 8.0 * rows);   // read once, written once
}
void ProfiledBackend::logsoftmax_topk(int* tokens, float* logp, const floatX* logits, int rows, int V, int ld,
                                      int k, int banned) {
    inner_->logsoftmax_topk(tokens, logp, logits, rows, V, ld, k, banned);
    done("logsoftmax_topk", 0, (double)rows * V * fx() + 8.0 * rows * k);
}
void ProfiledBackend::logsoftmax_gather(float* logp, const floatX* logits, const int* tokens, int rows, int V,
                                        int ld) {
    inner_->logsoftmax_gather(logp, logits, tokens, rows, V, ld);
    done("logsoftmax_gather", 0, (double)rows * V * fx() + 8.0 * rows);
}
void ProfiledBackend::logsoftmax_ensemble(floatX* out, const floatX* const* logits, int K, int rows, int V,
                                          int ld) {
    inner_->logsoftmax_ensemble(out, logits, K, rows, V, ld);
    done("logsoftmax_ensemble", 0, (K + 1.0) * rows * V * fx());   // the K members' logits read, out written
}
void ProfiledBackend::logsoftmax_sample(int* tokens, float* logp, const float* uniform, const floatX* logits,
                                        int rows, int V, int ld, float temperature, int topk, float topp) {
    inner_->logsoftmax_sample(tokens, logp, uniform, logits, rows, V, ld, temperature, topk, topp);
    done("logsoftmax_sample", 0, (double)rows * V * fx() + 12.0 * rows);
}
void ProfiledBackend::search_select(const SearchState& st, const int* cand_token, const float* cand_logp,
                                    const int* forced, const float* forced_logp, int n, int t) {
    inner_->search_select(st, cand_token, cand_logp, forced, forced_logp, n, t);
    done("search_select", 0, 8.0 * n * st.kc);
}

// ---- §5.3 Optimizer ------------------------------------------------------------------------------
double ProfiledBackend::global_norm(const float* g, size_t n) {
    const double norm = inner_->global_norm(g, n);
    done("global_norm", 0, 4.0 * n);
    return norm;
}
void ProfiledBackend::scale(float* x, size_t n, float s) {
    inner_->scale(x, n, s);
    done("scale", 0, 8.0 * n);
}
void ProfiledBackend::add_inplace(float* y, const float* x, size_t n) {
    inner_->add_inplace(y, x, n);
    done("add_inplace", 0, 12.0 * n);
}
void ProfiledBackend::adam_step(float* p, const float* g, float* m, float* v, floatX* w, size_t n, float lr,
                                float beta1, float beta2, float eps, int64_t step) {
    inner_->adam_step(p, g, m, v, w, n, lr, beta1, beta2, eps, step);
    done("adam_step", 0, n * (28.0 + (w ? fx() : 0)));   // p, g, m, v read; p, m, v written; w
}
