// test/test_core.cpp — the C++ model against the independent PyTorch reference (test/ref/*,
// written by test/reference.py), plus what PyTorch cannot check for us: finite-difference
// gradients, dropout, checkpoint round trips and the checkpoint reader's refusals.
//
//   make test            (or: build/test_core [REF_DIR], run from the repository root)
// Every comparison prints max abs / rel error against its tolerance; exit status 1 on any
// failure; the last line is "core: N passed, M failed".
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "test/check.h"
#include "test/model_buffers.h"
#include "test/profile_check.h"
#include "model/checkpoint.h"
#include "test/ref_case.h"
#include "toolkit/numbers.h"
#include "transformer.h"

// fp32 tolerances, relative to the reference tensor's largest magnitude.
static const double TOL_LOGITS = 2e-5;
static const double TOL_GRAD = 1e-4;
static const double TOL_STEPS = 1e-4;    // parameters after 10 Adam steps

static std::string g_ref_dir = "test/ref";
static std::string g_tmp_dir;

// ---------------------------------------------------------------------------------------------
// Reference cases
// ---------------------------------------------------------------------------------------------
// Loads a reference case into a model and batch; false (and a FAIL line) when it cannot.
static bool load_case(const std::string& name, Model* m, Batch* batch, RefCase* rc,
                      SafeTensorsFile* f) {
    std::string err, path = g_ref_dir + "/" + name + ".safetensors";
    if (!check(f->open(path, &err), "%s: open reference (%s)", name.c_str(), err.c_str()))
        return false;
    if (!check(parse_case_config(f->metadata["config"], rc), "%s: parse config", name.c_str()))
        return false;
    model_init(m, rc->cfg, 1);
    std::vector<float> params(m->layout.total);
    if (!check(read_parameters(*f, m->layout, "param.", params.data(), &err),
               "%s: read parameters (%s)", name.c_str(), err.c_str()))
        return false;
    model_set_params(m, params.data());
    return check(read_batch(*f, batch), "%s: read batch", name.c_str());
}

// The key projection's bias adds q.b_k to every score of a query's row, and softmax ignores a
// constant shift: its exact gradient is 0, and both implementations hold only rounding noise
// (~1e-9). Adam normalises that noise to full-size steps in arbitrary directions, so its values
// after training are not comparable (the losses of every step still are, and must match).
static bool is_key_bias(const std::string& name) {
    return name.size() > 12 && name.compare(name.size() - 12, 12, ".k_proj.bias") == 0;
}

static void compare_case(const std::string& name) {
    Model m;
    Batch batch;
    RefCase rc;
    SafeTensorsFile f;
    if (!load_case(name, &m, &batch, &rc, &f)) return;
    std::printf("-- case %s: B=%d S=%d T=%d, %zu parameters\n", name.c_str(), batch.B, batch.S,
                batch.T, m.layout.total);
    const std::string p = name + ": ";
    model_zero_grad(&m);
    float loss = model_forward_backward(&m, batch);
    std::vector<float> want_logits = read_f32(f, "out.logits");
    std::vector<float> want_loss = read_f32(f, "out.loss");
    std::vector<float> logits;
    model_logits(&m, &logits);
    check(logits.size() == want_logits.size(), "%slogits: %zu values, the reference %zu", p.c_str(),
          logits.size(), want_logits.size());
    check_close((p + "logits").c_str(), logits.data(), want_logits.data(), std::min(logits.size(), want_logits.size()), TOL_LOGITS);
    check_close((p + "loss").c_str(), &loss, want_loss.data(), 1, TOL_LOGITS);
    const std::vector<float> grads = host_grads(m);
    size_t ref_grads = 0;   // every gradient of the reference must be one of the model's
    for (const TensorEntry& e : f.tensors) ref_grads += e.name.compare(0, 5, "grad.") == 0;
    check(ref_grads == m.layout.tensors.size(), "%sthe reference has %zu gradients, the model %zu tensors",
          p.c_str(), ref_grads, m.layout.tensors.size());
    for (const TensorInfo& t : m.layout.tensors) {
        std::vector<float> want = read_f32(f, "grad." + t.name);
        if (want.size() != t.numel) {   // read_f32 has already failed a missing tensor
            check(false, "%sgrad %s: the reference has %zu values, the model %zu", p.c_str(), t.name.c_str(),
                  want.size(), t.numel);
            continue;
        }
        if (is_key_bias(t.name)) {   // exact gradient 0: both sides must be rounding noise
            double ours = 0, ref = 0;
            for (size_t i = 0; i < t.numel; i++) {
                ours = std::max(ours, (double)std::fabs(grads[t.offset + i]));
                ref = std::max(ref, (double)std::fabs(want[i]));
            }
            check(ours < 1e-6 && ref < 1e-6, "%sgrad %s is zero: max|ours| %.1e max|ref| %.1e < 1e-6",
                  p.c_str(), t.name.c_str(), ours, ref);
            continue;
        }
        check_close((p + "grad " + t.name).c_str(), grads.data() + t.offset, want.data(), t.numel, TOL_GRAD);
    }
    // 10 Adam steps on the same batch; the loss of each step's forward is compared.
    std::vector<float> want_losses = read_f32(f, "train.losses");
    std::vector<float> losses;
    for (int s = 1; s <= (int)want_losses.size(); s++) {
        model_zero_grad(&m);
        losses.push_back(model_forward_backward(&m, batch));
        adam_update(&m, learning_rate(m.cfg, m.step + 1, rc.lr_scale, rc.warmup));
    }
    check_close((p + "losses of 10 Adam steps").c_str(), losses.data(), want_losses.data(), losses.size(), TOL_STEPS);
    std::vector<float> want_final(m.layout.total);
    std::string err;
    if (!check(read_parameters(f, m.layout, "final.", want_final.data(), &err), "%sread final parameters", p.c_str()))
        return;
    const std::vector<float> final_params = host_params(m);
    for (const TensorInfo& t : m.layout.tensors) {
        if (is_key_bias(t.name)) {   // see is_key_bias: its updates are Adam applied to noise
            std::printf("note %s: after-step values of %s not compared (zero gradient)\n", name.c_str(), t.name.c_str());
            continue;
        }
        check_close((p + "after 10 steps " + t.name).c_str(), final_params.data() + t.offset,
                    want_final.data() + t.offset, t.numel, TOL_STEPS);
    }
}

// ---------------------------------------------------------------------------------------------
// Finite differences: for a few entries of each kind of parameter, (L(p+h) - L(p-h)) / 2h
// against the analytic gradient. Run with dropout on, the masks held fixed.
// ---------------------------------------------------------------------------------------------
static Batch small_batch(int vocab, uint64_t seed) {
    Batch b;
    b.B = 3, b.S = 7, b.T = 6;
    const int src_len[3] = {7, 4, 2}, tgt_len[3] = {5, 6, 3};
    b.src.assign(b.B * b.S, PAD_ID);
    b.tgt_in.assign(b.B * b.T, PAD_ID);
    b.labels.assign(b.B * b.T, PAD_ID);
    uint64_t s = seed;
    auto tok = [&]() { s = s * 6364136223846793005ull + 1442695040888963407ull; return 4 + (int)((s >> 33) % (vocab - 4)); };
    for (int i = 0; i < b.B; i++) {
        for (int j = 0; j < src_len[i] - 1; j++) b.src[i * b.S + j] = tok();
        b.src[i * b.S + src_len[i] - 1] = EOS_ID;
        b.tgt_in[i * b.T] = BOS_ID;
        for (int j = 0; j < tgt_len[i]; j++) {
            int t = j + 1 < tgt_len[i] ? tok() : EOS_ID;
            b.labels[i * b.T + j] = t;
            if (j + 1 < tgt_len[i]) b.tgt_in[i * b.T + j + 1] = t;
        }
    }
    for (int t : b.src) b.src_tokens += t != PAD_ID;
    for (int t : b.labels) b.tgt_tokens += t != PAD_ID;
    return b;
}

static Config small_config(bool pre_ln, bool learned_pos) {
    Config c;
    c.n_enc = 2, c.n_dec = 2, c.d_model = 16, c.d_ff = 24, c.n_heads = 2, c.d_k = 6, c.d_v = 5;
    c.vocab = 23, c.max_len = 16, c.pre_ln = pre_ln, c.learned_pos = learned_pos;
    c.label_smoothing = 0.1f;
    return c;
}

// Loss in double precision terms is not available; the fp32 loss with h = 1e-2 on a model
// this small is accurate to about 1e-4 relative.
static float loss_at(Model* m, const Batch& b, int64_t forward_id) {
    m->train_forwards = forward_id;   // the same dropout masks every time
    return model_forward(m, b, true);
}

static void finite_difference_check(const char* label, Config cfg) {
    Model m;
    model_init(&m, cfg, 7);
    for (const TensorInfo& t : m.layout.tensors)   // make biases and norms non-trivial
        if (t.shape.size() == 1)
            for (size_t i = 0; i < t.numel; i++) m.params[t.offset + i] += 0.1f * std::sin(1.0f + i + t.offset);
    Batch b = small_batch(cfg.vocab, 3);
    model_zero_grad(&m);
    m.train_forwards = 5;   // loss_at's masks
    model_forward_backward(&m, b);
    const char* kinds[] = {"embed.weight", "pos_embed.weight", "encoder.layers.0.self_attn.q_proj.weight",
                           "encoder.layers.1.self_attn.v_proj.bias", "encoder.layers.0.norm1.weight",
                           "encoder.layers.1.ffn.fc1.weight", "decoder.layers.0.self_attn.k_proj.weight",
                           "decoder.layers.1.cross_attn.k_proj.weight", "decoder.layers.0.cross_attn.out_proj.bias",
                           "decoder.layers.1.norm3.bias", "decoder.layers.0.ffn.fc2.weight",
                           "encoder.norm.weight", "decoder.norm.bias"};
    for (const char* name : kinds) {
        const TensorInfo* t = nullptr;
        for (const TensorInfo& ti : m.layout.tensors)
            if (ti.name == name) t = &ti;
        if (!t) {   // only the tensors this config does not have may be absent
            std::string n = name;
            bool absent_ok = (n == "pos_embed.weight" && !cfg.learned_pos) ||
                             (n.find(".norm.") != std::string::npos && !cfg.pre_ln);
            if (!absent_ok) check(false, "%s finite difference %s: no such tensor in the model", label, name);
            continue;
        }
        // the entry with the largest analytic gradient, where relative noise is smallest
        size_t best = t->offset;
        for (size_t i = t->offset; i < t->offset + t->numel; i++)
            if (std::fabs(m.grads[i]) > std::fabs(m.grads[best])) best = i;
        const float h = 1e-2f, saved = m.params[best];
        m.params[best] = saved + h;
        double lp = loss_at(&m, b, 5);
        m.params[best] = saved - h;
        double lm = loss_at(&m, b, 5);
        m.params[best] = saved;
        double fd = (lp - lm) / (2 * h), an = m.grads[best];
        double err = std::fabs(fd - an), scale = std::max(std::fabs(fd), std::fabs(an));
        check(err <= 2e-2 * scale + 1e-4, "%s finite difference %-45s analytic %+.6f numeric %+.6f",
              label, name, an, fd);
    }
}

// ---------------------------------------------------------------------------------------------
// The classifier in chunks of rows
// ---------------------------------------------------------------------------------------------
// model_forward_backward with the logits cut into chunks of 1, 5 and 7 rows against one chunk
// (with dropout, so the masks must line up too): the loss, the logits, every gradient, and
// model_score's log-probabilities. Only summation orders differ (dE is summed chunk by chunk).
static void classifier_chunks() {
    Config c = small_config(false, false);
    c.p_drop = 0.1f;
    const Batch b = small_batch(c.vocab, 3);
    struct Out { float loss; std::vector<float> logits, grads, score; };
    auto run = [&](int chunk_rows) {
        Model m;
        model_init(&m, c, 11);
        m.logit_chunk_rows = chunk_rows;
        model_zero_grad(&m);
        Out o;
        o.loss = model_forward_backward(&m, b);
        model_logits(&m, &o.logits);
        o.grads = host_grads(m);
        model_score(&m, b, &o.score);
        return o;
    };
    const Out whole = run(0);   // 23 words: every row in one chunk
    const int rows = b.B * b.T;
    for (int chunk : {1, 5, 7}) {
        const Out got = run(chunk);
        const std::string p = "classifier in chunks of " + std::to_string(chunk) + " rows (" +
                              std::to_string((rows + chunk - 1) / chunk) + " chunks) vs one: ";
        check_close((p + "loss").c_str(), &got.loss, &whole.loss, 1, 1e-6);
        check_close((p + "logits").c_str(), got.logits.data(), whole.logits.data(), whole.logits.size(), 1e-6);
        check_close((p + "every gradient").c_str(), got.grads.data(), whole.grads.data(), whole.grads.size(), 1e-5);
        check_close((p + "scores").c_str(), got.score.data(), whole.score.data(), whole.score.size(), 1e-6);
    }
}

// The paper's base model at its batch (25,000 source + 25,000 target tokens, 37,000 words,
// bf16): the training arena holds one chunk of logits, not all of them.
static void classifier_memory() {
    Config base;
    config_preset("base", &base);
    const int B = 1000, L = 25;
    const size_t chunked = model_arena_bytes(base, B, L, L, 2, true);
    const size_t whole = model_arena_bytes(base, B, L, L, 2, true, B * L);
    auto slice = [](size_t bytes) { return (bytes + 63) & ~(size_t)63; };   // the arena's 64-byte slices
    const size_t chunk_rows = ((size_t)1 << 26) / base.vocab;
    const size_t saved = slice((size_t)B * L * base.vocab * 2) - slice(chunk_rows * base.vocab * 2);
    check(whole - chunked == saved,
          "base model, 25,000 + 25,000 tokens, bf16: training arena %.2f GB with %zu-row logit chunks "
          "(%.0f MB of logits), %.2f GB with all 25,000 rows' logits (%.2f GB less)",
          chunked / 1e9, chunk_rows, chunk_rows * base.vocab * 2 / 1e6, whole / 1e9, saved / 1e9);
}

// ---------------------------------------------------------------------------------------------
// Dropout
// ---------------------------------------------------------------------------------------------
static void dropout_checks() {
    const size_t n = 1 << 20;
    const float p = 0.1f;
    std::vector<float> x(n, 1.0f), y(n), dx(n);
    std::unique_ptr<Backend> ops = make_cpu_backend();
    auto dropout_forward = [&](float* out, const float* in, size_t len, float prob, uint64_t s) {
        ops->dropout_forward((floatX*)out, (const floatX*)in, len, prob, s);
    };
    uint64_t seed = dropout_site_seed(42, 7, 3);
    dropout_forward(y.data(), x.data(), n, p, seed);
    size_t kept = 0;
    bool scale_ok = true;
    for (size_t i = 0; i < n; i++) {
        if (y[i] != 0.0f) kept++;
        if (y[i] != 0.0f && std::fabs(y[i] - 1.0f / (1.0f - p)) > 1e-6f) scale_ok = false;
    }
    double frac = (double)kept / n;
    check(std::fabs(frac - (1 - p)) < 0.002, "dropout kept fraction %.5f (expected %.3f +- 0.002)", frac, 1 - p);
    check(scale_ok, "dropout scales kept values by 1/(1-p) = %.6f", 1.0 / (1 - p));
    ops->dropout_backward((floatX*)dx.data(), (const floatX*)x.data(), n, p, seed);
    check(std::memcmp(dx.data(), y.data(), n * sizeof(float)) == 0, "dropout backward uses the forward mask");
    std::vector<float> y2(n);
    dropout_forward(y2.data(), x.data(), n, p, seed);
    check(y == y2, "dropout is reproducible from (seed, forward, site)");
    dropout_forward(y2.data(), x.data(), n, p, dropout_site_seed(42, 8, 3));
    check(y != y2, "dropout masks differ between forwards");
    dropout_forward(y2.data(), x.data(), n, 0.0f, seed);
    check(y2 == x, "dropout with p = 0 is the identity");
}

// ---------------------------------------------------------------------------------------------
// Checkpoints
// ---------------------------------------------------------------------------------------------

static void train_steps(Model* m, const Batch& b, int steps) {
    for (int i = 0; i < steps; i++) {
        model_zero_grad(m);
        model_forward_backward(m, b);
        adam_update(m, learning_rate(m->cfg, m->step + 1, 1.0, 4));
    }
}

// model/profile.cpp's work per call where its rule says more than the sizes: accumulating into
// dX or dx (beta 1) reads it as well as writing it, a decoding step at t attends t + 1 keys
// (positions 0..t), and an ensemble's combination reads each member's logits once and writes once.
static void profile_work_counted() {
    ProfiledBackend p(make_cpu_backend());
    auto fx = [](std::vector<float>& v) { return (floatX*)v.data(); };
    const int rows = 3, in = 4, out = 5;
    std::vector<float> dX(rows * in), dW(out * in), db(out), dY(rows * out, 0.1f), X(rows * in, 0.2f), W(out * in, 0.3f);
    auto linear_bytes = [&](float beta) {
        p.reset();
        p.linear_backward(fx(dX), beta, dW.data(), db.data(), fx(dY), fx(X), fx(W), rows, in, out);
        return p.report()[0].bytes;
    };
    const double linear_more = linear_bytes(1) - linear_bytes(0);
    std::vector<float> dx(rows * in), dg(in), dbeta(in), y(rows * in, 0.5f), mean(rows, 0.1f), rstd(rows, 2.0f), g(in, 1.0f);
    auto layernorm_bytes = [&](float beta) {
        p.reset();
        p.layernorm_backward(fx(dx), beta, dg.data(), dbeta.data(), fx(dY), fx(y), mean.data(), rstd.data(), fx(g), rows, in);
        return p.report()[0].bytes;
    };
    const double layernorm_more = layernorm_bytes(1) - layernorm_bytes(0);
    check(linear_more == 4.0 * rows * in && layernorm_more == 4.0 * rows * in,
          "profile: accumulating into dX (linear_backward) and dx (layernorm_backward) counts %g and %g bytes more "
          "than writing them (want %d: reading the %d x %d fp32 values)", linear_more, layernorm_more, 4 * rows * in,
          rows, in);
    const StepShape s{2, 2, 2, 2, 4};   // n, H, dk, dv, q's row stride
    const int T = 3, width = s.H * (s.dk + s.dv);
    std::vector<float> ctx(s.n * s.H * s.dv), q(s.n * s.q_stride, 0.25f), cache(T * s.n * width, 0.5f);
    std::vector<int> step_row = {0, s.n, 2 * s.n}, slots(s.n * T);
    for (int r = 0; r < s.n; r++)
        for (int j = 0; j < T; j++) slots[r * T + j] = r;
    for (int t : {0, 2}) {
        p.reset();
        p.attention_step_self(fx(ctx), fx(q), fx(cache), step_row.data(), slots.data(), T, t, s);
        const double got = p.report()[0].flops, want = 2.0 * s.n * s.H * (t + 1) * (s.dk + s.dv);
        check(got == want, "profile: attention_step_self at step %d counts %g FLOPs (want %g: %d rows x %d heads x %d "
              "keys x (dk + dv) multiply-adds)", t, got, want, s.n, s.H, t + 1);
    }
    const int K = 3, V = 6;
    std::vector<float> logits(K * rows * V, 0.5f), combined(rows * V);
    const floatX* members[K];
    for (int k = 0; k < K; k++) members[k] = (const floatX*)(logits.data() + k * rows * V);
    p.reset();
    p.logsoftmax_ensemble(fx(combined), members, K, rows, V, V);
    const double ensemble_bytes = p.report()[0].bytes;
    check(ensemble_bytes == 4.0 * (K + 1) * rows * V, "profile: logsoftmax_ensemble of %d members counts %g bytes (want %d: "
          "each member's %d x %d fp32 logits read once, the result written once)", K, ensemble_bytes, 4 * (K + 1) * rows * V,
          rows, V);
}

// profile_print's table, read back: per step (calls, ms), each op's share of the step measured
// unprofiled or else of the ops' sum, TFLOP/s and GB/s where the op has that work and a time
// ("-" otherwise: no 0, no inf), the header's step, plural and unprofiled time.
static void profile_table() {
    auto printed = [](const std::vector<OpProfile>& ops, int steps, double step_ms, const char* unit) {
        char* text = nullptr;
        size_t size = 0;
        FILE* f = open_memstream(&text, &size);
        profile_print(f, ops, steps, step_ms, unit);
        std::fclose(f);
        std::vector<std::string> lines;
        for (const char *at = text, *nl; (nl = std::strchr(at, '\n')); at = nl + 1) lines.emplace_back(at, nl);
        std::free(text);
        return lines;
    };
    struct Row { const char* op; long calls; double ms, share; const char *tflops, *gbs; };
    auto rows_match = [](const std::vector<std::string>& lines, const std::vector<Row>& want) {
        if (lines.size() != want.size() + 2) return false;
        for (size_t i = 0; i < want.size(); i++) {
            char op[64], tflops[16], gbs[16];
            long calls = -1;
            double ms = -1, share = -1;
            if (std::sscanf(lines[i + 2].c_str(), "# profile %63s %ld %lf %lf%% %15s %15s", op, &calls, &ms, &share, tflops,
                            gbs) != 6 ||
                std::strcmp(op, want[i].op) || calls != want[i].calls || !(std::fabs(ms - want[i].ms) <= 1e-9) ||
                !(std::fabs(share - want[i].share) <= 0.051) || std::strcmp(tflops, want[i].tflops) || std::strcmp(gbs, want[i].gbs))
                return false;
        }
        return true;
    };
    auto op = [](const char* name, long calls, double ms, double flops, double bytes) {
        OpProfile o;
        o.op = name, o.calls = calls, o.ms = ms, o.flops = flops, o.bytes = bytes;
        return o;
    };
    const std::vector<OpProfile> ops = {op("linear_forward", 4, 2.0, 4e9, 8e6), op("layernorm_forward", 2, 1.0, 0, 2e6),
                                        op("global_norm", 2, 1.0, 0, 0), op("linear_backward", 2, 0.0, 1e6, 1e6)};
    // 2 steps: 2.0 ms a step in the ops, 4e9 + 1e6 FLOPs over 4.0 ms
    const auto of_sum = printed(ops, 2, 0, "step");
    const bool sum_ok =
        of_sum.size() > 1 && of_sum[0] == "# profile: 2.00 ms a step in the ops below (2 steps timed op by op); matrix work 1 TFLOP/s over the ops' time" &&
        rows_match(of_sum, {{"linear_forward", 2, 1.0, 50.0, "2", "4"}, {"layernorm_forward", 1, 0.5, 25.0, "-", "2"},
                            {"global_norm", 1, 0.5, 25.0, "-", "-"}, {"linear_backward", 1, 0.0, 0.0, "-", "-"}});
    const auto of_step = printed(ops, 2, 4.0, "step");
    const bool step_ok =
        of_step.size() > 1 && of_step[0] == "# profile: 2.00 ms a step in the ops below (2 steps timed op by op); 4.00 ms a step unprofiled; matrix work 1 TFLOP/s over the ops' time" &&
        rows_match(of_step, {{"linear_forward", 2, 1.0, 25.0, "2", "4"}, {"layernorm_forward", 1, 0.5, 12.5, "-", "2"},
                             {"global_norm", 1, 0.5, 12.5, "-", "-"}, {"linear_backward", 1, 0.0, 0.0, "-", "-"}});
    const auto untimed = printed({op("copy", 3, 0.0, 0, 5e6)}, 1, 0, "run");
    const bool untimed_ok =
        untimed.size() > 1 && untimed[0] == "# profile: 0.00 ms a run in the ops below (1 run timed op by op); matrix work 0 TFLOP/s over the ops' time" &&
        rows_match(untimed, {{"copy", 3, 0.0, 0.0, "-", "-"}});
    auto show = [](const std::vector<std::string>& lines) {
        std::string all;
        for (const std::string& l : lines) all += "\n    " + l;
        return all;
    };
    check(sum_ok && step_ok && untimed_ok,
          "profile_print: 4 ops over 2 steps as shares of their sum (%s), of a 4.00 ms step unprofiled (%s), one op "
          "of 0 ms in 1 run (%s):%s%s%s", sum_ok ? "right" : "WRONG", step_ok ? "right" : "WRONG",
          untimed_ok ? "right" : "WRONG", show(of_sum).c_str(), show(of_step).c_str(), show(untimed).c_str());
}

// §5.3 with --clip-norm (off in the paper, and in the PyTorch cases above): the gradient's norm
// against a sum in double here, and adam_update's clipping against Adam on a gradient scaled
// here: over the bound every gradient is scaled by bound / norm first; under it, none is.
static void gradient_clipping() {
    const Config cfg = small_config(false, false);
    const Batch b = small_batch(cfg.vocab, 5);
    Model clipped, scaled, loose, plain;
    for (Model* m : {&clipped, &scaled, &loose, &plain}) {
        model_init(m, cfg, 11);
        model_zero_grad(m);
        model_forward_backward(m, b);
    }
    const std::vector<float> g = host_grads(plain);
    double sq = 0.0;
    for (float x : g) sq += (double)x * x;
    const double norm = std::sqrt(sq), got = grad_norm(&plain), lr = 1e-3;
    check(std::fabs(got - norm) <= 1e-9 * norm, "grad_norm %.9f = sqrt(sum g^2) %.9f (in double here)", got, norm);
    const double bound = norm / 4;
    adam_update(&clipped, lr, bound);
    for (size_t i = 0; i < g.size(); i++) scaled.grads[i] = (float)(g[i] * (bound / norm));
    adam_update(&scaled, lr);
    adam_update(&loose, lr, 2 * norm);
    adam_update(&plain, lr);
    // Adam's step is nearly blind to a gradient's scale; its moments are not: m = (1 - b1) g.
    const std::vector<float> ac = host_adam(clipped), as = host_adam(scaled), ap = host_adam(plain);
    double worst = 0.0, largest = 0.0;
    for (size_t i = 0; i < ac.size(); i++) {
        worst = std::max(worst, (double)std::fabs(ac[i] - as[i]));
        largest = std::max(largest, (double)std::fabs(as[i]));
    }
    check(worst <= 1e-6 * largest && ac != ap && same_bits(host_params(clipped), host_params(scaled)),
          "--clip-norm norm/4: Adam's m, v and step as on the gradient scaled by 1/4 here (max |diff| %.2e of %.2e)",
          worst, largest);
    check(same_bits(host_params(loose), host_params(plain)) && same_bits(host_adam(loose), ap),
          "--clip-norm 2 norm: the gradient left alone (parameters, m and v bitwise)");
}

static void checkpoint_round_trip() {
    Config cfg = small_config(false, false);
    cfg.p_drop = 0.1f;
    Model a;
    model_init(&a, cfg, 11);
    Batch b = small_batch(cfg.vocab, 5);
    train_steps(&a, b, 3);
    std::string path = g_tmp_dir + "/round_trip.safetensors", err;
    Metadata extra = {{"tokenizer", "test tokenizer text"}};
    check(checkpoint_save(a, path, extra, true, &err), "checkpoint save (%s)", err.c_str());
    Model c;
    Metadata meta;
    bool ok = checkpoint_load(&c, path, &meta, &err);
    check(ok, "checkpoint load (%s)", err.c_str());
    if (!ok) return;
    check(config_difference(a.cfg, c.cfg).empty(), "round trip: same config");
    check(same_bits(host_params(a), host_params(c)) && same_bits(host_adam(a), host_adam(c)) &&
              a.step == c.step,
          "round trip: identical parameters, Adam m and v, step %lld", (long long)c.step);
    check(meta["tokenizer"] == "test tokenizer text", "round trip: metadata carried");
    train_steps(&a, b, 1);
    train_steps(&c, b, 1);
    check(same_bits(host_params(a), host_params(c)), "round trip: the next step (with dropout) is bitwise identical");
}

// Checkpoint averaging (./average, ./train's end): each parameter the mean of the checkpoints',
// summed here in double in the same order, so bitwise.
static void checkpoint_averaging() {
    const Config cfg = small_config(false, false);
    std::vector<std::string> paths;
    std::vector<double> sum;
    std::string err;
    bool saved = true;
    for (int k = 0; k < 3; k++) {
        Model m;
        model_init(&m, cfg, 20 + k);
        paths.push_back(g_tmp_dir + "/avg" + std::to_string(k) + ".safetensors");
        saved = saved && checkpoint_save(m, paths.back(), {{"tokenizer", "t"}}, false, &err);
        const std::vector<float> p = host_params(m);
        sum.resize(p.size(), 0.0);
        for (size_t j = 0; j < p.size(); j++) sum[j] += p[j];
    }
    Model avg;
    Metadata meta;
    const std::string out = g_tmp_dir + "/avg.safetensors";
    const bool ok = saved && average_checkpoints(paths, out, &err) && checkpoint_load(&avg, out, &meta, &err);
    check(ok, "average 3 checkpoints and load the result (%s)", err.c_str());
    if (!ok) return;
    std::vector<float> want(sum.size());
    for (size_t j = 0; j < sum.size(); j++) want[j] = (float)(sum[j] / 3);
    check(same_bits(host_params(avg), want), "average of 3 checkpoints: every parameter (sum of the three) / 3, bitwise");
}

static void write_bytes(const std::string& path, const std::string& bytes) {
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
}

// list_checkpoints: a run's ckpt-<step>.safetensors in step order, whatever the digits (names
// are padded to 8, so past step 99,999,999 the text order would put ckpt-100000000 first), and
// nothing else of the folder (best, average, other suffixes, no step, a name that is not a step:
// ckpt-avg.safetensors had been listed as step 0, averaged by --last N and deleted by --keep).
static void checkpoint_listing() {
    const std::string dir = g_tmp_dir + "/listing";
    mkdir(dir.c_str(), 0755);
    const char* names[] = {"ckpt-100000000.safetensors", "ckpt-00000005.safetensors", "ckpt-99999999.safetensors",
                           "ckpt-00000900.safetensors", "best.safetensors", "average.safetensors",
                           "ckpt-00000007.safetensors.tmp", "ckpt-.safetensors", "xckpt-00000001.safetensors",
                           "ckpt-avg.safetensors", "ckpt-00000009-copy.safetensors", "ckpt-00000011.safetensors.tmp.4242",
                           "ckpt-99999999999999999999.safetensors",    // (past any step: atoll's overflow)
                           "ckpt-0000000000000000012"};                // (no suffix, as long as one with it)
    for (const char* n : names) write_bytes(dir + "/" + n, "x");
    const std::vector<std::string> got = list_checkpoints(dir);
    const std::vector<std::string> want = {dir + "/ckpt-00000005.safetensors", dir + "/ckpt-00000900.safetensors",
                                           dir + "/ckpt-99999999.safetensors", dir + "/ckpt-100000000.safetensors"};
    std::string listed;
    for (const std::string& g : got) listed += " " + g.substr(dir.size() + 1);
    check(got == want, "list_checkpoints: steps 5, 900, 99999999, 100000000 in step order, the 10 other files "
          "left out (got%s)", listed.c_str());
}

static std::string read_bytes(const std::string& path) {
    std::string s;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return s;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
    return s;
}

// Expects checkpoint_load to refuse path with a message containing `expect`.
static void expect_refusal(const char* what, const std::string& path, const char* expect,
                           Model* into = nullptr) {
    Model fresh;
    Model* m = into ? into : &fresh;
    std::string err;
    bool ok = checkpoint_load(m, path, nullptr, &err);
    check(!ok && err.find(expect) != std::string::npos, "refuses %-22s -> \"%s\"", what, err.c_str());
}

// The presets "base" and "big" are Table 3's rows: N, d_model, d_ff, h, d_k = d_v, P_drop,
// epsilon_ls, the paper's post-LN and sinusoids, and its parameter counts (65M and 213M, from a
// shared vocabulary of about 37,000 tokens: ours, 37,000 with tied embeddings, within 5%).
static void presets_are_table3() {
    struct Row { const char* name; int n, d, dff, h, dk; float p_drop; double params; } rows[] = {
        {"base", 6, 512, 2048, 8, 64, 0.1f, 65e6}, {"big", 6, 1024, 4096, 16, 64, 0.3f, 213e6}};
    for (const Row& r : rows) {
        Config c;
        const bool found = config_preset(r.name, &c);
        const double params = found ? (double)make_layout(c).total : 0;
        check(found && c.n_enc == r.n && c.n_dec == r.n && c.d_model == r.d && c.d_ff == r.dff && c.n_heads == r.h &&
                  c.d_k == r.dk && c.d_v == r.dk && c.p_drop == r.p_drop && c.label_smoothing == 0.1f && c.vocab == 37000 &&
                  !c.pre_ln && !c.learned_pos && std::fabs(params / r.params - 1) <= 0.05,
              "preset %s = Table 3: N %d, d_model %d, d_ff %d, h %d, d_k %d, P_drop %g, eps_ls %g; %.1fM parameters "
              "(the paper's %.0fM)", r.name, c.n_enc, c.d_model, c.d_ff, c.n_heads, c.d_k, c.p_drop, c.label_smoothing,
              params / 1e6, r.params / 1e6);
    }
}

// config_error, which guards ./train's options and every loaded checkpoint's config: each
// bound's last valid value passes, one step past it is refused, naming the field.
static void config_bounds() {
    struct Case { const char* what; std::function<void(Config*)> set; const char* refused; } cases[] = {
        {"1 layer each", [](Config* c) { c->n_enc = c->n_dec = 1; }, nullptr},
        {"64 layers", [](Config* c) { c->n_enc = c->n_dec = 64; }, nullptr},
        {"65 encoder layers", [](Config* c) { c->n_enc = 65; }, "layers"},
        {"0 decoder layers", [](Config* c) { c->n_dec = 0; }, "layers"},
        {"d_ff 0", [](Config* c) { c->d_ff = 0; }, "positive"},
        {"d_ff 2^24", [](Config* c) { c->d_ff = 1 << 24; }, nullptr},
        {"d_model 2^24 + 1", [](Config* c) { c->d_model = (1 << 24) + 1; }, "positive"},
        {"4096 heads of d_k = d_v = 4096 (2^24)", [](Config* c) { c->n_heads = c->d_k = c->d_v = 4096; }, nullptr},
        {"4096 heads of d_k 4097", [](Config* c) { c->n_heads = c->d_v = 4096, c->d_k = 4097; }, "heads x d_k"},
        {"4096 heads of d_v 4097", [](Config* c) { c->n_heads = c->d_k = 4096, c->d_v = 4097; }, "heads x d_v"},
        {"2^24 ids", [](Config* c) { c->vocab = 1 << 24; }, nullptr},
        {"2^24 + 1 ids", [](Config* c) { c->vocab = (1 << 24) + 1; }, "at most 2^24 ids"},
        {"max_len 2^24", [](Config* c) { c->max_len = 1 << 24; }, nullptr},
        {"max_len 2^24 + 1", [](Config* c) { c->max_len = (1 << 24) + 1; }, "max_len"},
        {"5 ids", [](Config* c) { c->vocab = 5; }, nullptr},
        {"4 ids", [](Config* c) { c->vocab = 4; }, "vocabulary"},
        {"max_len 2", [](Config* c) { c->max_len = 2; }, nullptr},
        {"max_len 1", [](Config* c) { c->max_len = 1; }, "max_len"},
        {"P_drop 0.999", [](Config* c) { c->p_drop = 0.999f; }, nullptr},
        {"P_drop 1", [](Config* c) { c->p_drop = 1.0f; }, "dropout"},
        {"attention dropout 1", [](Config* c) { c->p_attn_drop = 1.0f; }, "dropout"},
        {"ReLU dropout -0.1", [](Config* c) { c->p_relu_drop = -0.1f; }, "dropout"},
        {"P_drop NaN", [](Config* c) { c->p_drop = std::nanf(""); }, "dropout"},
        {"label smoothing 0", [](Config* c) { c->label_smoothing = 0.0f; }, nullptr},
        {"label smoothing 1", [](Config* c) { c->label_smoothing = 1.0f; }, "label smoothing"},
    };
    int right = 0;
    std::string wrong;
    for (const Case& k : cases) {
        Config c;
        k.set(&c);
        const std::string err = config_error(c);
        if (k.refused ? err.find(k.refused) != std::string::npos : err.empty()) right++;
        else wrong += std::string(" [") + k.what + ": \"" + err + "\"]";
    }
    check(right == (int)(sizeof cases / sizeof cases[0]), "config bounds: %d/%zu edge values accepted or refused "
          "as they should be%s", right, sizeof cases / sizeof cases[0], wrong.c_str());
}

// The config in a checkpoint: every field survives config_to_json -> config_from_json (each set
// away from its default, compared member by member), and config_difference names a change of
// any one field (the loader's and ./average's refusal of another model).
static void config_round_trip() {
    Config c;
    c.n_enc = 3, c.n_dec = 2, c.d_model = 40, c.d_ff = 72, c.n_heads = 5, c.d_k = 6, c.d_v = 7, c.vocab = 333;
    c.max_len = 99, c.p_drop = 0.25f, c.p_attn_drop = 0.125f, c.p_relu_drop = 0.375f, c.label_smoothing = 0.2f;
    c.pre_ln = true, c.learned_pos = true;
    Config back;
    std::string err;
    const bool read = config_from_json(config_to_json(c), &back, &err);
    check(read && back.n_enc == 3 && back.n_dec == 2 && back.d_model == 40 && back.d_ff == 72 && back.n_heads == 5 &&
              back.d_k == 6 && back.d_v == 7 && back.vocab == 333 && back.max_len == 99 && back.p_drop == 0.25f &&
              back.p_attn_drop == 0.125f && back.p_relu_drop == 0.375f && back.label_smoothing == 0.2f &&
              back.pre_ln && back.learned_pos,
          "config JSON round trip: all 15 fields back as written (%s)", read ? config_to_json(back).c_str() : err.c_str());
    std::vector<std::function<void(Config*)>> edits = {
        [](Config* x) { x->n_enc++; }, [](Config* x) { x->n_dec++; }, [](Config* x) { x->d_model++; },
        [](Config* x) { x->d_ff++; }, [](Config* x) { x->n_heads++; }, [](Config* x) { x->d_k++; },
        [](Config* x) { x->d_v++; }, [](Config* x) { x->vocab++; }, [](Config* x) { x->max_len++; },
        [](Config* x) { x->p_drop = 0.5f; }, [](Config* x) { x->p_attn_drop = 0.5f; },
        [](Config* x) { x->p_relu_drop = 0.5f; }, [](Config* x) { x->label_smoothing = 0.5f; },
        [](Config* x) { x->pre_ln = false; }, [](Config* x) { x->learned_pos = false; }};
    std::string seen;
    int named = 0;
    for (const auto& edit : edits) {
        Config other = c;
        edit(&other);
        const std::string diff = config_difference(c, other);
        named += !diff.empty();
        seen += (seen.empty() ? "" : ", ") + diff.substr(0, diff.find(':'));
    }
    check(named == (int)edits.size(), "config_difference names a change of each field: %d/%zu (%s)", named,
          edits.size(), seen.c_str());
}

// The file as DESIGN.md describes it: an 8-byte little-endian header length, a JSON header padded
// with spaces so that the data section starts 8-byte aligned (safetensors' convention: a reader
// may map the floats in place), then the parameters in buffer order, then Adam's m and v.
static void checkpoint_file_layout() {
    Model a;
    model_init(&a, small_config(false, false), 5);
    const std::string path = g_tmp_dir + "/layout.safetensors";
    std::string err;
    checkpoint_save(a, path, {}, true, &err);
    const std::string bytes = read_bytes(path);
    uint64_t n = 0;
    for (int i = 7; i >= 0 && bytes.size() >= 8; i--) n = (n << 8) | (unsigned char)bytes[i];
    const size_t total = a.layout.total * sizeof(float), data = 8 + (size_t)n;
    const bool sized = bytes.size() == data + 3 * total;   // parameters, m, v
    const std::string header = sized ? bytes.substr(8, n) : "";
    const size_t json_end = header.find_last_not_of(' ');
    check(sized && data % 8 == 0 && header[0] == '{' && json_end != std::string::npos && header[json_end] == '}',
          "checkpoint file: %zu bytes = 8 + a %llu-byte header (%zu bytes of JSON, then spaces) + 3 x %zu; data "
          "at byte %zu (8-byte aligned)", bytes.size(), (unsigned long long)n, json_end + 1, total, data);
    const std::vector<float> params = host_params(a);
    check(sized && std::memcmp(bytes.data() + data, params.data(), total) == 0,
          "checkpoint file: the data section starts with the parameter buffer as it is in memory (%zu floats)",
          a.layout.total);
}

// A safetensors file's first 8 bytes: the header's length, little-endian.
static std::string header_length(uint64_t n) { return std::string((const char*)&n, 8); }

// A safetensors file of `header` (padded to 8 bytes) and `data`.
static std::string safetensors_bytes(std::string header, const std::string& data) {
    while (header.size() % 8) header += ' ';
    return header_length(header.size()) + header + data;
}

// Opens `bytes` as a safetensors file: it must open (expect "") or be refused with `expect`.
static void expect_open(const char* what, const std::string& bytes, const char* expect) {
    const std::string path = g_tmp_dir + "/opened.safetensors";
    write_bytes(path, bytes);
    SafeTensorsFile f;
    std::string err;
    const bool opened = f.open(path, &err);
    const bool ok = *expect ? !opened && err.find(expect) != std::string::npos : opened;
    const std::string said = opened ? "opens" : "\"" + err.substr(err.rfind(".safetensors: ") + 14) + "\"";
    check(ok, "safetensors %s: %s (want %s)", what, said.c_str(), *expect ? expect : "it opens");
}

// safetensors' dtypes and their widths in bytes (the format's specification), as another
// program's file has them: a tensor of 3 values of each opens with its offsets [0, 3 x width],
// one a byte short is refused, and safetensors_write lays each out at that width.
static void safetensors_dtypes() {
    const struct { const char* dtype; size_t width; } kinds[] = {
        {"F64", 8}, {"I64", 8}, {"U64", 8}, {"F32", 4}, {"I32", 4}, {"U32", 4}, {"F16", 2},
        {"BF16", 2}, {"I16", 2}, {"U16", 2}, {"I8", 1}, {"U8", 1}, {"BOOL", 1}};
    const std::string path = g_tmp_dir + "/dtype_width.safetensors";
    const char data[24] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24};
    for (const auto& k : kinds) {
        bool opens[2];
        std::string errs[2];
        for (size_t shortfall : {0, 1}) {   // the tensor's bytes: all of them, one short
            const size_t bytes = 3 * k.width - shortfall;
            write_bytes(path, safetensors_bytes(std::string("{\"x\": {\"dtype\": \"") + k.dtype + "\", \"shape\": [3], " +
                                                    "\"data_offsets\": [0, " + std::to_string(bytes) + "]}}",
                                                std::string(data, bytes)));
            SafeTensorsFile f;
            opens[shortfall] = f.open(path, &errs[shortfall]) && f.tensors.size() == 1 &&
                               f.tensors[0].end - f.tensors[0].begin == bytes;
        }
        std::string err;
        const bool written = safetensors_write(path, {{"x", k.dtype, {3}, data}}, {}, &err);
        const std::string file = read_bytes(path);
        uint64_t n = 0;
        if (file.size() >= 8) std::memcpy(&n, file.data(), 8);
        const bool laid_out = written && file.size() == 8 + n + 3 * k.width &&
                              file.compare(8 + n, 3 * k.width, data, 3 * k.width) == 0;
        check(opens[0] && !opens[1] && errs[1].find("do not match dtype x shape") != std::string::npos && laid_out,
              "safetensors %-4s: 3 values of %zu bytes open, a byte short is refused (\"%s\"), written at %zu bytes "
              "each (%s)", k.dtype, k.width, errs[1].substr(errs[1].rfind(": tensor") + 2).c_str(), k.width,
              laid_out ? "yes" : err.c_str());
    }
}

// A safetensors header as another program may write it, entry by entry: what opens (a zero-size
// dimension, a scalar, tensors end to end up to the data section's last byte) and what is refused
// with which message (each part of an entry missing or of the wrong JSON type, shapes and offsets
// negative, fractional, textual or too large, overlapping or past the data section).
static void safetensors_headers() {
    const std::string x = "{\"x\": {\"dtype\": \"F32\", ";
    const struct { const char* what; std::string header; const char* expect; } cases[] = {
        {"a dimension of 0", x + "\"shape\": [0, 3], \"data_offsets\": [0, 0]}}", ""},
        {"a scalar", x + "\"shape\": [], \"data_offsets\": [0, 4]}}", ""},
        {"two tensors end to end, to the last byte",
         x + "\"shape\": [2], \"data_offsets\": [0, 8]}, \"y\": {\"dtype\": \"F32\", \"shape\": [2], "
             "\"data_offsets\": [8, 16]}}", ""},
        {"a shape of 10^12 (the largest taken)", x + "\"shape\": [1000000000000], \"data_offsets\": [0, 4000000000000]}}",
         "file is truncated: tensor \"x\" ends at byte 4000000000000"},
        {"an entry not an object", "{\"x\": 5}", "lacks dtype, shape or data_offsets"},
        {"no dtype", "{\"x\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", "lacks dtype, shape or data_offsets"},
        {"a dtype not a string", "{\"x\": {\"dtype\": 4, \"shape\": [1], \"data_offsets\": [0, 4]}}",
         "lacks dtype, shape or data_offsets"},
        {"no shape", x + "\"data_offsets\": [0, 4]}}", "lacks dtype, shape or data_offsets"},
        {"a shape not a list", x + "\"shape\": 1, \"data_offsets\": [0, 4]}}", "lacks dtype, shape or data_offsets"},
        {"no data_offsets", x + "\"shape\": [1]}}", "lacks dtype, shape or data_offsets"},
        {"data_offsets not a list", x + "\"shape\": [1], \"data_offsets\": 4}}", "lacks dtype, shape or data_offsets"},
        {"three data_offsets", x + "\"shape\": [1], \"data_offsets\": [0, 4, 8]}}", "lacks dtype, shape or data_offsets"},
        {"an unknown dtype", "{\"x\": {\"dtype\": \"F12\", \"shape\": [1], \"data_offsets\": [0, 4]}}", "unknown dtype F12"},
        {"a negative dimension", x + "\"shape\": [-1], \"data_offsets\": [0, 4]}}", "has a bad shape"},
        {"a fractional dimension", x + "\"shape\": [1.5], \"data_offsets\": [0, 4]}}", "has a bad shape"},
        {"a dimension in quotes", x + "\"shape\": [\"1\"], \"data_offsets\": [0, 4]}}", "has a bad shape"},
        {"a dimension past 10^12", x + "\"shape\": [1000000000001], \"data_offsets\": [0, 4]}}", "has a bad shape"},
        {"a negative begin", x + "\"shape\": [1], \"data_offsets\": [-4, 0]}}", "has bad data_offsets"},
        {"an end before the begin", x + "\"shape\": [1], \"data_offsets\": [8, 4]}}", "has bad data_offsets"},
        {"a fractional offset", x + "\"shape\": [1], \"data_offsets\": [0.5, 4.5]}}", "has bad data_offsets"},
        {"a begin in quotes", x + "\"shape\": [1], \"data_offsets\": [\"0\", 4]}}", "has bad data_offsets"},
        {"an end in quotes", x + "\"shape\": [1], \"data_offsets\": [0, \"4\"]}}", "has bad data_offsets"},
        {"a fractional begin alone", x + "\"shape\": [1], \"data_offsets\": [0.5, 4]}}", "has bad data_offsets"},
        {"a fractional end alone", x + "\"shape\": [1], \"data_offsets\": [0, 4.5]}}", "has bad data_offsets"},
        {"an end of 2^53 (the largest taken)", x + "\"shape\": [1], \"data_offsets\": [0, 9007199254740992]}}",
         "data_offsets do not match dtype x shape"},
        {"an end past 2^53", x + "\"shape\": [1], \"data_offsets\": [0, 9007199254740994]}}", "has bad data_offsets"},
        {"a shape of 2^53 bytes (the largest taken)", x + "\"shape\": [1048576, 1048576, 2048], \"data_offsets\": [0, 4]}}",
         "data_offsets do not match dtype x shape"},
        {"a shape past 2^53 bytes", x + "\"shape\": [1048576, 1048576, 2049], \"data_offsets\": [0, 4]}}",
         "has a shape too large for any file"},
        {"overlapping tensors",
         x + "\"shape\": [2], \"data_offsets\": [0, 8]}, \"y\": {\"dtype\": \"F32\", \"shape\": [2], "
             "\"data_offsets\": [4, 12]}}", "overlaps another"},
        {"a tensor past the data", x + "\"shape\": [5], \"data_offsets\": [0, 20]}}",
         "file is truncated: tensor \"x\" ends at byte 20 of a 16-byte data section"}};
    for (const auto& c : cases)
        expect_open(("header, " + std::string(c.what)).c_str(), safetensors_bytes(c.header, std::string(16, '\0')), c.expect);
    // The file around the header: its 8-byte length (2 to 2^27 bytes) and the JSON object.
    const struct { const char* what; std::string bytes; const char* expect; } files[] = {
        {"8 bytes, a header of 0", header_length(0), "not a safetensors file (header length 0 for a 8-byte file)"},
        {"a header of 2 bytes, {} (no tensors)", header_length(2) + "{}", ""},
        {"a header of 1 byte", header_length(1) + "{", "not a safetensors file (header length 1 "},
        {"a header length of 2^27 (the largest taken) in a short file", header_length(1u << 27) + "{}      ",
         "file is truncated: its header needs 134217736 bytes, the file has 16"},
        {"a header length past 2^27", header_length((1u << 27) + 1) + "{}      ", "not a safetensors file (header length 134217729 "},
        {"a header of a JSON list", header_length(8) + "[1, 2]  ", "(header is JSON, but not an object)"},
        {"a header not JSON", header_length(8) + "{\"x\":   ", "(header is not JSON: unexpected end at byte 8)"}};
    for (const auto& c : files) expect_open(("file, " + std::string(c.what)).c_str(), c.bytes, c.expect);
}

static void checkpoint_refusals() {
    Config cfg = small_config(true, true);
    Model a;
    model_init(&a, cfg, 3);
    std::string good = g_tmp_dir + "/good.safetensors", err;
    checkpoint_save(a, good, {}, true, &err);
    std::string bytes = read_bytes(good);
    expect_refusal("a missing file", g_tmp_dir + "/nonexistent.safetensors", "cannot open");
    write_bytes(g_tmp_dir + "/trunc.safetensors", bytes.substr(0, bytes.size() - 100));
    expect_refusal("a truncated file", g_tmp_dir + "/trunc.safetensors", "truncated");
    write_bytes(g_tmp_dir + "/short.safetensors", bytes.substr(0, 5));
    expect_refusal("a 5-byte file", g_tmp_dir + "/short.safetensors", "too short");
    write_bytes(g_tmp_dir + "/text.safetensors", "This is a text file, not a checkpoint at all.\n");
    expect_refusal("a text file", g_tmp_dir + "/text.safetensors", "not a safetensors file");
    // A valid safetensors file from elsewhere: no format tag.
    float x[4] = {1, 2, 3, 4};
    safetensors_write(g_tmp_dir + "/foreign.safetensors", {{"weight", "F32", {2, 2}, x}}, {}, &err);
    expect_refusal("a foreign safetensors", g_tmp_dir + "/foreign.safetensors", "not a checkpoint of this program");
    // Right metadata, a tensor of the wrong dtype / shape.
    Metadata meta = {{"format", CHECKPOINT_FORMAT}, {"config", config_to_json(cfg)}, {"step", "0"}};
    std::vector<TensorOut> ts;
    const std::vector<float> a_params = host_params(a);
    for (const TensorInfo& t : a.layout.tensors)
        ts.push_back({t.name, "F32", std::vector<int64_t>(t.shape.begin(), t.shape.end()), a_params.data() + t.offset});
    std::vector<TensorOut> wrong_dtype = ts;
    wrong_dtype[0].dtype = "I32";
    safetensors_write(g_tmp_dir + "/dtype.safetensors", wrong_dtype, meta, &err);
    expect_refusal("a wrong dtype", g_tmp_dir + "/dtype.safetensors", "expected F32");
    std::vector<TensorOut> wrong_shape = ts;
    wrong_shape[0].shape = {(int64_t)cfg.d_model, (int64_t)cfg.vocab};
    safetensors_write(g_tmp_dir + "/shape.safetensors", wrong_shape, meta, &err);
    expect_refusal("a wrong shape", g_tmp_dir + "/shape.safetensors", "the config needs");
    std::vector<TensorOut> missing(ts.begin(), ts.end() - 1);
    safetensors_write(g_tmp_dir + "/missing.safetensors", missing, meta, &err);
    expect_refusal("a missing tensor", g_tmp_dir + "/missing.safetensors", "no tensor");
    // A header that is not safetensors' (Hugging Face's library refuses each): __metadata__ twice (the
    // second had been merged over the first), a value that is not a string, __metadata__ not an
    // object (both had been dropped silently).
    const struct { const char* what; bool in_metadata; const char* insert; const char* expect; } headers[] = {
        {"__metadata__ twice", false, "\"__metadata__\": {\"step\": \"7\"}, ", "\"__metadata__\" is listed twice"},
        {"a number in metadata", true, "\"x\": 1, ", "__metadata__ \"x\" is not a string"},
        {"__metadata__ a string", false, "\"__metadata__\": \"none\", ", "\"__metadata__\" is not an object"}};
    for (const auto& h : headers) {
        uint64_t n = 0;
        std::memcpy(&n, bytes.data(), 8);
        std::string header = bytes.substr(8, n);   // {"__metadata__": {...}, tensors...}
        header.insert(h.in_metadata ? header.find('{', 1) + 1 : 1, h.insert);
        write_bytes(g_tmp_dir + "/header.safetensors", safetensors_bytes(header, bytes.substr(8 + n)));
        expect_refusal(h.what, g_tmp_dir + "/header.safetensors", h.expect);
    }
    // A shape whose element count overflows 64 bits (2^64 values: 0 in size_t) with offsets [0, 0].
    const std::string huge = "{\"x\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 0]}}";
    write_bytes(g_tmp_dir + "/huge.safetensors", safetensors_bytes(huge, ""));
    expect_refusal("a 2^64-value shape", g_tmp_dir + "/huge.safetensors", "has a shape too large");
    // A checkpoint of another config, loaded into an initialised model.
    Model other;
    Config cfg2 = cfg;
    cfg2.d_ff = 32;
    model_init(&other, cfg2, 3);
    expect_refusal("another config", good, "d_ff: 32 vs 24", &other);
    // Writing: a destination that is not a regular file is refused and left as it was.
    const std::string fifo = g_tmp_dir + "/fifo.safetensors";
    struct stat st;
    bool made = mkfifo(fifo.c_str(), 0600) == 0;
    bool saved = checkpoint_save(a, fifo, {}, false, &err);
    check(made && !saved && err.find("not a regular file") != std::string::npos &&
              stat(fifo.c_str(), &st) == 0 && S_ISFIFO(st.st_mode),
          "refuses to write over a FIFO, which stays a FIFO -> \"%s\"", err.c_str());
}

// toolkit/numbers.h, which reads checkpoint metadata and every integer option: the whole text
// digits (after an allowed sign), a value past the type's range told apart from a non-number.
static void decimal_numbers() {
    struct Case {
        const char* text;
        const char* signs;
        Decimal want;
        long long value;   // int64_t's reading when ok
    };
    const Case cases[] = {
        {"0", "", Decimal::ok, 0},
        {"42", "", Decimal::ok, 42},
        {"9223372036854775807", "", Decimal::ok, INT64_MAX},
        {"9223372036854775808", "", Decimal::out_of_range, 0},
        {"99999999999999999999", "", Decimal::out_of_range, 0},
        {"-3", "", Decimal::not_a_number, 0},
        {"+7", "", Decimal::not_a_number, 0},
        {"-3", "-", Decimal::ok, -3},
        {"+7", "-", Decimal::not_a_number, 0},
        {"+7", "+-", Decimal::ok, 7},
        {"-9223372036854775808", "+-", Decimal::ok, INT64_MIN},
        {"-9223372036854775809", "+-", Decimal::out_of_range, 0},
        {"", "+-", Decimal::not_a_number, 0},
        {"-", "+-", Decimal::not_a_number, 0},
        {" 7", "+-", Decimal::not_a_number, 0},
        {"7 ", "+-", Decimal::not_a_number, 0},
        {"0x10", "+-", Decimal::not_a_number, 0},
        {"1e3", "+-", Decimal::not_a_number, 0},
        {"--1", "+-", Decimal::not_a_number, 0},
    };
    for (const Case& c : cases) {
        int64_t v = 12345;
        const Decimal got = parse_decimal(std::string(c.text), &v, c.signs);
        const bool ok = got == c.want && (got == Decimal::ok ? v == c.value : v == 12345);
        check(ok, "parse_decimal<int64_t>(\"%s\", signs \"%s\"): result %d (want %d), value %lld", c.text, c.signs,
              (int)got, (int)c.want, (long long)v);
    }
    // the type's own range: an unsigned type refuses a negative, a narrow one its overflow
    uint64_t u = 1;
    Decimal got = parse_decimal(std::string("-1"), &u, "-");
    check(got == Decimal::out_of_range && u == 1, "parse_decimal<uint64_t>(\"-1\"): result %d, value left (%llu)",
          (int)got, (unsigned long long)u);
    got = parse_decimal(std::string("18446744073709551615"), &u, "");
    check(got == Decimal::ok && u == UINT64_MAX, "parse_decimal<uint64_t>(\"18446744073709551615\"): 2^64 - 1 (%llu)",
          (unsigned long long)u);
    int i = 1;
    got = parse_decimal(std::string("2147483648"), &i, "");
    check(got == Decimal::out_of_range && i == 1, "parse_decimal<int>(\"2147483648\"): result %d, value left (%d)",
          (int)got, i);
    got = parse_decimal(std::string("-2147483648"), &i, "-");
    check(got == Decimal::ok && i == INT32_MIN, "parse_decimal<int>(\"-2147483648\"): INT_MIN (%d)", i);
    const std::string with_nul("\0" "5", 2);   // a NUL is not a sign
    check(parse_decimal(with_nul, &i, "+-") == Decimal::not_a_number, "parse_decimal(\"\\0" "5\"): not a number");
}

int main(int argc, char** argv) {
    if (argc > 1) g_ref_dir = argv[1];
    char tmpl[] = "/tmp/test_core.XXXXXX";
    g_tmp_dir = mkdtemp(tmpl);
    for (const char* name : {"post_ln", "post_ln_nols", "pre_ln", "learned_pos", "dk_dv", "enc_dec_depth"})
        compare_case(name);
    std::printf("-- finite differences\n");
    finite_difference_check("post-LN sinusoid", small_config(false, false));
    finite_difference_check("pre-LN learned", small_config(true, true));
    Config drop = small_config(false, false);
    drop.p_drop = 0.1f, drop.p_attn_drop = 0.1f, drop.p_relu_drop = 0.1f;
    finite_difference_check("with dropout", drop);
    std::printf("-- the classifier in chunks\n");
    classifier_chunks();
    classifier_memory();
    std::printf("-- dropout\n");
    dropout_checks();
    std::printf("-- the op profiler (model/profile.h)\n");
    Config profiled = small_config(false, false);
    profiled.p_drop = 0.1f, profiled.p_attn_drop = 0.1f, profiled.p_relu_drop = 0.1f;
    profiled_step_checks("CPU", [] { return make_cpu_backend(); }, profiled, small_batch(profiled.vocab, 5), 7);
    profiled_decode_checks("CPU", [] { return make_cpu_backend(); }, small_config(false, false),
                           {{5, 9, 14, 3, EOS_ID}, {7, 7, EOS_ID}, {11, 4, 8, 20, 6, 12, 4, EOS_ID}});
    profile_work_counted();
    profile_table();
    std::printf("-- gradient clipping\n");
    gradient_clipping();
    std::printf("-- checkpoints\n");
    checkpoint_round_trip();
    checkpoint_averaging();
    checkpoint_listing();
    presets_are_table3();
    config_bounds();
    config_round_trip();
    checkpoint_file_layout();
    checkpoint_refusals();
    safetensors_dtypes();
    safetensors_headers();
    std::printf("-- decimal numbers (toolkit/numbers.h)\n");
    decimal_numbers();
    std::string cmd = "rm -rf " + g_tmp_dir;
    if (std::system(cmd.c_str()) != 0) std::printf("warning: could not remove %s\n", g_tmp_dir.c_str());
    return check_summary("core");
}
