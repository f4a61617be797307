// trainer.h — the training run behind ./train: data and tokenizer set-up, the loop (token
// batches, gradient accumulation, Adam with the paper's schedule), progress lines, dev loss,
// periodic atomic checkpoints with the last K kept, exact resume, and at the end the average
// of the last checkpoints and BLEU on dev and test.
//
// Everything a run writes goes to TrainOptions::out_dir:
//   vocab.bpe                    the learned BPE (also inside every checkpoint)
//   ckpt-<step>.safetensors      checkpoints with Adam state and the data position
//   average.safetensors          the average of the last `average` checkpoints (translate's default)
//   best.safetensors             the parameters of the best evaluation by best_metric (dev BLEU
//                                or dev loss), rewritten atomically at each improvement
//   log.csv                      event, step, epoch, train loss, lr, dev loss, dev and test BLEU,
//                                elapsed seconds
//   curves.svg                   log.csv drawn (toolkit/curves.h), redrawn at each evaluation and at the end
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "transformer.h"

// Fine-tuning (--init-from): the checkpoint's config is used, except these regularisation
// values, taken from TrainOptions::cfg when set (the command line gave them).
struct InitOverrides {
    bool p_drop = false, p_attn_drop = false, p_relu_drop = false, label_smoothing = false;
};

struct TrainOptions {
    Config cfg;                       // vocab is set from the tokenizer
    std::string out_dir = "runs/default";
    // Data: PREFIX.SRC / PREFIX.TGT text files (aligned lines).
    std::string data_dir = "data/corpus/default";
    std::string src_lang = "en", tgt_lang = "es";
    bool build_default_corpus = true;  // run data/make_corpus.py when data_dir is the default and missing or incomplete
    int vocab_size = 8000;
    // Batching and optimisation.
    int max_tokens = 4000;            // padded source tokens and target tokens per batch
    double max_len_ratio = 0;         // skip training pairs whose longer side has more than this
                                      // many times the shorter's tokens (0: off; else >= 1)
    int accum = 1;                    // batches per Adam step
    double lr_scale = 1.0;
    int warmup = 4000;
    double clip_norm = 0;             // 0: off
    uint64_t seed = 1;
    // Budget and bookkeeping.
    int64_t max_steps = 0;            // 0: no limit
    double time_limit_s = 0;          // wall-clock training budget (0: none), resumes count it
    double save_every_s = 300;        // checkpoint interval in seconds (0: off)
    // On the GPU, in place of the two above (< 0: keep them; see cli/train.cpp).
    double gpu_time_limit_s = -1, gpu_save_every_s = -1;
    int64_t save_every_steps = 0;     // checkpoint interval in steps (0: off)
    int keep = 5;                     // checkpoints kept
    int average = 5;                  // checkpoints averaged at the end (0/1: no averaging)
    double log_every_s = 10;
    int64_t eval_every_steps = 500;   // dev loss interval (0: only at the end)
    bool resume = false;
    // Validation at every eval_every_steps: dev loss, and dev BLEU (when eval_bleu) on the
    // first eval_lines lines of dev (0: all of them) with beam eval_beam (1: greedy).
    bool eval_bleu = true;
    int eval_beam = 1;
    int eval_lines = 500;
    // best.safetensors is kept by best_metric: "bleu" (higher is better), "loss" (lower), or
    // "" (bleu when dev BLEU is computed, else loss). Strict improvement counts.
    std::string best_metric;
    int early_stopping = 0;           // stop after this many evaluations without improvement (0: off)
    int64_t max_epochs = 0;           // stop once this many epochs are done (0: no limit)
    AdamParams adam;                  // betas and epsilon (the paper's by default)
    // Fine-tuning: start from this checkpoint's parameters, config and tokenizer, with a fresh
    // optimizer and schedule (step 0, zero Adam state), on the data of data_dir.
    std::string init_from;
    InitOverrides init_override;
    // An existing vocabulary (the vocab.bpe format) instead of learning one.
    std::string vocab_file;
    // Final evaluation.
    bool final_eval = true;
    int beam = 4;
    float alpha = 0.6f;
    int decode_batch_tokens = 6000;
    bool quiet = false;               // tests: no progress lines
    // Device: "auto" (the GPU when one is present), "cpu", "cuda"; precision "" (the device's
    // default: fp32 on the CPU, bf16 on the GPU), "fp32" or "bf16".
    std::string device = "auto", precision;
    // Robustness (README "Non-finite steps", "A full disk"): a step whose loss or gradient norm
    // is not finite is skipped, counted and logged; this many in a row stop the run (exit 3).
    int max_nonfinite = 10;
    // Names of the options given on the command line ("--lr-scale", ...): --resume refuses
    // an optimisation option that contradicts the checkpoint's value (exit 2).
    std::vector<std::string> given;
    // Those of them that set the model's config ("--config", "--d-model", ...): --resume
    // refuses them when the config they make (the vocabulary aside) is not the checkpoint's.
    std::vector<std::string> given_model;
};

// Runs training as configured; returns the process exit status (0 on success), printing a
// clear message for every error (missing or misaligned data, bad config, unreadable checkpoint):
// 1 an error, 2 an option that contradicts the resumed checkpoint, 3 too many non-finite steps
// in a row, 130 interrupted (a checkpoint saved).
int run_training(TrainOptions opt);

