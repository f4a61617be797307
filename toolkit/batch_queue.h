// batch_queue.h — dynamic batching for a translation service: many request threads queue
// jobs (the token ids of a request's lines and its decoding options); one decoding thread,
// the only one that touches the Model, takes queued jobs together and decodes them in one
// decode_sorted call, then hands each job exactly its own hypotheses back, in its order.
//
//   BatchQueue q({batch_tokens, std::chrono::milliseconds(5), true});
//   request threads:  auto job = std::make_shared<DecodeJob>(); job->opt = ...; job->add(ids, i);
//                     if (!q.run(job, deadline)) ...timed out...;  job->hyps[i] ...
//   decoding thread:  run_decoder(&model, &q, batch_tokens, beam);   returns after q.close()
//
// When a batch starts: the decoder waits, from the arrival of the oldest queued job, until
// the queued source tokens (lines + </s>) of jobs with the oldest job's options reach
// batch_tokens or `wait` has passed, whichever comes first; then it takes those jobs in
// arrival order until batch_tokens is reached (the oldest one always). Jobs with other
// options (beam, n-best, alpha, sampling and its seed) wait for a later batch. With batching
// off every job is decoded alone, in arrival order. A job whose requester gave up (timeout) is
// dropped: taken from the queue if it waits there, and if its batch is being decoded, its
// sources not yet in a model batch are left out (decode_sorted's DecodeInputs::dropped), so that
// the decoder's time goes to requests still waiting. A batch that fails (out
// of memory: the model's backend set to throw) gives each of its jobs the error, and the
// decoder goes on with the next batch.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "toolkit/decode.h"

struct DecodeJob {
    using Clock = std::chrono::steady_clock;
    DecodeOptions opt;
    std::vector<std::vector<int>> sources;   // token ids, each ending with </s>; {} = empty line
    std::vector<uint64_t> streams;           // sampling: each source's random stream (decode.h)
    size_t tokens = 0;                       // sum of the sources' lengths
    size_t lines = 0;                        // the request's lines, set by its thread (a line cut
                                             // by --split-long is several sources)
    Clock::time_point arrived;               // set by BatchQueue::run
    std::vector<std::vector<Hypothesis>> hyps;   // the result: per source, best first
    std::string error;                       // instead of hyps: why its batch failed (out of memory)
    bool done = false;                       // guarded by the queue's mutex
    std::atomic<bool> cancelled{false};      // its requester gave up (read by the decoder)

    // Adds one source (token ids without </s>; empty for an empty line) and the stream its
    // sample draws from, so that a job's samples do not depend on the jobs batched with it.
    void add(const std::vector<int>& ids, uint64_t stream);
};

// Whether two jobs can share a batch (the same search).
bool same_search(const DecodeOptions& a, const DecodeOptions& b);

class BatchQueue {
public:
    struct Settings {
        int batch_tokens = 4000;                 // a batch starts when this many tokens wait
        std::chrono::milliseconds wait{5};       // ... or when the oldest job waited this long
        bool batching = true;                    // false: one job per batch
    };
    explicit BatchQueue(Settings s) : s_(s) {}

    // A request thread: queues the job and waits for its hypotheses until deadline. False
    // when the deadline passed first (the job is then dropped, or its result discarded).
    bool run(const std::shared_ptr<DecodeJob>& job, DecodeJob::Clock::time_point deadline);

    // The decoding thread: waits for the next batch (the rules above); false once the queue
    // is closed and empty.
    bool next_batch(std::vector<std::shared_ptr<DecodeJob>>* batch);
    // The decoding thread: the batch's hyps are filled; wakes its requesters.
    void complete(const std::vector<std::shared_ptr<DecodeJob>>& batch);
    // No more jobs will come: next_batch returns what is queued at once, then false.
    void close();
    // Sources queued and not yet taken by the decoder.
    size_t queued_sources();
    // The jobs' lines (DecodeJob::lines) queued and not yet taken by the decoder.
    size_t queued_lines();
    // Jobs whose requester gave up (run() returned false), and those jobs' sources that were
    // never decoded (dropped from the queue, or left out of their batch).
    long timed_out();
    long timed_out_sources_not_decoded();

private:
    Settings s_;
    std::mutex mu_;
    std::condition_variable work_;   // the decoder waits on it
    std::condition_variable done_;   // requesters wait on it
    std::deque<std::shared_ptr<DecodeJob>> queue_;
    bool closed_ = false;
    long timed_out_ = 0, not_decoded_ = 0;

    void take_batch(std::vector<std::shared_ptr<DecodeJob>>* batch);
};

// The padded source tokens of one model batch for a search of opt's beam, when batch_tokens
// was sized for a beam of sized_for_beam (the server's --beam): a batch's memory (the cache, the
// logits) grows with its rows, sentences x beam, so a request's larger beam takes
// proportionally fewer tokens a batch (at least 1: one sentence), a smaller beam or sampling
// (one row a sentence) all of them.
int batch_tokens_for_beam(const DecodeOptions& opt, int batch_tokens, int sized_for_beam);

// The decoding loop: takes batches from q until it is closed and empty, decodes each with
// decode_sorted (batch_tokens padded source tokens per model batch at the beam sized_for_beam:
// batch_tokens_for_beam) and completes them. Returns the number of batches decoded.
long run_decoder(Model* model, BatchQueue* q, int batch_tokens, int sized_for_beam);
