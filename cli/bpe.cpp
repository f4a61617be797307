// cli/bpe.cpp — the `bpe` program: learn a joint BPE vocabulary, encode and decode text with it.
//
// Build: make bpe   (cli/bpe.cpp with build/libtransformer.a: --vocab also reads a checkpoint's
//                   vocabulary, model/checkpoint.cpp, so tokenizer.cpp alone does not link)
// Use:   ./bpe learn --vocab-size 8000 --out vocab.bpe train.en train.es
//        ./bpe encode --vocab vocab.bpe [--ids | --pieces] < text > ids
//        ./bpe decode --vocab vocab.bpe < ids > text
//        ./bpe --help, ./bpe learn --help, ...
// One input line gives one output line. Encoding runs on all cores (OMP_NUM_THREADS).
// Options: cli/options.h; reading and checked writing: cli/text_io.h.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/openmp_wait.h"
#include "cli/options.h"
#include "cli/text_io.h"
#include "model/checkpoint.h"
#include "tokenizer.h"
#include "toolkit/files.h"
#include "toolkit/parallel_data.h"   // read_text_lines

namespace {

const char* kMainHelp =
    "usage: bpe COMMAND [OPTIONS]\n"
    "  learn    learn a joint BPE vocabulary from text files (one sentence per line)\n"
    "  encode   text lines on stdin -> token ids (or pieces) on stdout, one line each\n"
    "  decode   token id lines on stdin -> text lines on stdout\n"
    "Run 'bpe COMMAND --help' for the options of a command.\n";

[[noreturn]] void die(const std::string& msg, int status = 1) {
    std::fprintf(stderr, "bpe: %s\n", msg.c_str());
    std::exit(status);
}

// Writes the vocabulary: a regular file (or a new one) whole or not at all (toolkit/files.h);
// anything else (/dev/stdout, a pipe) is written as a stream, its errors reported.
void write_vocabulary(const std::string& path, const std::string& text) {
    struct stat st;
    std::string err;
    if (stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) {
        if (!write_file_replacing(path, text, &err)) die(err);
        return;
    }
    FILE* f = std::fopen(path.c_str(), "wb");
    bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (f && std::fclose(f) != 0) ok = false;
    if (!ok) die("cannot write '" + path + "': " + std::strerror(errno));
}

Tokenizer load_vocab(const std::string& path) {
    std::string text, error;
    if (path.empty()) die("--vocab FILE is required (see --help)", 2);
    if (is_safetensors(path)) {   // a checkpoint: the vocabulary it carries
        if (!checkpoint_tokenizer(path, &text, &error)) die(error);
    } else if (!read_file(path, &text, &error)) {
        die("cannot read vocabulary '" + path + "': " + error);
    }
    Tokenizer tok;
    if (!Tokenizer::deserialize(text, &tok, &error)) die(path + ": " + error);
    return tok;
}

// Options of the commands; each command's table lists the ones it takes.
struct BpeOptions {
    int vocab_size = 0;
    std::string out, vocab;
    bool pieces = false;
    std::vector<std::string> inputs;
};

// Parses the options of `bpe COMMAND` (argv[1] is the command); exits after --help (0) or
// on a usage error (2).
BpeOptions parse_options(const std::string& cmd, int argc, char** argv) {
    BpeOptions b;
    std::string name = "bpe " + cmd;
    Options o(name, cmd == "learn"    ? "Learns a joint BPE vocabulary from text files (every line of every file)."
                    : cmd == "encode" ? "Encodes text lines on stdin to token ids (or pieces) on stdout, one line each."
                                      : "Decodes lines of space-separated token ids on stdin to text lines on stdout;\n"
                                        "ids 0..3 (the specials) are skipped.");
    if (cmd == "learn") {
        o.usage_suffix(" INPUT...");
        o.add("--vocab-size", &b.vocab_size,
              "total ids including 4 specials and 256 byte pieces",
              in_range(Tokenizer::kFirstChar, Tokenizer::kMaxVocab), [] { return std::string("required"); });
        o.add("--out", &b.out, "where to write the vocabulary (text, see tokenizer.cpp; required)", "FILE");
    } else {
        o.usage_suffix(cmd == "encode" ? " < text > ids" : " < ids > text");
        o.add("--vocab", &b.vocab, "vocabulary written by 'bpe learn' or ./train (vocab.bpe), or a checkpoint's", "FILE");
    }
    if (cmd == "encode") {
        o.add_flag("--ids", &b.pieces, "print token ids separated by spaces", false);
        o.add_flag("--pieces", &b.pieces, "print readable pieces separated by spaces (space shown as \xE2\x96\x81)");
    }
    if (!o.parse(argc - 1, argv + 1, &b.inputs)) std::exit(o.exit_code());
    return b;
}

int cmd_learn(const BpeOptions& o) {
    if (o.vocab_size <= 0 || o.out.empty() || o.inputs.empty())
        die("learn needs --vocab-size N, --out FILE and at least one input file (see --help)", 2);
    for (const std::string& path : o.inputs)
        if (same_file(o.out, path)) die("--out " + o.out + " is the input " + path + ": it would be replaced", 2);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> lines;
    for (const std::string& path : o.inputs) {   // read and checked as ./train reads its data
        std::vector<std::string> part;
        std::string why;
        if (!read_text_lines(path, &part, &why)) die(why);
        lines.insert(lines.end(), part.begin(), part.end());
    }
    Tokenizer tok;
    try { tok = Tokenizer::learn(lines, o.vocab_size); }
    catch (const std::exception& e) { die(e.what()); }
    write_vocabulary(o.out, tok.serialize());
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

int cmd_encode(const BpeOptions& o) {
    if (!o.inputs.empty()) die("encode reads stdin; unexpected argument '" + o.inputs[0] + "'", 2);
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
    write_stdout(out);
    return 0;
}

int cmd_decode(const BpeOptions& o) {
    if (!o.inputs.empty()) die("decode reads stdin; unexpected argument '" + o.inputs[0] + "'", 2);
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
        const std::string line = tok.decode(ids);
        if (line.find('\n') != std::string::npos)   // it would end the line early: one line in, one out
            die("line " + std::to_string(ln + 1) + ": the ids decode to a newline byte (id " +
                std::to_string(Tokenizer::kFirstByte + '\n') + "), which would split the line ('bpe encode' never gives it)");
        out += line;
        out.push_back('\n');
    }
    write_stdout(out);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    guard_stdout("bpe");
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        std::fputs(kMainHelp, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;   // no command: a usage error, as an unknown one
    }
    std::string cmd = argv[1];
    if (cmd == "learn") return cmd_learn(parse_options(cmd, argc, argv));
    if (cmd == "encode") return cmd_encode(parse_options(cmd, argc, argv));
    if (cmd == "decode") return cmd_decode(parse_options(cmd, argc, argv));
    die("unknown command '" + cmd + "'\n" + kMainHelp, 2);
}
