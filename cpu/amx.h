// amx.h — Intel AMX (Advanced Matrix Extensions) for the CPU's kernels: whether this process may
// use it, and the tile configuration the kernels share (gemm_int8.cpp: int8 products,
// gemm_bf16.cpp: bf16 products); and the CPUID flags they ask for (cpuid_bit), the bf16 ones
// named once (gemm_bf16.cpp also takes vdpbf16ps on CPUs with AVX512-BF16 and no AMX).
//
// AMX adds eight tile registers of up to 16 rows x 64 bytes and one instruction per product
// type (tdpbusd: u8 x s8 -> int32, tdpbf16ps: bf16 x bf16 -> fp32) that multiplies two tiles
// into a third, 16 x 16 results at a time. Sapphire Rapids and later Xeons have it. Linux
// gives a process the tile state only on request (arch_prctl, Linux 5.16+).
//
// TRANSFORMER_AMX=0 turns AMX off for the whole process (1 or unset: on where available); any
// other value stops the program with a message.
#pragma once
#include <cerrno>   // program_invocation_short_name (GNU)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))
#define CPU_AMX 1   // the compiler knows AMX's intrinsics: the kernels are compiled
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__)
#include <cpuid.h>
#endif

enum class CpuidReg { EAX, EBX, ECX, EDX };

// Whether CPUID leaf `leaf`, sub-leaf `sub` sets `bit` of register `reg` (false off x86-64).
inline bool cpuid_bit(unsigned leaf, unsigned sub, CpuidReg reg, int bit) {
#if defined(__x86_64__)
    unsigned r[4];
    return __get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]) && (r[(int)reg] >> bit & 1u);
#else
    (void)leaf, (void)sub, (void)reg, (void)bit;
    return false;
#endif
}

// The CPU's AVX512-BF16 flag (leaf 7, sub-leaf 1, EAX bit 5) and AMX-BF16 flag (leaf 7, EDX bit
// 22), asked once; whether the OS lets this process use AMX is amx_available's question.
inline bool cpu_lists_avx512_bf16() {
    static const bool has = cpuid_bit(7, 1, CpuidReg::EAX, 5);
    return has;
}
inline bool cpu_lists_amx_bf16() {
    static const bool has = cpuid_bit(7, 0, CpuidReg::EDX, 22);
    return has;
}

// TRANSFORMER_AMX: true unless it says 0.
inline bool amx_from_environment() {
    const char* v = std::getenv("TRANSFORMER_AMX");
    if (!v || std::strcmp(v, "1") == 0) return true;
    if (std::strcmp(v, "0") == 0) return false;
    std::fprintf(stderr, "%s: error: TRANSFORMER_AMX=%s: 0 (no AMX) or 1 (AMX where the CPU has it)\n",
                 program_invocation_short_name, v);
    std::exit(1);
}

enum class AmxType { INT8, BF16 };

// Whether this CPU and kernel let the process use AMX tiles of `type`, asked once: CPUID's
// AMX-TILE bit and AMX-INT8 or AMX-BF16 (with AVX512-BF16 for the conversions), the tile state
// enabled by the OS in XCR0 (bits 17 and 18), and Linux's permission for the tile data
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)).
inline bool amx_available(AmxType type) {
#ifdef CPU_AMX
    static const bool tiles = [] {
        if (!cpuid_bit(1, 0, CpuidReg::ECX, 27)) return false;    // OSXSAVE
        if (!cpuid_bit(7, 0, CpuidReg::EDX, 24)) return false;    // AMX-TILE
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        if ((lo & (3u << 17)) != (3u << 17)) return false;
        const long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
        return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    }();
    static const bool int8 = cpuid_bit(7, 0, CpuidReg::EDX, 25);   // AMX-INT8
    static const bool bf16 = cpu_lists_amx_bf16() && cpu_lists_avx512_bf16();
    return tiles && (type == AmxType::INT8 ? int8 : bf16);
#else
    (void)type;
    return false;
#endif
}

// ldtilecfg's 64-byte operand: palette 1, every tile 16 rows x 64 bytes.
struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
