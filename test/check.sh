# test/check.sh — the shell tests' one way to report a result (test/check.h for the C++ ones):
# sourced by test_cli.sh, test_corpus.sh and test_bench_env.sh.
#   check STATUS DESCRIPTION    STATUS 0 passes; prints "PASS/FAIL DESCRIPTION" and counts it
#   skip REASON                 prints "SKIP REASON" and counts it apart (never a pass)
#   check_summary NAME          prints "NAME: N passed, M failed" (", K skipped" when K > 0);
#                               status non-zero on a failure
#   toy_corpus DIR              writes DIR/{train,test}.{en,es}: a toy parallel corpus
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

# A toy corpus (600 training pairs, 20 test pairs): Spanish-like suffixes on reversed words.
toy_corpus() {
    mkdir -p "$1"
    awk 'BEGIN { srand(3); split("sun moon star sky sea land tree rock fire rain", w, " ");
      for (i = 0; i < 600; i++) { n = 2 + int(rand() * 5); en = ""; es = "";
        for (j = 0; j < n; j++) { x = w[1 + int(rand() * 10)]; en = en (j ? " " : "") x; es = x "o" (j ? " " : "") es }
        print en > "'"$1"'/train.en"; print es > "'"$1"'/train.es";
        if (i < 20) { print en > "'"$1"'/test.en"; print es > "'"$1"'/test.es" } } }'
}
