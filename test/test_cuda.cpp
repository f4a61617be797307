// test/test_cuda.cpp — the whole model on the GPU against the CPU: a training step (loss, every
// gradient, 10 Adam steps) in fp32 with dropout on, the classifier whole and in chunks, the
// bf16 loss curve against fp32 over 200 steps, resume bitwise equal to an uninterrupted run,
// and decoding on the GPU (the reference cases of test_decode, cached and recomputed; each
// sentence alone against the batch; an ensemble against the CPU's), and the op profiler (model/profile.h) on the GPU. The ops one
// by one are test_ops' work (build/test_ops --device cuda).
//
//   build/test_cuda [--quick] [--sanitize] [--part PART] [REF_DIR]
//     (make test runs it whole; make gpu-check also runs it with --quick, 40 steps of the loss
//     curve, and under compute-sanitizer with --sanitize a part at a time. PART: training (step:
//     the step against the CPU; resume; step-profile: the profiler), curve (bf16 against fp32:
//     the same kernels for more steps, so racecheck leaves it out), decoding (reference, alone,
//     ensemble, decode-profile) or one of the names in parentheses. --sanitize launches the
//     same kernels on the same paths fewer times: 2 Adam steps instead of 10, resume after 1
//     step instead of 6, 2 sentences decoded alone instead of all, the profiled decoding to
//     source length + 4 tokens instead of + 50. On an H100 racecheck took about 50 ms a kernel
//     launch (test_ops fp32: 598 launches in 40 s; the training part: about 6,000 launches in
//     313 s, cut there on 2026-11-28); CUDA_EMULATOR_LAUNCHES=1 counts a part's launches.)
// Without a GPU (or a CUDA build) it prints SKIP with the reason and its closing line counts
// nothing: a skip is never a pass.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "test/check.h"
#include "test/model_buffers.h"
#include "test/profile_check.h"
#include "test/train_case.h"
#include "test/ref_case.h"
#include "toolkit/decode.h"

static std::string g_ref_dir = "test/ref";
static int g_curve_steps = 200;
// How often the parts repeat their kernels: the whole test, or --sanitize's fewer times.
struct Repeats {
    int adam_steps = 10;                           // training_step_matches_cpu's Adam steps
    int resume_half = 6;                           // steps before the save, and after the load
    size_t alone_max = SIZE_MAX;                   // sentences decoded alone
    int decode_len_b = DecodeOptions().max_len_b;  // the profiled decoding's limit: source + b
};
static Repeats g_repeats;
static const Repeats kSanitizeRepeats = {2, 1, 2, 4};

static std::unique_ptr<Backend> gpu(const char* precision) {
    std::string err;
    std::unique_ptr<Backend> b = make_backend("cuda", precision, &err);
    if (!b) check_skip("%s: %s", precision, err.c_str());
    return b;
}

// fp32 on the GPU against the CPU: the first step's loss and every gradient, then the losses of
// 10 Adam steps (g_repeats) and the parameters after them. The pre-LN case cuts the
// classifier's logits into 13-row chunks on both devices (model_forward_backward), the post-LN
// one keeps them whole.
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
    for (int s = 0; s < g_repeats.adam_steps; s++) {
        float a, g;
        train_step(&cpu, b, &a);
        train_step(&dev, b, &g);
        losses_c.push_back(a);
        losses_g.push_back(g);
    }
    const std::string steps = std::to_string(g_repeats.adam_steps) + " Adam steps";
    check_close((std::string(label) + ": losses of " + steps + ", GPU vs CPU").c_str(), losses_g.data(),
                losses_c.data(), losses_c.size(), 1e-4);
    const std::vector<float> pc = host_params(cpu), pg = host_params(dev);
    for (const TensorInfo& t : cpu.layout.tensors) {
        if (t.name.find("k_proj.bias") != std::string::npos) continue;   // Adam on noise (test_core)
        check_close((std::string(label) + ": after " + steps + " " + t.name).c_str(), pg.data() + t.offset,
                    pc.data() + t.offset, t.numel, 1e-3);
    }
}

// test_decode's reference case on the GPU in fp32: the reference's tokens, log-probabilities
// within 1e-4, with the cache (as allocated, and grown from one step) and a full recompute.
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
        for (const char* mode : {"cached", "cached, grown from one step", "full recompute"}) {
            opt.recompute = mode[0] == 'f';
            m.decode_cache_steps = mode[6] == ',' ? 1 : 0;   // grown by steps: copies on the device
            auto got = decode_batch(&m, dc.sources, opt);
            int same = 0;
            std::vector<float> lp;
            for (size_t r = 0; r < dc.sources.size(); r++) {
                same += got[r][0].tokens == want[r];
                lp.push_back(got[r][0].logprob);
            }
            const std::string label = std::string("GPU fp32 ") + search + ", " + mode;
            check(same == (int)dc.sources.size(), "%s: tokens equal the reference for %d/%zu sentences",
                  label.c_str(), same, dc.sources.size());
            check_close((label + ": log-probabilities").c_str(), lp.data(), want_lp.data(), lp.size(), 1e-4);
        }
    }
}

// A sentence decoded alone equals the same sentence inside the batch on the GPU (fp32): the
// same tokens, the log-probability within 1e-5 (another batch size may take another cuBLAS
// algorithm), greedy and beam 4 with n-best 4; every sentence of the batch (the first
// g_repeats.alone_max).
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
        for (size_t i = 0; i < dc.sources.size() && i < g_repeats.alone_max; i++) {
            const auto alone = decode_batch(&m, {dc.sources[i]}, opt)[0];
            for (size_t j = 0; j < alone.size() && j < batched[i].size(); j++) {
                same_tokens += alone[j].tokens == batched[i][j].tokens;
                lp_alone.push_back(alone[j].logprob);
                lp_batched.push_back(batched[i][j].logprob);
            }
            hyps += std::max(alone.size(), batched[i].size());
        }
        check(same_tokens == hyps && hyps > 0,
              "GPU fp32 beam %d, n-best %d: each of %zu sentences alone gives the batch's hypotheses (%zu/%zu)",
              beam, beam, std::min(dc.sources.size(), g_repeats.alone_max), same_tokens, hyps);
        check_close(("GPU fp32 beam " + std::to_string(beam) + ": log-probabilities alone vs batched").c_str(),
                    lp_alone.data(), lp_batched.data(), lp_alone.size(), 1e-5);
    }
}

// An ensemble on the GPU (fp32): the reference model and a noisy copy of it give the n-best
// lists the same ensemble gives on the CPU (tokens equal, log-probabilities within 1e-4),
// cached and recomputed.
static void ensemble_decoding() {
    Model cpu_ref, cpu_noisy, gpu_ref, gpu_noisy;
    gpu_ref.backend = gpu("fp32");
    gpu_noisy.backend = gpu("fp32");
    DecodeCase dc, dc2, dc3;
    if (!gpu_ref.backend || !gpu_noisy.backend || !load_decode_case(g_ref_dir + "/decode.safetensors", &cpu_ref, &dc) ||
        !load_decode_case(g_ref_dir + "/decode.safetensors", &gpu_ref, &dc2) ||
        !load_decode_case(g_ref_dir + "/decode.safetensors", &gpu_noisy, &dc3))
        return;
    std::vector<float> p(cpu_ref.layout.total);
    model_get_params(&cpu_ref, p.data());
    uint64_t state = 7;
    for (float& x : p) x += 0.3f * ((float)((state = splitmix64(state)) >> 40) / 16777216.0f - 0.5f);
    model_init(&cpu_noisy, cpu_ref.cfg, 5);
    model_set_params(&cpu_noisy, p.data());
    model_set_params(&gpu_noisy, p.data());
    cpu_ref.ensemble = {&cpu_noisy};
    gpu_ref.ensemble = {&gpu_noisy};
    DecodeOptions opt = dc.opt;
    opt.nbest = opt.beam;
    const auto want = decode_batch(&cpu_ref, dc.sources, opt);
    for (bool recompute : {false, true}) {
        opt.recompute = recompute;
        const auto got = decode_batch(&gpu_ref, dc.sources, opt);
        size_t same = 0, hyps = 0;
        std::vector<float> lp_gpu, lp_cpu;
        for (size_t i = 0; i < want.size(); i++) {
            for (size_t j = 0; j < want[i].size() && j < got[i].size(); j++) {
                same += got[i][j].tokens == want[i][j].tokens;
                lp_gpu.push_back(got[i][j].logprob);
                lp_cpu.push_back(want[i][j].logprob);
            }
            hyps += std::max(want[i].size(), got[i].size());
        }
        const std::string label = std::string("GPU fp32 ensemble of 2, beam 4 n-best 4") + (recompute ? ", full recompute" : ", cached");
        check(same == hyps, "%s: the CPU ensemble's hypotheses (%zu/%zu)", label.c_str(), same, hyps);
        check_close((label + ": log-probabilities vs the CPU").c_str(), lp_gpu.data(), lp_cpu.data(), lp_gpu.size(), 1e-4);
    }
}

// The parts --part names: a group, or one of its members.
static const std::map<std::string, std::string> kPartGroup = {
    {"step", "training"},   {"resume", "training"}, {"step-profile", "training"}, {"curve", "curve"},
    {"reference", "decoding"}, {"alone", "decoding"}, {"ensemble", "decoding"}, {"decode-profile", "decoding"}};

int main(int argc, char** argv) {
    std::string part = "all";
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--quick") g_curve_steps = 40;
        else if (a == "--sanitize") g_repeats = kSanitizeRepeats;
        else if (a == "--part" && i + 1 < argc) part = argv[++i];
        else g_ref_dir = a;
    }
    const bool group = part == "all" || part == "training" || part == "decoding";
    if (!group && !kPartGroup.count(part)) {
        std::fprintf(stderr, "test_cuda: --part is training (step, resume, step-profile), curve or decoding "
                             "(reference, alone, ensemble, decode-profile), not '%s'\n", part.c_str());
        return 2;
    }
    // in_part(NAME): NAME is the part asked for, or in its group.
    auto in_part = [&](const char* p) { return part == "all" || part == p || part == kPartGroup.at(p); };
    std::string why;
    if (!make_backend("cuda", "fp32", &why)) {
        check_skip("test_cuda: %s", why.c_str());
        return check_summary("cuda");
    }
    if (in_part("step")) {
        std::printf("-- training step, GPU fp32 vs CPU\n");
        training_step_matches_cpu(false);
        training_step_matches_cpu(true);
    }
    if (in_part("resume")) {
        std::printf("-- resume\n");
        resume_is_bitwise(gpu, "GPU", "fp32", g_repeats.resume_half);
        resume_is_bitwise(gpu, "GPU", "bf16", g_repeats.resume_half);
    }
    if (in_part("step-profile")) {
        std::printf("-- the op profiler (model/profile.h) on the GPU, a training step\n");
        for (const char* precision : {"fp32", "bf16"})
            profiled_step_checks(std::string("GPU ") + precision, [&] { return gpu(precision); }, small_config(false),
                                 random_batch(small_config(false), 7, 13), 9);
    }
    if (in_part("curve")) {
        std::printf("-- bf16 vs fp32 loss curve\n");
        bf16_loss_curve(gpu, "GPU", g_curve_steps);
    }
    if (in_part("reference")) {
        std::printf("-- decoding: the reference cases\n");
        reference_decoding();
    }
    if (in_part("alone")) {
        std::printf("-- decoding: alone vs batched\n");
        alone_equals_batched();
    }
    if (in_part("ensemble")) {
        std::printf("-- decoding: an ensemble\n");
        ensemble_decoding();
    }
    if (in_part("decode-profile")) {
        std::printf("-- the op profiler on the GPU, decoding\n");
        profiled_decode_checks("GPU fp32", [&] { return gpu("fp32"); }, small_config(false),
                               {{5, 9, 14, 3, EOS_ID}, {7, 7, EOS_ID}, {11, 4, 8, 20, 6, 12, 4, EOS_ID}},
                               g_repeats.decode_len_b);
    }
    return check_summary("cuda");
}
