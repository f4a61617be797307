// cli/train.cpp — ./train: trains the Transformer on parallel text (by default the English ->
// Spanish Bible corpus, built on first use), averages the last checkpoints and reports BLEU.
//
//   ./train                          CPU defaults: N=3, d_model 256, d_ff 1024, h 4, BPE 8,000,
//                                    4,000 + 4,000-token batches, 55 minutes of training
//   ./train --config base --time 2h  the paper's base model
//   ./train --resume                 continue the run in --out exactly where it stopped
//   ./train --init-from CKPT --data DIR --out DIR2   fine-tune a trained model on other data
//   ./train --help                   every option with its range and default
//   mpirun -np 2 ./train             data parallel: 2 processes, each a batch of every step
// Option values are checked by cli/options.h (exit 2); a failed write to stdout, log.csv or a
// checkpoint is an error (exit 1).
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/openmp_wait.h"
#include "cli/options.h"
#include "cli/text_io.h"
#include "tokenizer.h"
#include "toolkit/distributed.h"
#include "toolkit/curves.h"
#include "toolkit/trainer.h"

// Bounds of the model's sizes (the same as config_error's in model/config.cpp).
constexpr int kMaxLayers = 64;
constexpr int kMaxWidth = 1 << 24;
constexpr const char* kModelSection = "Model (paper Table 3)";

// "90s", "8m", "2h", "1.5h" or plain seconds, finite and >= 0; false on anything else.
static bool parse_duration(const std::string& s, double* out) {
    const size_t digits = s.find_first_not_of("0123456789.");
    const std::string number = s.substr(0, digits), unit = digits == std::string::npos ? "" : s.substr(digits);
    char* end = nullptr;
    const double v = std::strtod(number.c_str(), &end);   // all of it a number: not "1.2.3", "."
    if (number.find_first_of("0123456789") == std::string::npos || end != number.c_str() + number.size()) return false;
    double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
    if (scale < 0 || !std::isfinite(v * scale)) return false;
    *out = v * scale;
    return true;
}

static std::string show_duration(double s) {
    if (s <= 0) return "off";
    char buf[32];
    if ((long)s % 3600 == 0) std::snprintf(buf, sizeof buf, "%gh", s / 3600);
    else if ((long)s % 60 == 0) std::snprintf(buf, sizeof buf, "%gm", s / 60);
    else std::snprintf(buf, sizeof buf, "%gs", s);
    return buf;
}

static void add_duration(Options& o, const char* name, double* v, const char* help) {
    o.add_custom(name, "TIME", help, [v] { return show_duration(*v); },
                 [v](const std::string& s) { return parse_duration(s, v); });
}

// What the command line sets: the run's options and the values that become them after parsing.
struct CommandLine {
    TrainOptions t;
    int layers = 0, d_k = 0, d_v = 0;   // 0: the preset's, d_model / h
    std::string preset;
    double beta1, beta2, eps;           // doubles until checked in single precision
    bool no_eval = false, no_eval_bleu = false, redraw_curves = false;
    double dist_timeout_s = 30 * 60;
};

static void add_model_options(Options& o, CommandLine& c) {
    TrainOptions& t = c.t;
    o.section(kModelSection);
    o.add_custom("--config", "NAME", "preset: tiny, small, base, big (the other options override it, before or after)",
                 [&c] { return c.preset.empty() ? std::string("small") : c.preset; },
                 [&c](const std::string& s) {
                     c.preset = s;
                     int vocab = c.t.vocab_size;
                     if (!config_preset(s, &c.t.cfg)) return false;
                     c.t.vocab_size = s == "base" || s == "big" ? 37000 : vocab;
                     return true;
                 });
    o.apply_first("--config");
    o.add("--layers", &c.layers, "N, encoder and decoder layers (0: the preset's)", in_range(0, kMaxLayers));
    o.add("--enc-layers", &t.cfg.n_enc, "encoder layers", in_range(1, kMaxLayers));
    o.add("--dec-layers", &t.cfg.n_dec, "decoder layers", in_range(1, kMaxLayers));
    o.add("--d-model", &t.cfg.d_model, "model width", in_range(1, kMaxWidth));
    o.add("--d-ff", &t.cfg.d_ff, "feed-forward inner width", in_range(1, kMaxWidth));
    o.add("--heads", &t.cfg.n_heads, "attention heads h", in_range(1, kMaxWidth));
    o.add("--d-k", &c.d_k, "query/key size per head (0: d_model / h)", in_range(0, kMaxWidth));
    o.add("--d-v", &c.d_v, "value size per head (0: d_model / h)", in_range(0, kMaxWidth));
    o.add("--dropout", &t.cfg.p_drop, "P_drop on sub-layer outputs and embeddings", in_range_open(0, 1));
    o.add("--attn-dropout", &t.cfg.p_attn_drop, "dropout on attention probabilities", in_range_open(0, 1));
    o.add("--relu-dropout", &t.cfg.p_relu_drop, "dropout on the FFN's ReLU output", in_range_open(0, 1));
    o.add("--label-smoothing", &t.cfg.label_smoothing, "epsilon_ls", in_range_open(0, 1));
    o.add_flag("--pre-ln", &t.cfg.pre_ln, "pre-LN instead of the paper's post-LN");
    o.add_flag("--learned-pos", &t.cfg.learned_pos, "learned positions instead of sinusoids");
    o.add("--max-len", &t.cfg.max_len,
          "positions of the longest training sentence: its tokens and </s> (longer pairs are skipped)",
          in_range(2, kMaxWidth));
    o.add("--vocab-size", &t.vocab_size, "joint BPE vocabulary size",
          in_range(Tokenizer::kFirstChar, Tokenizer::kMaxVocab));
}

static void add_data_options(Options& o, CommandLine& c) {
    TrainOptions& t = c.t;
    o.section("Data and output");
    o.add("--data", &t.data_dir, "folder with train.SRC/train.TGT (+ dev, test)", "DIR");
    o.add("--src", &t.src_lang, "source file suffix", "EXT");
    o.add("--tgt", &t.tgt_lang, "target file suffix", "EXT");
    o.add("--out", &t.out_dir, "folder for checkpoints, vocabulary, log, averaged model", "DIR");
    o.add_flag("--resume", &t.resume, "continue the run in --out from its last checkpoint");
    o.add("--init-from", &t.init_from, "fine-tune: start from this checkpoint's parameters, config and tokenizer "
          "with a fresh optimizer and schedule", "CKPT");
    o.add("--vocab", &t.vocab_file, "train with this vocabulary (a vocab.bpe, or a checkpoint's) instead of learning one", "FILE");
    o.add("--max-len-ratio", &t.max_len_ratio, "skip training pairs whose longer side has more than NUM times the "
          "shorter's tokens, misaligned lines (0: off, else at least 1; Moses' clean-corpus-n uses 9)", at_least(0));
    o.add_flag("--redraw-curves", &c.redraw_curves, "only redraw --out's curves.svg from its log.csv, then exit");
}

static void add_optimisation_options(Options& o, CommandLine& c) {
    TrainOptions& t = c.t;
    o.section("Optimisation");
    o.add("--max-tokens", &t.max_tokens, "padded source (and target) tokens per batch", at_least(1));
    o.add("--accum", &t.accum, "batches per Adam step (gradient accumulation)", at_least(1));
    o.add("--lr-scale", &t.lr_scale, "factor on d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)",
          greater_than(0));
    o.add("--warmup", &t.warmup, "warmup steps", at_least(1));
    o.add("--clip-norm", &t.clip_norm, "global gradient-norm clipping (0: off)", at_least(0));
    o.add("--seed", &t.seed, "initialisation, dropout and batch order");
    o.add("--adam-beta1", &c.beta1, "Adam's beta1", in_range_open(0, 1));
    o.add("--adam-beta2", &c.beta2, "Adam's beta2", in_range_open(0, 1));
    o.add("--adam-eps", &c.eps, "Adam's epsilon", greater_than(0));
    o.add("--max-nonfinite", &t.max_nonfinite,
          "non-finite steps (loss or gradient) in a row that stop the run, exit 3 (each is skipped)",
          at_least(1));
}

static void add_budget_options(Options& o, CommandLine& c) {
    TrainOptions& t = c.t;
    o.section("Budget and bookkeeping");
    o.add("--max-steps", &t.max_steps, "stop after this many steps (0: no limit)", at_least(0));
    o.add("--max-epochs", &t.max_epochs, "stop after this many epochs (0: no limit)", at_least(0));
    add_duration(o, "--time", &t.time_limit_s, "wall-clock training budget, e.g. 90s, 8m, 2h (0: none; on the GPU with the default model: 2m)");
    add_duration(o, "--save-every", &t.save_every_s, "checkpoint interval (on the GPU with the default model: 1m)");
    o.add("--save-every-steps", &t.save_every_steps, "checkpoint interval in steps (0: off)", at_least(0));
    o.add("--keep", &t.keep, "checkpoints kept", at_least(1));
    o.add("--average", &t.average, "last checkpoints averaged at the end into average.safetensors (0, 1: the last one's parameters alone)", at_least(0));
    add_duration(o, "--log-every", &t.log_every_s, "progress line interval");
    o.add("--eval-every", &t.eval_every_steps, "dev loss and BLEU interval in steps (0: only at the end)", at_least(0));
    o.add("--eval-lines", &t.eval_lines, "dev BLEU on the first N dev lines (0: all)", at_least(0));
    o.add("--eval-beam", &t.eval_beam, "beam size for dev BLEU (1: greedy)", in_range(1, 64));
    o.add_flag("--no-eval-bleu", &c.no_eval_bleu, "dev loss only at --eval-every (no dev BLEU)");
    o.add_flag("--eval-bleu", &c.no_eval_bleu, "dev BLEU at --eval-every (the default; on --resume, undoes the run's --no-eval-bleu)",
               false);
    o.add_choice("--best-metric", &t.best_metric, {"bleu", "loss"},
                 "best.safetensors by dev BLEU or dev loss", "bleu when dev BLEU is computed, else loss");
    o.add("--early-stopping", &t.early_stopping, "stop after N evaluations without improvement of the best (0: off)",
          at_least(0));
}

static void add_evaluation_and_device_options(Options& o, CommandLine& c) {
    TrainOptions& t = c.t;
    o.section("Final evaluation");
    o.add("--beam", &t.beam, "beam size for the final BLEU (as ./translate's)", in_range(1, 64));
    o.add("--alpha", &t.alpha, "length penalty exponent", in_range(0, 10));
    o.add_flag("--no-eval", &c.no_eval, "skip translating dev/test at the end");
    o.section("Device");
    o.add_choice("--device", &t.device, {"auto", "cpu", "cuda"}, "auto: the GPU when one is present");
    o.add_choice("--precision", &t.precision, {"fp32", "bf16"},
                 "fp32 (on the GPU TF32 off), or bf16 (on the GPU: bf16 weights and activations; on the CPU: "
                 "the linear layers' products on bf16 operands, fast with Intel AMX or AVX512-BF16)",
                 "fp32 on the CPU, bf16 on the GPU");
    o.section("Data parallelism (mpirun)");
    add_duration(o, "--dist-timeout", &c.dist_timeout_s,
                 "end the job when a step's all-reduce or the set-up waits this long for the other ranks (0: never)");
}

// Options that contradict each other or do not survive conversion to float; "" when fine.
static std::string check_run_options(const Options& o, const CommandLine& c) {
    const TrainOptions& t = c.t;
    if ((float)c.beta1 >= 1 || (float)c.beta2 >= 1)
        return "--adam-beta1 and --adam-beta2 must stay below 1 in single precision (above 1 - 3e-8 they round to 1)";
    if ((float)c.eps <= 0) return "--adam-eps rounds to 0 in single precision (below about 1e-45): give a larger value";
    if (std::isinf((float)c.eps))   // Adam's steps would all be 0, and the checkpoint's "inf" not resume
        return "--adam-eps overflows single precision (above about 3.4e38): give a smaller value";
    if (!t.init_from.empty()) {
        if (t.resume) return "--init-from starts a new run from a checkpoint, --resume continues one: pass only one";
        if (!t.vocab_file.empty()) return "--init-from keeps the checkpoint's tokenizer: drop --vocab";
        for (const std::string& name : o.given_in_section(kModelSection))
            if (name != "--dropout" && name != "--attn-dropout" && name != "--relu-dropout" &&
                name != "--label-smoothing")
                return "--init-from takes the model's config from the checkpoint: drop " + name +
                       " (only --dropout, --attn-dropout, --relu-dropout and --label-smoothing may change)";
    }
    if ((c.d_k == 0 || c.d_v == 0) && t.cfg.d_model % t.cfg.n_heads != 0)
        return "--d-model " + std::to_string(t.cfg.d_model) + " is not a multiple of --heads " +
               std::to_string(t.cfg.n_heads) + " (d_k = d_v = d_model / h, section 3.2.2): change one, or give --d-k and --d-v";
    if (!t.vocab_file.empty() && o.given("--vocab-size"))
        return "--vocab gives the vocabulary: drop --vocab-size";
    if (c.no_eval_bleu && t.best_metric == "bleu") return "--best-metric bleu needs dev BLEU: drop --no-eval-bleu";
    if (t.max_len_ratio > 0 && t.max_len_ratio < 1)
        return "--max-len-ratio compares the longer side with the shorter: 0 (off) or at least 1";
    if (t.early_stopping > 0 && t.eval_every_steps == 0)
        return "--early-stopping counts evaluations: give --eval-every > 0";
    return "";
}

// The parsed command line into the run's options: layer counts, head sizes, Adam's constants,
// what was given, and the GPU's own budget for the default model.
static void finish_run_options(const Options& o, CommandLine& c) {
    TrainOptions& t = c.t;
    t.given = o.given();
    t.given_model = o.given_in_section(kModelSection);
    if (c.layers > 0) t.cfg.n_enc = t.cfg.n_dec = c.layers;
    if (t.cfg.n_heads > 0) {
        t.cfg.d_k = c.d_k > 0 ? c.d_k : t.cfg.d_model / t.cfg.n_heads;
        t.cfg.d_v = c.d_v > 0 ? c.d_v : t.cfg.d_model / t.cfg.n_heads;
    }
    t.final_eval = !c.no_eval;
    t.eval_bleu = !c.no_eval_bleu;
    t.adam = {(float)c.beta1, (float)c.beta2, (float)c.eps};
    t.init_override = {o.given("--dropout"), o.given("--attn-dropout"), o.given("--relu-dropout"),
                       o.given("--label-smoothing")};
    t.build_default_corpus = t.data_dir == "data/corpus/default";
    // The default model on the GPU: its dev BLEU peaks within a minute there, and 55 minutes
    // would overfit (an H100, 2 minutes with a checkpoint a minute: dev BLEU best at step 7,500
    // of 29,000, test BLEU 39.80 averaged, beam 4). Any --time or model option keeps 55 minutes.
    if (!o.given("--time") && t.given_model.empty()) {
        t.gpu_time_limit_s = 2 * 60;
        if (!o.given("--save-every")) t.gpu_save_every_s = 60;
    }
}

static const std::string kDescription =
    "Trains the Transformer of \"Attention Is All You Need\" on parallel text.\n\n" +
    std::string(dist_mpi_built() ? "Data parallel (this build has MPI)"
                                 : "Data parallel (not in this build: no mpicxx when it was built)") +
    ", N processes each taking one batch of every\n"
    "step (--accum per process), gradients summed over the processes before each Adam step:\n"
    "  mpirun -np 2 ./train ...                        one machine (GPUs: one per process)\n"
    "  mpirun -H host1,host2 -np 2 ./train ...         several machines\n"
    "Every process needs ./train and the data at the same path; rank 0 alone writes --out\n"
    "(checkpoints, log.csv, BLEU); --resume reads the checkpoint on every rank, so on several\n"
    "machines --out must be shared (or its last checkpoint copied to the same path).";

int main(int argc, char** argv) {
    guard_stdout("train");
    CommandLine c;
    config_preset("small", &c.t.cfg);   // the CPU default
    c.t.warmup = 1000;
    c.t.time_limit_s = 55 * 60;
    c.beta1 = c.t.adam.beta1, c.beta2 = c.t.adam.beta2, c.eps = c.t.adam.eps;
    Options o("train", kDescription);
    add_model_options(o, c);
    add_data_options(o, c);
    add_optimisation_options(o, c);
    add_budget_options(o, c);
    add_evaluation_and_device_options(o, c);
    if (!o.parse(argc, argv)) return o.exit_code();
    std::string bad = check_run_options(o, c);
    if (!bad.empty()) return o.usage_error(bad);
    if (c.redraw_curves) {
        std::string err, out = c.t.out_dir + "/";
        if (draw_training_curves(out + "log.csv", out + "curves.svg", &err)) return 0;
        std::fprintf(stderr, "train: %s\n", err.c_str());
        return 1;
    }
    finish_run_options(o, c);
    std::string error;
    if (!dist_init(&argc, &argv, c.dist_timeout_s, &error)) {
        std::fprintf(stderr, "train: error: %s\n", error.c_str());
        return 1;
    }
    return dist_finalize(run_training(c.t));
}
