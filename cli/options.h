// cli/options.h — long command-line options for the programs in cli/: one table per program
// gives each option's name, value kind, help text and the variable it sets; --help is
// generated from the table and shows the current (default) values.
//
//   Options o("translate", "Translates stdin to stdout, one line per line.");
//   o.add("--beam", &beam, "beam size (1 = greedy)");
//   if (!o.parse(argc, argv, &positional)) return o.exit_code();
#pragma once
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

class Options {
public:
    Options(std::string program, std::string summary)
        : program_(std::move(program)), summary_(std::move(summary)) {}

    void add(const char* name, int* v, const char* help) {
        add_value(name, "INT", help, [v] { return std::to_string(*v); },
                  [v](const std::string& s) { return parse_long(s, [v](long x) { *v = (int)x; }); });
    }
    void add(const char* name, int64_t* v, const char* help) {
        add_value(name, "INT", help, [v] { return std::to_string(*v); },
                  [v](const std::string& s) { return parse_long(s, [v](long x) { *v = x; }); });
    }
    void add(const char* name, uint64_t* v, const char* help) {
        add_value(name, "INT", help, [v] { return std::to_string(*v); },
                  [v](const std::string& s) { return parse_long(s, [v](long x) { *v = (uint64_t)x; }); });
    }
    void add(const char* name, float* v, const char* help) {
        add_value(name, "NUM", help, [v] { return number(*v); },
                  [v](const std::string& s) { return parse_double(s, [v](double x) { *v = (float)x; }); });
    }
    void add(const char* name, double* v, const char* help) {
        add_value(name, "NUM", help, [v] { return number(*v); },
                  [v](const std::string& s) { return parse_double(s, [v](double x) { *v = x; }); });
    }
    void add(const char* name, std::string* v, const char* help, const char* metavar = "TEXT") {
        add_value(name, metavar, help, [v] { return v->empty() ? std::string("none") : *v; },
                  [v](const std::string& s) { *v = s; return true; });
    }
    // A flag: present means true.
    void add_flag(const char* name, bool* v, const char* help) {
        opts_.push_back({name, "", help, [v] { return std::string(*v ? "on" : "off"); },
                         [v](const std::string&) { *v = true; return true; }});
    }
    // A value handled by the caller (e.g. durations, presets).
    void add_custom(const char* name, const char* metavar, const char* help,
                    std::function<std::string()> show, std::function<bool(const std::string&)> set) {
        add_value(name, metavar, help, std::move(show), std::move(set));
    }
    void section(const char* title) { opts_.push_back({"", "", title, nullptr, nullptr}); }

    // Parses argv. Positional arguments go to *positional (refused when it is null).
    // False when the program should exit now: --help (exit_code 0) or an error (exit_code 2).
    bool parse(int argc, char** argv, std::vector<std::string>* positional = nullptr) {
        for (int i = 1; i < argc; i++) {
            std::string a = argv[i];
            if (a == "--help" || a == "-h") { print_help(); code_ = 0; return false; }
            if (a.rfind("--", 0) != 0 || a == "--") {
                if (positional) { positional->push_back(a); continue; }
                return fail("unexpected argument '" + a + "'");
            }
            std::string value;
            size_t eq = a.find('=');
            if (eq != std::string::npos) { value = a.substr(eq + 1); a = a.substr(0, eq); }
            const Opt* o = find(a);
            if (!o) return fail("unknown option '" + a + "' (see --help)");
            if (!o->metavar.empty() && eq == std::string::npos) {
                if (i + 1 >= argc) return fail("option " + a + " needs a value");
                value = argv[++i];
            }
            if (!o->set(value)) return fail("bad value '" + value + "' for " + a);
        }
        return true;
    }
    int exit_code() const { return code_; }

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
        std::function<bool(const std::string&)> set;
    };
    std::string program_, summary_, usage_;
    std::vector<Opt> opts_;
    int code_ = 0;

    void add_value(const char* name, const char* metavar, const char* help,
                   std::function<std::string()> show, std::function<bool(const std::string&)> set) {
        opts_.push_back({name, metavar, help, std::move(show), std::move(set)});
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
    template <class F> static bool parse_long(const std::string& s, F set) {
        char* end = nullptr;
        long x = std::strtol(s.c_str(), &end, 10);
        if (s.empty() || *end) return false;
        set(x);
        return true;
    }
    template <class F> static bool parse_double(const std::string& s, F set) {
        char* end = nullptr;
        double x = std::strtod(s.c_str(), &end);
        if (s.empty() || *end) return false;
        set(x);
        return true;
    }
};
