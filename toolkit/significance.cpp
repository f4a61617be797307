// significance.cpp — sacreBLEU 2.6.0's bootstrap confidence intervals and paired tests
// (toolkit/significance.h), step for step as its significance.py runs them in NumPy:
//
//   _bootstrap_resample   idxs = default_rng(seed).choice(n, (S, n)); each resample's rows
//                         summed in float32 (stats_np[idxs[r]].sum(0)), then scored     resample_scores
//   estimate_ci           sort; mean; 0.5 * (scores[S - S//40 - 1] - scores[S//40])       estimate_ci
//                         (corpus_score's --confidence: Python's statistics.mean, exact)   estimate_ci_statistics
//   _paired_bs_test       both systems on the same idxs; |Δ| per resample, centred on its
//                         mean; p = (1 + #(centred > real |Δ|)) / (1 + S)                  paired_bootstrap
//   _paired_ar_test       sel = integers(2, (T, n), bool); pseudo-systems swap the lines
//                         where sel holds; p as above, uncentred                          paired_randomization
//
// NumPy's types decide the arithmetic: a resample's sums and chrF's and TER's scores are float32
// (NumPy keeps float32 against Python's floats), BLEU's score is a Python float; an array of
// scores is float32 when all are (ScoreArray), and its mean is NumPy's pairwise sum.
#include "toolkit/significance.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "toolkit/numpy_random.h"

namespace {

// ---- scores of summed statistics -----------------------------------------------------------

bool is_chrf(const std::string& metric) { return metric == "chrf" || metric == "chrf++"; }

// BLEU's statistics and score from a table's column sums.
BleuStats bleu_of_sums(const SegmentTable& t, const double* sum) {
    BleuStats s{};
    s.sys_len = (int64_t)sum[0], s.ref_len = (int64_t)sum[1];
    for (int n = 0; n < 4; n++) s.counts[n] = (int64_t)sum[2 + n], s.totals[n] = (int64_t)sum[6 + n];
    bleu_compute_score(s, t.opt.bleu);
    return s;
}

// The metric's corpus score of sums held as Python numbers (int, float; NumPy int64 and float64
// in the randomization test): double arithmetic.
double score_double(const SegmentTable& t, const double* sum) {
    if (t.metric == "bleu") return bleu_of_sums(t, sum).bleu;
    if (t.metric == "ter") return ter_compute_score(sum[0], sum[1]);
    return chrf_score_double(sum, t.opt.chrf);
}

// The column sums of the whole table, line after line.
std::vector<double> column_sums(const SegmentTable& t) {
    std::vector<double> sum(t.columns, 0.0);
    for (size_t i = 0; i < t.lines(); i++)
        for (size_t c = 0; c < t.columns; c++) sum[c] += t.values[i * t.columns + c];
    return sum;
}

// A resample's score from float32 sums, and whether NumPy holds it as float32 (false: a Python
// float, as BLEU's score, and chrF's or TER's of their degenerate branches).
struct Score32 {
    double value;
    bool f32;
};

Score32 score_float32(const SegmentTable& t, const float* sum) {
    if (t.metric == "bleu") return {bleu_score_float32(sum + 2, sum + 6, (int64_t)sum[0], (int64_t)sum[1], t.opt.bleu), false};
    if (t.metric == "ter") {
        if (sum[1] > 0) return {100.0f * (sum[0] / sum[1]), true};
        return {sum[0] > 0 ? 100.0 : 0.0, false};
    }
    bool f32 = false;
    const double s = chrf_score_float32(sum, t.opt.chrf, &f32);
    return {s, f32};
}

// ---- arrays of scores, as NumPy holds them ---------------------------------------------------

struct ScoreArray {
    std::vector<double> v;
    bool f32 = true;   // dtype float32 (else float64)
};

// NumPy's pairwise summation (loops_utils.h: 8 accumulators up to 128 elements, halves above).
template <typename Real>
Real pairwise_sum(const Real* a, size_t n) {
    if (n < 8) {
        Real r = 0;
        for (size_t i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n <= 128) {
        Real r[8];
        for (int j = 0; j < 8; j++) r[j] = a[j];
        size_t i = 8;
        for (; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        Real res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    size_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

// ndarray.mean(): the pairwise sum divided by the count (float32's quotient taken in double and
// rounded back, as NumPy's _mean divides a float32 by an intp).
double mean_of(const ScoreArray& a) {
    if (a.f32) {
        std::vector<float> f(a.v.begin(), a.v.end());
        return (float)((double)pairwise_sum(f.data(), f.size()) / (double)f.size());
    }
    return pairwise_sum(a.v.data(), a.v.size()) / (double)a.v.size();
}

// The middle 95% of the sorted scores: half the distance between the (n // 40)-th from each end,
// in the array's type.
double ci_of(const ScoreArray& sorted) {
    const size_t n = sorted.v.size(), lower = n / 40, upper = n - lower - 1;
    return sorted.f32 ? (double)(0.5f * (float)((float)sorted.v[upper] - (float)sorted.v[lower]))
                      : 0.5 * (sorted.v[upper] - sorted.v[lower]);
}

// significance.estimate_ci (the paired tests): NumPy's mean of the sorted scores.
Estimate estimate_ci(ScoreArray a) {
    std::sort(a.v.begin(), a.v.end());
    return {mean_of(a), ci_of(a)};
}

// Score.estimate_ci (corpus_score's, --confidence): statistics.mean of the sorted scores (a float32
// score list's mean rounded on to float32, as statistics converts back to the scores' type).
Estimate estimate_ci_statistics(ScoreArray a) {
    std::sort(a.v.begin(), a.v.end());
    const double mean = python_mean(a.v);
    return {a.f32 ? (double)(float)mean : mean, ci_of(a)};
}

// p = (1 + how many of stats exceed real) / (1 + count): _compute_p_value. A float32 array
// compares with the real difference rounded to float32 (NumPy's weak Python float).
double p_value(const ScoreArray& stats, double real) {
    const double threshold = stats.f32 ? (double)(float)real : real;
    size_t exceed = 0;
    for (double s : stats.v) exceed += s > threshold;
    return (double)(exceed + 1) / (double)(stats.v.size() + 1);
}

// ---- resamples ---------------------------------------------------------------------------------

// The scores of `resamples` resamples of the lines, drawn from rng as its choice(n, (resamples, n))
// draws them, in each table (the same lines for all): each resample's rows summed in float32, row
// after row (NumPy's sum over axis 0), then scored. One resample's indices at a time in memory.
std::vector<ScoreArray> resample_scores(const std::vector<const SegmentTable*>& tables, NumpyGenerator& rng,
                                        int resamples) {
    const size_t n = tables[0]->lines();
    std::vector<std::vector<float>> rows;   // np.array(stats, dtype='float32')
    for (const SegmentTable* t : tables) rows.emplace_back(t->values.begin(), t->values.end());
    std::vector<ScoreArray> out(tables.size());
    std::vector<uint32_t> idx(n);
    std::vector<float> sum;
    for (int r = 0; r < resamples; r++) {
        for (uint32_t& i : idx) i = rng.index((uint32_t)n);
        for (size_t k = 0; k < tables.size(); k++) {
            const size_t cols = tables[k]->columns;
            sum.assign(cols, 0.0f);
            for (uint32_t i : idx) {
                const float* row = &rows[k][(size_t)i * cols];
                for (size_t c = 0; c < cols; c++) sum[c] += row[c];
            }
            const Score32 s = score_float32(*tables[k], sum.data());
            out[k].v.push_back(s.value);
            out[k].f32 = out[k].f32 && s.f32;
        }
    }
    return out;
}

void check_pair(const SegmentTable& baseline, const SegmentTable& system) {
    if (baseline.metric != system.metric || baseline.columns != system.columns || baseline.lines() != system.lines())
        throw std::invalid_argument("paired test: the systems' statistics differ in metric or lines");
    if (baseline.lines() == 0) throw std::invalid_argument("paired test: no lines");
}

}  // namespace

// The sum is a big integer in units of the smallest value's last bit (32-bit limbs, lowest
// first); the quotient by the count is taken with 2 more bits than a double holds and rounded
// half to even, the remainder deciding ties.
double python_mean(const std::vector<double>& v) {
    int low = 0;   // the exponent of the sum's unit
    bool any = false;
    for (double x : v)
        if (x != 0) {
            int e;
            std::frexp(x, &e);
            low = any ? std::min(low, e - 53) : e - 53, any = true;
        }
    if (!any) return 0.0;
    std::vector<uint32_t> sum(1, 0);
    auto add_shifted = [&sum](uint64_t m, int shift) {   // sum += m << shift
        size_t limb = (size_t)shift / 32;
        unsigned __int128 carry = (unsigned __int128)m << (shift % 32);
        for (size_t i = limb; carry; i++) {
            if (i >= sum.size()) sum.resize(i + 1, 0);
            carry += sum[i];
            sum[i] = (uint32_t)carry;
            carry >>= 32;
        }
    };
    for (double x : v)
        if (x != 0) {
            int e;
            const double f = std::frexp(x, &e);
            add_shifted((uint64_t)std::ldexp(f, 53), e - 53 - low);
        }
    auto bit_length = [](const std::vector<uint32_t>& b) {
        for (size_t i = b.size(); i-- > 0;)
            if (b[i]) return (int)(32 * i) + 32 - __builtin_clz(b[i]);
        return 0;
    };
    const uint64_t n = v.size();
    const int k = std::max(0, 55 + 64 - bit_length(sum));   // the quotient keeps at least 55 bits
    std::vector<uint32_t> shifted(sum.size() + (size_t)k / 32 + 2, 0);
    for (size_t i = 0; i < sum.size(); i++) {
        const uint64_t x = (uint64_t)sum[i] << (k % 32);
        shifted[i + (size_t)k / 32] |= (uint32_t)x;
        shifted[i + (size_t)k / 32 + 1] |= (uint32_t)(x >> 32);
    }
    uint64_t rem = 0;   // shifted / n, long division from the top limb
    for (size_t i = shifted.size(); i-- > 0;) {
        const unsigned __int128 cur = ((unsigned __int128)rem << 32) | shifted[i];
        shifted[i] = (uint32_t)(cur / n);
        rem = (uint64_t)(cur % n);
    }
    const int len = bit_length(shifted), drop = len - 53;
    auto bit = [&shifted](int i) { return (shifted[(size_t)i / 32] >> (i % 32)) & 1u; };
    uint64_t mant = 0;
    for (int i = len - 1; i >= drop; i--) mant = (mant << 1) | bit(i);
    bool below = rem != 0;   // anything under the half bit
    for (int i = 0; i < drop - 1 && !below; i++) below = bit(i);
    if (bit(drop - 1) && (below || (mant & 1))) mant++;
    return std::ldexp((double)mant, low - k + drop);
}

SegmentTable segment_table(const std::string& metric, const std::vector<std::string>& hyps,
                           const std::vector<std::vector<std::string>>& ref_streams, const MetricOptions& opt) {
    SegmentTable t;
    t.metric = metric;
    t.opt = opt;
    if (metric == "chrf++") t.opt.chrf.word_order = 2;
    if (metric == "bleu") {
        t.columns = 10;
        for (const BleuStats& s : bleu_segment_stats(hyps, ref_streams, opt.bleu)) {
            t.values.push_back((double)s.sys_len);
            t.values.push_back((double)s.ref_len);
            for (int n = 0; n < 4; n++) t.values.push_back((double)s.counts[n]);
            for (int n = 0; n < 4; n++) t.values.push_back((double)s.totals[n]);
        }
    } else if (metric == "ter") {
        t.columns = 2;
        for (const TerStats& s : ter_segment_stats(hyps, ref_streams, opt.ter)) {
            t.values.push_back(s.edits);
            t.values.push_back(s.ref_len);
        }
    } else if (is_chrf(metric)) {
        t.columns = 3 * (size_t)(t.opt.chrf.char_order + t.opt.chrf.word_order);
        for (const ChrfStats& s : chrf_segment_stats(hyps, ref_streams, t.opt.chrf))
            for (const auto& order : s.stats)
                for (int64_t v : order) t.values.push_back((double)v);
    } else {
        throw std::invalid_argument("segment_table: unknown metric " + metric);
    }
    return t;
}

SegmentTable table_rows(const SegmentTable& t, size_t first, size_t count) {
    if (first + count > t.lines()) throw std::invalid_argument("table_rows: lines past the table's end");
    SegmentTable rows = t;
    rows.values.assign(t.values.begin() + (ptrdiff_t)(first * t.columns), t.values.begin() + (ptrdiff_t)((first + count) * t.columns));
    return rows;
}

double table_score(const SegmentTable& t) { return score_double(t, column_sums(t).data()); }

std::string table_text(const SegmentTable& t, int width) {
    const std::vector<double> sum = column_sums(t);
    if (t.metric == "bleu") return format_bleu(bleu_of_sums(t, sum.data()), width, t.opt.bleu);
    if (t.metric == "ter") {
        TerStats s;
        s.edits = sum[0], s.ref_len = sum[1], s.score = ter_compute_score(s.edits, s.ref_len);
        return format_ter(s, width);
    }
    ChrfStats s;
    s.opt = t.opt.chrf;
    for (size_t o = 0; o < t.columns / 3; o++)
        s.stats.push_back({(int64_t)sum[3 * o], (int64_t)sum[3 * o + 1], (int64_t)sum[3 * o + 2]});
    s.score = chrf_compute_score(s);
    return format_chrf(s, width);
}

// _bootstrap_resample's scores: `resamples` resamples drawn by default_rng(seed).choice.
static ScoreArray bootstrap_scores(const SegmentTable& t, int resamples, uint32_t seed) {
    if (t.lines() == 0) throw std::invalid_argument("bootstrap: no lines");
    NumpyGenerator rng(seed);
    return resample_scores({&t}, rng, resamples)[0];
}

Estimate bootstrap_estimate(const SegmentTable& t, int resamples, uint32_t seed) {
    return estimate_ci_statistics(bootstrap_scores(t, resamples, seed));
}

Estimate baseline_estimate(const SegmentTable& t, int resamples, uint32_t seed) {
    return estimate_ci(bootstrap_scores(t, resamples, seed));
}

// _paired_bs_test's p-value of one system's resampled scores against the baseline's.
static double paired_bs_p_value(const ScoreArray& bl, const ScoreArray& sys, double real_diff) {
    ScoreArray diffs;   // |sys - bl|, then centred on its mean
    diffs.f32 = bl.f32 && sys.f32;
    for (size_t i = 0; i < sys.v.size(); i++)
        diffs.v.push_back(diffs.f32 ? (double)std::fabs((float)sys.v[i] - (float)bl.v[i]) : std::fabs(sys.v[i] - bl.v[i]));
    const double mean = mean_of(diffs);
    for (double& d : diffs.v) d = diffs.f32 ? (double)((float)d - (float)mean) : d - mean;
    return p_value(diffs, real_diff);
}

std::vector<PairedResult> paired_bootstrap(const std::vector<const SegmentTable*>& systems, int resamples, uint32_t seed) {
    if (systems.empty()) throw std::invalid_argument("paired test: no systems");
    for (const SegmentTable* s : systems) check_pair(*systems[0], *s);
    // sacreBLEU draws the same resamples for every pair (the seed restarts), so the baseline's
    // scores are the same in each: one pass scores every system on each resample's lines.
    NumpyGenerator rng(seed);
    const std::vector<ScoreArray> scores = resample_scores(systems, rng, resamples);
    std::vector<PairedResult> results(systems.size());
    for (size_t k = 0; k < systems.size(); k++) {
        PairedResult& r = results[k];
        r.score = table_score(*systems[k]);
        r.has_estimate = true;
        r.estimate = estimate_ci(scores[k]);
        if (k > 0) r.p_value = paired_bs_p_value(scores[0], scores[k], std::fabs(results[0].score - r.score));
    }
    return results;
}

PairedResult paired_randomization(const SegmentTable& baseline, const SegmentTable& system, int trials,
                                  int confidence_resamples, uint32_t seed) {
    check_pair(baseline, system);
    const size_t n = system.lines(), cols = system.columns;
    NumpyGenerator rng(seed);
    NumpyGenerator::BoolDraws pos_sel;   // integers(2, (trials, n), dtype=bool), a trial's row at a time
    std::vector<uint8_t> sel(n);
    PairedResult r;
    r.score = table_score(system);
    const double real = std::fabs(table_score(baseline) - r.score);
    ScoreArray stats;
    stats.f32 = false;
    std::vector<double> a_bl(cols), a_sys(cols), b_bl(cols), b_sys(cols), a(cols), b(cols);
    for (int t = 0; t < trials; t++) {
        for (uint8_t& b : sel) b = pos_sel.next(rng);
        // shuf_a = pos_sel @ bl + neg_sel @ sys; shuf_b = neg_sel @ bl + pos_sel @ sys
        std::fill(a_bl.begin(), a_bl.end(), 0.0), std::fill(a_sys.begin(), a_sys.end(), 0.0);
        std::fill(b_bl.begin(), b_bl.end(), 0.0), std::fill(b_sys.begin(), b_sys.end(), 0.0);
        for (size_t i = 0; i < n; i++) {
            const double* bl_row = &baseline.values[i * cols];
            const double* sys_row = &system.values[i * cols];
            std::vector<double>& to_bl = sel[i] ? a_bl : b_bl;
            std::vector<double>& to_sys = sel[i] ? b_sys : a_sys;
            for (size_t c = 0; c < cols; c++) to_bl[c] += bl_row[c], to_sys[c] += sys_row[c];
        }
        for (size_t c = 0; c < cols; c++) a[c] = a_bl[c] + a_sys[c], b[c] = b_bl[c] + b_sys[c];
        stats.v.push_back(std::fabs(score_double(system, a.data()) - score_double(system, b.data())));
    }
    r.p_value = p_value(stats, real);
    if (confidence_resamples > 0) {   // bs_idxs: the same generator, after the trials' bits
        r.has_estimate = true;
        r.estimate = estimate_ci(resample_scores({&system}, rng, confidence_resamples)[0]);
    }
    return r;
}
