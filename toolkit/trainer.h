// trainer.h — the training run behind ./train: data and tokenizer set-up, the loop (token
// batches, gradient accumulation, Adam with the paper's schedule), progress lines, dev loss,
// periodic atomic checkpoints with the last K kept, exact resume, and at the end the average
// of the last checkpoints and BLEU on dev and test.
//
// Everything a run writes goes to TrainOptions::out_dir:
//   vocab.bpe                    the learned BPE (also inside every checkpoint)
//   ckpt-<step>.safetensors      checkpoints with Adam state and the data position
//   average.safetensors          the average of the last `average` checkpoints (translate's default)
//   log.csv                      step, epoch, loss, lr, dev loss, BLEU, elapsed seconds
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "transformer.h"

struct TrainOptions {
    Config cfg;                       // vocab is set from the tokenizer
    std::string out_dir = "runs/default";
    // Data: PREFIX.SRC / PREFIX.TGT text files (aligned lines).
    std::string data_dir = "data/corpus/default";
    std::string src_lang = "en", tgt_lang = "es";
    bool build_default_corpus = true;  // run data/make_corpus.py when data_dir is the default and missing
    int vocab_size = 8000;
    // Batching and optimisation.
    int max_tokens = 4000;            // padded source tokens and target tokens per batch
    int accum = 1;                    // batches per Adam step
    double lr_scale = 1.0;
    int warmup = 4000;
    double clip_norm = 0;             // 0: off
    uint64_t seed = 1;
    // Budget and bookkeeping.
    int64_t max_steps = 0;            // 0: no limit
    double time_limit_s = 0;          // wall-clock training budget (0: none), resumes count it
    double save_every_s = 300;        // checkpoint interval in seconds (0: off)
    int64_t save_every_steps = 0;     // checkpoint interval in steps (0: off)
    int keep = 5;                     // checkpoints kept
    int average = 5;                  // checkpoints averaged at the end (0/1: no averaging)
    double log_every_s = 10;
    int64_t eval_every_steps = 500;   // dev loss interval (0: only at the end)
    bool resume = false;
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
};

// Runs training as configured; returns the process exit status (0 on success), printing a
// clear message for every error (missing or misaligned data, bad config, unreadable checkpoint):
// 1 an error, 2 an option that contradicts the resumed checkpoint, 3 too many non-finite steps
// in a row, 130 interrupted (a checkpoint saved).
int run_training(TrainOptions opt);

// Checkpoint files ckpt-*.safetensors in dir, oldest (lowest step) first.
std::vector<std::string> list_checkpoints(const std::string& dir);

// Averages the parameters of checkpoints of one model element by element (fp32 result,
// double accumulation). Refuses inputs whose configs or tokenizers differ, naming the first
// difference. The output keeps the last input's metadata, without Adam state.
bool average_checkpoints(const std::vector<std::string>& inputs, const std::string& output,
                         std::string* error);
