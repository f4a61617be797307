// toolkit/parallel_data.h — parallel text -> token ids (cached on disk) -> token-budget batches.
//
// The path of the training data, in the order a program uses it:
//
//   ParallelData train;                                        // (src ids, tgt ids) pairs
//   load_parallel("train.en", "train.es", tok, {/*skip_empty=*/true}, &train, &err);
//   BatchSampler sampler;
//   sampler.build(train.pairs, opts, &err);                    // sort, bucket, budget
//   for (;;) { const Batch& b = sampler.next(); ... }          // epochs roll over
//   SamplerPosition pos = sampler.position();                  // save in the checkpoint
//   sampler.restore(pos);                                      // exact resume
//
// Text files: UTF-8, one sentence per line, line i of the source file translates to line i
// of the target file. Each line is stripped of leading/trailing spaces, tabs and '\r' (CRLF
// files work); a UTF-8 byte-order mark at a file's start is dropped. Mismatched line counts, invalid UTF-8 and NUL bytes are always errors that
// name the file (and line). An empty (or all-blank) line is an error naming file and line,
// except with LoadOptions::skip_empty (meant for training data: web-crawled corpora have a
// few), where the pair is skipped, counted in ParallelData::skipped_empty and reported as a
// warning. Held-out data (dev/test) should load without skip_empty so that its lines stay
// aligned with the reference translations.
//
// Cache: the ids of each text file are stored beside it as FILE.ids-<fingerprint hex>.bin,
// keyed by the tokenizer's fingerprint and the text file's size and a hash of its bytes (the
// text is read on every use: milliseconds; a text edited with its size and modification time
// kept, as cp -p, rsync -a and tar restore them, is noticed). The binary format (magic,
// version, counts, offsets, ids, checksum) is described in parallel_data.cpp; a cache that is
// stale, truncated or corrupt is rebuilt (never trusted), and an unwritable folder only costs
// the re-encoding next time. Caches of other tokenizers stay beside the text until deleted: rm FILE.ids-*.bin.
//
// Batches (the paper: "Sentence pairs were batched together by approximate sequence length.
// Each training batch contained a set of sentence pairs containing approximately 25000 source
// tokens and 25000 target tokens"): pairs are sorted by length and cut greedily into batches
// whose PADDED sizes fit both budgets: B * S <= max_src_tokens and B * T <= max_tgt_tokens,
// where S = longest source + 1 (</s>) and T = longest target + 1 (<s> or </s>). So memory is
// bounded by the budget whatever the lengths. Pairs with source + 1 or target + 1 > max_len
// are skipped and counted, never truncated. The batch ORDER is shuffled each epoch by a
// seeded permutation (own PRNG, identical on every platform); the batch contents are fixed.
//
// Build: g++ -std=c++17 -O3 -march=native -fopenmp -I. toolkit/parallel_data.cpp tokenizer.cpp your_code.cpp
// Test:  test/test_data.cpp
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer.h"
#include "transformer.h"

// One sentence pair as token ids, without specials (the Batch adds <s> and </s>).
struct SentencePair {
    std::vector<int> src;
    std::vector<int> tgt;
};

// A loaded parallel corpus.
struct ParallelData {
    std::vector<SentencePair> pairs;   // the kept pairs, in file order
    std::vector<size_t> line;          // 1-based line number of each kept pair
    size_t lines = 0;                  // lines in each file
    size_t skipped_empty = 0;          // pairs skipped for an empty side (skip_empty only)
    std::string src_path, tgt_path;
    uint64_t src_hash = 0, tgt_hash = 0;           // of each file's bytes (the cache's)
    uint64_t src_ids_hash = 0, tgt_ids_hash = 0;   // of each side's token ids: what a resume checks
};

struct LoadOptions {
    bool skip_empty = false;   // skip (and count) pairs with an empty side instead of failing
    bool use_cache = true;     // read/write FILE.ids-<fingerprint>.bin beside each text file
    bool verbose = true;       // one line on stderr per file: cache hit, rebuilt (and why)
};

// Reads, checks and encodes a pair of aligned text files. False + *error on failure.
bool load_parallel(const std::string& src_path, const std::string& tgt_path,
                   const Tokenizer& tok, const LoadOptions& opt, ParallelData* out,
                   std::string* error);

// ---- lower-level pieces (used by load_parallel; exposed for tools and tests) -------------

// Reads a UTF-8 text file into stripped lines, a UTF-8 byte-order mark at its start dropped
// (as ./translate drops it; a U+FEFF anywhere else is text). Errors: unreadable file, a gzip or UTF-16 file
// (said as such), invalid UTF-8 or a NUL byte ("FILE:LINE: ..."). Empty lines are kept (as "") for the caller to judge.
bool read_text_lines(const std::string& path, std::vector<std::string>* lines,
                     std::string* error);

// Encoded lines of one text file, via the cache when it is valid. An empty line gives an
// empty id list. *cache_note (optional) says what happened: "cache hit", "cache rebuilt
// (reason)", "cache written", "cache not written (reason)".
bool encode_file_cached(const std::string& path, const Tokenizer& tok, bool use_cache,
                        std::vector<std::vector<int>>* ids, std::string* cache_note,
                        std::string* error);

// The cache file of a text file for a tokenizer: PATH.ids-<16 hex digits>.bin
std::string cache_path(const std::string& text_path, uint64_t fingerprint);

// ---- batches ---------------------------------------------------------------------------

// One padded Batch (transformer.h) from the pairs at the given indices, in that order:
// src (B, S) = tokens + </s> then PAD; tgt_in (B, T) = <s> + tokens then PAD;
// labels (B, T) = tokens + </s> then PAD.
Batch make_batch(const std::vector<SentencePair>& pairs, const std::vector<uint32_t>& which);
// All pairs, in order (small sets: tests, a handful of dev sentences).
Batch make_batch(const std::vector<SentencePair>& pairs);

struct BatchingOptions {
    int max_src_tokens = 4096;   // padded source tokens per batch: B * S <= this
    int max_tgt_tokens = 4096;   // padded target tokens per batch: B * T <= this
    int max_len = 256;           // longest source + 1 and target + 1 kept (Config::max_len)
    double max_len_ratio = 0;    // pairs whose longer side has more than this many times the
                                 // shorter side's tokens are skipped (0: off; else >= 1)
    uint64_t seed = 1;           // batch order of every epoch, and ties in the length sort
    bool shuffle = true;         // false: the length-sorted order every epoch (evaluation)
};

// Where a sampler stands: the next batch next() returns is batch `index` of epoch `epoch`'s
// order. Two integers, saved in checkpoints for an exact resume.
struct SamplerPosition {
    int64_t epoch = 0;
    int64_t index = 0;
};

// Tensor2tensor's length buckets of a source length (with </s>): bucket 0 holds lengths up to
// 8, each next one those up to about 10% past the last bound (9, 10, ..., 20, 22, 24, ...).
int length_bucket(int len);

// §5.1 Training Data and Batching: "sentence pairs were batched together by approximate
// sequence length", each batch holding about a fixed number of source and target tokens:
// the pairs sorted by (length bucket of the source, target length, source length) and cut
// into batches in that order.
class BatchSampler {
public:
    // Builds the batch list. `pairs` must outlive the sampler. False + *error when a budget
    // is smaller than max_len (a longest sentence could never form a batch) or when no pair
    // is short enough to keep.
    bool build(const std::vector<SentencePair>& pairs, const BatchingOptions& opt,
               std::string* error);

    // The next batch (filled in an internal buffer, valid until the next call); after the
    // last batch of an epoch comes the first batch of the next epoch, in a new order.
    const Batch& next();
    // Indices (into `pairs`) of the batch next() would return now, without advancing.
    const std::vector<uint32_t>& peek_indices();

    SamplerPosition position() const { return pos_; }
    // False + *error when the position is outside the batch list (e.g. another data set).
    bool restore(SamplerPosition pos, std::string* error);

    size_t batches_per_epoch() const { return batches_.size(); }
    size_t pairs_kept() const { return kept_; }           // pairs in the batches
    size_t skipped_long() const { return skipped_long_; }  // pairs longer than max_len
    size_t skipped_ratio() const { return skipped_ratio_; }  // pairs past max_len_ratio (and within max_len)
    size_t padded_src_tokens() const { return padded_src_; }   // sum over an epoch of B * S
    size_t padded_tgt_tokens() const { return padded_tgt_; }   // sum over an epoch of B * T
    const std::vector<std::vector<uint32_t>>& batches() const { return batches_; }  // sorted
    // The batch order (indices into batches()) of an epoch: a pure function of seed + epoch.
    std::vector<uint32_t> epoch_order(int64_t epoch) const;
    // Hash of the batch list and the seed: equal fingerprints mean restore() resumes the
    // same sequence. Save it beside the position and compare on resume (a different data
    // set, budget, max_len or seed gives another fingerprint).
    uint64_t fingerprint() const;

private:
    const std::vector<SentencePair>* pairs_ = nullptr;
    BatchingOptions opt_;
    std::vector<std::vector<uint32_t>> batches_;   // pair indices, batches in length order
    std::vector<uint32_t> order_;                  // order of epoch order_epoch_
    int64_t order_epoch_ = -1;
    SamplerPosition pos_;
    Batch batch_;
    size_t kept_ = 0, skipped_long_ = 0, skipped_ratio_ = 0, padded_src_ = 0, padded_tgt_ = 0;

    void ensure_order();
};

// ---- deterministic random numbers (same sequence on every platform) ----------------------

// (splitmix64_next, numerics.h: advances *state and returns the next 64 bits.)
// Uniform integer in [0, n), n > 0, by rejection (no modulo bias).
uint64_t random_below(uint64_t* state, uint64_t n);
