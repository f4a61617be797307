// test/test_openmp_wait.cpp — cli/openmp_wait.h: a program that includes it runs its main()
// with GOMP_SPINCOUNT=4000, unless GOMP_SPINCOUNT or OMP_WAIT_POLICY was set, which stand.
//
// This program includes the header as ./train and ./translate do. Run with --print it prints
// what its main() sees (GOMP_SPINCOUNT, or "unset", and the number of OpenMP threads: the
// restarted program is a working OpenMP program). Without arguments it runs itself with
// --print under each environment below and compares.
#include "cli/openmp_wait.h"
#include "test/check.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

int print_what_main_sees() {
    const char* spin = std::getenv("GOMP_SPINCOUNT");
    int threads = 0;
#ifdef _OPENMP
#pragma omp parallel
#pragma omp single
    threads = omp_get_num_threads();
#else
    threads = 1;
#endif
    std::printf("%s %d\n", spin ? spin : "unset", threads);
    return 0;
}

// The first word this program prints with --print, run with `env ENV` (its path from /proc).
std::string spin_seen(const std::string& self, const char* env) {
    const std::string cmd = std::string("env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY ") + env + " OMP_NUM_THREADS=2 '" + self +
                            "' --print";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return "(popen failed)";
    char word[64] = "", threads[16] = "";
    const int got = std::fscanf(p, "%63s %15s", word, threads);
    const int status = pclose(p);
    if (got != 2 || status != 0) return "(no answer, exit " + std::to_string(status) + ")";
    return std::string(word) + " with " + threads + " threads";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && !std::strcmp(argv[1], "--print")) return print_what_main_sees();
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        check_skip("cannot read /proc/self/exe: the program cannot restart itself here either");
        return check_summary("openmp_wait");
    }
    self[n] = '\0';
    struct Case {
        const char* env;
        const char* want;
        const char* what;
    } cases[] = {
        {"", "4000 with 2 threads", "neither variable set: GOMP_SPINCOUNT=4000 added"},
        {"GOMP_SPINCOUNT=5", "5 with 2 threads", "a user's GOMP_SPINCOUNT stands"},
        {"OMP_WAIT_POLICY=passive", "unset with 2 threads", "a user's OMP_WAIT_POLICY: nothing added"},
        {"OMP_WAIT_POLICY=active", "unset with 2 threads", "OMP_WAIT_POLICY=active: nothing added"},
    };
    for (const Case& c : cases) {
        const std::string got = spin_seen(self, c.env);
        check(got == c.want, "%s: env %s -> main() sees GOMP_SPINCOUNT %s (want %s)", c.what,
              *c.env ? c.env : "(none)", got.c_str(), c.want);
    }
    return check_summary("openmp_wait");
}
