// cli/bpe.cpp — the `bpe` program: learn a joint BPE vocabulary, encode and decode text with it.
//
// Build: g++ -std=c++17 -O3 -march=native -fopenmp -Wall -Wextra -I. tokenizer.cpp cli/bpe.cpp -o bpe
// Use:   ./bpe learn --vocab-size 8000 --out vocab.bpe train.en train.es
//        ./bpe encode --vocab vocab.bpe [--ids | --pieces] < text > ids
//        ./bpe decode --vocab vocab.bpe < ids > text
//        ./bpe --help, ./bpe learn --help, ...
// One input line gives one output line. Encoding runs on all cores (OMP_NUM_THREADS).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokenizer.h"

namespace {

const char* kMainHelp =
    "usage: bpe COMMAND [OPTIONS]\n"
    "  learn    learn a joint BPE vocabulary from text files (one sentence per line)\n"
    "  encode   text lines on stdin -> token ids (or pieces) on stdout, one line each\n"
    "  decode   token id lines on stdin -> text lines on stdout\n"
    "Run 'bpe COMMAND --help' for the options of a command.\n";
const char* kLearnHelp =
    "usage: bpe learn --vocab-size N --out FILE INPUT...\n"
    "  --vocab-size N   total ids including 4 specials and 256 byte pieces (>= 260)\n"
    "  --out FILE       where to write the vocabulary (text, see tokenizer.cpp)\n"
    "  INPUT...         text files; every line of every file is used\n";
const char* kEncodeHelp =
    "usage: bpe encode --vocab FILE [--ids | --pieces] < text\n"
    "  --vocab FILE     vocabulary written by 'bpe learn'\n"
    "  --ids            print token ids separated by spaces (default)\n"
    "  --pieces         print readable pieces separated by spaces (space shown as \xE2\x96\x81)\n";
const char* kDecodeHelp =
    "usage: bpe decode --vocab FILE < ids\n"
    "  --vocab FILE     vocabulary written by 'bpe learn'\n"
    "  input: one line of space-separated ids per output line; ids 0..3 are skipped\n";

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "bpe: %s\n", msg.c_str());
    std::exit(1);
}

bool read_file(const std::string& path, std::string* out) {
    FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
    if (!f) return false;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
    bool ok = !std::ferror(f);
    if (f != stdin) std::fclose(f);
    return ok;
}

// Splits text into lines on '\n'; a final line without '\n' counts, an empty tail does not.
void split_lines(const std::string& text, std::vector<std::string>* lines) {
    size_t start = 0;
    while (start < text.size()) {
        size_t nl = text.find('\n', start);
        if (nl == std::string::npos) nl = text.size();
        lines->emplace_back(text, start, nl - start);
        start = nl + 1;
    }
}

void write_all(const std::string& s) {
    if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size()) die("write to stdout failed");
}

Tokenizer load_vocab(const std::string& path) {
    std::string text, error;
    if (path.empty()) die("--vocab FILE is required (see --help)");
    if (!read_file(path, &text)) die("cannot read vocabulary '" + path + "'");
    Tokenizer tok;
    if (!Tokenizer::deserialize(text, &tok, &error)) die(path + ": " + error);
    return tok;
}

// Options shared by the commands; each command checks the ones it needs.
struct Options {
    int vocab_size = 0;
    std::string out, vocab;
    bool pieces = false;
    std::vector<std::string> inputs;
};

Options parse_options(int argc, char** argv, const char* help) {
    Options o;
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) die(a + " needs a value (see --help)");
            return argv[++i];
        };
        if (a == "--help" || a == "-h") { std::fputs(help, stdout); std::exit(0); }
        else if (a == "--vocab-size") {
            std::string v = value();
            try { size_t used; o.vocab_size = std::stoi(v, &used); if (used != v.size()) throw 0; }
            catch (...) { die("--vocab-size expects an integer, got '" + v + "'"); }
        }
        else if (a == "--out") o.out = value();
        else if (a == "--vocab") o.vocab = value();
        else if (a == "--ids") o.pieces = false;
        else if (a == "--pieces") o.pieces = true;
        else if (a.size() > 1 && a[0] == '-') die("unknown option '" + a + "' (see --help)");
        else o.inputs.push_back(a);
    }
    return o;
}

int cmd_learn(const Options& o) {
    if (o.vocab_size <= 0 || o.out.empty() || o.inputs.empty())
        die("learn needs --vocab-size N, --out FILE and at least one input file (see --help)");
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> lines;
    for (const std::string& path : o.inputs) {
        std::string text;
        if (!read_file(path, &text)) die("cannot read '" + path + "'");
        split_lines(text, &lines);
    }
    Tokenizer tok;
    try { tok = Tokenizer::learn(lines, o.vocab_size); }
    catch (const std::exception& e) { die(e.what()); }
    std::string text = tok.serialize();
    FILE* f = std::fopen(o.out.c_str(), "wb");
    if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0)
        die("cannot write '" + o.out + "'");
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "bpe learn: %zu lines -> %d ids (%d chars, %d merges) in %.2f s -> %s\n",
                 lines.size(), tok.vocab_size(), tok.num_chars(), tok.num_merges(), s,
                 o.out.c_str());
    if (tok.vocab_size() < o.vocab_size)
        std::fprintf(stderr, "bpe learn: note: corpus exhausted before %d ids\n", o.vocab_size);
    return 0;
}

void append_int(std::string* out, int v) {
    char buf[16];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out->append(buf, r.ptr);
}

int cmd_encode(const Options& o) {
    if (!o.inputs.empty()) die("encode reads stdin; unexpected argument '" + o.inputs[0] + "'");
    Tokenizer tok = load_vocab(o.vocab);
    std::string text;
    if (!read_file("-", &text)) die("cannot read stdin");
    std::vector<std::string> lines;
    split_lines(text, &lines);
    std::vector<std::vector<int>> ids = tok.encode_lines(lines);
    std::string out;
    out.reserve(text.size() * 2);
    for (const std::vector<int>& line : ids) {
        for (size_t i = 0; i < line.size(); i++) {
            if (i) out.push_back(' ');
            if (o.pieces) out += tok.piece(line[i]);
            else append_int(&out, line[i]);
        }
        out.push_back('\n');
    }
    write_all(out);
    return 0;
}

int cmd_decode(const Options& o) {
    if (!o.inputs.empty()) die("decode reads stdin; unexpected argument '" + o.inputs[0] + "'");
    Tokenizer tok = load_vocab(o.vocab);
    std::string text;
    if (!read_file("-", &text)) die("cannot read stdin");
    std::vector<std::string> lines;
    split_lines(text, &lines);
    std::string out;
    std::vector<int> ids;
    for (size_t ln = 0; ln < lines.size(); ln++) {
        const std::string& s = lines[ln];
        ids.clear();
        const char* p = s.data();
        const char* end = p + s.size();
        while (p < end) {
            if (*p == ' ' || *p == '\t' || *p == '\r') { p++; continue; }
            int v;
            auto r = std::from_chars(p, end, v);
            if (r.ec != std::errc() || v < 0 || v >= tok.vocab_size())
                die("line " + std::to_string(ln + 1) + ": expected ids in [0, " +
                    std::to_string(tok.vocab_size()) + "), got '" +
                    std::string(p, std::min<size_t>(end - p, 20)) + "'");
            ids.push_back(v);
            p = r.ptr;
        }
        out += tok.decode(ids);
        out.push_back('\n');
    }
    write_all(out);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        std::fputs(kMainHelp, argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    std::string cmd = argv[1];
    if (cmd == "learn") return cmd_learn(parse_options(argc, argv, kLearnHelp));
    if (cmd == "encode") return cmd_encode(parse_options(argc, argv, kEncodeHelp));
    if (cmd == "decode") return cmd_decode(parse_options(argc, argv, kDecodeHelp));
    die("unknown command '" + cmd + "'\n" + kMainHelp);
}
