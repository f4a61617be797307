// bench/bench_attention.cpp — §3.2's attention alone (forward, then backward) at NMT lengths,
// with each of the CUDA backend's attention kernels (TRANSFORMER_ATTENTION): tiled and
// row-wise on CUDA cores, batched (the products by cuBLASLt on tensor cores), fused (one kernel
// a pass, the products by WMMA on tensor cores; bf16). It says which one the GPU should keep,
// length by length; make gpu-check runs it.
//
//   build/bench_attention [--device cuda] [--precision bf16] [--config base|big]
//                         [--tokens 25000] [--lengths 10,16,32,64,128] [--repeat 10]
//                         [--kernels tiled,rowwise,batched,fused]
// (--device cpu times the CPU's one attention, for comparison.)
// For each length L: the paper's batch of --tokens tokens as B = tokens / L sentences of L
// tokens, the config's heads and d_k, d_v; three attentions as the model calls them: the
// encoder's self-attention (key padding mask), the decoder's (causal) and the cross-attention,
// q, k and v at the columns of the model's projections. Each is timed between device events,
// --repeat calls in a row, after one untimed call. Prints a line per (kernels, L, attention):
//   ours attention kernels=K L=L kind=enc-self|dec-self|cross fwd_ms=.. bwd_ms=.. tflops=..
// (tflops: the four products' FLOPs of forward and backward over their time), then per L the
// total time of each kernel choice and its ratio to the tiled kernels.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/device_fill.h"
#include "cli/options.h"
#include "transformer.h"

namespace {

struct Timing {
    double fwd_ms = 0, bwd_ms = 0;
};

// Splits "a,b,c" at the commas.
std::vector<std::string> split(const std::string& list) {
    std::vector<std::string> out;
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

// One attention as model.cpp calls it: self-attention reads q, k, v from one (B*L, 2*H*dk +
// H*dv) projection; the cross-attention q from (B*L, H*dk) and k, v from (B*L, H*dk + H*dv).
Timing time_attention(Backend& ops, int B, int L, const Config& c, bool self, bool causal, int repeat) {
    const int qk = c.n_heads * c.d_k, vv = c.n_heads * c.d_v;
    AttentionShape s = self ? AttentionShape{B, L, L, c.n_heads, c.d_k, c.d_v, 2 * qk + vv, 0, 2 * qk + vv, qk, 2 * qk, causal}
                            : AttentionShape{B, L, L, c.n_heads, c.d_k, c.d_v, qk, 0, qk + vv, 0, qk, false};
    const size_t rows = (size_t)B * L, x = ops.floatx_size();
    floatX* kv = random_floatx(ops, rows * s.kv_stride, 1);
    floatX* q = self ? kv : random_floatx(ops, rows * s.q_stride, 2);
    floatX* dkv = (floatX*)ops.alloc(rows * s.kv_stride * x);
    floatX* dq = self ? dkv : (floatX*)ops.alloc(rows * s.q_stride * x);
    floatX* ctx = (floatX*)ops.alloc(rows * vv * x);
    floatX* dctx = random_floatx(ops, rows * vv, 3);
    float* probs = (float*)ops.alloc((size_t)B * c.n_heads * L * L * sizeof(float));
    std::vector<int> tokens(rows, 5);
    if (causal) for (int b = 0; b < B; b++) tokens[(size_t)b * L] = BOS_ID;
    int* keys = (int*)ops.alloc(rows * sizeof(int));
    ops.upload(keys, tokens.data(), rows * sizeof(int));
    const float p_attn = c.p_attn_drop;
    auto forward = [&] { ops.attention_forward(ctx, probs, q, kv, keys, s, p_attn, 7); };
    auto backward = [&] { ops.attention_backward(dq, dkv, dctx, probs, q, kv, s, p_attn, 7); };
    forward();   // untimed: cuBLASLt's heuristics, scratch buffers
    backward();
    ops.clear_marks();
    const int m0 = ops.time_mark();
    for (int i = 0; i < repeat; i++) forward();
    const int m1 = ops.time_mark();
    for (int i = 0; i < repeat; i++) backward();
    const int m2 = ops.time_mark();
    ops.synchronize();
    const Timing t{ops.time_between(m0, m1) / repeat, ops.time_between(m1, m2) / repeat};
    for (void* p : {(void*)kv, (void*)dkv, (void*)ctx, (void*)dctx, (void*)probs, (void*)keys}) ops.release(p);
    if (!self) {
        ops.release(q);
        ops.release(dq);
    }
    return t;
}

}  // namespace

int main(int argc, char** argv) {
    std::string device = "cuda", precision, config = "base", lengths = "10,16,32,64,128";
    std::string kernels = "tiled,rowwise,batched,fused";
    int tokens = 25000, repeat = 10;
    Options o("bench_attention", "Times the attention kernels alone at NMT lengths (TRANSFORMER_ATTENTION).");
    o.add("--device", &device, "cpu or cuda", "cpu|cuda");
    o.add("--precision", &precision, "fp32 or bf16 (default: the device's)", "fp32|bf16");
    o.add("--config", &config, "the heads and d_k, d_v of this preset", "tiny|small|base|big");
    o.add("--tokens", &tokens, "tokens of a batch (B = tokens / L sentences)", in_range(1, 1e7));
    o.add("--lengths", &lengths, "sentence lengths L, comma-separated", "L,L,...");
    o.add("--repeat", &repeat, "timed calls in a row", in_range(1, 1000));
    o.add("--kernels", &kernels, "TRANSFORMER_ATTENTION values: tiled, rowwise, batched, fused", "K,K,...");
    if (!o.parse(argc, argv)) return o.exit_code();
    Config c;
    if (!config_preset(config, &c)) {
        std::fprintf(stderr, "bench_attention: unknown --config %s\n", config.c_str());
        return 2;
    }
    std::vector<int> Ls;
    for (const std::string& l : split(lengths)) {
        const int L = std::atoi(l.c_str());
        if (L < 1 || L > 4096) {
            std::fprintf(stderr, "bench_attention: --lengths takes lengths in 1..4096, not '%s'\n", l.c_str());
            return 2;
        }
        Ls.push_back(L);
    }
    const std::vector<std::string> ks = device == "cpu" ? std::vector<std::string>{"cpu"} : split(kernels);
    if (Ls.empty() || ks.empty()) {
        std::fprintf(stderr, "bench_attention: --lengths and --kernels need at least one value\n");
        return 2;
    }
    const char* kinds[3] = {"enc-self", "dec-self", "cross"};
    std::map<std::pair<std::string, int>, double> total_ms;   // (kernels, L): all three, fwd + bwd
    for (const std::string& k : ks) {
        if (device == "cuda") setenv("TRANSFORMER_ATTENTION", k.c_str(), 1);
        std::string err;
        std::unique_ptr<Backend> ops = make_backend(device, precision, &err);
        if (!ops) {
            std::fprintf(stderr, "bench_attention: %s\n", err.c_str());
            return 1;
        }
        std::printf("# %s\n", ops->describe().c_str());
        for (int L : Ls) {
            const int B = std::max(1, tokens / L);
            for (int kind = 0; kind < 3; kind++) {
                const Timing t = time_attention(*ops, B, L, c, kind < 2, kind == 1, repeat);
                // the four products of the backward are twice the two of the forward
                const double flops = 3.0 * 2.0 * B * c.n_heads * (double)L * L * (c.d_k + c.d_v);
                std::printf("ours attention kernels=%s L=%d B=%d kind=%s fwd_ms=%.3f bwd_ms=%.3f tflops=%.2f\n",
                            k.c_str(), L, B, kinds[kind], t.fwd_ms, t.bwd_ms, flops / ((t.fwd_ms + t.bwd_ms) * 1e9));
                total_ms[{k, L}] += t.fwd_ms + t.bwd_ms;
            }
        }
        std::fflush(stdout);
    }
    std::printf("# per L: the three attentions' forward + backward, ms, and the ratio to %s\n", ks[0].c_str());
    for (int L : Ls) {
        std::printf("L=%-4d", L);
        for (const std::string& k : ks)
            std::printf("  %s %.3f ms (x%.2f)", k.c_str(), total_ms[{k, L}], total_ms[{ks[0], L}] / total_ms[{k, L}]);
        std::printf("\n");
    }
    return 0;
}
