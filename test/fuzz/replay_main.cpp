// test/fuzz/replay_main.cpp — the main() of a fuzz target built without libFuzzer (make test,
// make test-asan): runs LLVMFuzzerTestOneInput once on every file named, or in every folder
// named, and prints "NAME: N passed, 0 failed". A violated invariant aborts (FUZZ_CHECK), as
// under libFuzzer, so a regression input that fails again ends the run with a crash.
//
//   build/fuzz_replay_tokenizer test/fuzz/tokenizer
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static bool read_all(const std::string& path, std::string* out) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
    bool ok = !std::ferror(f);
    std::fclose(f);
    return ok;
}

// The files of a folder (recursively), sorted; a file names itself.
static void collect(const std::string& path, std::vector<std::string>* files) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) { files->push_back(path); return; }
    DIR* d = opendir(path.c_str());
    if (!d) return;
    std::vector<std::string> names;
    while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) collect(path + "/" + n, files);
}

int main(int argc, char** argv) {
    std::string name = argv[0];
    name = name.substr(name.find_last_of('/') + 1);
    std::vector<std::string> files;
    for (int i = 1; i < argc; i++) collect(argv[i], &files);
    int passed = 0, failed = 0;
    for (const std::string& f : files) {
        std::string data;
        if (!read_all(f, &data)) {
            std::printf("FAIL cannot read %s\n", f.c_str());
            failed++;
            continue;
        }
        LLVMFuzzerTestOneInput((const uint8_t*)data.data(), data.size());
        std::printf("PASS %s (%zu bytes): no crash, invariants hold\n", f.c_str(), data.size());
        passed++;
    }
    if (files.empty()) {
        std::printf("FAIL no inputs found in the paths given\n");
        failed++;
    }
    std::printf("%s: %d passed, %d failed\n", name.c_str(), passed, failed);
    return failed ? 1 : 0;
}
