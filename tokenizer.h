// tokenizer.h — joint byte-pair-encoding (BPE) tokenizer: learn, encode, decode, save, load.
//
// One vocabulary is shared by both languages (the paper's "shared source-target vocabulary").
// Ids are laid out as
//
//     0 <pad>   1 <unk>   2 <s>   3 </s>           specials (fixed, DESIGN.md)
//     4 .. 259                                     the 256 single bytes (byte b has id 4 + b)
//     260 .. 260+C-1                               multi-byte UTF-8 characters seen in training
//     then                                         pieces made by merges, in the order learned
//
// Because every byte has a piece, ANY input encodes (unseen characters and invalid UTF-8 fall
// back to bytes) and <unk> is never produced. White space is part of the pieces (a single
// space is glued to the start of the following word, like SentencePiece's "▁"), so
// decode(encode(text)) == text byte for byte for every input.
//
// How BPE works, in one paragraph: split the training text into words and count them; write
// each word as a sequence of characters; repeatedly find the adjacent pair of symbols that
// occurs most often (over all words, weighted by word count), make it a new symbol, and
// replace it everywhere. The list of merges, in the order learned, IS the model. To encode a
// new word, start from its characters and apply the merges that fit, lowest rank first.
// tokenizer.cpp explains the fast incremental version of both steps.
//
// Thread safety: all const methods may be called concurrently (encode() shares a word cache
// guarded by a mutex; encode_lines() uses one private cache per thread).
//
// Build: g++ -std=c++17 -O3 -march=native -fopenmp -I. tokenizer.cpp your_code.cpp
// CLI:   ./bpe --help     (cli/bpe.cpp)         Test: test/test_tokenizer.cpp
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

// UTF-8, written once for the project (tokenizer, data loading, ./translate):
// utf8_char: the length (2..4) of the valid multi-byte character at s[0..n), or 1 if s[0] is
// ASCII, or 0 if s[0] does not start a valid character (stray continuation byte, overlong
// form, surrogate, > U+10FFFF, truncated); *cp receives the code point (or the byte when
// 0/1). n must be >= 1.
int utf8_char(const unsigned char* s, size_t n, uint32_t* cp);
// Appends code point cp (<= U+10FFFF) to *out as UTF-8 (a surrogate as its 3-byte form).
void append_utf8(std::string* out, uint32_t cp);
// A code point of UTF-8 text where it lies: its bytes and value. A byte that does not start a
// valid character (utf8_char's 0) is a unit of its own: valid false, cp the byte.
struct Utf8Unit {
    std::string_view text;
    uint32_t cp;
    bool valid;
};
// text's code points in order, each invalid byte one unit: how the metrics (toolkit/bleu_score.h,
// toolkit/ter_score.h) read text they must never refuse.
std::vector<Utf8Unit> utf8_units(std::string_view text);
// Byte offset (0-based) of the first invalid UTF-8 sequence in text, or -1 if it is valid.
long invalid_utf8_at(std::string_view text);
// text with each byte that does not start a valid UTF-8 character (utf8_char) replaced by
// U+FFFD; valid characters are kept.
std::string replace_invalid_utf8(std::string_view text);
// text without the characters of `chars` at its ends (e.g. " \t\r": the blanks training data
// and ./translate's lines lose there).
std::string_view trim(std::string_view text, std::string_view chars);

struct Tokenizer {
    static constexpr int kPad = 0, kUnk = 1, kBos = 2, kEos = 3;
    static constexpr int kNumSpecials = 4;
    static constexpr int kFirstByte = 4;        // id of byte 0x00
    static constexpr int kFirstChar = 260;      // first id after the byte pieces
    static constexpr int kMinCharCount = 2;     // rarer characters stay as bytes when learning
    static constexpr int kMaxVocab = 1 << 24;   // sanity bound for learn() and deserialize()

    // A tokenizer with only the specials and the 256 byte pieces (vocab_size() == 260).
    Tokenizer();

    // Learns a joint BPE from text lines (both languages) up to vocab_size total ids (incl.
    // specials + byte pieces). Deterministic. Stops early (vocab_size() smaller than asked)
    // only when every word of the corpus has become a single piece. Throws
    // std::invalid_argument when vocab_size < 260 or > kMaxVocab.
    static Tokenizer learn(const std::vector<std::string>& lines, int vocab_size);

    std::vector<int> encode(std::string_view text) const;   // no specials added
    // Encodes many lines in parallel (OpenMP), one result per line, same order.
    std::vector<std::vector<int>> encode_lines(const std::vector<std::string>& lines) const;

    // Concatenates the bytes of the pieces; skips ids 0..3 (pad, unk, <s>, </s>).
    // Throws std::out_of_range for an id < 0 or >= vocab_size().
    std::string decode(const int* ids, size_t n) const;
    std::string decode(const std::vector<int>& ids) const;
    // decode() for text that leaves the program (translations): a model may put out any byte
    // sequence, so each byte that is not part of a valid UTF-8 character becomes U+FFFD, and a
    // line break (\n, \r) a space: one translation is one output line.
    std::string decode_text(const std::vector<int>& ids) const;
    // *text += decode_text(ids) without spaces at its ends (training text has none there), after
    // a space when both are non-empty: the translations of a line's pieces, joined.
    void append_text(std::string* text, const std::vector<int>& ids) const;

    // Human-readable text (format at the top of tokenizer.cpp), carried inside checkpoints.
    std::string serialize() const;
    // Parses serialize()'s output. Returns false with a message on any malformed input;
    // *out is left untouched then.
    static bool deserialize(const std::string& text, Tokenizer* out, std::string* error);

    int vocab_size() const { return (int)pieces_.size(); }
    int num_chars() const { return num_chars_; }             // character pieces
    int num_merges() const { return (int)merges_.size(); }   // merge rules (>= merged pieces)
    // Readable form of a piece: "<pad>".."</s>" for specials, otherwise its bytes with a space
    // shown as ▁ and unprintable bytes (and a literal ▁) escaped as \xHH, backslash as \\.
    std::string piece(int id) const;
    const std::string& piece_bytes(int id) const { return pieces_.at(id); }  // raw bytes
    uint64_t fingerprint() const { return fingerprint_; }   // FNV-1a 64 of serialize()

    // Pre-tokenization, exposed for tests and tools: splits text into the "words" that BPE
    // works inside (their concatenation is the text). See tokenizer.cpp.
    static std::vector<std::string_view> split_words(std::string_view text);

private:
    struct Merge { int left, right, result; };
    // Word -> ids memo for encode(). Copying a Tokenizer gives the copy an empty cache.
    struct WordCache {
        std::mutex mu;
        std::unordered_map<std::string, std::vector<int>> map;
        WordCache() = default;
        WordCache(const WordCache&) {}
        WordCache& operator=(const WordCache&) { return *this; }
    };

    std::vector<std::string> pieces_;                 // id -> bytes ("" for specials)
    std::unordered_map<std::string, int> piece_id_;  // bytes -> id (all non-special pieces)
    std::unordered_map<uint32_t, int> char_id_;       // code point -> id of its char piece
    std::vector<Merge> merges_;                       // merge rules in rank order
    std::unordered_map<uint64_t, int> merge_rank_;    // (left, right) -> index into merges_
    int num_chars_ = 0;
    uint64_t fingerprint_ = 0;
    mutable WordCache cache_;

    // Building blocks shared by learn() and deserialize(), so both build identical state.
    int add_char(const std::string& bytes, uint32_t code_point);
    int add_merge(int left, int right);   // returns the id of the merged piece (may reuse one)
    void finish();                        // computes the fingerprint
    std::vector<int> encode_word(std::string_view word) const;   // BPE on one word, no cache
    template <class Cache> void encode_into(std::string_view text, Cache& cache,
                                            std::vector<int>* ids) const;
    friend class BpeTrainer;
};
