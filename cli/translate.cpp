// cli/translate.cpp — ./translate: reads sentences from stdin, writes one translation per line
// to stdout in the same order, flushing after each batch (so it also works interactively).
//
//   ./translate < input.txt > output.txt
//   ./translate --model runs/default/average.safetensors --beam 1 < input.txt   (greedy)
//   ./translate --nbest 4 < input.txt     "LINE ||| translation ||| score ||| logprob" x 4
//
// Lines available together are translated together (sorted by length, batches of at most
// --batch-tokens padded source tokens, results restored to input order). An empty line gives
// an empty line. Invalid UTF-8 and lines longer than --max-input-tokens are errors naming the
// line (exit 1) unless --replace-invalid / --split-long say how to handle them. Option values
// are checked by cli/options.h (exit 2); a failed write to stdout is an error (exit 1,
// cli/text_io.h).
//
// `--serve [HOST:]PORT` answers HTTP/JSON requests instead of reading stdin (cli/serve.cpp),
// with the same model, decoding options and line rules.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/line_check.h"
#include "cli/options.h"
#include "cli/serve.h"
#include "cli/text_io.h"
#include "model/checkpoint.h"
#include "tokenizer.h"
#include "toolkit/decode.h"

// Reads stdin line by line and says whether another line is ready without blocking. A line
// longer than one read is searched for its newline once: each new chunk from where the
// previous search stopped, so a line of n bytes costs O(n), not O(n^2 / chunk size).
class LineReader {
public:
    bool next(std::string* line) {
        for (;;) {
            size_t nl = buf_.find('\n', std::max(pos_, scanned_));
            if (nl != std::string::npos) {
                *line = buf_.substr(pos_, nl - pos_);
                pos_ = nl + 1;
                return true;
            }
            scanned_ = buf_.size();
            if (eof_) {
                if (pos_ >= buf_.size()) return false;
                *line = buf_.substr(pos_);
                pos_ = buf_.size();
                return true;
            }
            fill();
        }
    }
    bool line_ready() {
        if (buf_.find('\n', pos_) != std::string::npos || (eof_ && pos_ < buf_.size())) return true;
        if (eof_) return false;
        struct pollfd p = {0, POLLIN, 0};
        return poll(&p, 1, 0) > 0;
    }
    int read_error() const { return error_; }   // errno of a failed read (0: none)

private:
    std::string buf_;
    size_t pos_ = 0;       // start of the next line
    size_t scanned_ = 0;   // buf_[pos_, scanned_) holds no newline
    bool eof_ = false;
    int error_ = 0;
    void fill() {
        buf_.erase(0, pos_);
        scanned_ -= std::min(scanned_, pos_);
        pos_ = 0;
        char tmp[1 << 16];
        ssize_t n;
        do n = read(0, tmp, sizeof tmp);
        while (n < 0 && errno == EINTR);
        if (n < 0) error_ = errno;
        if (n <= 0) eof_ = true;
        else buf_.append(tmp, (size_t)n);
    }
};

// The largest --beam (and --nbest). A line's decoding time and cache memory grow in
// proportion to the beam, and past ~10 beams BLEU stops improving (it usually drops: the
// "beam search curse"); 64 still admits wide n-best lists at 16x the default beam's cost.
constexpr int kMaxBeam = 64;

struct TranslateOptions {
    std::string model = "runs/default/average.safetensors";
    DecodeOptions decode;
    int batch_tokens = 4000;
    int max_input_tokens = 0;   // 0: the model's limit (learned positions) or 1024
    bool replace_invalid = false;
    bool split_long = false;
    std::string device = "auto";      // auto | cpu | cuda
    std::string precision;            // "" (the device's default) | fp32 | bf16 (GPU) | int8 (CPU)
    ServeOptions serve;               // --serve and its limits (cli/serve.h)
};

struct Translator {
    TranslateOptions opt;
    Model model;
    Tokenizer tok;
    long line_number = 0;

    // Encodes one input line, checking it; false + message on bad input.
    bool encode(std::string line, std::vector<std::vector<int>>* pieces, std::string* err) {
        LineRules rules{opt.max_input_tokens, opt.replace_invalid, opt.split_long};
        return check_line(tok, line, rules, "line " + std::to_string(line_number), pieces, err);
    }

    // Translates the lines' pieces and prints one output line (or nbest lines) per input line.
    void translate(const std::vector<std::vector<std::vector<int>>>& lines, long first_line) {
        std::vector<std::vector<int>> sources;
        for (const auto& pieces : lines)
            for (const auto& p : pieces) {
                sources.push_back(p);
                if (!p.empty()) sources.back().push_back(EOS_ID);
            }
        std::vector<std::vector<Hypothesis>> hyps = decode_sorted(&model, sources, opt.decode, opt.batch_tokens);
        size_t k = 0;
        for (size_t i = 0; i < lines.size(); i++) {
            if (opt.decode.nbest <= 1 || lines[i].size() != 1) {
                std::string out;
                for (size_t p = 0; p < lines[i].size(); p++, k++)
                    out += (p ? " " : "") + tok.decode(hyps[k][0].tokens);
                out += '\n';
                write_stdout(out);
                continue;
            }
            for (const Hypothesis& h : hyps[k])
                std::printf("%ld ||| %s ||| %.6f ||| %.6f\n", first_line + (long)i, tok.decode(h.tokens).c_str(),
                            h.score, h.logprob);
            k++;
        }
        flush_stdout();   // ends the program on a write error (a full disk, a closed pipe)
    }
};

static bool load(Translator* t) {
    Metadata meta;
    std::string err;
    std::string note;
    t->model.backend = make_backend(t->opt.device, t->opt.precision, &err, &note);
    if (!t->model.backend) {
        std::fprintf(stderr, "translate: %s\n", err.c_str());
        return false;
    }
    if (!checkpoint_load(&t->model, t->opt.model, &meta, &err, false)) {
        std::fprintf(stderr, "translate: %s\n", err.c_str());
        if (t->opt.model == TranslateOptions().model)
            std::fprintf(stderr, "translate: (train a model first: make && ./train; or pass --model FILE)\n");
        return false;
    }
    if (!Tokenizer::deserialize(meta["tokenizer"], &t->tok, &err)) {
        std::fprintf(stderr, "translate: %s: no valid tokenizer in the checkpoint (%s)\n", t->opt.model.c_str(), err.c_str());
        return false;
    }
    if (t->tok.vocab_size() != t->model.cfg.vocab) {
        std::fprintf(stderr, "translate: %s: tokenizer has %d ids, the model %d\n", t->opt.model.c_str(),
                     t->tok.vocab_size(), t->model.cfg.vocab);
        return false;
    }
    if (t->opt.precision == "int8" && !model_quantize(&t->model, &err)) {
        std::fprintf(stderr, "translate: %s\n", err.c_str());
        return false;
    }
    const int limit = t->model.cfg.learned_pos ? t->model.cfg.max_len - 1 : 1024;
    if (t->opt.max_input_tokens <= 0 || t->opt.max_input_tokens > limit) t->opt.max_input_tokens = limit;
    return true;
}

// Fills *o from the command line; false when the program should exit with *status (0 after
// --help, 2 on a bad option).
static bool parse_options(int argc, char** argv, TranslateOptions* op, int* status) {
    TranslateOptions& o = *op;
    Options opts("translate", "Translates stdin to stdout, one line per input line, in order.");
    opts.add("--model", &o.model, "checkpoint (safetensors) to translate with", "FILE");
    opts.add("--beam", &o.decode.beam, "beam size, 1 = greedy (cost grows with it; bound: README)",
             in_range(1, kMaxBeam));
    opts.add("--alpha", &o.decode.alpha, "length penalty exponent: lp = ((5 + |Y|) / 6)^alpha", in_range(0, 10));
    opts.add("--max-len-a", &o.decode.max_len_a, "max output length = a * source length + b", in_range(0, 10));
    opts.add("--max-len-b", &o.decode.max_len_b, "max output length = a * source length + b", in_range(0, 10000));
    opts.add("--nbest", &o.decode.nbest, "hypotheses per line, with scores (<= beam)", in_range(1, kMaxBeam));
    opts.add("--batch-tokens", &o.batch_tokens, "padded source tokens per batch", at_least(1));
    opts.add_choice("--device", &o.device, {"auto", "cpu", "cuda"}, "auto: the GPU when one is present");
    opts.add_choice("--precision", &o.precision, {"fp32", "bf16", "int8"},
                    "fp32: the reference's numerics (the CPU default); bf16: the GPU default; int8: "
                    "quantized products on the CPU, faster");
    opts.add("--max-input-tokens", &o.max_input_tokens, "longest accepted line in tokens (0: model limit)",
             at_least(0));
    opts.add_flag("--replace-invalid", &o.replace_invalid, "replace invalid UTF-8 with U+FFFD instead of failing");
    opts.add_flag("--split-long", &o.split_long, "translate over-long lines in pieces instead of failing");
    add_serve_options(&opts, &o.serve);
    if (!opts.parse(argc, argv)) {
        *status = opts.exit_code();
        return false;
    }
    if (o.decode.nbest > o.decode.beam) {
        *status = opts.usage_error("--nbest " + std::to_string(o.decode.nbest) + " is more than --beam " +
                                   std::to_string(o.decode.beam) + " (n-best lists come from the beam)");
        return false;
    }
    return true;
}

int main(int argc, char** argv) {
    guard_stdout("translate");
    Translator t;
    int status = 0;
    if (!parse_options(argc, argv, &t.opt, &status)) return status;
    if (!load(&t)) return 1;
    if (!t.opt.serve.address.empty())
        return serve({&t.model, &t.tok, t.opt.decode, t.opt.batch_tokens,
                      {t.opt.max_input_tokens, t.opt.replace_invalid, t.opt.split_long}, t.opt.model},
                     t.opt.serve);
    LineReader in;
    std::string line, err;
    std::vector<std::vector<std::vector<int>>> chunk;
    long first = 1;
    while (in.next(&line)) {
        t.line_number++;
        std::vector<std::vector<int>> pieces;
        if (!t.encode(line, &pieces, &err)) {
            if (!chunk.empty()) t.translate(chunk, first);
            std::fprintf(stderr, "translate: %s\n", err.c_str());
            return 1;
        }
        chunk.push_back(pieces);
        if (chunk.size() >= 2000 || !in.line_ready()) {
            t.translate(chunk, first);
            first = t.line_number + 1;
            chunk.clear();
        }
    }
    if (!chunk.empty()) t.translate(chunk, first);
    if (in.read_error()) {
        std::fprintf(stderr, "translate: cannot read stdin after line %ld: %s\n", t.line_number,
                     std::strerror(in.read_error()));
        return 1;
    }
    return 0;
}
