// decode.cpp — batched greedy and beam search (see decode.h for the rules): the search's loop,
// its setup (length limits, length penalties), target prefixes, sampling, batching by length,
// and scoring. The model (model/model.cpp) runs the encoder once per batch and the decoder one
// position at a time over its cache; the choice among each step's candidates is a backend op
// (Backend::search_select, whose per-sentence rules are model/search.h), so the rows, their
// candidates and the finished hypotheses stay on the device until the batch ends.
#include "toolkit/decode.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "tokenizer.h"
#include "toolkit/numbers.h"
#include "toolkit/thread_governor.h"

bool parse_sampling(const std::string& s, DecodeOptions* d) {
    char* end = nullptr;
    const std::string value = s.size() > 5 ? s.substr(5) : "";
    int k = 0;
    if (s.rfind("topk:", 0) == 0) {
        if (parse_decimal(value, &k, "") != Decimal::ok || k < 1 || k > 1000000) return false;
        d->sample_topk = k, d->sample_topp = 1.0f;
    } else if (s.rfind("topp:", 0) == 0 && !value.empty()) {
        if (!decimal_text(value)) return false;   // as every number option: strtod also reads hex, spaces
        const double p = std::strtod(value.c_str(), &end);
        if (*end || !((float)p > 0 && p <= 1)) return false;   // 1e-50 is 0 as a float
        d->sample_topp = (float)p, d->sample_topk = 0;
    } else {
        return false;
    }
    d->sampling = true;
    return true;
}

// floor(a * length + b), at least 1. A decimal a is not exact in binary (0.29 is 0.28999...):
// the 1e-9 keeps 0.29 x 100 at 29 and 1.05 x 100 at 105 (test/reference.py computes the same).
int max_output_length(int source_length, const DecodeOptions& opt) {
    const double n = std::floor(opt.max_len_a * source_length + opt.max_len_b + 1e-9);
    return n < 1 ? 1 : (int)n;
}

// On the CPU a batch's rows already keep the cores busy, and what a larger batch costs is the
// working set of each step: the cross-attention's keys and values (B*S rows) and the cache
// (R rows a step), read every step from beyond L2. With fp32 products the products dominate
// and 4,000 tokens amortise the weights best (the test set on 2 Xeon cores, beam 4: 13.0-13.9 s
// against 13.9-14.6 at 2,000); int8's products are 4-6x faster, the attention's reads dominate,
// and a beam's batch of 2,000 tokens decodes faster (10,610-11,870 output tokens/s against
// 10,030-10,690 at 4,000, five runs each; beam 8 about 6% faster; greedy and bf16 the same
// within the noise at either size). A GPU needs thousands of rows a step to fill its
// multiprocessors (16,000 source tokens: about 500 sentences, 2,000 rows at beam 4; the base
// model's cache for them is about 2 GB in bf16); that figure is reasoned, not yet measured:
// make gpu-check's decoding benchmark times it.
constexpr int kCpuBatchTokens = 4000, kCpuInt8BeamBatchTokens = 2000, kGpuBatchTokens = 16000;
const char* const kDefaultBatchTokensText = "4000 on the CPU (2000 in int8 with a beam), 16000 on the GPU";

int default_batch_tokens(const Backend& backend, int beam) {
    if (backend.device() == Device::CUDA) return kGpuBatchTokens;
    return backend.precision() == Precision::INT8 && beam > 1 ? kCpuInt8BeamBatchTokens : kCpuBatchTokens;
}

float length_penalty(int n, float alpha) {
    return (float)std::pow((5.0 + n) / 6.0, (double)alpha);
}

// Every bit of the stream id counts: (seed, stream) is hashed first, then the step added and
// hashed again. (The version before hashed stream * 2^32 + step, which dropped the stream's
// high 32 bits: ./translate's lines 0 and 4,096 drew the same numbers.)
float sampling_uniform(uint64_t seed, uint64_t stream, int step) {
    const uint64_t x = splitmix64(splitmix64(splitmix64(seed) ^ splitmix64(stream)) + (uint64_t)(uint32_t)step);
    return (float)(x >> 40) * (1.0f / 16777216.0f);
}

namespace {

size_t prefix_size(const DecodeInputs* in, size_t i) {
    return in && !in->prefix.empty() ? in->prefix[i].size() : 0;
}

// The most output positions the model and its ensemble's members have (learned position
// tables end; sinusoids do not).
int output_position_limit(const Model* m) {
    int limit = INT32_MAX;
    if (m->cfg.learned_pos) limit = m->cfg.max_len;
    for (const Model* e : m->ensemble)
        if (e->cfg.learned_pos) limit = std::min(limit, e->cfg.max_len);
    return limit;
}

}  // namespace

SearchSetup search_setup(const Model* m, const std::vector<std::vector<int>>& sources,
                         const DecodeOptions& opt, const DecodeInputs* in) {
    SearchSetup setup;
    setup.beam = std::max(1, opt.beam);
    setup.nbest = std::max(1, opt.nbest);
    int longest = 1;
    for (size_t i = 0; i < sources.size(); i++) {
        int n = opt.force_length > 0 ? opt.force_length : max_output_length((int)sources[i].size(), opt);
        n = std::max(n, (int)prefix_size(in, i) + 1);
        n = std::min(n, output_position_limit(m));
        setup.max_len.push_back(n);
        longest = std::max(longest, n);
    }
    for (int n = 0; n <= longest; n++) setup.lp.push_back(length_penalty(n, opt.alpha));
    return setup;
}

namespace {

// Step t's forced tokens (a target prefix), row by row (PAD_ID: none); false when no
// sentence has a prefix token at t (then the rows' sentences are not even downloaded).
bool force_step(Model* m, const DecodeInputs* in, int t, size_t longest_prefix) {
    if ((size_t)t >= longest_prefix) return false;
    const std::vector<int> sentence = model_decode_row_sentences(m);
    std::vector<int> forced(sentence.size(), PAD_ID);
    for (size_t r = 0; r < sentence.size(); r++) {
        const size_t i = (size_t)sentence[r];
        if ((size_t)t < prefix_size(in, i)) forced[r] = in->prefix[i][t];
    }
    model_decode_force(m, forced);
    return true;
}

// Sampling: each row's candidate becomes a token drawn with the sentence's own random number.
void sample_step(Model* m, const DecodeInputs* in, int t, const DecodeOptions& opt) {
    const std::vector<int> sentence = model_decode_row_sentences(m);
    std::vector<float> u(sentence.size());
    for (size_t r = 0; r < u.size(); r++) {
        const size_t i = (size_t)sentence[r];
        const uint64_t stream = in && !in->stream.empty() ? in->stream[i] : i;
        u[r] = sampling_uniform(opt.seed, stream, t);
    }
    model_decode_sample(m, u, opt.temperature, opt.sample_topk, opt.sample_topp);
}

}  // namespace

// §6.1 Machine Translation: the search's loop. The model keeps the rows, their candidates and
// the bookkeeping on the device (model/search.h); a step here costs one download, the next
// row count, plus the rows' sentences when a prefix or sampling needs them.
std::vector<std::vector<Hypothesis>> decode_batch(Model* m,
                                                  const std::vector<std::vector<int>>& sources,
                                                  const DecodeOptions& opt, const DecodeInputs* in) {
    if (sources.empty()) return {};
    size_t longest_prefix = 0;
    for (size_t i = 0; i < sources.size(); i++) longest_prefix = std::max(longest_prefix, prefix_size(in, i));
    model_decode_begin(m, sources, search_setup(m, sources, opt, in), opt.recompute);
    const bool sampling = opt.sampling && opt.beam <= 1;
    const bool cpu = m->backend->device() == Device::CPU;
    for (int t = 0, rows = (int)sources.size(); rows > 0; t++) {
        if (cpu) govern_threads();   // fewer threads while the machine is busy (thread_governor.h)
        model_decode_step(m, t, opt.force_length > 0 ? EOS_ID : -1);
        force_step(m, in, t, longest_prefix);
        if (sampling) sample_step(m, in, t, opt);
        rows = model_decode_select(m, t);
    }
    return model_decode_results(m);
}

const char* const kNanLogprob =
    "the model's log-probabilities are not numbers (NaN): its activations overflow fp32, so its weights are "
    "finite but far too large (a damaged or diverged checkpoint); no translation printed from it";

long first_nan_logprob(const std::vector<Hypothesis>& hyps) {
    for (size_t i = 0; i < hyps.size(); i++)
        if (std::isnan(hyps[i].logprob) || std::isnan(hyps[i].score)) return (long)i;
    return -1;
}

long first_nan_logprob(const std::vector<std::vector<Hypothesis>>& hyps) {
    for (size_t i = 0; i < hyps.size(); i++)
        if (first_nan_logprob(hyps[i]) >= 0) return (long)i;
    return -1;
}

// A model batch of `count` sentences whose widest has `width` tokens fits batch_tokens padded
// tokens (count * width); one sentence always does (a wider one is decoded alone).
static bool batch_fits(size_t count, size_t width, int batch_tokens) {
    return count <= 1 || count * width <= (size_t)std::max(batch_tokens, 1);
}

std::vector<std::vector<Hypothesis>> decode_sorted(Model* m,
                                                   const std::vector<std::vector<int>>& sources,
                                                   const DecodeOptions& opt, int batch_tokens,
                                                   const DecodeInputs* in, std::vector<int>* batch_sizes) {
    std::vector<std::vector<Hypothesis>> results(sources.size());
    if (batch_sizes) batch_sizes->clear();
    std::vector<size_t> order;
    for (size_t i = 0; i < sources.size(); i++) {
        if (sources[i].empty()) results[i] = {Hypothesis{}};
        else order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
    for (size_t next = 0; next < order.size();) {
        // The next model batch, its longest source last (sorted): B * S <= batch_tokens. A dropped
        // source is asked about just before it would join one (its requester may have given up
        // while the batches before were decoded).
        std::vector<size_t> ids;
        for (; next < order.size(); next++) {
            const size_t i = order[next];
            if (in && in->dropped && in->dropped(i)) continue;
            if (!batch_fits(ids.size() + 1, sources[i].size(), batch_tokens)) break;
            ids.push_back(i);
        }
        if (ids.empty()) break;
        std::vector<std::vector<int>> batch;
        DecodeInputs batch_in;   // the batch's prefixes and streams (default: input indices)
        for (size_t i : ids) {
            batch.push_back(sources[i]);
            if (in && !in->prefix.empty()) batch_in.prefix.push_back(in->prefix[i]);
            batch_in.stream.push_back(in && !in->stream.empty() ? in->stream[i] : i);
        }
        if (batch_sizes) batch_sizes->push_back((int)ids.size());
        std::vector<std::vector<Hypothesis>> out = decode_batch(m, batch, opt, &batch_in);
        for (size_t k = 0; k < ids.size(); k++) results[ids[k]] = std::move(out[k]);
    }
    return results;
}

int eval_source_limit(const Model* m) {
    return std::min(output_position_limit(m) - 1, kEvalSourceTokens);   // room for </s>
}

std::vector<std::string> translate_lines(Model* m, const Tokenizer& tok,
                                         const std::vector<std::string>& lines,
                                         const DecodeOptions& opt, int batch_tokens, size_t* cut) {
    std::vector<std::vector<int>> sources = tok.encode_lines(lines);
    const size_t limit = (size_t)eval_source_limit(m);
    if (cut) *cut = 0;
    for (size_t i = 0; i < lines.size(); i++) {
        if (sources[i].empty()) continue;
        if (sources[i].size() > limit) {   // its first `limit` tokens
            sources[i].resize(limit);
            if (cut) (*cut)++;
        }
        sources[i].push_back(EOS_ID);
    }
    std::vector<std::vector<Hypothesis>> hyps = decode_sorted(m, sources, opt, batch_tokens);
    std::vector<std::string> out(lines.size());
    for (size_t i = 0; i < lines.size(); i++) out[i] = tok.decode_text(hyps[i][0].tokens);
    return out;
}

std::vector<JoinedHypothesis> join_pieces(const Tokenizer& tok, const std::vector<std::vector<Hypothesis>>& hyps,
                                          size_t first, size_t n, float alpha) {
    size_t entries = 1;
    for (size_t p = 0; p < n; p++) entries = std::max(entries, hyps[first + p].size());
    std::vector<JoinedHypothesis> out(entries);
    for (size_t j = 0; j < entries; j++) {
        for (size_t p = 0; p < n; p++) {
            const std::vector<Hypothesis>& piece = hyps[first + p];
            const Hypothesis& h = piece[std::min(j, piece.size() - 1)];
            tok.append_text(&out[j].text, h.tokens);
            out[j].logprob += h.logprob;
            out[j].tokens += (long)h.tokens.size();
        }
        out[j].score = n == 1 ? hyps[first][j].score : out[j].logprob / length_penalty((int)out[j].tokens, alpha);
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Scoring: teacher forcing over whole targets (model_score), batched like decoding.
static Batch score_batch(const std::vector<std::vector<int>>& sources,
                         const std::vector<std::vector<int>>& targets, const std::vector<size_t>& ids) {
    Batch b;
    b.B = (int)ids.size();
    for (size_t i : ids) {
        b.S = std::max(b.S, (int)sources[i].size());
        b.T = std::max(b.T, (int)targets[i].size() + 1);
    }
    b.src.assign((size_t)b.B * b.S, PAD_ID);
    b.tgt_in.assign((size_t)b.B * b.T, PAD_ID);
    b.labels.assign((size_t)b.B * b.T, PAD_ID);
    for (int r = 0; r < b.B; r++) {
        const std::vector<int>& s = sources[ids[r]];
        const std::vector<int>& y = targets[ids[r]];
        std::copy(s.begin(), s.end(), b.src.begin() + (size_t)r * b.S);
        b.tgt_in[(size_t)r * b.T] = BOS_ID;
        std::copy(y.begin(), y.end(), b.tgt_in.begin() + (size_t)r * b.T + 1);
        std::copy(y.begin(), y.end(), b.labels.begin() + (size_t)r * b.T);
        b.labels[(size_t)r * b.T + y.size()] = EOS_ID;
        b.src_tokens += (int)s.size();
        b.tgt_tokens += (int)y.size() + 1;
    }
    return b;
}

std::vector<Hypothesis> score_sorted(Model* m, const std::vector<std::vector<int>>& sources,
                                     const std::vector<std::vector<int>>& targets, float alpha,
                                     int batch_tokens, std::vector<std::vector<float>>* token_logp,
                                     std::vector<int>* batch_sizes) {
    std::vector<Hypothesis> results(sources.size());
    if (token_logp) token_logp->assign(sources.size(), {});
    if (batch_sizes) batch_sizes->clear();
    auto width = [&](size_t i) { return std::max(sources[i].size(), targets[i].size() + 1); };
    std::vector<size_t> order(sources.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return width(a) < width(b); });
    for (size_t begin = 0; begin < order.size();) {
        size_t end = begin + 1;
        while (end < order.size() && batch_fits(end + 1 - begin, width(order[end]), batch_tokens)) end++;
        std::vector<size_t> ids(order.begin() + begin, order.begin() + end);
        if (batch_sizes) batch_sizes->push_back((int)ids.size());
        Batch b = score_batch(sources, targets, ids);
        std::vector<float> logp;
        model_score(m, b, &logp);
        for (int r = 0; r < b.B; r++) {
            Hypothesis& h = results[ids[r]];
            h.tokens = targets[ids[r]];
            h.tokens.push_back(EOS_ID);
            const float* row = logp.data() + (size_t)r * b.T;
            for (size_t j = 0; j < h.tokens.size(); j++) h.logprob += row[j];   // in order, as the search adds
            h.score = h.logprob / length_penalty((int)h.tokens.size(), alpha);
            if (token_logp) (*token_logp)[ids[r]].assign(row, row + h.tokens.size());
        }
        begin = end;
    }
    return results;
}
