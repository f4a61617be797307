// test/fuzz/fuzz_parallel.cpp — the parallel-text reader (load_parallel: two text files, their
// ids cache) and the batcher on arbitrary bytes. The first byte holds switches (skip_empty, a
// corrupted cache), the second where the input splits into the source and target files. A
// load succeeds or fails with a message; a second load from the cache it wrote gives the same
// ids; a cache damaged by the input's bytes is rebuilt, never trusted; every kept pair fits a
// batch within the budget.
#include <cstring>

#include "test/fuzz/fuzz.h"
#include "toolkit/parallel_data.h"

static bool load(const std::string& src, const std::string& tgt, bool skip_empty, bool cache,
                 ParallelData* out, std::string* err) {
    LoadOptions o;
    o.skip_empty = skip_empty;
    o.use_cache = cache;
    o.verbose = false;
    return load_parallel(src, tgt, fuzz_tokenizer(), o, out, err);
}

static void check_batches(const ParallelData& d) {
    BatchingOptions b;
    b.max_src_tokens = b.max_tgt_tokens = 64;
    b.max_len = 32;
    BatchSampler s;
    std::string err;
    if (!s.build(d.pairs, b, &err)) { FUZZ_CHECK(!err.empty(), "a refusal has a message"); return; }
    for (size_t i = 0; i < s.batches_per_epoch(); i++) {
        const Batch& batch = s.next();
        FUZZ_CHECK((size_t)batch.B * batch.S <= 64 && (size_t)batch.B * batch.T <= 64, "budget kept");
    }
}

// Overwrites the cache file with a copy damaged by the input's bytes (XOR from the start,
// truncated to a length taken from them).
static void damage_cache(const std::string& text_path, const std::string& noise) {
    std::string path = cache_path(text_path, fuzz_tokenizer().fingerprint());
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return;
    std::string c;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) c.append(buf, n);
    std::fclose(f);
    for (size_t i = 0; i < noise.size() && i < c.size(); i++) c[i] ^= noise[i];
    if (!noise.empty()) c.resize(std::min(c.size(), (size_t)(unsigned char)noise[0] * 4 + 1));
    FILE* w = std::fopen(path.c_str(), "r+b");   // keep the text's stamp: write in place
    if (!w) return;
    std::fwrite(c.data(), 1, c.size(), w);
    std::fclose(w);
    FUZZ_CHECK(truncate(path.c_str(), (off_t)c.size()) == 0, "truncate the cache");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2 || size > 1 << 18) return 0;
    const bool skip_empty = data[0] & 1, corrupt = data[0] & 2;
    std::string rest = fuzz_rest(data, size, 2);
    size_t cut = rest.size() * data[1] / 255;
    std::string src = fuzz_write("train.src", rest.data(), cut);
    std::string tgt = fuzz_write("train.tgt", rest.data() + cut, rest.size() - cut);
    // a fresh text: any cache of an earlier input must not match (size and hash key it)
    unlink(cache_path(src, fuzz_tokenizer().fingerprint()).c_str());
    unlink(cache_path(tgt, fuzz_tokenizer().fingerprint()).c_str());
    ParallelData plain, cached, again;
    std::string err;
    bool ok = load(src, tgt, skip_empty, false, &plain, &err);
    if (!ok) FUZZ_CHECK(!err.empty(), "a refusal has a message");
    bool ok_cached = load(src, tgt, skip_empty, true, &cached, &err);
    FUZZ_CHECK(ok == ok_cached, "the cache does not change the verdict");
    if (!ok) return 0;
    FUZZ_CHECK(plain.lines == cached.lines && plain.pairs.size() == cached.pairs.size(), "same pairs");
    if (corrupt) damage_cache(src, rest.substr(cut));
    FUZZ_CHECK(load(src, tgt, skip_empty, true, &again, &err), "a load from the cache succeeds");
    for (size_t i = 0; i < plain.pairs.size(); i++)
        FUZZ_CHECK(plain.pairs[i].src == again.pairs[i].src && plain.pairs[i].tgt == again.pairs[i].tgt,
                   "the cached ids are the text's ids");
    check_batches(plain);
    return 0;
}
