// bleu_score.h — corpus BLEU identical to sacreBLEU 2.6.0's default settings, and its chrF
// and chrF++ (below).
//
// Signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp (one reference per line, or N,
// case-sensitive, mteval-v13a tokenization, NIST "exp" smoothing, no effective order).
// Counts, totals and lengths agree with sacreBLEU exactly; the score agrees to the last
// bit on the cases in ../shared/bleu (the arithmetic is done in sacreBLEU's order).
//
// Text is UTF-8. Invalid UTF-8 never crashes: bytes are kept as they are, and only the
// exact UTF-8 encodings of Python's white-space code points count as white space
// (sacreBLEU itself would refuse to decode such a line).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

// sacreBLEU's BLEU options (its CLI's --tokenize, --lowercase, --smooth-method, --smooth-value); the
// defaults are its defaults.
struct BleuOptions {
    std::string tokenize = "13a";         // 13a, intl, zh, char or none (bleu_tokenize)
    bool lowercase = false;               // Python's str.lower() before tokenizing (case:lc)
    std::string smooth_method = "exp";    // exp, floor, add-k or none
    double smooth_value = -1;             // floor's and add-k's value; < 0: the method's default (0.1, 1)
    bool effective_order = false;         // average the orders up to the last with n-grams (eff:yes),
                                          // as sacreBLEU's sentence-level BLEU
};
// The tokenizers offered, as --help lists them; sacreBLEU's ja-mecab, ko-mecab and spm ones need
// models and libraries not shipped here.
constexpr const char* kBleuTokenizers = "13a, intl, zh, char, none";

// Checks the options (throws std::invalid_argument naming the bad one) and fills in a default
// smooth_value; one given with exp or none is dropped (-1), as sacreBLEU ignores it.
BleuOptions checked_bleu_options(BleuOptions opt);

// Corpus statistics and score, as sacreBLEU's BLEUScore reports them.
struct BleuStats {
    int64_t counts[4];   // clipped n-gram matches, n = 1..4
    int64_t totals[4];   // hypothesis n-grams, n = 1..4
    int64_t sys_len;     // hypothesis tokens
    int64_t ref_len;     // reference tokens
    double bleu;         // 0..100, unrounded
    double bp;           // brevity penalty
};

// Scores hyps[i] against refs[i]. Throws std::invalid_argument when the sizes differ. An
// empty reference is a reference of no tokens (sacreBLEU 2.6.0 scores it so).
BleuStats corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::string>& refs, const BleuOptions& opt = {});
// Several references (sacreBLEU's multi-reference BLEU): hyps[i] against ref_streams[k][i] for
// every stream k. A hypothesis n-gram's count is clipped by its largest count in any of the
// line's references; the reference length is the one closest to the hypothesis' (the shorter
// on a tie; an empty reference counts, with length 0).
BleuStats corpus_bleu_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams, const BleuOptions& opt = {});
// Each line's statistics alone (bleu and bp left 0): sacreBLEU's segment statistics, which its
// significance tests resample (toolkit/significance.h). corpus_bleu_multi sums them.
std::vector<BleuStats> bleu_segment_stats(const std::vector<std::string>& hyps,
                                          const std::vector<std::vector<std::string>>& ref_streams,
                                          const BleuOptions& opt = {});

// sacreBLEU's Tokenizer13a on one line (no rstrip; corpus_bleu rstrips before calling it).
std::string tokenize_13a(const std::string& line);
// sacreBLEU's tokenizer `name` (opt.tokenize) on one line: 13a; intl (TokenizerV14International:
// Unicode punctuation and symbols split off, toolkit/unicode_classes.h); zh (TokenizerZh: each
// Chinese character a token, the rest as 13a without its replacements); char (each code point a
// token); none (the line as it is).
std::string bleu_tokenize(const std::string& line, const std::string& name);

// Python's str.rstrip(): drops trailing white space as Python defines it (see bleu.cpp).
std::string py_rstrip(const std::string& s);
// Python's str.split() with no argument: runs of Python's white space separate, none are kept.
std::vector<std::string_view> py_split(std::string_view s);
// Python's ' '.join(s.split()): the words of s, one space between them, none at the ends.
std::string join_words(std::string_view s);

// Fills s.bleu and s.bp from s.counts, s.totals, s.sys_len and s.ref_len, smoothed as opt says.
void bleu_compute_score(BleuStats& s, const BleuOptions& opt = {});

// BLEU of summed statistics held in float32, as sacreBLEU scores its bootstrap resamples (numpy
// float32 arrays): the precisions in float32 arithmetic, the rest in double.
double bleu_score_float32(const float counts[4], const float totals[4], int64_t sys_len, int64_t ref_len,
                          const BleuOptions& opt = {});

// The four n-gram precisions sacreBLEU prints (percent; smoothed where a count is 0).
void bleu_precisions(const BleuStats& s, double out[4], const BleuOptions& opt = {});

// "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" (nrefs: the number of reference streams;
// "smooth:floor[0.10]" with a value)
std::string bleu_signature(int nrefs = 1, const BleuOptions& opt = {});

// "BLEU = 35.21 66.1/41.3/28.0/19.8 (BP = 0.987 ratio = 0.987 hyp_len = N ref_len = M)", the
// score with `width` decimals (sacreBLEU's --width; 2 by default).
std::string format_bleu(const BleuStats& s, int width = 2, const BleuOptions& opt = {});

// ---- chrF and chrF++: sacreBLEU 2.6.0's CHRF ------------------------------------------------------
// Character n-grams 1..char_order over code points (white space removed unless opt.whitespace),
// word n-grams 1..word_order (chrF++: 2) of split() with a punctuation mark split off each word's
// end or start; one or more references per line. By default (its CLI's defaults) the average
// precision and recall over the orders found, F-beta of them; with eps_smoothing, the average of the
// orders' F-betas. Statistics agree with sacreBLEU exactly and the score to the last bit on the
// tested cases (the arithmetic is done in its order; test/test_sacrebleu.py,
// test/test_metric_options.py). Invalid UTF-8: each bad byte is one character (sacreBLEU would
// refuse to decode the line).
struct ChrfOptions {
    int char_order = 6;           // --chrf-char-order (nc)
    int word_order = 0;           // --chrf-word-order (nw); 2 is chrF++
    int beta = 2;                 // --chrf-beta: recall counts beta times as much as precision
    bool whitespace = false;      // --chrf-whitespace: white space kept in character n-grams (space:yes)
    bool lowercase = false;       // --chrf-lowercase: Python's str.lower() first (case:lc)
    bool eps_smoothing = false;   // --chrf-eps-smoothing: chrF++.py's mean of the orders' F-betas (eff:no)
};
// Checks the options' ranges (throws std::invalid_argument naming the bad one).
void check_chrf_options(const ChrfOptions& opt);

struct ChrfStats {
    ChrfOptions opt;
    std::vector<std::array<int64_t, 3>> stats;   // per order (characters 1..char_order, then words): hyp, ref, matches
    double score = 0;                            // 0..100, unrounded
};

// Scores hyps[i] against refs[i]; throws std::invalid_argument when the sizes differ.
ChrfStats corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs, const ChrfOptions& opt = {});
// Several references: each line counts the statistics of its reference that scores it best
// (the first on a tie), as sacreBLEU's CHRF; an empty reference is one with no n-grams.
ChrfStats corpus_chrf_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams, const ChrfOptions& opt = {});
// Each line's statistics alone (score left 0), summed by corpus_chrf_multi.
std::vector<ChrfStats> chrf_segment_stats(const std::vector<std::string>& hyps,
                                          const std::vector<std::vector<std::string>>& ref_streams,
                                          const ChrfOptions& opt = {});

// The score of summed statistics (sacreBLEU's _compute_f_score).
double chrf_compute_score(const ChrfStats& s);
// The same of statistics held as doubles (stats[3 * order ...] = hyp, ref, match).
double chrf_score_double(const double* stats, const ChrfOptions& opt);
// ... and held in float32, as sacreBLEU scores its bootstrap resamples: each step in float32
// once a float32 statistic is in it, before that in Python's double; *is_float32 says which the
// score is (NumPy then holds the resamples' scores as float32 when all are).
double chrf_score_float32(const float* stats, const ChrfOptions& opt, bool* is_float32);

// "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no"
std::string chrf_signature(const ChrfOptions& opt = {}, int nrefs = 1);

// "chrF2" (beta 2), "chrF2++" (word order 2: a '+' per word order), as sacreBLEU names the score.
std::string chrf_name(const ChrfOptions& opt);
// "chrF2 = 58.96", the score with `width` decimals.
std::string format_chrf(const ChrfStats& s, int width = 2);
