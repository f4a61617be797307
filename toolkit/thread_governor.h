// toolkit/thread_governor.h — how many OpenMP threads the CPU's ops use, on a machine shared
// with other work: fewer while our threads wait for a core, the most again when cores go idle.
//
// Why. Every op is an OpenMP parallel loop, and each loop's threads meet at its end. On a
// 2-core VM with one other busy process (`yes`), two threads share the cores with it, every
// loop waits for whichever thread the scheduler left out, and int8 decoding of the test set
// took 4.3 s greedy (10.1 s beam 4) with two threads against 2.9 s (7.4 s) with one. Alone on
// the machine, two threads take 1.5 s (3.8 s). So the thread count follows the machine.
//
// How. govern_threads(), called between units of work (a decoding step, a training step), looks
// at most every quarter of a second at how long this process's threads waited for a core
// (/proc/self/task/*/schedstat, the run-queue delay) and how much of the machine idled
// (/proc/stat), over the time since it last looked, and then sets omp_set_num_threads() on the
// calling thread: one thread fewer (or as many fewer as thread-times waited) when our threads
// waited for more than 0.3 of a thread's time; as many more as there were idle cores (from 0.6
// of a core) up to the count the run started with. The ops give the same bits for any thread
// count (tested), so a translation or a training run does not depend on it.
// TRANSFORMER_THREADS_GOVERNOR=0 in the environment turns it off (fixed threads: benchmarks).
#pragma once
#include <string>

// What the governor read over one interval: thread-times our threads waited for a core, and
// idle cores (each in units of one core for the interval).
struct ThreadLoad {
    double waiting;
    double idle;
};

// The policy alone: the thread count after an interval at `now` threads of at most `most`.
int governed_thread_count(int now, int most, const ThreadLoad& load);

// Adjusts the calling thread's OpenMP thread count (see above); cheap between its looks.
void govern_threads();
// The same at time t_s (seconds) with the two counters it reads given (the thread-seconds this
// process's threads waited for a core so far, the machine's idle core-seconds so far; < 0:
// unreadable): how tests drive the governor through loads of their choosing.
void govern_threads_at(double t_s, double waited_s, double idle_s);

// This thread's governor: whether it governs (not when turned off, with one thread, or where
// /proc does not say the delays), the count it started with and the count now, the intervals
// looked at and, of them, those that ended below the starting count.
struct GovernorStats {
    bool active = false;
    long intervals = 0, reduced = 0;
    int most = 0, now = 0;
};
GovernorStats governor_stats();
// "" when the count never went down, else e.g. "fewer OpenMP threads while the cores were
// busy: 1 of 2 after 12 of 40 looks".
std::string governor_summary();
