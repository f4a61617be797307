// bench/device_fill.h — random operands on a backend's device for the benchmarks that time ops
// on it (bench_train.cpp's peak product, bench_attention.cpp).
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "transformer.h"

// n floatX of random values in [-1, 1) on the device (bf16: the top half of each float; a
// product of zeros runs faster than one of real data, ~12% on an H100).
inline floatX* random_floatx(Backend& ops, size_t n, uint64_t seed = 88172645463325252ull) {
    std::vector<float> host(n);
    for (float& v : host) v = (float)((splitmix64_next(&seed) >> 40) * (2.0 / 16777216.0) - 1.0);
    floatX* p = (floatX*)ops.alloc(n * ops.floatx_size());
    if (ops.floatx_size() == sizeof(float)) {
        ops.upload(p, host.data(), n * sizeof(float));
        return p;
    }
    std::vector<uint16_t> half(n);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        std::memcpy(&bits, &host[i], sizeof bits);
        half[i] = (uint16_t)(bits >> 16);
    }
    ops.upload(p, half.data(), n * sizeof(uint16_t));
    return p;
}
