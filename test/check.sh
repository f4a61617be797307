# test/check.sh — the shell tests' one way to report a result (test/check.h for the C++ ones):
# sourced by test_cli.sh, test_corpus.sh and test_bench_env.sh.
#   check STATUS DESCRIPTION    STATUS 0 passes; prints "PASS/FAIL DESCRIPTION" and counts it
#   check_summary NAME          prints "NAME: N passed, M failed"; status non-zero on a failure
passed=0
failed=0

check() {
    if [ "$1" -eq 0 ]; then echo "PASS $2"; passed=$((passed + 1));
    else echo "FAIL $2"; failed=$((failed + 1)); fi
}

check_summary() {
    echo "$1: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
