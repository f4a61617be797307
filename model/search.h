// model/search.h — one step of beam search's bookkeeping for one sentence (§6.1: beam 4, length
// penalty alpha; toolkit/decode.h has the rules). Both backends run this function: the CPU's
// search_select (transformer.cpp) in a loop over sentences, the GPU's search_select_kernel
// (transformer.cu) one thread per sentence. So the search is written once and decides the same
// on either device, bit for bit: its only arithmetic is a float addition per candidate and a
// float division per finished hypothesis (by the host's own length-penalty table).
#pragma once
#include "numerics.h"
#include "transformer.h"

// Sentence s's finished list gains the hypothesis that leaves row `row` of step t with `token`
// (length t + 1, log-probability logp): kept best first by logp / lp(t + 1), after those of an
// equal score (they finished first), at most nbest of them.
HOST_DEVICE inline void search_finish(const SearchState& st, int s, int t, int row, int token, float logp) {
    const float score = logp / st.lp[t + 1];
    const size_t base = (size_t)s * st.nbest;
    const int n = st.fin_n[s];
    int pos = n;
    while (pos > 0 && st.fin_score[base + pos - 1] < score) pos--;
    if (pos >= st.nbest) return;
    for (int i = n < st.nbest ? n : st.nbest - 1; i > pos; i--) {
        st.fin_score[base + i] = st.fin_score[base + i - 1];
        st.fin_logp[base + i] = st.fin_logp[base + i - 1];
        st.fin_step[base + i] = st.fin_step[base + i - 1];
        st.fin_row[base + i] = st.fin_row[base + i - 1];
        st.fin_token[base + i] = st.fin_token[base + i - 1];
    }
    st.fin_score[base + pos] = score;
    st.fin_logp[base + pos] = logp;
    st.fin_step[base + pos] = t;
    st.fin_row[base + pos] = row;
    st.fin_token[base + pos] = token;
    st.fin_n[s] = n < st.nbest ? n + 1 : st.nbest;
}

// Sentence s keeps the hypothesis that leaves row `row` with `token` alive for the next step.
HOST_DEVICE inline void search_keep(const SearchState& st, int s, int row, int token, float logp) {
    const size_t i = (size_t)s * st.beam + st.next_n[s]++;
    st.next_token[i] = token;
    st.next_parent[i] = row;
    st.next_logp[i] = logp;
}

// Beam search's step for sentence s, whose `a` alive hypotheses are rows r0 .. r0 + a - 1: the
// 2k best (hypothesis, token) candidates by raw log-probability, ties to the lower key
// i * V + token (i: the hypothesis' index in the sentence), found one after another (the j-th
// is the best of those ranked after the (j-1)-th: no memory, 2k passes over a * kc candidates).
// A </s> candidate finishes; the best k others stay alive.
HOST_DEVICE inline void search_beam(const SearchState& st, int s, int r0, int a, const int* cand_token,
                                    const float* cand_logp, int t) {
    bool have_prev = false;
    float prev_score = 0;
    long long prev_key = 0;
    for (int j = 0; j < 2 * st.beam; j++) {
        bool found = false;
        float best = 0;
        long long best_key = 0;
        int best_i = 0, best_w = 0;
        for (int i = 0; i < a; i++) {
            const float alive = st.alive_logp[(size_t)s * st.beam + i];
            const size_t r = (size_t)(r0 + i) * st.kc;
            for (int c = 0; c < st.kc && cand_token[r + c] >= 0; c++) {
                const int w = cand_token[r + c];
                const float score = alive + cand_logp[r + c];
                const long long key = (long long)i * st.V + w;
                if (have_prev && !(prev_score > score || (prev_score == score && prev_key < key))) continue;
                if (!found || score > best || (score == best && key < best_key))
                    found = true, best = score, best_key = key, best_i = i, best_w = w;
            }
        }
        if (!found) break;
        have_prev = true, prev_score = best, prev_key = best_key;
        if (best_w == EOS_ID) search_finish(st, s, t, r0 + best_i, best_w, best);
        else if (st.next_n[s] < st.beam) search_keep(st, s, r0 + best_i, best_w, best);
    }
}

// Step t for sentence s: its next alive hypotheses (next_n, next_*) and finished ones. A forced
// token (a target prefix) is taken as it is and finishes only at the length limit; greedy (beam
// 1; sampling gives its drawn token as the only candidate) takes the best candidate and
// finishes on </s> or at the limit; beam search (search_beam) then, at the limit, finishes its
// alive hypotheses, and stops the sentence by tensor2tensor's rule: when its best finished
// score is at least the best alive log-probability / lp(max length).
HOST_DEVICE inline void search_select_sentence(const SearchState& st, int s, const int* cand_token,
                                               const float* cand_logp, const int* forced,
                                               const float* forced_logp, int t) {
    st.next_n[s] = 0;
    const int r0 = st.first_row[s];
    if (r0 < 0) return;   // done at an earlier step
    const bool at_limit = t == st.max_len[s] - 1;
    const float alive = st.alive_logp[(size_t)s * st.beam];
    if (forced && forced[r0] != PAD_ID) {
        const float logp = alive + forced_logp[r0];
        if (at_limit) search_finish(st, s, t, r0, forced[r0], logp);
        else search_keep(st, s, r0, forced[r0], logp);
        return;
    }
    if (st.beam == 1) {
        const int w = cand_token[(size_t)r0 * st.kc];
        const float logp = alive + cand_logp[(size_t)r0 * st.kc];
        if (w == EOS_ID || at_limit) search_finish(st, s, t, r0, w, logp);
        else search_keep(st, s, r0, w, logp);
        return;
    }
    search_beam(st, s, r0, st.alive[s], cand_token, cand_logp, t);
    const size_t k0 = (size_t)s * st.beam;
    if (at_limit) {
        for (int i = 0; i < st.next_n[s]; i++)
            search_finish(st, s, t, st.next_parent[k0 + i], st.next_token[k0 + i], st.next_logp[k0 + i]);
        st.next_n[s] = 0;
    }
    if (st.next_n[s] > 0 && st.fin_n[s] > 0 &&
        st.fin_score[(size_t)s * st.nbest] >= st.next_logp[k0] / st.lp[st.max_len[s]])
        st.next_n[s] = 0;
}

// Sentence s's rows of step t + 1 from `offset` on (offset: the rows of the sentences before
// it): hist[t + 1]'s token, parent and sentence, and its alive state for the next step.
HOST_DEVICE inline void search_emit(const SearchState& st, int s, int offset, int t) {
    const int n = st.next_n[s];
    st.first_row[s] = n > 0 ? offset : -1;
    st.alive[s] = n;
    int* h = st.hist + (size_t)(t + 1) * 3 * st.R;
    for (int i = 0; i < n; i++) {
        const size_t k = (size_t)s * st.beam + i;
        h[offset + i] = st.next_token[k];
        h[st.R + offset + i] = st.next_parent[k];
        h[2 * (size_t)st.R + offset + i] = s;
        st.alive_logp[k] = st.next_logp[k];
    }
}
