// test/cpu_flags.h — whether /proc/cpuinfo lists a CPU feature flag (Linux; false elsewhere):
// the kernel tests use it to tell "this CPU lacks it" (SKIP) from "the detection broke" (FAIL).
#pragma once
#include <cstdio>
#include <cstring>

inline bool cpu_has(const char* flag) {
    std::FILE* f = std::fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char word[64];
    bool found = false;
    while (!found && std::fscanf(f, "%63s", word) == 1) found = std::strcmp(word, flag) == 0;
    std::fclose(f);
    return found;
}
