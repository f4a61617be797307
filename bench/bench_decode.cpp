// bench/bench_decode.cpp — decoding speed, the benchmark of the train/translate issue.
// bench/bench.sh decode and bench/bench_translate.sh run it beside bench/bench_torch.py decode
// (same config, same weights, same token ids).
//
//   build/bench_decode [--model FILE | --config NAME] [--input IDS] [--output PREFIX]
//                      [--device cpu|cuda] [--precision fp32|int8|bf16] [--warmup N]
//                      [--searches greedy,beam4]
// Without --input: 200 source sentences of 20 tokens (19 + </s>) in one batch (--sentences,
// --length), every hypothesis forced to exactly as many output tokens (</s> is never chosen,
// as in bench_torch.py), greedy and beam 4, the median of --repeats runs. Without --model: the
// --config preset (default small) with random weights.
// With --input (lines of token ids, e.g. from `bpe encode`): the real thing, as ./translate
// does it: sorted by length, batches of --batch-tokens padded source tokens (by default as many as
// ./translate takes for the search, decode.h's default_batch_tokens), max length
// a * len + b; one timed run; --output writes the hypotheses (ids) to PREFIX.greedy and
// PREFIX.beam4; on the GPU then a second pass, whose time says what the first spent once.
// --warmup N: before each timed search, the same search on the first N sources (input order)
// in one batch, untimed (bench_torch.py and bench_ct2.py take the same option, so that
// bench_translate.sh warms every decoder up alike). --searches: the searches to time (default
// greedy,beam4), one per process when bench_translate.sh checks the load before each.
// Prints:
//   ours decode greedy|beam4 tokens_per_s=.. ms=.. sentences_per_s=..
//   # batches greedy|beam4: the sentences of each batch decode_sorted made (--input), in order
//   # warm-up greedy|beam4: N sentences in one batch (--warmup)
// --profile: then greedy and beam 4 once more with every op timed (model/profile.h), as
// "# profile" lines under a "# profile greedy|beam4" heading: each op's ms a decoding run, its
// share of the unprofiled run, TFLOP/s and GB/s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/profile.h"
#include "cli/openmp_wait.h"
#include "cli/options.h"
#include "toolkit/decode.h"
#include "toolkit/thread_governor.h"

static std::vector<std::vector<int>> synthetic_sources(int sentences, int length, int vocab) {
    std::vector<std::vector<int>> sources(sentences);
    uint64_t s = 1;
    for (auto& src : sources) {
        for (int j = 0; j + 1 < length; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            src.push_back(4 + (int)((s >> 33) % (vocab - 4)));
        }
        src.push_back(EOS_ID);
    }
    return sources;
}

// Lines of token ids; </s> appended when missing (an empty line stays empty).
static bool read_sources(const std::string& path, int vocab, std::vector<std::vector<int>>* out) {
    std::ifstream f(path);
    if (!f) { std::fprintf(stderr, "bench_decode: cannot read %s\n", path.c_str()); return false; }
    std::string line;
    while (std::getline(f, line)) {
        std::istringstream ss(line);
        std::vector<int> ids;
        for (int id; ss >> id;) {
            if (id < 0 || id >= vocab) { std::fprintf(stderr, "bench_decode: %s: id %d out of range\n", path.c_str(), id); return false; }
            ids.push_back(id);
        }
        if (!ids.empty() && ids.back() != EOS_ID) ids.push_back(EOS_ID);
        out->push_back(ids);
    }
    return true;
}

static void write_hypotheses(const std::string& path, const std::vector<std::vector<Hypothesis>>& hyps) {
    std::ofstream f(path);
    for (const auto& h : hyps) {
        std::string line;
        for (int id : h[0].tokens)
            if (id != EOS_ID) line += (line.empty() ? "" : " ") + std::to_string(id);
        f << line << "\n";
    }
}

static double milliseconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int main(int argc, char** argv) {
    std::string model_path, input, output, precision = "fp32", device = "cpu", config = "small";
    int sentences = 200, length = 20, repeats = 3, batch_tokens = 0, cache_steps = 0, warmup = 0;
    std::string searches = "greedy,beam4";
    bool profile = false;
    Options o("bench_decode", "Times batched greedy and beam-4 decoding.");
    o.add("--model", &model_path, "checkpoint (default: the --config preset, random weights)", "FILE");
    o.add("--config", &config, "without --model: tiny, small, base or big, random weights", "NAME");
    o.add("--input", &input, "lines of source token ids (default: synthetic, forced length)", "FILE");
    o.add("--output", &output, "with --input: write hypotheses to PREFIX.greedy, PREFIX.beam4", "PREFIX");
    o.add("--precision", &precision, "fp32, int8 (CPU) or bf16 (the GPU's; on the CPU bf16 products)", "fp32|int8|bf16");
    o.add("--device", &device, "cpu or cuda", "cpu|cuda");
    o.add("--sentences", &sentences, "synthetic: source sentences in the batch");
    o.add("--length", &length, "synthetic: source tokens (incl. </s>) and forced output tokens");
    o.add("--repeats", &repeats, "synthetic: timed runs (the median is printed)");
    o.add("--batch-tokens", &batch_tokens, "with --input: padded source tokens per batch (0: ./translate's default for the search)");
    o.add("--cache-steps", &cache_steps, "steps of R rows the decoding cache starts with (0: the device's choice, -1: the GPU's on any "
          "device, a large number: the length limit's at once)");
    o.add("--warmup", &warmup, "before each timed search, that search on the first N sources in one batch, untimed");
    o.add("--searches", &searches, "the searches to time: greedy, beam4 or both, comma-separated", "LIST");
    o.add_flag("--profile", &profile, "then each search once more timed op by op (\"# profile\" lines)");
    if (!o.parse(argc, argv)) return o.exit_code();
    Model m;
    std::string err;
    m.backend = make_backend(device, precision, &err);
    if (!m.backend) { std::fprintf(stderr, "bench_decode: %s\n", err.c_str()); return 1; }
    if (!model_path.empty()) {
        if (!checkpoint_load(&m, model_path, nullptr, &err, false)) { std::fprintf(stderr, "%s\n", err.c_str()); return 1; }
    } else {
        Config c;
        if (!config_preset(config, &c)) { std::fprintf(stderr, "bench_decode: unknown --config %s\n", config.c_str()); return 2; }
        model_init(&m, c, 1);
    }
    m.decode_cache_steps = cache_steps;
    if (precision == "int8" && !model_quantize(&m, &err)) { std::fprintf(stderr, "%s\n", err.c_str()); return 1; }
    if (precision != "int8") model_pack_weights(&m);   // as ./translate

    std::vector<std::vector<int>> sources;
    if (input.empty()) sources = synthetic_sources(sentences, length, m.cfg.vocab);
    else if (!read_sources(input, m.cfg.vocab, &sources)) return 1;
    // One decoding run of the sources (forced length when synthetic, as ./translate otherwise).
    auto batch_tokens_for = [&](const DecodeOptions& opt) {
        return batch_tokens > 0 ? batch_tokens : default_batch_tokens(*m.backend, opt.beam);
    };
    std::vector<int> batch_sizes;
    auto decode = [&](const DecodeOptions& opt) {
        auto hyps = input.empty() ? decode_batch(&m, sources, opt)
                                  : decode_sorted(&m, sources, opt, batch_tokens_for(opt), nullptr, &batch_sizes);
        m.backend->synchronize();
        return hyps;
    };
    std::vector<int> beams;
    for (std::stringstream ss(searches); ss.good();) {
        std::string s;
        std::getline(ss, s, ',');
        if (s == "greedy" || s == "beam4") beams.push_back(s == "greedy" ? 1 : 4);
        else if (!s.empty()) { std::fprintf(stderr, "bench_decode: --searches: greedy or beam4, not '%s'\n", s.c_str()); return 2; }
    }
    if (beams.empty()) { std::fprintf(stderr, "bench_decode: --searches names no search\n"); return 2; }
    std::vector<double> median_ms;
    for (int beam : beams) {
        DecodeOptions opt;
        opt.beam = beam;
        if (input.empty()) opt.force_length = length;
        const char* label = beam == 1 ? "greedy" : "beam4";
        if (warmup > 0) {   // untimed: the same search on the first sources, one batch
            std::vector<std::vector<int>> first;
            for (const auto& src : sources)
                if ((int)first.size() < warmup && !src.empty()) first.push_back(src);
            if (!first.empty()) decode_batch(&m, first, opt);
            m.backend->synchronize();
            std::printf("# warm-up %s: %zu sentences in one batch\n", label, first.size());
        }
        std::vector<double> ms;
        std::vector<std::vector<Hypothesis>> hyps;
        for (int r = 0; r < (input.empty() ? repeats : 1); r++) {
            auto t0 = std::chrono::steady_clock::now();
            hyps = decode(opt);
            ms.push_back(milliseconds_since(t0));
        }
        if (!input.empty() && !output.empty()) write_hypotheses(output + "." + label, hyps);
        if (!input.empty()) {
            std::printf("# batches %s:", label);
            for (int n : batch_sizes) std::printf(" %d", n);
            std::printf("\n");
        }
        std::sort(ms.begin(), ms.end());
        const double med = ms[ms.size() / 2];
        median_ms.push_back(med);
        size_t tokens = 0;
        for (const auto& h : hyps) tokens += h[0].tokens.size();
        const std::string batches = input.empty() ? "one batch" : "batches of " + std::to_string(batch_tokens_for(opt)) + " source tokens";
        std::printf("ours decode %s tokens_per_s=%.0f ms=%.1f sentences_per_s=%.1f  # %s, %zu sentences in %s, %zu output tokens, %s\n",
                    label, tokens / (med / 1000), med, sources.size() / (med / 1000), precision.c_str(),
                    sources.size(), batches.c_str(), tokens, m.backend->describe().c_str());
        // On the GPU, the input again: the first pass's one-time costs (each new product shape's
        // cuBLASLt plan, allocations) are the difference; ./translate pays them once a run.
        if (!input.empty() && m.backend->device() == Device::CUDA) {
            auto t0 = std::chrono::steady_clock::now();
            decode(opt);
            const double again = milliseconds_since(t0);
            std::printf("# %s, a second pass over the same input: ms=%.1f sentences_per_s=%.1f (the first pass "
                        "spent %.1f ms more)\n", label, again, sources.size() / (again / 1000), med - again);
        }
        const std::string governed = governor_summary();
        if (!governed.empty()) std::printf("# %s: %s\n", label, governed.c_str());
        const ActivationBytes mem = model_activation_bytes(&m);
        std::printf("# memory after %s: arena %.1f MB, decoding cache %.1f MB, search %.1f MB", label,
                    mem.arena / 1e6, mem.cache / 1e6, mem.search / 1e6);
        if (m.backend->peak_memory()) std::printf("; device peak %.1f MB", m.backend->peak_memory() / 1e6);
        std::printf("\n");
        std::fflush(stdout);
    }
    if (profile) {
        ProfiledBackend* p = profile_model(&m);
        for (size_t i = 0; i < beams.size(); i++) {
            DecodeOptions opt;
            opt.beam = beams[i];
            if (input.empty()) opt.force_length = length;
            p->reset();
            decode(opt);
            std::printf("# profile %s\n", beams[i] == 1 ? "greedy" : "beam4");
            profile_print(stdout, p->report(), 1, median_ms[i], "run");
        }
    }
    return 0;
}
