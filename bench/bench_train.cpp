// bench/bench_train.cpp — speed of full training steps (forward, backward, Adam) on a fixed
// synthetic batch, on the CPU or the GPU. bench/bench.sh runs it beside bench/bench_torch.py
// (the PyTorch reference, same configs, same batch shape) and prints the ratio.
//
//   build/bench_train --config tiny|small|base|big [--steps N] [--device cpu|cuda]
//                     [--precision fp32|bf16] [--tokens N] [--accum K] [--profile]
//                     [--warmup N] [--no-peak]   (bench/ncu_kernels.sh: one step, nothing else)
// Prints: ours train CONFIG ms_per_step=.. tokens_per_s=.. matmul_gflops=.. peak_rss_mb=..
// and on the GPU also peak_gpu_mb=.., mfu_dense=.. (against the bf16 dense peak, 989 TFLOP/s
// on an H100 SXM) and mfu_measured=.. (against a large cuBLAS product timed in the same run);
// its comment ends "W warm-up steps, the median of S" (bench/bench_train_gpu.sh compares them).
// --profile: then one more step with every op timed (model/profile.h), as "# profile" lines:
// each op's ms a step, its share of the unprofiled step, TFLOP/s and GB/s.
// Batches: sentence pairs of 25 source and 25 target tokens; on the CPU 164 pairs (4,100 +
// 4,100 tokens), base 82; --tokens sets the source tokens per step (the paper: 25,000),
// split over --accum micro-batches.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/device_fill.h"
#include "cli/openmp_wait.h"
#include "cli/options.h"
#include "model/profile.h"
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

// TFLOP/s of one large product (8192^3, random data) through the backend's linear_forward: the
// peak this device reaches for matrix work in its precision.
static double measured_peak_tflops(Backend& ops) {
    const int n = 8192;
    floatX* a = random_floatx(ops, (size_t)n * n);
    floatX* b = random_floatx(ops, (size_t)n * n);
    floatX* c = (floatX*)ops.alloc((size_t)n * n * ops.floatx_size());
    ops.linear_forward(c, a, b, nullptr, n, n, n);   // warm-up
    ops.synchronize();
    const int reps = 10;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; i++) ops.linear_forward(c, a, b, nullptr, n, n, n);
    ops.synchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ops.release(a);
    ops.release(b);
    ops.release(c);
    return 2.0 * n * n * (double)n * reps / s / 1e12;
}

int main(int argc, char** argv) {
    std::string name = "tiny", device = "cpu", precision;
    int steps = 0, tokens = 0, accum = 1, chunk_rows = 0, warmup = 2;
    bool profile = false, no_peak = false;
    Options o("bench_train", "Times full training steps on a fixed synthetic batch.");
    o.add("--config", &name, "tiny, small, base or big", "NAME");
    o.add("--steps", &steps, "timed steps (0: 5, base and big 3)");
    o.add("--warmup", &warmup, "untimed steps before them");
    o.add("--device", &device, "cpu or cuda", "cpu|cuda");
    o.add("--precision", &precision, "fp32 or bf16 (default: the device's)", "fp32|bf16");
    o.add("--tokens", &tokens, "source tokens per step (0: 4,100, base 2,050 on the CPU)");
    o.add("--accum", &accum, "micro-batches per step");
    o.add("--logit-chunk-rows", &chunk_rows, "rows of logits the classifier takes at once (0: the model's, 2^26 logits)");
    o.add_flag("--profile", &profile, "then one more step timed op by op (\"# profile\" lines)");
    o.add_flag("--no-peak", &no_peak, "on the GPU, leave out the large product that measures the peak (and the MFU against it)");
    if (!o.parse(argc, argv)) return o.exit_code();
    Config c;
    if (!config_preset(name, &c) || accum < 1 || tokens < 0 || chunk_rows < 0 || warmup < 0) {
        std::fprintf(stderr, "bench_train: unknown config %s, or bad --tokens/--accum/--logit-chunk-rows/--warmup\n", name.c_str());
        return 2;
    }
    const bool large = name == "base" || name == "big";
    if (steps <= 0) steps = large ? 3 : 5;
    if (tokens == 0) tokens = large ? 2050 : 4100;
    const int pairs = std::max(1, tokens / 25 / accum);
    Batch batch = synthetic_batch(pairs, 25, c.vocab);
    Model m;
    std::string err;
    m.backend = make_backend(device, precision, &err);
    if (!m.backend) {
        std::fprintf(stderr, "bench_train: %s\n", err.c_str());
        return 1;
    }
    model_init(&m, c, 1);
    m.logit_chunk_rows = chunk_rows;
    auto train_step = [&] {
        model_zero_grad(&m);
        for (int a = 0; a < accum; a++) model_forward_backward(&m, batch, (double)batch.tgt_tokens * accum);
        adam_update(&m, learning_rate(c, m.step + 1, 1.0, 4000));
    };
    std::vector<double> ms;
    for (int i = 0; i < steps + warmup; i++) {
        auto t0 = std::chrono::steady_clock::now();
        train_step();
        m.backend->synchronize();
        double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (i >= warmup) ms.push_back(dt);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double step_tokens = (double)(batch.src_tokens + batch.tgt_tokens) * accum;
    const double flops = 3 * forward_matmul_flops(c, batch) * accum / (med / 1000);
    std::printf("ours train %s ms_per_step=%.1f tokens_per_s=%.0f matmul_gflops=%.1f peak_rss_mb=%.0f params=%zu",
                name.c_str(), med, step_tokens / (med / 1000), flops / 1e9, ru.ru_maxrss / 1024.0, m.layout.total);
    if (m.backend->device() == Device::CUDA) {
        // the steps' peak, read before the large product below adds its own operands to it
        std::printf(" peak_gpu_mb=%.0f mfu_dense=%.3f", m.backend->peak_memory() / 1e6, flops / 989e12);
        if (!no_peak) {
            const double peak = measured_peak_tflops(*m.backend);
            std::printf(" measured_peak_tflops=%.0f mfu_measured=%.3f", peak, flops / (peak * 1e12));
        }
    }
    std::printf("  # %s, %d pairs x %d micro-batches of 25 + 25 tokens, logits %d rows at a time, %d warm-up steps, "
                "the median of %d\n", m.backend->describe().c_str(), pairs, accum, model_logit_chunk_rows(&m, batch.B * batch.T),
                warmup, steps);
    if (profile) {
        ProfiledBackend* p = profile_model(&m);
        train_step();
        profile_print(stdout, p->report(), 1, med);
        std::printf("# profile, the linear layers by shape (rows x in -> out):\n");
        profile_print(stdout, p->report(true), 1, med);
    }
    return 0;
}
