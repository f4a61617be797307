// cli/bleu.cpp — the `bleu` program: sacreBLEU-default corpus BLEU of a hypothesis file.
//
//   ./bleu REF_FILE < hyp.txt        ./bleu REF_FILE --hyp hyp.txt        --score-only
//   ./bleu --help
//
// Prints sacreBLEU's text line and the signature. Lines are split on '\n' only (as
// sacreBLEU's smart_open does for files); a final '\n' does not start another line. Like
// sacreBLEU's CLI, lines are rstripped and an empty reference is an error. Unlike it, stdin
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
    std::string ref;
    std::string hyp = "-";
    bool score_only = false;
};

// Parses the command line; exits (status 0 after --help, 2 on a usage error).
Args parse_args(int argc, char** argv) {
    Args a;
    Options o("bleu", "Corpus BLEU of the hypotheses (stdin, or --hyp) against REF_FILE, one sentence per\n"
                      "line, identical to sacreBLEU 2.6.0's default: " + bleu_signature());
    o.usage_suffix(" REF_FILE");
    o.add("--hyp", &a.hyp, "hypotheses file (- is stdin)", "FILE");
    o.add_flag("--score-only", &a.score_only, "print only the score, with two decimals");
    std::vector<std::string> files;
    if (!o.parse(argc, argv, &files)) std::exit(o.exit_code());
    if (files.empty()) std::exit(o.usage_error("no reference file given (see --help)"));
    if (files.size() > 1) std::exit(o.usage_error("more than one reference file given (see --help)"));
    a.ref = files[0];
    return a;
}

// sacreBLEU's CLI rstrips each line it reads and refuses an empty reference; so do we.
void rstrip_lines(std::vector<std::string>& lines) {
    for (std::string& l : lines) l = py_rstrip(l);
}

void check_references(const std::vector<std::string>& refs, const std::string& path) {
    for (size_t i = 0; i < refs.size(); i++) {
        if (!refs[i].empty()) continue;
        std::fprintf(stderr, "bleu: %s line %zu is empty (sacreBLEU refuses empty references)\n",
                     path.c_str(), i + 1);
        std::exit(1);
    }
}

}  // namespace

int main(int argc, char** argv) {
    guard_stdout("bleu");
    Args a = parse_args(argc, argv);
    std::vector<std::string> refs = split_lines(read_text(a.ref));
    std::vector<std::string> hyps = split_lines(read_text(a.hyp));
    const char* hyp_name = a.hyp != "-" ? a.hyp.c_str() : "stdin";
    if (hyps.size() != refs.size()) {
        std::fprintf(stderr,
                     "bleu: line counts differ: %zu hypothesis lines (%s) but %zu reference "
                     "lines (%s)\n",
                     hyps.size(), hyp_name, refs.size(), a.ref.c_str());
        return 1;
    }
    rstrip_lines(refs);
    rstrip_lines(hyps);
    check_references(refs, a.ref);
    BleuStats s;
    try {
        s = corpus_bleu(hyps, refs);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bleu: %s\n", e.what());
        return 1;
    }
    if (a.score_only) {
        std::printf("%.2f\n", s.bleu);
    } else {
        std::printf("%s\n", format_bleu(s).c_str());
        std::printf("signature: %s\n", bleu_signature().c_str());
    }
    return 0;
}
