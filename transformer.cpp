// ops_cpu.cpp — every layer of the Transformer on the CPU: forward and backward side by side.
//
// This is the reference backend: plain C++17 loops, OpenMP across rows (or across
// (sentence, head) pairs in attention), and the project's own GEMM (gemm.cpp) for every
// matrix product. The CUDA kernels in transformer.cu carry the same names and arguments.
// Backward functions ACCUMULATE into parameter gradients (dW, db, dg, dE) and, unless a
// beta argument says otherwise, overwrite activation gradients.
//
// Order: dropout, embedding + positional encoding, linear, ReLU, LayerNorm, attention,
// label-smoothed cross-entropy, Adam.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/gemm.h"
#include "transformer.h"

#ifdef _OPENMP
#include <omp.h>
static int max_threads() { return omp_get_max_threads(); }
static int thread_id() { return omp_get_thread_num(); }
#else
static int max_threads() { return 1; }
static int thread_id() { return 0; }
#endif

// exp(x), vectorisable (no branches, no libm call, so GCC turns loops of it into AVX-512):
// Cephes' expf polynomial on x - n ln 2, times 2^n built from the exponent bits. Relative
// error about 2e-7 (1-2 ulp). Inputs are clamped to [-87, 88]: below, the result is a tiny
// positive value, so callers zero masked entries themselves, never through exp(-inf).
static inline float exp_fast(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float round_magic = 12582912.0f;   // 1.5 * 2^23: adding it rounds to an integer
    float n = (x * 1.44269504088896341f + round_magic) - round_magic;   // round(x / ln 2)
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;   // x - n ln 2, two-part constant
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;   // 2^n
    return p * __builtin_bit_cast(float, bits);
}

// ============================================================================================
// Dropout: a counter-based generator (splitmix64 of seed and index), no state to carry.
// ============================================================================================
static inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t dropout_site_seed(uint64_t seed, int64_t step, uint32_t site) {
    return splitmix64(splitmix64(seed) ^ splitmix64(((uint64_t)step << 20) ^ site));
}

// Keep with probability 1 - p: compares 24 random bits with p * 2^24.
bool dropout_keep(uint64_t site_seed, size_t i, float p) {
    uint32_t r = (uint32_t)(splitmix64(site_seed + i * 0xD1B54A32D192ED03ull) >> 40);
    return r >= (uint32_t)(p * 16777216.0f);
}

// y (n) = x * keep / (1 - p).
void dropout_forward(float* y, const float* x, size_t n, float p, uint64_t site_seed) {
    if (p <= 0.0f) {
        if (y != x) std::memcpy(y, x, n * sizeof(float));
        return;
    }
    const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = dropout_keep(site_seed, i, p) ? x[i] * scale : 0.0f;
}

// dx (n) = dy * keep / (1 - p), the forward's mask recomputed.
void dropout_backward(float* dx, const float* dy, size_t n, float p, uint64_t site_seed) {
    dropout_forward(dx, dy, n, p, site_seed);
}

// ============================================================================================
// Embedding * sqrt(d_model) + positional encoding, then dropout.
// ============================================================================================
void sinusoid_table(float* pe, int L, int d) {
    for (int pos = 0; pos < L; pos++)
        for (int i = 0; i + 1 < d + 1; i += 2) {
            double angle = pos / std::pow(10000.0, (double)i / d);
            pe[(size_t)pos * d + i] = (float)std::sin(angle);
            if (i + 1 < d) pe[(size_t)pos * d + i + 1] = (float)std::cos(angle);
        }
}

// x (B, L, d) = dropout(E[tokens] * sqrt(d) + pos_table[position]); pos_table (L, d).
void embedding_forward(float* x, const int* tokens, const float* E, const float* pos_table,
                       int B, int L, int d, float p, uint64_t site_seed) {
    const float emb_scale = std::sqrt((float)d);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < B * L; r++) {
        const float* e = E + (size_t)tokens[r] * d;   // (d)
        const float* pe = pos_table + (size_t)(r % L) * d;
        float* out = x + (size_t)r * d;
        for (int c = 0; c < d; c++) out[c] = e[c] * emb_scale + pe[c];
    }
    dropout_forward(x, x, (size_t)B * L * d, p, site_seed);
}

// dE[tokens] += sqrt(d) * dropout'(dx); dpos[position] += dropout'(dx) (learned PE only).
// Serial over rows: rows that share a token add into the same row of dE.
void embedding_backward(float* dE, float* dpos, const float* dx, const int* tokens,
                        int B, int L, int d, float p, uint64_t site_seed) {
    const float emb_scale = std::sqrt((float)d);
    const float keep_scale = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
    for (int r = 0; r < B * L; r++) {
        float* de = dE + (size_t)tokens[r] * d;
        float* dp = dpos ? dpos + (size_t)(r % L) * d : nullptr;
        const float* g = dx + (size_t)r * d;
        for (int c = 0; c < d; c++) {
            size_t i = (size_t)r * d + c;
            float gi = (p <= 0 || dropout_keep(site_seed, i, p)) ? g[c] * keep_scale : 0.0f;
            de[c] += gi * emb_scale;
            if (dp) dp[c] += gi;
        }
    }
}

// ============================================================================================
// Linear: Y = X W^T + b with W [out, in], as nn.Linear.
// ============================================================================================
// Y (rows, out) = X (rows, in) W^T + b.
void linear_forward(float* Y, const float* X, const float* W, const float* b,
                    int rows, int in, int out) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) std::memcpy(Y + (size_t)r * out, b, out * sizeof(float));
    sgemm(false, true, rows, out, in, 1.0f, X, in, W, in, 1.0f, Y, out);
}

// Inside a parallel region: the columns [c0, c1) of `cols` this thread owns; false if none.
// Reductions over rows split by columns need no combining step, so they are deterministic.
static bool owned_columns(int cols, int* c0, int* c1) {
    const int nt = max_threads() > cols ? 1 : max_threads(), t = thread_id();
    if (t >= nt) return false;
    *c0 = (int)((long)cols * t / nt);
    *c1 = (int)((long)cols * (t + 1) / nt);
    return true;
}

// db (cols) += sum over rows of dY (rows, cols).
static void column_sum_accumulate(float* db, const float* dY, int rows, int cols) {
#pragma omp parallel
    {
        int c0, c1;
        if (owned_columns(cols, &c0, &c1)) {
            for (int r = 0; r < rows; r++) {
                const float* row = dY + (size_t)r * cols;
                for (int c = c0; c < c1; c++) db[c] += row[c];
            }
        }
    }
}

// dX (rows, in) = dY W + dX_beta * dX; dW (out, in) += dY^T X; db (out) += sum_rows dY.
void linear_backward(float* dX, float dX_beta, float* dW, float* db, const float* dY,
                     const float* X, const float* W, int rows, int in, int out) {
    if (dX) sgemm(false, false, rows, in, out, 1.0f, dY, out, W, in, dX_beta, dX, in);
    sgemm(true, false, out, in, rows, 1.0f, dY, out, X, in, 1.0f, dW, in);
    column_sum_accumulate(db, dY, rows, out);
}

// ============================================================================================
// ReLU
// ============================================================================================
void relu_forward(float* y, const float* x, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// dx = dy where the forward output was positive.
void relu_backward(float* dx, const float* dy, const float* y, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// ============================================================================================
// LayerNorm over the last dimension, eps 1e-5, biased variance (nn.LayerNorm).
// ============================================================================================
static const float LN_EPS = 1e-5f;

// y (rows, d) = (x - mean) * rstd * g + b; mean, rstd (rows) saved for backward.
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* g,
                       const float* b, int rows, int d) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float* xr = x + (size_t)r * d;
        float sum = 0.0f;
        for (int c = 0; c < d; c++) sum += xr[c];
        float mu = sum / d;
        float sq = 0.0f;
        for (int c = 0; c < d; c++) sq += (xr[c] - mu) * (xr[c] - mu);
        float rs = 1.0f / std::sqrt(sq / d + LN_EPS);
        float* yr = y + (size_t)r * d;
        for (int c = 0; c < d; c++) yr[c] = (xr[c] - mu) * rs * g[c] + b[c];
        mean[r] = mu;
        rstd[r] = rs;
    }
}

// With xhat = (x - mean) * rstd and dxhat = dy * g:
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dg += sum dy * xhat,
//   db += sum dy.   dx is overwritten (dx_beta 0) or accumulated into (dx_beta 1).
void layernorm_backward(float* dx, float dx_beta, float* dg, float* db, const float* dy,
                        const float* x, const float* mean, const float* rstd, const float* g,
                        int rows, int d) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float* xr = x + (size_t)r * d;
        const float* dyr = dy + (size_t)r * d;
        float mu = mean[r], rs = rstd[r];
        float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
        for (int c = 0; c < d; c++) {
            float dxhat = dyr[c] * g[c];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * (xr[c] - mu) * rs;
        }
        float m1 = sum_dxhat / d, m2 = sum_dxhat_xhat / d;
        float* dxr = dx + (size_t)r * d;
        for (int c = 0; c < d; c++) {
            float xhat = (xr[c] - mu) * rs;
            float v = rs * (dyr[c] * g[c] - m1 - xhat * m2);
            dxr[c] = dx_beta == 0.0f ? v : dxr[c] + v;
        }
    }
    // Parameter gradients: threads own column ranges, so the sums are deterministic.
#pragma omp parallel
    {
        int c0, c1;
        if (owned_columns(d, &c0, &c1)) {
            for (int r = 0; r < rows; r++) {
                const float* xr = x + (size_t)r * d;
                const float* dyr = dy + (size_t)r * d;
                for (int c = c0; c < c1; c++) {
                    dg[c] += dyr[c] * (xr[c] - mean[r]) * rstd[r];
                    db[c] += dyr[c];
                }
            }
        }
    }
}

// ============================================================================================
// Multi-head scaled dot-product attention. One (sentence, head) pair per task; the products
// are small GEMMs on strided views of the projection outputs (no copies, no transposes).
// ============================================================================================
size_t attention_scratch_floats(int Lq, int Lk) {
    return (size_t)max_threads() * 2 * Lq * Lk;
}

static bool key_allowed(const int* key_tokens, int i, int j, bool causal) {
    return key_tokens[j] != PAD_ID && !(causal && j > i);
}

// scores (Lq, Lk) -> softmax over allowed keys, in place; disallowed entries become 0.
static void masked_softmax_rows(float* scores, const int* key_tokens, int Lq, int Lk,
                                bool causal) {
    for (int i = 0; i < Lq; i++) {
        float* row = scores + (size_t)i * Lk;
        float mx = -INFINITY;
        for (int j = 0; j < Lk; j++)
            if (key_allowed(key_tokens, i, j, causal)) mx = std::max(mx, row[j]);
        float sum = 0.0f;
        for (int j = 0; j < Lk; j++) {
            float e = key_allowed(key_tokens, i, j, causal) ? exp_fast(row[j] - mx) : 0.0f;
            row[j] = e;
            sum += e;
        }
        float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (int j = 0; j < Lk; j++) row[j] *= inv;
    }
}

// Pointers to one (sentence b, head h) slice of q, k, v, ctx, probs.
struct HeadViews {
    const float *q, *k, *v;
    size_t ctx_off, probs_off, q_off, k_off, v_off;
};
static HeadViews head_views(const float* q, const float* kv, const AttentionShape& s, int b,
                            int h) {
    HeadViews hv;
    hv.q_off = (size_t)b * s.Lq * s.q_stride + s.q_col + (size_t)h * s.dk;
    hv.k_off = (size_t)b * s.Lk * s.kv_stride + s.k_col + (size_t)h * s.dk;
    hv.v_off = (size_t)b * s.Lk * s.kv_stride + s.v_col + (size_t)h * s.dv;
    hv.q = q + hv.q_off;
    hv.k = kv + hv.k_off;
    hv.v = kv + hv.v_off;
    hv.ctx_off = (size_t)b * s.Lq * s.H * s.dv + (size_t)h * s.dv;
    hv.probs_off = ((size_t)b * s.H + h) * s.Lq * s.Lk;
    return hv;
}

// ctx (B, Lq, H*dv) = dropout(softmax(mask(Q K^T / sqrt(dk)))) V; probs (B, H, Lq, Lk) saved.
void attention_forward(float* ctx, float* probs, const float* q, const float* kv,
                       const int* key_tokens, const AttentionShape& s, float p_attn,
                       uint64_t site_seed, float* scratch) {
    const float scale = 1.0f / std::sqrt((float)s.dk);
    const size_t LL = (size_t)s.Lq * s.Lk;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.H; h++) {
            HeadViews hv = head_views(q, kv, s, b, h);
            float* P = probs + hv.probs_off;   // (Lq, Lk)
            sgemm(false, true, s.Lq, s.Lk, s.dk, scale, hv.q, s.q_stride, hv.k, s.kv_stride,
                  0.0f, P, s.Lk);
            masked_softmax_rows(P, key_tokens + (size_t)b * s.Lk, s.Lq, s.Lk, s.causal);
            const float* Pd = P;
            if (p_attn > 0.0f) {
                float* buf = scratch + (size_t)thread_id() * 2 * LL;
                for (size_t i = 0; i < LL; i++)
                    buf[i] = dropout_keep(site_seed, hv.probs_off + i, p_attn)
                                 ? P[i] / (1.0f - p_attn) : 0.0f;
                Pd = buf;
            }
            sgemm(false, false, s.Lq, s.dv, s.Lk, 1.0f, Pd, s.Lk, hv.v, s.kv_stride, 0.0f,
                  ctx + hv.ctx_off, s.H * s.dv);
        }
}

// Given dctx: dPd = dctx V^T, dV = Pd^T dctx, dP = dropout'(dPd),
// dS = P * (dP - rowsum(P * dP)) / sqrt(dk), dQ = dS K, dK = dS^T Q.
void attention_backward(float* dq, float* dkv, const float* dctx, const float* probs,
                        const float* q, const float* kv, const AttentionShape& s, float p_attn,
                        uint64_t site_seed, float* scratch) {
    const float scale = 1.0f / std::sqrt((float)s.dk);
    const size_t LL = (size_t)s.Lq * s.Lk;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.H; h++) {
            HeadViews hv = head_views(q, kv, s, b, h);
            const float* P = probs + hv.probs_off;
            float* dP = scratch + (size_t)thread_id() * 2 * LL;   // (Lq, Lk)
            float* Pd_buf = dP + LL;
            const float* dctx_h = dctx + hv.ctx_off;
            const int ctx_stride = s.H * s.dv;
            const float* Pd = P;
            if (p_attn > 0.0f) {
                for (size_t i = 0; i < LL; i++)
                    Pd_buf[i] = dropout_keep(site_seed, hv.probs_off + i, p_attn)
                                    ? P[i] / (1.0f - p_attn) : 0.0f;
                Pd = Pd_buf;
            }
            sgemm(false, true, s.Lq, s.Lk, s.dv, 1.0f, dctx_h, ctx_stride, hv.v, s.kv_stride,
                  0.0f, dP, s.Lk);
            sgemm(true, false, s.Lk, s.dv, s.Lq, 1.0f, Pd, s.Lk, dctx_h, ctx_stride, 0.0f,
                  dkv + hv.v_off, s.kv_stride);
            for (int i = 0; i < s.Lq; i++) {
                float* dpr = dP + (size_t)i * s.Lk;
                const float* pr = P + (size_t)i * s.Lk;
                if (p_attn > 0.0f)
                    for (int j = 0; j < s.Lk; j++)
                        dpr[j] = dropout_keep(site_seed, hv.probs_off + (size_t)i * s.Lk + j,
                                              p_attn) ? dpr[j] / (1.0f - p_attn) : 0.0f;
                float dot = 0.0f;
                for (int j = 0; j < s.Lk; j++) dot += pr[j] * dpr[j];
                for (int j = 0; j < s.Lk; j++) dpr[j] = pr[j] * (dpr[j] - dot) * scale;
            }
            sgemm(false, false, s.Lq, s.dk, s.Lk, 1.0f, dP, s.Lk, hv.k, s.kv_stride, 0.0f,
                  dq + hv.q_off, s.q_stride);
            sgemm(true, false, s.Lk, s.dk, s.Lq, 1.0f, dP, s.Lk, hv.q, s.q_stride, 0.0f,
                  dkv + hv.k_off, s.kv_stride);
        }
}

// ============================================================================================
// Label-smoothed cross-entropy (PyTorch's CrossEntropyLoss(label_smoothing=eps,
// ignore_index=PAD)): per row, loss = lse - (1 - eps) z_y - (eps / V) sum_k z_k.
// ============================================================================================
double crossentropy_forward(float* lse, const float* logits, const int* labels, int rows, int V,
                            float eps) {
    std::vector<double> row_loss(rows, 0.0);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        if (labels[r] == PAD_ID) { lse[r] = 0.0f; continue; }
        const float* z = logits + (size_t)r * V;   // (V)
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int k = 0; k < V; k++) mx = z[k] > mx ? z[k] : mx;
        float sum = 0.0f, sum_z = 0.0f;
#pragma omp simd reduction(+ : sum, sum_z)
        for (int k = 0; k < V; k++) {
            sum += exp_fast(z[k] - mx);
            sum_z += z[k];
        }
        double l = (double)mx + std::log((double)sum);
        lse[r] = (float)l;
        row_loss[r] = l - (1.0 - eps) * z[labels[r]] - (double)eps / V * sum_z;
    }
    double total = 0.0;
    for (int r = 0; r < rows; r++) total += row_loss[r];
    return total;
}

// lse (rows) = log(sum_k exp(x_k)) of each row of x (rows, V): the log-softmax normaliser.
void logsumexp_rows(float* lse, const float* x, int rows, int V) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float* z = x + (size_t)r * V;
        float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
        for (int k = 0; k < V; k++) mx = z[k] > mx ? z[k] : mx;
#pragma omp simd reduction(+ : sum)
        for (int k = 0; k < V; k++) sum += exp_fast(z[k] - mx);
        lse[r] = mx + std::log(sum);
    }
}

// x (rows, n) -> softmax of each row, in place (serial: callers run it per thread).
void softmax_rows(float* x, int rows, int n) {
    for (int r = 0; r < rows; r++) {
        float* z = x + (size_t)r * n;
        float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
        for (int k = 0; k < n; k++) mx = z[k] > mx ? z[k] : mx;
#pragma omp simd reduction(+ : sum)
        for (int k = 0; k < n; k++) {
            z[k] = exp_fast(z[k] - mx);
            sum += z[k];
        }
        const float inv = 1.0f / sum;
#pragma omp simd
        for (int k = 0; k < n; k++) z[k] *= inv;
    }
}

// logits (rows, V) -> (softmax - q) * scale in place; PAD rows -> 0.
void crossentropy_backward(float* logits, const float* lse, const int* labels, int rows, int V,
                           float eps, float scale) {
    const float off = eps / V;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        float* z = logits + (size_t)r * V;
        if (labels[r] == PAD_ID) { std::memset(z, 0, (size_t)V * sizeof(float)); continue; }
        const float l = lse[r];
#pragma omp simd
        for (int k = 0; k < V; k++) z[k] = (exp_fast(z[k] - l) - off) * scale;
        z[labels[r]] -= (1.0f - eps) * scale;
    }
}

// ============================================================================================
// Adam, PyTorch's formulation: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// ============================================================================================
void adam_step(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
               float beta2, float eps, int64_t step) {
    const float step_size = (float)(lr / (1.0 - std::pow((double)beta1, (double)step)));
    const float bc2_sqrt = (float)std::sqrt(1.0 - std::pow((double)beta2, (double)step));
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
        v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
    }
}
