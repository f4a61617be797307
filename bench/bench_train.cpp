// bench/bench_train.cpp — speed of one full training step (forward, backward, Adam) on a fixed
// synthetic batch, the benchmark of the core issue. bench/bench.sh runs it beside
// bench/bench_torch.py (the PyTorch reference, same configs, same batch shape) and prints the
// ratio.
//
//   build/bench_train --config tiny|small|base [--steps N]
// Prints: ours train CONFIG ms_per_step=.. tokens_per_s=.. matmul_gflops=.. peak_rss_mb=..
// Batches: 164 sentence pairs of 25 source and 25 target tokens (4,100 + 4,100), base: 82.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/options.h"
#include "transformer.h"

static Batch synthetic_batch(int pairs, int len, int vocab) {
    Batch b;
    b.B = pairs, b.S = len, b.T = len;
    b.src.resize((size_t)pairs * len);
    b.tgt_in.resize(b.src.size());
    b.labels.resize(b.src.size());
    uint64_t s = 1;
    auto tok = [&] { s = s * 6364136223846793005ull + 1442695040888963407ull; return 4 + (int)((s >> 33) % (vocab - 4)); };
    for (int i = 0; i < pairs; i++) {
        for (int j = 0; j < len; j++) {
            b.src[(size_t)i * len + j] = j + 1 == len ? EOS_ID : tok();
            b.labels[(size_t)i * len + j] = j + 1 == len ? EOS_ID : tok();
        }
        b.tgt_in[(size_t)i * len] = BOS_ID;
        for (int j = 1; j < len; j++) b.tgt_in[(size_t)i * len + j] = b.labels[(size_t)i * len + j - 1];
    }
    b.src_tokens = b.tgt_tokens = pairs * len;
    return b;
}

// Multiply-adds x 2 of every matrix product of one forward pass (attention products included,
// the causal ones counted in full as computed); a training step is 3x (forward + 2 backward).
static double forward_matmul_flops(const Config& c, const Batch& b) {
    const double d = c.d_model, qk = c.n_heads * c.d_k, vv = c.n_heads * c.d_v, ff = c.d_ff;
    const double rs = (double)b.B * b.S, rt = (double)b.B * b.T;
    double enc = rs * (d * (2 * qk + vv) + vv * d + 2 * d * ff) + rs * b.S * (qk + vv);
    double dec = rt * (d * (2 * qk + vv) + vv * d + b.T * (qk + vv))          // self-attention
               + rt * (d * qk + vv * d + b.S * (qk + vv)) + rs * d * (qk + vv)  // cross-attention
               + rt * 2 * d * ff;                                               // FFN
    return 2.0 * (c.n_enc * enc + c.n_dec * dec + rt * d * c.vocab);
}

int main(int argc, char** argv) {
    std::string name = "tiny";
    int steps = 0;
    Options o("bench_train", "Times full training steps on a fixed synthetic batch.");
    o.add("--config", &name, "tiny, small or base", "NAME");
    o.add("--steps", &steps, "timed steps (0: 5, base 3)");
    if (!o.parse(argc, argv)) return o.exit_code();
    Config c;
    if (!config_preset(name, &c) || name == "big") {
        std::fprintf(stderr, "bench_train: unknown config %s\n", name.c_str());
        return 2;
    }
    if (steps <= 0) steps = name == "base" ? 3 : 5;
    const int pairs = name == "base" ? 82 : 164;
    Batch batch = synthetic_batch(pairs, 25, c.vocab);
    Model m;
    model_init(&m, c, 1);
    std::vector<double> ms;
    for (int i = 0; i < steps + 2; i++) {   // 2 warm-up steps
        auto t0 = std::chrono::steady_clock::now();
        model_zero_grad(&m);
        model_forward(&m, batch, true);
        model_backward(&m, batch);
        adam_update(&m, learning_rate(c, m.step + 1, 1.0, 4000));
        double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (i >= 2) ms.push_back(dt);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double tokens = batch.src_tokens + batch.tgt_tokens;
    std::printf("ours train %s ms_per_step=%.1f tokens_per_s=%.0f matmul_gflops=%.1f peak_rss_mb=%.0f params=%zu\n",
                name.c_str(), med, tokens / (med / 1000), 3 * forward_matmul_flops(c, batch) / (med / 1000) / 1e9,
                ru.ru_maxrss / 1024.0, m.layout.total);
    return 0;
}
