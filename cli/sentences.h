// cli/sentences.h — where ./translate cuts a line into pieces translated on their own
// (--split-sentences, --split-long; cli/line_check.h applies them): after each sentence end,
// and inside a sentence longer than the model accepts, at its last clause mark or word boundary
// within the limit.
//
// A sentence ends after . ! ? … (or the full-width 。！？．, ؟ or ।) and any closing quotes or
// brackets after them, where white space follows and the next word does not start with a
// lowercase letter (so "e.g. the", "3.5" and "Yea, hath God said? ye shall" end none); after a
// full-width mark no space is needed (Chinese and Japanese write none). A '.' after a single
// letter (an initial: "J. Smith") or after one of a few titles (Mr, Mrs, Dr, St, Sr, Sra, ...)
// ends none either. The white space between two sentences belongs to neither piece. Why: a
// model trained on sentences (or verses, as the default corpus) translates one sentence at a
// time far better than several at once (README: "One line of several sentences").
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer.h"

namespace sentences {

// The code point at s[i] (the byte itself where s[i] does not start a valid character) and
// its length in bytes.
inline uint32_t char_at(std::string_view s, size_t i, int* len) {
    uint32_t cp = 0;
    const int n = utf8_char(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i, &cp);
    *len = n > 0 ? n : 1;
    return cp;
}

// The code point that ends just before s[i] (i > 0) and its length.
inline uint32_t char_before(std::string_view s, size_t i, int* len) {
    size_t j = i - 1;
    while (j > 0 && i - j < 4 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) j--;
    const uint32_t cp = char_at(s, j, len);
    if (j + (size_t)*len == i) return cp;
    *len = 1;   // not a whole character: the byte before i alone
    return static_cast<unsigned char>(s[i - 1]);
}

inline bool is_space(uint32_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0xA0 || c == 0x3000;
}
inline bool is_full_width_end(uint32_t c) { return c == 0x3002 || c == 0xFF01 || c == 0xFF1F || c == 0xFF0E; }
inline bool is_sentence_end(uint32_t c) {
    return c == '.' || c == '!' || c == '?' || c == 0x2026 || c == 0x061F || c == 0x0964 || is_full_width_end(c);
}
inline bool is_clause_mark(uint32_t c) {
    return c == ',' || c == ';' || c == ':' || c == 0x060C || c == 0x3001 || c == 0xFF0C || c == 0xFF1A || c == 0xFF1B;
}
inline bool is_closer(uint32_t c) {   // " ' ) ] } » ” ’ 」 』 ）
    return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}' || c == 0xBB || c == 0x201D || c == 0x2019 ||
           c == 0x300D || c == 0x300F || c == 0xFF09;
}
inline bool is_opener(uint32_t c) {   // " ' ( [ { « “ ‘ ¿ ¡
    return c == '"' || c == '\'' || c == '(' || c == '[' || c == '{' || c == 0xAB || c == 0x201C || c == 0x2018 ||
           c == 0xBF || c == 0xA1;
}
// Lowercase letters of the Latin (ASCII, Latin-1), Greek and Cyrillic alphabets.
inline bool is_lower(uint32_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 0xDF && c <= 0xFF && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9) ||
           (c >= 0x430 && c <= 0x45F);
}

// Whether the word before a '.' makes it an abbreviation's: an initial or a title.
inline bool abbreviation(std::string_view word) {
    int len;
    while (!word.empty() && is_opener(char_at(word, 0, &len))) word.remove_prefix(len);
    if (word.size() == 1 && ((word[0] >= 'A' && word[0] <= 'Z') || (word[0] >= 'a' && word[0] <= 'z'))) return true;
    for (const char* title : {"Mr", "Mrs", "Ms", "Dr", "Prof", "St", "Sr", "Sra", "Srta", "Jr", "Mt", "Ud", "Uds",
                              "Vd", "Vds", "Dña", "vs"})
        if (word == title) return true;
    return false;
}

// The sentences of text in order, each without the white space that separates it from the next
// (the first keeps the text's leading white space, the last its trailing); one piece, the text
// itself, when no sentence ends inside it.
inline std::vector<std::string_view> split(std::string_view text) {
    std::vector<std::string_view> out;
    size_t start = 0, i = 0;
    int len;
    while (i < text.size()) {
        if (!is_sentence_end(char_at(text, i, &len))) {
            i += len;
            continue;
        }
        const size_t mark = i;
        bool full_width = false;
        for (uint32_t c; i < text.size() && is_sentence_end(c = char_at(text, i, &len)); i += len) full_width |= is_full_width_end(c);
        while (i < text.size() && is_closer(char_at(text, i, &len))) i += len;
        const size_t end = i;
        size_t next = end;
        while (next < text.size() && is_space(char_at(text, next, &len))) next += len;
        if (next == text.size()) break;   // the text's last sentence
        if (!full_width) {
            if (next == end || is_lower(char_at(text, next, &len))) continue;
            size_t w = mark;
            while (w > start && !is_space(char_before(text, w, &len))) w -= len;
            if (text[mark] == '.' && abbreviation(text.substr(w, mark - w))) continue;
        }
        out.push_back(text.substr(start, end - start));
        start = i = next;
    }
    out.push_back(text.substr(start));
    return out;
}

// Where a sentence's ids (more than limit of them) are cut: the ends (exclusive) of runs of at
// most limit tokens, the last one ids.size(). Each run ends at its last clause mark (or sentence
// end that did not end a sentence) followed by white space, else before its last word (a token
// that starts with white space, as the tokenizer glues a space to the word after it), else at
// the limit. The runs' ids are the sentence's, in order.
inline std::vector<size_t> cut(const Tokenizer& tok, const std::vector<int>& ids, size_t limit) {
    const size_t n = ids.size();
    std::string text;
    std::vector<size_t> at(n + 1, 0);   // at[e]: byte offset of token e in text
    for (size_t e = 0; e < n; e++) {
        text += tok.piece_bytes(ids[e]);
        at[e + 1] = text.size();
    }
    // last_clause[e], last_word[e]: the last boundary <= e of each kind (0: none); boundary e
    // lies between tokens e - 1 and e
    std::vector<size_t> last_clause(n + 1, 0), last_word(n + 1, 0);
    int len;
    for (size_t e = 1; e < n; e++) {
        const std::string_view t = text;
        const bool space_after = is_space(char_at(t, at[e], &len)), space_before = is_space(char_before(t, at[e], &len));
        size_t p = at[e];
        while (p > 0 && is_closer(char_before(t, p, &len))) p -= len;
        uint32_t mark = p > 0 ? char_before(t, p, &len) : 0;
        const bool clause = (is_clause_mark(mark) || is_sentence_end(mark)) &&
                            (space_after || mark >= 0x3000);   // full-width marks need no space
        last_clause[e] = clause ? e : last_clause[e - 1];
        last_word[e] = space_after || space_before ? e : last_word[e - 1];
    }
    std::vector<size_t> ends;
    for (size_t i = 0; n - i > limit;) {
        size_t e = last_clause[i + limit];
        if (e <= i) e = last_word[i + limit];
        if (e <= i) e = i + limit;
        ends.push_back(e);
        i = e;
    }
    ends.push_back(n);
    return ends;
}

}  // namespace sentences
