// test/fuzz/fuzz_vocab.cpp — the vocabulary reader (Tokenizer::deserialize: vocab.bpe files and
// the checkpoint's "tokenizer" entry) on arbitrary text: it must accept or refuse with a
// message, never crash; what it accepts must be canonical (serialize() gives the text back)
// and must round-trip any text through encode/decode.
#include "test/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 1 << 18) return 0;
    std::string text((const char*)data, size);
    Tokenizer tok;
    std::string err;
    if (!Tokenizer::deserialize(text, &tok, &err)) {
        FUZZ_CHECK(!err.empty(), "a refusal has a message");
        return 0;
    }
    FUZZ_CHECK(tok.serialize() == text, "an accepted vocabulary is canonical");
    const std::string probe = "In the beginning, ¿qué? 日本 😀 \xff\xfe bytes\n";
    FUZZ_CHECK(tok.decode(tok.encode(probe)) == probe, "round trip with the read vocabulary");
    FUZZ_CHECK(tok.decode(tok.encode(text)) == text, "round trip of the vocabulary text itself");
    return 0;
}
