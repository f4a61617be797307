// cli/translate.cpp — ./translate: reads sentences from stdin, writes one translation per line
// to stdout in the same order, flushing after each batch (so it also works interactively).
//
//   ./translate < input.txt > output.txt
//   ./translate --model runs/default/average.safetensors --beam 1 < input.txt   (greedy)
//   ./translate --nbest 4 < input.txt     "LINE ||| translation ||| score ||| logprob" x 4
//                                         (LINE counts from 0, as Moses and Marian do)
//   ./translate --score < pairs.txt       "SOURCE ||| TARGET" lines -> "score ||| logprob"
//   ./translate --prefix prefixes.txt     the output starts with each line's prefix
//   ./translate --beam 1 --sampling topk:10 --seed 7    sampling (back-translation)
//   ./translate -i input.txt -o output.txt --threads 2 --quiet
//   ./translate --alignment < input.txt   "translation ||| 0-0 1-2 ..." (toolkit/attention_view.h)
//   ./translate --attention DIR           also DIR/000001.svg, ...: every layer's and head's attention
//
// Lines available together are translated together (sorted by length, batches of at most
// --batch-tokens padded source tokens, results restored to input order). An empty line gives
// an empty line; a UTF-8 byte-order mark at the input's start is dropped. Invalid UTF-8 and lines longer than --max-input-tokens are errors naming the
// line (exit 1) unless --replace-invalid / --split-long say how to handle them. Option values
// are checked by cli/options.h (exit 2); a failed write to stdout is an error (exit 1,
// cli/text_io.h).
//
// `--serve [HOST:]PORT` answers HTTP/JSON requests instead of reading stdin (cli/serve.cpp),
// with the same model, decoding options and line rules.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/line_check.h"
#include "cli/openmp_wait.h"
#include "cli/options.h"
#include "cli/serve.h"
#include "cli/text_io.h"
#include "toolkit/files.h"
#include "model/checkpoint.h"
#include "tokenizer.h"
#include "toolkit/attention_view.h"
#include "toolkit/decode.h"
#include "toolkit/thread_governor.h"

// Reads stdin line by line and says whether another line is ready without blocking. A line
// longer than one read is searched for its newline once: each new chunk from where the
// previous search stopped, so a line of n bytes costs O(n), not O(n^2 / chunk size). A UTF-8
// byte-order mark at the very start of the input is dropped (an encoding signature, not text:
// translated, it had been three odd tokens glued to the first word).
class LineReader {
public:
    bool next(std::string* line) {
        if (first_) drop_byte_order_mark();
        if (!read_line()) return false;
        *line = std::move(line_);
        return true;
    }
    bool line_ready() {
        if (buf_.find('\n', pos_) != std::string::npos || (eof_ && pos_ < buf_.size())) return true;
        if (eof_) return false;
        struct pollfd p = {0, POLLIN, 0};
        return poll(&p, 1, 0) > 0;
    }
    int read_error() const { return error_; }   // errno of a failed read (0: none)

private:
    std::string buf_, line_;
    bool first_ = true;    // the byte-order mark not looked for yet
    size_t pos_ = 0;       // start of the next line
    size_t scanned_ = 0;   // buf_[pos_, scanned_) holds no newline
    bool eof_ = false;
    int error_ = 0;
    // Drops a UTF-8 byte-order mark at the input's start before any line is cut (an input of the
    // mark alone has no line). Reads on only while what came so far could still be the mark, so
    // a short first line typed interactively is not held back.
    void drop_byte_order_mark() {
        static const std::string bom = "\xEF\xBB\xBF";
        while (buf_.size() < 3 && !eof_ && bom.compare(0, buf_.size(), buf_) == 0) fill();
        if (starts_with_utf8_bom(buf_)) pos_ = 3;
        first_ = false;
    }
    // The next line, without its newline, into line_; false at the end of the input.
    bool read_line() {
        for (;;) {
            size_t nl = buf_.find('\n', std::max(pos_, scanned_));
            if (nl != std::string::npos) {
                line_ = buf_.substr(pos_, nl - pos_);
                pos_ = nl + 1;
                return true;
            }
            scanned_ = buf_.size();
            if (eof_) {
                if (pos_ >= buf_.size()) return false;
                line_ = buf_.substr(pos_);
                pos_ = buf_.size();
                return true;
            }
            fill();
        }
    }
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
// ./translate --version.
constexpr const char* kVersion = "1.1";

struct TranslateOptions {
    std::string model = "runs/default/average.safetensors";
    std::vector<std::string> ensemble;   // --ensemble: more checkpoints, their probabilities averaged
    DecodeOptions decode;
    int batch_tokens = 0;       // 0: default_batch_tokens (decode.h) for the device, precision and beam
    int max_input_tokens = 0;   // 0: the model's limit (learned positions) or 1024
    bool replace_invalid = false;
    bool split_long = false;
    bool split_sentences = false;
    std::string device = "auto";      // auto | cpu | cuda
    std::string precision;            // "" (the device's default) | fp32 | bf16 | int8 (CPU)
    InspectOptions inspect;           // --attention DIR, --attention-words/-layer, --alignment
    std::string input, output;        // -i / -o: files instead of stdin / stdout ("": those)
    int threads = 0;                  // OpenMP threads (0: OpenMP's default)
    bool quiet = false, version = false;
    bool score = false;               // score given targets instead of searching
    bool score_tokens = false;        // --score: each token's log-probability too
    std::string ref;                  // --score: targets, one per input line ("": inline)
    std::string prefix;               // target prefixes, one per input line
    bool prefix_inline = false;       // input lines are "SOURCE ||| PREFIX"
    std::string sampling;             // "" | topk:K | topp:P (as given)
    ServeOptions serve;               // --serve and its limits (cli/serve.h)
};

// A text file read whole, one line per input line (--ref, --prefix); a byte-order mark at its
// start dropped, as the input's.
struct AlignedFile {
    std::string path;
    std::vector<std::string> lines;
    bool load(const std::string& p, std::string* err) {
        path = p;
        std::string text, why;
        if (!read_file(p, &text, &why)) {
            *err = "cannot read " + p + ": " + why;
            return false;
        }
        if (starts_with_utf8_bom(text)) text.erase(0, 3);
        split_lines(text, &lines);
        return true;
    }
};

// "SOURCE ||| SECOND" -> the two sides, spaces around '|||' dropped; false on a malformed line
// (`second_name`: TARGET or PREFIX, for the message).
static bool split_pair(const std::string& line, const char* second_name, std::string* first, std::string* second,
                       std::string* err) {
    const size_t bar = line.find("|||");
    if (bar == std::string::npos || line.find("|||", bar + 3) != std::string::npos) {
        *err = std::string("expected 'SOURCE ||| ") + second_name + "', found " +
               (bar == std::string::npos ? "no '|||'" : "more than one '|||'");
        return false;
    }
    size_t a = bar, b = bar + 3;
    while (a > 0 && line[a - 1] == ' ') a--;
    while (b < line.size() && line[b] == ' ') b++;
    *first = line.substr(0, a);
    *second = line.substr(b);
    return true;
}

// Sentences and target tokens done, for the speed summary on stderr.
struct Progress {
    long sentences = 0, tokens = 0;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

struct Translator {
    TranslateOptions opt;
    Model model;
    std::vector<std::unique_ptr<Model>> members;   // --ensemble's models (model.ensemble points at them)
    Tokenizer tok;
    long line_number = 0;
    AlignedFile second_file;   // --ref or --prefix FILE
    bool use_second_file = false;
    Progress progress;

    // Splits off the line's second text (the target of --score, the prefix of --prefix): after
    // '|||' on the line, or the aligned file's line. False + message when it is missing.
    bool split_second(std::string* line, std::string* second, bool* has, std::string* err) {
        *has = opt.score || opt.prefix_inline || use_second_file;
        if (!*has) return true;
        if (!line->empty() && line->back() == '\r') line->pop_back();
        const std::string where = "line " + std::to_string(line_number) + ": ";
        if (!use_second_file) {
            std::string first;
            if (!split_pair(*line, opt.score ? "TARGET" : "PREFIX", &first, second, err)) return *err = where + *err, false;
            *line = first;
            return true;
        }
        if (line_number > (long)second_file.lines.size()) {
            *err = where + second_file.path + " has only " + std::to_string(second_file.lines.size()) +
                   " lines (it must have one per input line)";
            return false;
        }
        *second = second_file.lines[line_number - 1];
        return true;
    }

    // Encodes a target or prefix text by a source line's rules (cli/line_check.h), one token
    // fewer (its </s> or the continuation must fit); false + message.
    bool encode_target(const std::string& text, std::vector<int>* ids, std::string* err) {
        const std::string where = "line " + std::to_string(line_number) + ", " + (opt.score ? "target" : "prefix");
        std::vector<std::vector<int>> pieces;
        if (!check_line(tok, text, {INT32_MAX, opt.replace_invalid, false}, where, &pieces, err)) return false;
        *ids = pieces[0];
        if ((int)ids->size() < opt.max_input_tokens) return true;
        *err = where + ": " + std::to_string(ids->size()) + " tokens, more than " +
               std::to_string(opt.max_input_tokens - 1) + " (--max-input-tokens " + std::to_string(opt.max_input_tokens) +
               " less one: its " + (opt.score ? "</s>" : "continuation") + " must fit)";
        return false;
    }

    // A NaN log-probability at input line `line` (1-based): the model is broken (kNanLogprob);
    // ends the program (exit 1), the lines before it printed, nothing of it or after it.
    [[noreturn]] void refuse_nan(long line) {
        flush_stdout();
        std::fprintf(stderr, "translate: line %ld: %s\n", line, kNanLogprob);
        std::exit(1);
    }

    // --score: prints "score ||| logprob" (and " ||| " + each token's log-probability with
    // --score-tokens) per pair; sources end with </s>; first_line: the 0-based index of the first.
    void score(const std::vector<std::vector<int>>& sources, const std::vector<std::vector<int>>& targets,
               long first_line) {
        std::vector<std::vector<float>> token_logp;
        std::vector<Hypothesis> r = score_sorted(&model, sources, targets, opt.decode.alpha, opt.batch_tokens,
                                                 opt.score_tokens ? &token_logp : nullptr);
        for (size_t i = 0; i < r.size(); i++)
            if (sources[i].size() == 1 && targets[i].empty()) {   // an empty line and an empty target: as the
                r[i].score = r[i].logprob = 0;                     // search answers an empty line (its n-best line)
                if (opt.score_tokens) token_logp[i].assign(1, 0.0f);
            }
        if (const long bad = first_nan_logprob(r); bad >= 0) refuse_nan(first_line + bad + 1);
        char buf[64];
        for (size_t i = 0; i < r.size(); i++) {
            std::snprintf(buf, sizeof buf, "%.6f ||| %.6f", r[i].score, r[i].logprob);
            std::string out = buf;
            for (size_t j = 0; opt.score_tokens && j < token_logp[i].size(); j++) {
                std::snprintf(buf, sizeof buf, "%s%.6f", j ? " " : " ||| ", token_logp[i][j]);
                out += buf;
            }
            write_stdout(out + '\n');
            progress.tokens += (long)r[i].tokens.size();
        }
        progress.sentences += (long)r.size();
        flush_stdout();
    }

    // --attention / --alignment for output line `line` (1-based: DIR/000001.svg is the first):
    // writes its picture (picture = true) and
    // returns " ||| pairs" (or ""); a picture that cannot be written ends the program (exit 1).
    std::string inspect(long line, const std::vector<int>& source, const Hypothesis& h, bool picture) {
        if (opt.inspect.dir.empty() && !opt.inspect.alignment) return "";
        std::string suffix, err;
        if (!inspect_translation(&model, tok, opt.inspect, line, source, h.tokens, picture, &suffix, &err)) {
            std::fprintf(stderr, "translate: %s\n", err.c_str());
            std::exit(1);
        }
        return suffix;
    }

    // Encodes one input line, checking it; false + message on bad input.
    bool encode(std::string line, std::vector<std::vector<int>>* pieces, std::string* err) {
        LineRules rules{opt.max_input_tokens, opt.replace_invalid, opt.split_long, opt.split_sentences};
        return check_line(tok, line, rules, "line " + std::to_string(line_number), pieces, err);
    }

    // Translates the lines' pieces and prints one output line (or nbest lines) per input line.
    // first_line: the 0-based index of lines[0] (n-best numbering, sampling streams);
    // prefixes (optional): per line, the target prefix of its first piece.
    void translate(const std::vector<std::vector<std::vector<int>>>& lines, long first_line,
                   const std::vector<std::vector<int>>* prefixes = nullptr) {
        std::vector<std::vector<int>> sources;
        DecodeInputs in;
        for (size_t i = 0; i < lines.size(); i++)
            for (size_t p = 0; p < lines[i].size(); p++) {
                const bool prefixed = prefixes && p == 0 && !(*prefixes)[i].empty();
                sources.push_back(lines[i][p]);
                if (!lines[i][p].empty() || prefixed) sources.back().push_back(EOS_ID);
                in.prefix.push_back(prefixed ? (*prefixes)[i] : std::vector<int>());
                in.stream.push_back(((uint64_t)(first_line + (long)i) << 32) + p);   // a line's (piece's) sample: its own
            }
        std::vector<std::vector<Hypothesis>> hyps = decode_sorted(&model, sources, opt.decode, opt.batch_tokens, &in);
        if (const long bad = first_nan_logprob(hyps); bad >= 0) {   // the line holding that piece
            long line = first_line, seen = 0;
            for (size_t i = 0; i < lines.size() && seen + (long)lines[i].size() <= bad; i++) seen += (long)lines[i].size(), line++;
            refuse_nan(line + 1);
        }
        size_t k = 0;
        for (size_t i = 0; i < lines.size(); i++) {
            std::vector<JoinedHypothesis> joined = join_pieces(tok, hyps, k, lines[i].size(), opt.decode.alpha);
            const size_t first = k;
            const bool whole = lines[i].size() == 1;   // --attention/--alignment: lines not cut
            k += lines[i].size();
            progress.sentences++;
            progress.tokens += joined[0].tokens;
            if (opt.decode.nbest <= 1) {
                std::string extra = whole ? inspect(first_line + (long)i + 1, sources[first], hyps[first][0], true) : "";
                write_stdout(joined[0].text + extra + '\n');
                continue;
            }
            for (size_t j = 0; j < joined.size(); j++) {
                std::string extra = whole ? inspect(first_line + (long)i + 1, sources[first], hyps[first][j], j == 0) : "";
                char numbers[64];   // (the text is written whole: a NUL byte in it ends no line)
                std::snprintf(numbers, sizeof numbers, " ||| %.6f ||| %.6f", joined[j].score, joined[j].logprob);
                write_stdout(std::to_string(first_line + (long)i) + " ||| " + joined[j].text + numbers + extra + '\n');
            }
        }
        flush_stdout();   // ends the program on a write error (a full disk, a closed pipe)
    }
};

// One checkpoint onto a new backend of the options' device and precision (int8: quantized),
// with its tokenizer (*tokenizer_text: as stored). False + message on failure.
static bool load_model(const TranslateOptions& o, const std::string& path, Model* m, Tokenizer* tok,
                       std::string* tokenizer_text, std::string* err) {
    m->backend = make_backend(o.device, o.precision, err);
    if (!m->backend) return false;
    Metadata meta;
    if (!checkpoint_load(m, path, &meta, err, false)) return false;
    *tokenizer_text = meta["tokenizer"];
    if (!Tokenizer::deserialize(*tokenizer_text, tok, err))
        return *err = path + ": no valid tokenizer in the checkpoint (" + *err + ")", false;
    if (tok->vocab_size() != m->cfg.vocab)
        return *err = path + ": tokenizer has " + std::to_string(tok->vocab_size()) + " ids, the model " +
                      std::to_string(m->cfg.vocab), false;
    if (o.precision == "int8") return model_quantize(m, err);
    model_pack_weights(m);   // (fp32 and bf16 on the CPU: the weights packed once for every step's products)
    return true;
}

// --ensemble: each checkpoint beside --model, with the very same tokenizer (the same ids).
static bool load_ensemble(Translator* t, const std::string& tokenizer) {
    for (const std::string& path : t->opt.ensemble) {
        auto member = std::make_unique<Model>();
        Tokenizer member_tok;
        std::string err, member_tokenizer;
        if (!load_model(t->opt, path, member.get(), &member_tok, &member_tokenizer, &err))
            return std::fprintf(stderr, "translate: --ensemble %s\n", err.c_str()), false;
        if (member_tokenizer != tokenizer)
            return std::fprintf(stderr, "translate: --ensemble %s: its tokenizer differs from %s's (an ensemble "
                                        "averages probabilities of the same token ids)\n",
                                path.c_str(), t->opt.model.c_str()), false;
        t->model.ensemble.push_back(member.get());
        t->members.push_back(std::move(member));
    }
    return true;
}

// The longest input line in tokens that every model takes: a learned position table's size
// less one (room for </s>), 1024 with sinusoids. *learned: whether a learned table set it.
static int input_token_limit(const Translator& t, bool* learned) {
    int limit = INT_MAX;
    auto take = [&](const Config& c) {
        const int n = c.learned_pos ? c.max_len - 1 : 1024;
        if (n < limit || (n == limit && c.learned_pos)) *learned = c.learned_pos;
        limit = std::min(limit, n);
    };
    take(t.model.cfg);
    for (const auto& e : t.members) take(e->cfg);
    return limit;
}

static bool load(Translator* t) {
    std::string err, tokenizer;
    if (!load_model(t->opt, t->opt.model, &t->model, &t->tok, &tokenizer, &err)) {
        std::fprintf(stderr, "translate: %s\n", err.c_str());
        if (t->opt.model == TranslateOptions().model && !std::filesystem::exists(t->opt.model))
            std::fprintf(stderr, "translate: (train a model first: make && ./train; or pass --model FILE)\n");
        return false;
    }
    if (t->opt.batch_tokens == 0)   // (scoring: one pass a batch, as greedy's)
        t->opt.batch_tokens = default_batch_tokens(*t->model.backend, t->opt.score ? 1 : t->opt.decode.beam);
    if (!load_ensemble(t, tokenizer)) return false;
    err = inspect_options_error(t->opt.inspect, t->model.cfg);
    if (!err.empty()) {
        std::fprintf(stderr, "translate: %s\n", err.c_str());
        return false;
    }
    std::error_code ec;
    if (!t->opt.inspect.dir.empty() && !std::filesystem::is_directory(t->opt.inspect.dir) &&
        !std::filesystem::create_directories(t->opt.inspect.dir, ec)) {
        std::fprintf(stderr, "translate: --attention %s: cannot create the folder: %s\n",
                     t->opt.inspect.dir.c_str(), ec ? ec.message().c_str() : "not a folder");
        return false;
    }
    bool learned = false;
    const int limit = input_token_limit(*t, &learned);
    if (t->opt.max_input_tokens > limit)   // (said, so that a later refusal's number is no surprise)
        std::fprintf(stderr, "translate: --max-input-tokens %d is more than the model%s: %d (%s)\n",
                     t->opt.max_input_tokens, t->members.empty() ? " takes" : "s take", limit,
                     learned ? "a learned position table ends there" : "this program's limit with sinusoids");
    if (t->opt.max_input_tokens <= 0 || t->opt.max_input_tokens > limit) t->opt.max_input_tokens = limit;
    return true;
}

// The options of scoring, prefixes, sampling and the program's input/output.
static void add_extra_options(Options& opts, TranslateOptions* op) {
    TranslateOptions& o = *op;
    opts.section("scoring, target prefixes, sampling");
    opts.add_flag("--score", &o.score, "print the log-probability of given targets instead of searching: "
                  "'SOURCE ||| TARGET' lines (or --ref) -> 'score ||| logprob'");
    opts.add("--ref", &o.ref, "--score: the targets, one per input line", "FILE");
    opts.add_flag("--score-tokens", &o.score_tokens, "--score: append ' ||| ' and each token's log-probability");
    opts.add("--prefix", &o.prefix, "target prefixes, one per input line: each output starts with its prefix", "FILE");
    opts.add_flag("--prefix-inline", &o.prefix_inline, "input lines are 'SOURCE ||| PREFIX'");
    opts.add_custom("--sampling", "topk:K|topp:P", "draw each token (needs --beam 1) from the K most probable "
                    "or the nucleus of probability P, 0 < P <= 1",
                    [&o] { return o.sampling.empty() ? std::string("off") : o.sampling; },
                    [&o](const std::string& s) { o.sampling = s; return parse_sampling(s, &o.decode); });
    opts.add("--temperature", &o.decode.temperature, "sampling: from softmax(logits / T)", greater_than(0));
    opts.add("--seed", &o.decode.seed, "sampling: the random numbers' seed (same seed, same text)");
    opts.section("input, output, threads");
    opts.add("--input", &o.input, "read this file instead of stdin (also -i)", "FILE");
    opts.add("-i", &o.input, "the same as --input", "FILE");
    opts.add("--output", &o.output, "write this file (a temporary file renamed when done) instead of stdout "
             "(also -o)", "FILE");
    opts.add("-o", &o.output, "the same as --output", "FILE");
    opts.add("--threads", &o.threads, "OpenMP threads (0: OpenMP's default, OMP_NUM_THREADS)", in_range(0, 1024));
    opts.add_flag("--quiet", &o.quiet, "no speed summary on stderr");
    opts.add_flag("--version", &o.version, "print the version and exit");
}

// Whether argv names the option (as "--name VALUE" or "--name=VALUE").
static bool given(int argc, char** argv, const std::string& name) {
    for (int i = 1; i < argc && std::string(argv[i]) != "--"; i++)
        if (argv[i] == name || std::string(argv[i]).rfind(name + "=", 0) == 0) return true;
    return false;
}

// Combinations the table cannot check; false + *status 2 on a contradiction.
static bool check_extra_options(Options& opts, int argc, char** argv, TranslateOptions* op, int* status) {
    TranslateOptions& o = *op;
    std::string bad;
    if (o.decode.sampling && o.decode.beam > 1 && given(argc, argv, "--beam"))
        bad = "--sampling draws one token per step: it needs --beam 1, not --beam " + std::to_string(o.decode.beam);
    else if (o.decode.sampling && o.decode.nbest > 1)
        bad = "--sampling gives one hypothesis per line: --nbest must be 1";
    else if (!o.ref.empty() && !o.score)
        bad = "--ref gives the targets of --score; add --score";
    else if (o.score_tokens && !o.score)
        bad = "--score-tokens needs --score";
    else if (o.score && (!o.prefix.empty() || o.prefix_inline || o.decode.sampling))
        bad = "--score scores given targets: --prefix, --prefix-inline and --sampling do not apply";
    else if (!o.prefix.empty() && o.prefix_inline)
        bad = "--prefix FILE and --prefix-inline exclude each other";
    else if ((o.ref == "-" || o.prefix == "-") && (o.input.empty() || o.input == "-"))
        bad = std::string(o.ref == "-" ? "--ref" : "--prefix") + " - reads stdin, which holds the input lines: "
              "give those with -i FILE";
    else if (o.device == "cuda" && o.precision == "int8")
        bad = "--precision int8 runs on the CPU: --device cpu (or auto), or fp32/bf16 on the GPU";
    else if (o.score && (given(argc, argv, "--beam") || given(argc, argv, "--nbest") ||
                         given(argc, argv, "--max-len-a") || given(argc, argv, "--max-len-b")))
        bad = "--score scores given targets, it does not search: --beam, --nbest, --max-len-a and --max-len-b do not apply";
    else if (o.score && (o.split_long || o.split_sentences))
        bad = "--score does not split lines: --split-long and --split-sentences do not apply";
    else if (o.score && (!o.inspect.dir.empty() || o.inspect.alignment))
        bad = "--attention and --alignment show a search's translations: not with --score";
    else if (!o.serve.address.empty() && (o.score || !o.prefix.empty() || o.prefix_inline || o.decode.sampling ||
                                          !o.input.empty() || !o.output.empty() || !o.inspect.dir.empty() ||
                                          o.inspect.alignment))
        bad = "--serve answers HTTP requests: --score, --prefix, --sampling, -i/-o, --attention and "
              "--alignment are options of stdin mode (a request samples with its items' \"sampling\" key)";
    else if (!o.serve.address.empty() && *serve_missing())
        bad = serve_missing();
    else if (!o.decode.sampling && (given(argc, argv, "--temperature") || given(argc, argv, "--seed")))
        bad = std::string(given(argc, argv, "--temperature") ? "--temperature" : "--seed") +
              " applies to sampling: add --sampling topk:K or topp:P" +
              (o.serve.address.empty() ? "" : " (--serve: a request's items' \"temperature\" and \"seed\" keys)");
    else if ((o.inspect.words || given(argc, argv, "--attention-layer")) && o.inspect.dir.empty())
        bad = std::string(o.inspect.words ? "--attention-words" : "--attention-layer") +
              " shapes the pictures of --attention DIR: add --attention";
    else if (given(argc, argv, "--alignment-layer") && !o.inspect.alignment)
        bad = "--alignment-layer chooses the layer of --alignment: add --alignment";
    if (!bad.empty()) {
        *status = opts.usage_error(bad);
        return false;
    }
    if (o.decode.sampling) o.decode.beam = 1;   // the default beam 4 gives way to sampling
    return true;
}

// -o FILE must not be a file the run reads besides -i (written last, renamed over it): a
// checkpoint, --ref or --prefix would be lost. -o equal to -i is allowed (-i is read first).
static bool output_is_no_input(Options& opts, const TranslateOptions& o, int* status) {
    if (o.output.empty() || o.output == "-") return true;
    std::vector<std::pair<std::string, std::string>> inputs = {{"--model", o.model}, {"--ref", o.ref}, {"--prefix", o.prefix}};
    for (const std::string& e : o.ensemble) inputs.push_back({"--ensemble", e});
    for (const auto& [option, path] : inputs)
        if (!path.empty() && same_file(o.output, path)) {
            *status = opts.usage_error("-o " + o.output + " is " + option + " " + path + ": it would be replaced");
            return false;
        }
    return true;
}

// Fills *o from the command line; false when the program should exit with *status (0 after
// --help, 2 on a bad option).
static bool parse_options(int argc, char** argv, TranslateOptions* op, int* status) {
    TranslateOptions& o = *op;
    Options opts("translate", "Translates stdin to stdout, one line per input line, in order.");
    opts.add("--model", &o.model, "checkpoint (safetensors) to translate with", "FILE");
    opts.add_custom("--ensemble", "FILE",
                    "another checkpoint (the same tokenizer) whose probabilities are averaged with --model's at "
                    "every step; repeat for more (up to 15; each costs a model's time and memory)",
                    [&o] {
                        std::string list;
                        for (const std::string& p : o.ensemble) list += (list.empty() ? "" : ", ") + p;
                        return list.empty() ? std::string("none") : list;
                    },
                    [&o](const std::string& p) {
                        if (p.empty()) return false;
                        o.ensemble.push_back(p);
                        return true;
                    });
    opts.add("--beam", &o.decode.beam, "beam size, 1 = greedy (cost grows with it; bound: README)",
             in_range(1, kMaxBeam));
    opts.add("--alpha", &o.decode.alpha, "length penalty exponent: lp = ((5 + |Y|) / 6)^alpha", in_range(0, 10));
    opts.add("--max-len-a", &o.decode.max_len_a, "max output length = a * source length + b", in_range(0, 10));
    opts.add("--max-len-b", &o.decode.max_len_b, "max output length = a * source length + b", in_range(0, 10000));
    opts.add("--nbest", &o.decode.nbest, "up to this many hypotheses per line, with scores (<= beam)", in_range(1, kMaxBeam));
    opts.add("--batch-tokens", &o.batch_tokens, "padded source tokens per batch", in_range(1, 1 << 30),
             [&o] { return o.batch_tokens > 0 ? std::to_string(o.batch_tokens) : kDefaultBatchTokensText; });
    opts.add_choice("--device", &o.device, {"auto", "cpu", "cuda"}, "auto: the GPU when one is present");
    opts.add_choice("--precision", &o.precision, {"fp32", "bf16", "int8"},
                    "fp32: the reference's numerics; bf16 (on the CPU: the linear layers' products on bf16 "
                    "operands, fast with Intel AMX or AVX512-BF16); int8: quantized products on the CPU, faster",
                    "fp32 on the CPU, bf16 on the GPU");
    opts.add("--max-input-tokens", &o.max_input_tokens, "longest accepted line in tokens (0: model limit)",
             at_least(0));
    opts.add_flag("--replace-invalid", &o.replace_invalid, "replace invalid UTF-8 with U+FFFD instead of failing");
    opts.add_flag("--split-long", &o.split_long, "translate over-long lines in pieces (their sentences, then clauses or words) instead of failing");
    opts.add_flag("--split-sentences", &o.split_sentences, "translate each line sentence by sentence (after . ! ? and their full-width forms), translations joined by a space");
    opts.add("--attention", &o.inspect.dir, "write each line's attention maps to DIR/000001.svg, ...", "DIR");
    opts.add_flag("--attention-words", &o.inspect.words, "attention maps over words instead of BPE pieces");
    opts.add("--attention-layer", &o.inspect.layer, "layer of the pictures' line view, 1-based (0: the last)",
             in_range(0, 64));
    opts.add_flag("--alignment", &o.inspect.alignment, "append \" ||| 0-0 1-2 ...\": source-target word pairs");
    opts.add("--alignment-layer", &o.inspect.alignment_layer,
             "decoder layer whose cross-attention aligns, 1-based (0: the last)", in_range(0, 64));
    add_extra_options(opts, &o);
    add_serve_options(&opts, &o.serve);
    if (!opts.parse(argc, argv)) {
        *status = opts.exit_code();
        return false;
    }
    if (!check_extra_options(opts, argc, argv, &o, status)) return false;
    if (o.decode.nbest > o.decode.beam) {
        *status = opts.usage_error("--nbest " + std::to_string(o.decode.nbest) + " is more than --beam " +
                                   std::to_string(o.decode.beam) + " (n-best lists come from the beam)");
        return false;
    }
    if ((int)o.ensemble.size() >= Backend::kMaxEnsemble) {
        *status = opts.usage_error("an ensemble of at most " + std::to_string(Backend::kMaxEnsemble) + " models: --model and " +
                                   std::to_string(Backend::kMaxEnsemble - 1) + " --ensemble, not " +
                                   std::to_string(o.ensemble.size()));
        return false;
    }
    if ((o.split_long || o.split_sentences) && (o.inspect.alignment || !o.inspect.dir.empty())) {
        *status = opts.usage_error(std::string("--attention and --alignment need whole lines: not with ") +
                                   (o.split_long ? "--split-long" : "--split-sentences"));
        return false;
    }
    return output_is_no_input(opts, o, status);
}

// -o FILE: output goes to FILE.tmp.PID (as stdout, so every write is checked), renamed over
// FILE when the run succeeds and removed when it fails.
static std::string g_output_tmp;
static std::string g_output_target;   // -o FILE, or the file it links to
static bool g_output_done = false;
static void remove_partial_output() {
    if (!g_output_tmp.empty() && !g_output_done) unlink(g_output_tmp.c_str());
}
// Ctrl-C or a kill (SIGINT, SIGTERM, SIGHUP) while -o is written: the temporary file goes too
// (unlink is async-signal-safe), then the signal ends the program as it would have. A signal
// the caller ignores (nohup's SIGHUP, a background job's SIGINT) stays ignored.
static void remove_partial_output_on_signal(int sig) {
    remove_partial_output();
    signal(sig, SIG_DFL);
    raise(sig);
}
static void remove_partial_output_on_signals() {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
        struct sigaction old, now = {};
        if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
        now.sa_handler = remove_partial_output_on_signal;
        sigemptyset(&now.sa_mask);
        sigaction(sig, &now, nullptr);
    }
}

// -i, -o, --threads, --ref/--prefix FILE: false + message on a file that cannot be used.
static bool setup_io(Translator* t) {
    const TranslateOptions& o = t->opt;
#ifdef _OPENMP
    if (o.threads > 0) omp_set_num_threads(o.threads);
#endif
    std::string err;
    const std::string& aligned = !o.ref.empty() ? o.ref : o.prefix;
    if (!aligned.empty()) {
        if (!t->second_file.load(aligned, &err)) return std::fprintf(stderr, "translate: %s\n", err.c_str()), false;
        t->use_second_file = true;
    }
    if (!o.input.empty() && o.input != "-") {
        const int fd = open(o.input.c_str(), O_RDONLY);
        if (fd < 0 || dup2(fd, 0) < 0)
            return std::fprintf(stderr, "translate: cannot open %s: %s\n", o.input.c_str(), std::strerror(errno)), false;
        close(fd);
    }
    if (!o.output.empty() && o.output != "-") {
        // a link's file is written (not the link replaced), keeping an existing file's permissions
        if (!replacement_target(o.output, &g_output_target, &err))
            return std::fprintf(stderr, "translate: %s (the output is written to a temporary file and renamed "
                                        "over it)\n", err.c_str()), false;
        g_output_tmp = g_output_target + ".tmp." + std::to_string(getpid());
        const int fd = open_replacement(g_output_tmp, g_output_target);   // toolkit/files.h
        if (fd < 0 || dup2(fd, 1) < 0)
            return std::fprintf(stderr, "translate: cannot create %s: %s\n", g_output_tmp.c_str(), std::strerror(errno)), false;
        close(fd);
        std::atexit(remove_partial_output);
        remove_partial_output_on_signals();
        text_io_detail::stdout_name = o.output;
        text_io_detail::stdout_cleanup = remove_partial_output;
    }
    return true;
}

// -o FILE: flushes, syncs and renames the temporary file into place; false + message.
static bool commit_output(const TranslateOptions& o) {
    if (g_output_tmp.empty()) return true;
    flush_stdout();
    if (fsync(1) != 0 || std::rename(g_output_tmp.c_str(), g_output_target.c_str()) != 0) {
        std::fprintf(stderr, "translate: cannot write %s: %s\n", o.output.c_str(), std::strerror(errno));
        return false;
    }
    g_output_done = true;
    return true;
}

// Reads, encodes and translates (or scores) the input in chunks of lines available together.
// Returns the exit status.
static int process(Translator& t) {
    LineReader in;
    std::string line, second, err;
    std::vector<std::vector<std::vector<int>>> chunk;
    std::vector<std::vector<int>> targets;   // per line: the prefix, or the target of --score
    long first = 0;                           // 0-based index of the chunk's first line
    auto run = [&] {
        if (chunk.empty()) return;
        if (!t.opt.score) {
            t.translate(chunk, first, t.use_second_file || t.opt.prefix_inline ? &targets : nullptr);
        } else {
            std::vector<std::vector<int>> sources;
            for (const auto& pieces : chunk) {
                sources.push_back(pieces[0]);
                sources.back().push_back(EOS_ID);   // an empty source is </s> alone
            }
            t.score(sources, targets, first);
        }
        first = t.line_number;
        chunk.clear();
        targets.clear();
    };
    while (in.next(&line)) {
        t.line_number++;
        bool has_second = false;
        std::vector<std::vector<int>> pieces;
        std::vector<int> target;
        bool ok = t.split_second(&line, &second, &has_second, &err) && t.encode(line, &pieces, &err) &&
                  (!has_second || t.encode_target(second, &target, &err));
        if (!ok) {
            run();
            std::fprintf(stderr, "translate: %s\n", err.c_str());
            return 1;
        }
        chunk.push_back(pieces);
        targets.push_back(target);
        if (chunk.size() >= 2000 || !in.line_ready()) run();
    }
    run();
    if (in.read_error()) {
        std::fprintf(stderr, "translate: cannot read %s after line %ld: %s\n",
                     t.opt.input.empty() ? "stdin" : t.opt.input.c_str(), t.line_number, std::strerror(in.read_error()));
        return 1;
    }
    if (t.use_second_file && (long)t.second_file.lines.size() != t.line_number) {
        std::fprintf(stderr, "translate: %s has %zu lines, the input %ld (one per input line)\n",
                     t.second_file.path.c_str(), t.second_file.lines.size(), t.line_number);
        return 1;
    }
    return 0;
}

// The one-line speed summary on stderr.
static void print_summary(const Progress& p) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.start).count();
    const std::string governed = governor_summary();   // toolkit/thread_governor.h
    std::fprintf(stderr, "translate: %ld sentences, %ld tokens (target, with </s>) in %.2f s: %.1f sentences/s, %.1f tokens/s%s%s\n",
                 p.sentences, p.tokens, s, s > 0 ? p.sentences / s : 0.0, s > 0 ? p.tokens / s : 0.0,
                 governed.empty() ? "" : "; ", governed.c_str());
}

int main(int argc, char** argv) {
    guard_stdout("translate", /*output_may_be_a_file=*/true);   // -o FILE, --serve: no stdout needed
    Translator t;
    int status = 0;
    if (!parse_options(argc, argv, &t.opt, &status)) return status == 0 && !require_stdout() ? 1 : status;   // --help
    const bool to_stdout = t.opt.serve.address.empty() && (t.opt.output.empty() || t.opt.output == "-");
    if ((t.opt.version || to_stdout) && !require_stdout()) return 1;
    if (t.opt.version) {
        std::printf("translate (Attention Is All You Need in C++/CUDA) %s; checkpoints aiayn-transformer/1; "
                    "backends: cpu%s; --serve: %s\n", kVersion, cuda_built() ? ", cuda" : "",
                    *serve_missing() ? "no (built without cpp-httplib)" : "yes");
        return 0;
    }
    if (!t.opt.serve.address.empty()) {
        if (!load(&t)) return 1;
        return serve({&t.model, &t.tok, t.opt.decode, t.opt.batch_tokens,
                      {t.opt.max_input_tokens, t.opt.replace_invalid, t.opt.split_long, t.opt.split_sentences}, t.opt.model,
                      t.opt.ensemble},
                     t.opt.serve);
    }
    if (!setup_io(&t) || !load(&t)) return 1;
    t.progress = Progress();
    status = process(t);
    if (status == 0 && !commit_output(t.opt)) status = 1;
    if (status == 0 && !t.opt.quiet) print_summary(t.progress);
    return status;
}
