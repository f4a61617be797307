# test/check.sh — the shell tests' one way to report a result (test/check.h for the C++ ones):
# sourced by test_cli.sh, test_corpus.sh and test_bench_env.sh.
#   check STATUS DESCRIPTION    STATUS 0 passes; prints "PASS/FAIL DESCRIPTION" and counts it
#   skip REASON                 prints "SKIP REASON" and counts it apart (never a pass)
#   check_summary NAME          prints "NAME: N passed, M failed" (", K skipped" when K > 0);
#                               status non-zero on a failure
passed=0
failed=0
skipped=0

check() {
    if [ "$1" -eq 0 ]; then echo "PASS $2"; passed=$((passed + 1));
    else echo "FAIL $2"; failed=$((failed + 1)); fi
}

skip() {
    echo "SKIP $*"
    skipped=$((skipped + 1))
}

check_summary() {
    if [ "$skipped" -gt 0 ]; then echo "$1: $passed passed, $failed failed, $skipped skipped"
    else echo "$1: $passed passed, $failed failed"; fi
    [ "$failed" -eq 0 ]
}
