// ter_score.cpp — sacreBLEU 2.6.0's TER (toolkit/ter_score.h), in the order sacreBLEU computes it:
//
//   per line   rstrip (./bleu), Python's lower(), split()             py_lower, py_split
//              with TerOptions, Tercom's normalization and punctuation  ter_tokenize,
//              removal between them (tokenizer_ter.py); a reference    tercom_normalize_*
//              is tokenized twice, as sacreBLEU does
//              shifts: while the best shift lowers the edit distance,  ter_edits, best_shift
//              take it (at most 1,000 candidates a line in all)
//              edit distance: Levenshtein over words in a beam of 25   beam_edit_distance
//              around the length-scaled diagonal, with its trace
//   corpus     sum of the lines' fewest edits / sum of mean reference lengths
//
// The shift search follows sacreBLEU's lib_ter.py (itself Tercom's heuristics) step for step:
// candidates come from word runs the hypothesis and reference share (up to 10 words, start
// positions at most 50 apart), a run is moved only where both sides are wrong, and candidates
// rank by the edits they save, then the longer run, the earlier start, the earlier target, the
// words themselves. sacreBLEU caches rows of the distance matrix; the rows are the same
// recomputed (a shift keeps the length, so the beam), so no cache is kept here.
#include "toolkit/ter_score.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

#include "tokenizer.h"   // utf8_units, append_utf8
#include "toolkit/bleu_score.h"   // py_split, join_words
#include "toolkit/regex_rules.h"
#include "toolkit/unicode_lower.h"

namespace {

using namespace regex_rules;

// ---- Python's str.lower() -----------------------------------------------------------------

// The lowercase of code point c by kLowerRuns (c itself when no run holds it).
uint32_t lower_code_point(uint32_t c) {
    const LowerRun* end = kLowerRuns + sizeof kLowerRuns / sizeof kLowerRuns[0];
    const LowerRun* r = std::upper_bound(kLowerRuns, end, c, [](uint32_t v, const LowerRun& x) { return v < x.first; });
    if (r == kLowerRuns) return c;
    --r;
    return c <= r->last && (c - r->first) % r->stride == 0 ? (uint32_t)((int32_t)c + r->offset) : c;
}

// 1 cased, 2 case-ignorable, 0 neither (kSigmaClasses).
int sigma_class(uint32_t c) {
    const SigmaClassRange* end = kSigmaClasses + sizeof kSigmaClasses / sizeof kSigmaClasses[0];
    const SigmaClassRange* r =
        std::upper_bound(kSigmaClasses, end, c, [](uint32_t v, const SigmaClassRange& x) { return v < x.first; });
    return r != kSigmaClasses && c <= (r - 1)->last ? (r - 1)->kind : 0;
}

// Python's Final_Sigma: capital sigma at i lowers to final sigma when a cased code point comes
// before it and none after it, case-ignorable ones skipped both ways. An invalid byte is neither
// cased nor ignorable.
bool final_sigma(const std::vector<Utf8Unit>& cps, size_t i) {
    auto kind = [](const Utf8Unit& u) { return u.valid ? sigma_class(u.cp) : 0; };
    size_t j = i;
    while (j > 0 && kind(cps[j - 1]) == 2) j--;
    if (j == 0 || kind(cps[j - 1]) != 1) return false;
    for (j = i + 1; j < cps.size() && kind(cps[j]) == 2; j++) {
    }
    return j == cps.size() || kind(cps[j]) != 1;
}

// ---- the edit distance over words, in a beam (sacreBLEU's BeamEditDistance) ------------------

constexpr int kMaxShiftSize = 10, kMaxShiftDist = 50, kBeamWidth = 25, kMaxShiftCandidates = 1000;
constexpr int64_t kInfinity = (int64_t)1e16;
enum Op : char { kNop = ' ', kSub = 's', kIns = 'i', kDel = 'd', kUndef = 'x' };

using Words = std::vector<std::string_view>;
// A line's words as their ranks among the line's distinct words in byte order, so equal words
// are equal ids and comparing two id lists orders them as their words (Python's list order).
using Ids = std::vector<int>;

struct Cell {
    int64_t cost = kInfinity;
    char op = kUndef;
};

// The distance matrix's rows (nh + 1, nr + 1), each kept only over its beam's columns [lo, hi):
// a cell outside reads as unfilled (infinite cost), as sacreBLEU's rows of infinities do, and a
// line of n words costs about 50 n cells, not n^2. Row 0 and the last row are whole.
class BeamRows {
  public:
    BeamRows(size_t nh, size_t nr) : first_(nh + 1), lo_(nh + 1), hi_(nh + 1) {
        const double ratio = nh ? (double)nr / (double)nh : 1.0;
        const int beam = kBeamWidth < ratio / 2 ? (int)std::ceil(ratio / 2 + kBeamWidth) : kBeamWidth;
        int64_t size = 0;
        for (size_t i = 0; i <= nh; i++) {
            const int64_t diag = (int64_t)std::floor((double)i * ratio);
            lo_[i] = i == 0 ? 0 : std::max<int64_t>(0, diag - beam);
            hi_[i] = i == 0 || i == nh ? (int64_t)nr + 1 : std::min<int64_t>((int64_t)nr + 1, diag + beam);
            hi_[i] = std::max(lo_[i], hi_[i]);
            first_[i] = size - lo_[i];
            size += hi_[i] - lo_[i];
        }
        cells_.resize((size_t)size);
    }
    int64_t lo(size_t i) const { return lo_[i]; }
    int64_t hi(size_t i) const { return hi_[i]; }
    Cell operator()(size_t i, int64_t j) const {
        return j >= lo_[i] && j < hi_[i] ? cells_[(size_t)(first_[i] + j)] : Cell{};
    }
    Cell& at(size_t i, int64_t j) { return cells_[(size_t)(first_[i] + j)]; }

  private:
    std::vector<int64_t> first_, lo_, hi_;
    std::vector<Cell> cells_;
};

// Edit distance from hyp to ref and, when trace is given, its operations (hyp -> ref: kDel takes a
// hypothesis word, kIns a reference word), Tercom's preference on ties: match or substitution,
// then deletion, then insertion. Only cells within the beam around the length-scaled diagonal
// are filled (BeamRows).
int64_t beam_edit_distance(const Ids& hyp, const Ids& ref, std::string* trace) {
    const size_t nh = hyp.size(), nr = ref.size();
    BeamRows rows(nh, nr);
    auto dist = [&](size_t i, int64_t j) { return rows(i, j); };
    for (size_t j = 0; j <= nr; j++) rows.at(0, j) = {(int64_t)j, kIns};
    for (size_t i = 1; i <= nh; i++) {
        for (int64_t j = rows.lo(i); j < rows.hi(i); j++) {
            Cell& c = rows.at(i, j);
            if (j == 0) {
                c = {dist(i - 1, 0).cost + 1, kDel};
                continue;
            }
            const bool same = hyp[i - 1] == ref[j - 1];
            const Cell options[3] = {{dist(i - 1, j - 1).cost + (same ? 0 : 1), same ? kNop : kSub},
                                     {dist(i - 1, j).cost + 1, kDel},
                                     {dist(i, j - 1).cost + 1, kIns}};
            for (const Cell& o : options)
                if (c.cost > o.cost) c = o;
        }
    }
    if (!trace) return dist(nh, nr).cost;   // a shift candidate: its cost alone
    trace->clear();
    for (size_t i = nh, j = nr; i > 0 || j > 0;) {
        const char op = dist(i, j).op;
        trace->push_back(op);
        if (op == kSub || op == kNop) i--, j--;
        else if (op == kIns) j--;
        else if (op == kDel) i--;
        else throw std::logic_error("TER: the edit distance's trace reached an unfilled cell");
    }
    std::reverse(trace->begin(), trace->end());
    return dist(nh, nr).cost;
}

// From the trace reversed (reference -> hypothesis): the hypothesis position each reference
// word aligns with (-1: before the first), and which words of each side are in error.
struct Alignment {
    std::vector<int> ref_to_hyp;
    std::vector<char> ref_err, hyp_err;
};

Alignment trace_alignment(const std::string& trace) {
    Alignment a;
    int h = -1;
    for (char op : trace) {
        // flipped: the distance's kDel (a hypothesis word) is an insertion into the reference
        if (op == kNop || op == kSub) {
            h++;
            a.ref_to_hyp.push_back(h);
            a.hyp_err.push_back(op == kSub);
            a.ref_err.push_back(op == kSub);
        } else if (op == kDel) {
            h++;
            a.hyp_err.push_back(1);
        } else {
            a.ref_to_hyp.push_back(h);
            a.ref_err.push_back(1);
        }
    }
    return a;
}

// Python's words[a:b], indices clamped.
void append_slice(Ids& out, const Ids& w, int64_t a, int64_t b) {
    a = std::clamp<int64_t>(a, 0, (int64_t)w.size()), b = std::clamp<int64_t>(b, 0, (int64_t)w.size());
    if (a < b) out.insert(out.end(), w.begin() + a, w.begin() + b);
}

// words with words[start, start + length) moved before position target (sacreBLEU's _perform_shift).
Ids perform_shift(const Ids& w, int start, int length, int target) {
    Ids out;
    out.reserve(w.size());
    if (target < start) {
        append_slice(out, w, 0, target), append_slice(out, w, start, start + length);
        append_slice(out, w, target, start), append_slice(out, w, start + length, (int64_t)w.size());
    } else if (target > start + length) {
        append_slice(out, w, 0, start), append_slice(out, w, start + length, target);
        append_slice(out, w, start, start + length), append_slice(out, w, target, (int64_t)w.size());
    } else {
        append_slice(out, w, 0, start), append_slice(out, w, start + length, length + target);
        append_slice(out, w, start, start + length), append_slice(out, w, length + target, (int64_t)w.size());
    }
    return out;
}

// A shift's rank: saved edits, then the longer run, the earlier start, the earlier target, then
// the shifted words (Python's tuple order).
struct Shift {
    int64_t saved = 0;
    int length = 0, start = 0, target = 0;
    Ids words;
    bool operator>(const Shift& o) const {
        if (saved != o.saved) return saved > o.saved;
        if (length != o.length) return length > o.length;
        if (start != o.start) return start < o.start;
        if (target != o.target) return target < o.target;
        return words > o.words;
    }
};

bool any_error(const std::vector<char>& err, int from, int length) {
    for (int k = from; k < from + length && k < (int)err.size(); k++)
        if (err[k]) return true;
    return false;
}

// The best shift of hyp towards ref (sacreBLEU's _shift); false when none was tried.
// *distance: hyp's own edit distance; *candidates counts the shifts evaluated, over all calls
// for the line.
bool best_shift(const Ids& hyp, const Ids& ref, int64_t* distance, int* candidates, Shift* best) {
    std::string trace;
    const int64_t before = *distance = beam_edit_distance(hyp, ref, &trace);
    const Alignment al = trace_alignment(trace);
    const int nh = (int)hyp.size(), nr = (int)ref.size();
    bool found = false;
    for (int sh = 0; sh < nh; sh++) {
        for (int sr = 0; sr < nr; sr++) {
            if (std::abs(sr - sh) > kMaxShiftDist) continue;
            for (int length = 1; length <= kMaxShiftSize && sh + length <= nh && sr + length <= nr &&
                                 hyp[sh + length - 1] == ref[sr + length - 1];
                 length++) {
                if (!any_error(al.hyp_err, sh, length) || !any_error(al.ref_err, sr, length)) continue;
                const int aligned = al.ref_to_hyp[sr];
                if (sh <= aligned && aligned < sh + length) continue;
                int prev = -1;
                for (int offset = -1; offset < length; offset++) {
                    const int target = sr + offset == -1 ? 0 : al.ref_to_hyp[sr + offset] + 1;
                    if (target == prev) continue;
                    prev = target;
                    Ids shifted = perform_shift(hyp, sh, length, target);
                    Shift s{before - beam_edit_distance(shifted, ref, nullptr), length, sh, target, std::move(shifted)};
                    ++*candidates;
                    if (!found || s > *best) *best = std::move(s), found = true;
                }
                if (*candidates >= kMaxShiftCandidates) return found;
            }
        }
    }
    return found;
}

// hyp's and ref's words as Ids over their distinct words.
void word_ids(const Words& hyp, const Words& ref, Ids* hyp_ids, Ids* ref_ids) {
    Words distinct(hyp);
    distinct.insert(distinct.end(), ref.begin(), ref.end());
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    auto ids = [&](const Words& w, Ids* out) {
        for (std::string_view x : w)
            out->push_back((int)(std::lower_bound(distinct.begin(), distinct.end(), x) - distinct.begin()));
    };
    ids(hyp, hyp_ids), ids(ref, ref_ids);
}

// ---- Tercom's tokenizer (sacreBLEU's tokenizer_ter.py), on UTF-8 ------------------------------
//
// The rules with ASCII patterns work on bytes: a multi-byte UTF-8 character holds no ASCII byte,
// so a byte scan matches where Python's code-point scan does (a character's last byte standing in
// for it before a match, its first byte after one). The code-point classes decode (utf8_units);
// an invalid byte is a character of its own, in no class, and passes through unchanged.

struct CodeRange {
    uint32_t first, last;
};

// Regex classes as code-point ranges.
constexpr CodeRange kHanChars[] = {{0x4E00, 0x9FFF}, {0x3400, 0x4DBF}};
constexpr CodeRange kCjkStrokes[] = {{0x31C0, 0x31EF}, {0x2E80, 0x2EFF}};
constexpr CodeRange kCjkCompat[] = {{0x3300, 0x33FF}, {0xF900, 0xFAFF}, {0xFE30, 0xFE4F}};
constexpr CodeRange kCjkEnclosed[] = {{0x3200, 0x3F22}};   // sic: sacreBLEU's range runs past 32FF
constexpr CodeRange kAsianPunct[] = {{0x3001, 0x3002}, {0x3008, 0x3011}, {0x3014, 0x301F}, {0xFF61, 0xFF65}, {0x30FB, 0x30FB}};
constexpr CodeRange kFullWidthPunct[] = {{0xFF0E, 0xFF0E}, {0xFF0C, 0xFF0C}, {0xFF1F, 0xFF1F}, {0xFF1A, 0xFF1B},
                                         {0xFF01, 0xFF02}, {0xFF08, 0xFF09}};
constexpr CodeRange kPunct[] = {{'.', '.'}, {',', ','}, {'?', '?'}, {':', ';'}, {'!', '!'}, {'"', '"'}, {'(', ')'}};

// re.sub(r"([CLASS])", r" \1 ", s) when pad, re.sub(r"[CLASS]", "", s) when not.
template <size_t N>
std::string sub_each(std::string_view s, const CodeRange (&cls)[N], bool pad) {
    std::string out;
    out.reserve(s.size() + s.size() / 2);
    for (const Utf8Unit& u : utf8_units(s)) {   // an invalid byte: in no class
        const bool in = u.valid && std::any_of(cls, cls + N, [&](const CodeRange& r) { return u.cp >= r.first && u.cp <= r.last; });
        if (!in) out.append(u.text);
        else if (pad) out.append(" ").append(u.text).append(" ");
    }
    return out;
}

// _normalize_general_and_western, rule for rule.
std::string tercom_normalize_western(std::string_view line) {
    std::string s = replace_all(line, "\n-", "");   // \n-   (end-of-line hyphenation)
    s = replace_all(s, "\n", " ");                   // \n
    s = replace_all(s, "&quot;", "\"");              // &quot; &amp; &lt; &gt;, one after the
    s = replace_all(s, "&amp;", "&");                // other ("&amp;lt;" becomes "<")
    s = replace_all(s, "&lt;", "<");
    s = replace_all(s, "&gt;", ">");
    s = " " + s + " ";
    s = space_around(s, is_13a_symbol);              // ([{-~[-` -&(-+:-@/]) -> " \1 "
    s = replace_all(s, "'s ", " 's ");               // 's  -> " 's "
    // 's$ -> " 's": never matches, the line ends with the space just added (and holds no "\n"
    // for $ to stand before)
    return split_period_comma_dash(s);              // period, comma and dash, as 13a's
}

// _normalize_asian: CJK characters and punctuation padded with spaces. Its three kana rules,
// (^|^[K])([K]+)(?=$|^[K]) for Hiragana, Katakana and Katakana Phonetic Extensions K, need ^
// (the string's start: no re.MULTILINE) before the run and $ (the end, or before a final "\n")
// after it, so they match only a string wholly of kana; the string here starts with the space
// tercom_normalize_western added, so they never match and kana runs stay whole.
std::string tercom_normalize_asian(std::string s) {
    s = sub_each(s, kHanChars, true);          // ([\u4e00-\u9fff\u3400-\u4dbf])
    s = sub_each(s, kCjkStrokes, true);        // ([\u31c0-\u31ef\u2e80-\u2eff])
    s = sub_each(s, kCjkCompat, true);         // ([\u3300-\u33ff\uf900-\ufaff\ufe30-\ufe4f])
    s = sub_each(s, kCjkEnclosed, true);       // ([\u3200-\u3f22])
    s = sub_each(s, kAsianPunct, true);        // ASIAN_PUNCT
    return sub_each(s, kFullWidthPunct, true); // FULL_WIDTH_PUNCT
}

}  // namespace

std::string py_lower(std::string_view s) {
    const std::vector<Utf8Unit> cps = utf8_units(s);
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < cps.size(); i++) {
        const uint32_t c = cps[i].cp;
        if (!cps[i].valid) out.append(cps[i].text);   // an invalid byte, unchanged
        else if (c == 0x130) append_utf8(&out, 0x69), append_utf8(&out, 0x307);
        else if (c == 0x3A3) append_utf8(&out, final_sigma(cps, i) ? 0x3C2 : 0x3C3);
        else append_utf8(&out, lower_code_point(c));
    }
    return out;
}

int ter_edits(const Words& hyp_words, const Words& ref_words) {
    if (ref_words.empty()) return (int)hyp_words.size();
    Ids words, ref;
    word_ids(hyp_words, ref_words, &words, &ref);
    int shifts = 0, candidates = 0;
    for (;;) {   // shift while a shift lowers the distance; the words left are those last searched
        Shift best;
        int64_t distance;
        const bool found = best_shift(words, ref, &distance, &candidates, &best);
        if (candidates >= kMaxShiftCandidates || !found || best.saved <= 0) return shifts + (int)distance;
        shifts++;
        words = std::move(best.words);
    }
}

std::string ter_tokenize(std::string_view line, const TerOptions& opt) {
    if (line.empty()) return "";
    std::string s = opt.case_sensitive ? std::string(line) : py_lower(line);
    if (opt.normalized) {
        s = tercom_normalize_western(s);
        if (opt.asian_support) s = tercom_normalize_asian(std::move(s));
    }
    if (opt.no_punct) {
        s = sub_each(s, kPunct, false);   // _remove_punct: [\.,\?:;!\"\(\)]
        if (opt.asian_support) s = sub_each(sub_each(s, kAsianPunct, false), kFullWidthPunct, false);
    }
    return join_words(s);
}

std::vector<TerStats> ter_segment_stats(const std::vector<std::string>& hyps,
                                        const std::vector<std::vector<std::string>>& ref_streams, const TerOptions& opt) {
    if (ref_streams.empty()) throw std::invalid_argument("TER: no reference stream");
    for (const auto& refs : ref_streams)
        if (refs.size() != hyps.size())
            throw std::invalid_argument("TER: " + std::to_string(hyps.size()) + " hypotheses but " +
                                        std::to_string(refs.size()) + " references");
    std::vector<TerStats> lines(hyps.size());
    for (size_t i = 0; i < hyps.size(); i++) {
        const std::string hyp_tok = ter_tokenize(py_rstrip(hyps[i]), opt);
        const Words hyp = py_split(hyp_tok);
        int64_t best = (int64_t)1e16, ref_words = 0;
        for (const auto& refs : ref_streams) {
            // tokenized twice, as sacreBLEU does (Metric._cache_references, then
            // TER._extract_reference_info); with normalized, the second pass can split more
            // ("s's &" becomes "s 's &")
            const std::string ref_tok = ter_tokenize(ter_tokenize(py_rstrip(refs[i]), opt), opt);
            const Words ref = py_split(ref_tok);
            best = std::min<int64_t>(best, ter_edits(hyp, ref));
            ref_words += (int64_t)ref.size();
        }
        lines[i].edits = (double)best;
        lines[i].ref_len = (double)ref_words / (double)ref_streams.size();
    }
    return lines;
}

double ter_compute_score(double edits, double ref_len) {
    return 100.0 * (ref_len > 0 ? edits / ref_len : edits > 0 ? 1.0 : 0.0);
}

TerStats corpus_ter_multi(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& ref_streams,
                          const TerOptions& opt) {
    TerStats s;
    for (const TerStats& line : ter_segment_stats(hyps, ref_streams, opt)) {
        s.edits += line.edits;
        s.ref_len += line.ref_len;
    }
    s.score = ter_compute_score(s.edits, s.ref_len);
    return s;
}

std::string ter_signature(int nrefs, const TerOptions& opt) {
    auto yes_no = [](bool b) { return b ? "yes" : "no"; };
    return "nrefs:" + std::to_string(nrefs) + "|case:" + (opt.case_sensitive ? "mixed" : "lc") + "|tok:tercom|norm:" +
           yes_no(opt.normalized) + "|punct:" + yes_no(!opt.no_punct) + "|asian:" + yes_no(opt.asian_support);
}

std::string format_ter(const TerStats& s, int width) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "TER = %.*f", width, s.score);
    return buf;
}
