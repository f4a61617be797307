// test/train_case.h — a small model and its training steps for the tests of a device's
// precisions: the config, random batches, one Adam step, the bf16 loss curve against fp32 and
// resume bitwise equal to an uninterrupted run. test_cuda runs them on the GPU, test_train on
// the CPU (whose bf16 takes the linear layers' products on bf16 operands).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "model/checkpoint.h"
#include "numerics.h"
#include "test/check.h"
#include "test/model_buffers.h"
#include "transformer.h"

// A device's backend for a precision ("fp32", "bf16"), or nullptr after a SKIP line.
using BackendFor = std::function<std::unique_ptr<Backend>(const char* precision)>;

// A small post-LN model with every dropout on (the masks are the shared generator's, so both
// devices drop the same elements), pre-LN and learned positions in the second config.
inline Config small_config(bool pre_ln) {
    Config c;
    c.n_enc = 2, c.n_dec = 2, c.d_model = 64, c.d_ff = 96, c.n_heads = 4, c.d_k = 16, c.d_v = 12;
    c.vocab = 61, c.max_len = 32, c.pre_ln = pre_ln, c.learned_pos = pre_ln;
    c.p_drop = 0.1f, c.p_attn_drop = 0.1f, c.p_relu_drop = 0.1f, c.label_smoothing = 0.1f;
    return c;
}

// B sentence pairs of random lengths (odd sizes, padding in both sides).
inline Batch random_batch(const Config& c, int B, uint64_t seed) {
    uint64_t s = seed;
    auto draw = [&](int n) { return (int)(splitmix64_next(&s) % (uint64_t)n); };
    std::vector<int> src_len(B), tgt_len(B);
    Batch b;
    b.B = B;
    for (int i = 0; i < B; i++) {
        src_len[i] = 2 + draw(13), tgt_len[i] = 2 + draw(11);
        b.S = std::max(b.S, src_len[i]);
        b.T = std::max(b.T, tgt_len[i]);
    }
    b.src.assign((size_t)B * b.S, PAD_ID);
    b.tgt_in.assign((size_t)B * b.T, PAD_ID);
    b.labels.assign((size_t)B * b.T, PAD_ID);
    for (int i = 0; i < B; i++) {
        for (int j = 0; j < src_len[i]; j++) b.src[(size_t)i * b.S + j] = j + 1 < src_len[i] ? 4 + draw(c.vocab - 4) : EOS_ID;
        b.tgt_in[(size_t)i * b.T] = BOS_ID;
        for (int j = 0; j < tgt_len[i]; j++) {
            const int t = j + 1 < tgt_len[i] ? 4 + draw(c.vocab - 4) : EOS_ID;
            b.labels[(size_t)i * b.T + j] = t;
            if (j + 1 < tgt_len[i]) b.tgt_in[(size_t)i * b.T + j + 1] = t;
        }
    }
    for (int t : b.src) b.src_tokens += t != PAD_ID;
    for (int t : b.labels) b.tgt_tokens += t != PAD_ID;
    return b;
}

inline void train_step(Model* m, const Batch& b, float* loss) {
    model_zero_grad(m);
    *loss = model_forward_backward(m, b);
    adam_update(m, learning_rate(m->cfg, m->step + 1, 1.0, 10));
}

// bf16 against fp32 on `device` over `steps` steps of the same batches: the curves must stay
// close.
inline void bf16_loss_curve(const BackendFor& backend, const char* device, int steps) {
    const Config c = small_config(false);
    Model f32, b16;
    f32.backend = backend("fp32");
    b16.backend = backend("bf16");
    if (!f32.backend || !b16.backend) return;
    model_init(&f32, c, 9);
    model_init(&b16, c, 9);
    double max_diff = 0, tail_diff = 0;
    float first = 0, last_f = 0, last_b = 0;
    for (int s = 0; s < steps; s++) {
        const Batch b = random_batch(c, 16, 1000 + s % 8);   // 8 batches, revisited: the loss falls
        train_step(&f32, b, &last_f);
        train_step(&b16, b, &last_b);
        if (s == 0) first = last_f;
        max_diff = std::max(max_diff, (double)std::fabs(last_f - last_b));
        if (s >= steps * 3 / 4) tail_diff += std::fabs(last_f - last_b) / (steps - steps * 3 / 4);
    }
    check(last_f < first - 0.5, "fp32 on the %s learns: loss %.3f -> %.3f over %d steps", device, first, last_f, steps);
    check(max_diff > 0 && max_diff < 0.25 && tail_diff < 0.1,
          "%s bf16 loss curve within 0.25 of fp32's at every step (max %.4f; above 0: bf16 is not fp32) "
          "and 0.1 on average over the last quarter (%.4f); final %.4f vs %.4f", device, max_diff, tail_diff,
          last_b, last_f);
}

// A run saved after `half` steps (6 by default) and resumed for as many more equals the
// uninterrupted run, bit for bit.
inline void resume_is_bitwise(const BackendFor& backend, const char* device, const char* precision, int half = 6) {
    const Config c = small_config(false);
    Model a, b, r;
    a.backend = backend(precision);
    b.backend = backend(precision);
    r.backend = backend(precision);
    if (!a.backend || !b.backend || !r.backend) return;
    model_init(&a, c, 3);
    model_init(&b, c, 3);
    float loss;
    for (int s = 0; s < 2 * half; s++) train_step(&a, random_batch(c, 9, 50 + s), &loss);
    for (int s = 0; s < half; s++) train_step(&b, random_batch(c, 9, 50 + s), &loss);
    char tmpl[] = "/tmp/train_case.XXXXXX";
    const std::string dir = mkdtemp(tmpl), path = dir + "/ckpt.safetensors";
    std::string err;
    check(checkpoint_save(b, path, {}, true, &err), "%s: save on the %s (%s)", precision, device, err.c_str());
    check(checkpoint_load(&r, path, nullptr, &err), "%s: load on the %s (%s)", precision, device, err.c_str());
    for (int s = half; s < 2 * half; s++) train_step(&r, random_batch(c, 9, 50 + s), &loss);
    check(same_bits(host_params(a), host_params(r)) && same_bits(host_adam(a), host_adam(r)),
          "%s: %d steps + save + load + %d steps == %d steps on the %s (parameters and Adam state bitwise)",
          precision, half, half, 2 * half, device);
    Model again;
    again.backend = backend(precision);
    model_init(&again, c, 3);
    for (int s = 0; s < 2 * half; s++) train_step(&again, random_batch(c, 9, 50 + s), &loss);
    check(same_bits(host_params(a), host_params(again)), "%s: two runs of %d steps on the %s are bitwise equal",
          precision, 2 * half, device);
    std::remove(path.c_str());
    std::remove(dir.c_str());
}
