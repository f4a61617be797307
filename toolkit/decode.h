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
//   keys/values are computed once per sentence. Each step ends in log-softmax + top-2k on
//   the device and the selection above runs there too (Backend::search_select, the rules in
//   model/search.h): the host learns only the next step's row count, and downloads the
//   finished hypotheses once per batch.
// - Target prefix (DecodeInputs::prefix, CTranslate2's target_prefix): the first steps of a
//   sentence feed the given tokens instead of choosing; their log-probabilities (from the
//   model, model_decode_force) count in the hypothesis' logprob, and the length penalty counts
//   them. Beam search branches after the prefix. The maximum length is at least prefix + 1.
// - Sampling (DecodeOptions::sampling, beam 1 only): at each step a token drawn from
//   softmax(z / temperature) over the top-k tokens or the nucleus (top-p), by the backend's
//   logsoftmax_sample op (model_decode_sample); the uniform number of sentence s at step t
//   is sampling_uniform(seed, stream of s, t), so a sentence's sample does not depend on the
//   batch it was decoded in. Its logprob is the model's (temperature 1) log-probability.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "transformer.h"

struct DecodeOptions {
    int beam = 4;              // 1 = greedy
    float alpha = 0.6f;        // length penalty exponent
    double max_len_a = 1.0;    // max output length = a * source length + b
    int max_len_b = 50;
    int nbest = 1;             // hypotheses returned per sentence (<= beam)
    bool recompute = false;    // testing: run the full decoder over the prefix every step
    int force_length = 0;      // benchmarks: exactly this many tokens, </s> never chosen
    bool sampling = false;     // draw each token (beam 1) instead of taking the argmax
    int sample_topk = 0;       // sampling among the top k tokens (0: no top-k cut)
    float sample_topp = 1.0f;  // sampling within the nucleus of mass p, 0 < p <= 1 (1: no cut)
    float temperature = 1.0f;  // sampling from softmax(z / temperature), > 0
    uint64_t seed = 1;         // sampling: the random numbers' seed
};

// Per-sentence inputs besides the source, optional (empty vectors: none).
struct DecodeInputs {
    std::vector<std::vector<int>> prefix;   // forced first target tokens (ids of text, no special
                                            // ids), may be empty
    std::vector<uint64_t> stream;           // sampling: the sentence's random stream id
                                            // (default: its index in the call's sources)
    // decode_sorted: sources no longer wanted (the service's: their requester gave up), asked
    // just before a source's model batch is formed; such a source is left out, its result empty
    // (no hypotheses). Unset: every source is decoded.
    std::function<bool(size_t source)> dropped;
};

// Sampling's uniform number in [0, 1) for (seed, stream, step): 24 bits of splitmix64.
float sampling_uniform(uint64_t seed, uint64_t stream, int step);

// "topk:K" (1 <= K <= 10^6) or "topp:P" (0 < P <= 1) into opt (sampling on); false when
// malformed (opt unchanged). ./translate's --sampling and the service's "sampling".
bool parse_sampling(const std::string& spec, DecodeOptions* opt);

int max_output_length(int source_length, const DecodeOptions& opt);
// The search's setup decode_batch gives model_decode_begin: each sentence's length limit (its
// prefix, then at least one token; the learned position table's end) and the length penalties
// of every length up to the longest.
SearchSetup search_setup(const Model* m, const std::vector<std::vector<int>>& sources,
                         const DecodeOptions& opt, const DecodeInputs* in = nullptr);

// --batch-tokens' default for a search of this beam on this backend (padded source tokens a
// batch): 16,000 on the GPU; on the CPU 4,000, or 2,000 in int8 with a beam (see decode.cpp).
int default_batch_tokens(const Backend& backend, int beam);
// The same rule in words, for --help.
extern const char* const kDefaultBatchTokensText;
// GNMT's length penalty ((5 + n) / 6)^alpha for n tokens (counting </s>).
float length_penalty(int n, float alpha);

// Translates sentences given as token ids (each ending with </s>), all in one batch.
// Returns, per sentence, the best opt.nbest hypotheses, best first.
std::vector<std::vector<Hypothesis>> decode_batch(Model* m,
                                                  const std::vector<std::vector<int>>& sources,
                                                  const DecodeOptions& opt,
                                                  const DecodeInputs* inputs = nullptr);

// Decodes many sentences: sorted by length, cut into batches of at most batch_tokens padded
// source tokens, results returned in the input order. An empty source (no tokens) gives one
// empty hypothesis without running the model; one that inputs->dropped says is no longer wanted,
// none. batch_sizes (when given) receives each batch's
// sentence count, in decoding order (bench/bench_translate.sh compares them with the other
// decoders' batches).
std::vector<std::vector<Hypothesis>> decode_sorted(Model* m,
                                                   const std::vector<std::vector<int>>& sources,
                                                   const DecodeOptions& opt, int batch_tokens,
                                                   const DecodeInputs* inputs = nullptr,
                                                   std::vector<int>* batch_sizes = nullptr);

// Scoring (teacher forcing, model_score): the log-probability of each target (ids without
// </s>; </s> is scored after them) given its source (ids ending with </s>), in batches of at
// most batch_tokens padded tokens (source or target), sorted by length. Per pair: logprob
// (the sum), score (logprob / lp(|target| + 1), the search's length penalty) and, when
// token_logp is given, each token's log-probability (|target| + 1 values, </s> last);
// batch_sizes as decode_sorted's.
std::vector<Hypothesis> score_sorted(Model* m, const std::vector<std::vector<int>>& sources,
                                     const std::vector<std::vector<int>>& targets, float alpha,
                                     int batch_tokens,
                                     std::vector<std::vector<float>>* token_logp = nullptr,
                                     std::vector<int>* batch_sizes = nullptr);

// A log-probability that is not a number (NaN) comes only from activations that overflowed
// fp32: a checkpoint whose weights are finite (checkpoint_load refuses others) but enormous, a
// damaged or diverged model, whose words are then noise. ./translate and --serve refuse to
// answer with them (kNanLogprob says why). first_nan_logprob: the index of the first source
// with such a hypothesis, or -1.
extern const char* const kNanLogprob;
long first_nan_logprob(const std::vector<std::vector<Hypothesis>>& hyps);
long first_nan_logprob(const std::vector<Hypothesis>& hyps);

struct Tokenizer;
// Text in, text out: encodes each line (+ </s>), decode_sorted, detokenizes the best
// hypothesis (without </s>). An empty line gives an empty line. A line longer than a learned
// position table (tokens + </s> > max_len) is translated from its first max_len - 1 tokens,
// one longer than kEvalSourceTokens (sinusoids) from its first kEvalSourceTokens, as
// ./translate takes at most 1,024 (beyond, one line's attention takes gigabytes); *cut (when
// given) counts those lines. eval_source_limit: the tokens a line keeps.
constexpr int kEvalSourceTokens = 1024;
int eval_source_limit(const Model* m);
std::vector<std::string> translate_lines(Model* m, const Tokenizer& tok,
                                         const std::vector<std::string>& lines,
                                         const DecodeOptions& opt, int batch_tokens, size_t* cut = nullptr);

// One output of a line translated in pieces (--split-long, --split-sentences), or of a whole
// line (one piece): its text, log-probability, score and token count (with </s>).
struct JoinedHypothesis {
    std::string text;
    float score = 0, logprob = 0;
    long tokens = 0;
};
// The outputs of a line cut into n pieces, hyps[first .. first + n): entry j joins each
// piece's j-th best (or its last when it has fewer), texts joined by a space, log-probabilities
// added, scored by the length penalty over all its tokens (an n-best list of a cut line is
// not a search over all combinations). One piece keeps the search's own score. ./translate
// and the service (--serve) both answer with these.
std::vector<JoinedHypothesis> join_pieces(const Tokenizer& tok, const std::vector<std::vector<Hypothesis>>& hyps,
                                          size_t first, size_t n, float alpha);
