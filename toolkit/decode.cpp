// decode.cpp — batched greedy and beam search with an incremental decoder (see decode.h for
// the rules). One decoder step computes, for every alive hypothesis of every sentence in the
// batch (a "row"), the next-token logits from its last token:
//
//   x (n, d) = E[token] * sqrt(d) + PE(t)
//   per layer: self-attention over the row's cached keys/values of steps 0..t,
//              cross-attention over its sentence's encoder keys/values, FFN
//   logits (n, V) = x E^T
//
// The self-attention cache of layer l and step j is a slab (rows at step j, h*dk + h*dv).
// A hypothesis keeps `slots`: the row its ancestor occupied at each earlier step, so a beam
// that survives under another parent reads the right entries without any copy.
#include "toolkit/decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/gemm.h"
#include "tokenizer.h"

int max_output_length(int source_length, const DecodeOptions& opt) {
    int n = (int)(opt.max_len_a * source_length + opt.max_len_b);
    return n < 1 ? 1 : n;
}

static float length_penalty(int n, float alpha) {
    return (float)std::pow((5.0 + n) / 6.0, (double)alpha);
}

namespace {

struct Hyp {
    std::vector<int> tokens;
    float logprob = 0;
    std::vector<int> slots;   // row of this hypothesis' ancestor at each earlier step
};

struct Sentence {
    int max_len = 0;
    std::vector<Hyp> alive;
    std::vector<Hypothesis> finished;   // sorted by score, best first
    bool done = false;
};

// One row of a decoder step: which sentence, which token goes in, which cache slots.
struct Row {
    int sentence;
    int token;
    const std::vector<int>* slots;
};

// Scratch for one step over n rows, kept across steps (it only grows).
struct StepBuffers {
    std::vector<float> x, in, out, proj, ctx, mean, rstd;   // (n, d) ... (n)
    void reserve(int n, const Config& c) {
        const int d = c.d_model, qk = c.n_heads * c.d_k, vv = c.n_heads * c.d_v;
        grow(x, (size_t)n * d);
        grow(in, (size_t)n * d);
        grow(out, (size_t)n * d);
        grow(proj, (size_t)n * std::max(2 * qk + vv, c.d_ff));
        grow(ctx, (size_t)n * vv);
        grow(mean, n);
        grow(rstd, n);
    }
    static void grow(std::vector<float>& v, size_t n) { if (v.size() < n) v.resize(n); }
};

// Everything fixed for the batch, plus the growing self-attention cache.
struct DecoderState {
    Model* m;
    int B = 0, S = 0;
    std::vector<int> src_len;                            // (B) source tokens (incl. </s>)
    std::vector<std::vector<float>> cross_kv;            // [layer] (B*S, h*dk + h*dv)
    std::vector<std::vector<float>> cross_kt;            // [layer] (B, h, dk, S) keys transposed
    std::vector<std::vector<std::vector<float>>> self_kv;   // [layer][step] (rows, h*dk + h*dv)
    std::vector<float> sinusoids;                        // (len, d)
    StepBuffers buf;
};

Batch source_batch(const std::vector<std::vector<int>>& sources) {
    Batch b;
    b.B = (int)sources.size();
    for (const auto& s : sources) b.S = std::max(b.S, (int)s.size());
    b.T = 1;
    b.src.assign((size_t)b.B * b.S, PAD_ID);
    for (int i = 0; i < b.B; i++) std::copy(sources[i].begin(), sources[i].end(), b.src.begin() + (size_t)i * b.S);
    b.tgt_in.assign(b.B, BOS_ID);
    b.labels.assign(b.B, PAD_ID);
    return b;
}

// Keys of kv (B*S, ld; head h's key at column h*dk) as (B, H, dk, S): a query's scores over
// all S keys are then a sum of dk vectors of length S (vectorised over the keys).
std::vector<float> transposed_keys(const std::vector<float>& kv, int B, int S, int H, int dk, int ld) {
    std::vector<float> kt((size_t)B * H * dk * S);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < S; j++)
            for (int h = 0; h < H; h++)
                for (int c = 0; c < dk; c++)
                    kt[(((size_t)b * H + h) * dk + c) * S + j] = kv[((size_t)b * S + j) * ld + h * dk + c];
    return kt;
}

// Runs the encoder and the cross-attention key/value projections once for the batch.
void init_state(DecoderState* st, Model* m, const std::vector<std::vector<int>>& sources) {
    const Config& c = m->cfg;
    Batch b = source_batch(sources);
    st->m = m;
    st->B = b.B;
    st->S = b.S;
    for (const auto& src : sources) st->src_len.push_back((int)src.size());
    std::vector<float> enc_out;
    model_encode(m, b, &enc_out);
    st->cross_kv.assign(c.n_dec, {});
    st->cross_kt.assign(c.n_dec, {});
    for (int l = 0; l < c.n_dec; l++) {
        LinearP kv = m->layout.dec[l].cross_attn.kv();
        st->cross_kv[l].resize((size_t)b.B * b.S * kv.out);
        inference_linear(m, st->cross_kv[l].data(), enc_out.data(), kv, b.B * b.S);
        st->cross_kt[l] = transposed_keys(st->cross_kv[l], b.B, b.S, c.n_heads, c.d_k, kv.out);
    }
    st->self_kv.assign(c.n_dec, {});
}

// Dot product of two vectors of length n (vectorised; the order of the additions is the
// compiler's SIMD order, not left to right).
inline float dot(const float* a, const float* b, int n) {
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

// One query row attends over n keys: ctx (H*dv) = sum_j softmax_j(q.k_j / sqrt(dk)) v_j per
// head, where key(j) / val(j) give head 0's pointer of key j (heads follow at h*dk / h*dv).
// scores: scratch of H*n floats.
template <class KeyFn, class ValFn>
void attend_one(float* ctx, const float* q, int n, int H, int dk, int dv, KeyFn key, ValFn val,
                float* scores) {
    const float scale = 1.0f / std::sqrt((float)dk);
    for (int j = 0; j < n; j++) {   // scores (H, n), key-major so each key is read once
        const float* k = key(j);
        for (int h = 0; h < H; h++) scores[h * n + j] = dot(q + h * dk, k + h * dk, dk) * scale;
    }
    softmax_rows(scores, H, n);
    std::fill(ctx, ctx + (size_t)H * dv, 0.0f);
    for (int j = 0; j < n; j++) {   // ctx += p_j v_j, each value row read once
        const float* v = val(j);
        for (int h = 0; h < H; h++) {
            const float p = scores[h * n + j];
            float* out = ctx + h * dv;
            const float* vh = v + h * dv;
#pragma omp simd
            for (int c = 0; c < dv; c++) out[c] += p * vh[c];
        }
    }
}

// x = LN(x + F(x)) (post-LN) or x = x + F(LN(x)) (pre-LN), F writing (n, d) into buf.out.
template <class Sublayer>
void residual_step(const Model* m, const LayerNormP& ln, StepBuffers& buf, int n, Sublayer F) {
    const int d = m->cfg.d_model;
    const float* g = m->params.data() + ln.g;
    const float* b = m->params.data() + ln.b;
    const size_t nd = (size_t)n * d;
    if (m->cfg.pre_ln) {
        layernorm_forward(buf.in.data(), buf.mean.data(), buf.rstd.data(), buf.x.data(), g, b, n, d);
        F(buf.in.data());
        for (size_t i = 0; i < nd; i++) buf.x[i] += buf.out[i];
    } else {
        F(buf.x.data());
        for (size_t i = 0; i < nd; i++) buf.out[i] += buf.x[i];
        layernorm_forward(buf.x.data(), buf.mean.data(), buf.rstd.data(), buf.out.data(), g, b, n, d);
    }
}

// Self-attention of step t: appends the rows' keys/values to the cache, then attends.
void self_attention_step(DecoderState* st, int l, const std::vector<Row>& rows, int t,
                         const float* in, StepBuffers& buf) {
    Model* m = st->m;
    const Config& c = m->cfg;
    const AttentionP& A = m->layout.dec[l].self_attn;
    const int n = (int)rows.size(), qk = c.n_heads * c.d_k, vv = c.n_heads * c.d_v;
    const LinearP qkv = A.qkv();
    inference_linear(m, buf.proj.data(), in, qkv, n);
    std::vector<float>& slab = st->self_kv[l][t];   // (n, qk + vv)
    slab.resize((size_t)n * (qk + vv));
    for (int r = 0; r < n; r++)
        std::memcpy(&slab[(size_t)r * (qk + vv)], &buf.proj[(size_t)r * qkv.out + qk], (qk + vv) * sizeof(float));
#pragma omp parallel
    {
        std::vector<float> scores((size_t)c.n_heads * (t + 1));
#pragma omp for schedule(static)
        for (int r = 0; r < n; r++) {
            auto entry = [&](int j) {
                int slot = j < t ? (*rows[r].slots)[j] : r;
                return &st->self_kv[l][j][(size_t)slot * (qk + vv)];
            };
            attend_one(&buf.ctx[(size_t)r * vv], &buf.proj[(size_t)r * qkv.out], t + 1, c.n_heads,
                       c.d_k, c.d_v, [&](int j) { return entry(j); },
                       [&](int j) { return entry(j) + qk; }, scores.data());
        }
    }
    inference_linear(m, buf.out.data(), buf.ctx.data(), A.out, n);
}

// Cross-attention of each row over its sentence's encoder keys/values (the source's len
// tokens; the PAD keys after them are left out). Per row and head, vectorised over the keys
// and over the value channels:
//   p (len) = softmax(q K^T / sqrt(dk)) from the transposed keys,   ctx (dv) = sum_j p_j v_j.
void cross_attention_step(DecoderState* st, int l, const std::vector<Row>& rows, const float* in,
                          StepBuffers& buf) {
    Model* m = st->m;
    const Config& c = m->cfg;
    const AttentionP& A = m->layout.dec[l].cross_attn;
    const int n = (int)rows.size(), H = c.n_heads, dk = c.d_k, dv = c.d_v;
    const int qk = H * dk, vv = H * dv, ld = qk + vv, S = st->S;
    inference_linear(m, buf.proj.data(), in, A.q, n);   // q (n, qk)
    const float scale = 1.0f / std::sqrt((float)dk);
#pragma omp parallel
    {
        std::vector<float> p(S);
#pragma omp for schedule(static)
        for (int rh = 0; rh < n * H; rh++) {
            const int r = rh / H, h = rh % H, s = rows[r].sentence, len = st->src_len[s];
            const float* q = &buf.proj[(size_t)r * qk + h * dk];
            const float* kt = &st->cross_kt[l][((size_t)s * H + h) * dk * S];   // (dk, S)
            std::fill(p.begin(), p.begin() + len, 0.0f);
            for (int i = 0; i < dk; i++) {
                const float qi = q[i] * scale;
                const float* k = kt + (size_t)i * S;
#pragma omp simd
                for (int j = 0; j < len; j++) p[j] += qi * k[j];
            }
            softmax_rows(p.data(), 1, len);
            float* out = &buf.ctx[(size_t)r * vv + h * dv];
            std::fill(out, out + dv, 0.0f);
            const float* v = &st->cross_kv[l][(size_t)s * S * ld + qk + h * dv];   // (len, ld)
            for (int j = 0; j < len; j++) {
                const float pj = p[j];
                const float* vj = v + (size_t)j * ld;
#pragma omp simd
                for (int i = 0; i < dv; i++) out[i] += pj * vj[i];
            }
        }
    }
    inference_linear(m, buf.out.data(), buf.ctx.data(), A.out, n);
}

void ffn_step(const Model* m, int l, int n, const float* in, StepBuffers& buf) {
    const Config& c = m->cfg;
    const FeedForwardP& F = m->layout.dec[l].ffn;
    inference_linear(m, buf.proj.data(), in, F.fc1, n);
    relu_forward(buf.proj.data(), buf.proj.data(), (size_t)n * c.d_ff);
    inference_linear(m, buf.out.data(), buf.proj.data(), F.fc2, n);
}

// logits (n, V) for the rows' next tokens at step t (position t), using and growing the cache.
void decoder_step(DecoderState* st, const std::vector<Row>& rows, int t, std::vector<float>* logits) {
    Model* m = st->m;
    const Config& c = m->cfg;
    const int n = (int)rows.size(), d = c.d_model;
    StepBuffers& buf = st->buf;
    buf.reserve(n, c);
    // Embedding of the input tokens at position t.
    const float* pos;
    if (c.learned_pos) {
        pos = m->param(m->layout.pos_embed) + (size_t)t * d;
    } else {
        if ((int)(st->sinusoids.size() / d) <= t) {
            st->sinusoids.resize((size_t)(2 * t + 16) * d);
            sinusoid_table(st->sinusoids.data(), 2 * t + 16, d);
        }
        pos = &st->sinusoids[(size_t)t * d];
    }
    const float emb_scale = std::sqrt((float)d);
    for (int r = 0; r < n; r++) {
        const float* e = m->param(m->layout.embed) + (size_t)rows[r].token * d;
        for (int k = 0; k < d; k++) buf.x[(size_t)r * d + k] = e[k] * emb_scale + pos[k];
    }
    for (int l = 0; l < c.n_dec; l++) {
        if ((int)st->self_kv[l].size() <= t) st->self_kv[l].resize(t + 1);
        const DecoderLayerP& P = m->layout.dec[l];
        residual_step(m, P.norm1, buf, n, [&](const float* in) { self_attention_step(st, l, rows, t, in, buf); });
        residual_step(m, P.norm2, buf, n, [&](const float* in) { cross_attention_step(st, l, rows, in, buf); });
        residual_step(m, P.norm3, buf, n, [&](const float* in) { ffn_step(m, l, n, in, buf); });
    }
    const float* h = buf.x.data();
    if (c.pre_ln) {
        layernorm_forward(buf.in.data(), buf.mean.data(), buf.rstd.data(), buf.x.data(),
                          m->param(m->layout.dec_norm.g), m->param(m->layout.dec_norm.b), n, d);
        h = buf.in.data();
    }
    logits->resize((size_t)n * c.vocab);
    inference_logits(m, logits->data(), h, n);
}

// Testing path: the whole decoder over <s> + prefix for every row (model_forward), last position.
void recompute_step(DecoderState* st, const std::vector<std::vector<int>>& sources,
                    const std::vector<Row>& rows, const std::vector<const Hyp*>& hyps, int t,
                    std::vector<float>* logits) {
    const int n = (int)rows.size(), V = st->m->cfg.vocab;
    std::vector<std::vector<int>> srcs(n);
    for (int r = 0; r < n; r++) srcs[r] = sources[rows[r].sentence];
    Batch b = source_batch(srcs);
    b.T = t + 1;
    b.tgt_in.assign((size_t)n * b.T, PAD_ID);
    b.labels.assign((size_t)n * b.T, PAD_ID);
    for (int r = 0; r < n; r++) {
        b.tgt_in[(size_t)r * b.T] = BOS_ID;
        for (int j = 0; j < t; j++) b.tgt_in[(size_t)r * b.T + j + 1] = hyps[r]->tokens[j];
    }
    model_forward(st->m, b, false);
    const float* all = model_logits(st->m);
    logits->resize((size_t)n * V);
    for (int r = 0; r < n; r++)
        std::memcpy(&(*logits)[(size_t)r * V], all + ((size_t)r * b.T + t) * V, V * sizeof(float));
}

// The k best tokens of a row, best first (ties: lowest id). Blocks of 16 whose maximum cannot
// enter the list are skipped with one vectorised test, so only a few blocks are scanned.
std::vector<int> top_tokens(const float* z, int V, int k) {
    std::vector<int> best;
    for (int w0 = 0; w0 < V; w0 += 16) {
        const int w1 = std::min(V, w0 + 16);
        if ((int)best.size() == k) {
            float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
            for (int w = w0; w < w1; w++) mx = std::max(mx, z[w]);
            if (mx <= z[best.back()]) continue;
        }
        for (int w = w0; w < w1; w++) {
            if ((int)best.size() == k && z[w] <= z[best.back()]) continue;
            auto pos = std::upper_bound(best.begin(), best.end(), w,
                                        [&](int a, int b) { return z[a] > z[b]; });
            best.insert(pos, w);
            if ((int)best.size() > k) best.pop_back();
        }
    }
    return best;
}

void add_finished(Sentence* s, const std::vector<int>& tokens, float logprob, float alpha) {
    Hypothesis h{tokens, logprob, logprob / length_penalty((int)tokens.size(), alpha)};
    auto pos = std::upper_bound(s->finished.begin(), s->finished.end(), h,
                                [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    s->finished.insert(pos, h);   // stable: after equal scores
}

// One beam step for one sentence; `first_row` is the row of its first alive hypothesis.
void beam_select(Sentence* s, const std::vector<float>& logits, const std::vector<float>& lse,
                 int first_row, int V, int t, const DecodeOptions& opt) {
    const int k = opt.beam;
    struct Cand { float score; long key; int i, w; };
    std::vector<Cand> cands;
    for (int i = 0; i < (int)s->alive.size(); i++) {
        const int r = first_row + i;
        const float* z = &logits[(size_t)r * V];
        for (int w : top_tokens(z, V, 2 * k))
            cands.push_back({s->alive[i].logprob + (z[w] - lse[r]), (long)i * V + w, i, w});
    }
    std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
        return a.score != b.score ? a.score > b.score : a.key < b.key;
    });
    if ((int)cands.size() > 2 * k) cands.resize(2 * k);
    std::vector<Hyp> next;
    for (const Cand& cd : cands) {
        const Hyp& parent = s->alive[cd.i];
        std::vector<int> toks = parent.tokens;
        toks.push_back(cd.w);
        if (cd.w == EOS_ID) {
            add_finished(s, toks, cd.score, opt.alpha);
        } else if ((int)next.size() < k) {
            Hyp h{toks, cd.score, parent.slots};
            h.slots.push_back(first_row + cd.i);
            next.push_back(std::move(h));
        }
    }
    if (t == s->max_len - 1) {
        for (const Hyp& h : next) add_finished(s, h.tokens, h.logprob, opt.alpha);
        next.clear();
    }
    s->alive = std::move(next);
    const float bound = s->alive.empty() ? 0 : s->alive[0].logprob / length_penalty(s->max_len, opt.alpha);
    s->done = s->alive.empty() || (!s->finished.empty() && s->finished[0].score >= bound);
}

// Index of the largest of z (n), the lowest index among equal maxima (vectorised max, then
// a scan for its first occurrence).
int argmax(const float* z, int n) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int i = 0; i < n; i++) mx = std::max(mx, z[i]);
    for (int i = 0; i < n; i++)
        if (z[i] == mx) return i;
    return 0;   // all NaN
}

// One greedy step for one sentence (its single alive hypothesis is row r).
void greedy_select(Sentence* s, const std::vector<float>& logits, const std::vector<float>& lse,
                   int r, int V, int t, float alpha) {
    const float* z = &logits[(size_t)r * V];
    const int w = argmax(z, V);
    Hyp& h = s->alive[0];
    h.tokens.push_back(w);
    h.logprob += z[w] - lse[r];
    h.slots.push_back(r);
    if (w == EOS_ID || t == s->max_len - 1) {
        add_finished(s, h.tokens, h.logprob, alpha);
        s->alive.clear();
        s->done = true;
    }
}

}  // namespace

std::vector<std::vector<Hypothesis>> decode_batch(Model* m,
                                                  const std::vector<std::vector<int>>& sources,
                                                  const DecodeOptions& opt) {
    std::vector<std::vector<Hypothesis>> results(sources.size());
    if (sources.empty()) return results;
    DecoderState st;
    init_state(&st, m, sources);
    const int V = m->cfg.vocab;
    std::vector<Sentence> sents(sources.size());
    for (size_t i = 0; i < sources.size(); i++) {
        sents[i].max_len = opt.force_length > 0 ? opt.force_length : max_output_length((int)sources[i].size(), opt);
        sents[i].alive.push_back(Hyp{});
    }
    std::vector<float> logits;
    for (int t = 0;; t++) {
        std::vector<Row> rows;
        std::vector<const Hyp*> hyps;
        std::vector<int> first_row(sents.size(), -1);
        for (size_t i = 0; i < sents.size(); i++) {
            if (sents[i].done) continue;
            first_row[i] = (int)rows.size();
            for (const Hyp& h : sents[i].alive) {
                rows.push_back({(int)i, h.tokens.empty() ? BOS_ID : h.tokens.back(), &h.slots});
                hyps.push_back(&h);
            }
        }
        if (rows.empty()) break;
        if (opt.recompute) recompute_step(&st, sources, rows, hyps, t, &logits);
        else decoder_step(&st, rows, t, &logits);
        if (opt.force_length > 0)
            for (size_t r = 0; r < rows.size(); r++) logits[r * V + EOS_ID] = -INFINITY;
        std::vector<float> lse(rows.size());
        logsumexp_rows(lse.data(), logits.data(), (int)rows.size(), V);
        // Each sentence selects from its own rows only: in parallel, deterministic.
#pragma omp parallel for schedule(dynamic, 8)
        for (size_t i = 0; i < sents.size(); i++) {
            if (first_row[i] < 0) continue;
            if (opt.beam <= 1) greedy_select(&sents[i], logits, lse, first_row[i], V, t, opt.alpha);
            else beam_select(&sents[i], logits, lse, first_row[i], V, t, opt);
        }
    }
    for (size_t i = 0; i < sents.size(); i++) {
        std::vector<Hypothesis>& f = sents[i].finished;
        if ((int)f.size() > std::max(1, opt.nbest)) f.resize(std::max(1, opt.nbest));
        results[i] = f;
    }
    return results;
}

std::vector<std::vector<Hypothesis>> decode_sorted(Model* m,
                                                   const std::vector<std::vector<int>>& sources,
                                                   const DecodeOptions& opt, int batch_tokens) {
    std::vector<std::vector<Hypothesis>> results(sources.size());
    std::vector<size_t> order;
    for (size_t i = 0; i < sources.size(); i++) {
        if (sources[i].empty()) results[i] = {Hypothesis{}};
        else order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
    for (size_t begin = 0; begin < order.size();) {
        // Longest first within the batch is the last one (sorted): B * S <= batch_tokens.
        size_t end = begin + 1;
        while (end < order.size() &&
               (end + 1 - begin) * sources[order[end]].size() <= (size_t)std::max(batch_tokens, 1))
            end++;
        std::vector<std::vector<int>> batch;
        for (size_t i = begin; i < end; i++) batch.push_back(sources[order[i]]);
        std::vector<std::vector<Hypothesis>> out = decode_batch(m, batch, opt);
        for (size_t i = begin; i < end; i++) results[order[i]] = std::move(out[i - begin]);
        begin = end;
    }
    return results;
}

std::vector<std::string> translate_lines(Model* m, const Tokenizer& tok,
                                         const std::vector<std::string>& lines,
                                         const DecodeOptions& opt, int batch_tokens) {
    std::vector<std::vector<int>> sources = tok.encode_lines(lines);
    for (size_t i = 0; i < lines.size(); i++)
        if (!sources[i].empty()) sources[i].push_back(EOS_ID);
    std::vector<std::vector<Hypothesis>> hyps = decode_sorted(m, sources, opt, batch_tokens);
    std::vector<std::string> out(lines.size());
    for (size_t i = 0; i < lines.size(); i++) out[i] = tok.decode(hyps[i][0].tokens);
    return out;
}
