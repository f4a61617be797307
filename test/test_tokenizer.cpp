// test/test_tokenizer.cpp — checks for the joint BPE tokenizer (tokenizer.h).
//
// Build and run (from the repository root; a few seconds):
//   g++ -std=c++17 -O2 -fopenmp -Wall -Wextra -I. tokenizer.cpp test/test_tokenizer.cpp -o test_tokenizer
//   ./test_tokenizer
// What is checked: the shared UTF-8 decoder; pre-tokenization; merges learned on tiny corpora against lists worked out
// by hand; the fast incremental learner against a slow obvious one; encoding of known words; exact round trips on random and adversarial inputs;
// determinism; serialize/deserialize round trip; refusal of truncated or garbage files.
#include <map>
#include <set>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "test/check.h"
#include "tokenizer.h"

namespace {

int byte_id(unsigned char b) { return Tokenizer::kFirstByte + b; }

// bytes as the vocabulary file writes an invisible character: \xHH each, upper-case hex.
std::string hex_bytes(const std::string& bytes) {
    std::string out;
    char hh[8];
    for (unsigned char b : bytes) std::snprintf(hh, sizeof hh, "\\x%02X", b), out += hh;
    return out;
}

// A code point as Unicode writes it: U+00A0.
std::string u_plus(uint32_t cp) {
    char name[16];
    std::snprintf(name, sizeof name, "U+%04X", (unsigned)cp);
    return name;
}

std::string join_pieces(const Tokenizer& tok, const std::vector<int>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); i++) s += (i ? " " : "") + tok.piece(ids[i]);
    return s;
}

// The merge list as "left right" strings, in rank order, read back from the vocabulary text.
std::vector<std::string> merge_lines(const Tokenizer& tok) {
    std::vector<std::string> out;
    std::string text = tok.serialize();
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string line = text.substr(pos, nl - pos);
        pos = nl + 1;
        if (line.rfind("merge ", 0) == 0) out.push_back(line.substr(line.find(' ', 6) + 1));
    }
    return out;
}

void test_split_words() {
    auto same = [](std::string_view text, std::vector<std::string_view> want) {
        return Tokenizer::split_words(text) == want;
    };
    check(same("", {}), "split: empty text -> no words");
    check(same("In the beginning", {"In", " the", " beginning"}), "split: one space glues to the next word");
    check(same("a  b", {"a", " ", " b"}), "split: two spaces -> ' ' then ' b'");
    check(same("a\tb", {"a", "\t", "b"}), "split: a tab is a word of its own");
    check(same(" a", {" a"}), "split: leading space");
    check(same("end  ", {"end", "  "}), "split: trailing spaces");
    check(same("earth.", {"earth", "."}), "split: punctuation leaves letters");
    check(same("\xC2\xBFQui\xC3\xA9n? 42x", {"\xC2\xBF", "Qui\xC3\xA9n", "?", " 42", "x"}),
          "split: Spanish marks, accents, digits");
    check(same("  \t x", {"  \t", " x"}), "split: mixed white space run, last space glued");
    check(same("a\t\n\r\v\f b", {"a", "\t\n\r\v\f", " b"}), "split: tab, LF, CR, VT and FF are one white-space run");
    // The character classes at each bound and one past it: ASCII's digits and letters, and the
    // non-ASCII punctuation table (tokenizer.cpp's is_unicode_punct): Latin-1's signs from U+00A0
    // to U+00BF save ª ² ³ µ ¹ º ¼ ½ ¾; × ÷; U+2000-206F; U+3000-303F; full-width U+FF01-FF0F,
    // FF1A-FF20, FF3B-FF40, FF5B-FF65. Every other character is a letter. A letter is one word
    // with the letters beside it ("x?x"), a digit with the digits ("0?0"), punctuation with neither.
    const std::vector<std::pair<uint32_t, char>> classes = {   // L letter, D digit, P punctuation
        {'/', 'P'}, {'0', 'D'}, {'9', 'D'}, {':', 'P'}, {'@', 'P'}, {'A', 'L'}, {'Z', 'L'}, {'[', 'P'},
        {'`', 'P'}, {'a', 'L'}, {'z', 'L'}, {'{', 'P'}, {0x7F, 'P'}, {0x80, 'L'},
        {0x9F, 'L'}, {0xA0, 'P'}, {0xA1, 'P'}, {0xA9, 'P'}, {0xAA, 'L'}, {0xAB, 'P'}, {0xB1, 'P'}, {0xB2, 'L'},
        {0xB3, 'L'}, {0xB4, 'P'}, {0xB5, 'L'}, {0xB6, 'P'}, {0xB8, 'P'}, {0xB9, 'L'}, {0xBA, 'L'}, {0xBB, 'P'},
        {0xBC, 'L'}, {0xBD, 'L'}, {0xBE, 'L'}, {0xBF, 'P'}, {0xC0, 'L'}, {0xD6, 'L'}, {0xD7, 'P'}, {0xD8, 'L'},
        {0xF6, 'L'}, {0xF7, 'P'}, {0xF8, 'L'}, {0x1FFF, 'L'}, {0x2000, 'P'}, {0x206F, 'P'}, {0x2070, 'L'},
        {0x2FFF, 'L'}, {0x3000, 'P'}, {0x303F, 'P'}, {0x3040, 'L'}, {0xFF00, 'L'}, {0xFF01, 'P'},
        {0xFF0F, 'P'}, {0xFF10, 'L'}, {0xFF19, 'L'}, {0xFF1A, 'P'}, {0xFF20, 'P'}, {0xFF21, 'L'},
        {0xFF3A, 'L'}, {0xFF3B, 'P'}, {0xFF40, 'P'}, {0xFF41, 'L'}, {0xFF5A, 'L'}, {0xFF5B, 'P'},
        {0xFF65, 'P'}, {0xFF66, 'L'}};
    std::string wrong;
    for (const auto& [cp, cls] : classes) {
        auto words_between = [cp = cp](const char* side) {
            std::string text = side;
            append_utf8(&text, cp);
            return Tokenizer::split_words(text + side).size();
        };
        if (words_between("x") != (cls == 'L' ? 1u : 3u) || words_between("0") != (cls == 'D' ? 1u : 3u)) {
            wrong += " " + u_plus(cp);
        }
    }
    check(wrong.empty(), "split: %zu characters at the classes' bounds and one past them, each a letter, digit or "
          "punctuation as tokenizer.cpp's table says (wrong:%s)", classes.size(), wrong.empty() ? " none" : wrong.c_str());
    check(same("x\x80x\xC3x", {"x\x80x\xC3x"}), "split: a byte that starts no character (0x80, a lone 0xC3) is a letter");
}

// Hand derivation for the corpus: "low" x5, "lower" x2, "newest" x6, "widest" x3, one word
// per line (so no word carries a space). Initial symbols are bytes; merged pieces get ids 260+.
// Ties are broken by the smaller left piece, then right piece, as byte strings.
//
//   pair counts: lo 7, ow 7, we 8, er 2, ne 6, ew 6, es 9, st 9, wi 3, id 3, de 3
//   1. es 9 = st 9, "e" < "s"              -> e+s       (260)  newest: n e w es t
//   2. (es,t) 9                           -> es+t      (261)  widest: w i d est
//   3. lo 7 = ow 7, "l" < "o"              -> l+o       (262)
//   4. (lo,w) 7                           -> lo+w      (263)  low; lower: low e r
//   5. ne = ew = (w,est) = 6, "e" smallest -> e+w       (264)  newest: n ew est
//   6. (n,ew) = (ew,est) = 6, "ew" < "n"   -> ew+est    (265)
//   7. (n,ewest) 6                        -> n+ewest   (266)
//   8. wi = id = (d,est) = 3, "d" smallest -> d+est     (267)  widest: w i dest
//   9. (i,dest) = (w,i) = 3, "i" < "w"     -> i+dest    (268)
//  10. (w,idest) 3                        -> w+idest   (269)
//  11. (low,e) = er = 2, "e" < "low"       -> e+r       (270)  lower: low er
//  12. (low,er) 2                         -> low+er    (271)  every word is one piece: stop
Tokenizer hand_tokenizer() {
    std::vector<std::string> lines;
    for (int i = 0; i < 5; i++) lines.push_back("low");
    for (int i = 0; i < 2; i++) lines.push_back("lower");
    for (int i = 0; i < 6; i++) lines.push_back("newest");
    for (int i = 0; i < 3; i++) lines.push_back("widest");
    return Tokenizer::learn(lines, 300);
}

void test_hand_merges() {
    Tokenizer tok = hand_tokenizer();
    std::vector<std::string> want = {"e s", "es t", "l o", "lo w", "e w", "ew est",
                                     "n ewest", "d est", "i dest", "w idest", "e r", "low er"};
    check(merge_lines(tok) == want, "hand corpus 1: 12 merges equal the hand derivation");
    check(tok.vocab_size() == 272, "hand corpus 1: stops at 272 ids when the corpus is exhausted (got %d)",
          tok.vocab_size());
    check(tok.piece(263) == "low" && tok.piece(266) == "newest" && tok.piece(271) == "lower",
          "hand corpus 1: ids 263/266/271 are low/newest/lower");
    // Known words: merges apply lowest rank first inside each word.
    check(tok.encode("lowest") == std::vector<int>{263, 261}, "encode 'lowest' -> low est (got %s)",
          join_pieces(tok, tok.encode("lowest")).c_str());
    check(tok.encode("newer") == std::vector<int>{byte_id('n'), 264, 270},
          "encode 'newer' -> n ew er (got %s)", join_pieces(tok, tok.encode("newer")).c_str());
    check(tok.encode("lower newest") == std::vector<int>{271, byte_id(' '), 266},
          "encode 'lower newest' -> lower ▁ newest (got %s)",
          join_pieces(tok, tok.encode("lower newest")).c_str());
    check(tok.encode("").empty(), "encode '' -> no ids");
    check(tok.encode("es") == std::vector<int>{260} && tok.encode("s") == std::vector<int>{byte_id('s')},
          "encode 'es' -> es, a word of two symbols merged (got %s); 's' -> s",
          join_pieces(tok, tok.encode("es")).c_str());
    bool below = false, past = false;
    try { tok.piece(-1); } catch (const std::out_of_range&) { below = true; }
    try { tok.piece(tok.vocab_size()); } catch (const std::out_of_range&) { past = true; }
    check(below && past, "piece(-1) and piece(vocab_size()) throw std::out_of_range (%s, %s)", below ? "yes" : "no",
          past ? "yes" : "no");
}

// Overlapping merges: "ab" x3, "bc" x2 learn a+b (260) before b+c (261), so "abc" encodes as
// ab c, the earlier merge taking the b; applying the later one first would give a bc.
void test_merge_order() {
    Tokenizer tok = Tokenizer::learn({"ab", "ab", "ab", "bc", "bc"}, 300);
    check(merge_lines(tok) == std::vector<std::string>{"a b", "b c"}, "overlap corpus: merges a+b, then b+c");
    check(tok.encode("abc") == std::vector<int>{260, byte_id('c')},
          "encode 'abc' -> ab c: the earlier merge wins the overlap (got %s)", join_pieces(tok, tok.encode("abc")).c_str());
    check(tok.encode("bcab") == std::vector<int>{261, 260}, "encode 'bcab' -> bc ab (got %s)",
          join_pieces(tok, tok.encode("bcab")).c_str());
}

// Hand derivation with spaces and UTF-8, one line "é é ñ":
//   words: "é" x1, " é" x1, " ñ" x1. é occurs twice -> a char piece (260); ñ once (< 2) stays
//   as its bytes C3 B1. Pairs, all count 1: (▁,é) (▁,\xC3) (\xC3,\xB1). Ties by bytes: left
//   " " beats "\xC3"; right "\xC3" < "\xC3\xA9" (a prefix is smaller).
//   1. ▁+\xC3 (261)   2. ▁+é (262)   3. ▁\xC3+\xB1 (263) = " ñ"
void test_hand_merges_utf8() {
    Tokenizer tok = Tokenizer::learn({"\xC3\xA9 \xC3\xA9 \xC3\xB1"}, 300);
    std::vector<std::string> want = {"▁ \\xC3", "▁ é", "▁\\xC3 \\xB1"};
    check(tok.num_chars() == 1 && tok.piece(260) == "é", "hand corpus 2: é is the only char piece");
    check(merge_lines(tok) == want, "hand corpus 2: merges equal the hand derivation");
    check(tok.vocab_size() == 264 && tok.piece(263) == "▁ñ", "hand corpus 2: 264 ids, 263 = ▁ñ");
    check(tok.encode("\xC3\xB1") == std::vector<int>{byte_id(0xC3), byte_id(0xB1)},
          "encode 'ñ' without a space -> its two byte pieces");
    // Room for one char piece (vocabulary 261): the most frequent character takes it, ñ (x3)
    // before é (x2); on equal counts the smaller code point, é (U+E9) before ñ (U+F1).
    Tokenizer one = Tokenizer::learn({"\xC3\xA9 \xC3\xB1 \xC3\xB1 \xC3\xA9 \xC3\xB1"}, 261);
    Tokenizer tie = Tokenizer::learn({"\xC3\xB1 \xC3\xA9 \xC3\xB1 \xC3\xA9"}, 261);
    check(one.num_chars() == 1 && one.piece(260) == "ñ" && tie.num_chars() == 1 && tie.piece(260) == "é",
          "one char piece to give: the most frequent character (%s), on a tie the smaller code point (%s)",
          one.piece(260).c_str(), tie.piece(260).c_str());
}

// The obvious BPE learner, for cross-checking the incremental one: every step recounts all
// pairs from scratch. ASCII corpora only (no char pieces). Pieces are identified by their
// bytes, ties go to the smaller (left, right) strings, a pair merged before is re-applied
// without a new rule -- the same conventions as tokenizer.cpp. Returns "left right" lines
// escaped the same way as the vocabulary file (here: ' ' -> ▁, nothing else needed).
std::vector<std::string> naive_bpe(const std::vector<std::string>& lines, int vocab_size) {
    std::map<std::string, long> counts;
    for (const std::string& l : lines)
        for (std::string_view w : Tokenizer::split_words(l)) counts[std::string(w)]++;
    std::vector<std::pair<std::vector<std::string>, long>> words;
    for (auto& [w, c] : counts) {
        std::vector<std::string> syms;
        for (char ch : w) syms.push_back(std::string(1, ch));
        words.push_back({syms, c});
    }
    std::set<std::string> pieces;
    std::set<std::pair<std::string, std::string>> rules;
    std::vector<std::string> out;
    auto show = [](std::string s) {
        std::string r;
        for (char c : s) r += c == ' ' ? std::string("▁") : std::string(1, c);
        return r;
    };
    while (260 + (int)pieces.size() < vocab_size) {
        std::map<std::pair<std::string, std::string>, long> pc;
        for (auto& [syms, c] : words)
            for (size_t i = 0; i + 1 < syms.size(); i++) pc[{syms[i], syms[i + 1]}] += c;
        if (pc.empty()) break;
        auto best = pc.begin();   // map order = (left, right) byte order: first max wins ties
        for (auto it = pc.begin(); it != pc.end(); ++it)
            if (it->second > best->second) best = it;
        auto [a, b] = best->first;
        if (rules.insert({a, b}).second) {
            out.push_back(show(a) + " " + show(b));
            pieces.insert(a + b);
        }
        for (auto& [syms, c] : words) {
            std::vector<std::string> next;
            for (size_t i = 0; i < syms.size(); i++) {
                if (i + 1 < syms.size() && syms[i] == a && syms[i + 1] == b) { next.push_back(a + b); i++; }
                else next.push_back(syms[i]);
            }
            syms = next;
        }
    }
    return out;
}

void test_against_naive() {
    std::mt19937 rng(11);
    int agree = 0, reused = 0, cases = 40;   // reused: corpora where a merge re-made a piece
    for (int c = 0; c < cases; c++) {
        std::string alphabet = c % 2 ? "ab " : "abcab  .";   // tiny alphabets: many ties
        std::vector<std::string> lines;
        for (int i = 0, n = 5 + rng() % 60; i < n; i++) {
            std::string l;
            for (int k = 0, m = rng() % 30; k < m; k++) l += alphabet[rng() % alphabet.size()];
            lines.push_back(l);
        }
        int size = 262 + rng() % 80;
        Tokenizer tok = Tokenizer::learn(lines, size);
        if (merge_lines(tok) == naive_bpe(lines, size)) agree++;
        if (tok.num_merges() > tok.vocab_size() - 260) reused++;
    }
    check(agree == cases, "incremental learner == naive learner on %d/%d random corpora "
          "(%d with a piece re-made by a second merge path)", agree, cases, reused);
}

// A synthetic bilingual-looking corpus with accents, so char pieces and many merges exist.
std::vector<std::string> synthetic_corpus(int n_lines, uint32_t seed) {
    const char* syll[] = {"la", "tie", "rra", "the", "and", "cre", "ó", "ñi", "ci", "ón", "lo",
                          "rd", "es", "é", "god", "dí", "as", "w", "ing", "ü"};
    const char* punct[] = {",", ".", ";", ":", "¿", "?", "'s"};
    std::mt19937 rng(seed);
    std::vector<std::string> lines;
    for (int i = 0; i < n_lines; i++) {
        std::string line;
        int words = 3 + rng() % 15;
        for (int w = 0; w < words; w++) {
            if (w) line += ' ';
            int s = 1 + rng() % 3;
            for (int k = 0; k < s; k++) line += syll[rng() % 20];
            if (rng() % 6 == 0) line += punct[rng() % 7];
        }
        lines.push_back(line);
    }
    return lines;
}

// Random strings biased towards the hard cases: spaces, tabs, UTF-8 lead and continuation
// bytes, the ▁ bytes, and text that looks like the corpus.
std::string random_string(std::mt19937& rng) {
    static const std::vector<std::string> atoms = {
        " ", "  ", "\t", "\n", "\r", "\xE2\x96\x81", "\x80", "\xC3", "\xFF", "\xE2\x96",
        "\xF0\x9F", "é", "ñ", "la", "the", "\\", "\\x41", "日本", "😀", "e\xCC\x81", "\x00"};
    std::string s;
    int n = rng() % 40;
    for (int i = 0; i < n; i++) {
        if (rng() % 2) s += (char)(rng() % 256);
        else s += atoms[rng() % atoms.size()];
    }
    return s;
}

void test_round_trips() {
    Tokenizer tok = Tokenizer::learn(synthetic_corpus(3000, 1), 800);
    check(tok.vocab_size() == 800 && tok.num_chars() > 0,
          "synthetic corpus: 800 ids learned, %d char pieces", tok.num_chars());
    std::mt19937 rng(7);
    int bad = 0;
    std::vector<std::string> strings;
    for (int i = 0; i < 5000; i++) {
        strings.push_back(random_string(rng));
        if (tok.decode(tok.encode(strings.back())) != strings.back()) bad++;
    }
    check(bad == 0, "round trip: 5000 random byte strings (%d failed)", bad);
    std::vector<std::vector<int>> batch = tok.encode_lines(strings);
    bool same = true;
    for (size_t i = 0; i < strings.size(); i++) same = same && batch[i] == tok.encode(strings[i]);
    check(same, "encode_lines == encode for each line (5000 lines)");

    const std::vector<std::pair<const char*, std::string>> adversarial = {
        {"empty", ""},
        {"only spaces", "     "},
        {"only tabs", "\t\t\t"},
        {"leading/trailing/multiple spaces", "  la   tierra  "},
        {"lone continuation bytes", "\x80\x81\xBF la \x80"},
        {"truncated sequences", "\xC3 \xE2\x96 \xF0\x9F\x98 end\xE2"},
        {"0xFF and 0xFE", "\xFF\xFE\xFF"},
        {"overlong and surrogate forms", "\xC0\xAF \xE0\x80\xAF \xED\xA0\x80"},
        {"combining characters", "e\xCC\x81 n\xCC\x83 a\xCC\x8A\xCC\x81"},
        {"CJK", "日本語のテキスト、中文文本。"},
        {"emoji", "😀 👍🏽 👨‍👩‍👧"},
        {"U+2581 itself", "\xE2\x96\x81la \xE2\x96\x81\xE2\x96\x81 ▁"},
        {"NUL and controls", std::string("a\0b\x01\x7F", 5)},
        {"backslash escapes", "\\x41 \\\\ \\"},
    };
    for (auto& [what, text] : adversarial) {
        std::vector<int> ids = tok.encode(text);
        bool in_range = true;
        for (int id : ids) in_range = in_range && id >= 4 && id < tok.vocab_size();
        check(tok.decode(ids) == text && in_range, "round trip: %s (%zu bytes -> %zu ids)", what,
              text.size(), ids.size());
    }
}

void test_long_lines() {
    std::string one_word(100000, 'a'), words, cjk;
    for (int i = 0; i < 20000; i++) words += "la ti ";
    for (int i = 0; i < 33334; i++) cjk += "語";
    // Learning on a corpus with enormous words must work too; then encoding them exercises
    // long merge chains (aa, aaaa, ...) inside one word.
    Tokenizer tok = Tokenizer::learn({one_word, cjk, "la ti la", "aaa ab ba"}, 400);
    check(tok.encode(one_word).size() < 100 && tok.encode(cjk).size() < 100,
          "learn on 100,000-char words: they encode to %zu and %zu ids",
          tok.encode(one_word).size(), tok.encode(cjk).size());
    one_word[50001] = 'b';   // encode a long word that is not in the cache
    const std::pair<const char*, std::string*> cases[] = {
        {"100,000-char word aaa..b..aaa", &one_word}, {"120,000-char line of words", &words},
        {"100,002-byte CJK word", &cjk}};
    for (auto& [what, text] : cases) {
        std::vector<int> ids = tok.encode(*text);
        check(tok.decode(ids) == *text, "round trip: %s, %zu ids", what, ids.size());
    }
}

void test_determinism() {
    std::vector<std::string> lines = synthetic_corpus(3000, 3);
    std::string a = Tokenizer::learn(lines, 900).serialize();
    std::string b = Tokenizer::learn(lines, 900).serialize();
    check(a == b, "determinism: learning twice gives identical bytes (%zu bytes)", a.size());
    std::vector<std::string> reversed(lines.rbegin(), lines.rend());
    check(Tokenizer::learn(reversed, 900).serialize() == a,
          "determinism: line order does not matter");
    // A two-letter alphabet: many ties and long merge chains.
    std::mt19937 rng(5);
    std::vector<std::string> ab;
    for (int i = 0; i < 300; i++) {
        std::string w;
        for (int k = 0, n = 2 + rng() % 12; k < n; k++) w += "ab"[rng() % 2];
        ab.push_back(w);
    }
    Tokenizer t = Tokenizer::learn(ab, 400);
    Tokenizer back;
    std::string err;
    bool ok = Tokenizer::deserialize(t.serialize(), &back, &err);
    bool rt = true;
    for (const std::string& w : ab) rt = rt && t.decode(t.encode(w)) == w;
    check(ok && back.serialize() == t.serialize() && rt,
          "{a,b} corpus: %d ids from %d merges, reload and round trip", t.vocab_size(), t.num_merges());
}

void test_serialize() {
    Tokenizer tok = Tokenizer::learn(synthetic_corpus(2000, 4), 700);
    std::string text = tok.serialize(), err;
    Tokenizer back;
    bool ok = Tokenizer::deserialize(text, &back, &err);
    check(ok && back.serialize() == text && back.fingerprint() == tok.fingerprint(),
          "deserialize(serialize()) reproduces the bytes and fingerprint %016llx %s",
          (unsigned long long)tok.fingerprint(), err.c_str());
    // A corpus full of characters that need escaping, so that merged pieces contain them.
    std::vector<std::string> odd;
    for (int i = 0; i < 50; i++)
        odd.push_back("\\x41 \\\\ a\tb ▁▁x \xC2\xA0nb\xC2\xA0sp \xFF\xFEz \x01\x7F e\xCC\x81 日本 \xE2\x96 q");
    Tokenizer weird = Tokenizer::learn(odd, 320), weird_back;
    ok = Tokenizer::deserialize(weird.serialize(), &weird_back, &err);
    std::string wtext = weird.serialize();
    bool escapes = wtext.find("\\xFF\\xFE") != std::string::npos &&
                   wtext.find("\\\\") != std::string::npos &&
                   wtext.find("\\xC2\\xA0") != std::string::npos;
    check(ok && weird_back.serialize() == wtext && escapes,
          "pieces with \\, ▁, NBSP, invalid bytes, controls reload identically (%d ids) %s",
          weird.vocab_size(), err.c_str());
    check(weird.piece(weird.encode("▁")[0]) == "\\xE2\\x96\\x81",
          "a literal ▁ character piece reads \\xE2\\x96\\x81 (got %s)",
          weird.piece(weird.encode("▁")[0]).c_str());
    std::string probe = "¿la tierra?  \xFF ▁";
    check(back.encode(probe) == tok.encode(probe), "reloaded tokenizer encodes identically");
    check(Tokenizer().fingerprint() != tok.fingerprint() && Tokenizer().vocab_size() == 260,
          "empty tokenizer: 260 ids, different fingerprint");
    check(tok.piece(byte_id(' ')) == "▁" && tok.piece(byte_id('\\')) == "\\\\" &&
              tok.piece(byte_id(0xE2)) == "\\xE2" && tok.piece(0) == "<pad>" && tok.piece(3) == "</s>",
          "piece(): ▁ for space, \\\\, \\xE2, specials by name");
    // The file's escaping at every bound of "visible": each byte piece, and char pieces of the
    // code points at and one past each invisible range (learned from a corpus that holds each
    // twice), written as themselves or byte by byte as \xHH.
    std::string wrong_bytes;
    for (int b = 0; b < 256; b++) {
        const std::string want = b == ' ' ? "▁" : b == '\\' ? "\\\\" : b > 0x20 && b < 0x7F ? std::string(1, (char)b)
                                                                                       : hex_bytes(std::string(1, (char)b));
        if (tok.piece(byte_id((unsigned char)b)) != want) wrong_bytes += " " + std::to_string(b);
    }
    check(wrong_bytes.empty(), "piece(): the 256 byte pieces, 0x21-0x7E as themselves (\\ doubled), ' ' as ▁, "
          "the rest as \\xHH (wrong:%s)", wrong_bytes.empty() ? " none" : wrong_bytes.c_str());
    const std::vector<std::pair<uint32_t, bool>> visible = {   // code point, written as itself
        {0x80, false}, {0x9F, false}, {0xA0, false}, {0xA1, true}, {0xAC, true}, {0xAD, false}, {0xAE, true},
        {0x34E, true}, {0x34F, false}, {0x350, true}, {0x167F, true}, {0x1680, false}, {0x180E, false},
        {0x1FFF, true}, {0x2000, false}, {0x200F, false}, {0x2010, true}, {0x2027, true}, {0x2028, false},
        {0x202F, false}, {0x2030, true}, {0x205E, true}, {0x205F, false}, {0x206F, false}, {0x2070, true},
        {0x2580, true}, {0x2581, false}, {0x2582, true}, {0x3000, false}, {0x3001, true}, {0xFDFF, true},
        {0xFE00, false}, {0xFE0F, false}, {0xFE10, true}, {0xFEFF, false}, {0xFFEF, true}, {0xFFF0, false},
        {0xFFFF, false}, {0x10000, true}, {0xDFFFF, true}, {0xE0000, false}, {0xE0FFF, false}, {0xE1000, true}};
    std::string chars, wrong_chars;
    for (const auto& [cp, itself] : visible) append_utf8(&chars, cp);
    const Tokenizer with_chars = Tokenizer::learn({chars, chars}, 260 + (int)visible.size());
    for (const auto& [cp, itself] : visible) {
        std::string c;
        append_utf8(&c, cp);
        const std::vector<int> ids = with_chars.encode(c);
        if (ids.size() != 1 || with_chars.piece(ids[0]) != (itself ? c : hex_bytes(c))) {
            wrong_chars += " " + u_plus(cp);
        }
    }
    check(wrong_chars.empty(), "piece(): %zu characters at the bounds of the invisible ranges, each as itself or as "
          "\\xHH bytes as tokenizer.cpp's is_visible_char says (wrong:%s)", visible.size(),
          wrong_chars.empty() ? " none" : wrong_chars.c_str());

    auto refuses = [&](const char* what, const std::string& bad) {
        Tokenizer out = hand_tokenizer();
        std::string before = out.serialize(), msg;
        bool accepted = Tokenizer::deserialize(bad, &out, &msg);
        check(!accepted && !msg.empty() && out.serialize() == before, "refuses %s: \"%s\"", what,
              msg.c_str());
    };
    refuses("empty text", "");
    refuses("garbage", "hello world\n");
    refuses("binary garbage", std::string("\x00\xFF\x13\n", 4));
    refuses("truncated mid-line", text.substr(0, text.size() / 2));
    refuses("truncated at a line end", text.substr(0, text.rfind('\n', text.size() - 2) + 1));
    refuses("header only", text.substr(0, text.find('\n') + 1));
    refuses("extra line", text + "merge 700 a b\n");
    refuses("wrong version", "bpe-vocab 2" + text.substr(11));
    refuses("CRLF line ends", [&] { std::string s; for (char c : text) { if (c == '\n') s += '\r'; s += c; } return s; }());
    std::string hand = hand_tokenizer().serialize();   // header + 12 merge lines, no chars
    auto replace = [&](std::string s, const std::string& from, const std::string& to) {
        return s.replace(s.find(from), from.size(), to);
    };
    refuses("undefined piece", replace(hand, "merge 260 e s", "merge 260 e zz"));
    refuses("wrong id", replace(hand, "merge 260 e s", "merge 261 e s"));
    refuses("bad escape", replace(hand, "merge 260 e s", "merge 260 e \\xZZ"));
    refuses("non-canonical escape", replace(hand, "merge 260 e s", "merge 260 e \\x73"));
    refuses("duplicate merge", replace(hand, "merge 261 es t", "merge 261 e s"));
    refuses("double space", replace(hand, "merge 260 e s", "merge 260 e  s"));
    refuses("size mismatch", replace(hand, "size 272", "size 273"));
    refuses("negative count", replace(hand, "chars 0", "chars -1"));
    // The header's counts: strict decimals (no sign, no leading zero, no other character, not
    // empty, at most kMaxVocab); a bad header line quoted with control bytes and DEL as \xHH.
    auto refuses_saying = [&](const char* what, const std::string& bad, const std::string& expect) {
        Tokenizer out;
        std::string msg;
        const bool accepted = Tokenizer::deserialize(bad, &out, &msg);
        check(!accepted && msg.find(expect) != std::string::npos, "refuses %s: \"%s\" (want %s)", what, msg.c_str(),
              expect.c_str());
    };
    for (const char* word : {"bpe-vocab", "size", "specials", "bytes", "chars", "merges"}) {
        const std::string misspelt = std::string(word).substr(1) + "_";   // e.g. "ize_" for "size"
        refuses_saying(("a header with '" + misspelt + "' for '" + word + "'").c_str(),
                       replace(hand, std::string(word) + " ", misspelt + " "), "bad header line");
    }
    const std::string malformed = "header has a malformed number";
    refuses_saying("a count with a leading zero", replace(hand, "size 272", "size 0272"), malformed);
    refuses_saying("an empty count", replace(hand, "chars 0", "chars "), malformed);
    refuses_saying("a count '<' ('<' - '0' is 12, the right number)", replace(hand, "merges 12", "merges <"), malformed);
    refuses_saying("a count '+12'", replace(hand, "merges 12", "merges +12"), malformed);
    refuses_saying("a count of 20 digits", replace(hand, "size 272", "size 27200000000000000000"), malformed);
    refuses_saying("a count past kMaxVocab (2^24 + 1)", replace(hand, "size 272", "size 16777217"), malformed);
    refuses_saying("a count of kMaxVocab (read, then inconsistent)", replace(hand, "size 272", "size 16777216"),
                   "header sizes are inconsistent");
    refuses_saying("a header of other words", "hello world\x7F\x1F\xC3\n", "got 'hello world\\x7F\\x1F\\xC3'");
    refuses_saying("'specials 5'", replace(hand, "specials 4", "specials 5"), "header must say 'specials 4 bytes 256'");
    refuses_saying("'bytes 255'", replace(hand, "bytes 256", "bytes 255"), "header must say 'specials 4 bytes 256'");
    refuses_saying("a size past the merges' (273 for 12)", replace(hand, "size 272", "size 273"),
                   "header sizes are inconsistent");
    refuses_saying("a line short of the header's count", hand.substr(0, hand.rfind('\n', hand.size() - 2) + 1),
                   "header announces 12 entries but the text has 11");
    refuses_saying("a wrong id on line 2", replace(hand, "merge 260 e s", "merge 261 e s"),
                   "vocabulary line 2: id does not match");
    for (const char* line : {"merge 260 e s x", "merg 260 e s"})
        refuses_saying(("'" + std::string(line) + "'").c_str(), replace(hand, "merge 260 e s", line),
                       "vocabulary line 2: expected 'merge <id> <left> <right>'");
    // char lines: one multi-byte character each, at the next id
    const std::string with_char = "bpe-vocab 1 size 261 specials 4 bytes 256 chars 1 merges 0\nchar 260 é\n";
    Tokenizer loaded;
    std::string load_error;
    check(Tokenizer::deserialize(with_char, &loaded, &load_error) && loaded.encode("é") == std::vector<int>{260},
          "a vocabulary of one char line (é, id 260) loads and encodes é as 260 %s", load_error.c_str());
    const struct { const char* line; const char* expect; } char_lines[] = {
        {"char 260 é x", "expected 'char <id> <piece>'"}, {"chr 260 é", "expected 'char <id> <piece>'"},
        {"char 261 é", "expected id 260"}, {"char 0260 é", "expected id 260"},
        {"char 260 e", "piece is not one multi-byte UTF-8 character"},
        {"char 260 éé", "piece is not one multi-byte UTF-8 character"},
        {"char 260 \\xC3", "piece is not one multi-byte UTF-8 character"}};
    for (const auto& c : char_lines)
        refuses_saying(("'" + std::string(c.line) + "'").c_str(), replace(with_char, "char 260 é", c.line),
                       std::string("vocabulary line 2: ") + c.expect);
    Tokenizer empty_back;
    check(Tokenizer::deserialize(Tokenizer().serialize(), &empty_back, &load_error) && empty_back.vocab_size() == 260,
          "the smallest vocabulary (260 ids, no char, no merge: size 260 chars 0 merges 0) loads %s", load_error.c_str());
    const Tokenizer smallest = Tokenizer::learn({"ab ab"}, 260), largest = Tokenizer::learn({"ab"}, Tokenizer::kMaxVocab);
    bool past = false;
    try { Tokenizer::learn({"ab"}, Tokenizer::kMaxVocab + 1); } catch (const std::invalid_argument&) { past = true; }
    check(smallest.vocab_size() == 260 && largest.vocab_size() == 261 && past,
          "learn: vocab_size 260 gives no merge (%d ids), kMaxVocab is taken (%d ids: the corpus's one merge), "
          "kMaxVocab + 1 refused (%s)", smallest.vocab_size(), largest.vocab_size(), past ? "yes" : "no");
}

void test_decode() {
    Tokenizer tok = hand_tokenizer();
    check(tok.decode({2, 263, 0, 261, 3, 1, 0}) == "lowest", "decode skips <s> </s> <pad> <unk>");
    bool threw = false;
    try { tok.decode({263, 272}); } catch (const std::out_of_range&) { threw = true; }
    check(threw, "decode throws std::out_of_range for id >= vocab_size");
    threw = false;
    try { Tokenizer::learn({"x"}, 259); } catch (const std::invalid_argument&) { threw = true; }
    check(threw, "learn refuses vocab_size < 260");
    // decode_text: what a model puts out may be any bytes; invalid UTF-8 becomes U+FFFD a byte,
    // valid characters (the multi-byte ones too) stay, and valid text is decode()'s
    auto bytes = [](const std::string& b) {
        std::vector<int> ids;
        for (unsigned char c : b) ids.push_back(4 + c);
        return ids;
    };
    struct Case { std::string bytes, want; const char* what; };
    const Case cases[] = {
        {"caf\xC3\xA9", "caf\xC3\xA9", "valid 2-byte character"},
        {"a\xC1" "b", "a\xEF\xBF\xBD" "b", "0xC1 (never valid)"},
        {"\xE2\x82", "\xEF\xBF\xBD\xEF\xBF\xBD", "a truncated 3-byte character: two bytes, two U+FFFD"},
        {"x\x80\xF0\x9F\x98\x80", "x\xEF\xBF\xBD\xF0\x9F\x98\x80", "a stray continuation byte before an emoji"},
        {"a\nb\rc\r\n", "a b c  ", "line breaks (\\n, \\r) become spaces: a translation stays one output line"},
    };
    for (const Case& c : cases) {
        const std::string got = tok.decode_text(bytes(c.bytes));
        check(got == c.want && invalid_utf8_at(got) < 0, "decode_text: %s", c.what);
    }
    check(tok.decode_text({2, 263, 0, 261, 3}) == tok.decode({2, 263, 0, 261, 3}), "decode_text of valid text is decode's");
    // append_text: pieces' translations joined by one space, empty ones and end spaces dropped
    std::string joined;
    for (const char* piece : {"", " a", "", "b  ", "   ", " c "}) tok.append_text(&joined, bytes(piece));
    check(joined == "a b c", "append_text joins \"\", \" a\", \"\", \"b  \", \"   \", \" c \" as \"a b c\" (got \"%s\")",
          joined.c_str());
}

// The shared UTF-8 decoder and encoder (utf8_char, append_utf8, invalid_utf8_at, utf8_units,
// replace_invalid_utf8): every sequence of 1..4 bytes with a valid lead byte is decoded; the
// valid ones must be exactly Unicode's scalar values (U+0000..U+10FFFF without the
// surrogates), each once, in its one shortest form, which append_utf8 writes back.
std::string utf8_encode(uint32_t cp) {
    if (cp < 0x80) return std::string(1, (char)cp);
    if (cp < 0x800) return {(char)(0xC0 | cp >> 6), (char)(0x80 | (cp & 0x3F))};
    if (cp < 0x10000)
        return {(char)(0xE0 | cp >> 12), (char)(0x80 | (cp >> 6 & 0x3F)), (char)(0x80 | (cp & 0x3F))};
    return {(char)(0xF0 | cp >> 18), (char)(0x80 | (cp >> 12 & 0x3F)), (char)(0x80 | (cp >> 6 & 0x3F)),
            (char)(0x80 | (cp & 0x3F))};
}

void test_utf8() {
    long valid[5] = {0, 0, 0, 0, 0}, wrong = 0, misencoded = 0;
    unsigned char b[4];
    auto try_bytes = [&](int n) {
        uint32_t cp;
        int len = utf8_char(b, n, &cp);
        if (len != n) return;
        valid[n]++;
        if (utf8_encode(cp) != std::string((const char*)b, n) || (cp >= 0xD800 && cp <= 0xDFFF)) wrong++;
        std::string encoded;
        append_utf8(&encoded, cp);
        if (encoded != std::string((const char*)b, n)) misencoded++;
    };
    for (uint32_t x = 0; x < 0x100; x++) { b[0] = x; try_bytes(1); }
    for (uint32_t x = 0xC0; x < 0x100; x++)
        for (uint32_t y = 0; y < 0x100; y++) {
            b[0] = x; b[1] = y; try_bytes(2);
            if (x < 0xE0) continue;
            for (uint32_t z = 0; z < 0x100; z++) {
                b[2] = z; try_bytes(3);
                if (x < 0xF0) continue;
                for (uint32_t w = 0; w < 0x100; w++) { b[3] = w; try_bytes(4); }
            }
        }
    check(valid[1] == 128 && valid[2] == 0x800 - 0x80 && valid[3] == 0x10000 - 0x800 - 0x800 &&
              valid[4] == 0x110000 - 0x10000 && wrong == 0,
          "utf8_char accepts exactly the shortest forms of U+0000..U+10FFFF minus surrogates "
          "(%ld / %ld / %ld / %ld sequences of 1..4 bytes, %ld that re-encode differently)",
          valid[1], valid[2], valid[3], valid[4], wrong);
    check(valid[1] + valid[2] + valid[3] + valid[4] == 0x110000 - 0x800 && misencoded == 0,
          "append_utf8 writes each of the %ld scalar values as its one shortest form (%ld written otherwise)",
          valid[1] + valid[2] + valid[3] + valid[4], misencoded);
    // Each case: the first invalid byte's offset, the text with each invalid byte as U+FFFD
    // (written here as #), and its code points, an invalid byte one of its own (utf8_units).
    struct Case { const char* text; long at; const char* replaced; size_t units; const char* what; };
    const Case cases[] = {
        {"plain ascii", -1, "plain ascii", 11, "ASCII"},
        {"caf\xC3\xA9 \xF0\x9F\x98\x80", -1, "caf\xC3\xA9 \xF0\x9F\x98\x80", 6, "2- and 4-byte characters"},
        {"ab\xFF", 2, "ab#", 3, "0xFF"}, {"a\x80", 1, "a#", 2, "stray continuation byte"},
        {"xy\xC3", 2, "xy#", 3, "truncated 2-byte character at the end"},
        {"\xE2\x82x", 0, "##x", 3, "truncated 3-byte character"},
        {"a\xC0\xAF", 1, "a##", 3, "overlong '/' (C0 AF)"}, {"\xE0\x80\xAF", 0, "###", 3, "overlong 3-byte"},
        {"ok\xED\xA0\x80", 2, "ok###", 5, "surrogate U+D800"}, {"\xF4\x90\x80\x80", 0, "####", 4, "U+110000"},
        {"\xF0\x8F\xBF\xBF", 0, "####", 4, "overlong 4-byte"},
        {"\xEF\xBF\xBD\xF5", 3, "\xEF\xBF\xBD#", 2, "0xF5 after U+FFFD"},
    };
    for (const Case& c : cases) {
        long at = invalid_utf8_at(c.text);
        check(at == c.at, "invalid_utf8_at(%s) = %ld (want %ld)", c.what, at, c.at);
        std::string want;   // c.replaced with # as U+FFFD
        for (const char* p = c.replaced; *p; p++) want += *p == '#' ? std::string("\xEF\xBF\xBD") : std::string(1, *p);
        check(replace_invalid_utf8(c.text) == want, "replace_invalid_utf8(%s): each invalid byte one U+FFFD (%s)",
              c.what, c.replaced);
        const std::vector<Utf8Unit> units = utf8_units(c.text);
        std::string joined, marked;   // the units' bytes; the valid ones' code points, the others as U+FFFD
        bool bytes_of_invalid = true;
        for (const Utf8Unit& u : units) {
            joined += u.text;
            if (u.valid) append_utf8(&marked, u.cp);
            else marked += "\xEF\xBF\xBD", bytes_of_invalid = bytes_of_invalid && u.text.size() == 1 && u.cp == (unsigned char)u.text[0];
        }
        check(units.size() == c.units && joined == c.text && marked == want && bytes_of_invalid,
              "utf8_units(%s): %zu units (want %zu), joined back %s, code points %s, an invalid one its byte %s",
              c.what, units.size(), c.units, joined == c.text ? "whole" : "WRONG", marked == want ? "right" : "WRONG",
              bytes_of_invalid ? "yes" : "NO");
    }
}

}  // namespace

int main() {
    test_utf8();
    test_split_words();
    test_hand_merges();
    test_merge_order();
    test_hand_merges_utf8();
    test_against_naive();
    test_round_trips();
    test_long_lines();
    test_determinism();
    test_serialize();
    test_decode();
    return check_summary("tokenizer");
}
