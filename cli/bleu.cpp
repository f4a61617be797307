// cli/bleu.cpp — the `bleu` program: sacreBLEU-default corpus BLEU (and chrF, chrF++, TER) of a
// hypothesis file.
//
//   ./bleu REF_FILE < hyp.txt        ./bleu REF_FILE --hyp hyp.txt        --score-only
//   ./bleu REF_FILE --metric bleu,chrf,chrf++,ter --width 4               ./bleu --help
//   ./bleu REF_1 REF_2 ... < hyp.txt  (several references per line: sacrebleu R1 R2 -i hyp.txt)
//   ./bleu REF --hyp hyp.txt --confidence                 (sacrebleu ... --confidence)
//   ./bleu REF --hyp base.txt --hyp new.txt --paired-bs    (sacrebleu REF -i base.txt new.txt --paired-bs)
//   ./bleu REF --tokenize intl --lowercase --smooth-method floor, --chrf-*, --ter-*  (sacreBLEU's options)
//   ./bleu REF --hyp hyp.txt --sentence-level              (sacrebleu REF -i hyp.txt -sl)
//
// Prints sacreBLEU's text line and the signature (--sentence-level: a line per sentence, then the
// signature); a paired test prints a block per metric, a line per system (toolkit/significance.h: sacreBLEU's tests, its numbers). Lines are split on '\n' only (as
// sacreBLEU's smart_open does for files); a final '\n' does not start another line. Like
// sacreBLEU's CLI, lines are rstripped, and an empty reference line is a reference of no
// tokens (sacreBLEU 2.6.0 scores it so; this program refused it before). Unlike it, stdin
// is read like a file: a tab stays in the line (sacreBLEU would read several systems) and
// a lone '\r' does not end one (sacreBLEU reads stdin with universal newlines). Text that is
// not UTF-8 is refused, as sacreBLEU refuses it (a gzip file too: sacreBLEU decompresses *.gz,
// this program does not). Options:
// cli/options.h; reading and checked writing: cli/text_io.h.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/options.h"
#include "cli/text_io.h"
#include "tokenizer.h"   // invalid_utf8_at
#include "toolkit/bleu_score.h"
#include "toolkit/json.h"   // json_quote (json.dumps with ensure_ascii=False for these fields)
#include "toolkit/numbers.h"   // printed
#include "toolkit/significance.h"
#include "toolkit/ter_score.h"

namespace {

// Exits with a message when text is not UTF-8: sacreBLEU decodes its files as UTF-8 and stops
// there, where the metrics here would score the bad bytes as characters of their own (a number
// sacreBLEU never gives). A gzip file (sacreBLEU reads *.gz) is said as such.
void require_utf8(const std::string& path, const std::string& text) {
    const long bad = invalid_utf8_at(text);   // tokenizer.h
    if (bad < 0) return;
    const char* name = path == "-" ? "stdin" : path.c_str();
    if (text.compare(0, 2, "\x1f\x8b") == 0) {
        std::fprintf(stderr, "bleu: %s is gzip-compressed: ./bleu reads plain UTF-8 text (gunzip it first)\n", name);
        std::exit(1);
    }
    const size_t line_start = text.rfind('\n', (size_t)bad) + 1;   // npos + 1 = 0: the first line
    std::fprintf(stderr, "bleu: %s:%zu: invalid UTF-8 (byte 0x%02X at byte %zu): the files must be UTF-8, as sacreBLEU reads them\n",
                 name, (size_t)std::count(text.begin(), text.begin() + bad, '\n') + 1, (unsigned char)text[bad],
                 (size_t)bad - line_start + 1);
    std::exit(1);
}

// Reads a file ("-" is stdin) into a string; exits with a message on failure or when it is not UTF-8.
std::string read_text(const std::string& path) {
    std::string text, why;
    if (!read_file(path, &text, &why)) {
        std::fprintf(stderr, "bleu: cannot read %s: %s\n", path.c_str(), why.c_str());
        std::exit(1);   // as a line-count mismatch: the input, not the usage
    }
    require_utf8(path, text);
    return text;
}

struct Args {
    std::vector<std::string> refs;   // reference files, one stream each
    std::vector<std::string> hyps;   // hypothesis files, one system each (the first: a paired test's baseline)
    bool score_only = false;
    std::string metrics = "bleu";
    int width = 2;
    bool sentence_level = false;     // sacreBLEU's --sentence-level
    std::string format = "text";     // sacreBLEU's --format: text or json
    bool confidence = false;         // sacreBLEU's --confidence
    int confidence_n = 1000;
    bool paired_bs = false, paired_ar = false;
    int paired_bs_n = 1000, paired_ar_n = 10000;
    int64_t seed = 12345;            // sacreBLEU's SACREBLEU_SEED
    MetricOptions opt;               // sacreBLEU's metric options (--tokenize, --chrf-*, --ter-*)
};

// The metrics of --metric's comma-separated list, in order; exits on an unknown one.
std::vector<std::string> metric_list(Options& o, const std::string& list) {
    std::vector<std::string> out;
    size_t from = 0;
    for (size_t comma; from <= list.size(); from = comma + 1) {
        comma = list.find(',', from);
        if (comma == std::string::npos) comma = list.size();
        const std::string m = list.substr(from, comma - from);
        if (m != "bleu" && m != "chrf" && m != "chrf++" && m != "ter")
            std::exit(o.usage_error("--metric " + list + ": each of bleu, chrf, chrf++, ter (comma-separated)"));
        if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);   // once, as sacreBLEU's -m bleu bleu
    }
    return out;
}

// Parses the command line; exits (status 0 after --help, 2 on a usage error).
Args parse_args(int argc, char** argv, std::vector<std::string>* metrics) {
    Args a;
    Options o("bleu", "Corpus BLEU of the hypotheses (stdin, or --hyp) against REF_FILE, one sentence per\n"
                      "line, identical to sacreBLEU 2.6.0's default: " + bleu_signature() + ";\n"
                      "chrF and chrF++ as its CHRF: " + chrf_signature() + " (nw:2 for chrF++);\n"
                      "TER as its TER: " + ter_signature() + ".\n"
                      "Several REF_FILEs: several references per line (nrefs:N), as sacreBLEU's. The\n"
                      "options below give sacreBLEU's other settings, with its numbers and signatures.");
    o.usage_suffix(" REF_FILE [REF_FILE ...]");
    o.add_custom("--hyp", "FILE", "hypotheses file (- is stdin); repeat for a paired test's systems, the first the baseline",
                 [&a] { return a.hyps.empty() ? std::string("-") : a.hyps.back(); },
                 [&a](const std::string& f) { a.hyps.push_back(f); return !f.empty(); });
    o.add("--metric", &a.metrics, "bleu, chrf, chrf++, ter (lower is better), or several comma-separated (each printed in that order)", "LIST");
    o.add("--width", &a.width, "decimals of the printed scores (sacreBLEU's --width)", in_range(0, 17));
    o.add_flag("--score-only", &a.score_only, "print only the scores, one a line (a paired test: a system a line, its score, mean, interval and p-value)");
    o.add_choice("--format", &a.format, {"text", "json"}, "json: sacreBLEU's JSON objects (one system; a list for several metrics)");
    o.add_flag("--sentence-level", &a.sentence_level, "a score for each line (one metric; BLEU with effective order, eff:yes), then the signature");
    o.section("BLEU (sacreBLEU's options; signature fields tok, case, smooth)");
    o.add_choice("--tokenize", &a.opt.bleu.tokenize, {"13a", "intl", "zh", "char", "none"},
                 "13a (mteval-v13a), intl (mteval-v14: Unicode punctuation and symbols), zh (Chinese characters, then 13a's rules), char (code points), none");
    o.add_flag("--lowercase", &a.opt.bleu.lowercase, "case-insensitive BLEU (Python's str.lower())");
    o.add_choice("--smooth-method", &a.opt.bleu.smooth_method, {"exp", "floor", "add-k", "none"},
                 "zero n-gram counts: exp (NIST), floor (count --smooth-value), add-k (--smooth-value added to orders 2-4), none");
    o.add("--smooth-value", &a.opt.bleu.smooth_value, "floor's and add-k's value", at_least(0),
          [] { return std::string("0.1 for floor, 1 for add-k"); });
    o.section("chrF (sacreBLEU's options; signature fields nc, nw, case, eff, space)");
    o.add("--chrf-char-order", &a.opt.chrf.char_order, "character n-gram order", in_range(1, 20));
    o.add("--chrf-word-order", &a.opt.chrf.word_order, "word n-gram order of --metric chrf (2: chrF++)", in_range(0, 10));
    o.add("--chrf-beta", &a.opt.chrf.beta, "recall's weight against precision", in_range(0, 1000));
    o.add_flag("--chrf-whitespace", &a.opt.chrf.whitespace, "keep white space in the character n-grams");
    o.add_flag("--chrf-lowercase", &a.opt.chrf.lowercase, "case-insensitive chrF (Python's str.lower())");
    o.add_flag("--chrf-eps-smoothing", &a.opt.chrf.eps_smoothing, "the mean of the orders' F-scores, as chrF++.py, Moses and NLTK (not effective order)");
    o.section("TER (sacreBLEU's options; signature fields case, norm, punct, asian)");
    o.add_flag("--ter-case-sensitive", &a.opt.ter.case_sensitive, "keep case (TER lowercases by default)");
    o.add_flag("--ter-normalized", &a.opt.ter.normalized, "Tercom's normalization: XML entities, punctuation split off");
    o.add_flag("--ter-no-punct", &a.opt.ter.no_punct, "remove punctuation . , ? : ; ! \" ( )");
    o.add_flag("--ter-asian-support", &a.opt.ter.asian_support, "with --ter-normalized: CJK split to characters; with --ter-no-punct: CJK punctuation removed");
    o.section("significance (sacreBLEU's tests: the same resamples, the same numbers)");
    o.add_flag("--confidence", &a.confidence, "the mean and 95% confidence interval of each score by bootstrap resampling");
    o.add("--confidence-n", &a.confidence_n, "bootstrap resamples for --confidence (and --paired-ar's intervals)", in_range(2, 1000000));
    o.add_flag("--paired-bs", &a.paired_bs, "paired bootstrap resampling: each --hyp after the first against the first");
    o.add("--paired-bs-n", &a.paired_bs_n, "resamples of --paired-bs", in_range(2, 1000000));
    o.add_flag("--paired-ar", &a.paired_ar, "paired approximate randomization: each --hyp after the first against the first");
    o.add("--paired-ar-n", &a.paired_ar_n, "trials of --paired-ar", in_range(1, 1000000));
    o.add("--seed", &a.seed, "the resamples' seed, as sacreBLEU's SACREBLEU_SEED (NumPy's default_rng; not 0, with which sacreBLEU's paired tests draw unseeded)", in_range(1, 4294967295.0));
    std::vector<std::string> files;
    if (!o.parse(argc, argv, &files)) std::exit(o.exit_code());
    *metrics = metric_list(o, a.metrics);
    if (a.opt.bleu.smooth_value >= 0 && (a.opt.bleu.smooth_method == "exp" || a.opt.bleu.smooth_method == "none"))
        std::fprintf(stderr, "bleu: note: --smooth-value is floor's and add-k's; %s smoothing ignores it (as sacreBLEU does)\n",
                     a.opt.bleu.smooth_method.c_str());
    try {
        a.opt.bleu = checked_bleu_options(a.opt.bleu);
    } catch (const std::invalid_argument& e) {
        std::exit(o.usage_error(std::string("--smooth-value: ") + e.what()));
    }
    if (a.opt.chrf.word_order != 0 && std::count(metrics->begin(), metrics->end(), "chrf++"))
        std::exit(o.usage_error("--chrf-word-order with --metric chrf++, which is word order 2: use --metric chrf"));
    if (files.empty()) std::exit(o.usage_error("no reference file given (see --help)"));
    a.refs = files;
    if (a.hyps.empty()) a.hyps.push_back("-");
    if (std::count(a.hyps.begin(), a.hyps.end(), "-") + std::count(a.refs.begin(), a.refs.end(), "-") > 1)
        std::exit(o.usage_error("stdin (-) is read once: one reference file or one --hyp (the hypotheses come from "
                                "stdin unless --hyp names their file)"));
    if (a.paired_bs && a.paired_ar) std::exit(o.usage_error("--paired-bs and --paired-ar: one test at a time"));
    const bool paired = a.paired_bs || a.paired_ar;
    if (paired && a.hyps.size() < 2)
        std::exit(o.usage_error(std::string(a.paired_bs ? "--paired-bs" : "--paired-ar") + " compares systems: give two --hyp or more, the baseline first"));
    if (!paired && a.hyps.size() > 1)
        std::exit(o.usage_error("several --hyp are systems to compare: add --paired-bs or --paired-ar"));
    if (a.sentence_level && (metrics->size() > 1 || paired || a.confidence))
        std::exit(o.usage_error("--sentence-level scores one metric of one system, without significance tests"));
    a.opt.bleu.effective_order = a.sentence_level;   // as sacreBLEU's CLI sets it
    if (a.format == "json" && (paired || a.sentence_level))
        std::exit(o.usage_error("--format json prints one system's corpus scores: not with a paired test or --sentence-level"));
    return a;
}

// sacreBLEU's CLI rstrips each line it reads; so do we.
void rstrip_lines(std::vector<std::string>& lines) {
    for (std::string& l : lines) l = py_rstrip(l);
}

// chrF's options for metric m ("chrf", or "chrf++": word order 2).
ChrfOptions chrf_options(const MetricOptions& opt, const std::string& m) {
    ChrfOptions c = opt.chrf;
    if (m == "chrf++") c.word_order = 2;
    return c;
}

// The metric's name as sacreBLEU prints it.
std::string metric_name(const MetricOptions& opt, const std::string& m) {
    return m == "bleu" ? "BLEU" : m == "ter" ? "TER" : chrf_name(chrf_options(opt, m));
}

std::string metric_signature(const MetricOptions& opt, const std::string& m, int nrefs) {
    if (m == "bleu") return bleu_signature(nrefs, opt.bleu);
    if (m == "ter") return ter_signature(nrefs, opt.ter);
    return chrf_signature(chrf_options(opt, m), nrefs);
}

// A signature with a test's fields after nrefs, as sacreBLEU orders them ("nrefs:1|bs:1000|seed:12345|...").
std::string with_test(const std::string& signature, const std::string& fields) {
    const size_t bar = signature.find('|');
    return signature.substr(0, bar) + "|" + fields + signature.substr(bar);
}

// v with width decimals, as long as it takes (BLEU with a --smooth-value of 1e300: 227 digits).
std::string fixed(double v, int width) { return printed("%.*f", width, v); }

// " (μ = 38.52 ± 1.02)": sacreBLEU prints it when the mean is positive.
std::string estimate_text(const Estimate& e, int width) {
    return e.mean > 0 ? " (μ = " + fixed(e.mean, width) + " ± " + fixed(e.ci, width) + ")" : "";
}

// Python's repr() of a float: the shortest digits that read back to it, fixed between 1e-4 and
// 1e16 (with ".0" when whole), else as 1e-05 or 1.5e+16.
std::string python_float(double v) {
    char sci[64];
    const std::to_chars_result r = std::to_chars(sci, sci + sizeof sci, v, std::chars_format::scientific);
    const std::string text(sci, r.ptr);                      // "-1.2345e+01"
    const size_t e = text.find('e');
    const int exponent = std::atoi(text.c_str() + e + 1);
    const bool negative = text[0] == '-';
    std::string digits;                                      // "12345"
    for (size_t i = negative; i < e; i++)
        if (text[i] != '.') digits.push_back(text[i]);
    std::string out = negative ? "-" : "";
    if (exponent < -4 || exponent >= 16) {
        out += digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
        char exp[16];
        std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        return out + exp;
    }
    if (exponent < 0) return out + "0." + std::string((size_t)(-exponent - 1), '0') + digits;
    if (digits.size() <= (size_t)exponent + 1) return out + digits + std::string((size_t)exponent + 1 - digits.size(), '0') + ".0";
    return out + digits.substr(0, (size_t)exponent + 1) + "." + digits.substr((size_t)exponent + 1);
}

// sacreBLEU's Score.format(is_json=True): name, score (rounded to the width, as a float), the
// signature, the bootstrap estimate when its mean is positive, BLEU's details, then the
// signature's fields one by one, json.dumps(indent=1).
std::string json_object(const std::string& name, double score, const std::string& signature, const Estimate* estimate,
                        const std::string& verbose, int width) {
    std::vector<std::pair<std::string, std::string>> fields = {
        {"name", json_quote(name)},
        {"score", python_float(std::strtod(fixed(score, width).c_str(), nullptr))},
        {"signature", json_quote(signature)}};
    if (estimate && estimate->mean > 0) {
        const std::string mean = fixed(estimate->mean, width), ci = fixed(estimate->ci, width);
        fields.push_back({"confidence_mean", python_float(std::strtod(mean.c_str(), nullptr))});
        fields.push_back({"confidence_var", python_float(std::strtod(ci.c_str(), nullptr))});
        fields.push_back({"confidence", json_quote("μ = " + mean + " ± " + ci)});
    }
    if (!verbose.empty()) fields.push_back({"verbose_score", json_quote(verbose)});
    for (size_t from = 0; from <= signature.size();) {   // "key:value|key:value"
        size_t bar = signature.find('|', from);
        if (bar == std::string::npos) bar = signature.size();
        const std::string field = signature.substr(from, bar - from);
        const size_t colon = field.find(':');
        fields.push_back({field.substr(0, colon), json_quote(field.substr(colon + 1))});
        from = bar + 1;
    }
    std::string out = "{\n";
    for (size_t i = 0; i < fields.size(); i++)
        out += " " + json_quote(fields[i].first) + ": " + fields[i].second + (i + 1 < fields.size() ? ",\n" : "\n");
    return out + "}";
}

// One system, one metric: sacreBLEU's output — its line and signature, the score alone
// (--score-only) or its JSON object (--format json), with --confidence the bootstrap estimate —
// from the lines' statistics computed once.
std::string score_output(const Args& a, const std::string& m, const std::vector<std::string>& hyps,
                         const std::vector<std::vector<std::string>>& refs) {
    const SegmentTable table = segment_table(m, hyps, refs, a.opt);
    const double score = table_score(table);
    std::string line = table_text(table, a.width);
    const size_t score_end = line.find(' ', line.find(" = ") + 3);   // after "NAME = 12.34"
    const std::string verbose = score_end == std::string::npos ? "" : line.substr(score_end + 1);   // BLEU's details
    std::string signature = metric_signature(a.opt, m, (int)refs.size()), estimate_line;
    Estimate estimate;
    if (a.confidence) {
        estimate = bootstrap_estimate(table, a.confidence_n, (uint32_t)a.seed);
        estimate_line = estimate_text(estimate, a.width);
        line.insert(score_end == std::string::npos ? line.size() : score_end, estimate_line);
        signature = with_test(signature, "bs:" + std::to_string(a.confidence_n) + "|seed:" + std::to_string(a.seed));
    }
    if (a.score_only) return fixed(score, a.width) + estimate_line;
    if (a.format == "json") return json_object(metric_name(a.opt, m), score, signature, a.confidence ? &estimate : nullptr, verbose, a.width);
    return line + "\nsignature: " + signature;
}

// --sentence-level: each line's score alone (sacreBLEU's sentence_score), then the signature.
void print_sentences(const Args& a, const std::string& m, const std::vector<std::string>& hyps,
                     const std::vector<std::vector<std::string>>& refs) {
    const SegmentTable table = segment_table(m, hyps, refs, a.opt);
    for (size_t i = 0; i < table.lines(); i++) {
        const SegmentTable line = table_rows(table, i, 1);
        if (a.score_only) std::printf("%s\n", fixed(table_score(line), a.width).c_str());
        else std::printf("%s\n", table_text(line, a.width).c_str());
    }
    if (!a.score_only) std::printf("signature: %s\n", metric_signature(a.opt, m, (int)refs.size()).c_str());
}

// Every system against the first, one metric: a line per system, p-values against the baseline.
void print_paired(const Args& a, const std::string& m, const std::vector<std::vector<std::string>>& systems,
                  const std::vector<std::string>& names, const std::vector<std::vector<std::string>>& refs) {
    const uint32_t seed = (uint32_t)a.seed;
    const int confidence = a.paired_bs ? a.paired_bs_n : a.confidence ? a.confidence_n : 0;
    std::vector<SegmentTable> tables;
    std::vector<const SegmentTable*> table_of;
    for (const auto& hyps : systems) tables.push_back(segment_table(m, hyps, refs, a.opt));
    for (const SegmentTable& t : tables) table_of.push_back(&t);
    std::vector<PairedResult> results;
    if (a.paired_bs) {
        results = paired_bootstrap(table_of, a.paired_bs_n, seed);
    } else {
        results.resize(1);
        results[0].score = table_score(tables[0]);
        results[0].has_estimate = confidence > 0;
        if (confidence > 0) results[0].estimate = baseline_estimate(tables[0], confidence, seed);
        for (size_t k = 1; k < tables.size(); k++)
            results.push_back(paired_randomization(tables[0], tables[k], a.paired_ar_n, confidence, seed));
    }
    const int p_width = std::max(4, a.width);
    if (a.score_only) {   // score [mean ci] [p], a line per system
        for (size_t k = 0; k < results.size(); k++) {
            const PairedResult& r = results[k];
            std::string line = fixed(r.score, a.width);
            if (r.has_estimate) line += " " + fixed(r.estimate.mean, a.width) + " " + fixed(r.estimate.ci, a.width);
            if (k > 0) line += " " + fixed(r.p_value, p_width);
            std::printf("%s\n", line.c_str());
        }
        return;
    }
    std::string fields = a.paired_bs ? "bs:" + std::to_string(a.paired_bs_n) : "ar:" + std::to_string(a.paired_ar_n);
    if (a.paired_ar && confidence > 0) fields = "bs:" + std::to_string(confidence) + "|" + fields;
    std::printf("%s: %s, each system against the baseline %s\n", metric_name(a.opt, m).c_str(),
                a.paired_bs ? ("paired bootstrap resampling (" + std::to_string(a.paired_bs_n) + " resamples)").c_str()
                            : ("paired approximate randomization (" + std::to_string(a.paired_ar_n) + " trials)").c_str(),
                names[0].c_str());
    size_t name_width = 0;
    for (const std::string& n : names) name_width = std::max(name_width, n.size());
    for (size_t k = 0; k < results.size(); k++) {
        const PairedResult& r = results[k];
        std::string line = fixed(r.score, a.width);
        if (r.has_estimate) line += estimate_text(r.estimate, a.width);
        if (k > 0) line += " (p = " + fixed(r.p_value, p_width) + ")" + (r.p_value < 0.05 ? "*" : "");
        std::printf("  %-*s  %s\n", (int)name_width, names[k].c_str(), line.c_str());
    }
    std::printf("signature: %s\n", with_test(metric_signature(a.opt, m, (int)refs.size()), fields + "|seed:" + std::to_string(a.seed)).c_str());
}

}  // namespace

int main(int argc, char** argv) {
    guard_stdout("bleu");
    std::vector<std::string> metrics;
    Args a = parse_args(argc, argv, &metrics);
    std::vector<std::vector<std::string>> refs, systems;
    std::vector<std::string> names;
    for (const std::string& path : a.refs) {
        refs.push_back(split_lines(read_text(path)));
        rstrip_lines(refs.back());
    }
    for (const std::string& path : a.hyps) {
        systems.push_back(split_lines(read_text(path)));
        rstrip_lines(systems.back());
        names.push_back(path != "-" ? path : "stdin");
        for (size_t r = 0; r < refs.size(); r++)
            if (systems.back().size() != refs[r].size()) {
                std::fprintf(stderr,
                             "bleu: line counts differ: %zu hypothesis lines (%s) but %zu reference "
                             "lines (%s)\n",
                             systems.back().size(), names.back().c_str(), refs[r].size(), a.refs[r].c_str());
                return 1;
            }
    }
    if (systems[0].empty()) {   // a score of nothing: sacreBLEU refuses it ("contains no sentence")
        std::fprintf(stderr, "bleu: no lines to score: %s and %s are empty\n", names[0].c_str(), a.refs[0].c_str());
        return 1;
    }
    try {
        std::vector<std::string> outputs;   // one system's, a metric each
        for (const std::string& m : metrics) {
            if (a.paired_bs || a.paired_ar) print_paired(a, m, systems, names, refs);
            else if (a.sentence_level) print_sentences(a, m, systems[0], refs);
            else outputs.push_back(score_output(a, m, systems[0], refs));
        }
        const bool json_list = a.format == "json" && !a.score_only && outputs.size() > 1;   // as sacreBLEU prints several
        for (size_t k = 0; k < outputs.size(); k++)
            std::printf("%s%s%s\n", json_list && k == 0 ? "[\n" : "", outputs[k].c_str(),
                        !json_list ? "" : k + 1 < outputs.size() ? "," : "\n]");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bleu: %s\n", e.what());
        return 1;
    }
    return 0;
}
