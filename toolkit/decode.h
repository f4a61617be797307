// decode.h — translation: batched greedy and beam search over a trained model.
//
// Rules (DESIGN.md "Decoding"; test/reference.py implements the same, independently):
// - Greedy (beam 1): the argmax token at every step (ties: lowest id), until </s> or the
//   maximum length. Its logprob is the sum of the chosen tokens' log-probabilities.
// - Beam search, k beams, GNMT length penalty lp(n) = ((5 + n) / 6)^alpha, n = generated
//   tokens counting </s>. Each step takes the top 2k (hypothesis, token) candidates by raw
//   log-probability; a candidate ending in </s> is finished with score logprob / lp(n); the
//   best k others stay alive. At the maximum length the alive ones finish without </s>.
//   tensor2tensor's early stop: a sentence is done when its best finished score is at least
//   the best alive raw log-probability / lp(max length), or when nothing is alive.
// - Maximum output length: floor(a * source length (incl. </s>) + b), at least 1.
// - Incremental (model_decode_begin / model_decode_step in transformer.h): decoder
//   self-attention keys/values are cached per step (a hypothesis that changes parent takes
//   its ancestors' entries through the model's cache_reorder op); cross-attention
//   keys/values are computed once per sentence. The search sees each hypothesis' top
//   candidates, never logits.
#pragma once
#include <string>
#include <vector>

#include "transformer.h"

struct DecodeOptions {
    int beam = 4;              // 1 = greedy
    float alpha = 0.6f;        // length penalty exponent
    float max_len_a = 1.0f;    // max output length = a * source length + b
    int max_len_b = 50;
    int nbest = 1;             // hypotheses returned per sentence (<= beam)
    bool recompute = false;    // testing: run the full decoder over the prefix every step
    int force_length = 0;      // benchmarks: exactly this many tokens, </s> never chosen
};

struct Hypothesis {
    std::vector<int> tokens;   // generated ids, ending with </s> when it finished
    float logprob = 0;         // sum of token log-probabilities
    float score = 0;           // logprob / lp(|tokens|)
};

int max_output_length(int source_length, const DecodeOptions& opt);

// Translates sentences given as token ids (each ending with </s>), all in one batch.
// Returns, per sentence, the best opt.nbest hypotheses, best first.
std::vector<std::vector<Hypothesis>> decode_batch(Model* m,
                                                  const std::vector<std::vector<int>>& sources,
                                                  const DecodeOptions& opt);

// Decodes many sentences: sorted by length, cut into batches of at most batch_tokens padded
// source tokens, results returned in the input order. An empty source (no tokens) gives one
// empty hypothesis without running the model.
std::vector<std::vector<Hypothesis>> decode_sorted(Model* m,
                                                   const std::vector<std::vector<int>>& sources,
                                                   const DecodeOptions& opt, int batch_tokens);

struct Tokenizer;
// Text in, text out: encodes each line (+ </s>), decode_sorted, detokenizes the best
// hypothesis (without </s>). An empty line gives an empty line.
std::vector<std::string> translate_lines(Model* m, const Tokenizer& tok,
                                         const std::vector<std::string>& lines,
                                         const DecodeOptions& opt, int batch_tokens);
