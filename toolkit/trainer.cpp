// trainer.cpp — the training run (see trainer.h): set-up, the loop, checkpoints, resume,
// averaging, final BLEU. The model and data code it drives are in model/model.cpp and
// toolkit/parallel_data.cpp.
#include "toolkit/trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "toolkit/bleu_score.h"
#include "toolkit/curves.h"
#include "model/checkpoint.h"
#include "toolkit/parallel_data.h"
#include "toolkit/decode.h"
#include "toolkit/distributed.h"
#include "toolkit/files.h"
#include "toolkit/numbers.h"
#include "toolkit/ter_score.h"
#include "toolkit/thread_governor.h"
#include "tokenizer.h"

namespace fs = std::filesystem;

static double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

static std::string format_duration(double s) {
    long t = (long)std::max(0.0, s);
    char buf[32];
    if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
    return buf;
}

// Ctrl-C or SIGTERM: the run stops after the step (or evaluation) in progress and saves a
// checkpoint; a second one ends it at once, without that checkpoint (the last one written stays
// whole: checkpoints are renamed into place). write() and _exit() are async-signal-safe.
// Data parallelism: rank 0 alone says so (it alone saves; a Ctrl-C reaches every rank, whose
// lines were the same promise N times); the ranks agree on the stop in budget_left.
static std::atomic<bool> g_stop_requested{false};
static volatile std::sig_atomic_t g_signal_quiet = 0;   // set on ranks other than 0
static void on_signal(int sig) {
    if (g_stop_requested.exchange(true)) {
        static const char again[] = "\ninterrupted again: stopping now, without a checkpoint of this step\n";
        if (!g_signal_quiet) (void)!write(2, again, sizeof again - 1);
        _exit(128 + sig);
    }
    static const char first[] = "\nstopping after this step, with a checkpoint (interrupt again to stop at once)\n";
    if (!g_signal_quiet) (void)!write(2, first, sizeof first - 1);
}

// The best evaluation so far by the run's metric (best.safetensors holds its parameters) and
// the evaluations since it (early stopping). Saved in every checkpoint, restored on resume.
struct BestState {
    std::string metric;       // "bleu" (higher is better) or "loss" (lower is better)
    bool given = false;       // chosen by --best-metric (else by default: bleu where dev BLEU is computed)
    double value = NAN;       // NAN: no evaluation yet
    int64_t step = -1;
    int64_t evals_since = 0;  // evaluations without improvement since the best one
};

// Everything one run holds.
struct Run {
    TrainOptions opt;
    Tokenizer tok;
    ParallelData train, dev, test;
    bool have_dev = false, have_test = false;
    Model model;
    BatchSampler sampler;
    DataParallelStep dp;      // this rank's share of a step (toolkit/distributed.h)
    double time_before = 0;   // training seconds of earlier runs (resume)
    std::string resumed_from;   // the checkpoint --resume continues (its messages name it)
    bool vocab_learned = false;  // the tokenizer was learned at --vocab-size (checkpoints say so)
    double start = 0;
    int64_t last_saved_step = -1;
    std::vector<std::string> dev_src, dev_ref;   // the dev lines dev BLEU is computed on
    BestState best;
    int64_t nonfinite_in_a_row = 0, nonfinite_total = 0;   // skipped steps
    int64_t attempts = 0;                // steps tried by this process (skipped ones included)
    std::vector<int64_t> poison_steps;   // test-only: attempts whose gradient is made NaN
    int fail_status = 1;                 // exit status when setup or the loop fails
    FILE* csv = nullptr;
    int out_lock = -1;   // --out's lock file, held while the run lives (lock_out_dir)
    ~Run() {
        if (csv) std::fclose(csv);
        if (out_lock >= 0) close(out_lock);   // (releases the lock)
    }
    double elapsed() const { return time_before + (now_s() - start); }
    std::string path(const std::string& name) const { return (fs::path(opt.out_dir) / name).string(); }
    std::string data(const std::string& split, const std::string& lang) const {
        return (fs::path(opt.data_dir) / (split + "." + lang)).string();
    }
};

static bool fail(const std::string& msg) {
    if (dist_size() > 1) std::fprintf(stderr, "train: error (rank %d): %s\n", dist_rank(), msg.c_str());
    else std::fprintf(stderr, "train: error: %s\n", msg.c_str());
    return false;
}

// ---------------------------------------------------------------------------------------------
// Set-up
// ---------------------------------------------------------------------------------------------
// The default corpus is complete when make_corpus.py's stamp (DIR/.complete, written after every
// file) is there too: without it a build was cut short (train.* written, dev and test not; or one
// side of a rebuild replaced), and the script runs again, as it rebuilds such a folder.
static bool ensure_corpus(Run& r) {
    const std::string src = r.data("train", r.opt.src_lang), tgt = r.data("train", r.opt.tgt_lang);
    const bool stamped = !r.opt.build_default_corpus || fs::exists(fs::path(r.opt.data_dir) / ".complete");
    if (fs::exists(src) && fs::exists(tgt) && stamped) return true;
    if (r.opt.build_default_corpus && (r.opt.src_lang != "en" || r.opt.tgt_lang != "es"))
        return fail("the default corpus is English-Spanish (en, es): for " + r.opt.src_lang + "-" + r.opt.tgt_lang +
                    " give --data DIR holding train." + r.opt.src_lang + " and train." + r.opt.tgt_lang);
    if (r.opt.build_default_corpus && !fs::exists("data/make_corpus.py"))
        return fail("no " + src + " here, and no data/make_corpus.py to build the default corpus: run ./train from "
                    "the repository's folder, or give --data DIR holding your train.SRC and train.TGT");
    if (r.opt.build_default_corpus) {
        std::printf("Building the default corpus in %s (data/make_corpus.py)...\n", r.opt.data_dir.c_str());
        std::fflush(stdout);
        std::string cmd = "python3 data/make_corpus.py --out '" + r.opt.data_dir + "'";
        if (std::system(cmd.c_str()) != 0) return fail("data/make_corpus.py failed (see above)");
        if (fs::exists(src) && fs::exists(tgt)) return true;
    }
    return fail("no training data: expected " + src + " and " + tgt +
                " (`make data` builds the default corpus; bring your own with --data DIR holding "
                "train.SRC/train.TGT, and dev/test likewise)");
}

static bool read_all_lines(const std::vector<std::string>& paths, std::vector<std::string>* lines) {
    for (const std::string& p : paths) {
        std::vector<std::string> part;
        std::string err;
        if (!read_text_lines(p, &part, &err)) return fail(err);
        lines->insert(lines->end(), part.begin(), part.end());
    }
    return true;
}

// Reads a vocabulary in the vocab.bpe format (what ./bpe learn and ./train write), or the one a
// checkpoint carries. The file's bytes as they are, as ./bpe reads them: a last line without
// its newline (a truncated file) or CRLF line ends are refused, never mended.
static bool read_vocab_file(const std::string& path, Tokenizer* tok) {
    std::string joined, err;
    if (is_safetensors(path)) {
        if (!checkpoint_tokenizer(path, &joined, &err)) return fail(err);
    } else if (!read_file(path, &joined, &err)) {
        return fail("cannot read " + path + ": " + err);
    }
    if (!Tokenizer::deserialize(joined, tok, &err)) return fail(path + ": " + err);
    return true;
}

// Writes the run's tokenizer to out/vocab.bpe.
// Written as checkpoints are (a temporary file, then renamed), so that a run killed here never
// leaves a truncated vocab.bpe for the next --resume to trip on.
static bool write_vocab_file(const Run& r) {
    if (!dist_is_root()) return true;   // data parallelism: rank 0 alone writes (one temporary file)
    std::string err;
    return write_file_replacing(r.path("vocab.bpe"), r.tok.serialize(), &err) || fail(err);
}

// The tokenizer: from the checkpoint on resume or fine-tuning (ckpt_meta), else --vocab,
// else out/vocab.bpe, else learned; out/vocab.bpe is written whenever it is new.
static bool setup_tokenizer(Run& r, const Metadata* ckpt_meta) {
    std::string err;
    if (ckpt_meta) {
        auto it = ckpt_meta->find("tokenizer");
        if (it == ckpt_meta->end() || !Tokenizer::deserialize(it->second, &r.tok, &err))
            return fail("the checkpoint carries no valid tokenizer: " + err);
        if (!r.opt.vocab_file.empty()) {   // --resume --vocab FILE: the checkpoint's tokenizer, or a contradiction (exit 2)
            Tokenizer given;
            if (!read_vocab_file(r.opt.vocab_file, &given)) return false;
            if (given.serialize() != r.tok.serialize()) {
                r.fail_status = 2;
                return fail("--resume: --vocab " + r.opt.vocab_file + " is not the checkpoint's tokenizer; a resumed "
                            "run keeps its training options (drop --vocab, or start a new run with another --out)");
            }
        }
        if (!r.opt.init_from.empty()) return write_vocab_file(r);
        // resume: out/vocab.bpe (what ./bpe and the benchmarks read) must be the checkpoint's
        std::ifstream f(r.path("vocab.bpe"), std::ios::binary);
        std::ostringstream disk;
        disk << f.rdbuf();
        if (f && disk.str() == r.tok.serialize()) return true;
        std::printf("%s: %s, written again from the checkpoint's tokenizer\n", r.path("vocab.bpe").c_str(),
                    f ? "not the checkpoint's tokenizer" : "missing");
        return write_vocab_file(r);
    }
    if (!r.opt.vocab_file.empty()) {
        if (!read_vocab_file(r.opt.vocab_file, &r.tok)) return false;
        std::printf("BPE: %s (%d ids, --vocab)\n", r.opt.vocab_file.c_str(), r.tok.vocab_size());
        return write_vocab_file(r);
    }
    const std::string vocab = r.path("vocab.bpe");
    if (!dist_is_root() && fs::exists(vocab))   // data parallelism: rank 0 learnt it a moment ago
        return read_vocab_file(vocab, &r.tok);   // (a shared --out; else each rank learns the same)
    // A fresh run learns its vocabulary from its data, always (under a second on the default
    // corpus): a vocab.bpe left in --out by a run that ended before its first checkpoint may
    // come from other data or another --vocab-size, and is replaced.
    const bool replacing = fs::exists(vocab);
    std::vector<std::string> lines;
    if (!read_all_lines({r.data("train", r.opt.src_lang), r.data("train", r.opt.tgt_lang)}, &lines)) return false;
    double t0 = now_s();
    r.tok = Tokenizer::learn(lines, r.opt.vocab_size);
    r.vocab_learned = true;
    if (!write_vocab_file(r)) return false;
    std::printf("BPE: learned %d ids from %zu lines in %.1f s -> %s%s\n", r.tok.vocab_size(), lines.size(),
                now_s() - t0, vocab.c_str(), replacing ? " (replacing the one an earlier run left there)" : "");
    return true;
}

static bool load_split(Run& r, const std::string& split, bool required, ParallelData* out, bool* have) {
    const std::string src = r.data(split, r.opt.src_lang), tgt = r.data(split, r.opt.tgt_lang);
    *have = fs::exists(src) && fs::exists(tgt);
    if (!*have && fs::exists(src) != fs::exists(tgt))   // half a pair: a mistake, not "no dev set"
        return fail(split + " data: " + (fs::exists(src) ? src : tgt) + " has no " + (fs::exists(src) ? tgt : src) +
                    " beside it (give both, or neither" + (required ? "" : ": then no " + split + " evaluation") + ")");
    if (!*have) return required ? fail("missing " + src + " or " + tgt) : true;
    LoadOptions lo;
    lo.skip_empty = split == "train";
    lo.verbose = !r.opt.quiet && dist_is_root();   // data parallelism: one rank's "data:" lines
    std::string err;
    if (!load_parallel(src, tgt, r.tok, lo, out, &err)) return fail(err);
    return true;
}

// The run's state read back from a checkpoint's metadata on --resume: a key that is absent
// leaves the value as it is (a checkpoint from before the key was written); text that is not a
// number in the key's range (a damaged or hand-edited file) is remembered in `error`, naming
// the key, and the value is left too.
struct MetaReader {
    const Metadata& meta;
    std::string error;

    template <class T> void integer(const char* key, T* v, T lo = std::numeric_limits<T>::min(),
                                    T hi = std::numeric_limits<T>::max()) {
        const std::string* s = find(key);
        if (!s) return;
        T x{};
        if (parse_decimal(*s, &x, "-") == Decimal::ok && x >= lo && x <= hi) *v = x;
        else bad(key, *s);
    }
    // A finite number in [lo, hi] (or, where any_ok, any number: nan and inf included).
    void real(const char* key, double* v, double lo, double hi, bool any_ok = false) {
        const std::string* s = find(key);
        if (!s) return;
        char* end = nullptr;
        const double x = std::strtod(s->c_str(), &end);
        if (!s->empty() && !*end && (any_ok || (std::isfinite(x) && x >= lo && x <= hi))) *v = x;
        else bad(key, *s);
    }
    // 0 (off), or a finite number in [lo, hi].
    void real_or_zero(const char* key, double* v, double lo, double hi) {
        const std::string* s = find(key);
        if (s && *s == "0") *v = 0;
        else real(key, v, lo, hi);
    }
    void real(const char* key, float* v, double lo, double hi) {
        double x = *v;
        real(key, &x, lo, hi);
        *v = (float)x;
    }

  private:
    const std::string* find(const char* key) const {
        auto it = meta.find(key);
        return it == meta.end() ? nullptr : &it->second;
    }
    void bad(const char* key, const std::string& text) {
        if (error.empty()) error = "metadata \"" + std::string(key) + "\" is '" + text.substr(0, 40) + "', not a valid value";
    }
};
// The options' own bound for durations, --lr-scale and --clip-norm (any finite value), so that
// every checkpoint ./train writes reads back (a --log-every of 10^16 s had been refused).
constexpr double kAnyFinite = std::numeric_limits<double>::max();
// A number as metadata text that reads back to the same double ("nan" for NAN).
static std::string exact_text(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

// Whether the command line gave the option (TrainOptions::given).
static bool given(const Run& r, const char* option) {
    return std::find(r.opt.given.begin(), r.opt.given.end(), option) != r.opt.given.end();
}

// The options a resumed run keeps, as its checkpoint holds them (absent keys left as they are),
// in the ranges ./train's options allow; a value out of them is remembered in in.error.
static void read_kept_options(MetaReader& in, TrainOptions* o) {
    in.integer("max_tokens", &o->max_tokens, 1);
    in.integer("accum", &o->accum, 1);
    in.integer("warmup", &o->warmup, 1);
    in.integer("seed", &o->seed);
    in.integer("vocab_size", &o->vocab_size, Tokenizer::kFirstChar, Tokenizer::kMaxVocab);
    in.real_or_zero("max_len_ratio", &o->max_len_ratio, 1, kAnyFinite);
    in.real("lr_scale", &o->lr_scale, std::numeric_limits<double>::denorm_min(), kAnyFinite);
    in.real("clip_norm", &o->clip_norm, 0, kAnyFinite);
    in.real("adam_beta1", &o->adam.beta1, 0, 0.99999999);
    in.real("adam_beta2", &o->adam.beta2, 0, 0.99999999);
    in.real("adam_eps", &o->adam.eps, 1e-300, 1e300);
}

// An option a resumed run keeps (read_kept_options), given on the command line, must agree with
// the checkpoint's value (which is the one that wins): a contradiction is refused, naming both
// values. Every value compares exactly (a checkpoint's reals read back to the very doubles
// given: exact_text), and prints in as few digits as tell it apart (1.0000001 is not 1).
// A checkpoint with a damaged value is left to restore_options (exit 1), not called a
// contradiction.
static bool check_resume_conflicts(Run& r, const Metadata& meta) {
    TrainOptions saved = r.opt;
    MetaReader in{meta, ""};
    read_kept_options(in, &saved);
    if (!in.error.empty()) return true;
    auto shortest = [](double v) {   // the fewest significant digits that read back to v (as a
        const bool single = (double)(float)v == v;   // float where it is one: Adam's constants)
        for (int digits = 6; digits < 17; digits++) {
            const std::string s = printed("%.*g", digits, v);
            const double back = std::strtod(s.c_str(), nullptr);
            if (single ? (float)back == (float)v : back == v) return s;
        }
        return printed("%.17g", v);
    };
    const TrainOptions& now = r.opt;
    const struct { const char* option; const char* key; unsigned long long given, was; double given_real, was_real; bool is_real; } opts[] = {
        {"--max-tokens", "max_tokens", (unsigned long long)now.max_tokens, (unsigned long long)saved.max_tokens, 0, 0, false},
        {"--accum", "accum", (unsigned long long)now.accum, (unsigned long long)saved.accum, 0, 0, false},
        {"--warmup", "warmup", (unsigned long long)now.warmup, (unsigned long long)saved.warmup, 0, 0, false},
        {"--seed", "seed", now.seed, saved.seed, 0, 0, false},
        {"--vocab-size", "vocab_size", (unsigned long long)now.vocab_size, (unsigned long long)saved.vocab_size, 0, 0, false},
        {"--lr-scale", "lr_scale", 0, 0, now.lr_scale, saved.lr_scale, true},
        {"--clip-norm", "clip_norm", 0, 0, now.clip_norm, saved.clip_norm, true},
        {"--max-len-ratio", "max_len_ratio", 0, 0, now.max_len_ratio, saved.max_len_ratio, true},
        {"--adam-beta1", "adam_beta1", 0, 0, now.adam.beta1, saved.adam.beta1, true},
        {"--adam-beta2", "adam_beta2", 0, 0, now.adam.beta2, saved.adam.beta2, true},
        {"--adam-eps", "adam_eps", 0, 0, now.adam.eps, saved.adam.eps, true}};
    for (const auto& o : opts) {
        if (!given(r, o.option) || !meta.count(o.key)) continue;
        if (o.is_real ? o.given_real == o.was_real : o.given == o.was) continue;
        char shown[96];   // as given: --accum counts one rank's batches (the step takes N x --accum)
        if (std::strcmp(o.option, "--accum") == 0 && dist_size() > 1)
            std::snprintf(shown, sizeof shown, "%d on %d ranks (%llu batches a step)", now.accum / dist_size(),
                          dist_size(), o.given);
        else if (o.is_real) std::snprintf(shown, sizeof shown, "%s", shortest(o.given_real).c_str());
        else std::snprintf(shown, sizeof shown, "%llu", o.given);
        const std::string was = o.is_real ? shortest(o.was_real) : std::to_string(o.was);
        char buf[320];
        std::snprintf(buf, sizeof buf, "--resume: %s %s contradicts the checkpoint's %s; a resumed run keeps "
                      "its training options (drop %s, or start a new run with another --out)",
                      o.option, shown, was.c_str(), o.option);
        r.fail_status = 2;
        return fail(buf);
    }
    // A checkpoint that does not say which size its vocabulary was learned at (one of --vocab,
    // --init-from, or from before the key was written): --vocab-size must be its tokenizer's.
    if (given(r, "--vocab-size") && !meta.count("vocab_size") && now.vocab_size != r.model.cfg.vocab) {
        r.fail_status = 2;
        return fail("--resume: --vocab-size " + std::to_string(now.vocab_size) + " contradicts the checkpoint's "
                    "tokenizer of " + std::to_string(r.model.cfg.vocab) + " ids; a resumed run keeps its training "
                    "options (drop --vocab-size, or start a new run with another --out)");
    }
    return true;
}

// A resumed run continues the checkpoint's model: model options given on the command line must
// make its config (the vocabulary, the tokenizer's, aside), else they are refused (exit 2).
static bool check_resume_config(Run& r) {
    if (r.opt.given_model.empty()) return true;
    Config wanted = r.opt.cfg;
    wanted.vocab = r.model.cfg.vocab;
    const std::string diff = config_difference(wanted, r.model.cfg);
    if (diff.empty()) return true;
    std::string names;
    for (const std::string& n : r.opt.given_model) names += (names.empty() ? "" : ", ") + n;
    r.fail_status = 2;
    return fail("--resume continues the checkpoint's model, and " + names + " make another (" + diff +
                ", the first value this command's, the second the checkpoint's): drop them, or start a new run "
                "with another --out");
}

// --resume without --data, --src, --tgt: the run's own, from its last checkpoint's header (read
// before the data is looked for). Checkpoints from before they were recorded keep the options.
static bool restore_data_options(Run& r) {
    std::vector<std::string> ckpts = list_checkpoints(r.opt.out_dir);
    if (ckpts.empty()) return true;
    SafeTensorsFile f;
    std::string err;
    if (!f.open(ckpts.back(), &err)) return fail(err);
    const struct { const char* option; const char* key; std::string* value; } data[] = {
        {"--data", "data_dir", &r.opt.data_dir}, {"--src", "src_lang", &r.opt.src_lang}, {"--tgt", "tgt_lang", &r.opt.tgt_lang}};
    std::string restored;
    for (const auto& d : data) {
        auto it = f.metadata.find(d.key);
        if (given(r, d.option) || it == f.metadata.end() || it->second == *d.value) continue;
        *d.value = it->second;
        restored += std::string(restored.empty() ? "" : ", ") + d.option + " " + it->second;
    }
    if (restored.empty()) return true;
    r.opt.build_default_corpus = false;   // the run's data exists, or it is an error to say so
    if (!r.opt.quiet) std::printf("--resume: the run's data, from its checkpoint: %s\n", restored.c_str());
    return true;
}

// A resumed checkpoint's metadata that MetaReader refused.
static bool fail_damaged(const Run& r, const std::string& error) {
    return fail(r.resumed_from + ": " + error + " (a damaged or edited checkpoint: resume from an earlier one, or "
                "start a new run)");
}

// --resume: each of --time, --max-steps, --max-epochs not given again is the run's, from its
// checkpoint (the time counts what the run has used already); so are the evaluations that
// early stopping counts and the best is kept by (--eval-every, --eval-lines, --eval-beam,
// --early-stopping, --no-eval-bleu or --eval-bleu) and the bookkeeping (--save-every,
// --save-every-steps, --keep, --average, --log-every).
static void restore_schedule(Run& r, MetaReader& in) {
    if (!given(r, "--save-every")) in.real("save_every", &r.opt.save_every_s, 0, kAnyFinite);
    if (!given(r, "--save-every-steps")) in.integer<int64_t>("save_every_steps", &r.opt.save_every_steps, 0);
    if (!given(r, "--keep")) in.integer("keep", &r.opt.keep, 1);
    if (!given(r, "--average")) in.integer("average", &r.opt.average, 0);
    if (!given(r, "--log-every")) in.real("log_every", &r.opt.log_every_s, 0, kAnyFinite);
    if (!given(r, "--time")) in.real("time_limit", &r.opt.time_limit_s, 0, kAnyFinite);
    if (!given(r, "--max-steps")) in.integer<int64_t>("max_steps", &r.opt.max_steps, 0);
    if (!given(r, "--max-epochs")) in.integer<int64_t>("max_epochs", &r.opt.max_epochs, 0);
    if (!given(r, "--eval-every")) in.integer<int64_t>("eval_every", &r.opt.eval_every_steps, 0);
    if (!given(r, "--eval-lines")) in.integer("eval_lines", &r.opt.eval_lines, 0);
    if (!given(r, "--eval-beam")) in.integer("eval_beam", &r.opt.eval_beam, 1, 64);
    if (!given(r, "--early-stopping")) in.integer("early_stopping", &r.opt.early_stopping, 0);
    int eval_bleu = r.opt.eval_bleu;
    if (!given(r, "--no-eval-bleu") && !given(r, "--eval-bleu")) in.integer("eval_bleu", &eval_bleu, 0, 1);
    r.opt.eval_bleu = eval_bleu;
}

// On resume, the options that fix the data order and the schedule come from the checkpoint,
// in the ranges ./train's options allow. False + message on a value out of them.
static bool restore_options(Run& r, const Metadata& meta) {
    MetaReader in{meta, ""};
    restore_schedule(r, in);
    read_kept_options(in, &r.opt);
    r.vocab_learned = meta.count("vocab_size") > 0;
    r.time_before = 0;
    in.real("time_used", &r.time_before, 0, 1e15);
    return in.error.empty() || fail_damaged(r, in.error);
}

// Fine-tuning (--init-from): the checkpoint's parameters and config (dropout and label
// smoothing replaceable), then a fresh optimizer and schedule: step 0, zero Adam state, the
// dropout masks of this run's seed. The tokenizer comes from *meta (setup_tokenizer).
static bool setup_init_from(Run& r, Metadata* meta) {
    std::string err;
    if (!checkpoint_load(&r.model, r.opt.init_from, meta, &err)) return fail(err);
    const int64_t from_step = r.model.step;
    Config& c = r.model.cfg;
    const InitOverrides& o = r.opt.init_override;
    if (o.p_drop) c.p_drop = r.opt.cfg.p_drop;
    if (o.p_attn_drop) c.p_attn_drop = r.opt.cfg.p_attn_drop;
    if (o.p_relu_drop) c.p_relu_drop = r.opt.cfg.p_relu_drop;
    if (o.label_smoothing) c.label_smoothing = r.opt.cfg.label_smoothing;
    std::string bad = config_error(c);
    if (!bad.empty()) return fail("config: " + bad);
    r.opt.cfg = c;
    r.model.step = 0;
    r.model.train_forwards = 0;
    r.model.dropout_seed = r.opt.seed;
    r.model.backend->fill_zero(r.model.adam_m, r.model.layout.total * sizeof(float));
    r.model.backend->fill_zero(r.model.adam_v, r.model.layout.total * sizeof(float));
    std::printf("Fine-tuning from %s (step %lld of its run): its config and tokenizer, a fresh optimizer and schedule\n",
                r.opt.init_from.c_str(), (long long)from_step);
    return true;
}

// Dev BLEU's lines (the first eval_lines of dev, all when 0), the best metric, and on resume
// the best so far. --early-stopping and --best-metric need a dev set; bleu needs dev BLEU.
static bool setup_validation(Run& r, const Metadata* resume_meta) {
    const bool explicit_best = !r.opt.best_metric.empty();
    if ((r.opt.early_stopping > 0 || explicit_best) && !r.have_dev)
        return fail("--early-stopping and --best-metric need a dev set: " + r.data("dev", r.opt.src_lang) +
                    " and " + r.data("dev", r.opt.tgt_lang));
    if (r.opt.early_stopping > 0 && r.opt.eval_every_steps <= 0)
        return fail("--early-stopping needs evaluations: --eval-every > 0");
    const bool bleu = r.opt.eval_bleu && r.have_dev && r.opt.eval_every_steps > 0;
    if (r.opt.best_metric == "bleu" && !bleu) return fail("--best-metric bleu needs dev BLEU (not --no-eval-bleu)");
    r.best.metric = explicit_best ? r.opt.best_metric : bleu ? "bleu" : "loss";
    r.best.given = explicit_best;
    std::string err;
    if (bleu && (!read_text_lines(r.data("dev", r.opt.src_lang), &r.dev_src, &err) ||
                 !read_text_lines(r.data("dev", r.opt.tgt_lang), &r.dev_ref, &err)))
        return fail(err);
    if (r.opt.eval_lines > 0 && r.dev_src.size() > (size_t)r.opt.eval_lines) {
        r.dev_src.resize(r.opt.eval_lines);
        r.dev_ref.resize(r.opt.eval_lines);
    }
    if (!resume_meta || !resume_meta->count("best_metric")) return true;
    MetaReader in{*resume_meta, ""};
    double value = NAN, best_step = -1;
    int64_t evals_since = 0;
    in.real("best_value", &value, 0, 0, /*any_ok=*/true);   // nan: none yet
    in.real("best_step", &best_step, -1, 9e18);
    in.integer<int64_t>("evals_since_best", &evals_since, 0);
    if (!in.error.empty()) return fail_damaged(r, in.error);
    // A run that has not evaluated yet, its metric the default, holds no best to keep: this
    // resume's options choose it, as a new run's would (a run of --eval-every 0 resumed with
    // evaluations keeps its best by dev BLEU; one resumed with --best-metric bleu is not refused).
    auto given = resume_meta->find("best_metric_given");
    const bool saved_given = given == resume_meta->end() || given->second != "0";   // older checkpoints: as given
    if (best_step < 0 && !saved_given) return true;
    const std::string saved = resume_meta->at("best_metric");
    if (!explicit_best && saved == "loss") r.best.metric = saved;   // the run's --best-metric loss
    if (saved == "bleu" && !bleu)   // --best-metric bleu would be refused too: say what is missing
        return fail("the run keeps its best checkpoint by dev BLEU, which this resume does not compute (--no-eval-bleu, "
                    "--eval-every 0 or no dev set): resume with dev BLEU at --eval-every, or start a new run");
    if (saved != r.best.metric)
        return fail("the run keeps its best checkpoint by dev " + saved + ", this resume by dev " + r.best.metric +
                    ": resume with --best-metric " + saved);
    if (!explicit_best) r.best.given = saved_given;
    r.best.value = value;
    r.best.step = (int64_t)best_step;
    r.best.evals_since = evals_since;
    return true;
}

// A hash of the training data, as a checkpoint records it (16 hex digits).
static std::string data_hash_text(uint64_t hash) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
    return hex;
}

// --resume: the training data must be the sentences the run trained on, not only sentences of
// the same lengths, which would give the same batches and let the run continue silently on
// others. A checkpoint records a hash of each side's token ids (train_src_ids_hash), so text
// the tokenizer reads alike (CRLF line ends, blanks at a line's ends) resumes; checkpoints of
// earlier versions recorded one of each file's bytes (train_src_hash), checked as such; older
// ones still are not checked.
static bool check_resume_data(const Run& r, const Metadata& meta) {
    const struct { const char* ids_key; uint64_t ids_hash; const char* bytes_key; uint64_t bytes_hash;
                   const std::string& path; } sides[] = {
        {"train_src_ids_hash", r.train.src_ids_hash, "train_src_hash", r.train.src_hash, r.train.src_path},
        {"train_tgt_ids_hash", r.train.tgt_ids_hash, "train_tgt_hash", r.train.tgt_hash, r.train.tgt_path}};
    for (const auto& side : sides) {
        const bool by_ids = meta.count(side.ids_key) > 0;
        auto it = meta.find(by_ids ? side.ids_key : side.bytes_key);
        const std::string here = data_hash_text(by_ids ? side.ids_hash : side.bytes_hash);
        if (it == meta.end() || it->second == here) continue;
        return fail("--resume: " + side.path + " is not the text the run trained on (" +
                    (by_ids ? "its token ids' hash " : "hash of its bytes ") + here + ", the checkpoint's " +
                    it->second + "): resume needs the same training data; to train on this data, start a new "
                    "run from the checkpoint: --init-from " + r.resumed_from + " --out ANOTHER_FOLDER");
    }
    return true;
}

static bool setup_sampler(Run& r, const Metadata* resume_meta) {
    BatchingOptions bo;
    bo.max_src_tokens = bo.max_tgt_tokens = r.opt.max_tokens;
    bo.max_len = r.model.cfg.max_len;
    bo.max_len_ratio = r.opt.max_len_ratio;
    bo.seed = r.opt.seed;
    std::string err;
    if (!r.sampler.build(r.train.pairs, bo, &err)) return fail(err);
    if (!resume_meta) return true;
    if (!check_resume_data(r, *resume_meta)) return false;
    MetaReader in{*resume_meta, ""};
    SamplerPosition pos{0, 0};
    uint64_t fingerprint = 0;
    in.integer<int64_t>("sampler_epoch", &pos.epoch, 0);
    in.integer<int64_t>("sampler_index", &pos.index, 0);
    in.integer("sampler_fingerprint", &fingerprint);
    if (!in.error.empty()) return fail_damaged(r, in.error);
    if (fingerprint != r.sampler.fingerprint())
        return fail("the training data or batching differs from the checkpoint's; resume needs the same data");
    if (!r.sampler.restore(pos, &err)) return fail(err);
    return true;
}

// --resume: log.csv's rows past the resumed step were logged after that checkpoint by a run that
// ended without saving again (kill -9, a full disk); the steps are trained again, so they go,
// and the log holds each step once. False (with a message) when log.csv cannot be rewritten.
static bool drop_rows_past(Run& r, int64_t step) {
    if (!dist_is_root() || !fs::exists(r.path("log.csv"))) return true;
    std::ifstream f(r.path("log.csv"), std::ios::binary);
    std::string line, kept;
    size_t dropped = 0;
    for (bool header = true; std::getline(f, line); header = false) {
        const size_t comma = line.find(',');
        if (!header && comma != std::string::npos && std::atoll(line.c_str() + comma + 1) > step) dropped++;
        else kept += line + "\n";
    }
    if (dropped == 0) return true;
    std::string err;
    if (!write_file_replacing(r.path("log.csv"), kept, &err)) return fail(err);
    std::printf("%s: %zu rows past step %lld (logged after that checkpoint) dropped\n", r.path("log.csv").c_str(),
                dropped, (long long)step);
    return true;
}

// One ./train at a time in a folder: two runs writing one folder's checkpoints, log.csv and
// average would ruin each other's. The lock (flock on DIR/.train.lock, which holds the pid) goes
// with the process however it ends, so a killed run leaves none behind. A file system without
// locks is said, not refused.
static bool lock_out_dir(Run& r) {
    const std::string path = r.path(".train.lock");
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return fail("cannot create " + path + ": " + std::strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int why = errno;
        std::string holder;
        read_file(path, &holder);
        close(fd);
        if (why != EWOULDBLOCK) {
            std::printf("%s: cannot lock (%s): nothing stops another ./train in this folder\n", path.c_str(),
                        std::strerror(why));
            return true;
        }
        holder = holder.substr(0, holder.find_first_not_of("0123456789"));
        return fail("another ./train" + (holder.empty() ? "" : " (pid " + holder + ")") + " is running in " +
                    r.opt.out_dir + ": wait for it to end, or give another --out");
    }
    const std::string pid = std::to_string(getpid()) + "\n";
    if (ftruncate(fd, 0) != 0 || write(fd, pid.data(), pid.size()) != (ssize_t)pid.size()) {
        close(fd);
        return fail("cannot write " + path + ": " + std::strerror(errno));
    }
    r.out_lock = fd;
    return true;
}

// A write cut short (a second Ctrl-C, kill -9, a crash) leaves its temporary file,
// NAME.tmp.PID (toolkit/files.h), beside the run's files: those of the run's own files whose
// process is gone are removed at the next start (the lock says no ./train writes here now).
static void remove_stale_temporaries(const Run& r) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(r.opt.out_dir, ec)) {
        const std::string name = e.path().filename().string();
        const size_t tmp = name.rfind(".tmp.");
        if (tmp == std::string::npos || !e.is_regular_file()) continue;
        const std::string file = name.substr(0, tmp);
        const bool ours = file == "best.safetensors" || file == "average.safetensors" || file == "vocab.bpe" ||
                          file == "log.csv" || file == "curves.svg" ||
                          (file.rfind("ckpt-", 0) == 0 && fs::path(file).extension() == ".safetensors");
        pid_t pid = 0;
        if (!ours || parse_decimal(name.substr(tmp + 5), &pid, "") != Decimal::ok || pid <= 0) continue;
        if (kill(pid, 0) == 0 || errno != ESRCH) continue;   // still running (or not ours to ask)
        if (fs::remove(e.path(), ec))
            std::printf("%s: left by a write that was cut short (process %d is gone), removed\n",
                        e.path().string().c_str(), (int)pid);
    }
}

// The backend the model runs on (--device, --precision); says so when "auto" finds no GPU.
static bool setup_backend(const TrainOptions& opt, Model* m, bool verbose) {
    if (opt.precision == "int8") return fail("--precision int8 is for translation; training runs fp32 or bf16");
    std::string err, note;
    m->backend = make_backend(opt.device, opt.precision, &err, &note);
    if (!m->backend) return fail(err);
    if (verbose && !note.empty()) std::printf("%s\n", note.c_str());
    if (verbose) std::printf("device: %s\n", m->backend->describe().c_str());
    std::fflush(stdout);
    return true;
}

static bool setup(Run& r) {
    std::error_code ec;
    if (!r.opt.init_from.empty() && r.opt.resume)
        return fail("--init-from starts a new run from a checkpoint, --resume continues one: pass only one");
    if (!setup_backend(r.opt, &r.model, !r.opt.quiet)) return false;
    if (r.model.backend->device() == Device::CUDA && r.opt.gpu_time_limit_s >= 0) {
        r.opt.time_limit_s = r.opt.gpu_time_limit_s;
        r.opt.save_every_s = r.opt.gpu_save_every_s >= 0 ? r.opt.gpu_save_every_s : r.opt.save_every_s;
        if (!r.opt.quiet)
            std::printf("budget on the GPU: %s, a checkpoint every %s (--time, --save-every to change)\n",
                        format_duration(r.opt.time_limit_s).c_str(), format_duration(r.opt.save_every_s).c_str());
    }
    fs::create_directories(r.opt.out_dir, ec);
    if (ec) return fail("cannot create " + r.opt.out_dir + ": " + ec.message());
    if (dist_is_root() && !lock_out_dir(r)) return false;
    if (dist_is_root()) remove_stale_temporaries(r);
    if (r.opt.resume && !restore_data_options(r)) return false;
    if (!ensure_corpus(r)) return false;
    Metadata meta;
    std::vector<std::string> ckpts = list_checkpoints(r.opt.out_dir);
    const bool resuming = r.opt.resume && !ckpts.empty();
    if (r.opt.resume && ckpts.empty()) std::printf("--resume: no checkpoint in %s, starting afresh\n", r.opt.out_dir.c_str());
    if (!r.opt.resume && !ckpts.empty())
        return fail(r.opt.out_dir + " already holds checkpoints: pass --resume to continue that run, or another --out");
    // A new run starts its own log.csv (csv_row) and best.safetensors: ones in --out were left by
    // a run that ended before its first checkpoint (else this one would be refused or resume it).
    // A best.safetensors this run reads (--init-from, --vocab) stays: the run's first best
    // replaces it.
    if (!resuming && dist_is_root() && fs::exists(r.path("log.csv")))
        std::printf("%s: left by an earlier run, started afresh\n", r.path("log.csv").c_str());
    const bool best_is_input = same_file(r.path("best.safetensors"), r.opt.init_from) ||
                               same_file(r.path("best.safetensors"), r.opt.vocab_file);
    if (!resuming && dist_is_root() && fs::exists(r.path("best.safetensors")) && !best_is_input) {
        if (!fs::remove(r.path("best.safetensors"), ec))
            return fail("cannot remove " + r.path("best.safetensors") + ": " + ec.message());
        std::printf("%s: left by an earlier run, removed\n", r.path("best.safetensors").c_str());
    }
    if (resuming) {
        std::string err;
        if (!checkpoint_load(&r.model, ckpts.back(), &meta, &err)) return fail(err);
        if (!meta.count("sampler_fingerprint"))
            return fail(ckpts.back() + " holds parameters only, no training state (Adam's, the data position): "
                        "an average or a copy? --resume continues from a checkpoint ./train wrote");
        r.resumed_from = ckpts.back();
        if (!check_resume_conflicts(r, meta) || !check_resume_config(r) || !restore_options(r, meta)) return false;
        std::printf("Resuming from %s (step %lld)\n", ckpts.back().c_str(), (long long)r.model.step);
        if (!drop_rows_past(r, r.model.step)) return false;
    }
    const bool fine_tuning = !resuming && !r.opt.init_from.empty();
    if (fine_tuning && !setup_init_from(r, &meta)) return false;
    if (!setup_tokenizer(r, resuming || fine_tuning ? &meta : nullptr)) return false;
    bool have_train = false;
    if (!load_split(r, "train", true, &r.train, &have_train)) return false;
    if (!load_split(r, "dev", false, &r.dev, &r.have_dev)) return false;
    if (!load_split(r, "test", false, &r.test, &r.have_test)) return false;
    if (!resuming && !fine_tuning) {
        r.opt.cfg.vocab = r.tok.vocab_size();
        std::string bad = config_error(r.opt.cfg);
        if (!bad.empty()) return fail("config: " + bad);
        model_init(&r.model, r.opt.cfg, r.opt.seed);
    }
    if (!setup_sampler(r, resuming ? &meta : nullptr)) return false;
    if (!setup_validation(r, resuming ? &meta : nullptr)) return false;
    r.last_saved_step = r.model.step;
    return true;
}

// Data parallelism (toolkit/distributed.h): the step divides among the ranks, and every rank
// starts from the same state.
static bool setup_data_parallel(Run& r) {
    std::string err;
    if (!DataParallelStep::check_accum(r.opt.accum, &err)) {
        r.fail_status = 2;   // a usage error, as a contradicting --accum (check_resume_conflicts)
        return fail(err);
    }
    if (!dist_check_replicas(r.model, r.sampler.fingerprint(), &err)) return fail(err);
    if (dist_active() && !r.opt.quiet) std::printf("%s\n", dist_describe(r.model).c_str());
    return true;
}

// The longest dev pair (in positions, </s> included) the dev loss takes: with sinusoids every
// pair up to ./translate's 1,024 tokens (beyond, a single line's attention would take gigabytes),
// with learned positions the table's size.
static int dev_loss_max_len(const Run& r) {
    if (r.model.cfg.learned_pos) return r.model.cfg.max_len;
    int longest = 0;
    for (const SentencePair& p : r.dev.pairs) longest = std::max(longest, (int)std::max(p.src.size(), p.tgt.size()) + 1);
    return std::max(r.model.cfg.max_len, std::min(longest, kEvalSourceTokens + 1));
}

static void print_summary(const Run& r) {
    if (r.opt.quiet) return;
    config_print(r.model.cfg, r.model.layout.total);
    char ratio[96] = "";
    if (r.opt.max_len_ratio > 0)
        std::snprintf(ratio, sizeof ratio, ", %zu as one side over %g times the other's length",
                      r.sampler.skipped_ratio(), r.opt.max_len_ratio);
    // dev pairs past dev_loss_max_len are left out of the dev loss, said here
    size_t dev_past = 0;
    const int dev_max = dev_loss_max_len(r);
    for (const SentencePair& p : r.dev.pairs) dev_past += std::max(p.src.size(), p.tgt.size()) + 1 > (size_t)dev_max;
    char dev_note[96] = "";
    if (dev_past > 0 && r.model.cfg.learned_pos)
        std::snprintf(dev_note, sizeof dev_note, " (%zu past the learned position table: not in the dev loss)", dev_past);
    else if (dev_past > 0)
        std::snprintf(dev_note, sizeof dev_note, " (%zu longer than %d tokens: not in the dev loss)", dev_past, dev_max - 1);
    std::printf("data: %zu train pairs (%zu skipped as longer than %d tokens%s, %zu empty), %zu dev%s, %zu test\n",
                r.sampler.pairs_kept(), r.sampler.skipped_long(), r.model.cfg.max_len - 1, ratio,   // + </s>
                r.train.skipped_empty, r.dev.pairs.size(), dev_note, r.test.pairs.size());
    const std::string data = fs::absolute(r.opt.data_dir).string() + r.opt.src_lang + r.opt.tgt_lang;
    if (invalid_utf8_at(data) >= 0)
        std::printf("note: --data, --src or --tgt is not UTF-8: checkpoints cannot record it (their header is "
                    "UTF-8); give it again with --resume\n");
    std::printf("batches: %zu per epoch, <= %d padded tokens per side, %d per step; lr_scale %g, warmup %d\n",
                r.sampler.batches_per_epoch(), r.opt.max_tokens, r.opt.accum, r.opt.lr_scale, r.opt.warmup);
    std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// Logging, evaluation, checkpoints
// ---------------------------------------------------------------------------------------------
// Appends one row to out/log.csv (a new run's first row starts the file afresh, a resumed run's
// continues it); false (with a message) when it cannot be written.
static bool csv_row(Run& r, const char* event, double loss, double lr, double dev_loss, double bleu_dev,
                    double bleu_test) {
    if (!dist_is_root()) return true;   // data parallelism: rank 0 alone writes
    if (!r.csv) {
        const bool fresh = r.resumed_from.empty() || !fs::exists(r.path("log.csv"));
        r.csv = std::fopen(r.path("log.csv").c_str(), fresh ? "w" : "a");
        if (!r.csv) return fail("cannot open " + r.path("log.csv") + ": " + std::strerror(errno));
        if (fresh) std::fprintf(r.csv, "event,step,epoch,train_loss,lr,dev_loss,bleu_dev,bleu_test,elapsed_s\n");
    }
    // 9 significant digits: a warmup's learning rate (1.7e-7 at step 1 of the base model) had
    // been written with 6 decimals, as 0.000000
    auto num = [](double v) { return std::isnan(v) ? std::string() : printed("%.9g", v); };
    SamplerPosition p = r.sampler.position();
    double epoch = p.epoch + (double)p.index / std::max<size_t>(1, r.sampler.batches_per_epoch());
    std::fprintf(r.csv, "%s,%lld,%.4f,%s,%s,%s,%s,%s,%.1f\n", event, (long long)r.model.step, epoch,
                 num(loss).c_str(), num(lr).c_str(), num(dev_loss).c_str(), num(bleu_dev).c_str(),
                 num(bleu_test).c_str(), r.elapsed());
    if (std::fflush(r.csv) != 0 || std::ferror(r.csv))
        return fail("cannot write " + r.path("log.csv") + ": " + std::strerror(errno));
    return true;
}

// ok: false when the lines could not be read or scored (said on stderr: the run then exits 1).
struct Scores { double bleu = NAN; std::string line; double seconds = 0; size_t sentences = 0; bool ok = true; };

// What a source line cut for translation (translate_lines) was longer than: the learned position
// table, or the 1,024 tokens ./translate takes.
static std::string cut_limit(const Model& m) {
    if (eval_source_limit(&m) < kEvalSourceTokens) return "the learned position table (" + std::to_string(m.cfg.max_len) + ")";
    return std::to_string(kEvalSourceTokens) + " tokens";
}

// Translates src with `beam` (1: greedy) and scores the output against ref with corpus BLEU;
// with_line: also the report's line, BLEU's with chrF and TER beside it.
static Scores score_lines(Model* m, const Tokenizer& tok, const std::vector<std::string>& src,
                          const std::vector<std::string>& ref, int beam, const TrainOptions& opt,
                          bool with_line) {
    Scores s;
    DecodeOptions d;
    d.beam = beam;
    d.alpha = opt.alpha;
    double t0 = now_s();
    size_t cut = 0;   // lines longer than a learned position table, translated from its first part
    std::vector<std::string> hyp = translate_lines(m, tok, src, d, opt.decode_batch_tokens, &cut);
    s.seconds = now_s() - t0;
    s.sentences = src.size();
    try {
        BleuStats b = corpus_bleu(hyp, ref);
        s.bleu = b.bleu;
        if (with_line)
            s.line = format_bleu(b) + ", " + format_chrf(corpus_chrf(hyp, ref)) + ", " +
                     format_ter(corpus_ter_multi(hyp, {ref})) +
                     (cut ? " [" + std::to_string(cut) + (cut == 1 ? " source line" : " source lines") + " longer than " + cut_limit(*m) +
                                (cut == 1 ? ": its first " : ": their first ") + std::to_string(eval_source_limit(m)) + " tokens translated]"
                          : "");
    } catch (const std::exception& e) {
        s.ok = fail(std::string("BLEU: ") + e.what());
    }
    return s;
}

// Redraws out/curves.svg from out/log.csv (toolkit/curves.h); false (with a message) when it
// cannot be written.
static bool redraw_curves(Run& r) {
    if (!dist_is_root()) return true;   // data parallelism: rank 0 alone writes
    if (!fs::exists(r.path("log.csv"))) return true;   // no row logged yet: nothing to draw
    std::string err;
    return draw_training_curves(r.path("log.csv"), r.path("curves.svg"), &err) || fail(err);
}

// Mean label-smoothed loss over the dev set's non-pad labels (no dropout).
static double dev_loss(Run& r) {
    if (!r.have_dev || r.dev.pairs.empty() || !dist_is_root()) return NAN;
    BatchSampler s;
    BatchingOptions bo;
    bo.max_len = dev_loss_max_len(r);
    bo.max_src_tokens = bo.max_tgt_tokens = std::max(r.opt.max_tokens, bo.max_len);
    bo.shuffle = false;
    std::string err;
    if (!s.build(r.dev.pairs, bo, &err)) return NAN;
    double sum = 0, tokens = 0;
    for (size_t i = 0; i < s.batches_per_epoch(); i++) {
        const Batch& b = s.next();
        sum += (double)model_forward(&r.model, b, false) * b.tgt_tokens;
        tokens += b.tgt_tokens;
    }
    return tokens > 0 ? sum / tokens : NAN;
}


// The training state a checkpoint keeps beyond the existing options: Adam's betas and
// epsilon, and the best evaluation (BestState).
static void add_run_state(const Run& r, Metadata* meta) {
    (*meta)["adam_beta1"] = exact_text(r.opt.adam.beta1);
    (*meta)["adam_beta2"] = exact_text(r.opt.adam.beta2);
    (*meta)["adam_eps"] = exact_text(r.opt.adam.eps);
    (*meta)["best_metric"] = r.best.metric;
    (*meta)["best_metric_given"] = r.best.given ? "1" : "0";
    (*meta)["best_value"] = exact_text(r.best.value);
    (*meta)["best_step"] = std::to_string(r.best.step);
    (*meta)["evals_since_best"] = std::to_string(r.best.evals_since);
}

static bool save_checkpoint(Run& r) {
    if (!dist_is_root()) { r.last_saved_step = r.model.step; return true; }   // rank 0 alone writes
    char name[64];
    std::snprintf(name, sizeof name, "ckpt-%08lld.safetensors", (long long)r.model.step);
    SamplerPosition p = r.sampler.position();
    Metadata meta = {
        {"tokenizer", r.tok.serialize()},
        {"sampler_epoch", std::to_string(p.epoch)},
        {"sampler_index", std::to_string(p.index)},
        {"sampler_fingerprint", std::to_string(r.sampler.fingerprint())},
        {"train_src_ids_hash", data_hash_text(r.train.src_ids_hash)},   // what --resume checks the data against
        {"train_tgt_ids_hash", data_hash_text(r.train.tgt_ids_hash)},
        {"train_src_hash", data_hash_text(r.train.src_hash)},   // (the bytes': what older versions check)
        {"train_tgt_hash", data_hash_text(r.train.tgt_hash)},
        {"time_used", std::to_string(r.elapsed())},
        {"max_tokens", std::to_string(r.opt.max_tokens)},
        {"accum", std::to_string(r.opt.accum)},
        {"warmup", std::to_string(r.opt.warmup)},
        {"seed", std::to_string(r.opt.seed)},
        {"lr_scale", exact_text(r.opt.lr_scale)},
        {"clip_norm", exact_text(r.opt.clip_norm)},
        {"max_len_ratio", exact_text(r.opt.max_len_ratio)},
        // what --resume takes when not given again: the data and the budget
        {"data_dir", fs::absolute(r.opt.data_dir).lexically_normal().string()},
        {"src_lang", r.opt.src_lang},
        {"tgt_lang", r.opt.tgt_lang},
        {"time_limit", exact_text(r.opt.time_limit_s)},
        {"max_steps", std::to_string(r.opt.max_steps)},
        {"max_epochs", std::to_string(r.opt.max_epochs)},
        {"eval_every", std::to_string(r.opt.eval_every_steps)},
        {"eval_lines", std::to_string(r.opt.eval_lines)},
        {"eval_beam", std::to_string(r.opt.eval_beam)},
        {"early_stopping", std::to_string(r.opt.early_stopping)},
        {"eval_bleu", r.opt.eval_bleu ? "1" : "0"},
        {"save_every", exact_text(r.opt.save_every_s)},
        {"save_every_steps", std::to_string(r.opt.save_every_steps)},
        {"keep", std::to_string(r.opt.keep)},
        {"average", std::to_string(r.opt.average)},
        {"log_every", exact_text(r.opt.log_every_s)},
    };
    if (r.vocab_learned) meta["vocab_size"] = std::to_string(r.opt.vocab_size);   // what BPE was asked for
    add_run_state(r, &meta);
    // A safetensors header is UTF-8 JSON: a data folder or language named otherwise is not
    // recorded (--resume then needs it given again; said at start), rather than a header that
    // other readers refuse.
    for (const char* key : {"data_dir", "src_lang", "tgt_lang"})
        if (invalid_utf8_at(meta[key]) >= 0) meta.erase(key);
    std::string err;
    if (!checkpoint_save(r.model, r.path(name), meta, true, &err)) {
        std::vector<std::string> kept = list_checkpoints(r.opt.out_dir);
        return fail(err + "; training stops here. " +
                    (kept.empty() ? std::string("No earlier checkpoint exists")
                                  : "The previous checkpoint " + kept.back() + " is intact") +
                    " (free some space, then continue with --resume)");
    }
    r.last_saved_step = r.model.step;
    std::vector<std::string> all = list_checkpoints(r.opt.out_dir);
    for (size_t i = 0; i + (size_t)std::max(1, r.opt.keep) < all.size(); i++) fs::remove(all[i]);
    if (!r.opt.quiet) std::printf("saved %s\n", r.path(name).c_str());
    return true;
}

// Keeps value when it improves on the best by the run's metric: best.safetensors (written
// atomically: a temporary file renamed) gets the parameters; else one more evaluation
// without improvement. NAN (no value) changes nothing.
static bool update_best(Run& r, double value) {
    BestState& b = r.best;
    if (std::isnan(value)) return true;
    const bool improved = std::isnan(b.value) || (b.metric == "bleu" ? value > b.value : value < b.value);
    if (!improved) {
        b.evals_since++;
        return true;
    }
    b.value = value;
    b.step = r.model.step;
    b.evals_since = 0;
    Metadata meta = {{"tokenizer", r.tok.serialize()}, {"best_metric", b.metric}, {"best_value", exact_text(value)}};
    std::string err;
    if (!checkpoint_save(r.model, r.path("best.safetensors"), meta, false, &err)) return fail(err);
    return true;
}

static bool early_stop_reached(const Run& r) {
    return r.opt.early_stopping > 0 && r.best.evals_since >= r.opt.early_stopping;
}

// Validation at an --eval-every step: dev loss and dev BLEU (its subset, --eval-beam) with the
// parameters being trained, one progress line, one log.csv row, the best checkpoint.
static bool evaluate(Run& r, double lr) {
    // Data parallelism: rank 0 alone evaluates and keeps best.safetensors; its early-stopping
    // decision reaches the other ranks through budget_left's agreement.
    if (!dist_is_root()) return true;
    double dl = dev_loss(r);
    Scores bleu;
    if (!r.dev_src.empty()) bleu = score_lines(&r.model, r.tok, r.dev_src, r.dev_ref, r.opt.eval_beam, r.opt, false);
    if (!bleu.ok) return false;
    if (!csv_row(r, "dev", NAN, lr, dl, bleu.bleu, NAN) || !redraw_curves(r)) return false;
    if (!update_best(r, r.best.metric == "bleu" ? bleu.bleu : dl)) return false;
    if (r.opt.quiet || (std::isnan(dl) && std::isnan(bleu.bleu))) return true;   // no dev set
    if (std::isnan(dl)) std::printf("step %6lld | dev loss -", (long long)r.model.step);   // no pair in it: the data line
    else std::printf("step %6lld | dev loss %.4f", (long long)r.model.step, dl);
    if (!std::isnan(bleu.bleu))
        std::printf(" | dev BLEU %.2f (%zu lines, %s, %.1f s)", bleu.bleu, bleu.sentences,
                    r.opt.eval_beam == 1 ? "greedy" : ("beam " + std::to_string(r.opt.eval_beam)).c_str(),
                    bleu.seconds);
    const char* unit = r.best.metric == "bleu" ? "BLEU" : "loss";
    if (r.best.step == r.model.step) std::printf(" | best dev %s -> best.safetensors\n", unit);
    else std::printf(" | best dev %s %.4g at step %lld (%lld evaluation%s ago)\n", unit, r.best.value,
                     (long long)r.best.step, (long long)r.best.evals_since, r.best.evals_since == 1 ? "" : "s");
    return true;
}

// ---------------------------------------------------------------------------------------------
// The loop
// ---------------------------------------------------------------------------------------------
struct StepResult { double loss; double lr; size_t tokens; double norm; bool skipped; };

// One Adam step over `accum` batches; the loss gradient is a mean over all their labels.
static StepResult train_step(Run& r) {
    if (r.model.backend->device() == Device::CPU) govern_threads();   // toolkit/thread_governor.h
    std::vector<Batch> micro;
    double labels = 0;
    size_t tokens = 0;
    for (int a = 0; a < std::max(1, r.opt.accum); a++) {
        micro.push_back(r.sampler.next());
        labels += micro.back().tgt_tokens;
        tokens += micro.back().src_tokens + micro.back().tgt_tokens;
    }
    model_zero_grad(&r.model);
    double loss_sum = 0;
    r.dp.begin(&r.model, micro.size());   // this rank's batches; one process: all of them
    for (size_t i = r.dp.first(); i < r.dp.last(); i++) {
        const Batch& b = micro[i];
        r.dp.before_batch(i);
        loss_sum += (double)model_forward_backward(&r.model, b, labels) * b.tgt_tokens;
        r.dp.after_batch(i);
    }
    loss_sum = r.dp.end(loss_sum);         // summed over the ranks (gradients and loss)
    double lr = learning_rate(r.model.cfg, r.model.step + 1, r.opt.lr_scale, r.opt.warmup);
    if (std::find(r.poison_steps.begin(), r.poison_steps.end(), ++r.attempts) != r.poison_steps.end())
        r.model.backend->scale(r.model.grads, r.model.layout.total, NAN);   // test-only
    // The loss is on the host already; the gradient norm is the one clipping needs (without
    // clipping, one reduction over the gradient buffer more per step).
    double loss = loss_sum / std::max(1.0, labels), norm = grad_norm(&r.model);
    if (!std::isfinite(loss) || !std::isfinite(norm)) return {loss, lr, tokens, norm, true};
    adam_update(&r.model, lr, r.opt.clip_norm, norm, r.opt.adam);
    return {loss, lr, tokens, norm, false};
}

// A skipped step: says so on stdout and in log.csv ("nonfinite" rows); false when the run
// must stop (too many in a row: exit 3, the last checkpoint on disk kept as it is).
static bool note_nonfinite(Run& r, const StepResult& s) {
    r.nonfinite_in_a_row++;
    r.nonfinite_total++;
    std::printf("step %6lld | non-finite loss %g or gradient norm %g: step skipped (%lld in a row, %lld in all)\n",
                (long long)r.model.step + 1, s.loss, s.norm, (long long)r.nonfinite_in_a_row,
                (long long)r.nonfinite_total);
    std::fflush(stdout);
    if (!csv_row(r, "nonfinite", s.loss, s.lr, NAN, NAN, NAN)) return false;
    if (r.nonfinite_in_a_row < r.opt.max_nonfinite) return true;
    std::vector<std::string> kept = list_checkpoints(r.opt.out_dir);
    r.fail_status = 3;
    return fail(std::to_string(r.nonfinite_in_a_row) + " non-finite steps in a row (--max-nonfinite " +
                std::to_string(r.opt.max_nonfinite) + "): stopping without saving; " +
                (kept.empty() ? std::string("no checkpoint was written yet")
                              : "the last good checkpoint is " + kept.back()) +
                " (lower --lr-scale, set --clip-norm, or check the data)");
}

// Test-only: TRAIN_TEST_NONFINITE=N[,N...] makes the gradient NaN at the N-th step this process
// tries (1-based, skipped steps counted).
static std::vector<int64_t> poison_steps_from_env() {
    std::vector<int64_t> steps;
    const char* env = std::getenv("TRAIN_TEST_NONFINITE");
    for (const char* p = env; p && *p;) {
        char* end = nullptr;
        steps.push_back(std::strtoll(p, &end, 10));
        if (end == p) break;
        p = *end == ',' ? end + 1 : end;
    }
    return steps;
}

static bool budget_left_here(const Run& r) {
    if (r.opt.max_steps > 0 && r.model.step >= r.opt.max_steps) return false;
    if (r.opt.time_limit_s > 0 && r.elapsed() >= r.opt.time_limit_s) return false;
    if (r.opt.max_epochs > 0 && r.sampler.position().epoch >= r.opt.max_epochs) return false;
    if (early_stop_reached(r)) return false;
    return !g_stop_requested;
}

// Every rank stops at the same step when any one must (its clock, a signal).
static bool budget_left(const Run& r) { return dist_all_agree(budget_left_here(r)); }

static double remaining_s(const Run& r, double step_time) {
    double by_time = r.opt.time_limit_s > 0 ? r.opt.time_limit_s - r.elapsed() : INFINITY;
    double by_steps = r.opt.max_steps > 0 ? (r.opt.max_steps - r.model.step) * step_time : INFINITY;
    SamplerPosition p = r.sampler.position();
    double batches_left = (double)(r.opt.max_epochs - p.epoch) * r.sampler.batches_per_epoch() - p.index;
    double by_epochs = r.opt.max_epochs > 0 ? batches_left / std::max(1, r.opt.accum) * step_time : INFINITY;
    return std::min({by_time, by_steps, by_epochs});
}

// Data parallelism: the ranks compare their models (dist_check_replicas: a hash of the
// parameters, the step, ...) every --eval-every steps tried, where they were compared at the
// start and the end alone: ranks that part (a fault, a step one skips) stop there, not after
// the whole run. By steps tried, the same count on every rank (the step itself could part, and
// the ranks would then wait in different collectives). A parameter download and hash, rarer
// than the evaluation beside it.
static bool replicas_agree_midway(Run& r) {
    if (!dist_active() || r.opt.eval_every_steps <= 0 || r.attempts % r.opt.eval_every_steps != 0) return true;
    std::string err;
    if (!dist_check_replicas(r.model, r.sampler.fingerprint(), &err)) return fail(err);
    return true;
}

static bool train_loop(Run& r) {
    double last_log = now_s(), last_save = now_s(), window_loss = 0, window_tokens = 0;
    int window_steps = 0;
    double window_start = now_s();
    if (r.opt.resume && r.model.step > 0 && !budget_left_here(r) && !g_stop_requested && !early_stop_reached(r) &&
        !r.opt.quiet)
        std::printf("--resume: the run's budget is spent (step %lld, %s used): nothing to train; give a larger "
                    "--time, --max-steps or --max-epochs to go on\n", (long long)r.model.step,
                    format_duration(r.elapsed()).c_str());
    while (budget_left(r)) {
        StepResult s = train_step(r);
        if (!replicas_agree_midway(r)) return false;
        if (s.skipped) {
            if (!note_nonfinite(r, s)) return false;
            continue;
        }
        r.nonfinite_in_a_row = 0;
        window_loss += s.loss;
        window_tokens += s.tokens;
        window_steps++;
        const int64_t step = r.model.step;
        if (!r.opt.quiet && now_s() - last_log >= r.opt.log_every_s) {
            double dt = now_s() - window_start;
            SamplerPosition p = r.sampler.position();
            double epoch = p.epoch + (double)p.index / std::max<size_t>(1, r.sampler.batches_per_epoch());
            double left = remaining_s(r, dt / window_steps);
            std::printf("step %6lld | epoch %6.2f | loss %.4f | lr %.2e | %7.0f tok/s | %s elapsed | %s left\n",
                        (long long)step, epoch, window_loss / window_steps, s.lr, window_tokens / dt,
                        format_duration(r.elapsed()).c_str(), std::isinf(left) ? "?" : format_duration(left).c_str());
            if (std::fflush(stdout) != 0) return fail(std::string("cannot write to standard output: ") + std::strerror(errno));
            if (!csv_row(r, "train", window_loss / window_steps, s.lr, NAN, NAN, NAN)) return false;
            window_loss = window_tokens = 0;
            window_steps = 0;
            window_start = last_log = now_s();
        }
        if (r.opt.eval_every_steps > 0 && step % r.opt.eval_every_steps == 0 && !evaluate(r, s.lr)) return false;
        bool due = (r.opt.save_every_steps > 0 && step % r.opt.save_every_steps == 0) ||
                   (r.opt.save_every_s > 0 && now_s() - last_save >= r.opt.save_every_s);
        if (due) {
            if (!save_checkpoint(r)) return false;
            last_save = now_s();
        }
    }
    if (r.last_saved_step != r.model.step && !save_checkpoint(r)) return false;
    if (early_stop_reached(r) && !r.opt.quiet)
        std::printf("early stopping: dev %s did not improve in %lld evaluation%s; best %.4g at step %lld (%s)\n",
                    r.best.metric.c_str(), (long long)r.best.evals_since, r.best.evals_since == 1 ? "" : "s",
                    r.best.value, (long long)r.best.step,
                    r.path("best.safetensors").c_str());
    return true;
}

// ---------------------------------------------------------------------------------------------
// Averaging and the final evaluation
// ---------------------------------------------------------------------------------------------

static Scores score(Model* m, const Tokenizer& tok, const std::string& src_path, const std::string& ref_path,
                    int beam, const TrainOptions& opt) {
    std::vector<std::string> src, ref;
    std::string err;
    if (read_text_lines(src_path, &src, &err) && read_text_lines(ref_path, &ref, &err) && src.size() != ref.size())
        err = src_path + " has " + std::to_string(src.size()) + " lines, " + ref_path + " " + std::to_string(ref.size()) +
              " (changed while the run trained?): not scored";   // read as pairs at the start
    if (!err.empty()) {
        Scores none;
        none.ok = fail(err);
        return none;
    }
    return score_lines(m, tok, src, ref, beam, opt, true);
}

// One line of the final report; false (said already) when the scores could not be had.
static bool report(const char* what, const Scores& s) {
    if (!s.ok) return false;
    std::printf("%-34s %s  (%zu sentences in %.1f s, %.1f sent/s)\n", what, s.line.c_str(), s.sentences,
                s.seconds, s.sentences / std::max(1e-9, s.seconds));
    std::fflush(stdout);
    return true;
}

// Loads checkpoint `path` into the run's model for decoding (its own backend: no second one).
static bool load_for_decoding(Run& r, const std::string& path) {
    std::string err;
    if (!checkpoint_load(&r.model, path, nullptr, &err, false)) return fail(err);
    model_pack_weights(&r.model);
    return true;
}

// Test BLEU of best.safetensors, when the run kept one.
static bool report_best(Run& r) {
    if (r.best.step < 0 || !fs::exists(r.path("best.safetensors"))) return true;
    if (!load_for_decoding(r, r.path("best.safetensors"))) return false;
    return report(("test, best (dev " + r.best.metric + "), beam").c_str(),
                  score(&r.model, r.tok, r.data("test", r.opt.src_lang), r.data("test", r.opt.tgt_lang), r.opt.beam, r.opt));
}

static bool final_evaluation(Run& r) {
    const int64_t last_step = r.model.step;   // the evaluations load other checkpoints' steps
    std::vector<std::string> ckpts = list_checkpoints(r.opt.out_dir);
    std::string model_path = ckpts.back();
    // average.safetensors (./translate's default model) holds parameters only: the average of
    // the last --average checkpoints, or the last checkpoint's parameters alone (0, 1, or one)
    std::vector<std::string> last(ckpts.end() - std::min<size_t>(ckpts.size(), std::max(1, r.opt.average)), ckpts.end());
    if (r.opt.average > 1 && last.size() < (size_t)r.opt.average)   // --keep the cause only when below
        std::printf("--average %d: only %zu checkpoint%s in %s%s\n", r.opt.average, last.size(),
                    last.size() == 1 ? "" : "s", r.opt.out_dir.c_str(),
                    r.opt.keep < r.opt.average ? (" (--keep " + std::to_string(r.opt.keep) + ")").c_str() : "");
    std::string err;
    if (!average_checkpoints(last, r.path("average.safetensors"), &err)) return fail(err);
    if (last.size() > 1) {
        model_path = r.path("average.safetensors");
        std::printf("averaged %zu checkpoints -> %s\n", last.size(), model_path.c_str());
    } else {
        std::printf("%s: the parameters of %s (no average)\n", r.path("average.safetensors").c_str(), last[0].c_str());
    }
    double dl = dev_loss(r);
    if (!std::isnan(dl)) std::printf("final dev loss (last checkpoint): %.4f\n", dl);
    if (!r.opt.final_eval) return redraw_curves(r);
    // Decoding from here, all of it on the run's model and backend: its training state (the
    // gradients, Adam's, the activations) goes first; the model holds the last checkpoint's
    // parameters, then the average and best.safetensors are loaded into it in turn, so that the
    // evaluations take one model's memory (on a GPU filled by --max-tokens, a second model and
    // backend beside the training state found none left).
    model_release_training(&r.model);
    model_pack_weights(&r.model);
    // Without an average (--average 0 or 1, or one checkpoint) the model is the last checkpoint,
    // and the report says so: its lines say "last checkpoint", not "averaged", once each.
    const bool averaged = model_path != ckpts.back();
    const std::string which = averaged ? "averaged" : "last checkpoint";
    Scores last_beam;
    if (r.have_test && averaged)
        last_beam = score(&r.model, r.tok, r.data("test", r.opt.src_lang), r.data("test", r.opt.tgt_lang), r.opt.beam, r.opt);
    if (averaged && !load_for_decoding(r, model_path)) return false;
    std::printf("BLEU, chrF and TER, sacreBLEU's conventions (signatures %s; %s; %s):\n",
                bleu_signature().c_str(), chrf_signature().c_str(), ter_signature().c_str());
    Scores dev_avg, test_avg;
    if (r.have_dev) {
        dev_avg = score(&r.model, r.tok, r.data("dev", r.opt.src_lang), r.data("dev", r.opt.tgt_lang), r.opt.beam, r.opt);
        if (!report(("dev, " + which + ", beam").c_str(), dev_avg)) return false;
    }
    if (r.have_test) {
        test_avg = score(&r.model, r.tok, r.data("test", r.opt.src_lang), r.data("test", r.opt.tgt_lang), r.opt.beam, r.opt);
        if (!report(("test, " + which + ", beam").c_str(), test_avg) ||
            !report(("test, " + which + ", greedy").c_str(), score(&r.model, r.tok, r.data("test", r.opt.src_lang), r.data("test", r.opt.tgt_lang), 1, r.opt)) ||
            (averaged && !report("test, last checkpoint, beam", last_beam)) || !report_best(r))
            return false;
    }
    r.model.step = last_step;   // log.csv's final row: the step training ended at
    return csv_row(r, "final", NAN, NAN, dl, dev_avg.bleu, test_avg.bleu) && redraw_curves(r);
}

// A run (new, or fine-tuning) that ended without completing a step: every step it tried was
// skipped as non-finite until its budget ended (--max-nonfinite above the steps it had), or the
// budget ended before the first step (a --time shorter than a clock's tick or two). Nothing was
// saved: nothing to average or evaluate (this had read past the empty list of checkpoints and
// crashed). Exit 3, as the non-finite stop; 1 for a budget.
static int no_step_completed(Run& r) {
    r.fail_status = r.nonfinite_total > 0 ? 3 : 1;
    if (r.nonfinite_total > 0)
        fail("no step completed: all " + std::to_string(r.nonfinite_total) + " tried had a non-finite loss or "
             "gradient and were skipped; nothing saved (lower --lr-scale, set --clip-norm, or check the data)");
    else
        fail("no step completed within the budget; nothing saved (give a larger --time)");
    return r.fail_status;
}

int run_training(TrainOptions opt) {
    Run r;
    r.opt = opt;
    r.poison_steps = poison_steps_from_env();
    // A file-size limit (ulimit -f) makes a write fail with EFBIG, reported like a full disk,
    // instead of killing the process with SIGXFSZ in the middle of a checkpoint.
    std::signal(SIGXFSZ, SIG_IGN);
    r.opt.accum *= dist_size();   // batches per global step (a resume takes the checkpoint's)
    if (!dist_in_rank_order([&] { return setup(r); })) return r.fail_status;
    if (!setup_data_parallel(r)) return r.fail_status;
    print_summary(r);
    g_signal_quiet = !dist_is_root();
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    r.start = now_s();
    bool ok = train_loop(r);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    if (!ok) return r.fail_status;
    // Data parallelism: a signal that reached some of the ranks stopped them all (budget_left),
    // and one that came later, up to the handlers' reset (during rank 0's last save), still counts
    // on every rank: they all end as the interrupted run it is (exit 130, no final evaluation),
    // none with 130 while rank 0 goes on to evaluate. A signal after the reset ends the process.
    const bool interrupted = !dist_all_agree(!g_stop_requested);
    std::string replica_error;
    if (!dist_check_replicas(r.model, r.sampler.fingerprint(), &replica_error)) {
        fail(replica_error);
        return 1;
    }
    if (!opt.quiet)
        std::printf("trained %lld step%s in %s (this run %s)\n", (long long)r.model.step, r.model.step == 1 ? "" : "s",
                    format_duration(r.elapsed()).c_str(), format_duration(now_s() - r.start).c_str());
    if (r.nonfinite_total > 0)
        std::printf("skipped %lld step%s with a non-finite loss or gradient (log.csv: event nonfinite)\n",
                    (long long)r.nonfinite_total, r.nonfinite_total == 1 ? "" : "s");
    if (interrupted) {
        if (r.model.step == 0) std::printf("interrupted before the first step: nothing to resume\n");
        else std::printf("interrupted: checkpoint saved; continue with --resume\n");
        return 130;
    }
    if (r.model.step == 0) return no_step_completed(r);
    if (!dist_is_root()) return 0;   // rank 0 alone evaluates
    if (!opt.quiet || opt.final_eval) return final_evaluation(r) ? 0 : 1;
    return 0;
}
