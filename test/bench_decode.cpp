// test/bench_decode.cpp — decoding speed, the benchmark of the train/translate issue.
// test/bench.sh runs it beside test/bench_torch.py decode (same config, same shapes).
//
//   build/bench_decode [--model FILE]
// Without --model: the small config with random weights, 200 source sentences of 20 tokens
// (19 + </s>) in one batch, every hypothesis forced to exactly 20 output tokens (</s> is never
// chosen, as in bench_torch.py), greedy and beam 4. Prints:
//   ours decode greedy|beam4 tokens_per_s=.. ms=..
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "cli/options.h"
#include "decode.h"

int main(int argc, char** argv) {
    std::string model_path;
    int sentences = 200, length = 20, repeats = 3;
    Options o("bench_decode", "Times batched greedy and beam-4 decoding.");
    o.add("--model", &model_path, "checkpoint (default: small config, random weights)", "FILE");
    o.add("--sentences", &sentences, "source sentences in the batch");
    o.add("--length", &length, "source tokens (incl. </s>) and forced output tokens");
    o.add("--repeats", &repeats, "timed runs (the median is printed)");
    if (!o.parse(argc, argv)) return o.exit_code();
    Model m;
    std::string err;
    if (!model_path.empty()) {
        if (!checkpoint_load(&m, model_path, nullptr, &err)) { std::fprintf(stderr, "%s\n", err.c_str()); return 1; }
    } else {
        Config c;
        config_preset("small", &c);
        model_init(&m, c, 1);
    }
    std::vector<std::vector<int>> sources(sentences);
    uint64_t s = 1;
    for (auto& src : sources) {
        for (int j = 0; j + 1 < length; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            src.push_back(4 + (int)((s >> 33) % (m.cfg.vocab - 4)));
        }
        src.push_back(EOS_ID);
    }
    for (int beam : {1, 4}) {
        DecodeOptions opt;
        opt.beam = beam;
        opt.force_length = length;
        std::vector<double> ms;
        for (int r = 0; r < repeats; r++) {
            auto t0 = std::chrono::steady_clock::now();
            decode_batch(&m, sources, opt);
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(ms.begin(), ms.end());
        double med = ms[ms.size() / 2];
        std::printf("ours decode %s tokens_per_s=%.0f ms=%.1f\n", beam == 1 ? "greedy" : "beam4",
                    (double)sentences * length / (med / 1000), med);
        std::fflush(stdout);
    }
    return 0;
}
