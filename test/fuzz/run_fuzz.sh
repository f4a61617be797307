#!/bin/bash
# test/fuzz/run_fuzz.sh SECONDS TARGET... — runs each libFuzzer target (build/fuzz/fuzz_NAME) for
# SECONDS, FUZZ_JOBS at a time (default 2), from its seeds in test/fuzz/NAME/ (read-only) and its growing
# corpus in build/fuzz/corpus/NAME/. Prints per target the executions, the corpus size and the
# findings (crash-*, leak-*, timeout-*, oom-* files in build/fuzz/findings/), and exits 1 when
# any target found something. A finding is fixed, then its input is copied into
# test/fuzz/NAME/ as regress-<what> so that `make test` replays it (test/fuzz/replay_main.cpp).
set -u
seconds=$1
shift
jobs=${FUZZ_JOBS:-2}
dir=build/fuzz
mkdir -p "$dir/findings" "$dir/logs"
export OMP_NUM_THREADS=1   # one core each: FUZZ_JOBS targets at a time (default 2; 1: one after the other)

fuzz_one() {   # TARGET: runs it, writes its report to $dir/logs/TARGET.report, exits 1 on a finding
    local t=$1 log="$dir/logs/$1.log" report="$dir/logs/$1.report" before after found rc execs units
    mkdir -p "$dir/corpus/$t"
    before=$(ls "$dir/findings" | grep -c "^$t-" || true)
    "$dir/fuzz_$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/findings/$t-" "$dir/corpus/$t" "test/fuzz/$t" > "$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    units=$(ls "$dir/corpus/$t" | wc -l)
    after=$(ls "$dir/findings" | grep -c "^$t-" || true)
    found=$((after - before))
    echo "fuzz $t: ${execs:-?} executions in $seconds s, corpus $units inputs, $found new findings (exit $rc)" > "$report"
    if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
        { grep -m3 -E 'ERROR|invariant|runtime error' "$log"
          ls "$dir/findings" | grep "^$t-" | sed "s|^|  $dir/findings/|"; } >> "$report"
        return 1
    fi
}

# Start each target once fewer than $jobs run; a target's report is printed when it ends.
status=0
running=0
for t in "$@"; do
    rm -f "$dir/logs/$t.report"
    if [ "$running" -ge "$jobs" ]; then
        wait -n || status=1
        running=$((running - 1))
    fi
    echo "=== fuzz $t: $seconds s"
    fuzz_one "$t" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || status=1
    running=$((running - 1))
done
echo "=== fuzz summary"
for t in "$@"; do
    cat "$dir/logs/$t.report" 2> /dev/null || { echo "fuzz $t: no report (the script's own failure)"; status=1; }
done
exit $status
