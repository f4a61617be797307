// test/fuzz/fuzz_safetensors.cpp — the JSON reader (toolkit/json.h) and the safetensors header
// reader (SafeTensorsFile::open, then reading every tensor it lists) on arbitrary bytes. The
// first byte picks: even, the bytes are a whole safetensors file; odd, they are a JSON text
// (parsed alone, and wrapped in a safetensors file as its header). Also checks that
// json_quote(s) parses back to s.
#include "model/checkpoint.h"
#include "test/fuzz/fuzz.h"
#include "toolkit/json.h"

static void read_every_tensor(const std::string& path) {
    SafeTensorsFile f;
    std::string err;
    if (!f.open(path, &err)) {
        FUZZ_CHECK(!err.empty(), "a refusal has a message");
        return;
    }
    for (const TensorEntry& t : f.tensors) {
        FUZZ_CHECK(t.end >= t.begin, "tensor extent ordered");
        if (t.end - t.begin > (64u << 20)) continue;
        std::vector<unsigned char> buf(t.end - t.begin);
        FUZZ_CHECK(f.read(t.name, t.dtype.c_str(), buf.data(), t.numel(), &err), "a listed tensor reads");
    }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0 || size > 1 << 20) return 0;
    std::string text = fuzz_rest(data, size, 1);
    if ((data[0] & 1) == 0) {
        read_every_tensor(fuzz_write("file.safetensors", text.data(), text.size()));
        return 0;
    }
    Json j;
    std::string err;
    if (!json_parse(text, &j, &err)) FUZZ_CHECK(!err.empty(), "a parse error has a message");
    Json s;
    FUZZ_CHECK(json_parse(json_quote(text), &s, &err) && s.type == Json::STRING && s.str == text,
               "json_quote parses back");
    std::string file(8, '\0');
    for (int i = 0; i < 8; i++) file[i] = (char)((uint64_t)text.size() >> (8 * i));
    file += text;
    file += std::string(64, '\x01');
    read_every_tensor(fuzz_write("wrapped.safetensors", file.data(), file.size()));
    return 0;
}
