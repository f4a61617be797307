// bleu_score.cpp — sacreBLEU 2.6.0's default corpus BLEU (13a tokenizer, n-gram statistics,
// score) and its chrF / chrF++ (character and word n-gram F-score; at the end of the file).
//
// What sacreBLEU does, in order, and where it is done here:
//   per line   rstrip() (Python white space)                       py_rstrip
//              Tokenizer13a: string replacements, pad with spaces,  tokenize_13a
//              four regex substitutions, split() + ' '.join
//              n-grams 1..4 of str.split(), hyp counts clipped       add_line_stats
//              by the references' largest counts; ref_len = the
//              closest reference length (the shorter on a tie)
//   corpus     sum the statistics; exp smoothing; brevity penalty    bleu_compute_score
//
// Text is processed as UTF-8 bytes. Every 13a rule tests ASCII bytes only, and in valid
// UTF-8 no byte of a multi-byte character is ASCII, so working on bytes gives the same
// result as Python working on code points. Invalid UTF-8 passes through unchanged.
#include "toolkit/bleu_score.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "tokenizer.h"   // utf8_char

namespace {

// ---- Python's notion of white space (str.split, str.rstrip) ----------------------------

// Length in bytes of the white-space code point starting at s[i], or 0. The set is
// Python's str.isspace(): \t \n \v \f \r, \x1c-\x1f, space, U+0085, U+00A0, U+1680,
// U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. (Not U+180E, U+200B or U+FEFF.)
size_t space_len_at(std::string_view s, size_t i) {
    auto b = [&](size_t k) { return i + k < s.size() ? (unsigned char)s[i + k] : 0u; };
    unsigned c = b(0);
    if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
    if (c == 0xC2) return (b(1) == 0x85 || b(1) == 0xA0) ? 2 : 0;
    if (c == 0xE1) return (b(1) == 0x9A && b(2) == 0x80) ? 3 : 0;
    if (c == 0xE3) return (b(1) == 0x80 && b(2) == 0x80) ? 3 : 0;
    if (c != 0xE2) return 0;
    if (b(1) == 0x80) {
        unsigned d = b(2);
        return (d >= 0x80 && d <= 0x8A) || d == 0xA8 || d == 0xA9 || d == 0xAF ? 3 : 0;
    }
    return (b(1) == 0x81 && b(2) == 0x9F) ? 3 : 0;
}

// Length in bytes of a white-space code point that ends exactly at s[end), or 0.
size_t space_len_before(std::string_view s, size_t end) {
    for (size_t n = 1; n <= 3 && n <= end; n++)
        if (space_len_at(s, end - n) == n) return n;
    return 0;
}

// Python's str.rstrip() with no argument.
std::string_view rstrip_view(std::string_view s) {
    size_t end = s.size();
    while (size_t n = space_len_before(s, end)) end -= n;
    return s.substr(0, end);
}

}  // namespace

std::vector<std::string_view> py_split(std::string_view s) {
    std::vector<std::string_view> words;
    size_t i = 0, start = std::string_view::npos;
    while (i < s.size()) {
        size_t n = space_len_at(s, i);
        if (n && start != std::string_view::npos) words.push_back(s.substr(start, i - start));
        if (n) start = std::string_view::npos;
        else if (start == std::string_view::npos) start = i;
        i += n ? n : 1;
    }
    if (start != std::string_view::npos) words.push_back(s.substr(start));
    return words;
}

namespace {

// ---- 13a rules ---------------------------------------------------------------------------

// Python's str.replace(from, to): left to right, non-overlapping, one pass.
std::string replace_all(const std::string& s, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    for (size_t j; (j = s.find(from, i)) != std::string::npos; i = j + from.size())
        out.append(s, i, j - i).append(to);
    return out.append(s, i, std::string::npos);
}

bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_period_comma(unsigned char c) { return c == '.' || c == ','; }

// Regex class [\{-\~\[-\` -\&\(-\+\:-\@\/]: { | } ~  [ \ ] ^ _ `  space ! " # $ % &
// ( ) * + : ; < = > ? @ /  — all ASCII punctuation except ' , - . (and not digits).
bool is_13a_symbol(unsigned char c) {
    return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
           (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == '/';
}

// Rule 1: re.sub(symbol, ' \1 ') — every symbol gets a space on each side.
std::string split_symbols(const std::string& s) {
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) {
        if (is_13a_symbol(c)) out.append(1, ' ').append(1, (char)c).append(1, ' ');
        else out.push_back((char)c);
    }
    return out;
}

// re.sub for a two-character pattern ([first][second]) -> lead + \1 + mid + \2 + tail.
// Scans left to right and resumes after each match, as Python's re.sub does.
template <class First, class Second>
std::string sub_pair(const std::string& s, First first, Second second, const char* lead,
                     const char* mid, const char* tail) {
    std::string out;
    out.reserve(s.size() + s.size() / 4);
    size_t i = 0;
    while (i < s.size()) {
        if (i + 1 < s.size() && first((unsigned char)s[i]) && second((unsigned char)s[i + 1])) {
            out.append(lead).append(1, s[i]).append(mid).append(1, s[i + 1]).append(tail);
            i += 2;
        } else {
            out.push_back(s[i++]);
        }
    }
    return out;
}

bool not_digit(unsigned char c) { return !is_digit(c); }
bool is_dash(unsigned char c) { return c == '-'; }

// Rule 2: period and comma are split off unless preceded by a digit:
// ([^0-9])([\.,]) -> '\1 \2 '.
std::string split_period_comma_after_nondigit(const std::string& s) {
    return sub_pair(s, not_digit, is_period_comma, "", " ", " ");
}

// Rule 3: ... and unless followed by a digit: ([\.,])([^0-9]) -> ' \1 \2'.
std::string split_period_comma_before_nondigit(const std::string& s) {
    return sub_pair(s, is_period_comma, not_digit, " ", " ", "");
}

// Rule 4: dash is split off when preceded by a digit: ([0-9])(-) -> '\1 \2 '.
std::string split_dash_after_digit(const std::string& s) {
    return sub_pair(s, is_digit, is_dash, "", " ", " ");
}

// ---- n-gram statistics -------------------------------------------------------------------

constexpr int kMaxOrder = 4;

// N-grams are keyed by the span of the single-space-joined tokenized line they cover;
// tokens hold no white space, so the span determines the n-gram (and its order).
using NgramCounts = std::unordered_map<std::string_view, int64_t>;

std::string_view ngram_at(const std::vector<std::string_view>& t, size_t i, int n) {
    const char* begin = t[i].data();
    const char* end = t[i + n - 1].data() + t[i + n - 1].size();
    return std::string_view(begin, (size_t)(end - begin));
}

// The length of refs closest to the hypothesis' (on a tie the shorter): sacreBLEU's
// _get_closest_ref_len.
int64_t closest_ref_len(int64_t hyp_len, const std::vector<int64_t>& ref_lens) {
    int64_t best = -1, best_diff = -1;
    for (int64_t len : ref_lens) {
        const int64_t diff = len > hyp_len ? len - hyp_len : hyp_len - len;
        if (best_diff < 0 || diff < best_diff) best_diff = diff, best = len;
        else if (diff == best_diff && len < best) best = len;
    }
    return best;
}

// Adds one line's statistics against its references (tokenized): each hypothesis n-gram's
// count clipped by its largest count in any reference, totals, the hypothesis' length and
// the closest reference length (sacreBLEU's _extract_reference_info and
// _compute_segment_statistics).
void add_line_stats(const std::string& hyp_tok, const std::vector<std::string>& ref_toks, BleuStats& s) {
    std::vector<std::string_view> h = py_split(hyp_tok);
    NgramCounts ref_max;
    std::vector<int64_t> ref_lens;
    for (const std::string& ref_tok : ref_toks) {
        std::vector<std::string_view> r = py_split(ref_tok);
        NgramCounts counts;
        NgramCounts& into = ref_lens.empty() ? ref_max : counts;   // the first reference's directly
        into.reserve(r.size() * kMaxOrder * 2);
        for (int n = 1; n <= kMaxOrder; n++)
            for (size_t i = 0; i + n <= r.size(); i++) into[ngram_at(r, i, n)]++;
        for (const auto& g : counts) ref_max[g.first] = std::max(ref_max[g.first], g.second);
        ref_lens.push_back((int64_t)r.size());
    }
    for (int n = 1; n <= kMaxOrder; n++) {
        for (size_t i = 0; i + n <= h.size(); i++) {
            s.totals[n - 1]++;
            auto it = ref_max.find(ngram_at(h, i, n));
            // min(hyp count, ref count) over each n-gram == one match per unused ref copy
            if (it != ref_max.end() && it->second > 0) { s.counts[n - 1]++; it->second--; }
        }
    }
    s.sys_len += (int64_t)h.size();
    s.ref_len += closest_ref_len((int64_t)h.size(), ref_lens);
}

// sacreBLEU's my_log: log, with log(0) floored to -9999999999.
double my_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

}  // namespace

std::string py_rstrip(const std::string& s) { return std::string(rstrip_view(s)); }

std::string tokenize_13a(const std::string& line) {
    // Language-independent part of mteval-v13a, in sacreBLEU's order:
    std::string s = replace_all(line, "<skipped>", "");  // drop <skipped> markers
    s = replace_all(s, "-\n", "");                        // join words hyphenated at line end
    s = replace_all(s, "\n", " ");                        // remaining line breaks -> space
    s = replace_all(s, "&quot;", "\"");                   // unescape the four HTML entities,
    s = replace_all(s, "&amp;", "&");                     // one at a time (so "&amp;lt;"
    s = replace_all(s, "&lt;", "<");                      // becomes "<")
    s = replace_all(s, "&gt;", ">");
    s = " " + s + " ";  // padding: lets rules 2 and 3 fire at the ends of the line
    // Language-dependent part (Western languages):
    s = split_symbols(s);
    s = split_period_comma_after_nondigit(s);
    s = split_period_comma_before_nondigit(s);
    s = split_dash_after_digit(s);
    // One space between tokens, none at the ends (Python split + ' '.join).
    std::string out;
    out.reserve(s.size());
    for (std::string_view w : py_split(s)) {
        if (!out.empty()) out.push_back(' ');
        out.append(w);
    }
    return out;
}

// sacreBLEU's compute_bleu on summed statistics held as Real: double for its Python ints, float
// for the float32 arrays of its bootstrap resamples (toolkit/significance.h), where the
// precisions are float32 arithmetic (NumPy keeps float32 against Python's floats) and the rest
// Python floats. Precisions: percent, exp-smoothed where a count is 0, 0 past a zero total.
template <typename Real>
static void precisions_of(const Real counts[kMaxOrder], const Real totals[kMaxOrder], Real out[kMaxOrder]) {
    for (int n = 0; n < kMaxOrder; n++) out[n] = 0;
    bool any_match = false;
    for (int n = 0; n < kMaxOrder; n++) any_match |= counts[n] != 0;
    if (!any_match) return;  // sacreBLEU stops early (#141): all precisions stay 0
    Real smooth = 1;
    for (int n = 0; n < kMaxOrder; n++) {
        if (totals[n] == 0) break;  // higher orders stay 0 and floor the score
        if (counts[n] == 0) {
            smooth *= 2;  // exp smoothing: 1/2, 1/4, 1/8 ... of a match for each zero order
            out[n] = Real(100) / (smooth * totals[n]);
        } else {
            out[n] = Real(100) * counts[n] / totals[n];
        }
    }
}

template <typename Real>
static double score_of(const Real counts[kMaxOrder], const Real totals[kMaxOrder], int64_t sys_len, int64_t ref_len,
                       double* bp) {
    // Brevity penalty: exp(1 - r/c) when the hypothesis is shorter, 0 when it is empty.
    if (sys_len < ref_len)
        *bp = sys_len > 0 ? std::exp(1.0 - (double)ref_len / (double)sys_len) : 0.0;
    else
        *bp = 1.0;
    bool any_match = false;
    for (int n = 0; n < kMaxOrder; n++) any_match |= counts[n] != 0;
    if (!any_match) return 0.0;
    Real p[kMaxOrder];
    precisions_of(counts, totals, p);
    // Plain left-to-right sum, as Python < 3.12's sum() does; this reproduces
    // ../shared/bleu bit for bit (3.12's compensated sum() moves 2 of its 9 scores by an ulp).
    double sum = 0.0;
    for (int n = 0; n < kMaxOrder; n++) sum += my_log((double)p[n]);
    return *bp * std::exp(sum / kMaxOrder);
}

void bleu_precisions(const BleuStats& s, double out[4]) {
    double counts[kMaxOrder], totals[kMaxOrder];
    for (int n = 0; n < kMaxOrder; n++) counts[n] = (double)s.counts[n], totals[n] = (double)s.totals[n];
    precisions_of(counts, totals, out);
}

void bleu_compute_score(BleuStats& s) {
    double counts[kMaxOrder], totals[kMaxOrder];
    for (int n = 0; n < kMaxOrder; n++) counts[n] = (double)s.counts[n], totals[n] = (double)s.totals[n];
    s.bleu = score_of(counts, totals, s.sys_len, s.ref_len, &s.bp);
}

double bleu_score_float32(const float counts[4], const float totals[4], int64_t sys_len, int64_t ref_len) {
    double bp;
    return score_of(counts, totals, sys_len, ref_len, &bp);
}

// Line i's references: every stream's line. (An empty line is an empty reference, zero
// tokens, as sacreBLEU 2.6.0 scores it: it drops only None references, which files never give.)
static std::vector<std::string> line_references(const std::vector<std::vector<std::string>>& ref_streams, size_t i) {
    std::vector<std::string> refs;
    for (const auto& stream : ref_streams) refs.push_back(stream[i]);
    return refs;
}

// At least one stream of references, each with a line per hypothesis.
static void check_streams(size_t hyps, const std::vector<std::vector<std::string>>& ref_streams, const char* caller) {
    if (ref_streams.empty()) throw std::invalid_argument(std::string(caller) + ": no references");
    for (const auto& stream : ref_streams)
        if (stream.size() != hyps)
            throw std::invalid_argument(std::string(caller) + ": " + std::to_string(hyps) + " hypotheses but " +
                                        std::to_string(stream.size()) + " references");
}

std::vector<BleuStats> bleu_segment_stats(const std::vector<std::string>& hyps,
                                          const std::vector<std::vector<std::string>>& ref_streams) {
    check_streams(hyps.size(), ref_streams, "corpus_bleu");
    std::vector<BleuStats> lines(hyps.size(), BleuStats{});
    for (size_t i = 0; i < hyps.size(); i++) {
        std::vector<std::string> refs = line_references(ref_streams, i);
        for (std::string& r : refs) r = tokenize_13a(py_rstrip(r));
        add_line_stats(tokenize_13a(py_rstrip(hyps[i])), refs, lines[i]);   // sacreBLEU: tokenizer(sent.rstrip())
    }
    return lines;
}

BleuStats corpus_bleu_multi(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams) {
    BleuStats s{};
    for (const BleuStats& line : bleu_segment_stats(hyps, ref_streams)) {
        for (int n = 0; n < kMaxOrder; n++) s.counts[n] += line.counts[n], s.totals[n] += line.totals[n];
        s.sys_len += line.sys_len;
        s.ref_len += line.ref_len;
    }
    bleu_compute_score(s);
    return s;
}

BleuStats corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
    return corpus_bleu_multi(hyps, {refs});
}

std::string bleu_signature(int nrefs) { return "nrefs:" + std::to_string(nrefs) + "|case:mixed|eff:no|tok:13a|smooth:exp"; }

std::string format_bleu(const BleuStats& s, int width) {
    double p[kMaxOrder];
    bleu_precisions(s, p);
    double ratio = s.ref_len ? (double)s.sys_len / (double)s.ref_len : 0.0;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "BLEU = %.*f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld "
                  "ref_len = %lld)",
                  width, s.bleu, p[0], p[1], p[2], p[3], s.bp, ratio, (long long)s.sys_len,
                  (long long)s.ref_len);
    return buf;
}

// ---- chrF (Popović 2015) and chrF++ (2017), as sacreBLEU 2.6.0's CHRF ----------------------
//
// Per line, hypothesis and reference alike (metrics/chrf.py, metrics/helpers.py):
//   character n-grams, n = 1..6, of the line with its white space removed (''.join(split())),
//   over code points;
//   chrF++ only: word n-grams, n = 1..2, of split() with one punctuation mark split off the
//   end of a word of two or more characters, or else off its start (_remove_punctuation);
//   for each order: [hypothesis n-grams (0 when the reference has none of that order),
//   reference n-grams, matches (each n-gram's count clipped by the reference's)].
// Corpus: those statistics summed, then the precision and recall of each order whose two
// counts are non-zero averaged, and F-beta (beta 2) of the averages, times 100
// (_compute_f_score without eps smoothing: the signature's eff:yes).

namespace {

using ChrfCounts = std::unordered_map<std::string, int64_t>;

// Byte offsets of the code points of s (an invalid byte counts as one), then s.size().
std::vector<size_t> code_point_starts(std::string_view s) {
    std::vector<size_t> at;
    for (size_t i = 0; i < s.size();) {
        at.push_back(i);
        uint32_t cp;
        const int n = utf8_char(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i, &cp);
        i += n > 0 ? (size_t)n : 1;
    }
    at.push_back(s.size());
    return at;
}

// sacreBLEU's CHRF._PUNCTS: ASCII punctuation.
bool is_chrf_punct(unsigned char c) {
    return std::string_view("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~").find((char)c) != std::string_view::npos;
}

// CHRF._remove_punctuation: the words of split(), a punctuation mark split off the end (else
// the start) of each word of two or more code points.
std::vector<std::string> chrf_words(std::string_view line) {
    std::vector<std::string> out;
    for (std::string_view w : py_split(line)) {
        if (code_point_starts(w).size() == 2) out.emplace_back(w);   // one code point
        else if (is_chrf_punct((unsigned char)w.back())) out.emplace_back(w.substr(0, w.size() - 1)), out.emplace_back(w.substr(w.size() - 1));
        else if (is_chrf_punct((unsigned char)w.front())) out.emplace_back(w.substr(0, 1)), out.emplace_back(w.substr(1));
        else out.emplace_back(w);
    }
    return out;
}

// The n-gram counts of a line, one table per order: characters 1..6, then words 1..word_order.
std::vector<ChrfCounts> chrf_ngrams(std::string_view line, int word_order) {
    std::string chars;
    for (std::string_view w : py_split(line)) chars.append(w);
    const std::vector<size_t> at = code_point_starts(chars);
    std::vector<ChrfCounts> out(kChrfCharOrder + word_order);
    for (int n = 1; n <= kChrfCharOrder; n++)
        for (size_t i = 0; i + n < at.size(); i++) out[n - 1][chars.substr(at[i], at[i + n] - at[i])]++;
    if (word_order > 0) {
        const std::vector<std::string> words = chrf_words(line);
        for (int n = 1; n <= word_order; n++)
            for (size_t i = 0; i + n <= words.size(); i++) {
                std::string g = words[i];
                for (int k = 1; k < n; k++) g += " " + words[i + k];
                out[kChrfCharOrder + n - 1][g]++;
            }
    }
    return out;
}

}  // namespace

// sacreBLEU's _compute_f_score on stats[3 * order ...] = (hyp, ref, match), in Real's arithmetic
// (double: its Python ints; float: the float32 sums of its bootstrap resamples).
template <typename Real>
static Real chrf_score_of(const Real* stats, size_t orders) {
    const Real eps = Real(1e-16), factor = Real(kChrfBeta * kChrfBeta);
    Real avg_prec = 0, avg_rec = 0;
    int effective_order = 0;
    for (size_t i = 0; i < orders; i++) {
        const Real n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
        const Real prec = n_hyp > 0 ? n_match / n_hyp : eps;
        const Real rec = n_ref > 0 ? n_match / n_ref : eps;
        if (n_hyp > 0 && n_ref > 0) {
            avg_prec += prec;
            avg_rec += rec;
            effective_order++;
        }
    }
    if (effective_order == 0) {
        avg_prec = avg_rec = 0;
    } else {
        avg_prec /= (Real)effective_order;
        avg_rec /= (Real)effective_order;
    }
    if (avg_prec + avg_rec == 0) return 0;
    Real score = (1 + factor) * avg_prec * avg_rec;   // Python's order: ((1 + f) * p) * r
    score /= factor * avg_prec + avg_rec;
    return 100 * score;
}

double chrf_compute_score(const ChrfStats& s) {
    std::vector<double> flat;
    for (const auto& order : s.stats)
        for (int64_t v : order) flat.push_back((double)v);
    return chrf_score_of(flat.data(), s.stats.size());
}

float chrf_score_float32(const float* stats, size_t orders) { return chrf_score_of(stats, orders); }

// One line's statistics against one reference's n-grams (sacreBLEU's _get_match_statistics per
// order): [hypothesis n-grams (0 when the reference has none of the order), reference n-grams,
// matches].
static std::vector<std::array<int64_t, 3>> chrf_line_stats(const std::vector<ChrfCounts>& h,
                                                           const std::vector<ChrfCounts>& r) {
    std::vector<std::array<int64_t, 3>> stats(h.size(), {0, 0, 0});
    for (size_t n = 0; n < h.size(); n++) {
        int64_t hyp = 0, ref = 0, match = 0;
        for (const auto& g : h[n]) {
            hyp += g.second;
            auto it = r[n].find(g.first);
            if (it != r[n].end()) match += std::min(g.second, it->second);
        }
        for (const auto& g : r[n]) ref += g.second;
        stats[n] = {r[n].empty() ? 0 : hyp, ref, match};
    }
    return stats;
}

std::vector<ChrfStats> chrf_segment_stats(const std::vector<std::string>& hyps,
                                          const std::vector<std::vector<std::string>>& ref_streams, int word_order) {
    check_streams(hyps.size(), ref_streams, "corpus_chrf");
    if (word_order < 0 || word_order > 2) throw std::invalid_argument("corpus_chrf: word order 0, 1 or 2");
    std::vector<ChrfStats> lines(hyps.size());
    for (size_t i = 0; i < hyps.size(); i++) {
        // Several references: the one whose statistics give the line the best score (the
        // first on a tie), as sacreBLEU's _compute_segment_statistics.
        const std::vector<ChrfCounts> h = chrf_ngrams(hyps[i], word_order);
        ChrfStats line;
        line.word_order = word_order;
        double best_score = -1.0;
        for (const std::string& ref : line_references(ref_streams, i)) {
            line.stats = chrf_line_stats(h, chrf_ngrams(ref, word_order));
            const double score = chrf_compute_score(line);
            if (score > best_score) best_score = score, lines[i] = line;
        }
    }
    return lines;
}

ChrfStats corpus_chrf_multi(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams,
                            int word_order) {
    ChrfStats s;
    s.word_order = word_order;
    s.stats.assign(kChrfCharOrder + word_order, {0, 0, 0});
    for (const ChrfStats& line : chrf_segment_stats(hyps, ref_streams, word_order))
        for (size_t n = 0; n < s.stats.size(); n++)
            for (int k = 0; k < 3; k++) s.stats[n][k] += line.stats[n][k];
    s.score = chrf_compute_score(s);
    return s;
}

ChrfStats corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs, int word_order) {
    return corpus_chrf_multi(hyps, {refs}, word_order);
}

std::string chrf_signature(int word_order, int nrefs) {
    return "nrefs:" + std::to_string(nrefs) + "|case:mixed|eff:yes|nc:" + std::to_string(kChrfCharOrder) + "|nw:" + std::to_string(word_order) +
           "|space:no";
}

std::string format_chrf(const ChrfStats& s, int width) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "chrF%d%s = %.*f", kChrfBeta, s.word_order == 2 ? "++" : s.word_order == 1 ? "+" : "",
                  width, s.score);
    return buf;
}
