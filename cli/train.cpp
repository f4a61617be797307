// cli/train.cpp — ./train: trains the Transformer on parallel text (by default the English ->
// Spanish Bible corpus, built on first use), averages the last checkpoints and reports BLEU.
//
//   ./train                          CPU defaults: N=3, d_model 256, d_ff 1024, h 4, BPE 8,000,
//                                    4,000 + 4,000-token batches, 55 minutes of training
//   ./train --config base --time 2h  the paper's base model
//   ./train --resume                 continue the run in --out exactly where it stopped
//   ./train --help                   every option with its range and default
// Option values are checked by cli/options.h (exit 2); a failed write to stdout, log.csv or a
// checkpoint is an error (exit 1).
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/options.h"
#include "cli/text_io.h"
#include "tokenizer.h"
#include "toolkit/trainer.h"

// Bounds of the model's sizes (the same as config_error's in model/config.cpp).
constexpr int kMaxLayers = 64;
constexpr int kMaxWidth = 1 << 24;

// "90s", "8m", "2h", "1.5h" or plain seconds, finite and >= 0; false on anything else.
static bool parse_duration(const std::string& s, double* out) {
    if (s.empty() || !(std::isdigit((unsigned char)s[0]) || s[0] == '.')) return false;
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    std::string unit = end;
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

int main(int argc, char** argv) {
    guard_stdout("train");
    TrainOptions t;
    config_preset("small", &t.cfg);   // the CPU default
    t.warmup = 1000;
    t.time_limit_s = 55 * 60;
    int layers = 0, d_k = 0, d_v = 0;
    std::string preset;
    bool no_eval = false;
    Options o("train", "Trains the Transformer of \"Attention Is All You Need\" on parallel text.");
    o.section("Model (paper Table 3)");
    o.add_custom("--config", "NAME", "preset: tiny, small, base, big (other options override it)",
                 [&] { return preset.empty() ? std::string("small") : preset; },
                 [&](const std::string& s) {
                     preset = s;
                     int vocab = t.vocab_size;
                     if (!config_preset(s, &t.cfg)) return false;
                     t.vocab_size = s == "base" || s == "big" ? 37000 : vocab;
                     return true;
                 });
    o.add("--layers", &layers, "N, encoder and decoder layers (0: the preset's)", in_range(0, kMaxLayers));
    o.add("--enc-layers", &t.cfg.n_enc, "encoder layers", in_range(1, kMaxLayers));
    o.add("--dec-layers", &t.cfg.n_dec, "decoder layers", in_range(1, kMaxLayers));
    o.add("--d-model", &t.cfg.d_model, "model width", in_range(1, kMaxWidth));
    o.add("--d-ff", &t.cfg.d_ff, "feed-forward inner width", in_range(1, kMaxWidth));
    o.add("--heads", &t.cfg.n_heads, "attention heads h", in_range(1, kMaxWidth));
    o.add("--d-k", &d_k, "query/key size per head (0: d_model / h)", in_range(0, kMaxWidth));
    o.add("--d-v", &d_v, "value size per head (0: d_model / h)", in_range(0, kMaxWidth));
    o.add("--dropout", &t.cfg.p_drop, "P_drop on sub-layer outputs and embeddings", in_range_open(0, 1));
    o.add("--attn-dropout", &t.cfg.p_attn_drop, "dropout on attention probabilities", in_range_open(0, 1));
    o.add("--relu-dropout", &t.cfg.p_relu_drop, "dropout on the FFN's ReLU output", in_range_open(0, 1));
    o.add("--label-smoothing", &t.cfg.label_smoothing, "epsilon_ls", in_range_open(0, 1));
    o.add_flag("--pre-ln", &t.cfg.pre_ln, "pre-LN instead of the paper's post-LN");
    o.add_flag("--learned-pos", &t.cfg.learned_pos, "learned positions instead of sinusoids");
    o.add("--max-len", &t.cfg.max_len, "longest training sentence in tokens (longer pairs are skipped)",
          in_range(2, kMaxWidth));
    o.add("--vocab-size", &t.vocab_size, "joint BPE vocabulary size",
          in_range(Tokenizer::kFirstChar, Tokenizer::kMaxVocab));
    o.section("Data and output");
    o.add("--data", &t.data_dir, "folder with train.SRC/train.TGT (+ dev, test)", "DIR");
    o.add("--src", &t.src_lang, "source file suffix", "EXT");
    o.add("--tgt", &t.tgt_lang, "target file suffix", "EXT");
    o.add("--out", &t.out_dir, "folder for checkpoints, vocabulary, log, averaged model", "DIR");
    o.add_flag("--resume", &t.resume, "continue the run in --out from its last checkpoint");
    o.section("Optimisation");
    o.add("--max-tokens", &t.max_tokens, "padded source (and target) tokens per batch", at_least(1));
    o.add("--accum", &t.accum, "batches per Adam step (gradient accumulation)", at_least(1));
    o.add("--lr-scale", &t.lr_scale, "factor on d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)",
          greater_than(0));
    o.add("--warmup", &t.warmup, "warmup steps", at_least(1));
    o.add("--clip-norm", &t.clip_norm, "global gradient-norm clipping (0: off)", at_least(0));
    o.add("--seed", &t.seed, "initialisation, dropout and batch order");
    o.add("--max-nonfinite", &t.max_nonfinite,
          "non-finite steps (loss or gradient) in a row that stop the run, exit 3 (each is skipped)",
          at_least(1));
    o.section("Budget and bookkeeping");
    o.add("--max-steps", &t.max_steps, "stop after this many steps (0: no limit)", at_least(0));
    add_duration(o, "--time", &t.time_limit_s, "wall-clock training budget, e.g. 90s, 8m, 2h (0: none)");
    add_duration(o, "--save-every", &t.save_every_s, "checkpoint interval");
    o.add("--save-every-steps", &t.save_every_steps, "checkpoint interval in steps (0: off)", at_least(0));
    o.add("--keep", &t.keep, "checkpoints kept", at_least(1));
    o.add("--average", &t.average, "last checkpoints averaged at the end (0, 1: none)", at_least(0));
    add_duration(o, "--log-every", &t.log_every_s, "progress line interval");
    o.add("--eval-every", &t.eval_every_steps, "dev loss interval in steps (0: only at the end)", at_least(0));
    o.section("Final evaluation");
    o.add("--beam", &t.beam, "beam size for the final BLEU (as ./translate's)", in_range(1, 64));
    o.add("--alpha", &t.alpha, "length penalty exponent", in_range(0, 10));
    o.add_flag("--no-eval", &no_eval, "skip translating dev/test at the end");
    o.section("Device");
    o.add_choice("--device", &t.device, {"auto", "cpu", "cuda"}, "auto: the GPU when one is present");
    o.add_choice("--precision", &t.precision, {"fp32", "bf16"},
                 "fp32 (the CPU; on the GPU TF32 off), or bf16 (the GPU default): bf16 weights and activations");
    if (!o.parse(argc, argv)) return o.exit_code();
    t.given = o.given();
    if (layers > 0) t.cfg.n_enc = t.cfg.n_dec = layers;
    if (t.cfg.n_heads > 0) {
        t.cfg.d_k = d_k > 0 ? d_k : t.cfg.d_model / t.cfg.n_heads;
        t.cfg.d_v = d_v > 0 ? d_v : t.cfg.d_model / t.cfg.n_heads;
    }
    t.final_eval = !no_eval;
    t.build_default_corpus = t.data_dir == "data/corpus/default";
    return run_training(t);
}
