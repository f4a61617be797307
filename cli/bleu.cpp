// cli/bleu.cpp — the `bleu` program: sacreBLEU-default corpus BLEU (and chrF, chrF++, TER) of a
// hypothesis file.
//
//   ./bleu REF_FILE < hyp.txt        ./bleu REF_FILE --hyp hyp.txt        --score-only
//   ./bleu REF_FILE --metric bleu,chrf,chrf++,ter --width 4               ./bleu --help
//   ./bleu REF_1 REF_2 ... < hyp.txt  (several references per line: sacrebleu R1 R2 -i hyp.txt)
//
// Prints sacreBLEU's text line and the signature. Lines are split on '\n' only (as
// sacreBLEU's smart_open does for files); a final '\n' does not start another line. Like
// sacreBLEU's CLI, lines are rstripped, and an empty reference line is a reference of no
// tokens (sacreBLEU 2.6.0 scores it so; this program refused it before). Unlike it, stdin
// is read like a file: a tab stays in the line (sacreBLEU would read several systems) and
// a lone '\r' does not end one (sacreBLEU reads stdin with universal newlines). Options:
// cli/options.h; reading and checked writing: cli/text_io.h.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/options.h"
#include "cli/text_io.h"
#include "toolkit/bleu_score.h"
#include "toolkit/ter_score.h"

namespace {

// Reads a file ("-" is stdin) into a string; exits with a message on failure.
std::string read_text(const std::string& path) {
    std::string text;
    if (!read_file(path, &text)) {
        std::fprintf(stderr, "bleu: cannot read %s\n", path.c_str());
        std::exit(2);
    }
    return text;
}

struct Args {
    std::vector<std::string> refs;   // reference files, one stream each
    std::string hyp = "-";
    bool score_only = false;
    std::string metrics = "bleu";
    int width = 2;
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
        out.push_back(m);
    }
    return out;
}

// Parses the command line; exits (status 0 after --help, 2 on a usage error).
Args parse_args(int argc, char** argv, std::vector<std::string>* metrics) {
    Args a;
    Options o("bleu", "Corpus BLEU of the hypotheses (stdin, or --hyp) against REF_FILE, one sentence per\n"
                      "line, identical to sacreBLEU 2.6.0's default: " + bleu_signature() + ";\n"
                      "chrF and chrF++ as its CHRF: " + chrf_signature(0) + " (nw:2 for chrF++);\n"
                      "TER as its TER: " + ter_signature() + ".\n"
                      "Several REF_FILEs: several references per line (nrefs:N), as sacreBLEU's.");
    o.usage_suffix(" REF_FILE [REF_FILE ...]");
    o.add("--hyp", &a.hyp, "hypotheses file (- is stdin)", "FILE");
    o.add("--metric", &a.metrics, "bleu, chrf, chrf++, ter (lower is better), or several comma-separated (each printed in that order)", "LIST");
    o.add("--width", &a.width, "decimals of the printed scores (sacreBLEU's --width)", in_range(0, 17));
    o.add_flag("--score-only", &a.score_only, "print only the scores, one a line");
    std::vector<std::string> files;
    if (!o.parse(argc, argv, &files)) std::exit(o.exit_code());
    *metrics = metric_list(o, a.metrics);
    if (files.empty()) std::exit(o.usage_error("no reference file given (see --help)"));
    a.refs = files;
    return a;
}

// sacreBLEU's CLI rstrips each line it reads; so do we.
void rstrip_lines(std::vector<std::string>& lines) {
    for (std::string& l : lines) l = py_rstrip(l);
}

}  // namespace

int main(int argc, char** argv) {
    guard_stdout("bleu");
    std::vector<std::string> metrics;
    Args a = parse_args(argc, argv, &metrics);
    std::vector<std::string> hyps = split_lines(read_text(a.hyp));
    const char* hyp_name = a.hyp != "-" ? a.hyp.c_str() : "stdin";
    std::vector<std::vector<std::string>> refs;
    for (const std::string& path : a.refs) {
        refs.push_back(split_lines(read_text(path)));
        if (hyps.size() != refs.back().size()) {
            std::fprintf(stderr,
                         "bleu: line counts differ: %zu hypothesis lines (%s) but %zu reference "
                         "lines (%s)\n",
                         hyps.size(), hyp_name, refs.back().size(), path.c_str());
            return 1;
        }
        rstrip_lines(refs.back());
    }
    rstrip_lines(hyps);
    const int nrefs = (int)refs.size();
    for (const std::string& m : metrics) {
        double score;
        std::string line, signature;
        try {
            if (m == "bleu") {
                const BleuStats s = corpus_bleu_multi(hyps, refs);
                score = s.bleu, line = format_bleu(s, a.width), signature = bleu_signature(nrefs);
            } else if (m == "ter") {
                const TerStats s = corpus_ter_multi(hyps, refs);
                score = s.score, line = format_ter(s, a.width), signature = ter_signature(nrefs);
            } else {
                const int word_order = m == "chrf++" ? 2 : 0;
                const ChrfStats s = corpus_chrf_multi(hyps, refs, word_order);
                score = s.score, line = format_chrf(s, a.width), signature = chrf_signature(word_order, nrefs);
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bleu: %s\n", e.what());
            return 1;
        }
        if (a.score_only) std::printf("%.*f\n", a.width, score);
        else std::printf("%s\nsignature: %s\n", line.c_str(), signature.c_str());
    }
    return 0;
}
