// batch_queue.cpp — dynamic batching: see batch_queue.h for the rules.
#include "toolkit/batch_queue.h"

#include <algorithm>
#include <new>
#include <stdexcept>

#include "numerics.h"

void DecodeJob::add(const std::vector<int>& ids, uint64_t stream) {
    sources.push_back(ids);
    streams.push_back(stream);
    if (!ids.empty()) sources.back().push_back(EOS_ID);
    tokens += sources.back().size();
}

bool same_search(const DecodeOptions& a, const DecodeOptions& b) {
    return a.beam == b.beam && a.nbest == b.nbest && a.alpha == b.alpha && a.max_len_a == b.max_len_a &&
           a.max_len_b == b.max_len_b && a.recompute == b.recompute && a.force_length == b.force_length &&
           a.sampling == b.sampling && a.sample_topk == b.sample_topk && a.sample_topp == b.sample_topp &&
           a.temperature == b.temperature && a.seed == b.seed;
}

bool BatchQueue::run(const std::shared_ptr<DecodeJob>& job, DecodeJob::Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    job->arrived = DecodeJob::Clock::now();
    queue_.push_back(job);
    work_.notify_one();
    if (done_.wait_until(lock, deadline, [&] { return job->done; })) return true;
    job->cancelled = true;
    timed_out_++;
    auto queued = std::find(queue_.begin(), queue_.end(), job);
    if (queued != queue_.end()) {   // not taken by the decoder: none of it is decoded
        not_decoded_ += (long)job->sources.size();
        queue_.erase(queued);
    }
    return false;
}

// Moves the batch's jobs from the queue to *batch (the queue is not empty; lock held).
void BatchQueue::take_batch(std::vector<std::shared_ptr<DecodeJob>>* batch) {
    const DecodeOptions first = queue_.front()->opt;
    size_t tokens = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
        bool fits = batch->empty() || (s_.batching && same_search((*it)->opt, first) &&
                                       tokens < (size_t)s_.batch_tokens);
        if (!fits) {
            if (!s_.batching) break;
            ++it;
            continue;
        }
        tokens += (*it)->tokens;
        batch->push_back(*it);
        it = queue_.erase(it);
    }
}

bool BatchQueue::next_batch(std::vector<std::shared_ptr<DecodeJob>>* batch) {
    batch->clear();
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        if (queue_.empty()) {
            if (closed_) return false;
            work_.wait(lock);
            continue;
        }
        const DecodeJob& oldest = *queue_.front();
        size_t waiting = 0;   // tokens that could join the oldest job's batch
        for (const auto& j : queue_)
            if (same_search(j->opt, oldest.opt)) waiting += j->tokens;
        auto due = oldest.arrived + s_.wait;
        if (!s_.batching || closed_ || waiting >= (size_t)s_.batch_tokens || DecodeJob::Clock::now() >= due) {
            take_batch(batch);
            return true;
        }
        work_.wait_until(lock, due);
    }
}

void BatchQueue::complete(const std::vector<std::shared_ptr<DecodeJob>>& batch) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& j : batch) {
        j->done = true;
        if (j->cancelled && j->error.empty())   // its sources left out: no hypotheses
            for (const auto& h : j->hyps) not_decoded_ += h.empty();
    }
    done_.notify_all();
}

void BatchQueue::close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    work_.notify_all();
}

size_t BatchQueue::queued_sources() {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& j : queue_) n += j->sources.size();
    return n;
}

size_t BatchQueue::queued_lines() {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& j : queue_) n += j->lines;
    return n;
}

long BatchQueue::timed_out() {
    std::lock_guard<std::mutex> lock(mu_);
    return timed_out_;
}

long BatchQueue::timed_out_sources_not_decoded() {
    std::lock_guard<std::mutex> lock(mu_);
    return not_decoded_;
}

int batch_tokens_for_beam(const DecodeOptions& opt, int batch_tokens, int sized_for_beam) {
    const int beam = opt.sampling ? 1 : opt.beam;
    if (beam <= sized_for_beam) return batch_tokens;
    return (int)std::max<long long>(1, (long long)batch_tokens * sized_for_beam / beam);
}

long run_decoder(Model* model, BatchQueue* q, int batch_tokens, int sized_for_beam) {
    long batches = 0;
    std::vector<std::shared_ptr<DecodeJob>> batch;
    while (q->next_batch(&batch)) {
        std::vector<std::vector<int>> sources;
        std::vector<const DecodeJob*> owner;   // per source: its job
        DecodeInputs in;
        for (const auto& j : batch) {
            sources.insert(sources.end(), j->sources.begin(), j->sources.end());
            in.stream.insert(in.stream.end(), j->streams.begin(), j->streams.end());
            owner.insert(owner.end(), j->sources.size(), j.get());
        }
        in.dropped = [&owner](size_t source) { return owner[source]->cancelled.load(); };
        const int tokens = batch_tokens_for_beam(batch[0]->opt, batch_tokens, sized_for_beam);
        try {
            std::vector<std::vector<Hypothesis>> hyps = decode_sorted(model, sources, batch[0]->opt, tokens, &in);
            size_t k = 0;
            for (const auto& j : batch) {
                j->hyps.assign(hyps.begin() + (long)k, hyps.begin() + (long)(k + j->sources.size()));
                k += j->sources.size();
            }
        } catch (const std::bad_alloc&) {
            for (const auto& j : batch) j->error = "out of memory decoding its batch: lower --batch-tokens (or the beam)";
        } catch (const std::exception& e) {   // OutOfMemory (transformer.h), from either backend
            for (const auto& j : batch) j->error = e.what();
        }
        q->complete(batch);
        batches++;
    }
    return batches;
}
