// test/check.h — the one way every C++ test in this project reports a result.
//
// Each check prints one line (what was compared, the numbers, PASS/FAIL) and is counted.
// A test program ends with `return check_summary("name");`, which prints
// "N passed, M failed" (", K skipped" when checks were skipped) alone on a line and returns
// non-zero when M > 0. A skipped check says SKIP and why (check_skip) and is never a pass.
#pragma once
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstddef>

struct CheckCounts { int passed = 0, failed = 0, skipped = 0; };
inline CheckCounts& check_counts() { static CheckCounts c; return c; }

// Records one boolean outcome with a printf-style description.
inline bool check(bool ok, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::printf("%s ", ok ? "PASS" : "FAIL");
    std::vprintf(fmt, ap);
    std::printf("\n");
    va_end(ap);
    (ok ? check_counts().passed : check_counts().failed)++;
    std::fflush(stdout);
    return ok;
}

// Records a check that could not run here, with the reason (printf-style): "SKIP reason".
inline void check_skip(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::printf("SKIP ");
    std::vprintf(fmt, ap);
    std::printf("\n");
    va_end(ap);
    check_counts().skipped++;
    std::fflush(stdout);
}

// Compares two float arrays. Error is normalised by the reference's largest magnitude:
// max|got - want| <= tol * max(max|want|, floor) passes. Prints max abs and rel error. Nothing
// to compare (n = 0: a tensor that came back empty) fails: it shows no agreement.
inline bool check_close(const char* what, const float* got, const float* want, size_t n,
                        double tol, double floor = 1e-6) {
    double max_abs = 0, max_ref = 0;
    bool finite = true;
    for (size_t i = 0; i < n; i++) {
        if (!std::isfinite(got[i])) finite = false;
        double d = std::fabs((double)got[i] - (double)want[i]);
        if (d > max_abs || std::isnan(d)) max_abs = std::isnan(d) ? INFINITY : d;
        if (std::fabs((double)want[i]) > max_ref) max_ref = std::fabs((double)want[i]);
    }
    double rel = max_abs / (max_ref > floor ? max_ref : floor);
    return check(n > 0 && finite && rel <= tol, "%-52s n=%-8zu max_abs=%.3e rel=%.3e tol=%.0e", what, n,
                 max_abs, rel, tol);
}

// Prints the closing line and returns the process exit status.
inline int check_summary(const char* suite) {
    const CheckCounts& c = check_counts();
    if (c.skipped)
        std::printf("%s: %d passed, %d failed, %d skipped\n", suite, c.passed, c.failed, c.skipped);
    else
        std::printf("%s: %d passed, %d failed\n", suite, c.passed, c.failed);
    return c.failed > 0 ? 1 : 0;
}
