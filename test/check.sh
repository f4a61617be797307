# test/check.sh — the shell tests' one way to report a result (test/check.h for the C++ ones):
# sourced by the shell tests (test_cli.sh, test_corpus.sh, test_bench_env.sh, test_gpu_bench.sh ...).
#   check STATUS DESCRIPTION    STATUS 0 passes; prints "PASS/FAIL DESCRIPTION" and counts it
#   skip REASON                 prints "SKIP REASON" and counts it apart (never a pass)
#   check_summary NAME          prints "NAME: N passed, M failed" (", K skipped" when K > 0);
#                               status non-zero on a failure
#   toy_corpus DIR              writes DIR/{train,test}.{en,es}: a toy parallel corpus
#   tiny_model DIR              the decoding benchmarks' tiny model and 12-line test set (below)
#   interrupt_and_resume DIR WHAT TRAIN_ARGS...
#                               Ctrl-C during ./train TRAIN_ARGS: two checks (below)
#   rewrite_meta FILE OUT PYTHON  OUT is checkpoint FILE with its header (h, a dict) changed by PYTHON
#   meta_value FILE KEY         prints checkpoint FILE's metadata KEY, "(none)" where it has none
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

# The decoding benchmarks' smoke runs (test_bench_env.sh, test_gpu_bench.sh): DIR/corpus a toy
# corpus, DIR/data/test.{en,es} its first 12 test lines, DIR/run/average.safetensors (and its
# vocab.bpe) a tiny model of 4 steps on the CPU, its log in DIR/run.log; the status is ./train's.
tiny_model() {
    toy_corpus "$1/corpus"
    mkdir -p "$1/data"
    head -n 12 "$1/corpus/test.en" > "$1/data/test.en"
    head -n 12 "$1/corpus/test.es" > "$1/data/test.es"
    "$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data "$1/corpus" --max-tokens 400 --warmup 20 \
        --log-every 1000s --eval-every 0 --no-eval --max-steps 4 --device cpu --out "$1/run" > "$1/run.log" 2>&1
}

# Ctrl-C (SIGINT) during `$B/train ARGS --out DIR` (a checkpoint every 4 steps; the signal once
# the first is there): exit status 130, the message, a checkpoint of the step K reached; then the
# run resumed to step K + 3 equals K + 3 steps uninterrupted (DIR.straight), bitwise. WHAT names
# the run in the checks' lines.
interrupt_and_resume() {
    local dir=$1 what=$2 pid i s last K end out
    shift 2
    "$B"/train "$@" --max-steps 100000 --save-every-steps 4 --out "$dir" > "$dir.log" 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 600 ] && ! ls "$dir"/ckpt-*.safetensors > /dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
    kill -INT $pid 2> /dev/null
    wait $pid
    s=$?
    last=$(ls "$dir"/ckpt-*.safetensors 2> /dev/null | tail -n 1)
    K=$(basename "${last:-ckpt-0}" .safetensors | sed 's/^ckpt-0*//')
    [ $s -eq 130 ] && grep -q "^interrupted: checkpoint saved; continue with --resume" "$dir.log" && [ "${K:-0}" -gt 0 ] &&
        grep -q "^stopping after this step, with a checkpoint (interrupt again to stop at once)$" "$dir.log" &&
        [ "$(tr -cd '\000' < "$dir.log" | wc -c)" -eq 0 ]
    check $? "SIGINT during $what: exit $s, said (no NUL byte written), a checkpoint of step ${K:-none} saved"
    [ "${K:-0}" -gt 0 ] || return
    "$B"/train "$@" --max-steps $((K + 3)) --save-every-steps 4 --out "$dir" --resume > /dev/null 2>&1 &&
        "$B"/train "$@" --max-steps $((K + 3)) --save-every-steps 4 --out "$dir.straight" > /dev/null 2>&1
    end=$(printf 'ckpt-%08d.safetensors' $((K + 3)))
    out=$(${PYTHON:-python3} test/same_tensors.py "$dir/$end" "$dir.straight/$end" 2>&1)
    check $? "$what resumed after SIGINT at step $K to step $((K + 3)) == $((K + 3)) steps uninterrupted, bitwise: $(echo "$out" | tail -n 1)"
}

# A checkpoint's header edited: OUT is FILE (a safetensors file) with its JSON header, the dict h,
# changed by the Python statement PYTHON (h["__metadata__"] the metadata); the tensors' bytes kept.
rewrite_meta() {
    python3 - "$1" "$2" "$3" <<'PY'
import sys, struct, json
f = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", f[:8])[0]
h = json.loads(f[8:8 + n]); exec(sys.argv[3])
t = json.dumps(h).encode(); t += b" " * (-len(t) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(t)) + t + f[8 + n:])
PY
}

# meta_value FILE KEY: the value of KEY in checkpoint FILE's metadata, "(none)" where it has none
meta_value() {
    python3 -c 'import sys, json, struct
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
print(json.loads(f.read(n))["__metadata__"].get(sys.argv[2], "(none)"))' "$1" "$2"
}
