// test/test_cuda.cpp — the whole model on the GPU against the CPU: a training step (loss, every
// gradient, 10 Adam steps) in fp32 with dropout on, the classifier whole and in chunks, the
// bf16 loss curve against fp32 over 200 steps, resume bitwise equal to an uninterrupted run,
// and decoding on the GPU (the reference cases of test_decode, cached and recomputed; each
// sentence alone against the batch), and the op profiler (model/profile.h) on the GPU. The ops one
// by one are test_ops' work (build/test_ops --device cuda).
//
//   build/test_cuda [--quick] [REF_DIR]   (make test runs it; make gpu-check also runs it with
//                                          --quick, 40 steps of the loss curve, under compute-sanitizer)
// Without a GPU (or a CUDA build) it prints SKIP with the reason and its closing line counts
// nothing: a skip is never a pass.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "test/check.h"
#include "test/model_buffers.h"
#include "test/profile_check.h"
#include "test/ref_case.h"
#include "toolkit/decode.h"

static std::string g_ref_dir = "test/ref";
static int g_curve_steps = 200;

static std::unique_ptr<Backend> gpu(const char* precision) {
    std::string err;
    std::unique_ptr<Backend> b = make_backend("cuda", precision, &err);
    if (!b) check_skip("%s: %s", precision, err.c_str());
    return b;
}

// A small post-LN model with every dropout on (the masks are the shared generator's, so both
// devices drop the same elements), pre-LN and learned positions in the second config.
static Config small_config(bool pre_ln) {
    Config c;
    c.n_enc = 2, c.n_dec = 2, c.d_model = 64, c.d_ff = 96, c.n_heads = 4, c.d_k = 16, c.d_v = 12;
    c.vocab = 61, c.max_len = 32, c.pre_ln = pre_ln, c.learned_pos = pre_ln;
    c.p_drop = 0.1f, c.p_attn_drop = 0.1f, c.p_relu_drop = 0.1f, c.label_smoothing = 0.1f;
    return c;
}

// B sentence pairs of random lengths (odd sizes, padding in both sides).
static Batch random_batch(const Config& c, int B, uint64_t seed) {
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

static void train_step(Model* m, const Batch& b, float* loss) {
    model_zero_grad(m);
    *loss = model_forward_backward(m, b);
    adam_update(m, learning_rate(m->cfg, m->step + 1, 1.0, 10));
}

// fp32 on the GPU against the CPU: the first step's loss and every gradient, then the losses of
// 10 Adam steps and the parameters after them. The pre-LN case cuts the classifier's logits into
// 13-row chunks on both devices (model_forward_backward), the post-LN one keeps them whole.
static void training_step_matches_cpu(bool pre_ln) {
    const char* label = pre_ln ? "pre-LN, learned positions, logits in 13-row chunks" : "post-LN";
    const Config c = small_config(pre_ln);
    Model cpu, dev;
    dev.backend = gpu("fp32");
    if (!dev.backend) return;
    cpu.logit_chunk_rows = dev.logit_chunk_rows = pre_ln ? 13 : 0;
    model_init(&cpu, c, 5);
    model_init(&dev, c, 5);
    check(same_bits(host_params(cpu), host_params(dev)), "%s: initial parameters identical on both devices", label);
    const Batch b = random_batch(c, 7, 11);
    float lc = model_forward(&cpu, b, true), lg = model_forward(&dev, b, true);
    check_close((std::string(label) + ": fp32 loss, GPU vs CPU").c_str(), &lg, &lc, 1, 1e-5);
    model_zero_grad(&cpu);
    model_zero_grad(&dev);
    model_forward_backward(&cpu, b);
    model_forward_backward(&dev, b);
    const std::vector<float> gc = host_grads(cpu), gg = host_grads(dev);
    for (const TensorInfo& t : cpu.layout.tensors) {
        if (t.name.find("k_proj.bias") != std::string::npos) continue;   // exactly 0: noise only
        check_close((std::string(label) + ": gradient " + t.name).c_str(), gg.data() + t.offset,
                    gc.data() + t.offset, t.numel, 1e-4);
    }
    std::vector<float> losses_c, losses_g;
    for (int s = 0; s < 10; s++) {
        float a, g;
        train_step(&cpu, b, &a);
        train_step(&dev, b, &g);
        losses_c.push_back(a);
        losses_g.push_back(g);
    }
    check_close((std::string(label) + ": losses of 10 Adam steps, GPU vs CPU").c_str(), losses_g.data(),
                losses_c.data(), losses_c.size(), 1e-4);
    const std::vector<float> pc = host_params(cpu), pg = host_params(dev);
    for (const TensorInfo& t : cpu.layout.tensors) {
        if (t.name.find("k_proj.bias") != std::string::npos) continue;   // Adam on noise (test_core)
        check_close((std::string(label) + ": after 10 Adam steps " + t.name).c_str(), pg.data() + t.offset,
                    pc.data() + t.offset, t.numel, 1e-3);
    }
}

// bf16 against fp32 on the GPU over 200 steps (--quick: 40) of the same batches: the curves
// must stay close.
static void bf16_loss_curve() {
    const Config c = small_config(false);
    Model f32, b16;
    f32.backend = gpu("fp32");
    b16.backend = gpu("bf16");
    if (!f32.backend || !b16.backend) return;
    model_init(&f32, c, 9);
    model_init(&b16, c, 9);
    double max_diff = 0, tail_diff = 0;
    float first = 0, last_f = 0, last_b = 0;
    const int steps = g_curve_steps;
    for (int s = 0; s < steps; s++) {
        const Batch b = random_batch(c, 16, 1000 + s % 8);   // 8 batches, revisited: the loss falls
        train_step(&f32, b, &last_f);
        train_step(&b16, b, &last_b);
        if (s == 0) first = last_f;
        max_diff = std::max(max_diff, (double)std::fabs(last_f - last_b));
        if (s >= steps * 3 / 4) tail_diff += std::fabs(last_f - last_b) / (steps - steps * 3 / 4);
    }
    check(last_f < first - 0.5, "fp32 on the GPU learns: loss %.3f -> %.3f over %d steps", first, last_f, steps);
    check(max_diff < 0.25 && tail_diff < 0.1,
          "bf16 loss curve within 0.25 of fp32's at every step (max %.4f) and 0.1 on average over the "
          "last quarter (%.4f); final %.4f vs %.4f", max_diff, tail_diff, last_b, last_f);
}

// A run saved after 6 steps and resumed for 6 more equals 12 uninterrupted steps, bit for bit.
static void resume_is_bitwise(const char* precision) {
    const Config c = small_config(false);
    Model a, b, r;
    a.backend = gpu(precision);
    b.backend = gpu(precision);
    r.backend = gpu(precision);
    if (!a.backend || !b.backend || !r.backend) return;
    model_init(&a, c, 3);
    model_init(&b, c, 3);
    float loss;
    for (int s = 0; s < 12; s++) train_step(&a, random_batch(c, 9, 50 + s), &loss);
    for (int s = 0; s < 6; s++) train_step(&b, random_batch(c, 9, 50 + s), &loss);
    char tmpl[] = "/tmp/test_cuda.XXXXXX";
    const std::string dir = mkdtemp(tmpl), path = dir + "/ckpt.safetensors";
    std::string err;
    check(checkpoint_save(b, path, {}, true, &err), "%s: save on the GPU (%s)", precision, err.c_str());
    check(checkpoint_load(&r, path, nullptr, &err), "%s: load on the GPU (%s)", precision, err.c_str());
    for (int s = 6; s < 12; s++) train_step(&r, random_batch(c, 9, 50 + s), &loss);
    check(same_bits(host_params(a), host_params(r)) && same_bits(host_adam(a), host_adam(r)),
          "%s: 6 steps + save + load + 6 steps == 12 steps on the GPU (parameters and Adam state bitwise)",
          precision);
    Model again;
    again.backend = gpu(precision);
    model_init(&again, c, 3);
    for (int s = 0; s < 12; s++) train_step(&again, random_batch(c, 9, 50 + s), &loss);
    check(same_bits(host_params(a), host_params(again)), "%s: two runs of 12 steps are bitwise equal", precision);
    std::remove(path.c_str());
    std::remove(dir.c_str());
}

// test_decode's reference case on the GPU in fp32: the reference's tokens, log-probabilities
// within 1e-4, with the cache and with a full recompute.
static void reference_decoding() {
    Model m;
    m.backend = gpu("fp32");
    DecodeCase dc;
    if (!m.backend || !load_decode_case(g_ref_dir + "/decode.safetensors", &m, &dc)) return;
    DecodeOptions opt = dc.opt;
    for (int beam : {1, dc.opt.beam}) {
        opt.beam = beam;
        const char* search = beam == 1 ? "greedy" : "beam";
        const auto& want = beam == 1 ? dc.greedy : dc.beam;
        const auto& want_lp = beam == 1 ? dc.greedy_logprob : dc.beam_logprob;
        for (bool recompute : {false, true}) {
            opt.recompute = recompute;
            auto got = decode_batch(&m, dc.sources, opt);
            int same = 0;
            std::vector<float> lp;
            for (size_t r = 0; r < dc.sources.size(); r++) {
                same += got[r][0].tokens == want[r];
                lp.push_back(got[r][0].logprob);
            }
            const std::string label = std::string("GPU fp32 ") + search + (recompute ? ", full recompute" : ", cached");
            check(same == (int)dc.sources.size(), "%s: tokens equal the reference for %d/%zu sentences",
                  label.c_str(), same, dc.sources.size());
            check_close((label + ": log-probabilities").c_str(), lp.data(), want_lp.data(), lp.size(), 1e-4);
        }
    }
}

// A sentence decoded alone equals the same sentence inside the batch on the GPU (fp32): the
// same tokens, the log-probability within 1e-5 (another batch size may take another cuBLAS
// algorithm), greedy and beam 4 with n-best 4.
static void alone_equals_batched() {
    Model m;
    m.backend = gpu("fp32");
    DecodeCase dc;
    if (!m.backend || !load_decode_case(g_ref_dir + "/decode.safetensors", &m, &dc)) return;
    for (int beam : {1, 4}) {
        DecodeOptions opt = dc.opt;
        opt.beam = beam;
        opt.nbest = beam;
        const auto batched = decode_batch(&m, dc.sources, opt);
        size_t same_tokens = 0, hyps = 0;
        std::vector<float> lp_alone, lp_batched;
        for (size_t i = 0; i < dc.sources.size(); i++) {
            const auto alone = decode_batch(&m, {dc.sources[i]}, opt)[0];
            for (size_t j = 0; j < alone.size() && j < batched[i].size(); j++) {
                same_tokens += alone[j].tokens == batched[i][j].tokens;
                lp_alone.push_back(alone[j].logprob);
                lp_batched.push_back(batched[i][j].logprob);
            }
            hyps += std::max(alone.size(), batched[i].size());
        }
        check(same_tokens == hyps, "GPU fp32 beam %d, n-best %d: each sentence alone gives the batch's hypotheses (%zu/%zu)",
              beam, beam, same_tokens, hyps);
        check_close(("GPU fp32 beam " + std::to_string(beam) + ": log-probabilities alone vs batched").c_str(),
                    lp_alone.data(), lp_batched.data(), lp_alone.size(), 1e-5);
    }
}

int main(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        if (std::string(argv[i]) == "--quick") g_curve_steps = 40;
        else g_ref_dir = argv[i];
    }
    std::string why;
    if (!make_backend("cuda", "fp32", &why)) {
        check_skip("test_cuda: %s", why.c_str());
        return check_summary("cuda");
    }
    std::printf("-- training step, GPU fp32 vs CPU\n");
    training_step_matches_cpu(false);
    training_step_matches_cpu(true);
    std::printf("-- bf16 vs fp32 loss curve\n");
    bf16_loss_curve();
    std::printf("-- resume\n");
    resume_is_bitwise("fp32");
    resume_is_bitwise("bf16");
    std::printf("-- decoding\n");
    reference_decoding();
    alone_equals_batched();
    std::printf("-- the op profiler (model/profile.h) on the GPU\n");
    for (const char* precision : {"fp32", "bf16"})
        profiled_step_checks(std::string("GPU ") + precision, [&] { return gpu(precision); }, small_config(false),
                             random_batch(small_config(false), 7, 13), 9);
    return check_summary("cuda");
}
