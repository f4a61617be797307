// test/test_data.cpp — tests of toolkit/parallel_data.h: reading parallel text, the ids cache,
// batches and the batch sampler (budgets, coverage, shuffling, exact resume).
//
// Works on small synthetic text files in a temporary folder (removed at the end) and uses the
// byte-level Tokenizer() (no merges), so a line of n bytes has exactly n ids. Runs in well
// under a second.
//
// Build: g++ -std=c++17 -O3 -march=native -fopenmp -Wall -Wextra -I. toolkit/parallel_data.cpp
//            tokenizer.cpp test/test_data.cpp -o build/test_data
// Run:   ./build/test_data       (prints PASS/FAIL lines, ends with "data: N passed, M failed")
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>
#include <string>
#include <unistd.h>
#include <vector>

#include "toolkit/parallel_data.h"
#include "test/check.h"

namespace fs = std::filesystem;

static std::string g_dir;   // the temporary folder

static std::string tmp_path(const std::string& name) { return g_dir + "/" + name; }

static void write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
}

static std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

static bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// What f() writes to stderr (through a temporary file put in its place).
template <class F>
static std::string stderr_of(F f) {
    std::fflush(stderr);
    FILE* sink = std::tmpfile();
    int saved = dup(2);
    dup2(fileno(sink), 2);
    f();
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::string text;
    std::rewind(sink);
    for (int c; (c = std::fgetc(sink)) != EOF;) text += (char)c;
    std::fclose(sink);
    return text;
}

// Deterministic synthetic sentence of n bytes (lower-case words and spaces).
static std::string sentence(uint64_t* rng, int n) {
    std::string s;
    while ((int)s.size() < n) {
        if (!s.empty()) s += ' ';
        int w = 1 + (int)random_below(rng, 8);
        for (int k = 0; k < w; k++) s += (char)('a' + random_below(rng, 26));
    }
    s.resize(n);
    if (s.back() == ' ') s.back() = 'x';
    return s;
}

// Writes a parallel corpus of n lines; a few lines are long (> 64 bytes) for max_len tests.
static void write_corpus(const std::string& src, const std::string& tgt, int n) {
    uint64_t rng = 42;
    std::string a, b;
    for (int i = 0; i < n; i++) {
        int ls = 1 + (int)random_below(&rng, 60), lt = 1 + (int)random_below(&rng, 60);
        if (i % 50 == 7) ls = 70 + i % 13;    // too long on the source side
        if (i % 50 == 23) lt = 66 + i % 11;   // too long on the target side
        a += sentence(&rng, ls) + "\n";
        b += sentence(&rng, lt) + "\n";
    }
    write_text(src, a);
    write_text(tgt, b);
}

// ------------------------------------------------------------------ make_batch

static void test_make_batch() {
    std::vector<SentencePair> pairs = {{{10, 11, 12}, {20}}, {{13}, {21, 22, 23, 24}}};
    Batch b = make_batch(pairs);
    const int P = PAD_ID, E = EOS_ID, S = BOS_ID;
    std::vector<int> src = {10, 11, 12, E, 13, E, P, P};                      // (2, 4)
    std::vector<int> tgt_in = {S, 20, P, P, P, S, 21, 22, 23, 24};            // (2, 5)
    std::vector<int> labels = {20, E, P, P, P, 21, 22, 23, 24, E};            // (2, 5)
    check(b.B == 2 && b.S == 4 && b.T == 5, "make_batch: B=%d S=%d T=%d (want 2, 4, 5)", b.B,
          b.S, b.T);
    check(b.src == src && b.tgt_in == tgt_in && b.labels == labels,
          "make_batch: src / tgt_in / labels layout of a hand-made batch");
    check(b.src_tokens == 6 && b.tgt_tokens == 7, "make_batch: src_tokens=%d tgt_tokens=%d "
          "(want 6, 7)", b.src_tokens, b.tgt_tokens);
    Batch one = make_batch(pairs, {1});
    check(one.B == 1 && one.S == 2 && one.T == 5 && one.src == std::vector<int>{13, E},
          "make_batch(pairs, {1}): one row, no padding");
}

// ------------------------------------------------------------------ reading and errors

static void test_read_errors(const Tokenizer& tok) {
    LoadOptions quiet;
    quiet.verbose = false;
    ParallelData d;
    std::string err;
    write_text(tmp_path("a.en"), "one\ntwo\nthree\n");
    write_text(tmp_path("a.es"), "uno\ndos\n");
    bool ok = load_parallel(tmp_path("a.en"), tmp_path("a.es"), tok, quiet, &d, &err);
    check(!ok && contains(err, "a.en") && contains(err, "a.es") && contains(err, "3") &&
              contains(err, "2"),
          "mismatched line counts -> error naming both files and counts: %s", err.c_str());

    write_text(tmp_path("b.en"), "one\n\nthree\n");
    write_text(tmp_path("b.es"), "uno\ndos\ntres");   // no final newline: still 3 lines
    ok = load_parallel(tmp_path("b.en"), tmp_path("b.es"), tok, quiet, &d, &err);
    check(!ok && contains(err, "b.en:2"), "empty line -> error naming file:line: %s",
          err.c_str());
    LoadOptions skip = quiet;
    skip.skip_empty = true;
    ok = load_parallel(tmp_path("b.en"), tmp_path("b.es"), tok, skip, &d, &err);
    check(ok && d.pairs.size() == 2 && d.skipped_empty == 1 && d.line == std::vector<size_t>{1, 3},
          "skip_empty: 2 pairs kept (lines 1, 3), 1 skipped and counted");
    write_text(tmp_path("g.en"), "one\n\nthree\n\nfive\n");
    write_text(tmp_path("g.es"), "uno\ndos\ntres\ncuatro\ncinco\n");
    LoadOptions told = skip;
    told.verbose = true;
    const std::string said = stderr_of([&] {
        ok = load_parallel(tmp_path("g.en"), tmp_path("g.es"), tok, told, &d, &err);
    });
    check(ok && d.pairs.size() == 3 && contains(said, "skipped 2 pairs with an empty line (first at line 2 of "),
          "skip_empty's warning counts the skipped pairs and names the first one's line: %s",
          said.substr(std::min(said.find("warning"), said.size())).c_str());

    write_text(tmp_path("c.en"), "ok\nbad \xff byte\n");
    write_text(tmp_path("c.es"), "ok\nfine\n");
    ok = load_parallel(tmp_path("c.en"), tmp_path("c.es"), tok, skip, &d, &err);
    check(!ok && contains(err, "c.en:2") && contains(err, "UTF-8"),
          "invalid UTF-8 -> error naming file:line: %s", err.c_str());
    write_text(tmp_path("d.es"), std::string("ok\nnul\0here\n", 12));
    ok = load_parallel(tmp_path("c.es"), tmp_path("d.es"), tok, skip, &d, &err);
    check(!ok && contains(err, "d.es:2") && contains(err, "NUL"),
          "NUL byte -> error naming file:line: %s", err.c_str());
    write_text(tmp_path("e.es"), "ok\n\xe0\x80\xaf overlong\n");
    ok = load_parallel(tmp_path("c.es"), tmp_path("e.es"), tok, skip, &d, &err);
    check(!ok && contains(err, "e.es:2"), "overlong UTF-8 -> error: %s", err.c_str());
    ok = load_parallel(tmp_path("missing.en"), tmp_path("c.es"), tok, skip, &d, &err);
    check(!ok && contains(err, "missing.en"), "missing file -> error naming it: %s",
          err.c_str());

    write_text(tmp_path("f.en"), "  crlf line\r\n\tsecond\t\r\n");
    write_text(tmp_path("f.es"), "una\r\ndos\r\n");
    ok = load_parallel(tmp_path("f.en"), tmp_path("f.es"), tok, quiet, &d, &err);
    check(ok && d.pairs.size() == 2 && tok.decode(d.pairs[0].src) == "crlf line" &&
              tok.decode(d.pairs[1].src) == "second" && tok.decode(d.pairs[0].tgt) == "una",
          "CRLF and surrounding blanks are stripped");
}

// What a file that is not UTF-8 text of lines is called, and where a bad byte is (the unit-level
// twin of test_robust.sh's cases); line ends that are text: a lone line with or without its end.
static void test_not_text() {
    using namespace std::string_literals;
    struct Bad { const char* what; std::string bytes; const char* said; } bads[] = {
        {"gzip", "\x1f\x8b\x08\x00"s, " is gzip-compressed"},
        {"UTF-16 little-endian", "\xff\xfe" "a\0\n\0"s, " is UTF-16"},
        {"UTF-16 big-endian", "\xfe\xff\0a\0\n"s, " is UTF-16"},
        {"old Mac line ends", "sun\rmoon\r", " has old Mac line ends"},
        {"a NUL byte", "ok\nnul\0here\n"s, ":2: NUL byte at byte 4 "},
        {"invalid UTF-8", "ok\nbad \xff byte\n", ":2: invalid UTF-8 (byte 0xFF at byte 5)"}};
    std::vector<std::string> lines;
    std::string err;
    for (const Bad& b : bads) {
        write_text(tmp_path("bad.txt"), b.bytes);
        bool ok = read_text_lines(tmp_path("bad.txt"), &lines, &err);
        check(!ok && contains(err, "bad.txt" + std::string(b.said)), "%s -> '%s' (%s)", b.what,
              b.said, ok ? "read" : err.c_str());
    }
    struct Good { const char* what; const char* bytes; std::vector<std::string> lines; } goods[] = {
        {"one line without a line end", "sun and moon", {"sun and moon"}},
        {"one line ending in a carriage return alone", "sun\r", {"sun"}},
        {"a carriage return inside the last line", "sun\nmo\ron", {"sun", "mo\ron"}}};
    for (const Good& g : goods) {
        write_text(tmp_path("good.txt"), g.bytes);
        bool ok = read_text_lines(tmp_path("good.txt"), &lines, &err);
        check(ok && lines == g.lines, "%s: read as %zu line(s) (%s)", g.what, g.lines.size(),
              !ok ? err.c_str() : lines.empty() ? "no line" : lines[0].c_str());
    }
}

// A UTF-8 byte-order mark at a file's start (saved as "UTF-8 with BOM") is dropped, as ./translate
// drops it: the ids of line 1 are those of the file without it, for the training pairs, the lines
// ./bpe learn and the dev BLEU read, and the cached ids; a U+FEFF anywhere else is text. (It had
// been kept as U+FEFF, three byte ids glued to line 1's first word.)
static void test_byte_order_mark(const Tokenizer& tok) {
    const std::string bom = "\xEF\xBB\xBF";
    LoadOptions quiet;
    quiet.verbose = quiet.use_cache = false;
    write_text(tmp_path("plain.en"), "sun moon\nstar\n");
    write_text(tmp_path("plain.es"), "sol luna\nestrella\n");
    write_text(tmp_path("bom.en"), bom + "sun moon\n" + bom + "star\n");
    write_text(tmp_path("bom.es"), bom + "sol luna\nestrella\n");
    ParallelData plain, marked;
    std::string err;
    bool ok = load_parallel(tmp_path("plain.en"), tmp_path("plain.es"), tok, quiet, &plain, &err) &&
              load_parallel(tmp_path("bom.en"), tmp_path("bom.es"), tok, quiet, &marked, &err);
    check(ok && marked.pairs.size() == 2 && marked.pairs[0].src == plain.pairs[0].src &&
              marked.pairs[0].tgt == plain.pairs[0].tgt,
          "a BOM at both files' start dropped: line 1's ids are the plain files' (%s / %s)",
          ok ? tok.decode(marked.pairs[0].src).c_str() : err.c_str(),
          ok ? tok.decode(marked.pairs[0].tgt).c_str() : "");
    check(ok && marked.pairs.size() == 2 && tok.decode(marked.pairs[1].src) == bom + "star",
          "a U+FEFF at line 2's start is text, kept");
    std::vector<std::string> lines;
    ok = read_text_lines(tmp_path("bom.es"), &lines, &err);
    check(ok && lines == std::vector<std::string>{"sol luna", "estrella"},
          "read_text_lines (./bpe learn, dev and test references) drops it: '%s'",
          lines.empty() ? err.c_str() : lines[0].c_str());

    // The ids cache keys on the file's bytes, BOM and all: a cache of format version 2 (which kept
    // the BOM as U+FEFF: the same text hash, other ids) is stale, not trusted.
    std::vector<std::vector<int>> ids;
    std::string note, cpath = cache_path(tmp_path("bom.es"), tok.fingerprint());
    ok = encode_file_cached(tmp_path("bom.es"), tok, true, &ids, &note, &err);
    check(ok && ids[0] == plain.pairs[0].tgt, "the cached ids of a BOM'd file are without it (%s)", note.c_str());
    std::string bytes = read_bytes(cpath);
    const uint32_t version2 = 2;
    if (bytes.size() >= 12) bytes.replace(8, 4, (const char*)&version2, 4);
    write_text(cpath, bytes);
    ok = encode_file_cached(tmp_path("bom.es"), tok, true, &ids, &note, &err);
    check(ok && contains(note, "stale: format version 2") && ids[0] == plain.pairs[0].tgt,
          "a format-version-2 cache (a BOM kept as U+FEFF) is stale and rebuilt (%s)", note.c_str());
}

// ------------------------------------------------------------------ the cache

// Flips one byte of a file at `offset` (from the end when negative).
static void corrupt_byte(const std::string& path, long offset, unsigned char mask = 0x5A) {
    std::string bytes = read_bytes(path);
    size_t at = offset >= 0 ? (size_t)offset : bytes.size() + offset;
    bytes[at] = (char)(bytes[at] ^ mask);
    write_text(path, bytes);
}

static void test_cache(const Tokenizer& tok) {
    std::string src = tmp_path("cache.en"), tgt = tmp_path("cache.es"), err, note;
    write_corpus(src, tgt, 300);
    std::vector<std::vector<int>> first, again;
    bool ok = encode_file_cached(src, tok, true, &first, &note, &err);
    std::string cpath = cache_path(src, tok.fingerprint());
    check(ok && note == "cache written" && fs::exists(cpath) && first.size() == 300,
          "first encode writes %s (%s)", fs::path(cpath).filename().c_str(), note.c_str());
    std::vector<std::string> lines;
    read_text_lines(src, &lines, &err);
    check(first[5] == tok.encode(lines[5]) && first[299] == tok.encode(lines[299]),
          "cached ids are the tokenizer's encoding of each line");
    ok = encode_file_cached(src, tok, true, &again, &note, &err);
    check(ok && note == "cache hit" && again == first, "second encode reads the cache (%s)",
          note.c_str());

    // (The ids end the file, little-endian int32: byte -12 is the low byte of the third id from
    // the end, whose lowest bit flipped leaves a valid id that only the checksum can tell.)
    struct Damage { const char* what; long offset; unsigned char mask; const char* why; } damages[] = {
        {"a flipped id byte", -9, 0x5A, "corrupt"}, {"a flipped offset byte", 64 + 8 * 10 + 1, 0x5A, "corrupt"},
        {"a flipped header byte (fingerprint)", 17, 0x5A, "stale: other tokenizer"},
        {"a flipped magic byte", 0, 0x5A, "bad magic"}, {"an id one off (still a valid id)", -12, 0x01, "checksum"}};
    for (const Damage& dm : damages) {
        corrupt_byte(cpath, dm.offset, dm.mask);
        ok = encode_file_cached(src, tok, true, &again, &note, &err);
        check(ok && contains(note, "cache rebuilt") && contains(note, dm.why) && again == first,
              "cache with %s is detected and rebuilt (%s)", dm.what, note.c_str());
    }
    std::string bytes = read_bytes(cpath);
    write_text(cpath, bytes.substr(0, bytes.size() - 6));
    ok = encode_file_cached(src, tok, true, &again, &note, &err);
    check(ok && contains(note, "corrupt") && again == first, "truncated cache is rebuilt (%s)",
          note.c_str());
    encode_file_cached(src, tok, true, &again, &note, &err);
    check(note == "cache hit", "the rebuilt cache is used next time (%s)", note.c_str());

    // A changed text of the same size: only the modification time tells.
    std::string text = read_bytes(src);
    text[0] = text[0] == 'q' ? 'r' : 'q';
    auto old_time = fs::last_write_time(src);
    write_text(src, text);
    fs::last_write_time(src, old_time + std::chrono::seconds(1));
    ok = encode_file_cached(src, tok, true, &again, &note, &err);
    check(ok && contains(note, "stale") && again[0] != first[0] && again[1] == first[1],
          "edited text file (same size) -> stale cache rebuilt (%s)", note.c_str());

    // ... and one of the same size AND modification time (cp -p, rsync -a, tar restore it): the
    // text's hash tells (the size and time had keyed the cache: the old ids, trusted)
    encode_file_cached(src, tok, true, &first, &note, &err);
    text[0] = text[0] == 'q' ? 'r' : 'q';
    old_time = fs::last_write_time(src);
    write_text(src, text);
    fs::last_write_time(src, old_time);
    ok = encode_file_cached(src, tok, true, &again, &note, &err);
    check(ok && contains(note, "stale") && again[0] != first[0] && again[1] == first[1],
          "edited text file (same size, same modification time) -> stale cache rebuilt (%s)", note.c_str());

    ok = encode_file_cached(src, tok, false, &again, &note, &err);
    check(ok && again.size() == 300, "use_cache=false encodes without the cache (%s)",
          note.c_str());
}

// Encodes `path` through its cache and checks the note holds `want` and the ids are `ids`.
static void ok_or_rebuilt(const std::string& path, const Tokenizer& tok,
                          const std::vector<std::vector<int>>& ids, const std::string& want,
                          const char* what) {
    std::vector<std::vector<int>> got;
    std::string note, err;
    bool ok = encode_file_cached(path, tok, true, &got, &note, &err);
    check(ok && contains(note, want) && got == ids, "%s (%s)", what, ok ? note.c_str() : err.c_str());
}

// The ids cache as another program would read and write it, from the layout in
// toolkit/parallel_data.cpp's comment, with its hash restated here: the format is pinned (a
// changed hash would call every cache corrupt, and every checkpoint's data hash another
// corpus'), and caches can be forged with a valid checksum to reach the checks behind it.
struct FormatHash {   // 8-byte little-endian words; a tail zero-padded, its length in the top byte
    uint64_t h = 0x243F6A8885A308D3ull;
    void mix(uint64_t w) {
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    void add(const std::string& bytes) {
        size_t at = 0;
        for (; at + 8 <= bytes.size(); at += 8) mix(word(bytes, at, 8));
        if (at < bytes.size()) mix(word(bytes, at, bytes.size() - at) ^ (uint64_t)(bytes.size() - at) << 56);
    }
    static uint64_t word(const std::string& bytes, size_t at, size_t n) {
        uint64_t w = 0;
        for (size_t k = 0; k < n; k++) w |= (uint64_t)(unsigned char)bytes[at + k] << 8 * k;
        return w;
    }
};

struct CacheFile {                 // header (64 bytes), offsets (n_lines + 1), ids (n_ids)
    std::string header;
    std::vector<uint64_t> offsets;
    std::vector<int32_t> ids;
    uint64_t field(size_t at) const { return FormatHash::word(header, at, 8); }
    void set(size_t at, uint64_t v) { header.replace(at, 8, (const char*)&v, 8); }
    std::string body() const {
        return std::string((const char*)offsets.data(), offsets.size() * 8) +
               std::string((const char*)ids.data(), ids.size() * 4);
    }
    std::string sealed() const {   // with the checksum of bytes [0, 56), then of the body
        FormatHash hash;           // (the offsets are whole words: the body hashes as one run)
        hash.add(header.substr(0, 56));
        hash.add(body());
        CacheFile c = *this;
        c.set(56, hash.h);
        return c.header + body();
    }
};

static CacheFile parse_cache(const std::string& bytes) {
    CacheFile c;
    c.header = bytes.substr(0, 64);
    c.offsets.resize(c.field(40) + 1);
    std::memcpy(c.offsets.data(), bytes.data() + 64, c.offsets.size() * 8);
    c.ids.resize(c.field(48));
    std::memcpy(c.ids.data(), bytes.data() + 64 + c.offsets.size() * 8, c.ids.size() * 4);
    return c;
}

static void test_cache_format(const Tokenizer& tok) {
    const std::string text = "sun moon\n\nstar\n", path = tmp_path("format.en");   // line 2 empty
    const std::string cpath = cache_path(path, tok.fingerprint());
    write_text(path, text);
    std::vector<std::vector<int>> ids, again;
    std::string note, err;
    encode_file_cached(path, tok, true, &ids, &note, &err);
    const std::string bytes = read_bytes(cpath);
    FormatHash text_hash;
    text_hash.add(text);
    const bool sized = bytes.size() == 64 + 8 * 4 + 4 * 12;
    const CacheFile c = sized ? parse_cache(bytes) : CacheFile{};
    check(sized && c.header.compare(0, 8, "AIAYNIDS") == 0 && c.field(8) == (64ull << 32 | 3) &&
              c.field(16) == tok.fingerprint() && c.field(24) == text.size() &&
              c.field(32) == text_hash.h && c.field(40) == 3 && c.field(48) == 12 &&
              c.offsets == std::vector<uint64_t>{0, 8, 8, 12} && c.sealed() == bytes,
          "the cache of 3 lines (one empty) is the documented layout: magic, version 3, header 64, "
          "text size and hash, counts, offsets 0 8 8 12, checksum (%zu bytes)", bytes.size());
    ok_or_rebuilt(path, tok, ids, "cache hit", "a cache with an empty line (two equal offsets) is used");

    struct Forged { const char* what; std::function<void(CacheFile*)> edit; const char* why; } forged[] = {
        {"the first offset 1", [](CacheFile* f) { f->offsets[0] = 1; }, "corrupt: offsets"},
        {"the last offset short of the ids", [](CacheFile* f) { f->offsets[3] = 11; }, "corrupt: offsets"},
        {"offsets going back", [](CacheFile* f) { f->offsets[1] = 9; }, "corrupt: offsets"},
        {"an id of -1", [](CacheFile* f) { f->ids[4] = -1; }, "corrupt: id out of range"},
        {"an id of 0 (PAD)", [](CacheFile* f) { f->ids[4] = Tokenizer::kPad; }, "corrupt: id out of range"},
        {"an id of 3 (</s>), the last special", [](CacheFile* f) { f->ids[4] = Tokenizer::kEos; },
         "corrupt: id out of range"},
        {"an id of the vocabulary's size", [&](CacheFile* f) { f->ids[4] = tok.vocab_size(); },
         "corrupt: id out of range"},
        {"2^62 more ids than it holds (4 * n_ids wraps to the file's size)",
         [](CacheFile* f) { f->set(48, f->field(48) + (1ull << 62)); }, "corrupt: file size"},
        {"2^61 - 1 lines and no body (8 * (n_lines + 1) wraps to 0)", [](CacheFile* f) {
             f->set(40, (1ull << 61) - 1);
             f->set(48, 0);
             f->offsets.clear();
             f->ids.clear();
         }, "corrupt: file size"}};
    for (const Forged& fg : forged) {
        CacheFile f = c;
        fg.edit(&f);
        write_text(cpath, f.sealed());
        ok_or_rebuilt(path, tok, ids, fg.why, (std::string("a cache forged with a valid checksum and ") + fg.what +
                                               " is refused and rebuilt").c_str());
    }
}

// ------------------------------------------------------------------ the sampler

static BatchingOptions small_options(uint64_t seed) {
    BatchingOptions o;
    o.max_src_tokens = 512;
    o.max_tgt_tokens = 384;
    o.max_len = 64;
    o.seed = seed;
    return o;
}

// Indices of every batch of `epochs` epochs, in the order next() yields them.
static std::vector<std::vector<uint32_t>> run_epochs(BatchSampler* s, int epochs) {
    std::vector<std::vector<uint32_t>> out;
    for (size_t i = 0; i < epochs * s->batches_per_epoch(); i++) {
        out.push_back(s->peek_indices());
        s->next();
    }
    return out;
}

// True when batch b holds exactly the pairs `which`, laid out as transformer.h says.
static bool batch_layout_ok(const Batch& b, const std::vector<SentencePair>& pairs,
                            const std::vector<uint32_t>& which) {
    int S = 0, T = 0, src_tok = 0, tgt_tok = 0;
    for (uint32_t i : which) {
        S = std::max(S, (int)pairs[i].src.size() + 1);
        T = std::max(T, (int)pairs[i].tgt.size() + 1);
    }
    if (b.B != (int)which.size() || b.S != S || b.T != T) return false;
    for (int r = 0; r < b.B; r++) {
        const SentencePair& p = pairs[which[r]];
        std::vector<int> src(S, PAD_ID), tin(T, PAD_ID), lab(T, PAD_ID);
        std::copy(p.src.begin(), p.src.end(), src.begin());
        src[p.src.size()] = EOS_ID;
        tin[0] = BOS_ID;
        std::copy(p.tgt.begin(), p.tgt.end(), tin.begin() + 1);
        std::copy(p.tgt.begin(), p.tgt.end(), lab.begin());
        lab[p.tgt.size()] = EOS_ID;
        if (!std::equal(src.begin(), src.end(), b.src.begin() + (size_t)r * S) ||
            !std::equal(tin.begin(), tin.end(), b.tgt_in.begin() + (size_t)r * T) ||
            !std::equal(lab.begin(), lab.end(), b.labels.begin() + (size_t)r * T))
            return false;
        src_tok += (int)p.src.size() + 1;
        tgt_tok += (int)p.tgt.size() + 1;
    }
    return b.src_tokens == src_tok && b.tgt_tokens == tgt_tok &&
           b.src.size() == (size_t)b.B * S && b.labels.size() == (size_t)b.B * T;
}

static void test_sampler_epoch(const ParallelData& d) {
    BatchingOptions o = small_options(7);
    BatchSampler s;
    std::string err;
    bool ok = s.build(d.pairs, o, &err);
    size_t want_long = 0;
    for (const SentencePair& p : d.pairs)
        want_long += (int)p.src.size() + 1 > o.max_len || (int)p.tgt.size() + 1 > o.max_len;
    check(ok && want_long > 0 && s.skipped_long() == want_long &&
              s.pairs_kept() + s.skipped_long() == d.pairs.size(),
          "too-long pairs skipped and counted: %zu of %zu (want %zu), %zu kept in %zu batches",
          s.skipped_long(), d.pairs.size(), want_long, s.pairs_kept(), s.batches_per_epoch());
    size_t real_src = 0, real_tgt = 0;   // non-pad tokens of the kept pairs
    for (const SentencePair& p : d.pairs)
        if ((int)p.src.size() + 1 <= o.max_len && (int)p.tgt.size() + 1 <= o.max_len) {
            real_src += p.src.size() + 1;
            real_tgt += p.tgt.size() + 1;
        }
    std::printf("     (padding efficiency: source %.1f%%, target %.1f%% of padded tokens are "
                "real)\n", 100.0 * real_src / s.padded_src_tokens(),
                100.0 * real_tgt / s.padded_tgt_tokens());

    for (int epoch = 0; epoch < 2; epoch++) {
        std::map<uint32_t, int> seen;
        bool budgets = true, layout = true;
        for (size_t i = 0; i < s.batches_per_epoch(); i++) {
            std::vector<uint32_t> which = s.peek_indices();
            const Batch& b = s.next();
            budgets &= b.B * b.S <= o.max_src_tokens && b.B * b.T <= o.max_tgt_tokens;
            budgets &= b.S <= o.max_len && b.T <= o.max_len;
            layout &= batch_layout_ok(b, d.pairs, which);
            for (uint32_t k : which) seen[k]++;
        }
        bool once = seen.size() == s.pairs_kept();
        for (auto& kv : seen) once &= kv.second == 1;
        check(once, "epoch %d: each of the %zu kept pairs appears exactly once", epoch,
              s.pairs_kept());
        check(budgets, "epoch %d: every batch has B*S <= %d, B*T <= %d, S,T <= max_len",
              epoch, o.max_src_tokens, o.max_tgt_tokens);
        check(layout, "epoch %d: src/tgt_in/labels layout and token counts of every batch",
              epoch);
        check(s.position().epoch == epoch + 1 && s.position().index == 0,
              "position after epoch %d is (epoch %lld, index %lld)", epoch,
              (long long)s.position().epoch, (long long)s.position().index);
    }
}

// Batches by approximate length (§5.1; toolkit/parallel_data.h): tensor2tensor's length
// buckets, bucket 0 up to 8 tokens and each next one's lengths less than 10% apart; and the
// batches, in their built order, run through the pairs sorted by (bucket of the source, target
// length, source length), so that each batch pads little on either side.
static void test_sampler_buckets(const ParallelData& d) {
    int wide = 0, first_end = 0, lo = 1, falls = 0;
    for (int len = 2; len <= 3000; len++) {
        const int b = length_bucket(len), before = length_bucket(len - 1);
        falls += b < before;
        if (b != before) {   // [lo, len - 1] was one bucket
            if (lo == 1) first_end = len - 1;
            else wide += !(len - 1 < 1.1 * lo);
            lo = len;
        }
    }
    check(falls == 0 && first_end == 8 && wide == 0 && length_bucket(1) == 0,
          "length buckets over 1-3000 tokens: never decreasing (%d falls), bucket 0 up to %d tokens (want 8), "
          "%d later buckets 10%% wide or more", falls, first_end, wide);
    BatchingOptions source_binds = small_options(7);   // (small_options: the target budget binds)
    source_binds.max_src_tokens = 300, source_binds.max_tgt_tokens = 1000;
    size_t exact_src = 0, exact_tgt = 0;
    for (const BatchingOptions& o : {small_options(7), source_binds}) {
        BatchSampler s;
        std::string err;
        check(s.build(d.pairs, o, &err), "sampler for the length order (%s)", err.c_str());
        std::tuple<int, int, int> previous{-1, 0, 0};
        size_t out_of_order = 0, n = 0, short_of_budget = 0;
        for (size_t k = 0; k < s.batches().size(); k++) {
            const std::vector<uint32_t>& b = s.batches()[k];
            size_t S_max = 0, T_max = 0;
            for (uint32_t i : b) {
                const int S = (int)d.pairs[i].src.size() + 1, T = (int)d.pairs[i].tgt.size() + 1;
                const std::tuple<int, int, int> key{length_bucket(S), T, S};
                out_of_order += key < previous, n++;
                previous = key;
                S_max = std::max(S_max, (size_t)S), T_max = std::max(T_max, (size_t)T);
            }
            exact_src += b.size() * S_max == (size_t)o.max_src_tokens;
            exact_tgt += b.size() * T_max == (size_t)o.max_tgt_tokens;
            if (k + 1 == s.batches().size()) break;
            const SentencePair& next = d.pairs[s.batches()[k + 1][0]];   // would it have fitted?
            const size_t B = b.size() + 1;
            short_of_budget += B * std::max(S_max, next.src.size() + 1) <= (size_t)o.max_src_tokens &&
                               B * std::max(T_max, next.tgt.size() + 1) <= (size_t)o.max_tgt_tokens;
        }
        check(out_of_order == 0 && n == s.pairs_kept() && short_of_budget == 0,
              "budgets %d + %d: the %zu batches run through the %zu kept pairs by (source bucket, target length, "
              "source length): %zu out of that order; %zu closed while the next pair fitted",
              o.max_src_tokens, o.max_tgt_tokens, s.batches().size(), n, out_of_order, short_of_budget);
    }
    check(exact_src > 0 && exact_tgt > 0, "batches that fill a budget exactly (taken): %zu source, %zu target",
          exact_src, exact_tgt);
}

static void test_sampler_order(const ParallelData& d) {
    std::string err;
    BatchSampler a, b, c;
    a.build(d.pairs, small_options(7), &err);
    b.build(d.pairs, small_options(7), &err);
    c.build(d.pairs, small_options(8), &err);
    auto ra = run_epochs(&a, 2), rb = run_epochs(&b, 2), rc = run_epochs(&c, 2);
    check(a.fingerprint() == b.fingerprint() && a.fingerprint() != c.fingerprint(),
          "fingerprint: equal for equal settings, differs for another seed");
    check(ra == rb, "same seed -> same batches in the same order (2 epochs, %zu batches)",
          ra.size());
    check(ra != rc, "different seed -> different order");
    size_t n = a.batches_per_epoch();
    std::vector<std::vector<uint32_t>> e0(ra.begin(), ra.begin() + n), e1(ra.begin() + n, ra.end());
    check(e0 != e1, "epoch 1's batch order differs from epoch 0's");
    std::vector<uint32_t> o0 = a.epoch_order(0), sorted = o0;
    std::sort(sorted.begin(), sorted.end());
    bool perm = true;
    for (size_t i = 0; i < sorted.size(); i++) perm &= sorted[i] == i;
    check(perm && o0 == a.epoch_order(0), "epoch_order is a permutation and a pure function");

    BatchingOptions fixed = small_options(7);
    fixed.shuffle = false;
    BatchSampler f;
    f.build(d.pairs, fixed, &err);
    auto rf = run_epochs(&f, 2);
    std::vector<std::vector<uint32_t>> f0(rf.begin(), rf.begin() + f.batches_per_epoch()),
        f1(rf.begin() + f.batches_per_epoch(), rf.end());
    check(f0 == f.batches() && f1 == f.batches(),
          "shuffle=false: every epoch yields the batches in length order");
}

static void test_sampler_resume(const ParallelData& d) {
    std::string err;
    BatchSampler a;
    a.build(d.pairs, small_options(11), &err);
    size_t n = a.batches_per_epoch();
    for (size_t i = 0; i < n + n - 3; i++) a.next();   // into the second epoch
    SamplerPosition saved = a.position();
    std::vector<Batch> want;
    for (int i = 0; i < 8; i++) want.push_back(a.next());   // crosses into epoch 2
    BatchSampler b;
    b.build(d.pairs, small_options(11), &err);
    bool ok = b.restore(saved, &err);
    bool same = ok;
    for (int i = 0; i < 8 && same; i++) {
        const Batch& got = b.next();
        same = got.src == want[i].src && got.tgt_in == want[i].tgt_in &&
               got.labels == want[i].labels && got.B == want[i].B;
    }
    check(same && saved.epoch == 1 && b.position().epoch == 2,
          "restore(epoch %lld, index %lld) in a fresh sampler continues identically across "
          "the epoch boundary", (long long)saved.epoch, (long long)saved.index);
    SamplerPosition bad;
    bad.index = (int64_t)n;
    ok = b.restore(bad, &err);
    check(!ok && contains(err, "outside"),
          "restore of an impossible position -> error: %s", err.c_str());
}

static void test_sampler_options(const ParallelData& d) {
    std::string err;
    BatchSampler s;
    BatchingOptions o = small_options(1);
    o.max_src_tokens = 32;   // smaller than max_len 64
    bool ok = s.build(d.pairs, o, &err);
    check(!ok && contains(err, "max_len"), "budget smaller than max_len -> error: %s",
          err.c_str());
    std::vector<SentencePair> long_pairs = {{{5, 6, 7}, {8}}, {{5}, {6, 7, 8, 9}}};
    o = small_options(1);
    o.max_len = 3;
    ok = s.build(long_pairs, o, &err);
    check(!ok && contains(err, "short enough"), "no pair fits max_len -> error: %s",
          err.c_str());
    o.max_len = 4;
    ok = s.build(long_pairs, o, &err);
    check(ok && s.pairs_kept() == 1 && s.skipped_long() == 1,
          "max_len 4: the pair with source+1 = 4 is kept, target+1 = 5 is skipped");

    // max_len_ratio: the longer side's tokens over the shorter's (3, 4, 1, 1.5; the 7-to-1 pair
    // is too long for max_len 6 and counts there alone)
    const std::vector<SentencePair> ratio_pairs = {{{5, 6, 7}, {8}}, {{5}, {6, 7, 8, 9}}, {{5, 6}, {7, 8}},
                                                   {{5, 6}, {7, 8, 9}}, {{1, 2, 3, 4, 5, 6, 7}, {8}}};
    o = small_options(1);
    o.max_len = 6;
    for (double ratio : {0.0, 3.0, 1.0, 4.0}) {
        o.max_len_ratio = ratio;
        ok = s.build(ratio_pairs, o, &err);
        const size_t want = ratio == 0 ? 0 : ratio == 1 ? 3 : ratio == 3 ? 1 : 0;
        check(ok && s.skipped_ratio() == want && s.skipped_long() == 1 && s.pairs_kept() == 4 - want,
              "max_len_ratio %g: %zu pairs skipped for their ratio (want %zu), %zu too long, %zu kept", ratio,
              s.skipped_ratio(), want, s.skipped_long(), s.pairs_kept());
    }
    o.max_len_ratio = 0.5;
    ok = s.build(ratio_pairs, o, &err);
    check(!ok && contains(err, "at least 1"), "max_len_ratio 0.5 -> error: %s", err.c_str());
    o.max_len_ratio = 1;
    ok = s.build({{{5, 6, 7}, {8}}}, o, &err);
    check(!ok && contains(err, "length ratio"), "no pair within the ratio -> error: %s", err.c_str());
}

static void test_random() {
    uint64_t st = 0;
    uint64_t first = splitmix64_next(&st);
    check(first == 0xE220A8397B1DCDAFull, "splitmix64(0) = %016llx (reference e220a8397b1dcdaf)",
          (unsigned long long)first);
    st = 5;
    bool in_range = true;
    for (int i = 0; i < 1000; i++) in_range &= random_below(&st, 7) < 7;
    check(in_range, "random_below(7) stays in [0, 7)");
}

int main() {
    char tmpl[] = "/tmp/test_data_XXXXXX";
    if (!mkdtemp(tmpl)) {
        std::perror("mkdtemp");
        return 1;
    }
    g_dir = tmpl;
    Tokenizer tok;   // byte level: each byte of a line is one id
    test_random();
    test_make_batch();
    test_read_errors(tok);
    test_not_text();
    test_byte_order_mark(tok);
    test_cache(tok);
    test_cache_format(tok);

    std::string err;
    write_corpus(tmp_path("train.en"), tmp_path("train.es"), 1000);
    ParallelData d;
    LoadOptions quiet;
    quiet.verbose = false;
    bool ok = load_parallel(tmp_path("train.en"), tmp_path("train.es"), tok, quiet, &d, &err);
    check(ok && d.pairs.size() == 1000, "load_parallel: 1000 pairs (%s)", err.c_str());
    if (ok) {
        test_sampler_epoch(d);
        test_sampler_buckets(d);
        test_sampler_order(d);
        test_sampler_resume(d);
        test_sampler_options(d);
    }
    fs::remove_all(g_dir);
    return check_summary("data");
}
