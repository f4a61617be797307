// decode.cpp — batched greedy and beam search (see decode.h for the rules): the search only.
// The model (model/model.cpp) runs the encoder once per batch and the decoder one position
// at a time over its cache, and hands back the top candidates (token, log-probability) of
// every hypothesis; this file chooses among them. A "row" is one alive hypothesis of one
// sentence at the current step; each hypothesis remembers the row it held, so the model can
// give a hypothesis that changed parent its ancestors' cache rows (model_decode_step).
#include "toolkit/decode.h"

#include <algorithm>
#include <cmath>

#include "tokenizer.h"

int max_output_length(int source_length, const DecodeOptions& opt) {
    int n = (int)(opt.max_len_a * source_length + opt.max_len_b);
    return n < 1 ? 1 : n;
}

float length_penalty(int n, float alpha) {
    return (float)std::pow((5.0 + n) / 6.0, (double)alpha);
}

float sampling_uniform(uint64_t seed, uint64_t stream, int step) {
    const uint64_t x = splitmix64(splitmix64(seed) ^ splitmix64(stream * 0x100000000ull + (uint64_t)step));
    return (float)(x >> 40) * (1.0f / 16777216.0f);
}

namespace {

struct Hyp {
    std::vector<int> tokens;
    float logprob = 0;
    int row = -1;   // the row this hypothesis held at the last step (its cache entries)
};

struct Sentence {
    int max_len = 0;
    std::vector<Hyp> alive;
    std::vector<Hypothesis> finished;   // sorted by score, best first
    bool done = false;
};

// The candidates of one step: k per row, best first (token -1: none).
struct Candidates {
    int k = 0;
    std::vector<int> token;      // (n, k)
    std::vector<float> logp;     // (n, k)
};

void add_finished(Sentence* s, const std::vector<int>& tokens, float logprob, float alpha) {
    Hypothesis h{tokens, logprob, logprob / length_penalty((int)tokens.size(), alpha)};
    auto pos = std::upper_bound(s->finished.begin(), s->finished.end(), h,
                                [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    s->finished.insert(pos, h);   // stable: after equal scores
}

// §6.1 Machine Translation: beam search (the paper: beam 4, length penalty alpha 0.6). One
// step for one sentence; `first_row` is the row of its first alive hypothesis.
void beam_select(Sentence* s, const Candidates& c, int first_row, int V, int t,
                 const DecodeOptions& opt) {
    const int k = opt.beam;
    struct Cand { float score; long key; int i, w; };
    std::vector<Cand> cands;
    for (int i = 0; i < (int)s->alive.size(); i++) {
        const size_t r = (size_t)(first_row + i) * c.k;
        for (int j = 0; j < c.k && c.token[r + j] >= 0; j++) {
            const int w = c.token[r + j];
            cands.push_back({s->alive[i].logprob + c.logp[r + j], (long)i * V + w, i, w});
        }
    }
    std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
        return a.score != b.score ? a.score > b.score : a.key < b.key;
    });
    if ((int)cands.size() > 2 * k) cands.resize(2 * k);
    std::vector<Hyp> next;
    for (const Cand& cd : cands) {
        const Hyp& parent = s->alive[cd.i];
        std::vector<int> toks = parent.tokens;
        toks.push_back(cd.w);
        if (cd.w == EOS_ID) add_finished(s, toks, cd.score, opt.alpha);
        else if ((int)next.size() < k) next.push_back(Hyp{toks, cd.score, first_row + cd.i});
    }
    if (t == s->max_len - 1) {
        for (const Hyp& h : next) add_finished(s, h.tokens, h.logprob, opt.alpha);
        next.clear();
    }
    s->alive = std::move(next);
    const float bound = s->alive.empty() ? 0 : s->alive[0].logprob / length_penalty(s->max_len, opt.alpha);
    s->done = s->alive.empty() || (!s->finished.empty() && s->finished[0].score >= bound);
}

// One greedy step for one sentence (its single alive hypothesis is row r): the best token.
void greedy_select(Sentence* s, const Candidates& c, int r, int t, float alpha) {
    const int w = c.token[(size_t)r * c.k];
    Hyp& h = s->alive[0];
    h.tokens.push_back(w);
    h.logprob += c.logp[(size_t)r * c.k];
    h.row = r;
    if (w == EOS_ID || t == s->max_len - 1) {
        add_finished(s, h.tokens, h.logprob, alpha);
        s->alive.clear();
        s->done = true;
    }
}

// A step of a target prefix for one sentence (its single alive hypothesis is row r): the
// forced token w, with its log-probability.
void forced_select(Sentence* s, int r, int w, float logp, int t, float alpha) {
    Hyp& h = s->alive[0];
    h.tokens.push_back(w);
    h.logprob += logp;
    h.row = r;
    if (t == s->max_len - 1) {   // only when a learned position table cut the length
        add_finished(s, h.tokens, h.logprob, alpha);
        s->alive.clear();
        s->done = true;
    }
}

size_t prefix_size(const DecodeInputs* in, size_t i) {
    return in && !in->prefix.empty() ? in->prefix[i].size() : 0;
}

// Step t's forced tokens per row (PAD_ID: none) and their log-probabilities; false when no
// row is forced.
bool forced_step(Model* m, const DecodeRows& rows, const DecodeInputs* in, int t,
                 std::vector<int>* forced, std::vector<float>* logp) {
    forced->assign(rows.token.size(), PAD_ID);
    bool any = false;
    for (size_t r = 0; r < rows.token.size(); r++) {
        const size_t i = (size_t)rows.sentence[r];
        if ((size_t)t < prefix_size(in, i)) (*forced)[r] = in->prefix[i][t], any = true;
    }
    if (any) model_decode_logp(m, *forced, logp);
    return any;
}

// Sampling: replaces each row's candidate (k = 1) by a token drawn from the model.
void sample_step(Model* m, const DecodeRows& rows, const DecodeInputs* in, int t,
                 const DecodeOptions& opt, Candidates* c) {
    std::vector<float> u(rows.token.size());
    for (size_t r = 0; r < u.size(); r++) {
        const size_t i = (size_t)rows.sentence[r];
        const uint64_t stream = in && !in->stream.empty() ? in->stream[i] : i;
        u[r] = sampling_uniform(opt.seed, stream, t);
    }
    model_decode_sample(m, u, opt.temperature, opt.sample_topk, opt.sample_topp, &c->token, &c->logp);
}

// The rows of step t: every alive hypothesis of every sentence not done, sentence by
// sentence; first_row[i] is sentence i's first row (-1 when it is done).
DecodeRows step_rows(const std::vector<Sentence>& sents, bool with_prefix, std::vector<int>* first_row) {
    DecodeRows rows;
    first_row->assign(sents.size(), -1);
    for (size_t i = 0; i < sents.size(); i++) {
        if (sents[i].done) continue;
        (*first_row)[i] = (int)rows.token.size();
        for (const Hyp& h : sents[i].alive) {
            rows.token.push_back(h.tokens.empty() ? BOS_ID : h.tokens.back());
            rows.parent.push_back(h.row);
            rows.sentence.push_back((int)i);
            if (with_prefix) rows.prefix.push_back(&h.tokens);
        }
    }
    return rows;
}

}  // namespace

std::vector<std::vector<Hypothesis>> decode_batch(Model* m,
                                                  const std::vector<std::vector<int>>& sources,
                                                  const DecodeOptions& opt, const DecodeInputs* in) {
    std::vector<std::vector<Hypothesis>> results(sources.size());
    if (sources.empty()) return results;
    const int V = m->cfg.vocab, beam = std::max(1, opt.beam);
    std::vector<Sentence> sents(sources.size());
    int max_steps = 1;
    for (size_t i = 0; i < sources.size(); i++) {
        int n = opt.force_length > 0 ? opt.force_length : max_output_length((int)sources[i].size(), opt);
        n = std::max(n, (int)prefix_size(in, i) + 1);   // the prefix, then at least one token
        if (m->cfg.learned_pos) n = std::min(n, m->cfg.max_len);   // the position table's end
        sents[i].max_len = n;
        sents[i].alive.push_back(Hyp{});
        max_steps = std::max(max_steps, n);
    }
    model_decode_begin(m, sources, beam, max_steps, opt.recompute);
    Candidates c;
    c.k = beam <= 1 ? 1 : 2 * beam;
    for (int t = 0;; t++) {
        std::vector<int> first_row;
        DecodeRows rows = step_rows(sents, opt.recompute, &first_row);
        if (rows.token.empty()) break;
        model_decode_step(m, t, rows, c.k, opt.force_length > 0 ? EOS_ID : -1, &c.token, &c.logp);
        std::vector<int> forced;
        std::vector<float> forced_logp;
        const bool any_forced = forced_step(m, rows, in, t, &forced, &forced_logp);
        if (opt.sampling && beam <= 1) sample_step(m, rows, in, t, opt, &c);
        // Each sentence selects from its own rows only: in parallel, deterministic.
#pragma omp parallel for schedule(dynamic, 8)
        for (size_t i = 0; i < sents.size(); i++) {
            if (first_row[i] < 0) continue;
            const int r = first_row[i];
            if (any_forced && forced[r] != PAD_ID) forced_select(&sents[i], r, forced[r], forced_logp[r], t, opt.alpha);
            else if (beam <= 1) greedy_select(&sents[i], c, first_row[i], t, opt.alpha);
            else beam_select(&sents[i], c, first_row[i], V, t, opt);
        }
    }
    for (size_t i = 0; i < sents.size(); i++) {
        std::vector<Hypothesis>& f = sents[i].finished;
        if ((int)f.size() > std::max(1, opt.nbest)) f.resize(std::max(1, opt.nbest));
        results[i] = f;
    }
    return results;
}

std::vector<std::vector<Hypothesis>> decode_sorted(Model* m,
                                                   const std::vector<std::vector<int>>& sources,
                                                   const DecodeOptions& opt, int batch_tokens,
                                                   const DecodeInputs* in) {
    std::vector<std::vector<Hypothesis>> results(sources.size());
    std::vector<size_t> order;
    for (size_t i = 0; i < sources.size(); i++) {
        if (sources[i].empty()) results[i] = {Hypothesis{}};
        else order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
    for (size_t begin = 0; begin < order.size();) {
        // Longest first within the batch is the last one (sorted): B * S <= batch_tokens.
        size_t end = begin + 1;
        while (end < order.size() &&
               (end + 1 - begin) * sources[order[end]].size() <= (size_t)std::max(batch_tokens, 1))
            end++;
        std::vector<std::vector<int>> batch;
        DecodeInputs batch_in;   // the batch's prefixes and streams (default: input indices)
        for (size_t i = begin; i < end; i++) {
            batch.push_back(sources[order[i]]);
            if (in && !in->prefix.empty()) batch_in.prefix.push_back(in->prefix[order[i]]);
            batch_in.stream.push_back(in && !in->stream.empty() ? in->stream[order[i]] : order[i]);
        }
        std::vector<std::vector<Hypothesis>> out = decode_batch(m, batch, opt, &batch_in);
        for (size_t i = begin; i < end; i++) results[order[i]] = std::move(out[i - begin]);
        begin = end;
    }
    return results;
}

std::vector<std::string> translate_lines(Model* m, const Tokenizer& tok,
                                         const std::vector<std::string>& lines,
                                         const DecodeOptions& opt, int batch_tokens) {
    std::vector<std::vector<int>> sources = tok.encode_lines(lines);
    for (size_t i = 0; i < lines.size(); i++)
        if (!sources[i].empty()) sources[i].push_back(EOS_ID);
    std::vector<std::vector<Hypothesis>> hyps = decode_sorted(m, sources, opt, batch_tokens);
    std::vector<std::string> out(lines.size());
    for (size_t i = 0; i < lines.size(); i++) out[i] = tok.decode(hyps[i][0].tokens);
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
                                     int batch_tokens, std::vector<std::vector<float>>* token_logp) {
    std::vector<Hypothesis> results(sources.size());
    if (token_logp) token_logp->assign(sources.size(), {});
    auto width = [&](size_t i) { return std::max(sources[i].size(), targets[i].size() + 1); };
    std::vector<size_t> order(sources.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return width(a) < width(b); });
    for (size_t begin = 0; begin < order.size();) {
        size_t end = begin + 1;
        while (end < order.size() && (end + 1 - begin) * width(order[end]) <= (size_t)std::max(batch_tokens, 1)) end++;
        std::vector<size_t> ids(order.begin() + begin, order.begin() + end);
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
