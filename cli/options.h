// cli/options.h — long command-line options for the programs in cli/: one table per program
// gives each option's name, value kind, allowed range, help text and the variable it sets;
// --help is generated from the table and shows the ranges and the current (default) values.
//
//   Options o("translate", "Translates stdin to stdout, one line per line.");
//   o.add("--beam", &beam, "beam size (1 = greedy)", in_range(1, 64));
//   o.add("--alpha", &alpha, "length penalty exponent", in_range(0, 10));
//   o.add_choice("--precision", &precision, {"fp32", "int8"}, "numerics of the products");
//   if (!o.parse(argc, argv, &positional)) return o.exit_code();
//
// Every value is checked where it is parsed: integers must be whole numbers that fit their
// type, numbers must be finite (no nan, inf), both must lie in the option's range, choices
// must be listed. A bad value stops the program with a message naming the option and what
// it accepts, exit status 2 (exit_code()). --help exits 0. "--" ends the options; "-" alone
// is an argument (stdin); any other word starting with '-' must be a known option.
#pragma once
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "toolkit/numbers.h"

// The values an option accepts: the interval from lo to hi, each end included unless open.
struct Bounds {
    double lo = -std::numeric_limits<double>::infinity();
    double hi = std::numeric_limits<double>::infinity();
    bool lo_open = false, hi_open = false;
    bool contains(double x) const { return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi); }
};
inline Bounds any_value() { return Bounds{}; }
inline Bounds at_least(double lo) { Bounds b; b.lo = lo; return b; }
inline Bounds greater_than(double lo) { Bounds b; b.lo = lo; b.lo_open = true; return b; }
inline Bounds in_range(double lo, double hi) { Bounds b; b.lo = lo; b.hi = hi; return b; }
inline Bounds in_range_open(double lo, double hi) { Bounds b = in_range(lo, hi); b.hi_open = true; return b; }  // [lo, hi)

class Options {
public:
    Options(std::string program, std::string summary)
        : program_(std::move(program)), summary_(std::move(summary)) {}

    // Integers (whole numbers that fit the variable's type) and finite numbers, in bounds.
    void add(const char* name, int* v, const char* help, Bounds b = any_value()) { add_int(name, v, help, b); }
    void add(const char* name, int64_t* v, const char* help, Bounds b = any_value()) { add_int(name, v, help, b); }
    void add(const char* name, uint64_t* v, const char* help, Bounds b = any_value()) { add_int(name, v, help, b); }
    void add(const char* name, float* v, const char* help, Bounds b = any_value()) { add_real(name, v, help, b); }
    void add(const char* name, double* v, const char* help, Bounds b = any_value()) { add_real(name, v, help, b); }
    // A number in bounds whose --help default `show` gives (a default that depends on others).
    void add(const char* name, int* v, const char* help, Bounds b, std::function<std::string()> show) {
        add_value(name, "INT", with_range(help, b), std::move(show),
                  [v, b](const std::string& s) { return parse_integer<int>(s, b, v); });
    }
    void add(const char* name, double* v, const char* help, Bounds b, std::function<std::string()> show) {
        add_value(name, "NUM", with_range(help, b), std::move(show),
                  [v, b](const std::string& s) { return parse_real<double>(s, b, v); });
    }
    // A file name, folder or text: an empty value is refused (it had silently meant "none").
    void add(const char* name, std::string* v, const char* help, const char* metavar = "TEXT") {
        add_value(name, metavar, help, [v] { return v->empty() ? std::string("none") : *v; },
                  [v, metavar](const std::string& s) {
                      if (s.empty()) return std::string("expects ") + metavar + ", not an empty value";
                      *v = s;
                      return std::string();
                  });
    }
    // One of a fixed list of words; --help shows `unset` as the default while none is chosen
    // (a default that depends on the device or on other options).
    void add_choice(const char* name, std::string* v, std::vector<std::string> choices, const char* help,
                    const char* unset = "none") {
        std::string list;
        for (const std::string& c : choices) list += (list.empty() ? "" : "|") + c;
        add_value(name, list, help, [v, unset] { return v->empty() ? std::string(unset) : *v; },
                  [v, choices, list](const std::string& s) {
                      for (const std::string& c : choices)
                          if (s == c) { *v = s; return std::string(); }
                      return "must be one of " + list + ", not '" + s + "'";
                  });
    }
    // A flag: present means *v = value (true unless said otherwise).
    void add_flag(const char* name, bool* v, const char* help, bool value = true) {
        opts_.push_back({name, "", help, [v, value] { return std::string(*v == value ? "on" : "off"); },
                         [v, value](const std::string&) { *v = value; return std::string(); }});
    }
    // A value handled by the caller (e.g. durations, presets); set returns false on a bad value.
    void add_custom(const char* name, const char* metavar, const char* help,
                    std::function<std::string()> show, std::function<bool(const std::string&)> set) {
        std::string kind = metavar;
        add_value(name, metavar, help, std::move(show), [set, kind](const std::string& s) {
            return set(s) ? std::string() : "expects " + kind + " (see --help), not '" + s + "'";
        });
    }
    void section(const char* title) { opts_.push_back({"", "", title, nullptr, nullptr}); }

    // Option `name` (added already) takes effect before all the others wherever it stands on
    // the command line: a preset that the other options then override, whatever their order.
    void apply_first(const char* name) {
        for (Opt& o : opts_)
            if (o.set && o.name == name) o.first = true;
    }

    // Parses argv. Positional arguments go to *positional (refused when it is null).
    // False when the program should exit now: --help (exit_code 0) or an error (exit_code 2).
    bool parse(int argc, char** argv, std::vector<std::string>* positional = nullptr) {
        return parse_pass(argc, argv, nullptr, true) && parse_pass(argc, argv, positional, false);
    }
    // Whether the command line set the option (after parse()).
    bool given(const std::string& name) const {
        for (const std::string& g : given_)
            if (g == name) return true;
        return false;
    }
    // The options of section `title` that the command line set, in table order.
    std::vector<std::string> given_in_section(const std::string& title) const {
        std::vector<std::string> out;
        bool inside = false;
        for (const Opt& o : opts_) {
            if (!o.set) inside = o.help == title;
            else if (inside && given(o.name)) out.push_back(o.name);
        }
        return out;
    }
    int exit_code() const { return code_; }
    // The options parse() set, by name, in the order they took effect (repeats included).
    const std::vector<std::string>& given() const { return given_; }
    // A usage error found after parse() (e.g. two options that contradict each other):
    // prints "program: msg" and returns 2, the exit status for usage errors.
    int usage_error(const std::string& msg) { fail(msg); return code_; }

    void print_help() const {
        std::printf("usage: %s [options]%s\n\n%s\n", program_.c_str(), usage_.c_str(), summary_.c_str());
        for (const Opt& o : opts_) {
            if (!o.set) { std::printf("\n%s:\n", o.help.c_str()); continue; }
            std::string left = "  " + o.name + (o.metavar.empty() ? "" : " " + o.metavar);
            std::printf("%-30s %s [%s]\n", left.c_str(), o.help.c_str(), o.show().c_str());
        }
    }
    void usage_suffix(const std::string& s) { usage_ = s; }

private:
    struct Opt {
        std::string name, metavar, help;
        std::function<std::string()> show;
        std::function<std::string(const std::string&)> set;   // "" or what is wrong
        bool first = false;                                    // apply_first: before the others
    };
    std::string program_, summary_, usage_;
    std::vector<Opt> opts_;
    std::vector<std::string> given_;   // names of the options parse() set
    int code_ = 0;

    // One pass over argv that sets the options marked apply_first (first_pass) or the others.
    // The first pass only looks for its options: what is wrong elsewhere (an unknown option,
    // a missing value, --help) is the second pass's to say, so that messages come in order.
    bool parse_pass(int argc, char** argv, std::vector<std::string>* positional, bool first_pass) {
        for (int i = 1; i < argc; i++) {
            std::string a = argv[i];
            if (a == "--help" || a == "-h") {
                if (first_pass) continue;
                print_help();
                code_ = 0;
                return false;
            }
            if (a == "--") {
                while (!first_pass && ++i < argc)
                    if (!take_positional(argv[i], positional)) return false;
                break;
            }
            if (a.size() < 2 || a[0] != '-') {
                if (!first_pass && !take_positional(a, positional)) return false;
                continue;
            }
            std::string value;
            size_t eq = a.find('=');
            if (eq != std::string::npos) { value = a.substr(eq + 1); a = a.substr(0, eq); }
            const Opt* o = find(a);
            if (!o) {
                if (first_pass) continue;
                return fail("unknown option '" + a + "' (see --help)");
            }
            bool mine = o->first == first_pass;
            if (o->metavar.empty() && eq != std::string::npos) {
                if (!mine) continue;
                return fail("option " + a + " takes no value (it is a flag), got '" + a + "=" + value + "'");
            }
            if (!o->metavar.empty() && eq == std::string::npos) {
                if (i + 1 >= argc) {
                    if (!mine) continue;
                    return fail("option " + a + " needs a value (" + o->metavar + ")");
                }
                value = argv[++i];
                // "--src --tgt en": a forgotten value, not the value "--tgt"; "-o --help" too (it
                // had written the file "--help"); "-o=--help" names such a file
                if (mine && (find(value) || value == "--help" || value == "-h"))
                    return fail("option " + a + " needs a value (" + o->metavar + "), got the option " + value +
                                " (a value that is an option's name: " + a + "=" + value + ")");
            }
            if (!mine) continue;
            std::string bad = o->set(value);
            if (!bad.empty()) return fail(a + " " + bad);
            given_.push_back(o->name);
        }
        return true;
    }
    void add_value(const char* name, const std::string& metavar, const std::string& help,
                   std::function<std::string()> show, std::function<std::string(const std::string&)> set) {
        opts_.push_back({name, metavar, help, std::move(show), std::move(set)});
    }
    template <class T> void add_int(const char* name, T* v, const char* help, Bounds b) {
        add_value(name, "INT", with_range(help, b), [v] { return std::to_string(*v); },
                  [v, b](const std::string& s) { return parse_integer<T>(s, b, v); });
    }
    template <class T> void add_real(const char* name, T* v, const char* help, Bounds b) {
        add_value(name, "NUM", with_range(help, b), [v] { return number(*v); },
                  [v, b](const std::string& s) { return parse_real<T>(s, b, v); });
    }
    bool take_positional(const std::string& a, std::vector<std::string>* positional) {
        if (!positional) return fail("unexpected argument '" + a + "'");
        positional->push_back(a);
        return true;
    }
    const Opt* find(const std::string& name) const {
        for (const Opt& o : opts_)
            if (o.set && o.name == name) return &o;
        return nullptr;
    }
    bool fail(const std::string& msg) {
        std::fprintf(stderr, "%s: %s\n", program_.c_str(), msg.c_str());
        code_ = 2;
        return false;
    }
    static std::string number(double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        return buf;
    }
    static std::string exact(double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.15g", v);
        return buf;
    }
    // "1..64", ">= 1", "> 0", "0..<1" (1 excluded); empty when any value of the type is fine.
    static std::string range_text(const Bounds& b) {
        bool lo = std::isfinite(b.lo), hi = std::isfinite(b.hi);
        if (lo && hi) return exact(b.lo) + (b.lo_open ? "<.." : "..") + (b.hi_open ? "<" : "") + exact(b.hi);
        if (lo) return (b.lo_open ? "> " : ">= ") + exact(b.lo);
        if (hi) return (b.hi_open ? "< " : "<= ") + exact(b.hi);
        return "";
    }
    static std::string with_range(const char* help, const Bounds& b) {
        std::string r = range_text(b);
        return r.empty() ? help : std::string(help) + "; " + r;
    }
    static std::string out_of_range(const std::string& s, const std::string& range) {
        return "must be " + (range.find("..") != std::string::npos ? "in " + range : range) + ", not " + s;
    }
    // A whole decimal number that fits T and lies in b.
    template <class T> static std::string parse_integer(const std::string& s, const Bounds& b, T* v) {
        using L = std::numeric_limits<T>;
        T x{};
        const Decimal read = parse_decimal(s, &x, "+-");
        if (read == Decimal::not_a_number) return "expects a whole number, not '" + s + "'";
        if (read == Decimal::out_of_range) {
            std::string r = range_text(b);
            return out_of_range(s, r.empty() ? std::to_string(L::min()) + ".." + std::to_string(L::max()) : r);
        }
        if (!b.contains((double)x)) return out_of_range(s, range_text(b));
        *v = x;
        return "";
    }
    // A finite number written in decimal that fits T and lies in b.
    template <class T> static std::string parse_real(const std::string& s, const Bounds& b, T* v) {
        char* end = nullptr;
        const double x = std::strtod(s.c_str(), &end);
        if (s.empty() || *end) return "expects a number, not '" + s + "'";
        if (!std::isfinite(x) || !std::isfinite((T)x)) return "must be a finite number, not '" + s + "'";   // nan, inf, 1e999
        if (!decimal_text(s)) return "expects a number, not '" + s + "'";   // hex, spaces
        // in bounds before and after the conversion (1e-50 as a float is 0: not "> 0")
        if (!b.contains(x) || !b.contains((double)(T)x)) return out_of_range(s, range_text(b));
        *v = (T)x;
        return "";
    }
};
