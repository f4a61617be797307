#!/bin/bash
# test/soak.sh KILLS [PROGRAM_DIR] — kill -9 soak: trains a tiny model on a toy corpus while
# killing ./train with SIGKILL at random moments (KILLS times: 20 in `make soak`, 3 in
# `make test`), resuming with --resume after each kill. After every kill, every checkpoint on
# disk must load (./translate --model CKPT < /dev/null exits 0); at the end the last checkpoint's
# parameters and Adam state must be bitwise equal to those of an uninterrupted run of the same
# steps (steps-based saving, --save-every-steps 2). Ends with "soak: N passed, M failed".
set -u
KILLS=${1:-20}
B=${2:-.}
. test/check.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
STEPS=$((40 + 40 * KILLS))
SEED=${SOAK_SEED:-$$}
RANDOM=$SEED

mkdir -p "$T/corpus"
awk 'BEGIN { srand(3); split("sun moon star sky sea land tree rock fire rain", w, " ");
  for (i = 0; i < 300; i++) { n = 2 + int(rand() * 5); en = ""; es = "";
    for (j = 0; j < n; j++) { x = w[1 + int(rand() * 10)]; en = en (j ? " " : "") x; es = x "o" (j ? " " : "") es }
    print en > "'"$T"'/corpus/train.en"; print es > "'"$T"'/corpus/train.es" } }'
ARGS="--config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data $T/corpus --max-steps $STEPS --time 0
      --max-tokens 300 --save-every-steps 2 --save-every 0 --keep 3 --no-eval --average 0 --log-every 1000s"

# The parameters and Adam state of a checkpoint: its data section (the bytes after the header).
data_digest() {
    python3 -c 'import sys, struct, hashlib
f = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", f[:8])[0]
print(hashlib.sha256(f[8 + n:]).hexdigest(), len(f) - 8 - n)' "$1"
}

start_ms=$(date +%s%3N)
"$B"/train $ARGS --out "$T/ref" > "$T/ref.log" 2>&1
check $? "uninterrupted run of $STEPS steps: $(tail -n 1 "$T/ref.log")"
# Kill moments scale with this machine's speed: at most a (2 * KILLS)-th of the uninterrupted
# run after a new checkpoint (between 10 ms and 0.9 s), so that runs end by a kill, not by
# finishing, on a fast machine as on a loaded one.
WINDOW_MS=$(( ($(date +%s%3N) - start_ms) / (2 * KILLS) ))
[ $WINDOW_MS -lt 10 ] && WINDOW_MS=10
[ $WINDOW_MS -gt 900 ] && WINDOW_MS=900

echo "seed $SEED (SOAK_SEED=$SEED repeats these kill moments)"
kills=0 runs=0 bad_loads=0 finished=0
while [ $kills -lt "$KILLS" ] && [ $runs -lt $((KILLS * 3)) ]; do
    runs=$((runs + 1))
    "$B"/train $ARGS --out "$T/soak" --resume > "$T/run.log" 2>&1 &
    pid=$!
    # One kill in four at a random moment of the start-up (BPE, data, loading the checkpoint);
    # the others once this run has trained (a new checkpoint on disk), then 0 to WINDOW_MS
    # later: during a step or a checkpoint write.
    if [ $((RANDOM % 4)) -eq 0 ]; then
        sleep "$(printf '0.%03d' $((RANDOM % WINDOW_MS)))"
    else
        before=$(ls "$T/soak" 2> /dev/null | grep "^ckpt-" | grep -v tmp | tail -n 1)
        for _ in $(seq 1500); do
            now=$(ls "$T/soak" 2> /dev/null | grep '^ckpt-' | grep -v tmp | tail -n 1)
            [ -n "$now" ] && [ "$now" != "$before" ] && break
            kill -0 $pid 2> /dev/null || break
            sleep 0.02
        done
        sleep "$(printf '0.%03d' $((RANDOM % WINDOW_MS)))"
    fi
    if kill -9 $pid 2> /dev/null; then
        wait $pid 2> /dev/null
        kills=$((kills + 1))
        step=$(ls "$T/soak" 2> /dev/null | grep -o 'ckpt-[0-9]*' | tail -n 1)
        for c in "$T/soak"/ckpt-*.safetensors; do
            [ -e "$c" ] || continue
            if ! "$B"/translate --model "$c" < /dev/null > /dev/null 2> "$T/load.txt"; then
                bad_loads=$((bad_loads + 1))
                echo "after kill $kills: $(basename "$c") does not load: $(head -c 200 "$T/load.txt")"
            fi
        done
        echo "kill $kills (run $runs): last checkpoint ${step:-none}, $(ls "$T/soak"/ckpt-*.safetensors 2> /dev/null | wc -l) on disk, all load"
    else
        wait $pid; s=$?
        [ $s -eq 0 ] && { finished=1; echo "run $runs finished before its kill"; break; }
        echo "run $runs failed on its own (exit $s): $(tail -n 2 "$T/run.log")"
        bad_loads=$((bad_loads + 1))
        break
    fi
done
check $(( kills < KILLS )) "$kills kills with SIGKILL at random moments (wanted $KILLS)"
check $bad_loads "every checkpoint on disk loads after every kill ($bad_loads failures)"
if [ $finished -eq 0 ]; then
    "$B"/train $ARGS --out "$T/soak" --resume > "$T/run.log" 2>&1
    check $? "the last --resume runs to step $STEPS: $(tail -n 1 "$T/run.log")"
fi
last=$(printf 'ckpt-%08d.safetensors' "$STEPS")
a=$(data_digest "$T/ref/$last" 2>&1) b=$(data_digest "$T/soak/$last" 2>&1)
[ -n "$a" ] && [ "$a" = "$b" ]
check $? "step $STEPS after $kills kills: parameters and Adam state bitwise equal to the uninterrupted run (sha256 ${a%% *} vs ${b%% *})"
check_summary soak
