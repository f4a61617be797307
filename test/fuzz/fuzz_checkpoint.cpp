// test/fuzz/fuzz_checkpoint.cpp — the model checkpoint loader (checkpoint_load, as ./train
// --resume and ./translate call it, then the tokenizer it carries, as ./translate checks it)
// on arbitrary files, seeded with a small valid checkpoint (test/fuzz/checkpoint/). A file is
// loaded or refused with a message; it never crashes or allocates more than the file holds.
#include "model/checkpoint.h"
#include "test/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 4 << 20) return 0;
    std::string path = fuzz_write("ckpt.safetensors", data, size);
    for (bool training : {true, false}) {
        Model m;
        Metadata meta;
        std::string err;
        if (!checkpoint_load(&m, path, &meta, &err, training)) {
            FUZZ_CHECK(!err.empty(), "a refusal has a message");
            continue;
        }
        FUZZ_CHECK(m.params != nullptr, "a loaded model has parameters");
        Tokenizer tok;
        if (Tokenizer::deserialize(meta["tokenizer"], &tok, &err))
            (void)(tok.vocab_size() == m.cfg.vocab);
    }
    return 0;
}
