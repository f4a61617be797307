// test/fuzz/fuzz_tokenizer.cpp — the BPE tokenizer on arbitrary bytes: encode then decode must
// give the input back byte for byte, every id must be a real piece (never <unk> or a special),
// and pre-tokenization must cover the text exactly. The first byte picks the tokenizer: the
// fixed one of fuzz.h, or (odd) one learned from the input's own lines.
#include "test/fuzz/fuzz.h"

static void round_trip(const Tokenizer& tok, const std::string& text) {
    std::vector<int> ids = tok.encode(text);
    for (int id : ids)
        FUZZ_CHECK(id >= Tokenizer::kNumSpecials && id < tok.vocab_size(), "id is a piece");
    FUZZ_CHECK(tok.decode(ids) == text, "decode(encode(text)) == text");
    std::string joined;
    for (std::string_view w : Tokenizer::split_words(text)) joined += w;
    FUZZ_CHECK(joined == text, "split_words covers the text");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 1 << 16) return 0;
    std::string text = fuzz_rest(data, size, 1);
    if (size == 0 || (data[0] & 1) == 0) {
        round_trip(fuzz_tokenizer(), text);
        return 0;
    }
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t i = 0; i <= text.size(); i++)
        if (i == text.size() || text[i] == '\n') { lines.push_back(text.substr(start, i - start)); start = i + 1; }
    Tokenizer tok = Tokenizer::learn(lines, 260 + data[0] / 2);
    round_trip(tok, text);
    Tokenizer back;
    std::string err;
    FUZZ_CHECK(Tokenizer::deserialize(tok.serialize(), &back, &err), "a learned vocabulary reads back");
    FUZZ_CHECK(back.fingerprint() == tok.fingerprint(), "same fingerprint after reading back");
    FUZZ_CHECK(back.encode(text) == tok.encode(text), "the read-back tokenizer encodes the same");
    return 0;
}
