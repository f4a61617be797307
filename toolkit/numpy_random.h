// numpy_random.h — the random numbers of NumPy's np.random.default_rng(seed), as sacreBLEU's
// significance tests draw them, so that ./bleu's bootstrap resamples are sacreBLEU's, line for line.
//
// default_rng(seed) is a Generator over PCG64 (XSL-RR 128/64), seeded through SeedSequence(seed)
// (O'Neill's seed_seq hashing of the seed's 32-bit words into a pool of 4, then 4 64-bit words:
// the state and the increment). Its integers come 32 bits at a time from the low then the high
// half of one 64-bit output (NumPy's next_uint32 buffer), bounded by Lemire's method (integers,
// choice with replacement) or a bit at a time (integers(2, dtype=bool)). The algorithms are
// NumPy's (numpy/random/_pcg64.pyx, bit_generator.pyx, src/distributions/distributions.c);
// test/test_sacrebleu.py compares the draws with NumPy's own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

class NumpyGenerator {
public:
    // np.random.default_rng(seed) for a seed that fits 32 bits (one entropy word).
    explicit NumpyGenerator(uint32_t seed) {
        uint32_t pool[4];
        mix_entropy(pool, seed);
        uint64_t words[4];
        generate_state(pool, words);
        set_seed(((unsigned __int128)words[0] << 64) | words[1], ((unsigned __int128)words[2] << 64) | words[3]);
    }

    // One element of rng.choice(n, size=..., replace=True), in [0, n), 1 <= n < 2^32 (C order: a
    // (rows, n) choice is rows * n of these in a row).
    uint32_t index(uint32_t n) { return n == 1 ? 0 : bounded_lemire(n - 1); }

    // rng.integers(2, size=..., dtype=bool) one element at a time: fair bits, 32 from each 32-bit
    // draw, lowest first. One BoolDraws serves one such call (NumPy's fill keeps its buffer that long).
    struct BoolDraws {
        uint32_t buf = 0;
        int left = 0;
        bool next(NumpyGenerator& g) {
            if (left == 0) buf = g.next_uint32(), left = 31;
            else buf >>= 1, left--;
            return buf & 1u;
        }
    };

    std::vector<uint32_t> choice(uint32_t n, size_t count) {   // rng.choice(n, size=count)
        std::vector<uint32_t> out(count);
        for (uint32_t& x : out) x = index(n);
        return out;
    }
    std::vector<uint8_t> bits(size_t count) {                   // rng.integers(2, size=count, dtype=bool)
        std::vector<uint8_t> out(count);
        BoolDraws draws;
        for (uint8_t& b : out) b = draws.next(*this);
        return out;
    }

    uint64_t next_uint64() {   // PCG64: step, then XSL-RR output
        state_ = state_ * kMultiplier + inc_;
        const uint64_t hi = (uint64_t)(state_ >> 64), lo = (uint64_t)state_;
        const unsigned rot = (unsigned)(state_ >> 122);
        const uint64_t x = hi ^ lo;
        return rot ? (x >> rot) | (x << (64 - rot)) : x;
    }

    uint32_t next_uint32() {   // the low half of a 64-bit draw, then its high half
        if (has_half_) { has_half_ = false; return half_; }
        const uint64_t x = next_uint64();
        has_half_ = true;
        half_ = (uint32_t)(x >> 32);
        return (uint32_t)x;
    }

private:
    static constexpr unsigned __int128 kMultiplier =
        ((unsigned __int128)0x2360ed051fc65da4ULL << 64) | 0x4385df649fccf645ULL;
    // SeedSequence's constants (bit_generator.pyx).
    static constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
    static constexpr uint32_t kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
    static constexpr int kXShift = 16;

    static uint32_t hashmix(uint32_t value, uint32_t* hash_const) {
        value ^= *hash_const;
        *hash_const *= kMultA;
        value *= *hash_const;
        return value ^ (value >> kXShift);
    }
    static uint32_t mix(uint32_t x, uint32_t y) {
        const uint32_t r = kMixMultL * x - kMixMultR * y;
        return r ^ (r >> kXShift);
    }
    // SeedSequence.mix_entropy over the seed's one word.
    static void mix_entropy(uint32_t pool[4], uint32_t seed) {
        uint32_t hash_const = kInitA;
        for (int i = 0; i < 4; i++) pool[i] = hashmix(i == 0 ? seed : 0u, &hash_const);
        for (int src = 0; src < 4; src++)
            for (int dst = 0; dst < 4; dst++)
                if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], &hash_const));
    }
    // SeedSequence.generate_state(4, np.uint64): 8 words of 32 bits, paired low word first.
    static void generate_state(const uint32_t pool[4], uint64_t out[4]) {
        uint32_t hash_const = kInitB, w[8];
        for (int i = 0; i < 8; i++) {
            uint32_t v = pool[i % 4] ^ hash_const;
            hash_const *= kMultB;
            v *= hash_const;
            w[i] = v ^ (v >> kXShift);
        }
        for (int i = 0; i < 4; i++) out[i] = (uint64_t)w[2 * i] | ((uint64_t)w[2 * i + 1] << 32);
    }
    // pcg_setseq_128_srandom_r
    void set_seed(unsigned __int128 initstate, unsigned __int128 initseq) {
        state_ = 0;
        inc_ = (initseq << 1) | 1;
        next_uint64();
        state_ += initstate;
        next_uint64();
        has_half_ = false;
    }
    // buffered_bounded_lemire_uint32: uniform in [0, rng], rng < 2^32 - 1.
    uint32_t bounded_lemire(uint32_t rng) {
        const uint32_t rng_excl = rng + 1;
        uint64_t m = (uint64_t)next_uint32() * rng_excl;
        uint32_t leftover = (uint32_t)m;
        if (leftover < rng_excl) {
            const uint32_t threshold = (UINT32_MAX - rng) % rng_excl;
            while (leftover < threshold) {
                m = (uint64_t)next_uint32() * rng_excl;
                leftover = (uint32_t)m;
            }
        }
        return (uint32_t)(m >> 32);
    }

    unsigned __int128 state_ = 0, inc_ = 0;
    bool has_half_ = false;
    uint32_t half_ = 0;
};
