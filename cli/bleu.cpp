// cli/bleu.cpp — the `bleu` program: sacreBLEU-default corpus BLEU of a hypothesis file.
//
//   ./bleu REF_FILE < hyp.txt        ./bleu REF_FILE --hyp hyp.txt        --score-only
//
// Prints sacreBLEU's text line and the signature. Lines are split on '\n' only (as
// sacreBLEU's smart_open does for files); a final '\n' does not start another line. Like
// sacreBLEU's CLI, lines are rstripped and an empty reference is an error. Unlike it, stdin
// is read like a file: a tab stays in the line (sacreBLEU would read several systems) and
// a lone '\r' does not end one (sacreBLEU reads stdin with universal newlines).
#include "toolkit/bleu_score.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

const char* kUsage =
    "usage: bleu REF_FILE [--hyp HYP_FILE] [--score-only]\n"
    "  Corpus BLEU of the hypotheses (stdin, or --hyp) against REF_FILE, one sentence per\n"
    "  line, identical to sacreBLEU 2.6.0's default: %s\n"
    "  --score-only  print only the score, with two decimals\n"
    "  --help        print this message\n";

// Reads all of f; false on a read error.
bool read_all(std::FILE* f, std::string& out) {
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    return !std::ferror(f);
}

// Reads a file ("-" is stdin) into a string; exits with a message on failure.
std::string read_text(const char* path) {
    bool is_stdin = std::strcmp(path, "-") == 0;
    std::FILE* f = is_stdin ? stdin : std::fopen(path, "rb");
    if (!f) { std::fprintf(stderr, "bleu: cannot open %s\n", path); std::exit(2); }
    std::string text;
    bool ok = read_all(f, text);
    if (!is_stdin) std::fclose(f);
    if (!ok) { std::fprintf(stderr, "bleu: cannot read %s\n", path); std::exit(2); }
    return text;
}

// Splits on '\n' the way Python iterates a file opened with newline="\n".
std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < text.size()) {
        size_t nl = text.find('\n', start);
        if (nl == std::string::npos) nl = text.size();
        lines.emplace_back(text, start, nl - start);
        start = nl + 1;
    }
    return lines;
}

struct Args {
    const char* ref = nullptr;
    const char* hyp = "-";
    bool score_only = false;
};

[[noreturn]] void usage_error(const char* msg) {
    std::fprintf(stderr, "bleu: %s\n", msg);
    std::fprintf(stderr, kUsage, bleu_signature().c_str());
    std::exit(2);
}

Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::printf(kUsage, bleu_signature().c_str());
            std::exit(0);
        } else if (!std::strcmp(argv[i], "--score-only")) {
            a.score_only = true;
        } else if (!std::strcmp(argv[i], "--hyp")) {
            if (++i == argc) usage_error("--hyp needs a file name");
            a.hyp = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            usage_error((std::string("unknown option ") + argv[i]).c_str());
        } else if (!a.ref) {
            a.ref = argv[i];
        } else {
            usage_error("more than one reference file given");
        }
    }
    if (!a.ref) usage_error("no reference file given");
    return a;
}

// sacreBLEU's CLI rstrips each line it reads and refuses an empty reference; so do we.
void rstrip_lines(std::vector<std::string>& lines) {
    for (std::string& l : lines) l = py_rstrip(l);
}

void check_references(const std::vector<std::string>& refs, const char* path) {
    for (size_t i = 0; i < refs.size(); i++) {
        if (!refs[i].empty()) continue;
        std::fprintf(stderr, "bleu: %s line %zu is empty (sacreBLEU refuses empty references)\n",
                     path, i + 1);
        std::exit(1);
    }
}

}  // namespace

int main(int argc, char** argv) {
    Args a = parse_args(argc, argv);
    std::vector<std::string> refs = split_lines(read_text(a.ref));
    std::vector<std::string> hyps = split_lines(read_text(a.hyp));
    const char* hyp_name = std::strcmp(a.hyp, "-") ? a.hyp : "stdin";
    if (hyps.size() != refs.size()) {
        std::fprintf(stderr,
                     "bleu: line counts differ: %zu hypothesis lines (%s) but %zu reference "
                     "lines (%s)\n",
                     hyps.size(), hyp_name, refs.size(), a.ref);
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
