// test/test_decode.cpp — greedy and beam search against the PyTorch reference decoder
// (test/ref/decode.safetensors: a small model the reference trained on a copy task, decoded
// one sentence at a time with a full recompute), the incremental cache against a full
// recompute, batched against one sentence at a time, and a model trained here on a copy task.
//
//   make test   (or build/test_decode [REF_DIR], from the repository root)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "test/check.h"
#include "toolkit/decode.h"
#include "test/ref_case.h"

static std::string g_ref_dir = "test/ref";

static std::string tokens_text(const std::vector<int>& t) {
    std::string s;
    for (int x : t) s += (s.empty() ? "" : " ") + std::to_string(x);
    return s;
}

// Decodes `sources` and compares tokens exactly and log-probabilities within 1e-4 relative.
static void compare_decoding(Model* m, const std::vector<std::vector<int>>& sources,
                             const DecodeOptions& opt, const char* label,
                             const std::vector<std::vector<int>>& want_tokens,
                             const std::vector<float>& want_logprob) {
    std::vector<std::vector<Hypothesis>> got = decode_batch(m, sources, opt);
    int token_matches = 0;
    std::vector<float> logprob;
    for (size_t i = 0; i < sources.size(); i++) {
        const Hypothesis& h = got[i][0];
        bool same = h.tokens == want_tokens[i];
        token_matches += same;
        if (!same)
            std::printf("  sentence %zu: ours [%s] reference [%s]\n", i, tokens_text(h.tokens).c_str(),
                        tokens_text(want_tokens[i]).c_str());
        logprob.push_back(h.logprob);
    }
    check(token_matches == (int)sources.size(), "%s: tokens equal the reference for %d/%zu sentences",
          label, token_matches, sources.size());
    check_close((std::string(label) + ": log-probabilities").c_str(), logprob.data(), want_logprob.data(),
                logprob.size(), 1e-4);
}

// Int8 inference (model_quantize) approximates fp32: on the reference case, most sentences must
// give the reference's tokens, with log-probabilities close to fp32's (per token: the error
// adds up along a sentence), and the int8 cache must still equal the int8 full recompute.
// Prints what differs.
static void int8_decoding(Model* m, const std::vector<std::vector<int>>& sources, DecodeOptions opt,
                          const std::vector<std::vector<int>>& greedy, const std::vector<float>& greedy_lp,
                          const std::vector<std::vector<int>>& beam, const std::vector<float>& beam_lp) {
    std::printf("-- int8 inference (model_quantize) on the reference case\n");
    std::string err;
    check(model_quantize(m, &err), "model_quantize (%s)", err.c_str());
    for (int k : {1, opt.beam}) {
        opt.beam = k;
        const auto& want = k == 1 ? greedy : beam;
        const auto& want_lp = k == 1 ? greedy_lp : beam_lp;
        std::vector<std::vector<Hypothesis>> got = decode_batch(m, sources, opt);
        opt.recompute = true;
        std::vector<std::vector<Hypothesis>> full = decode_batch(m, sources, opt);
        opt.recompute = false;
        int same = 0, cache_same = 0;
        double max_lp_diff = 0, max_cache_diff = 0;
        for (size_t i = 0; i < sources.size(); i++) {
            const Hypothesis& h = got[i][0];
            cache_same += h.tokens == full[i][0].tokens;
            max_cache_diff = std::max(max_cache_diff, (double)std::fabs(h.logprob - full[i][0].logprob));
            if (h.tokens != want[i]) {
                std::printf("  int8 beam %d, sentence %zu: [%s] fp32 reference [%s]\n", k, i,
                            tokens_text(h.tokens).c_str(), tokens_text(want[i]).c_str());
                continue;
            }
            same++;
            max_lp_diff = std::max(max_lp_diff, std::fabs(h.logprob - want_lp[i]) / (double)h.tokens.size());
        }
        const int n = (int)sources.size();
        check(same >= n - 2 && max_lp_diff < 0.02,
              "int8 beam %d: %d/%d sentences give the fp32 reference's tokens (>= %d), their log-probabilities "
              "within %.4f per token (< 0.02)", k, same, n, n - 2, max_lp_diff);
        check(cache_same == n && max_cache_diff < 1e-3,
              "int8 beam %d: cache == full recompute for %d/%d sentences, log-probabilities within %.2e (< 1e-3)",
              k, cache_same, n, max_cache_diff);
    }
    model_dequantize(m);
}

static void reference_decoding() {
    Model m;
    DecodeCase dc;
    if (!load_decode_case(g_ref_dir + "/decode.safetensors", &m, &dc)) return;
    const std::vector<std::vector<int>>& sources = dc.sources;
    const std::vector<std::vector<int>>& greedy = dc.greedy;
    const std::vector<std::vector<int>>& beam = dc.beam;
    const int rows = (int)sources.size();
    DecodeOptions opt = dc.opt;
    int finished = 0, at_limit = 0;
    for (size_t i = 0; i < beam.size(); i++) {
        bool eos = !beam[i].empty() && beam[i].back() == EOS_ID;
        finished += eos;
        at_limit += !eos;
    }
    std::printf("-- reference decoding: %d sentences (beam: %d end with </s>, %d stop at the length limit)\n",
                rows, finished, at_limit);
    check(finished > 0 && at_limit > 0, "the reference case has sentences that finish early and that hit the limit");
    opt.beam = 1;
    compare_decoding(&m, sources, opt, "greedy, cached, batched", greedy, dc.greedy_logprob);
    opt.recompute = true;
    compare_decoding(&m, sources, opt, "greedy, full recompute", greedy, dc.greedy_logprob);
    opt.recompute = false;
    opt.beam = dc.opt.beam;
    compare_decoding(&m, sources, opt, "beam 4, cached, batched", beam, dc.beam_logprob);
    opt.recompute = true;
    compare_decoding(&m, sources, opt, "beam 4, full recompute", beam, dc.beam_logprob);
    opt.recompute = false;
    // One sentence at a time must give the same as the batch.
    std::vector<std::vector<int>> single_tokens;
    std::vector<float> single_scores;
    for (const auto& s : sources) {
        Hypothesis h = decode_batch(&m, {s}, opt)[0][0];
        single_tokens.push_back(h.tokens);
        single_scores.push_back(h.score);
    }
    compare_decoding(&m, sources, opt, "beam 4 batched vs one at a time", single_tokens,
                     [&] { std::vector<float> v; for (const auto& s : sources) v.push_back(decode_batch(&m, {s}, opt)[0][0].logprob); return v; }());
    std::vector<float> score;
    for (const auto& hs : decode_batch(&m, sources, opt)) score.push_back(hs[0].score);
    check_close("beam 4: length-normalised scores", score.data(), dc.beam_score.data(), score.size(), 1e-4);
    int8_decoding(&m, sources, opt, greedy, dc.greedy_logprob, beam, dc.beam_logprob);
}

// ---------------------------------------------------------------------------------------------
// Cache vs recompute on a random pre-LN model with learned positions and d_k != d_v.
static void cache_matches_recompute() {
    Config c;
    c.n_enc = 2, c.n_dec = 3, c.d_model = 24, c.d_ff = 40, c.n_heads = 3, c.d_k = 5, c.d_v = 7;
    c.vocab = 30, c.max_len = 40, c.pre_ln = true, c.learned_pos = true, c.p_drop = 0.1f;
    Model m;
    model_init(&m, c, 9);
    std::vector<std::vector<int>> sources = {{5, 6, 7, 3}, {9, 3}, {10, 11, 12, 13, 14, 15, 3}};
    for (int beam : {1, 3}) {
        DecodeOptions opt;
        opt.beam = beam;
        opt.nbest = beam;
        opt.max_len_b = 6;
        std::vector<std::vector<Hypothesis>> a = decode_batch(&m, sources, opt);
        opt.recompute = true;
        std::vector<std::vector<Hypothesis>> b = decode_batch(&m, sources, opt);
        bool same = true;
        double max_diff = 0;
        for (size_t i = 0; i < sources.size(); i++) {
            same = same && a[i].size() == b[i].size();
            for (size_t j = 0; same && j < a[i].size(); j++) {
                same = a[i][j].tokens == b[i][j].tokens;
                max_diff = std::max(max_diff, (double)std::fabs(a[i][j].logprob - b[i][j].logprob));
            }
        }
        check(same && max_diff < 1e-4, "random pre-LN model, beam %d n-best: cache == full recompute (max logprob diff %.2e)", beam, max_diff);
    }
}

// ---------------------------------------------------------------------------------------------
// A model trained here for a few hundred steps on copying random sequences must solve it.
static uint64_t g_rng = 12345;
static int rand_int(int n) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((g_rng >> 33) % (uint64_t)n);
}

static std::vector<int> random_sequence(int vocab) {
    std::vector<int> s(1 + rand_int(8));
    for (int& t : s) t = 4 + rand_int(vocab - 4);
    return s;
}

static Batch copy_batch(int B, int vocab) {
    std::vector<std::vector<int>> seqs(B);
    for (auto& s : seqs) s = random_sequence(vocab);
    Batch b;
    b.B = B;
    for (auto& s : seqs) b.S = std::max(b.S, (int)s.size() + 1);
    b.T = b.S;
    b.src.assign((size_t)B * b.S, PAD_ID);
    b.tgt_in.assign((size_t)B * b.T, PAD_ID);
    b.labels.assign((size_t)B * b.T, PAD_ID);
    for (int i = 0; i < B; i++) {
        const auto& s = seqs[i];
        for (size_t j = 0; j < s.size(); j++) {
            b.src[(size_t)i * b.S + j] = s[j];
            b.tgt_in[(size_t)i * b.T + j + 1] = s[j];
            b.labels[(size_t)i * b.T + j] = s[j];
        }
        b.src[(size_t)i * b.S + s.size()] = EOS_ID;
        b.tgt_in[(size_t)i * b.T] = BOS_ID;
        b.labels[(size_t)i * b.T + s.size()] = EOS_ID;
        b.src_tokens += (int)s.size() + 1;
        b.tgt_tokens += (int)s.size() + 1;
    }
    return b;
}

static void copy_task() {
    Config c;
    c.n_enc = c.n_dec = 2, c.d_model = 64, c.d_ff = 128, c.n_heads = 4, c.d_k = c.d_v = 16;
    c.vocab = 16, c.max_len = 32, c.p_drop = 0.0f, c.label_smoothing = 0.1f;
    Model m;
    model_init(&m, c, 2024);
    const int steps = 400;
    float loss = 0;
    for (int s = 0; s < steps; s++) {
        Batch b = copy_batch(64, c.vocab);
        model_zero_grad(&m);
        loss = model_forward(&m, b, true);
        if (getenv("COPY_VERBOSE") && s % 25 == 0) std::printf("step %d loss %.4f\n", s, loss);
        model_backward(&m, b);
        adam_update(&m, learning_rate(c, m.step + 1, 0.5, 100));
    }
    std::vector<std::vector<int>> sources, want;
    for (int i = 0; i < 100; i++) {
        std::vector<int> s = random_sequence(c.vocab);
        want.push_back(s);
        want.back().push_back(EOS_ID);
        s.push_back(EOS_ID);
        sources.push_back(s);
    }
    auto copied = [&](int beam) {   // sentences decoded exactly as their source
        DecodeOptions opt;
        opt.beam = beam;
        std::vector<std::vector<Hypothesis>> out = decode_batch(&m, sources, opt);
        int correct = 0;
        for (size_t i = 0; i < sources.size(); i++) correct += out[i][0].tokens == want[i];
        return correct;
    };
    for (int beam : {1, 4}) {
        const int correct = copied(beam);
        check(correct >= 95, "copy task after %d steps (final train loss %.3f), beam %d: %d/100 copied exactly (>= 95)",
              steps, loss, beam, correct);
    }
    std::string err;
    check(model_quantize(&m, &err), "model_quantize (%s)", err.c_str());
    for (int beam : {1, 4}) {
        const int correct = copied(beam);
        check(correct >= 90, "copy task, int8 inference, beam %d: %d/100 copied exactly (>= 90)", beam, correct);
    }
}

int main(int argc, char** argv) {
    if (argc > 1) g_ref_dir = argv[1];
    reference_decoding();
    std::printf("-- cache vs recompute\n");
    cache_matches_recompute();
    std::printf("-- copy task\n");
    copy_task();
    return check_summary("decode");
}
