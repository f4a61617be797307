// thread_governor.cpp — the OpenMP thread count that follows the machine's load: see
// thread_governor.h for why and the rules.
#include "toolkit/thread_governor.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

constexpr double LOOK_EVERY_S = 0.25;   // the shortest interval looked at
constexpr double WAITING_TO_DROP = 0.3;  // thread-times waited for a core over an interval
constexpr double IDLE_TO_ADD = 0.6;      // idle cores over an interval

// The run-queue delay of every thread of this process so far, in seconds; < 0 when the kernel
// does not say (/proc/<pid>/task/<tid>/schedstat: time on a CPU, time waiting, timeslices, ns).
double threads_waited_s() {
    DIR* dir = opendir("/proc/self/task");
    if (!dir) return -1;
    double total = 0;
    bool any = false;
    while (const dirent* e = readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        char path[64];
        std::snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", e->d_name);
        FILE* f = std::fopen(path, "r");
        if (!f) continue;   // a thread that ended meanwhile
        unsigned long long on_cpu = 0, waited = 0;
        if (std::fscanf(f, "%llu %llu", &on_cpu, &waited) == 2) total += waited * 1e-9, any = true;
        std::fclose(f);
    }
    closedir(dir);
    return any ? total : -1;
}

// Idle core-seconds of the whole machine so far (/proc/stat's "cpu" line: idle + iowait); < 0
// when unreadable.
double machine_idle_s() {
    FILE* f = std::fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long user, nice, system, idle, iowait;
    const int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle, &iowait);
    std::fclose(f);
    const long hz = sysconf(_SC_CLK_TCK);
    return got == 5 && hz > 0 ? (double)(idle + iowait) / hz : -1;
}

bool governor_enabled() {
    const char* v = std::getenv("TRANSFORMER_THREADS_GOVERNOR");
    return !(v && !std::strcmp(v, "0"));
}

int omp_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// One per thread that decodes or trains: omp_set_num_threads() sets that thread's count.
struct Governor {
    bool started = false;
    double last_t = 0, last_waited = 0, last_idle = 0;
    GovernorStats stats;
};
thread_local Governor g_governor;

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Whether govern_threads looks now: on its first call, then every LOOK_EVERY_S while it governs.
bool governor_due(const Governor& g, double t) {
    return !g.started || (g.stats.active && t - g.last_t >= LOOK_EVERY_S);
}

}  // namespace

int governed_thread_count(int now, int most, const ThreadLoad& load) {
    if (load.waiting > WAITING_TO_DROP) return std::max(1, now - std::max(1, (int)std::lround(load.waiting)));
    if (load.idle >= IDLE_TO_ADD) return std::min(most, now + std::max(1, (int)(load.idle + 0.4)));
    return std::min(now, most);
}

void govern_threads() {
    const double t = now_s();
    if (governor_due(g_governor, t)) govern_threads_at(t, threads_waited_s(), machine_idle_s());
}

void govern_threads_at(double t, double waited, double idle) {
    Governor& g = g_governor;
    if (!governor_due(g, t)) return;
    if (!g.started) {
        g.started = true;
        g.stats.most = g.stats.now = omp_threads();
        g.stats.active = governor_enabled() && g.stats.most > 1 && waited >= 0 && idle >= 0;
        g.last_t = t, g.last_waited = waited, g.last_idle = idle;
        return;
    }
    if (waited < 0 || idle < 0) return;
    const double dt = t - g.last_t;
    const ThreadLoad load{(waited - g.last_waited) / dt, (idle - g.last_idle) / dt};
    g.last_t = t, g.last_waited = waited, g.last_idle = idle;
    const int next = governed_thread_count(g.stats.now, g.stats.most, load);
#ifdef _OPENMP
    if (next != g.stats.now) omp_set_num_threads(next);
#endif
    g.stats.now = next;
    g.stats.intervals++;
    g.stats.reduced += next < g.stats.most;
}

GovernorStats governor_stats() { return g_governor.stats; }

std::string governor_summary() {
    const GovernorStats& st = g_governor.stats;
    if (st.reduced == 0) return "";
    char buf[160];
    std::snprintf(buf, sizeof buf, "fewer OpenMP threads while the cores were busy: %d of %d after %ld of %ld looks",
                  st.now, st.most, st.reduced, st.intervals);
    return buf;
}
