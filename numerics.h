// numerics.h — what every backend must compute bit for bit: the special token ids, the
// counter-based random numbers behind dropout, and the sinusoid formula of §3.5.
//
// The CPU ops (transformer.cpp), the CUDA kernels (transformer.cu) and the host code all
// include this one header, so a GPU training step keeps exactly the elements the CPU keeps and
// both backends see the same positional encodings. Written so that nvcc compiles it for the
// device too: every function is HOST_DEVICE (__host__ __device__ under nvcc) and uses only
// integer arithmetic, IEEE float multiplication and the double-precision libm functions.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define HOST_DEVICE __host__ __device__
#else
#define HOST_DEVICE
#endif

// Special token ids (DESIGN.md): source = tokens + </s>; decoder input = <s> + tokens;
// labels = tokens + </s>; PAD fills sentences up to the batch's length.
enum SpecialToken { PAD_ID = 0, UNK_ID = 1, BOS_ID = 2, EOS_ID = 3 };

// ---------------------------------------------------------------------------------------------
// splitmix64 (Steele, Lea, Flood 2014). splitmix64(x) is the generator's output for state x,
// so x can be a counter: no state needs to be carried between threads, calls or devices.
static const uint64_t SPLITMIX64_GAMMA = 0x9E3779B97F4A7C15ull;

HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
    x += SPLITMIX64_GAMMA;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The sequential form: advances *state and returns the next 64 bits (initialisation, data
// shuffling: the same sequence on every platform).
inline uint64_t splitmix64_next(uint64_t* state) {
    uint64_t out = splitmix64(*state);
    *state += SPLITMIX64_GAMMA;
    return out;
}

// ---------------------------------------------------------------------------------------------
// §5.4 Dropout masks. Element i of the tensor at dropout site `site` in training forward
// number `forward` is kept iff dropout_keep(dropout_site_seed(seed, forward, site), i, p):
// backward recomputes the forward's mask instead of storing it, any step is reproducible, and
// every backend keeps the same elements.
HOST_DEVICE inline uint64_t dropout_site_seed(uint64_t seed, int64_t forward, uint32_t site) {
    return splitmix64(splitmix64(seed) ^ splitmix64(((uint64_t)forward << 20) ^ site));
}

// Keep with probability 1 - p: 24 random bits against p * 2^24.
HOST_DEVICE inline bool dropout_keep(uint64_t site_seed, size_t i, float p) {
    uint32_t r = (uint32_t)(splitmix64(site_seed + i * 0xD1B54A32D192ED03ull) >> 40);
    return r >= (uint32_t)(p * 16777216.0f);
}

// ---------------------------------------------------------------------------------------------
// §3.5 Positional Encoding: element c of position pos (d = d_model), computed in double and
// rounded once: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
HOST_DEVICE inline float sinusoid(int pos, int c, int d) {
    const int i2 = c & ~1;   // 2i
    const double angle = pos / ::pow(10000.0, (double)i2 / d);
    return (float)((c & 1) ? ::cos(angle) : ::sin(angle));
}
