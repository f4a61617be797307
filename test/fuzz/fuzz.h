// test/fuzz/fuzz.h — what the libFuzzer targets in test/fuzz/ share: a scratch folder for the
// inputs that must be files, an invariant check that aborts (libFuzzer reports an abort as a
// finding and saves the input), and one small tokenizer learned once.
//
// Each target defines LLVMFuzzerTestOneInput; built with clang -fsanitize=fuzzer (make fuzz)
// it fuzzes, built with g++ and test/fuzz/replay_main.cpp (make test) it replays the seeds
// and the regression inputs in test/fuzz/<target>/.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tokenizer.h"

// A private folder for this process's scratch files (made on first use), removed with them
// when the process exits normally (after a finding, an abort, it stays for a look).
inline const std::string& fuzz_dir() {
    static char path[] = "/tmp/aiayn-fuzz-XXXXXX";   // (no destructor: still there at exit)
    static std::string dir = [] {
        if (!mkdtemp(path)) { std::perror("mkdtemp"); std::abort(); }
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(path, ec);
        });
        return std::string(path);
    }();
    return dir;
}

// Writes bytes to fuzz_dir()/name and returns the path.
inline std::string fuzz_write(const std::string& name, const void* data, size_t size) {
    std::string path = fuzz_dir() + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
        std::perror(path.c_str());
        std::abort();
    }
    return path;
}

// An invariant of the code under test: a violation is a finding.
#define FUZZ_CHECK(cond, what)                                                          \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, \
                         what);                                                         \
            std::abort();                                                               \
        }                                                                               \
    } while (0)

// A small BPE learned once from a fixed text with ASCII, accents, CJK, emoji and spacing.
inline const Tokenizer& fuzz_tokenizer() {
    static const Tokenizer tok = [] {
        std::vector<std::string> lines;
        for (int i = 0; i < 20; i++) {
            lines.push_back("In the beginning God created the heaven and the earth.");
            lines.push_back("En el principio creó Dios los cielos y la tierra. ¿Qué? ¡Sí!");
            lines.push_back("naïve café  déjà vu\t日本語のテキスト 😀😀 —  \"quoted\" (x) 1,234.5");
        }
        return Tokenizer::learn(lines, 400);
    }();
    return tok;
}

// The input as bytes without its first `skip` bytes (which a target may use as switches).
inline std::string fuzz_rest(const uint8_t* data, size_t size, size_t skip) {
    return size > skip ? std::string((const char*)data + skip, size - skip) : std::string();
}
