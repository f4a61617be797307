// significance.h — sacreBLEU 2.6.0's statistical tests over ./bleu's metrics (BLEU, chrF, chrF++,
// TER): a bootstrap confidence interval of one system's score (--confidence), and the paired
// tests of systems against a baseline (--paired-bs: bootstrap resampling, Koehn 2004;
// --paired-ar: approximate randomization, Riezler and Maxwell 2005), as sacreBLEU's
// significance.py computes them, so the means, intervals and p-values are its own:
//
//   the resamples      NumPy's default_rng(seed) draws, line for line (toolkit/numpy_random.h)
//   a resample's score the lines' statistics summed and scored in float32 as sacreBLEU's numpy
//                      arrays do (BLEU's score itself in double, chrF's and TER's in float32)
//   mean and 95% CI    the sorted scores' mean (NumPy's pairwise sum in the paired tests, Python's
//                      exact statistics.mean for --confidence) and half the distance between
//                      sorted[25] and sorted[974] of 1,000 (n // 40 in from each end, 0-based)
//   p-value            (1 + resamples or trials whose |Δ| exceeds the real |Δ|) / (1 + their count);
//                      --paired-bs centres the resamples' |Δ| on their mean first, --paired-ar not
//
// Two differences: approximate randomization sums TER's mean reference lengths in double from the
// first line on, where NumPy's matrix product (BLAS) sums them in its own order, so with several
// references of different lengths TER's trial scores may differ in the last bits. And a fractional
// add-k smoothing value (--smooth-value 0.5): sacreBLEU's randomization trials add it in place to
// int64 counts, which truncates it, where ./bleu adds it as given.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "toolkit/bleu_score.h"
#include "toolkit/ter_score.h"

// The options of the metrics (sacreBLEU's --tokenize, --chrf-*, --ter-* ...).
struct MetricOptions {
    BleuOptions bleu;
    ChrfOptions chrf;   // "chrf++" is chrf with word order 2
    TerOptions ter;
};

// One system's per-line sufficient statistics for one metric, as sacreBLEU's
// _extract_corpus_statistics gives them: a row a line.
struct SegmentTable {
    std::string metric;            // "bleu", "chrf", "chrf++" or "ter"
    size_t columns = 0;            // BLEU: sys_len, ref_len, matches 1..4, totals 1..4; chrF: (hyp, ref,
                                   // match) per order; TER: edits, mean reference length
    std::vector<double> values;    // lines × columns
    MetricOptions opt;             // how the score is computed (BLEU's smoothing, chrF's beta ...)
    size_t lines() const { return columns ? values.size() / columns : 0; }
};

// The statistics of hyps against ref_streams (as corpus_bleu_multi and the others take them).
SegmentTable segment_table(const std::string& metric, const std::vector<std::string>& hyps,
                           const std::vector<std::vector<std::string>>& ref_streams, const MetricOptions& opt = {});

// The lines [first, first + count) of a table alone (a sentence-level score: one line).
SegmentTable table_rows(const SegmentTable& t, size_t first, size_t count);

// The corpus score of the whole table (the metric's own corpus score).
double table_score(const SegmentTable& t);
// The corpus score's line as sacreBLEU prints it ("BLEU = 35.21 66.1/41.3/... (BP = ...)",
// "chrF2 = 58.96", "TER = 54.37"), `width` decimals.
std::string table_text(const SegmentTable& t, int width);

// A bootstrap estimate: the resamples' mean score and the half-width of their 95% interval.
struct Estimate {
    double mean = 0, ci = 0;
};

// sacreBLEU's --confidence (corpus_score(n_bootstrap=...)): `resamples` bootstrap resamples of the
// lines, drawn by default_rng(seed).choice (the same for every metric and system of a run); the
// mean is Python's statistics.mean, exact.
Estimate bootstrap_estimate(const SegmentTable& t, int resamples, uint32_t seed);

// The same resamples as a paired test's baseline row estimates them (significance.estimate_ci:
// NumPy's mean, pairwise in the scores' type).
Estimate baseline_estimate(const SegmentTable& t, int resamples, uint32_t seed);

// One system against the baseline (same metric, same lines).
struct PairedResult {
    double score = 0;       // the system's corpus score
    double p_value = 1;     // two-sided: how often chance gives a |Δ| as large
    bool has_estimate = false;
    Estimate estimate;      // the system's bootstrap mean and interval (paired-bs always; paired-ar
                            // when asked for)
};

// --paired-bs: every system scored on the same `resamples` resamples of the lines, each against
// systems[0], the baseline; [0]: the baseline's score and estimate (baseline_estimate's), p-value 1.
std::vector<PairedResult> paired_bootstrap(const std::vector<const SegmentTable*>& systems, int resamples,
                                           uint32_t seed);

// --paired-ar: `trials` random swaps of the two systems' lines; confidence_resamples > 0 adds the
// system's bootstrap estimate from the same generator afterwards (as sacreBLEU).
PairedResult paired_randomization(const SegmentTable& baseline, const SegmentTable& system, int trials,
                                  int confidence_resamples, uint32_t seed);

// Python's statistics.mean of non-negative doubles: their exact sum over their count, rounded once
// to double (as its Fraction becomes a float). --confidence's mean; test_significance.py compares it
// with Python's on ties and on random values.
double python_mean(const std::vector<double>& values);
