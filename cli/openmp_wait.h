// cli/openmp_wait.h — how long an idle OpenMP thread spins before it sleeps. Include it once
// per program, in the file that holds main().
//
// At a barrier, and at the end of each parallel region, libgomp's threads spin for
// GOMP_SPINCOUNT iterations (300,000 by default, milliseconds) before they sleep; a sleeping
// thread costs the next parallel region a wake-up (a futex call and, in a VM, an interrupt to
// another core: about 8 microseconds an op here). Decoding runs some 40 small ops a step, so
// the count matters: int8 decoding of the test set on the 2-core Xeon VM, alone on it, greedy
// / beam 4, took 1.92 / 4.6 s with 1,000 spins, 1.64 / 3.97 s with 2,000, 1.53 / 3.8 s with
// 4,000 and 8,000, and about as long with 30,000. When another process takes a core, spinning
// takes time from the thread that shares the core and is still working: with one `yes` running
// the same runs took 4.3 / 10.1 s with 1,000 spins, 5.2 / 12.8 s with 2,000 and 7.0 / 15.8 s
// with 4,000 (the tiny training step 1,101 ms with 1,000 and 1,568-1,692 ms with libgomp's
// default, on a Zen 3 VM). toolkit/thread_governor.h takes that case: while our threads wait
// for a core it runs fewer of them (one thread, with `yes`: 2.9 / 7.4 s), and a team of one
// never spins. So the count is 4,000 (tens of microseconds), for the machine that is ours.
//
// libgomp reads its environment once, in a constructor of libgomp.so that runs before main()
// and before any constructor of the program, so setting the variable from main() is too late,
// and a setenv() in the executable's .preinit_array (which runs before the libraries'
// constructors) is undone when libc's own constructor resets environ. So that function
// (given argc, argv and envp) instead starts the program again, execve("/proc/self/exe"),
// with GOMP_SPINCOUNT=4000 added: the same process (PID, open files, limits), a millisecond
// or two later. Nothing happens when GOMP_SPINCOUNT or OMP_WAIT_POLICY is already set (a
// user's choice stands; GOMP_SPINCOUNT=300000 restores libgomp's default), and when the exec
// fails the program runs on with libgomp's defaults. (valgrind does not follow the exec
// unless given --trace-children=yes: set GOMP_SPINCOUNT under it.)
//
// The same function first refuses an OMP_NUM_THREADS above MAX_THREADS (any of its
// comma-separated levels), with a message and exit status 2: libgomp (GCC 12) crashes in its
// first parallel region at 65,534 threads, and far fewer only slow a program down (1,000 on 2
// cores decoded one sentence 25 times slower than 2).
#pragma once
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace openmp_wait {
constexpr long MAX_THREADS = 4096;

// write() alone: this runs before the C library has finished starting.
inline void say(const char* s) { ssize_t w = write(2, s, std::strlen(s)); (void)w; }
inline void say_number(long n) {   // n >= 0, in decimal
    char digits[24];
    int i = sizeof digits - 1;
    digits[i] = '\0';
    do digits[--i] = (char)('0' + n % 10); while ((n /= 10) > 0);
    say(digits + i);
}

// OMP_NUM_THREADS's levels, "8" or "8,2": whether one asks for more than MAX_THREADS.
inline bool too_many_threads(const char* value) {
    for (const char* p = value; *p;) {
        char* end = nullptr;
        const long n = std::strtol(p, &end, 10);
        if (end == p) return false;   // not a number: libgomp's own rules apply
        if (n > MAX_THREADS) return true;
        p = *end == ',' ? end + 1 : end + std::strlen(end);
    }
    return false;
}

inline void refuse_too_many_threads(char** argv, char** envp) {
    for (size_t i = 0; envp[i]; i++) {
        if (std::strncmp(envp[i], "OMP_NUM_THREADS=", 16) || !too_many_threads(envp[i] + 16)) continue;
        const char* name = std::strrchr(argv[0], '/');
        say(name ? name + 1 : argv[0]);
        say(": error: ");
        say(envp[i]);
        say(": at most ");
        say_number(MAX_THREADS);
        say(" threads (libgomp crashes at 65534; more threads than cores only slow the program)\n");
        _exit(2);
    }
}

inline void spin_briefly(int, char** argv, char** envp) {
    refuse_too_many_threads(argv, envp);
    size_t n = 0;
    for (; envp[n]; n++)
        if (!std::strncmp(envp[n], "GOMP_SPINCOUNT=", 15) || !std::strncmp(envp[n], "OMP_WAIT_POLICY=", 16)) return;
    char** env = static_cast<char**>(std::malloc((n + 2) * sizeof(char*)));   // (no C++ runtime yet)
    if (!env) return;
    std::memcpy(env, envp, n * sizeof(char*));
    env[n] = const_cast<char*>("GOMP_SPINCOUNT=4000");
    env[n + 1] = nullptr;
    execve("/proc/self/exe", argv, env);
    std::free(env);   // the exec failed: run on as we are
}
__attribute__((section(".preinit_array"), used)) static void (*const before_libgomp)(int, char**, char**) = spin_briefly;
}  // namespace openmp_wait
