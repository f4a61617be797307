// test/profile_check.h — model/profile.h's ProfiledBackend checked on one device (test_core on
// the CPU, test_cuda on the GPU or its emulator): a profiled training step is bitwise the
// unprofiled one, the report names the ops the step called as often as the model calls them,
// its times are non-negative and fit in the step's wall time, and the matrix FLOPs it sums op
// by op for a forward pass equal forward_matmul_flops, the count written out from the config;
// a profiled decoding gives the plain one's hypotheses and counts its steps' ops.
#pragma once
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "model/profile.h"
#include "test/check.h"
#include "test/model_buffers.h"
#include "toolkit/decode.h"

inline void profiled_step_checks(const std::string& label, const std::function<std::unique_ptr<Backend>()>& make,
                                 const Config& c, const Batch& b, int chunk_rows) {
    Model plain, prof;
    plain.backend = make();
    prof.backend = make();
    if (!plain.backend || !prof.backend) return;
    plain.logit_chunk_rows = prof.logit_chunk_rows = chunk_rows;
    model_init(&plain, c, 3);
    model_init(&prof, c, 3);
    ProfiledBackend* p = profile_model(&prof);
    auto step = [&](Model* m) {
        model_zero_grad(m);
        const float loss = model_forward_backward(m, b);
        adam_update(m, learning_rate(c, m->step + 1, 1.0, 10), 1.0);
        return loss;
    };
    const float loss_plain = step(&plain);
    const auto t0 = std::chrono::steady_clock::now();
    p->reset();   // the first op is timed from here
    const float loss_prof = step(&prof);
    prof.backend->synchronize();
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<OpProfile> ops = p->report();   // before the checks' own downloads
    check(loss_plain == loss_prof && same_bits(host_params(plain), host_params(prof)) &&
              same_bits(host_grads(plain), host_grads(prof)) && same_bits(host_adam(plain), host_adam(prof)),
          "%s: a profiled training step is bitwise the plain one (loss %.6f, parameters, gradients, Adam)",
          label.c_str(), loss_prof);

    std::map<std::string, OpProfile> by;
    double sum_ms = 0;
    bool times_ok = true;
    for (const OpProfile& o : ops) {
        by[o.op] = o;
        sum_ms += o.ms;
        times_ok = times_ok && std::isfinite(o.ms) && o.ms >= 0 && o.calls > 0;
    }
    check(times_ok && sum_ms <= wall_ms * 1.001 + 0.01,
          "%s: %zu ops timed, each >= 0 ms, %.2f ms in all within the step's %.2f ms", label.c_str(), ops.size(),
          sum_ms, wall_ms);
    const int rows = b.B * b.T, chunk = chunk_rows > 0 ? chunk_rows : rows;
    const long chunks = (rows + chunk - 1) / chunk, layers = c.n_enc + 2L * c.n_dec;
    check(by["adam_step"].calls == 1 && by["global_norm"].calls == 1 && by["crossentropy_forward_backward"].calls == chunks &&
              by["attention_forward"].calls == layers &&
              by["attention_backward"].calls == layers && by["embedding_forward"].calls == 2 &&
              by["embedding_backward"].calls == 2,
          "%s: the report counts the step's calls: adam_step %ld, global_norm %ld, crossentropy_forward_backward "
          "%ld (%ld chunks of %d rows), attention forward/backward %ld/%ld (%ld layers), embedding forward/"
          "backward %ld/%ld", label.c_str(), by["adam_step"].calls, by["global_norm"].calls,
          by["crossentropy_forward_backward"].calls, chunks, chunk,
          by["attention_forward"].calls, by["attention_backward"].calls, layers, by["embedding_forward"].calls,
          by["embedding_backward"].calls);

    p->reset();
    model_forward(&prof, b, false);
    double flops = 0;
    for (const OpProfile& o : p->report())
        if (o.op == "linear_forward" || o.op == "linear_relu_forward" || o.op == "attention_forward") flops += o.flops;
    const double want = forward_matmul_flops(c, b);   // model/profile.h: from the config alone
    check(std::fabs(flops - want) <= 1e-9 * want, "%s: a forward's matrix FLOPs as profiled %.6g, as counted from the "
          "config %.6g", label.c_str(), flops, want);
    // The step's: every product's backward computes the gradients of both its operands (each
    // linear layer's dX and dW, attention's dQ, dK and dV through the scores and the weights),
    // twice the forward's work, so the step is 3 times the forward (the MFU benchmarks count so).
    double step_flops = 0;
    for (const OpProfile& o : ops) step_flops += o.flops;
    check(std::fabs(step_flops - 3 * want) <= 1e-9 * want, "%s: a training step's matrix FLOPs as profiled %.6g, 3 times "
          "the forward's %.6g", label.c_str(), step_flops, want);
}

// A profiled decoding (greedy and beam 4, with the cache) gives bitwise the plain one's
// hypotheses, and the report counts the decoding ops as the decoder calls them: per step one
// logsoftmax_topk, and one self- and one cross-attention step per decoder layer. The model is
// untrained: it decodes to the length limit, source length + max_len_b.
inline void profiled_decode_checks(const std::string& label, const std::function<std::unique_ptr<Backend>()>& make,
                                   const Config& c, const std::vector<std::vector<int>>& sources,
                                   int max_len_b = DecodeOptions().max_len_b) {
    Model plain, prof;
    plain.backend = make();
    prof.backend = make();
    if (!plain.backend || !prof.backend) return;
    model_init(&plain, c, 5);
    model_init(&prof, c, 5);
    ProfiledBackend* p = profile_model(&prof);
    for (int beam : {1, 4}) {
        DecodeOptions opt;
        opt.beam = beam;
        opt.max_len_b = max_len_b;
        const auto want = decode_batch(&plain, sources, opt);
        p->reset();
        const auto got = decode_batch(&prof, sources, opt);
        bool same = want.size() == got.size();
        for (size_t i = 0; same && i < want.size(); i++) {
            same = want[i].size() == got[i].size();
            for (size_t j = 0; same && j < want[i].size(); j++)
                same = want[i][j].tokens == got[i][j].tokens && same_bits({want[i][j].logprob}, {got[i][j].logprob});
        }
        std::map<std::string, long> calls;
        for (const OpProfile& o : p->report()) calls[o.op] = o.calls;
        const long steps = calls["logsoftmax_topk"];
        check(same && steps > 0 && calls["attention_step_self"] == steps * c.n_dec &&
                  calls["attention_step_cross"] == steps * c.n_dec,
              "%s: a profiled decoding (beam %d, %zu sentences) gives bitwise the plain one's hypotheses; the report "
              "counts %ld steps (logsoftmax_topk), attention_step_self %ld and _cross %ld (%d decoder layers)",
              label.c_str(), beam, sources.size(), steps, calls["attention_step_self"],
              calls["attention_step_cross"], c.n_dec);
    }
}
