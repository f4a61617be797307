#!/bin/bash
# test/fuzz/run_fuzz.sh SECONDS TARGET... — runs each libFuzzer target (build/fuzz/fuzz_NAME) for
# SECONDS, one after the other, from its seeds in test/fuzz/NAME/ (read-only) and its growing
# corpus in build/fuzz/corpus/NAME/. Prints per target the executions, the corpus size and the
# findings (crash-*, leak-*, timeout-*, oom-* files in build/fuzz/findings/), and exits 1 when
# any target found something. A finding is fixed, then its input is copied into
# test/fuzz/NAME/ as regress-<what> so that `make test` replays it (test/fuzz/replay_main.cpp).
set -u
seconds=$1
shift
dir=build/fuzz
mkdir -p "$dir/findings" "$dir/logs"
export OMP_NUM_THREADS=1   # the fuzzers run one at a time, one core each
status=0
summary=""
for t in "$@"; do
    mkdir -p "$dir/corpus/$t"
    log="$dir/logs/$t.log"
    before=$(ls "$dir/findings" | grep -c "^$t-" || true)
    echo "=== fuzz $t: $seconds s"
    "$dir/fuzz_$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/findings/$t-" "$dir/corpus/$t" "test/fuzz/$t" > "$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    units=$(ls "$dir/corpus/$t" | wc -l)
    after=$(ls "$dir/findings" | grep -c "^$t-" || true)
    found=$((after - before))
    line="fuzz $t: ${execs:-?} executions in $seconds s, corpus $units inputs, $found new findings (exit $rc)"
    echo "$line"
    if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
        status=1
        grep -m3 -E 'ERROR|invariant|runtime error' "$log"
        ls "$dir/findings" | grep "^$t-" | sed "s|^|  $dir/findings/|"
    fi
    summary="$summary$line"$'\n'
done
echo "=== fuzz summary"
printf '%s' "$summary"
exit $status
