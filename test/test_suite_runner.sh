#!/bin/sh
# test/test_suite_runner.sh — test/suite_runner.sh (how run_tests.sh runs and counts its suites)
# on made-up suites, one at a time and two at a time (TEST_JOBS 1 and 2):
#   - the outputs are printed whole and in the order the suites were started, also when a
#     later one ends first (two at a time: the first waits for a file the third writes, which
#     starts only once the second has ended and freed its place: the first passes only when it
#     ran beside both, and the second's output waits for the first's);
#   - the totals add up the closing lines; a suite fails when it prints no closing line, exits
#     non-zero, prints more SKIP lines than its closing line counts, or checks nothing without
#     a SKIP line saying why; a suite that skipped with a reason is counted skipped, not passed;
#   - SUITES runs only the suites it names;
#   - a suite started in the background does not ignore SIGINT (POSIX sh would leave it ignored
#     there, and Ctrl-C would not stop it).
# Ends with "suite_runner: N passed, M failed".
set -u
. test/check.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# made_up_suites JOBS SUITES: runs the made-up suites through the runner, its output in $T/out.JOBS
made_up_suites() {
    rm -f "$T/third.started" "$T/filtered.ran"
    (
        TEST_JOBS=$1 SUITES=$2
        . test/suite_runner.sh
        if [ "$1" -gt 1 ]; then wait_for="i=0; while [ ! -f $T/third.started ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i + 1)); done"
        else wait_for=":"; fi
        run first sh -c "$wait_for; [ -f $T/third.started ] || [ $1 -eq 1 ] || echo 'FAIL the third did not run beside the first'
                         echo 'first output'; echo 'first: 2 passed, 0 failed'"
        run second sh -c "echo 'second output'; echo 'second: 3 passed, 0 failed'"
        run no_line sh -c "touch $T/third.started; echo 'a suite that crashed before its closing line'"
        run exit_status sh -c "echo 'exit_status: 1 passed, 0 failed'; exit 3"
        run skip_lines sh -c "echo 'SKIP one'; echo 'SKIP two'; echo 'skip_lines: 1 passed, 0 failed, 1 skipped'"
        run nothing sh -c "echo 'nothing: 0 passed, 0 failed'"
        run skipped_reason sh -c "echo 'SKIP no GPU here'; echo 'skipped_reason: 0 passed, 0 failed, 1 skipped'"
        run failing sh -c "echo 'FAIL a check'; echo 'failing: 4 passed, 1 failed'"
        run filtered sh -c "touch $T/filtered.ran; echo 'filtered: 1 passed, 0 failed'"
        run sigint sh -c "kill -INT \$\$; echo 'sigint: 1 passed, 0 failed'"
        suites_total
    ) > "$T/out.$1" 2>&1
    echo $? > "$T/status.$1"
}

ALL="first second no_line exit_status skip_lines nothing skipped_reason failing sigint"
for jobs in 1 2; do
    made_up_suites $jobs "$ALL"
    out=$T/out.$jobs
    # the order: each header, its output, its closing line, the next suite's header
    order=$(grep -E '^=== [a-z_]+: [0-9]+ passed|^=== [a-z_]+: sh|^(first|second) output' "$out" | sed -E 's/^=== ([a-z_]+): .*/\1/' |
        tr '\n' ' ')
    [ "$order" = "first first output first second second output second no_line exit_status exit_status skip_lines skip_lines nothing nothing skipped_reason skipped_reason failing failing sigint " ]
    check $? "TEST_JOBS=$jobs: outputs whole, in the order started: $order"
    ! grep -qx 'FAIL the third did not run beside the first' "$out"
    check $? "TEST_JOBS=$jobs: $([ $jobs -gt 1 ] && echo 'the first suite waited for the third, started once the second had ended: they ran two at a time' || echo 'one at a time')"
    grep -qx 'FAIL no_line: no closing line (exit status 0)' "$out"
    check $? "TEST_JOBS=$jobs: a suite without its closing line fails: $(grep -m1 '^FAIL no_line' "$out")"
    grep -qx 'FAIL exit_status: exit status 3' "$out"
    check $? "TEST_JOBS=$jobs: a suite exiting 3 with 0 failed fails: $(grep -m1 '^FAIL exit_status' "$out")"
    grep -qx 'FAIL skip_lines: 2 SKIP lines, but its closing line counts 1 skipped' "$out"
    check $? "TEST_JOBS=$jobs: more SKIP lines than counted fails: $(grep -m1 '^FAIL skip_lines' "$out")"
    grep -qx 'FAIL nothing: it checked nothing (0 passed, 0 failed) and skipped nothing with a reason' "$out"
    check $? "TEST_JOBS=$jobs: a suite that checked nothing fails: $(grep -m1 '^FAIL nothing' "$out")"
    ! grep -q '^FAIL skipped_reason' "$out" && grep -q '^=== skipped_reason: 0 passed, 0 failed, 1 skipped' "$out"
    check $? "TEST_JOBS=$jobs: a suite that only skipped, with a reason, is counted skipped: $(grep '^=== skipped_reason: 0' "$out")"
    ! grep -q '^=== filtered' "$out" && [ ! -f "$T/filtered.ran" ]
    check $? "TEST_JOBS=$jobs: SUITES without 'filtered' does not run it"
    grep -Eq '^FAIL sigint: no closing line \(exit status (130|2)\)' "$out"
    if env --default-signal=INT true 2> /dev/null; then
        check $? "TEST_JOBS=$jobs: SIGINT stops a suite (not ignored): $(grep -m1 '^FAIL sigint' "$out")"
    else
        skip "TEST_JOBS=$jobs: SIGINT in a suite: this env has no --default-signal (coreutils 9.0 and later)"
    fi
    # passed 2+3+1+1+4 = 11 (exit_status's and skip_lines' own passes count, their failures too);
    # failed: no_line 1, exit_status 1, skip_lines 1, nothing 1, failing 1, sigint 1 = 6 (where
    # SIGINT stays ignored, sigint passes: 12 and 5)
    want="tests: 11 passed, 6 failed, 2 skipped"
    env --default-signal=INT true 2> /dev/null || want="tests: 12 passed, 5 failed, 2 skipped"
    total=$(tail -n 1 "$out")
    [ "$total" = "$want" ] && [ "$(cat "$T/status.$jobs")" -eq 1 ]
    check $? "TEST_JOBS=$jobs: totals and exit status: $total, exit $(cat "$T/status.$jobs") (want ${want#tests: }, exit 1)"
done

# all passing: exit status 0
(
    TEST_JOBS=2 SUITES=all
    . test/suite_runner.sh
    run one sh -c "echo 'one: 1 passed, 0 failed'"
    run two sh -c "echo 'two: 2 passed, 0 failed'"
    suites_total
) > "$T/pass.out" 2>&1
s=$?
[ $s -eq 0 ] && [ "$(tail -n 1 "$T/pass.out")" = "tests: 3 passed, 0 failed, 0 skipped" ]
check $? "every suite passing: $(tail -n 1 "$T/pass.out"), exit $s"
check_summary suite_runner
