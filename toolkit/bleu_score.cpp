// bleu_score.cpp — sacreBLEU 2.6.0's corpus BLEU (its tokenizers, n-gram statistics, smoothing,
// score) and its chrF / chrF++ (character and word n-gram F-score; at the end of the file).
//
// What sacreBLEU does, in order, and where it is done here:
//   per line   lower() with --lowercase (toolkit/ter_score.h)     py_lower
//              rstrip() (Python white space)                       py_rstrip
//              the tokenizer (bleu_tokenize):
//                13a: string replacements, pad with spaces,        tokenize_13a
//                four regex substitutions, split() + ' '.join      regexp_tokenize
//                intl: three Unicode-class substitutions           tokenize_intl
//                zh: Chinese characters spaced, then 13a's four    tokenize_zh
//                char: every code point a token; none              tokenize_char
//              n-grams 1..4 of str.split(), hyp counts clipped       add_line_stats
//              by the references' largest counts; ref_len = the
//              closest reference length (the shorter on a tie)
//   corpus     sum the statistics; smoothing (exp, floor, add-k,    bleu_compute_score
//              none); brevity penalty; the effective order of
//              sentence-level BLEU
//
// Text is processed as UTF-8. The rules with ASCII classes (13a's, zh's after its spacing) work
// on bytes: in valid UTF-8 no byte of a multi-byte character is ASCII, so working on bytes gives
// the same result as Python working on code points (toolkit/regex_rules.h). intl's, zh's and
// char's work on code points. Invalid UTF-8 passes through unchanged (each bad byte a character
// of no class).
#include "toolkit/bleu_score.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "tokenizer.h"   // utf8_units
#include "toolkit/numbers.h"   // printed
#include "toolkit/regex_rules.h"
#include "toolkit/ter_score.h"   // py_lower
#include "toolkit/unicode_classes.h"

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

// Python's str.lstrip() with no argument.
std::string_view lstrip_view(std::string_view s) {
    size_t begin = 0;
    while (size_t n = space_len_at(s, begin)) begin += n;
    return s.substr(begin);
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

std::string join_words(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::string_view w : py_split(s)) {
        if (!out.empty()) out.push_back(' ');
        out.append(w);
    }
    return out;
}

namespace {

// ---- 13a, zh and intl -----------------------------------------------------------------------

using namespace regex_rules;

// sacreBLEU's TokenizerRegexp, the rules 13a and zh share, in its order:
//   ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 '    every 13a symbol spaced
//   ([^0-9])([\.,]) -> '\1 \2 '                       period and comma split off unless after a digit
//   ([\.,])([^0-9]) -> ' \1 \2'                       ... and unless before a digit
//   ([0-9])(-) -> '\1 \2 '                             dash split off after a digit
// then ' '.join(split()).
std::string regexp_tokenize(const std::string& line) {
    return join_words(split_period_comma_dash(space_around(line, is_13a_symbol)));
}

// ---- intl, zh and char: code points -----------------------------------------------------------

// A code point of a line (an invalid byte: one unit of its own), and its class for intl's regexes.
struct Unit {
    std::string_view text;
    uint32_t cp;        // the code point; past U+10FFFF for an invalid byte
    UnicodeClass cls;
};
using Units = std::vector<Unit>;
constexpr Unit kSpace{" ", ' ', kOther};

UnicodeClass class_of(uint32_t c) {
    const ClassRun* end = kClassRuns + sizeof kClassRuns / sizeof kClassRuns[0];
    const ClassRun* run = std::upper_bound(kClassRuns, end, c, [](uint32_t v, const ClassRun& r) { return v < r.first; });
    return run != kClassRuns && c <= (run - 1)->last ? (run - 1)->cls : kOther;
}

// The code points of s as units (pointing into s), each with its class.
Units code_points(std::string_view s) {
    Units out;
    for (const Utf8Unit& u : utf8_units(s)) out.push_back({u.text, u.valid ? u.cp : 0x110000u + u.cp, u.valid ? class_of(u.cp) : kOther});
    return out;
}

std::string joined(const Units& units) {
    std::string out;
    for (const Unit& u : units) out.append(u.text);
    return out;
}

// sacreBLEU's TokenizerV14International (mteval-v14's international tokenization), in its order:
//   (\P{N})(\p{P}) -> '\1 \2 '   punctuation split off after a non-number
//   (\p{P})(\P{N}) -> ' \1 \2'   ... and before a non-number
//   (\p{S}) -> ' \1 '             every symbol spaced
// then ' '.join(split()). No padding: a number's final period stays with it (as in mteval-v14).
std::string tokenize_intl(const std::string& line) {
    auto not_number = [](const Unit& u) { return u.cls != kNumber; };
    auto punctuation = [](const Unit& u) { return u.cls == kPunctuation; };
    auto symbol = [](const Unit& u) { return u.cls == kSymbol; };
    Units s = space_pair(code_points(line), not_number, punctuation, false, kSpace);
    s = space_pair(s, punctuation, not_number, true, kSpace);
    return join_words(joined(space_around(s, symbol, kSpace)));
}

// TokenizerZh._is_chinese_char: its _UCODE_RANGES as Python compares them. Two are written with
// five hex digits after \\u ('\\u20000'-'\\u2a6d6', '\\u2f800'-'\\u2fa1d'), which Python reads as a
// code point and a digit; compared as strings they cover U+2001..U+2A6D and U+2F81..U+2FA1 (white
// space, dashes and quotes among them), not the supplementary ideographs meant.
bool is_zh_char(uint32_t c) {
    static constexpr uint32_t kRanges[][2] = {
        {0x3400, 0x4DB5}, {0x4E00, 0x9FA5}, {0x9FA6, 0x9FBB}, {0xF900, 0xFA2D}, {0xFA30, 0xFA6A},
        {0xFA70, 0xFAD9}, {0x2001, 0x2A6D}, {0x2F81, 0x2FA1}, {0xFF00, 0xFFEF}, {0x2E80, 0x2EFF},
        {0x3000, 0x303F}, {0x31C0, 0x31EF}, {0x2F00, 0x2FDF}, {0x2FF0, 0x2FFF}, {0x3100, 0x312F},
        {0x31A0, 0x31BF}, {0xFE10, 0xFE1F}, {0xFE30, 0xFE4F}, {0x2600, 0x26FF}, {0x2700, 0x27BF},
        {0x3200, 0x32FF}, {0x3300, 0x33FF}};
    for (const auto& r : kRanges)
        if (c >= r[0] && c <= r[1]) return true;
    return false;
}

// sacreBLEU's TokenizerZh: line.strip(), a space on each side of every Chinese character, then
// TokenizerRegexp (13a's rules without its replacements and padding).
std::string tokenize_zh(const std::string& line) {
    std::string spaced;
    for (const Unit& u : code_points(rstrip_view(lstrip_view(line)))) {
        if (is_zh_char(u.cp)) spaced.append(" ").append(u.text).append(" ");
        else spaced.append(u.text);
    }
    return regexp_tokenize(spaced);
}

// sacreBLEU's TokenizerChar: " ".join(line), every code point (white space too) a token.
std::string tokenize_char(const std::string& line) {
    std::string out;
    for (const Unit& u : code_points(line)) out.append(out.empty() ? "" : " ").append(u.text);
    return out;
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
    return regexp_tokenize(" " + s + " ");   // padding: lets rules 2 and 3 fire at the line's ends
}

namespace {

// The tokenizers by name (kBleuTokenizers lists them).
using TokenizerFn = std::string (*)(const std::string&);
std::string tokenize_none(const std::string& line) { return line; }

TokenizerFn tokenizer_named(const std::string& name) {
    static const std::pair<const char*, TokenizerFn> kTokenizers[] = {
        {"13a", tokenize_13a}, {"intl", tokenize_intl}, {"zh", tokenize_zh}, {"char", tokenize_char}, {"none", tokenize_none}};
    for (const auto& t : kTokenizers)
        if (name == t.first) return t.second;
    throw std::invalid_argument("BLEU: unknown tokenizer " + name + " (offered: " + kBleuTokenizers + ")");
}

// sacreBLEU's smoothing methods (BleuOptions::smooth_method, resolved once per score).
enum class Smoothing { kExp, kFloor, kAddK, kNone };

Smoothing smoothing_named(const std::string& name) {
    if (name == "exp") return Smoothing::kExp;
    if (name == "floor") return Smoothing::kFloor;
    if (name == "add-k") return Smoothing::kAddK;
    if (name == "none") return Smoothing::kNone;
    throw std::invalid_argument("BLEU: smoothing method " + name + ": one of exp, floor, add-k, none");
}

// floor's and add-k's value, sacreBLEU's SMOOTH_DEFAULTS where none is given (< 0); -1 for the
// others. A NaN is given, not a default, so that checked_bleu_options refuses it.
double smooth_value_of(const BleuOptions& opt) {
    const Smoothing m = smoothing_named(opt.smooth_method);
    if (m != Smoothing::kFloor && m != Smoothing::kAddK) return -1;
    return opt.smooth_value < 0 ? (m == Smoothing::kFloor ? 0.1 : 1.0) : opt.smooth_value;
}

}  // namespace

std::string bleu_tokenize(const std::string& line, const std::string& name) { return tokenizer_named(name)(line); }

BleuOptions checked_bleu_options(BleuOptions opt) {
    // A value given with exp or none is ignored (-1 here), as sacreBLEU ignores it: its CLI and
    // BLEU() accept it, and its score and signature (smooth:exp) are those without it.
    const double value = smooth_value_of(opt);   // throws on an unknown method
    if (!std::isfinite(value)) throw std::invalid_argument("BLEU: the smoothing value must be finite");   // -1 for exp and none
    opt.smooth_value = value;
    tokenizer_named(opt.tokenize);   // throws on an unknown tokenizer
    return opt;
}

// sacreBLEU's compute_bleu on summed statistics held as Real: double for its Python ints, float
// for the float32 arrays of its bootstrap resamples (toolkit/significance.h), where the
// precisions are float32 arithmetic (NumPy keeps float32 against Python's floats) and the rest
// Python floats. Precisions: percent, smoothed as opt says where a count is 0 (add-k: k added to
// the counts and totals of orders 2..4 first), 0 past a zero total.
// Returns how many orders it reached (the first with a zero total stops it).
template <typename Real>
static int precisions_of(const Real counts_in[kMaxOrder], const Real totals_in[kMaxOrder], Real out[kMaxOrder],
                         const BleuOptions& opt) {
    for (int n = 0; n < kMaxOrder; n++) out[n] = 0;
    bool any_match = false;
    for (int n = 0; n < kMaxOrder; n++) any_match |= counts_in[n] != 0;
    if (!any_match) return 0;  // sacreBLEU stops early (#141): all precisions stay 0
    Real counts[kMaxOrder], totals[kMaxOrder];
    std::copy(counts_in, counts_in + kMaxOrder, counts);
    std::copy(totals_in, totals_in + kMaxOrder, totals);
    const Smoothing method = smoothing_named(opt.smooth_method);
    const double value = smooth_value_of(opt);
    Real smooth = 1;
    for (int n = 0; n < kMaxOrder; n++) {
        if (method == Smoothing::kAddK && n > 0) counts[n] += Real(value), totals[n] += Real(value);
        if (totals[n] == 0) return n;  // higher orders stay 0 and floor the score
        if (counts[n] != 0) {
            out[n] = Real(100) * counts[n] / totals[n];
        } else if (method == Smoothing::kExp) {
            smooth *= 2;  // exp smoothing: 1/2, 1/4, 1/8 ... of a match for each zero order
            out[n] = Real(100) / (smooth * totals[n]);
        } else if (method == Smoothing::kFloor) {
            out[n] = Real(100.0 * value) / totals[n];   // Python: 100. * value / total
        }   // none and add-k: 0, which floors the score
    }
    return kMaxOrder;
}

template <typename Real>
static double score_of(const Real counts[kMaxOrder], const Real totals[kMaxOrder], int64_t sys_len, int64_t ref_len,
                       const BleuOptions& opt, double* bp) {
    // Brevity penalty: exp(1 - r/c) when the hypothesis is shorter, 0 when it is empty.
    if (sys_len < ref_len)
        *bp = sys_len > 0 ? std::exp(1.0 - (double)ref_len / (double)sys_len) : 0.0;
    else
        *bp = 1.0;
    bool any_match = false;
    for (int n = 0; n < kMaxOrder; n++) any_match |= counts[n] != 0;
    if (!any_match) return 0.0;
    Real p[kMaxOrder];
    const int reached = precisions_of(counts, totals, p, opt);
    // Effective order: the orders up to the last one reached (sacreBLEU keeps 4 when the first
    // total is already 0).
    const int orders = opt.effective_order && reached > 0 ? reached : kMaxOrder;
    // Plain left-to-right sum, as Python < 3.12's sum() does; this reproduces
    // ../shared/bleu bit for bit (3.12's compensated sum() moves 2 of its 9 scores by an ulp).
    double sum = 0.0;
    for (int n = 0; n < orders; n++) sum += my_log((double)p[n]);
    return *bp * std::exp(sum / orders);
}

void bleu_precisions(const BleuStats& s, double out[4], const BleuOptions& opt) {
    double counts[kMaxOrder], totals[kMaxOrder];
    for (int n = 0; n < kMaxOrder; n++) counts[n] = (double)s.counts[n], totals[n] = (double)s.totals[n];
    precisions_of(counts, totals, out, opt);
}

void bleu_compute_score(BleuStats& s, const BleuOptions& opt) {
    double counts[kMaxOrder], totals[kMaxOrder];
    for (int n = 0; n < kMaxOrder; n++) counts[n] = (double)s.counts[n], totals[n] = (double)s.totals[n];
    s.bleu = score_of(counts, totals, s.sys_len, s.ref_len, opt, &s.bp);
}

double bleu_score_float32(const float counts[4], const float totals[4], int64_t sys_len, int64_t ref_len,
                          const BleuOptions& opt) {
    double bp;
    return score_of(counts, totals, sys_len, ref_len, opt, &bp);
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

// sacreBLEU's BLEU._preprocess_segment: lower() when asked, then tokenizer(sent.rstrip()). The
// n-grams are spans of the result (add_line_stats), so runs of white space that char and none
// leave become one space, as the words sacreBLEU's split() gives are the same.
static std::string preprocess(const std::string& sent, const BleuOptions& opt) {
    const std::string tokens = bleu_tokenize(py_rstrip(opt.lowercase ? py_lower(sent) : sent), opt.tokenize);
    return opt.tokenize == "char" || opt.tokenize == "none" ? join_words(tokens) : tokens;
}

std::vector<BleuStats> bleu_segment_stats(const std::vector<std::string>& hyps,
                                          const std::vector<std::vector<std::string>>& ref_streams,
                                          const BleuOptions& opt) {
    check_streams(hyps.size(), ref_streams, "corpus_bleu");
    std::vector<BleuStats> lines(hyps.size(), BleuStats{});
    for (size_t i = 0; i < hyps.size(); i++) {
        std::vector<std::string> refs = line_references(ref_streams, i);
        for (std::string& r : refs) r = preprocess(r, opt);
        add_line_stats(preprocess(hyps[i], opt), refs, lines[i]);
    }
    return lines;
}

BleuStats corpus_bleu_multi(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams,
                            const BleuOptions& opt) {
    BleuStats s{};
    for (const BleuStats& line : bleu_segment_stats(hyps, ref_streams, opt)) {
        for (int n = 0; n < kMaxOrder; n++) s.counts[n] += line.counts[n], s.totals[n] += line.totals[n];
        s.sys_len += line.sys_len;
        s.ref_len += line.ref_len;
    }
    bleu_compute_score(s, opt);
    return s;
}

BleuStats corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs, const BleuOptions& opt) {
    return corpus_bleu_multi(hyps, {refs}, opt);
}

std::string bleu_signature(int nrefs, const BleuOptions& opt) {
    std::string smooth = opt.smooth_method;
    if (const double value = smooth_value_of(opt); value >= 0) smooth += printed("[%.2f]", value);   // f'[{value:.2f}]'
    return "nrefs:" + std::to_string(nrefs) + "|case:" + (opt.lowercase ? "lc" : "mixed") +
           "|eff:" + (opt.effective_order ? "yes" : "no") + "|tok:" + opt.tokenize +
           "|smooth:" + smooth;
}

std::string format_bleu(const BleuStats& s, int width, const BleuOptions& opt) {
    double p[kMaxOrder];
    bleu_precisions(s, p, opt);
    double ratio = s.ref_len ? (double)s.sys_len / (double)s.ref_len : 0.0;
    return printed("BLEU = %.*f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)",
                   width, s.bleu, p[0], p[1], p[2], p[3], s.bp, ratio, (long long)s.sys_len, (long long)s.ref_len);
}

// ---- chrF (Popović 2015) and chrF++ (2017), as sacreBLEU 2.6.0's CHRF ----------------------
//
// Per line, hypothesis and reference alike (metrics/chrf.py, metrics/helpers.py), lowercased
// first with --chrf-lowercase:
//   character n-grams, n = 1..char_order (6), over code points of the line with its white space
//   removed (''.join(split())), or kept as it is with --chrf-whitespace;
//   word n-grams, n = 1..word_order (chrF++: 2), of split() with one punctuation mark split off
//   the end of a word of two or more characters, or else off its start (_remove_punctuation);
//   for each order: [hypothesis n-grams (0 when the reference has none of that order),
//   reference n-grams, matches (each n-gram's count clipped by the reference's)].
// Corpus: those statistics summed, then the precision and recall of each order whose two
// counts are non-zero averaged, and F-beta (beta 2) of the averages, times 100
// (_compute_f_score, the signature's eff:yes); with --chrf-eps-smoothing the mean of the orders'
// F-betas instead, an order without n-grams counting eps (eff:no).

namespace {

using ChrfCounts = std::unordered_map<std::string, int64_t>;

// sacreBLEU's CHRF._PUNCTS: ASCII punctuation.
bool is_chrf_punct(unsigned char c) {
    return std::string_view("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~").find((char)c) != std::string_view::npos;
}

// CHRF._remove_punctuation: the words of split(), a punctuation mark split off the end (else
// the start) of each word of two or more code points.
std::vector<std::string> chrf_words(std::string_view line) {
    std::vector<std::string> out;
    for (std::string_view w : py_split(line)) {
        if (utf8_units(w).size() == 1) out.emplace_back(w);   // one code point
        else if (is_chrf_punct((unsigned char)w.back())) out.emplace_back(w.substr(0, w.size() - 1)), out.emplace_back(w.substr(w.size() - 1));
        else if (is_chrf_punct((unsigned char)w.front())) out.emplace_back(w.substr(0, 1)), out.emplace_back(w.substr(1));
        else out.emplace_back(w);
    }
    return out;
}

// The n-gram counts of a line, one table per order: characters 1..char_order, then words
// 1..word_order.
std::vector<ChrfCounts> chrf_ngrams(std::string_view line, const ChrfOptions& opt) {
    std::string chars;
    if (opt.whitespace) chars = line;
    else
        for (std::string_view w : py_split(line)) chars.append(w);
    const std::vector<Utf8Unit> units = utf8_units(chars);   // an invalid byte: one character
    std::vector<ChrfCounts> out(opt.char_order + opt.word_order);
    for (int n = 1; n <= opt.char_order; n++) {
        out[n - 1].reserve(units.size());
        for (size_t i = 0; i + n <= units.size(); i++) {
            const char* begin = units[i].text.data();
            const std::string_view last = units[i + n - 1].text;
            out[n - 1][std::string(begin, (size_t)(last.data() + last.size() - begin))]++;
        }
    }
    if (opt.word_order > 0) {
        const std::vector<std::string> words = chrf_words(line);
        for (int n = 1; n <= opt.word_order; n++)
            for (size_t i = 0; i + n <= words.size(); i++) {
                std::string g = words[i];
                for (int k = 1; k < n; k++) g += " " + words[i + k];
                out[opt.char_order + n - 1][g]++;
            }
    }
    return out;
}

}  // namespace

void check_chrf_options(const ChrfOptions& opt) {
    if (opt.char_order < 1 || opt.char_order > 20) throw std::invalid_argument("chrF: character order 1..20");
    if (opt.word_order < 0 || opt.word_order > 10) throw std::invalid_argument("chrF: word order 0..10");
    if (opt.beta < 0 || opt.beta > 1000) throw std::invalid_argument("chrF: beta 0..1000");
}

// A number as Python holds one in sacreBLEU's chrF of a bootstrap resample: a Python float (or
// int) until it meets a float32 statistic, then float32 (NumPy 2's weak Python scalars, NEP 50:
// the Python number is rounded to float32 and the operation done in float32). Which of the two
// a score ends as decides the dtype of the array of scores (toolkit/significance.cpp): with
// eps smoothing a resample of empty hypotheses scores a float32 0, of empty hypotheses and
// references a Python 1e-14.
struct NumpyScalar {
    double v;
    bool f32;
    NumpyScalar(int x) : v(x), f32(false) {}
    NumpyScalar(double x) : v(x), f32(false) {}
    NumpyScalar(float x) : v(x), f32(true) {}
    template <typename Op> static NumpyScalar apply(NumpyScalar a, NumpyScalar b, Op op) {
        if (a.f32 || b.f32) return NumpyScalar(op((float)a.v, (float)b.v));
        return NumpyScalar(op(a.v, b.v));
    }
    friend NumpyScalar operator+(NumpyScalar a, NumpyScalar b) { return apply(a, b, [](auto x, auto y) { return x + y; }); }
    friend NumpyScalar operator*(NumpyScalar a, NumpyScalar b) { return apply(a, b, [](auto x, auto y) { return x * y; }); }
    friend NumpyScalar operator/(NumpyScalar a, NumpyScalar b) { return apply(a, b, [](auto x, auto y) { return x / y; }); }
    NumpyScalar& operator+=(NumpyScalar b) { return *this = *this + b; }
    NumpyScalar& operator/=(NumpyScalar b) { return *this = *this / b; }
    friend bool operator>(NumpyScalar a, NumpyScalar b) { return a.v > b.v; }
    friend bool operator==(NumpyScalar a, NumpyScalar b) { return a.v == b.v; }
};

// sacreBLEU's _compute_f_score on stats[3 * order ...] = (hyp, ref, match), in Real's arithmetic
// (double: its Python ints; NumpyScalar of float: the float32 sums of its bootstrap resamples).
template <typename Real, typename Stat>
static Real chrf_score_of(const Stat* stats, const ChrfOptions& opt) {
    const size_t orders = (size_t)(opt.char_order + opt.word_order);
    const Real eps = Real(1e-16), factor = Real(opt.beta * opt.beta);
    Real avg_prec = 0.0, avg_rec = 0.0, f_sum = 0.0;
    int effective_order = 0;
    for (size_t i = 0; i < orders; i++) {
        const Real n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
        const Real prec = n_hyp > 0 ? n_match / n_hyp : eps;
        const Real rec = n_ref > 0 ? n_match / n_ref : eps;
        const Real denom = factor * prec + rec;   // chrF++.py's eps smoothing: the order's F-beta
        f_sum += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
        if (n_hyp > 0 && n_ref > 0) {
            avg_prec += prec;
            avg_rec += rec;
            effective_order++;
        }
    }
    if (opt.eps_smoothing) return 100 * f_sum / Real((int)orders);
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

double chrf_score_double(const double* stats, const ChrfOptions& opt) { return chrf_score_of<double>(stats, opt); }

double chrf_compute_score(const ChrfStats& s) {
    std::vector<double> flat;
    for (const auto& order : s.stats)
        for (int64_t v : order) flat.push_back((double)v);
    return chrf_score_of<double>(flat.data(), s.opt);
}

double chrf_score_float32(const float* stats, const ChrfOptions& opt, bool* is_float32) {
    const NumpyScalar score = chrf_score_of<NumpyScalar>(stats, opt);
    *is_float32 = score.f32;
    return score.v;
}

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
                                          const std::vector<std::vector<std::string>>& ref_streams, const ChrfOptions& opt) {
    check_streams(hyps.size(), ref_streams, "corpus_chrf");
    check_chrf_options(opt);
    auto preprocess = [&opt](const std::string& sent) { return opt.lowercase ? py_lower(sent) : sent; };
    std::vector<ChrfStats> lines(hyps.size());
    for (size_t i = 0; i < hyps.size(); i++) {
        // Several references: the one whose statistics give the line the best score (the
        // first on a tie), as sacreBLEU's _compute_segment_statistics.
        const std::vector<ChrfCounts> h = chrf_ngrams(preprocess(hyps[i]), opt);
        ChrfStats line;
        line.opt = opt;
        double best_score = -1.0;
        for (const std::string& ref : line_references(ref_streams, i)) {
            line.stats = chrf_line_stats(h, chrf_ngrams(preprocess(ref), opt));
            const double score = chrf_compute_score(line);
            if (score > best_score) best_score = score, lines[i] = line;
        }
    }
    return lines;
}

ChrfStats corpus_chrf_multi(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams,
                            const ChrfOptions& opt) {
    ChrfStats s;
    s.opt = opt;
    s.stats.assign(opt.char_order + opt.word_order, {0, 0, 0});
    for (const ChrfStats& line : chrf_segment_stats(hyps, ref_streams, opt))
        for (size_t n = 0; n < s.stats.size(); n++)
            for (int k = 0; k < 3; k++) s.stats[n][k] += line.stats[n][k];
    s.score = chrf_compute_score(s);
    return s;
}

ChrfStats corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs, const ChrfOptions& opt) {
    return corpus_chrf_multi(hyps, {refs}, opt);
}

std::string chrf_signature(const ChrfOptions& opt, int nrefs) {
    return "nrefs:" + std::to_string(nrefs) + "|case:" + (opt.lowercase ? "lc" : "mixed") + "|eff:" +
           (opt.eps_smoothing ? "no" : "yes") + "|nc:" + std::to_string(opt.char_order) + "|nw:" +
           std::to_string(opt.word_order) + "|space:" + (opt.whitespace ? "yes" : "no");
}

std::string chrf_name(const ChrfOptions& opt) { return "chrF" + std::to_string(opt.beta) + std::string((size_t)opt.word_order, '+'); }

std::string format_chrf(const ChrfStats& s, int width) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s = %.*f", chrf_name(s.opt).c_str(), width, s.score);
    return buf;
}
