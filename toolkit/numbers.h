// toolkit/numbers.h — numbers read from text, the one way the programs read them: a whole
// decimal number (an option's value, a checkpoint's metadata, a port), and whether a real
// number is written in decimal (before strtod reads it); and numbers written into text as long
// as they take (printed).
//
//   int64_t step;
//   if (parse_decimal(text, &step, "") != Decimal::ok) refuse...;   digits only
//   parse_decimal(text, &n, "+-")                                   a sign allowed first
//
// strtoll alone takes "-3" as 2^64 - 3 for an unsigned type, skips leading spaces, stops at
// the first non-digit and saturates past its range; here the whole text must be digits (after
// one of the allowed signs), and a value past T's range is told apart from text that is not a
// number, so a caller can say which.
#pragma once
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

enum class Decimal { ok, not_a_number, out_of_range };

// The whole of s as a number of type T: decimal digits, after one sign from `signs` ("", "-"
// or "+-"). *v is set only when the result is ok.
template <class T> Decimal parse_decimal(const std::string& s, T* v, const char* signs) {
    using L = std::numeric_limits<T>;
    const size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') && std::strchr(signs, s[0]) ? 1 : 0;
    if (s.size() <= sign || s.find_first_not_of("0123456789", sign) != std::string::npos) return Decimal::not_a_number;
    errno = 0;
    if (s[0] == '-') {   // (compared in the type that holds the text's value, not in a float)
        const long long n = std::strtoll(s.c_str(), nullptr, 10);
        if (errno == ERANGE || n < (long long)L::min()) return Decimal::out_of_range;
        *v = (T)n;
    } else {
        const unsigned long long n = std::strtoull(s.c_str(), nullptr, 10);
        if (errno == ERANGE || n > (unsigned long long)L::max()) return Decimal::out_of_range;
        *v = (T)n;
    }
    return Decimal::ok;
}

// Whether s is a number written in decimal ("2", "-0.5", "1e-9"): what strtod reads besides
// (hex "0x10", "inf", "nan", leading spaces) is not.
inline bool decimal_text(const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789+-.eE") == std::string::npos;
}

// printf into a string as long as the text: a score with a --smooth-value of 1e300 runs to
// hundreds of digits, which sacreBLEU prints whole (a fixed buffer would cut them).
__attribute__((format(printf, 1, 2))) inline std::string printed(const char* format, ...) {
    va_list args, again;
    va_start(args, format);
    va_copy(again, args);
    std::string out((size_t)std::vsnprintf(nullptr, 0, format, args), '\0');
    std::vsnprintf(out.data(), out.size() + 1, format, again);   // the '\0' over out's own
    va_end(again);
    va_end(args);
    return out;
}
