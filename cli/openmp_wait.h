// cli/openmp_wait.h — how long an idle OpenMP thread spins before it sleeps, chosen for a
// machine shared with other work. Include it once per program, in the file that holds main().
//
// At a barrier, and at the end of each parallel region, libgomp's threads spin for
// GOMP_SPINCOUNT iterations (300,000 by default, about 3 ms) before they sleep. Alone on the
// machine, spinning saves a wake-up. When another process takes a core, a thread that spins
// on it takes time from the thread that shares the core and is still working, and every
// parallel loop waits for that one: on a 2-core Zen 3 VM with one `yes` running, the tiny
// training step took 1,568-1,692 ms with the default and 1,101-1,106 ms with 1,000 spins
// (about 10 microseconds); greedy decoding of the synthetic small batch went from 1,535 to
// 2,550 tokens/s. Alone on the machine both were the same within the VM's noise
// (training 605-615 against 602-668 ms).
//
// libgomp reads its environment once, in a constructor of libgomp.so that runs before main()
// and before any constructor of the program, so setting the variable from main() is too late,
// and a setenv() in the executable's .preinit_array (which runs before the libraries'
// constructors) is undone when libc's own constructor resets environ. So that function
// (given argc, argv and envp) instead starts the program again, execve("/proc/self/exe"),
// with GOMP_SPINCOUNT=1000 added: the same process (PID, open files, limits), a millisecond
// or two later. Nothing happens when GOMP_SPINCOUNT or OMP_WAIT_POLICY is already set (a
// user's choice stands; GOMP_SPINCOUNT=300000 restores libgomp's default), and when the exec
// fails the program runs on with libgomp's defaults. (valgrind does not follow the exec
// unless given --trace-children=yes: set GOMP_SPINCOUNT under it.)
#pragma once
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace openmp_wait {
inline void spin_briefly(int, char** argv, char** envp) {
    size_t n = 0;
    for (; envp[n]; n++)
        if (!std::strncmp(envp[n], "GOMP_SPINCOUNT=", 15) || !std::strncmp(envp[n], "OMP_WAIT_POLICY=", 16)) return;
    char** env = static_cast<char**>(std::malloc((n + 2) * sizeof(char*)));   // (no C++ runtime yet)
    if (!env) return;
    std::memcpy(env, envp, n * sizeof(char*));
    env[n] = const_cast<char*>("GOMP_SPINCOUNT=1000");
    env[n + 1] = nullptr;
    execve("/proc/self/exe", argv, env);
    std::free(env);   // the exec failed: run on as we are
}
__attribute__((section(".preinit_array"), used)) static void (*const before_libgomp)(int, char**, char**) = spin_briefly;
}  // namespace openmp_wait
