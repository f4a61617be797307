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

static float length_penalty(int n, float alpha) {
    return (float)std::pow((5.0 + n) / 6.0, (double)alpha);
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
                                                  const DecodeOptions& opt) {
    std::vector<std::vector<Hypothesis>> results(sources.size());
    if (sources.empty()) return results;
    const int V = m->cfg.vocab, beam = std::max(1, opt.beam);
    std::vector<Sentence> sents(sources.size());
    int max_steps = 1;
    for (size_t i = 0; i < sources.size(); i++) {
        int n = opt.force_length > 0 ? opt.force_length : max_output_length((int)sources[i].size(), opt);
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
        // Each sentence selects from its own rows only: in parallel, deterministic.
#pragma omp parallel for schedule(dynamic, 8)
        for (size_t i = 0; i < sents.size(); i++) {
            if (first_row[i] < 0) continue;
            if (beam <= 1) greedy_select(&sents[i], c, first_row[i], t, opt.alpha);
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
                                                   const DecodeOptions& opt, int batch_tokens) {
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
        for (size_t i = begin; i < end; i++) batch.push_back(sources[order[i]]);
        std::vector<std::vector<Hypothesis>> out = decode_batch(m, batch, opt);
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
