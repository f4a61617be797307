// test/test_bleu.cpp — BLEU against sacreBLEU 2.6.0: hand-worked cases, then the shared
// cases in ../shared/bleu (or $BLEU_CASES_DIR): every case of expected.json (counts, totals
// and lengths exactly; score and BP within 1e-9) and every line of tok13a.tsv.
// When the shared folder is missing those cases are reported as skipped, not counted.
#include "tokenizer.h"   // append_utf8
#include "toolkit/bleu_score.h"
#include "toolkit/numbers.h"   // printed
#include "toolkit/numpy_random.h"
#include "toolkit/significance.h"
#include "toolkit/ter_score.h"
#include "cli/text_io.h"
#include "test/check.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

// ---- tiny JSON reader (strings with \uXXXX and surrogate pairs, numbers, arrays, objects) --

struct Json {
    enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
    double num = 0;
    std::string str;  // string value, or a number's source text
    std::vector<Json> items;
    std::map<std::string, Json> fields;
    const Json& operator[](const char* k) const {
        auto it = fields.find(k);
        if (it == fields.end()) throw std::runtime_error(std::string("missing key ") + k);
        return it->second;
    }
};

struct JsonReader {
    const std::string& s;
    size_t i = 0;

    [[noreturn]] void fail(const char* what) {
        throw std::runtime_error("JSON: " + std::string(what) + " at offset " + std::to_string(i));
    }
    void skip_ws() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
    }
    uint32_t hex4() {
        if (i + 4 > s.size()) fail("short \\u escape");
        uint32_t v = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[i++];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= c - '0';
            else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
            else fail("bad hex digit");
        }
        return v;
    }
    // \uXXXX, joining a high surrogate with a following \uXXXX low surrogate.
    uint32_t unicode_escape() {
        uint32_t cp = hex4();
        bool high = cp >= 0xD800 && cp <= 0xDBFF;
        if (high && i + 6 <= s.size() && s[i] == '\\' && s[i + 1] == 'u') {
            size_t save = i;
            i += 2;
            uint32_t lo = hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i = save;
        }
        return cp;
    }
    std::string string() {
        if (s[i] != '"') fail("expected string");
        i++;
        std::string out;
        while (i < s.size() && s[i] != '"') {
            char c = s[i++];
            if (c != '\\') { out += c; continue; }
            if (i >= s.size()) fail("dangling backslash");
            char e = s[i++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': append_utf8(&out, unicode_escape()); break;
                default: fail("bad escape");
            }
        }
        if (i >= s.size()) fail("unterminated string");
        i++;
        return out;
    }
    Json value() {
        skip_ws();
        if (i >= s.size()) fail("unexpected end");
        Json v;
        char c = s[i];
        if (c == '"') { v.kind = Json::String; v.str = string(); }
        else if (c == '[') { v.kind = Json::Array; list(']', [&] { v.items.push_back(value()); }); }
        else if (c == '{') { v.kind = Json::Object; list('}', [&] { member(v); }); }
        else if (s.compare(i, 4, "true") == 0) { v.kind = Json::Bool; v.num = 1; i += 4; }
        else if (s.compare(i, 5, "false") == 0) { v.kind = Json::Bool; i += 5; }
        else if (s.compare(i, 4, "null") == 0) { i += 4; }
        else number(v);
        return v;
    }
    void member(Json& obj) {
        skip_ws();
        std::string key = string();
        skip_ws();
        if (i >= s.size() || s[i++] != ':') fail("expected ':'");
        obj.fields[key] = value();
    }
    template <class F> void list(char close, F element) {
        i++;
        skip_ws();
        if (i < s.size() && s[i] == close) { i++; return; }
        for (;;) {
            element();
            skip_ws();
            if (i >= s.size()) fail("unterminated list");
            char c = s[i++];
            if (c == close) return;
            if (c != ',') fail("expected ',' or close");
        }
    }
    void number(Json& v) {
        const char* start = s.c_str() + i;
        char* end = nullptr;
        v.num = std::strtod(start, &end);  // correctly rounded: Python's repr round-trips
        if (end == start) fail("bad value");
        v.kind = Json::Number;
        v.str.assign(start, (size_t)(end - start));
        i += (size_t)(end - start);
    }
};

Json parse_json(const std::string& text) { JsonReader r{text}; return r.value(); }

// One JSON string literal (the whole of `field`, up to surrounding white space).
std::string json_string(const std::string& field) {
    JsonReader r{field};
    r.skip_ws();
    return r.string();
}

// Python's repr-like view of a string for messages: non-printable bytes as \xNN.
std::string show(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c < 0x20 || c == 0x7F) { char b[8]; std::snprintf(b, sizeof b, "\\x%02x", c); out += b; }
        else out += (char)c;
    }
    return out;
}

// ---- hand-worked cases ----------------------------------------------------------------------

void check_tok(const std::string& in, const std::string& want) {
    std::string got = tokenize_13a(in);
    check(got == want, "13a  %-34s -> \"%s\" (want \"%s\")", ("\"" + show(in) + "\"").c_str(),
          show(got).c_str(), show(want).c_str());
}

void test_tokenizer_rules() {
    check_tok("Hello, world!", "Hello , world !");
    check_tok("5.", "5 .");                      // padding lets "." at the end split
    check_tok(".5", ". 5");                      // ... and at the start
    check_tok("a.,b", "a . , b");                // rule 2 then rule 3
    check_tok("2--3", "2 - -3");                 // rule 4 resumes after each match
    check_tok("it's e-mail 'q'", "it's e-mail 'q'");  // ' and - are not 13a symbols
    check_tok("&amp;quot;", "& quot ;");         // entities replaced one kind at a time
    check_tok("a<skipped>b", "ab");
    check_tok("a -\nb", "a b");                  // "-\n" joins, without an rstrip first
    check_tok("a\xc2\xa0" "b\xe2\x80\x89" "c\xe3\x80\x80" "d", "a b c d");  // NBSP, U+2009, U+3000
    check_tok("a\xe2\x80\x8b" "b", "a\xe2\x80\x8b" "b");  // U+200B is not white space
    check_tok("a\xef\xbb\xbf" "b", "a\xef\xbb\xbf" "b");  // nor U+FEFF
    check_tok("a\xe1\xa0\x8e" "b", "a\xe1\xa0\x8e" "b");  // nor U+180E (since Unicode 6.3)
    check_tok("a\x1c" "b\x1f" "c\x0b" "d\xc2\x85" "e", "a b c d e");  // \x1c-\x1f, \v, U+0085
    check_tok("caf\xc3\xa9.", "caf\xc3\xa9 .");  // multi-byte character before "."
    check_tok(".\xc3\xa9", ". \xc3\xa9");        // ... and after
}

BleuStats score1(const std::string& hyp, const std::string& ref) {
    return corpus_bleu(std::vector<std::string>{hyp}, std::vector<std::string>{ref});
}

bool same_counts(const BleuStats& s, const int64_t c[4], const int64_t t[4]) {
    for (int n = 0; n < 4; n++)
        if (s.counts[n] != c[n] || s.totals[n] != t[n]) return false;
    return true;
}

void check_case(const char* what, const BleuStats& s, std::vector<int64_t> c, std::vector<int64_t> t,
                int64_t sys_len, int64_t ref_len, double bleu, double bp) {
    bool ok = same_counts(s, c.data(), t.data()) && s.sys_len == sys_len && s.ref_len == ref_len &&
              std::fabs(s.bleu - bleu) <= 1e-9 && std::fabs(s.bp - bp) <= 1e-12;
    check(ok, "hand %-34s counts %lld/%lld/%lld/%lld totals %lld/%lld/%lld/%lld len %lld/%lld "
              "bleu %.12f (want %.12f) bp %.6f", what, (long long)s.counts[0],
          (long long)s.counts[1], (long long)s.counts[2], (long long)s.counts[3],
          (long long)s.totals[0], (long long)s.totals[1], (long long)s.totals[2],
          (long long)s.totals[3], (long long)s.sys_len, (long long)s.ref_len, s.bleu, bleu, s.bp);
}

void test_hand_bleu() {
    // Identical 6-token sentence: every precision 100.
    check_case("identical", score1("the cat sat on the mat", "the cat sat on the mat"),
               {6, 5, 4, 3}, {6, 5, 4, 3}, 6, 6, 100.0, 1.0);
    // Clipping: "the" x7 matches only the ref's two "the"; orders 2-4 have no match, so exp
    // smoothing gives them 1/2, 1/4, 1/8 of a match: p = 2/7, 1/12, 1/20, 1/32.
    double want = std::exp((std::log(200.0 / 7) + std::log(100.0 / 12) + std::log(100.0 / 20) +
                            std::log(100.0 / 32)) / 4);
    BleuStats clip = score1("the the the the the the the", "the cat is on the mat");
    check_case("clipping + exp smoothing", clip, {2, 0, 0, 0}, {7, 6, 5, 4}, 7, 6, want, 1.0);
    check(std::fabs(want - 7.8098498423) < 1e-9, "hand clipping score by hand 7.8098498423 (got %.10f)", want);
    // Shorter than ref, and no 4-grams at all: precision 4 is 0 (no smoothing without a
    // 4-gram), log floors to -9999999999, so the score is 0; BP = exp(1 - 6/3).
    check_case("3 tokens vs 6: no 4-grams", score1("a b c", "a b c d e f"), {3, 2, 1, 0},
               {3, 2, 1, 0}, 3, 6, 0.0, std::exp(-1.0));
    // No match at all: early stop, score 0.
    check_case("no match", score1("x y z w", "a b c d"), {0, 0, 0, 0}, {4, 3, 2, 1}, 4, 4, 0.0, 1.0);
    // Empty hypothesis: BP = 0.
    check_case("empty hypothesis", score1("", "a b c d"), {0, 0, 0, 0}, {0, 0, 0, 0}, 0, 4, 0.0, 0.0);
    // Tokenization is applied to both sides.
    check_case("13a on both sides", score1("Hello, world!", "Hello , world !"), {4, 3, 2, 1},
               {4, 3, 2, 1}, 4, 4, 100.0, 1.0);
    // Python white space (NBSP) splits words.
    check_case("NBSP separates words", score1("a\xc2\xa0" "b c d", "a b c d"), {4, 3, 2, 1},
               {4, 3, 2, 1}, 4, 4, 100.0, 1.0);
    // rstrip runs before 13a, so a trailing "-\n" is stripped to "-" rather than joined.
    check_case("rstrip before 13a", score1("a b c d -\n", "a b c d -"), {5, 4, 3, 2},
               {5, 4, 3, 2}, 5, 5, 100.0, 1.0);
    // Statistics are per line: the same words on the other line do not match.
    BleuStats swap = corpus_bleu({"a b", "c d"}, {"c d", "a b"});
    check_case("matches stay within a line", swap, {0, 0, 0, 0}, {4, 2, 0, 0}, 4, 4, 0.0, 1.0);
    // Case-sensitive.
    check_case("case-sensitive", score1("A b c d", "a b c d"), {3, 2, 1, 0}, {4, 3, 2, 1}, 4, 4,
               std::exp((std::log(75.0) + std::log(200.0 / 3) + std::log(50.0) + std::log(100.0 / 2)) / 4),
               1.0);
}

void test_format_and_signature() {
    BleuStats s = score1("the the the the the the the", "the cat is on the mat");
    std::string got = format_bleu(s);
    std::string want = "BLEU = 7.81 28.6/8.3/5.0/3.1 (BP = 1.000 ratio = 1.167 hyp_len = 7 ref_len = 6)";
    check(got == want, "format \"%s\"", got.c_str());  // 3.125 -> "3.1": round half to even
    BleuStats none = score1("x y z w", "a b c d");
    got = format_bleu(none);
    want = "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 ref_len = 4)";
    check(got == want, "format no-match \"%s\"", got.c_str());
    check(bleu_signature() == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp", "signature %s",
          bleu_signature().c_str());
}

// check_chrf_options, the library's own guard (./bleu's options refuse the same ranges first):
// each bound accepted, one past it refused.
void test_chrf_option_ranges() {
    struct Case { int char_order, word_order, beta; bool ok; };
    const Case cases[] = {{1, 0, 0, true},    {20, 10, 1000, true}, {0, 0, 2, false}, {21, 0, 2, false},
                          {6, -1, 2, false},  {6, 11, 2, false},    {6, 0, -1, false}, {6, 0, 1001, false}};
    int wrong = 0;
    for (const Case& c : cases) {
        ChrfOptions opt;
        opt.char_order = c.char_order, opt.word_order = c.word_order, opt.beta = c.beta;
        bool refused = false;
        try { check_chrf_options(opt); } catch (const std::invalid_argument&) { refused = true; }
        if (refused == c.ok) {
            wrong++;
            std::printf("  nc %d nw %d beta %d: %s\n", c.char_order, c.word_order, c.beta, refused ? "refused" : "accepted");
        }
    }
    check(wrong == 0, "chrF's options: character order 1..20, word order 0..10, beta 0..1000 accepted, one past "
          "each bound refused (%d of 8 cases wrong)", wrong);
}

// tokenize none (and char) leaves white space as it is, but sacreBLEU's n-grams are of split()'s
// words: runs of spaces and tabs are one gap, so "a  b\tc d" scores 100 against "a b c  d"
// (sacreBLEU 2.6.0: 100.00 with none; char too, whose tokens are then one character each).
void test_untokenized_white_space() {
    for (const char* name : {"none", "char"}) {
        BleuOptions opt;
        opt.tokenize = name;
        const BleuStats s = corpus_bleu({"a  b\tc d"}, {"a b c  d"}, opt);
        check(std::fabs(s.bleu - 100.0) < 1e-9 && s.sys_len == 4 && s.ref_len == 4, "tokenize %s: \"a  b\\tc d\" against \"a b c  d\": %s (sacreBLEU: 100.00)",
              name, format_bleu(s, 2, opt).c_str());
    }
}

// A smoothing value of 0 given is 0, not the method's default (sacreBLEU uses a default only
// for None): floor 0 leaves a zero count's precision 0, add-k 0 adds nothing. sacreBLEU 2.6.0:
// floor 0 -> 0.00 (default 0.1: 25.41), add-k 0 -> 53.73 (default 1: 63.89).
void test_smoothing_value_zero() {
    BleuOptions floor0;
    floor0.smooth_method = "floor", floor0.smooth_value = 0;
    const BleuStats f = corpus_bleu({"the cat sat on my mat"}, {"the cat is on my mat"}, floor0);
    check(f.counts[3] == 0 && f.bleu == 0.0 && format_bleu(f, 2, floor0).find(" 83.3/60.0/25.0/0.0 ") != std::string::npos &&
              bleu_signature(1, floor0) == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:floor[0.00]",
          "--smooth-method floor --smooth-value 0: %s, %s (sacreBLEU: 0.00 83.3/60.0/25.0/0.0, floor[0.00])", format_bleu(f, 2, floor0).c_str(),
          bleu_signature(1, floor0).c_str());
    BleuOptions addk0;
    addk0.smooth_method = "add-k", addk0.smooth_value = 0;
    const BleuStats a = corpus_bleu({"the cat sat on a mat"}, {"the cat sat on the mat"}, addk0);
    check(std::fabs(a.bleu - 53.73) < 0.005 && bleu_signature(1, addk0) == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:add-k[0.00]",
          "--smooth-method add-k --smooth-value 0: %s, %s (sacreBLEU: 53.73, add-k[0.00])", format_bleu(a, 2, addk0).c_str(),
          bleu_signature(1, addk0).c_str());
}

// The library's own guard on the smoothing value (./bleu's --smooth-value refuses the same
// first): floor's and add-k's NaN or infinity throws std::invalid_argument, as does an unknown
// method; exp and none drop any value, as sacreBLEU ignores it.
void test_smoothing_value_refused() {
    const double nan = std::nan(""), inf = HUGE_VAL;
    struct Case { const char* method; double value; bool ok; };
    const Case cases[] = {{"floor", nan, false}, {"add-k", nan, false}, {"floor", inf, false}, {"add-k", inf, false},
                          {"floor", 0.5, true},  {"exp", nan, true},    {"none", inf, true},   {"max", 1, false}};
    int wrong = 0;
    for (const Case& c : cases) {
        BleuOptions opt;
        opt.smooth_method = c.method, opt.smooth_value = c.value;
        bool refused = false;
        try { checked_bleu_options(opt); } catch (const std::invalid_argument&) { refused = true; }
        if (refused == c.ok) {
            wrong++;
            std::printf("  %s %g: %s\n", c.method, c.value, refused ? "refused" : "accepted");
        }
    }
    check(wrong == 0, "smoothing values: floor and add-k refuse NaN and infinity, take 0.5; exp and none drop theirs; "
          "an unknown method is refused (%d of 8 cases wrong)", wrong);
}

void test_errors_and_bytes() {
    bool threw = false;
    try { corpus_bleu({"a", "b"}, {"a"}); } catch (const std::invalid_argument&) { threw = true; }
    check(threw, "mismatched sizes throw std::invalid_argument");
    // An empty reference is one of no tokens, as sacreBLEU 2.6.0 scores it (its CLI on these two
    // lines: 85.7/100.0/100.0/100.0, hyp_len 7, ref_len 6).
    const BleuStats e = corpus_bleu({"the cat sat on the mat", "hello"}, {"the cat sat on the mat", ""});
    check(e.counts[0] == 6 && e.totals[0] == 7 && e.counts[3] == 3 && e.totals[3] == 3 && e.sys_len == 7 &&
              e.ref_len == 6 && std::fabs(e.bleu - 96.2) < 0.05,
          "an empty reference counts as no tokens: %s (sacreBLEU: 96.2, 85.7/100.0/100.0/100.0, ratio 1.167)",
          format_bleu(e).c_str());
    // Invalid UTF-8 is kept byte for byte and never crashes.
    std::string bad = "\xff\xfe caf\xc3 .\xe2\x80 x\xc2";
    std::string tok = tokenize_13a(bad);
    check(tok == "\xff\xfe caf\xc3 . \xe2\x80 x\xc2", "invalid UTF-8 tokenized byte-wise: \"%s\"", show(tok).c_str());
    BleuStats s = score1(bad + " a b c", bad + " a b c");
    check(s.bleu > 100 - 1e-9 && s.sys_len == 8, "invalid UTF-8 identical lines score 100 (%.6f, %lld tokens)",
          s.bleu, (long long)s.sys_len);
    check(py_rstrip("ab \xc2\xa0\t\xe3\x80\x80") == "ab" && py_rstrip("ab\xc2") == "ab\xc2" &&
              py_rstrip("\x85") == "\x85",
          "py_rstrip strips Unicode white space, not a lone byte 0x85");
}

// Python's str.isspace(), written out from its documentation (the code points of bidirectional
// class WS, B or S, or category Zs): what py_split and py_rstrip must treat as white space.
bool python_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Every scalar value between two letters (py_split: two words only around white space), at a
// line's end and alone (py_rstrip: removed only when white space); then views that end inside a
// character, which must not read past their end.
void test_python_white_space() {
    int64_t split_wrong = 0, strip_wrong = 0, spaces = 0;
    std::string first_wrong = "none";
    for (uint32_t c = 0; c <= 0x10FFFF; c++) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        std::string ch;
        append_utf8(&ch, c);
        const bool space = python_space(c);
        spaces += space;
        const size_t words = py_split("a" + ch + "b").size();
        const bool split_ok = space ? words == 2 : words == 1;
        const bool strip_ok = (py_rstrip("a" + ch) == "a") == space && py_rstrip(ch).empty() == space;
        split_wrong += !split_ok;
        strip_wrong += !strip_ok;
        if ((!split_ok || !strip_ok) && first_wrong == "none") first_wrong = printed("U+%04X", (unsigned)c);
    }
    check(split_wrong == 0 && strip_wrong == 0 && spaces == 29,
          "every scalar value between letters, at a line's end and alone: %lld white space; py_split wrong on %lld, "
          "py_rstrip on %lld (first: %s)",
          (long long)spaces, (long long)split_wrong, (long long)strip_wrong, first_wrong.c_str());
    // (pieces: each view's words and their sizes in bytes; want "1:2", "1:3", "1:3")
    auto pieces = [](const std::string& text, size_t len) {
        const std::vector<std::string_view> words = py_split(std::string_view(text.data(), len));
        std::string out = std::to_string(words.size());
        for (std::string_view w : words) out += ":" + std::to_string(w.size());
        return out;
    };
    const std::string nel = pieces("a\xc2\x85", 2), thin = pieces("a\xe2\x80\x89", 3), ideo = pieces("a\xe3\x80\x80", 3);
    check(nel == "1:2" && thin == "1:3" && ideo == "1:3",
          "py_split of a view cut inside U+0085, U+2009, U+3000: one word of the bytes it holds (words:bytes %s, %s, %s)",
          nel.c_str(), thin.c_str(), ideo.c_str());
}

// ---- TER (toolkit/ter_score.h), by hand; test/test_sacrebleu.py compares it with sacreBLEU ----

void check_ter(const char* what, const std::vector<std::string>& hyps,
               const std::vector<std::vector<std::string>>& refs, double edits, double ref_len) {
    const TerStats s = corpus_ter_multi(hyps, refs);
    const double want = 100.0 * (ref_len > 0 ? edits / ref_len : edits > 0 ? 1.0 : 0.0);
    check(s.edits == edits && s.ref_len == ref_len && std::fabs(s.score - want) < 1e-12,
          "TER %s: %g edits / %g reference words = %s (want %g / %g)", what, s.edits, s.ref_len,
          format_ter(s, 4).c_str(), edits, ref_len);
}

void test_hand_ter() {
    // A block moved is one edit (a shift), not four (two deletions, two insertions).
    check_ter("one shift of two words", {"a b c d"}, {{"c d a b"}}, 1, 4);
    check_ter("one substitution", {"a x c"}, {{"a b c"}}, 1, 3);
    check_ter("insertions into an empty hypothesis", {""}, {{"a b"}}, 2, 2);
    check_ter("an empty reference: one edit a word, score 100", {"a b"}, {{""}}, 2, 0);
    check_ter("both empty", {""}, {{""}}, 0, 0);
    check_ter("lowercased before comparing", {"The CAT"}, {{"the cat"}}, 0, 2);
    check_ter("Greek: word-final capital sigma lowers to final sigma", {"\u039f\u0394\u039f\u03a3"},
              {{"\u03bf\u03b4\u03bf\u03c2"}}, 0, 1);
    check_ter("Greek: so it no longer equals a medial sigma", {"\u039f\u0394\u039f\u03a3"},
              {{"\u03bf\u03b4\u03bf\u03c3"}}, 1, 1);
    // Two references: line 1 costs 1 against either ('a b x': a substitution; 'a c': b deleted),
    // line 2 costs 0 against its second; lengths are the means, (3 + 2) / 2 and (1 + 1) / 2.
    check_ter("the fewest edits over two references, their mean length", {"a b c", "a"},
              {{"a b x", "b"}, {"a c", "a"}}, 1, 3.5);
    check(py_lower("\u0130stanbul") == "i\u0307stanbul", "py_lower: U+0130 lowers to i + U+0307 (%s)",
          py_lower("\u0130stanbul").c_str());
    check(py_lower("\u03a3 A\u03a3 A\u03a3A A\u03a3\u0301 \xff\u03a3") ==
              "\u03c3 a\u03c2 a\u03c3a a\u03c2\u0301 \xff\u03c3",
          "py_lower: Final_Sigma after a cased letter, not before one, a combining mark skipped, an "
          "invalid byte neither (%s)", py_lower("\u03a3 A\u03a3 A\u03a3A A\u03a3\u0301 \xff\u03a3").c_str());
    check(format_ter(corpus_ter_multi({"a b c d"}, {{"c d a b"}})) == "TER = 25.00" &&
              ter_signature(2) == "nrefs:2|case:lc|tok:tercom|norm:no|punct:yes|asian:no",
          "format_ter and ter_signature");
    bool threw = false;
    try { corpus_ter_multi({"a", "b"}, {{"a"}}); } catch (const std::invalid_argument&) { threw = true; }
    check(threw, "TER: mismatched sizes throw std::invalid_argument");
}

// ---- shared sacreBLEU cases -----------------------------------------------------------------

std::string cases_dir() {
    const char* env = std::getenv("BLEU_CASES_DIR");
    return env && *env ? env : "../shared/bleu";
}

void test_tok13a_tsv(const std::string& dir) {
    std::string text;
    if (!read_file(dir + "/tok13a.tsv", &text)) {
        check(false, "tok13a.tsv: cannot open %s/tok13a.tsv (the shared sacreBLEU cases are part "
                     "of the project: run from the repo root, or set BLEU_CASES_DIR)", dir.c_str());
        return;
    }
    int n = 0;
    for (const std::string& line : split_lines(text)) {
        if (line.empty() || line[0] == '#') continue;
        size_t tab = line.find('\t');
        if (tab == std::string::npos) { check(false, "tok13a.tsv line without a tab: %s", line.c_str()); continue; }
        std::string in = json_string(line.substr(0, tab)), want = json_string(line.substr(tab + 1));
        check_tok(in, want);
        n++;
    }
    check(n > 0, "tok13a.tsv had %d cases", n);
}

// corpus_chrf (the trainer's dev line) sums the lines' statistics as ./bleu's segment table does
// (compared with sacreBLEU by the Python suites): the same score and the same printed line, for
// chrF and chrF++, with one reference and with two (the second the references a line later).
void check_corpus_chrf(const std::string& name, const std::vector<std::string>& hyps,
                       const std::vector<std::string>& refs) {
    std::vector<std::string> later(refs.begin() + (refs.empty() ? 0 : 1), refs.end());
    if (!refs.empty()) later.push_back(refs[0]);
    for (const char* metric : {"chrf", "chrf++"})
        for (const auto& streams : {std::vector<std::vector<std::string>>{refs}, {refs, later}}) {
            MetricOptions opt;
            const SegmentTable table = segment_table(metric, hyps, streams, opt);
            const ChrfStats c = corpus_chrf_multi(hyps, streams, table.opt.chrf);
            const double want = table_score(table);
            check(c.score == want && format_chrf(c, 17) == table_text(table, 17),
                  "%-18s %s, %zu reference(s): corpus_chrf %.17g == the segment table's %.17g", name.c_str(),
                  metric, streams.size(), c.score, want);
        }
}

// Compares one expected.json case: counts/totals/lengths exactly, bleu and bp to 1e-9.
void check_expected_case(const std::string& dir, const Json& c) {
    std::string name = c["case"].str, hyp_text, ref_text;
    if (!read_file(dir + "/" + name + ".hyp", &hyp_text) || !read_file(dir + "/" + c["ref"].str, &ref_text)) {
        check(false, "%s: cannot read %s.hyp or %s", name.c_str(), name.c_str(), c["ref"].str.c_str());
        return;
    }
    std::vector<std::string> hyps = split_lines(hyp_text), refs = split_lines(ref_text);
    check_corpus_chrf(name, hyps, refs);
    BleuStats s = corpus_bleu(hyps, refs);
    bool counts_ok = s.sys_len == (int64_t)c["sys_len"].num && s.ref_len == (int64_t)c["ref_len"].num;
    for (int n = 0; n < 4; n++)
        counts_ok &= s.counts[n] == (int64_t)c["counts"].items[n].num &&
                     s.totals[n] == (int64_t)c["totals"].items[n].num;
    double want_bleu = c["bleu"].num, want_bp = c["bp"].num;
    check(counts_ok, "%-18s counts %lld/%lld/%lld/%lld totals %lld/%lld/%lld/%lld hyp_len %lld ref_len %lld",
          name.c_str(), (long long)s.counts[0], (long long)s.counts[1], (long long)s.counts[2],
          (long long)s.counts[3], (long long)s.totals[0], (long long)s.totals[1],
          (long long)s.totals[2], (long long)s.totals[3], (long long)s.sys_len, (long long)s.ref_len);
    check(std::fabs(s.bleu - want_bleu) <= 1e-9, "%-18s bleu %.17g want %s diff %.1e%s", name.c_str(),
          s.bleu, c["bleu"].str.c_str(), std::fabs(s.bleu - want_bleu), s.bleu == want_bleu ? " (bit-exact)" : "");
    check(std::fabs(s.bp - want_bp) <= 1e-9, "%-18s bp %.17g want %s diff %.1e%s", name.c_str(), s.bp,
          c["bp"].str.c_str(), std::fabs(s.bp - want_bp), s.bp == want_bp ? " (bit-exact)" : "");
}

void test_expected_json(const std::string& dir) {
    std::string text;
    if (!read_file(dir + "/expected.json", &text)) {
        check(false, "sacreBLEU cases: cannot open %s/expected.json (the shared sacreBLEU cases are "
                     "part of the project: run from the repo root, or set BLEU_CASES_DIR)", dir.c_str());
        return;
    }
    Json root = parse_json(text);
    const std::string& sig = root["signature"].str;
    check(sig.compare(0, bleu_signature().size(), bleu_signature()) == 0,
          "signature %s is a prefix of sacreBLEU's %s", bleu_signature().c_str(), sig.c_str());
    for (const Json& c : root["cases"].items) check_expected_case(dir, c);
}

int main(int argc, char** argv) {
    // test/test_sacrebleu.py: stdin lowercased by py_lower, to compare with Python's str.lower()
    if (argc == 2 && std::strcmp(argv[1], "--lowercase") == 0) {
        std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
        std::cout << py_lower(text);
        return std::cout.good() ? 0 : 1;
    }
    // test/test_metric_options.py: each stdin line ('\n'-separated) tokenized by BLEU's tokenizer NAME
    if (argc == 3 && std::strcmp(argv[1], "--tokenize") == 0) {
        std::string line;
        while (std::getline(std::cin, line)) std::cout << bleu_tokenize(line, argv[2]) << "\n";
        return std::cout.good() ? 0 : 1;
    }
    // test/test_significance.py: python_mean of each stdin line's numbers (hex floats), as %a
    if (argc == 2 && std::strcmp(argv[1], "--python-mean") == 0) {
        std::string line;
        while (std::getline(std::cin, line)) {
            std::vector<double> values;
            char* at = &line[0];
            for (char* end; ; at = end) {
                const double v = std::strtod(at, &end);
                if (end == at) break;
                values.push_back(v);
            }
            std::printf("%a\n", python_mean(values));
        }
        return std::fflush(stdout) == 0 ? 0 : 1;
    }
    // test/test_significance.py: NumpyGenerator(SEED)'s bits(BITS) (a line of 0s and 1s), then the
    // same generator's choice(N, COUNT) (a line of indices), to compare with NumPy's default_rng.
    if (argc == 6 && std::strcmp(argv[1], "--numpy-draws") == 0) {
        NumpyGenerator rng((uint32_t)std::strtoul(argv[2], nullptr, 10));
        for (uint8_t b : rng.bits(std::strtoul(argv[4], nullptr, 10))) std::cout << (int)b;
        std::cout << "\n";
        for (uint32_t i : rng.choice((uint32_t)std::strtoul(argv[3], nullptr, 10), std::strtoul(argv[5], nullptr, 10)))
            std::cout << i << " ";
        std::cout << "\n";
        return std::cout.good() ? 0 : 1;
    }
    test_tokenizer_rules();
    test_hand_ter();
    test_hand_bleu();
    test_format_and_signature();
    test_smoothing_value_zero();
    test_smoothing_value_refused();
    test_untokenized_white_space();
    test_chrf_option_ranges();
    test_errors_and_bytes();
    test_python_white_space();
    std::string dir = cases_dir();
    try {
        test_tok13a_tsv(dir);
        test_expected_json(dir);
    } catch (const std::exception& e) {
        check(false, "shared cases: %s", e.what());
    }
    return check_summary("bleu");
}
