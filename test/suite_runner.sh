# test/suite_runner.sh — how test/run_tests.sh runs its suites, sourced by it (and by
# test/test_suite_runner.sh, which runs made-up suites through it). `run NAME COMMAND...` starts
# a suite (when SUITES is "all" or names it); `suites_total` waits for the last, prints
# "tests: N passed, M failed, K skipped" and returns 1 on any failure. Each suite's output is
# printed whole, then counted from its closing line ("NAME: N passed, M failed[, K skipped]"): a
# suite fails when it prints no closing line, exits non-zero, prints more SKIP lines than its
# closing line counts skipped, or checks nothing without a SKIP line saying why (skips are
# counted apart, never passed).
passed=0
failed=0
skipped=0
SUITES=${SUITES:-all}   # the suites to run, by name (make test-emulated: the emulated ones)

# Suites run TEST_JOBS at a time (default 1; make test: 2), each into its own file; their
# outputs are printed and counted in the order they were started, whatever order they end in. A suite
# started in the background would ignore SIGINT and SIGQUIT (POSIX sh): env gives them back
# their defaults, so that Ctrl-C stops the suites running as it stops this script.
JOBS=${TEST_JOBS:-1}
DEFAULT_SIGNALS=""
if env --default-signal=INT,QUIT true 2> /dev/null; then DEFAULT_SIGNALS="env --default-signal=INT,QUIT"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
queued=""    # the suites started and not yet printed, oldest first (their numbers)
started=0

run() {  # run NAME COMMAND...: starts one suite, once fewer than JOBS are running
    suite=$1
    shift
    case " $SUITES " in *" all "* | *" $suite "*) ;; *) return ;; esac
    while [ "$(running)" -ge "$JOBS" ]; do
        finish_done
        [ "$(running)" -ge "$JOBS" ] && sleep 0.1
    done
    started=$((started + 1))
    n=$started
    echo "$suite" > "$work/$n.name"
    echo "=== $suite: $*" > "$work/$n.head"
    date +%s > "$work/$n.start"
    ( $DEFAULT_SIGNALS "$@" > "$work/$n.out" 2>&1; echo $? > "$work/$n.status.tmp"; date +%s > "$work/$n.end"
      mv "$work/$n.status.tmp" "$work/$n.status" ) < /dev/null &
    queued="$queued $n"
    [ "$JOBS" -eq 1 ] && finish_all
}

running() {  # how many started suites have not ended
    c=0
    for q in $queued; do [ -f "$work/$q.status" ] || c=$((c + 1)); done
    echo $c
}

finish_done() {  # prints and counts the oldest suites that have ended, in order
    while [ -n "$queued" ]; do
        set -- $queued
        [ -f "$work/$1.status" ] || return 0
        report "$1"
        shift
        queued="$*"
    done
}

finish_all() {  # waits for every started suite and reports them
    while [ -n "$queued" ]; do
        finish_done
        [ -n "$queued" ] && sleep 0.1
    done
}

report() {  # report N: prints suite N's output and adds its counts
    name=$(cat "$work/$1.name")
    cat "$work/$1.head"
    log="$work/$1.out"
    status=$(cat "$work/$1.status")
    cat "$log"
    line=$(grep -E '^[A-Za-z0-9_]+: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "FAIL $name: no closing line (exit status $status)"
        failed=$((failed + 1))
        return
    fi
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\1/')
    f=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\2/')
    k=$(echo "$line" | sed -nE 's/.*failed, ([0-9]+) skipped.*/\1/p')
    k=${k:-0}
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name: exit status $status"
        f=1
    fi
    # Every SKIP line is counted in the closing line (one may stand for several skipped checks):
    # a skip left out of the count would be passed over in the total.
    s=$(grep -c '^SKIP ' "$log")
    if [ "$s" -gt "$k" ]; then
        echo "FAIL $name: $s SKIP lines, but its closing line counts $k skipped"
        f=$((f + 1))
    fi
    # A suite that checked nothing passes only when it says what it skipped and why.
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && { [ "$k" -eq 0 ] || ! grep -q '^SKIP ' "$log"; }; then
        echo "FAIL $name: it checked nothing (0 passed, 0 failed) and skipped nothing with a reason"
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + k))
    echo "=== $name: $p passed, $f failed, $k skipped ($(( $(cat "$work/$1.end") - $(cat "$work/$1.start") )) s)"
}

suites_total() {  # waits for every suite, prints the totals; 1 on any failure
    finish_all
    echo "tests: $passed passed, $failed failed, $skipped skipped"
    [ "$failed" -eq 0 ]
}
