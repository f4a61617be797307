// regex_rules.h — the regex substitutions sacreBLEU's tokenizers are made of (13a's, intl's and
// Tercom's re.sub rules), as plain scans that give what Python's re.sub gives: left to right,
// non-overlapping, resuming after each match. They run on a sequence of units: bytes
// (std::string) for the rules whose classes are ASCII — in valid UTF-8 no byte of a multi-byte
// character is ASCII, so a byte scan matches where Python's code-point scan does — or code points
// (toolkit/bleu_score.cpp's Units) for classes beyond ASCII. Used by toolkit/bleu_score.cpp and
// toolkit/ter_score.cpp.
#pragma once
#include <string>
#include <string_view>

namespace regex_rules {

// Python's str.replace(from, to) (and re.sub of a literal pattern).
inline std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    for (size_t j; (j = s.find(from, i)) != std::string_view::npos; i = j + from.size())
        out.append(s, i, j - i).append(to);
    return out.append(s, i, std::string_view::npos);
}

// re.sub('(class)', r' \1 '): `space` on each side of every unit of the class.
template <class Seq, class Pred>
Seq space_around(const Seq& s, Pred in_class, typename Seq::value_type space = ' ') {
    Seq out;
    out.reserve(s.size() * 2);
    for (const auto& c : s) {
        if (in_class(c)) out.push_back(space), out.push_back(c), out.push_back(space);
        else out.push_back(c);
    }
    return out;
}

// re.sub('(first)(second)', r'\1 \2 ') (space_before false) or r' \1 \2' (true).
template <class Seq, class First, class Second>
Seq space_pair(const Seq& s, First first, Second second, bool space_before, typename Seq::value_type space = ' ') {
    Seq out;
    out.reserve(s.size() + s.size() / 4);
    size_t i = 0;
    while (i < s.size()) {
        if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
            if (space_before) out.push_back(space);
            out.push_back(s[i]), out.push_back(space), out.push_back(s[i + 1]);
            if (!space_before) out.push_back(space);
            i += 2;
        } else {
            out.push_back(s[i++]);
        }
    }
    return out;
}

inline bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
inline bool not_digit(unsigned char c) { return !is_digit(c); }
inline bool is_period_comma(unsigned char c) { return c == '.' || c == ','; }
inline bool is_dash(unsigned char c) { return c == '-'; }

// Regex class [\{-\~\[-\` -\&\(-\+\:-\@\/] (13a's and Tercom's): { | } ~  [ \ ] ^ _ `  space
// ! " # $ % &  ( ) * + : ; < = > ? @ /  — all ASCII punctuation except ' , - . (and not digits).
inline bool is_13a_symbol(unsigned char c) {
    return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
           (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == '/';
}

// The number rules 13a and Tercom share, in their order:
//   ([^0-9])([\.,]) -> '\1 \2 '   period and comma split off unless after a digit
//   ([\.,])([^0-9]) -> ' \1 \2'   ... and unless before a digit
//   ([0-9])(-) -> '\1 \2 '        dash split off after a digit
inline std::string split_period_comma_dash(const std::string& s) {
    std::string out = space_pair(s, not_digit, is_period_comma, false);
    out = space_pair(out, is_period_comma, not_digit, true);
    return space_pair(out, is_digit, is_dash, false);
}

}  // namespace regex_rules
