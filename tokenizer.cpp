// tokenizer.cpp — joint BPE: pre-tokenization, learning, encoding, decoding, the vocabulary file.
//
// Build (with the CLI): make bpe   (cli/bpe.cpp with build/libtransformer.a, which holds this file)
// The API and the id layout are described in tokenizer.h. Sections below, in reading order:
//   1. UTF-8 and pre-tokenization (text -> words)      4. Encoding (words -> ids, with a cache)
//   2. The vocabulary file: escaping pieces             5. Learning (the incremental algorithm)
//   3. Building blocks shared by learn and load         6. serialize / deserialize
//
// THE VOCABULARY FILE (serialize()) is UTF-8 text, one entry per line, every line ending in \n:
//
//     bpe-vocab 1 size 8000 specials 4 bytes 256 chars 23 merges 7717
//     char 260 á                      C lines: "char <id> <piece>", ids 260, 261, ... in order
//     ...
//     merge 283 ▁ t                   M lines: "merge <id> <left> <right>", in rank order;
//     merge 284 h e                   <id> is the id of the piece left+right (a new id, the
//     merge 285 ▁ a                   next free one, unless that string is already a piece)
//     ...
//
// Specials (0..3) and the 256 byte pieces (4..259) are implicit. A piece is written as its
// bytes with: a space as ▁ (U+2581); a backslash as \\; a literal U+2581, control bytes,
// bytes of invalid UTF-8 and invisible/space-like characters as \xHH (upper-case hex, one
// per byte); everything else (printable ASCII, visible UTF-8 characters) as itself. The form
// is canonical: deserialize() re-escapes every piece and refuses anything that differs.
#include "tokenizer.h"

#include <algorithm>
#include <cstring>
#include <queue>
#include <stdexcept>
#include <tuple>
#ifdef _OPENMP
#include <omp.h>
#endif

// =============================================================================================
// 1. UTF-8 and pre-tokenization
// =============================================================================================
// The project's one UTF-8 decoder (declared in tokenizer.h): the shortest-form rules of
// Unicode's table 3-7, checked through the allowed range of the second byte.
int utf8_char(const unsigned char* s, size_t n, uint32_t* cp) {
    unsigned c = s[0];
    *cp = c;
    if (c < 0x80) return 1;
    int len;
    uint32_t v, lo = 0x80, hi = 0xBF;   // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3; v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;          // no overlong forms
        if (c == 0xED) hi = 0x9F;          // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4; v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;          // <= U+10FFFF
    } else return 0;
    if ((size_t)len > n || s[1] < lo || s[1] > hi) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

void append_utf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
        *out += (char)cp;
        return;
    }
    if (cp < 0x800) {
        *out += (char)(0xC0 | (cp >> 6));
    } else if (cp < 0x10000) {
        *out += (char)(0xE0 | (cp >> 12));
        *out += (char)(0x80 | ((cp >> 6) & 0x3F));
    } else {
        *out += (char)(0xF0 | (cp >> 18));
        *out += (char)(0x80 | ((cp >> 12) & 0x3F));
        *out += (char)(0x80 | ((cp >> 6) & 0x3F));
    }
    *out += (char)(0x80 | (cp & 0x3F));
}

std::vector<Utf8Unit> utf8_units(std::string_view text) {
    std::vector<Utf8Unit> units;
    for (size_t i = 0; i < text.size();) {
        uint32_t cp;
        const int len = utf8_char(reinterpret_cast<const unsigned char*>(text.data()) + i, text.size() - i, &cp);
        units.push_back({text.substr(i, len > 0 ? (size_t)len : 1), cp, len > 0});
        i += len > 0 ? (size_t)len : 1;
    }
    return units;
}

long invalid_utf8_at(std::string_view text) {
    const unsigned char* s = (const unsigned char*)text.data();
    uint32_t cp;
    for (size_t i = 0; i < text.size();) {
        int len = utf8_char(s + i, text.size() - i, &cp);
        if (len == 0) return (long)i;
        i += (size_t)len;
    }
    return -1;
}

std::string replace_invalid_utf8(std::string_view text) {
    std::string out;
    const unsigned char* s = (const unsigned char*)text.data();
    uint32_t cp;
    for (size_t i = 0; i < text.size();) {
        const int len = utf8_char(s + i, text.size() - i, &cp);
        if (len == 0) out += "\xEF\xBF\xBD";   // U+FFFD
        else out.append(text.substr(i, (size_t)len));
        i += len == 0 ? 1 : (size_t)len;
    }
    return out;
}

std::string_view trim(std::string_view text, std::string_view chars) {
    const size_t first = text.find_first_not_of(chars);
    if (first == std::string_view::npos) return {};
    return text.substr(first, text.find_last_not_of(chars) - first + 1);
}

namespace {

// Character classes used to cut text into words. Words never mix classes, so punctuation
// does not glue onto letters ("earth." -> "earth" "."), as in SentencePiece.
enum CharClass { kSpaceClass, kLetterClass, kDigitClass, kPunctClass };

// Non-ASCII punctuation, symbols and separators: a small table, not all of Unicode. Every
// other non-ASCII character (and every invalid byte) counts as a letter. This only decides
// where words split; it can never break the exact round trip.
bool is_unicode_punct(uint32_t cp) {
    if (cp >= 0xA0 && cp <= 0xBF)  // Latin-1 signs: ¡ § « ¶ · » ¿ ...; not ª ² ³ µ ¹ º ¼ ½ ¾
        return !(cp == 0xAA || cp == 0xB2 || cp == 0xB3 || cp == 0xB5 || cp == 0xB9 ||
                 cp == 0xBA || (cp >= 0xBC && cp <= 0xBE));
    return cp == 0xD7 || cp == 0xF7 ||                       // × ÷
           (cp >= 0x2000 && cp <= 0x206F) ||                 // general punctuation, spaces
           (cp >= 0x3000 && cp <= 0x303F) ||                 // CJK punctuation
           (cp >= 0xFF01 && cp <= 0xFF0F) || (cp >= 0xFF1A && cp <= 0xFF20) ||
           (cp >= 0xFF3B && cp <= 0xFF40) || (cp >= 0xFF5B && cp <= 0xFF65);  // full-width
}

bool is_ascii_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Class of the character at text[i]; *len receives its length in bytes (1 for invalid bytes).
CharClass char_class(std::string_view text, size_t i, size_t* len) {
    const unsigned char* s = (const unsigned char*)text.data() + i;
    unsigned char c = s[0];
    *len = 1;
    if (c < 0x80) {
        if (is_ascii_space(c)) return kSpaceClass;
        if (c >= '0' && c <= '9') return kDigitClass;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return kLetterClass;
        return kPunctClass;   // ASCII punctuation and control characters
    }
    uint32_t cp;
    int n = utf8_char(s, text.size() - i, &cp);
    if (n == 0) return kLetterClass;   // invalid byte: one byte, treated as a letter
    *len = (size_t)n;
    return is_unicode_punct(cp) ? kPunctClass : kLetterClass;
}

// Pre-tokenization. Calls emit(word) for consecutive pieces of text whose concatenation is
// the text. A word is either
//   - an optional single space ' ' followed by a maximal run of characters of one class
//     (letters, digits or punctuation): " the", "God", " 42", ",", " ¿";  or
//   - a run of white space, minus the last ' ' when that ' ' is glued to the next word:
//     "a  b" -> "a" " " " b";  "a\tb" -> "a" "\t" "b";  "end  " -> "end" "  ".
// BPE merges happen only inside a word, so pieces never cross these boundaries.
template <class Emit>
void for_each_word(std::string_view text, Emit&& emit) {
    size_t i = 0, n = text.size(), len;
    while (i < n) {
        size_t start = i;
        CharClass cls = char_class(text, i, &len);
        if (cls == kSpaceClass) {
            size_t j = i;
            while (j < n && is_ascii_space((unsigned char)text[j])) j++;
            size_t end = j;   // end of the white-space word
            if (j < n && text[j - 1] == ' ') end = j - 1;   // glue one space to what follows
            if (end > start) emit(text.substr(start, end - start));
            if (j == n) break;
            start = end;      // == j when the run ended in a tab or newline
            i = j;
            cls = char_class(text, i, &len);
        }
        i += len;
        size_t len2;
        while (i < n && char_class(text, i, &len2) == cls) i += len2;
        emit(text.substr(start, i - start));
    }
}

// =============================================================================================
// 2. The vocabulary file: escaping pieces
// =============================================================================================

const char kSpaceMark[] = "\xE2\x96\x81";   // ▁ U+2581, shows a space inside a piece

// Characters written as-is in the file: visible ones. Invisible, space-like, format and
// C1-control characters, and U+2581 itself, are written as \xHH bytes instead.
bool is_visible_char(uint32_t cp) {
    if (cp < 0x21 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD || cp == 0x34F) return false;
    if (cp == 0x1680 || cp == 0x180E || cp == 0x2581 || cp == 0x3000 || cp == 0xFEFF)
        return false;
    if ((cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
        (cp >= 0x205F && cp <= 0x206F) || (cp >= 0xFE00 && cp <= 0xFE0F) ||
        (cp >= 0xFFF0 && cp <= 0xFFFF) || (cp >= 0xE0000 && cp <= 0xE0FFF))
        return false;
    return true;
}

void append_hex_byte(std::string* out, unsigned char b) {
    const char* hex = "0123456789ABCDEF";
    out->append("\\x");
    out->push_back(hex[b >> 4]);
    out->push_back(hex[b & 15]);
}

// Bytes -> readable, unambiguous text without spaces or newlines (format above).
std::string escape_piece(std::string_view bytes) {
    std::string out;
    const unsigned char* s = (const unsigned char*)bytes.data();
    size_t n = bytes.size();
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        uint32_t cp;
        int len = utf8_char(s + i, n - i, &cp);
        if (c == ' ') out.append(kSpaceMark);
        else if (c == '\\') out.append("\\\\");
        else if (len >= 1 && is_visible_char(cp)) out.append((const char*)s + i, len);
        else { append_hex_byte(&out, c); len = 1; }
        i += len >= 1 ? len : 1;
    }
    return out;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;   // lower case is not canonical
}

// Readable text -> bytes. Fails on a bad escape, an empty piece, or a non-canonical spelling.
bool unescape_piece(std::string_view text, std::string* bytes) {
    bytes->clear();
    for (size_t i = 0; i < text.size();) {
        if (text.compare(i, 3, kSpaceMark) == 0) { bytes->push_back(' '); i += 3; continue; }
        if (text[i] != '\\') { bytes->push_back(text[i++]); continue; }
        if (i + 1 < text.size() && text[i + 1] == '\\') { bytes->push_back('\\'); i += 2; continue; }
        if (i + 3 >= text.size() || text[i + 1] != 'x') return false;
        int hi = hex_value(text[i + 2]), lo = hex_value(text[i + 3]);
        if (hi < 0 || lo < 0) return false;
        bytes->push_back((char)(hi * 16 + lo));
        i += 4;
    }
    return !bytes->empty() && escape_piece(*bytes) == text;
}

uint64_t fnv1a64(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) { h ^= c; h *= 0x100000001b3ull; }
    return h;
}

uint64_t pair_key(int left, int right) { return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right; }

}  // namespace

// =============================================================================================
// 3. Building blocks shared by learn() and deserialize()
// =============================================================================================

Tokenizer::Tokenizer() {
    pieces_.assign(kNumSpecials, std::string());
    for (int b = 0; b < 256; b++) {
        pieces_.push_back(std::string(1, (char)b));
        piece_id_[pieces_.back()] = kFirstByte + b;
    }
    finish();
}

// Adds a multi-byte character as a piece of its own (called before any merge).
int Tokenizer::add_char(const std::string& bytes, uint32_t code_point) {
    int id = (int)pieces_.size();
    pieces_.push_back(bytes);
    piece_id_[bytes] = id;
    char_id_[code_point] = id;
    num_chars_++;
    return id;
}

// Records the merge rule (left, right). The merged piece is identified by its bytes: if
// some earlier merge already produced the same string (e.g. "ab"+"c" and "a"+"bc"), the
// rule reuses that id instead of making a duplicate piece, so the text form (pieces written
// as strings) stays unambiguous. Defensive: with merges applied left to right everywhere,
// none of 200,000 random small corpora tried produced such a second path.
int Tokenizer::add_merge(int left, int right) {
    std::string bytes = pieces_[left] + pieces_[right];
    auto it = piece_id_.find(bytes);
    int id;
    if (it != piece_id_.end()) {
        id = it->second;
    } else {
        id = (int)pieces_.size();
        pieces_.push_back(bytes);
        piece_id_.emplace(std::move(bytes), id);
    }
    merge_rank_[pair_key(left, right)] = (int)merges_.size();
    merges_.push_back({left, right, id});
    return id;
}

void Tokenizer::finish() {
    fingerprint_ = fnv1a64(serialize());
    std::lock_guard<std::mutex> lock(cache_.mu);
    cache_.map.clear();
}

std::string Tokenizer::piece(int id) const {
    static const char* kSpecialNames[kNumSpecials] = {"<pad>", "<unk>", "<s>", "</s>"};
    if (id < 0 || id >= vocab_size()) throw std::out_of_range("piece: id out of range");
    if (id < kNumSpecials) return kSpecialNames[id];
    return escape_piece(pieces_[id]);
}

std::vector<std::string_view> Tokenizer::split_words(std::string_view text) {
    std::vector<std::string_view> words;
    for_each_word(text, [&](std::string_view w) { words.push_back(w); });
    return words;
}

// =============================================================================================
// 4. Encoding
// =============================================================================================
// A word starts as a sequence of symbols: each multi-byte character that has a char piece
// becomes that piece; every other byte (ASCII, rare or invalid characters) its byte piece.
// Then merges are applied lowest rank first, which reproduces what learning did to the word:
// a min-heap holds the candidate adjacent pairs keyed by (rank, position); the symbols form a
// linked list, so each merge costs O(log n) and a 100,000-character word stays fast. Equal
// ranks are taken left to right, as the learner does.

std::vector<int> Tokenizer::encode_word(std::string_view word) const {
    std::vector<int> sym;   // symbol ids; -1 marks a symbol merged into its left neighbour
    const unsigned char* s = (const unsigned char*)word.data();
    for (size_t i = 0; i < word.size();) {
        uint32_t cp;
        int len = utf8_char(s + i, word.size() - i, &cp);
        auto it = len > 1 ? char_id_.find(cp) : char_id_.end();
        if (it != char_id_.end()) { sym.push_back(it->second); i += len; continue; }
        for (int k = 0; k < std::max(len, 1); k++) sym.push_back(kFirstByte + s[i + k]);
        i += std::max(len, 1);
    }
    int n = (int)sym.size();
    if (n < 2 || merges_.empty()) return sym;

    std::vector<int> next(n), prev(n);
    for (int i = 0; i < n; i++) { next[i] = i + 1 < n ? i + 1 : -1; prev[i] = i - 1; }
    using Cand = std::tuple<int, int, int, int>;   // (rank, position, left id, right id)
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto consider = [&](int pos) {
        if (pos < 0 || next[pos] < 0) return;
        auto it = merge_rank_.find(pair_key(sym[pos], sym[next[pos]]));
        if (it != merge_rank_.end()) heap.emplace(it->second, pos, sym[pos], sym[next[pos]]);
    };
    for (int i = 0; i + 1 < n; i++) consider(i);
    while (!heap.empty()) {
        auto [rank, pos, left, right] = heap.top();
        heap.pop();
        int j = next[pos];
        if (sym[pos] != left || j < 0 || sym[j] != right) continue;   // stale candidate
        sym[pos] = merges_[rank].result;   // merge j into pos and unlink j
        sym[j] = -1;
        next[pos] = next[j];
        if (next[j] >= 0) prev[next[j]] = pos;
        consider(prev[pos]);
        consider(pos);
    }
    std::vector<int> out;
    for (int i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
    return out;
}

namespace {
// Word -> ids memo private to one thread (encode_lines).
struct LocalMemo {
    std::unordered_map<std::string, std::vector<int>> map;
    template <class F> void append(std::string_view word, F&& compute, std::vector<int>* ids) {
        auto it = map.find(std::string(word));
        if (it == map.end()) it = map.emplace(std::string(word), compute(word)).first;
        ids->insert(ids->end(), it->second.begin(), it->second.end());
    }
};

// Word -> ids memo shared by concurrent encode() calls; bounded so it cannot grow forever.
template <class Cache> struct SharedMemo {
    Cache* cache;
    static constexpr size_t kMaxEntries = 1 << 20;
    template <class F> void append(std::string_view word, F&& compute, std::vector<int>* ids) {
        std::string key(word);
        {
            std::lock_guard<std::mutex> lock(cache->mu);
            auto it = cache->map.find(key);
            if (it != cache->map.end()) {
                ids->insert(ids->end(), it->second.begin(), it->second.end());
                return;
            }
        }
        std::vector<int> w = compute(word);
        ids->insert(ids->end(), w.begin(), w.end());
        std::lock_guard<std::mutex> lock(cache->mu);
        if (cache->map.size() >= kMaxEntries) cache->map.clear();
        cache->map.emplace(std::move(key), std::move(w));
    }
};
}  // namespace

template <class Memo>
void Tokenizer::encode_into(std::string_view text, Memo& memo, std::vector<int>* ids) const {
    auto compute = [this](std::string_view w) { return encode_word(w); };
    for_each_word(text, [&](std::string_view w) { memo.append(w, compute, ids); });
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
    std::vector<int> ids;
    SharedMemo<WordCache> memo{&cache_};
    encode_into(text, memo, &ids);
    return ids;
}

std::vector<std::vector<int>> Tokenizer::encode_lines(const std::vector<std::string>& lines) const {
    std::vector<std::vector<int>> out(lines.size());
    long n = (long)lines.size();
#ifdef _OPENMP
#pragma omp parallel
#endif
    {
        LocalMemo memo;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 256)
#endif
        for (long i = 0; i < n; i++) encode_into(lines[i], memo, &out[i]);
    }
    return out;
}

std::string Tokenizer::decode(const int* ids, size_t n) const {
    std::string text;
    for (size_t i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= vocab_size())
            throw std::out_of_range("decode: id " + std::to_string(id) + " outside [0, " +
                                    std::to_string(vocab_size()) + ")");
        if (id >= kNumSpecials) text += pieces_[id];
    }
    return text;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
    return decode(ids.data(), ids.size());
}

std::string Tokenizer::decode_text(const std::vector<int>& ids) const {
    std::string text = decode(ids);
    if (invalid_utf8_at(text) >= 0) text = replace_invalid_utf8(text);
    for (char& c : text)
        if (c == '\n' || c == '\r') c = ' ';
    return text;
}

void Tokenizer::append_text(std::string* text, const std::vector<int>& ids) const {
    const std::string piece = decode_text(ids);
    const std::string_view words = trim(piece, " ");
    if (words.empty()) return;
    if (!text->empty()) *text += ' ';
    *text += words;
}

// =============================================================================================
// 5. Learning
// =============================================================================================
// Step 1: count words (a corpus of 1.4M words has only ~60k distinct ones), so all later
//         work is per distinct word, weighted by its count.
// Step 2: pick the character pieces: multi-byte characters seen >= kMinCharCount times, most
//         frequent first. Rarer ones stay as bytes (which still merge like anything else).
// Step 3: write each word as initial symbols and count every adjacent pair (weighted). An
//         index pair -> words remembers which words contain each pair.
// Step 4: repeat until the vocabulary is full (or every word is one piece): take the most frequent pair from a max-heap;
//         merge it in just the words the index lists, adjusting only the counts of the
//         pairs next to each merge site (x A B y -> x AB y: (x,A) (A,B) (B,y) lose,
//         (x,AB) (AB,y) gain). Pairs that gained are pushed on the heap with their new count.
//         Counts only fall otherwise, so a heap entry whose count is out of date is simply
//         re-pushed with the current count when it reaches the top ("lazy deletion").
// Ties: among pairs with equal count, the one whose left piece, then right piece, is smaller
// as a byte string wins. This makes the result depend only on the corpus, not on hash order.

class BpeTrainer {
public:
    explicit BpeTrainer(Tokenizer* tok) : tok_(tok) {}
    void learn(const std::vector<std::string>& lines, int vocab_size);

private:
    struct Word { std::vector<int> syms; int64_t freq; };
    struct PairStat { int64_t count = 0; std::vector<int> words; };
    struct HeapEntry { int64_t count; int left, right; };

    Tokenizer* tok_;
    std::vector<Word> words_;
    std::unordered_map<uint64_t, PairStat> pairs_;
    std::vector<HeapEntry> heap_;
    std::vector<uint64_t> gained_;   // pairs whose count rose during the current merge

    static std::vector<std::pair<std::string_view, int64_t>> count_words(
        const std::vector<std::string>& lines);
    void add_chars(const std::vector<std::pair<std::string_view, int64_t>>& words, int budget);
    void count_pairs();
    void change(int left, int right, int64_t delta, int word);
    bool lower_priority(const HeapEntry& a, const HeapEntry& b) const;
    void push(int64_t count, int left, int right);
    bool pop_best(HeapEntry* best);
    void merge_in_word(int w, int a, int b, int x);
    void merge_everywhere(int a, int b, int x);
};

// Step 1. Distinct words with their counts, sorted by bytes (a deterministic order).
std::vector<std::pair<std::string_view, int64_t>> BpeTrainer::count_words(
    const std::vector<std::string>& lines) {
    using Map = std::unordered_map<std::string_view, int64_t>;
    int nthreads = 1;
#ifdef _OPENMP
    nthreads = omp_get_max_threads();
#endif
    std::vector<Map> maps(nthreads);
    long n = (long)lines.size();
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (long i = 0; i < n; i++) {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        Map& m = maps[t];
        for_each_word(lines[i], [&](std::string_view w) { m[w]++; });
    }
    for (int t = 1; t < nthreads; t++)
        for (auto& [w, c] : maps[t]) maps[0][w] += c;
    std::vector<std::pair<std::string_view, int64_t>> words(maps[0].begin(), maps[0].end());
    std::sort(words.begin(), words.end());
    return words;
}

// Step 2. Character pieces, most frequent first (ties: smaller code point first).
void BpeTrainer::add_chars(const std::vector<std::pair<std::string_view, int64_t>>& words,
                           int budget) {
    std::unordered_map<uint32_t, std::pair<int64_t, std::string_view>> counts;
    for (auto& [w, freq] : words) {
        const unsigned char* s = (const unsigned char*)w.data();
        for (size_t i = 0; i < w.size();) {
            uint32_t cp;
            int len = utf8_char(s + i, w.size() - i, &cp);
            if (len > 1) {
                auto& e = counts[cp];
                e.first += freq;
                e.second = w.substr(i, len);
            }
            i += std::max(len, 1);
        }
    }
    std::vector<std::tuple<int64_t, uint32_t, std::string_view>> chars;
    for (auto& [cp, e] : counts)
        if (e.first >= Tokenizer::kMinCharCount) chars.emplace_back(-e.first, cp, e.second);
    std::sort(chars.begin(), chars.end());
    for (size_t i = 0; i < chars.size() && (int)i < budget; i++)
        tok_->add_char(std::string(std::get<2>(chars[i])), std::get<1>(chars[i]));
}

// Adds delta to the count of pair (left, right); on a gain, notes that `word` contains it.
void BpeTrainer::change(int left, int right, int64_t delta, int word) {
    uint64_t key = pair_key(left, right);
    PairStat& st = pairs_[key];
    st.count += delta;
    if (delta > 0) {
        if (st.words.empty() || st.words.back() != word) st.words.push_back(word);
        gained_.push_back(key);
    } else if (st.count <= 0) {
        pairs_.erase(key);
    }
}

// Step 3.
void BpeTrainer::count_pairs() {
    for (int w = 0; w < (int)words_.size(); w++) {
        const std::vector<int>& s = words_[w].syms;
        for (size_t i = 0; i + 1 < s.size(); i++) change(s[i], s[i + 1], words_[w].freq, w);
    }
    gained_.clear();
    for (auto& [key, st] : pairs_) push(st.count, (int)(key >> 32), (int)(uint32_t)key);
}

// Heap order: higher count first; on equal counts the smaller (left, right) byte strings.
bool BpeTrainer::lower_priority(const HeapEntry& a, const HeapEntry& b) const {
    if (a.count != b.count) return a.count < b.count;
    int c = tok_->pieces_[a.left].compare(tok_->pieces_[b.left]);
    if (c == 0) c = tok_->pieces_[a.right].compare(tok_->pieces_[b.right]);
    return c > 0;
}

void BpeTrainer::push(int64_t count, int left, int right) {
    heap_.push_back({count, left, right});
    std::push_heap(heap_.begin(), heap_.end(),
                   [this](const HeapEntry& a, const HeapEntry& b) { return lower_priority(a, b); });
}

// The pair with the highest current count, skipping and refreshing stale heap entries.
bool BpeTrainer::pop_best(HeapEntry* best) {
    auto less = [this](const HeapEntry& a, const HeapEntry& b) { return lower_priority(a, b); };
    while (!heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), less);
        HeapEntry e = heap_.back();
        heap_.pop_back();
        auto it = pairs_.find(pair_key(e.left, e.right));
        int64_t now = it == pairs_.end() ? 0 : it->second.count;
        if (now == e.count) { *best = e; return true; }
        if (now > 0) push(now, e.left, e.right);   // out of date: re-queue with the true count
    }
    return false;
}

// Replaces every non-overlapping occurrence of (a, b) in word w by x, left to right,
// updating the neighbouring pair counts. "A A A" with (A, A) becomes "X A", as in encoding.
void BpeTrainer::merge_in_word(int w, int a, int b, int x) {
    std::vector<int>& s = words_[w].syms;
    int64_t f = words_[w].freq;
    size_t n = s.size(), out = 0;
    for (size_t r = 0; r < n;) {
        if (r + 1 < n && s[r] == a && s[r + 1] == b) {
            if (out > 0) { change(s[out - 1], a, -f, w); change(s[out - 1], x, f, w); }
            if (r + 2 < n) { change(b, s[r + 2], -f, w); change(x, s[r + 2], f, w); }
            change(a, b, -f, w);
            s[out++] = x;
            r += 2;
        } else {
            s[out++] = s[r++];
        }
    }
    s.resize(out);
}

// Step 4, one merge: apply (a, b) -> x in every word that contains the pair, and queue the
// pairs that gained.
void BpeTrainer::merge_everywhere(int a, int b, int x) {
    std::vector<int> ws = std::move(pairs_[pair_key(a, b)].words);
    std::sort(ws.begin(), ws.end());
    ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
    gained_.clear();
    for (int w : ws) merge_in_word(w, a, b, x);
    pairs_.erase(pair_key(a, b));
    std::sort(gained_.begin(), gained_.end());
    gained_.erase(std::unique(gained_.begin(), gained_.end()), gained_.end());
    for (uint64_t key : gained_) {
        auto it = pairs_.find(key);
        if (it != pairs_.end()) push(it->second.count, (int)(key >> 32), (int)(uint32_t)key);
    }
}

void BpeTrainer::learn(const std::vector<std::string>& lines, int vocab_size) {
    std::vector<std::pair<std::string_view, int64_t>> counted = count_words(lines);
    add_chars(counted, vocab_size - tok_->vocab_size());
    words_.reserve(counted.size());
    for (auto& [w, freq] : counted) words_.push_back({tok_->encode_word(w), freq});
    count_pairs();
    HeapEntry best;
    while (tok_->vocab_size() < vocab_size && pop_best(&best)) {
        auto rule = tok_->merge_rank_.find(pair_key(best.left, best.right));
        // A pair can reappear after its merge when a later merge re-creates one of its pieces
        // (see add_merge); the existing rule covers it, so it is applied without a new rule.
        int x = rule != tok_->merge_rank_.end() ? tok_->merges_[rule->second].result
                                                : tok_->add_merge(best.left, best.right);
        merge_everywhere(best.left, best.right, x);
    }
}

Tokenizer Tokenizer::learn(const std::vector<std::string>& lines, int vocab_size) {
    if (vocab_size < kFirstChar || vocab_size > kMaxVocab)
        throw std::invalid_argument("learn: vocab_size " + std::to_string(vocab_size) +
                                    " outside [260, " + std::to_string(kMaxVocab) +
                                    "] (4 specials + 256 bytes are the minimum)");
    Tokenizer tok;
    BpeTrainer(&tok).learn(lines, vocab_size);
    tok.finish();
    return tok;
}

// =============================================================================================
// 6. serialize / deserialize
// =============================================================================================

std::string Tokenizer::serialize() const {
    std::string out = "bpe-vocab 1 size " + std::to_string(vocab_size()) + " specials " +
                      std::to_string(kNumSpecials) + " bytes 256 chars " +
                      std::to_string(num_chars_) + " merges " + std::to_string(merges_.size()) +
                      "\n";
    for (int i = 0; i < num_chars_; i++) {
        int id = kFirstChar + i;
        out += "char " + std::to_string(id) + " " + escape_piece(pieces_[id]) + "\n";
    }
    for (const Merge& m : merges_)
        out += "merge " + std::to_string(m.result) + " " + escape_piece(pieces_[m.left]) + " " +
               escape_piece(pieces_[m.right]) + "\n";
    return out;
}

namespace {
// Splits on single spaces; an empty field (two spaces, leading/trailing space) is kept empty
// so that the caller's validation rejects it.
std::vector<std::string_view> split_fields(std::string_view line) {
    std::vector<std::string_view> f;
    size_t start = 0;
    for (size_t i = 0; i <= line.size(); i++)
        if (i == line.size() || line[i] == ' ') { f.push_back(line.substr(start, i - start)); start = i + 1; }
    return f;
}

// Strict non-negative decimal (no sign, no leading zeros) up to Tokenizer::kMaxVocab.
bool parse_count(std::string_view s, int* v) {
    if (s.empty() || s.size() > 9 || (s.size() > 1 && s[0] == '0')) return false;
    long x = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        x = x * 10 + (c - '0');
    }
    if (x > Tokenizer::kMaxVocab) return false;
    *v = (int)x;
    return true;
}

// A short excerpt of untrusted text for an error message: control and non-ASCII bytes as \xHH.
std::string printable(std::string_view s) {
    std::string out;
    for (unsigned char c : s)
        if (c >= 0x20 && c < 0x7F) out.push_back((char)c);
        else append_hex_byte(&out, c);
    return out;
}

bool fail(std::string* error, const std::string& msg) {
    if (error) *error = msg;
    return false;
}
}  // namespace

bool Tokenizer::deserialize(const std::string& text, Tokenizer* out, std::string* error) {
    std::vector<std::string_view> lines;
    std::string_view rest(text);
    while (!rest.empty()) {
        size_t nl = rest.find('\n');
        if (nl == std::string_view::npos)
            return fail(error, "vocabulary: last line has no newline (truncated file?)");
        lines.push_back(rest.substr(0, nl));
        rest.remove_prefix(nl + 1);
    }
    if (lines.empty()) return fail(error, "vocabulary: empty text");
    if (text.find('\r') != std::string::npos)
        return fail(error, "vocabulary: contains a carriage return (CRLF line ends?)");
    std::vector<std::string_view> h = split_fields(lines[0]);
    int size, specials, bytes, chars, merges;
    if (h.size() != 12 || h[0] != "bpe-vocab" || h[2] != "size" || h[4] != "specials" ||
        h[6] != "bytes" || h[8] != "chars" || h[10] != "merges")
        return fail(error, "vocabulary: bad header line (expected 'bpe-vocab 1 size N specials "
                           "4 bytes 256 chars C merges M'), got '" +
                               printable(lines[0].substr(0, 60)) + "'");
    if (h[1] != "1") return fail(error, "vocabulary: unsupported version '" + std::string(h[1]) + "'");
    if (!parse_count(h[3], &size) || !parse_count(h[5], &specials) || !parse_count(h[7], &bytes) ||
        !parse_count(h[9], &chars) || !parse_count(h[11], &merges))
        return fail(error, "vocabulary: header has a malformed number");
    if (specials != kNumSpecials || bytes != 256)
        return fail(error, "vocabulary: header must say 'specials 4 bytes 256'");
    if (size < kFirstChar + chars || size - kFirstChar - chars > merges)
        return fail(error, "vocabulary: header sizes are inconsistent");
    if (lines.size() != (size_t)1 + chars + merges)
        return fail(error, "vocabulary: header announces " + std::to_string(chars + merges) +
                               " entries but the text has " + std::to_string(lines.size() - 1));
    Tokenizer tok;
    std::string bytes_buf, left, right;
    for (size_t i = 1; i < lines.size(); i++) {
        std::string where = "vocabulary line " + std::to_string(i + 1) + ": ";
        std::vector<std::string_view> f = split_fields(lines[i]);
        int id;
        bool is_char = (int)i <= chars;
        if (is_char) {
            if (f.size() != 3 || f[0] != "char") return fail(error, where + "expected 'char <id> <piece>'");
            if (!parse_count(f[1], &id) || id != tok.vocab_size())
                return fail(error, where + "expected id " + std::to_string(tok.vocab_size()));
            uint32_t cp;
            if (!unescape_piece(f[2], &bytes_buf) ||
                utf8_char((const unsigned char*)bytes_buf.data(), bytes_buf.size(), &cp) !=
                    (int)bytes_buf.size() || bytes_buf.size() < 2)
                return fail(error, where + "piece is not one multi-byte UTF-8 character");
            if (tok.piece_id_.count(bytes_buf)) return fail(error, where + "duplicate character");
            tok.add_char(bytes_buf, cp);
            continue;
        }
        if (f.size() != 4 || f[0] != "merge")
            return fail(error, where + "expected 'merge <id> <left> <right>'");
        if (!parse_count(f[1], &id)) return fail(error, where + "malformed id");
        if (!unescape_piece(f[2], &left) || !unescape_piece(f[3], &right))
            return fail(error, where + "malformed piece (bad escape or not canonical)");
        auto l = tok.piece_id_.find(left), r = tok.piece_id_.find(right);
        if (l == tok.piece_id_.end() || r == tok.piece_id_.end())
            return fail(error, where + "merges a piece that is not defined above");
        if (tok.merge_rank_.count(pair_key(l->second, r->second)))
            return fail(error, where + "duplicate merge rule");
        if (tok.add_merge(l->second, r->second) != id)
            return fail(error, where + "id does not match the merged piece's id");
        if (tok.vocab_size() > size) return fail(error, where + "more pieces than the header's size");
    }
    if (tok.vocab_size() != size)
        return fail(error, "vocabulary: " + std::to_string(tok.vocab_size()) +
                               " pieces, header says " + std::to_string(size));
    tok.finish();
    *out = std::move(tok);
    return true;
}
