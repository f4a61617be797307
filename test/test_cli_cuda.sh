#!/bin/sh
# test/test_cli_cuda.sh — the programs with --device cuda, as a user runs them: ./train on the
# GPU in fp32 (against the same run on the CPU) and bf16, a checkpoint written on the GPU read
# on the CPU and back, --resume on the GPU bitwise, and ./translate on the GPU against the CPU
# (greedy, beam 4, n-best). On a GPU machine (make gpu-check) the real backend runs it; in
# make test, TRANSFORMER_CUDA_EMULATOR names the emulator's build of transformer.cu
# (test/cuda_emulator), so the kernels and every host path around them run on the CPU. Without
# either it says SKIP. Ends with "cli_cuda: N passed, M failed[, K skipped]".
#
#   sh test/test_cli_cuda.sh [PROGRAM_DIR]
set -u
B=${1:-.}
PYTHON=${PYTHON:-python3}   # same_tensors.py needs only the standard library
. test/check.sh
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

if ! echo | "$B"/translate --device cuda --model /nonexistent > /dev/null 2> "$T/probe.txt" &&
   grep -qE "no CUDA backend|NVIDIA driver|no CUDA device|sees no" "$T/probe.txt"; then
    echo "SKIP cli_cuda: no GPU here and no emulator named ($(head -n 1 "$T/probe.txt"))"
    echo "cli_cuda: 0 passed, 0 failed, 1 skipped"
    exit 0
fi

toy_corpus "$T/corpus"
ARGS="--config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data $T/corpus --max-tokens 400 --warmup 20 --log-every 1000s --eval-every 0"
# (The final evaluation, a few seconds on the emulator, runs after the first run here and in the
# memory checks below; the runs that only compare parameters or read the device line skip it.)

# fp32 on the GPU and on the CPU: same data, same dropout masks (the shared generator), so the
# parameters after 12 Adam steps agree to float rounding.
"$B"/train $ARGS --device cuda --precision fp32 --max-steps 12 --out "$T/gpu" > "$T/gpu.log" 2>&1
check $? "./train --device cuda --precision fp32: 12 steps, exit 0"
grep -q "^device: .*fp32" "$T/gpu.log"; check $? "./train names the device it ran on ($(grep -m1 '^device:' "$T/gpu.log"))"
"$B"/train $ARGS --device cpu --max-steps 12 --out "$T/cpu" > "$T/cpu.log" 2>&1
check $? "./train --device cpu: the same 12 steps, exit 0"
G="$T/gpu/ckpt-00000012.safetensors"
C="$T/cpu/ckpt-00000012.safetensors"
# (k_proj.bias: its gradient is exactly 0 but for rounding noise, on which Adam takes full steps)
out=$($PYTHON test/same_tensors.py "$G" "$C" --atol 1e-4 --skip k_proj.bias 2>&1)
check $? "after 12 steps the GPU's parameters and Adam state are within 1e-4 of the CPU's: $(echo "$out" | tail -n 1)"

# --resume on the GPU: 6 steps, then 6 more, equal 12 uninterrupted steps bitwise (Adam included).
"$B"/train $ARGS --no-eval --device cuda --precision fp32 --max-steps 6 --out "$T/resumed" > /dev/null 2>&1 &&
    "$B"/train $ARGS --no-eval --device cuda --precision fp32 --max-steps 12 --out "$T/resumed" --resume > "$T/resume.log" 2>&1
check $? "./train --resume on the GPU: 6 + 6 steps, exit 0"
out=$($PYTHON test/same_tensors.py "$T/resumed/ckpt-00000012.safetensors" "$G" 2>&1)
check $? "6 + 6 steps with --resume == 12 steps on the GPU, bitwise: $(echo "$out" | tail -n 1)"

# The training options on both devices: gradient accumulation, norm clipping (active: the run
# without it ends elsewhere), attention and ReLU dropout (the same masks), label smoothing 0.2,
# 3 heads of d_k 12 and d_v 20, pre-LN, learned positions; 8 steps within 1e-4 of the CPU's.
OPTS="$ARGS --no-eval --max-steps 8 --accum 2 --attn-dropout 0.1 --relu-dropout 0.1 --label-smoothing 0.2 --heads 3 --d-k 12 --d-v 20 --pre-ln --learned-pos --seed 3"
"$B"/train $OPTS --clip-norm 0.5 --device cuda --precision fp32 --out "$T/opts_gpu" > "$T/opts.log" 2>&1 &&
    "$B"/train $OPTS --clip-norm 0.5 --device cpu --out "$T/opts_cpu" > /dev/null 2>&1 &&
    "$B"/train $OPTS --device cpu --out "$T/opts_noclip" > /dev/null 2>&1
check $? "./train with accumulation, clipping, attention and ReLU dropout, odd heads, pre-LN: 8 steps on each device, exit 0"
out=$($PYTHON test/same_tensors.py "$T/opts_gpu/ckpt-00000008.safetensors" "$T/opts_cpu/ckpt-00000008.safetensors" --atol 1e-4 --skip k_proj.bias 2>&1)
s=$?
! $PYTHON test/same_tensors.py "$T/opts_noclip/ckpt-00000008.safetensors" "$T/opts_cpu/ckpt-00000008.safetensors" --atol 1e-4 --skip k_proj.bias > /dev/null 2>&1
check $((s + $?)) "those 8 steps: the GPU's parameters and Adam state within 1e-4 of the CPU's ($(echo "$out" | tail -n 1)); without --clip-norm they differ"
# Ctrl-C during training on the GPU: a checkpoint of the step reached, exit status 130, and the
# run resumed from it equals the same steps uninterrupted, bitwise.
interrupt_and_resume "$T/int" "./train --device cuda" $ARGS --device cuda --precision fp32
"$B"/train $ARGS --no-eval --device cuda --precision bf16 --max-steps 12 --out "$T/bf16" > "$T/bf16.log" 2>&1
check $? "./train --device cuda --precision bf16: 12 steps, exit 0"
# The models trained in bf16 and fp32 score the test pairs alike (./translate --score on the CPU:
# the mean log-probability of a test target, within 2% of each other).
for run in gpu bf16; do
    "$B"/translate --model "$T/$run/ckpt-00000012.safetensors" --device cpu --score --ref "$T/corpus/test.es" \
        < "$T/corpus/test.en" 2> /dev/null | awk -F' [|][|][|] ' '{ s += $1 } END { printf "%.4f\n", s / NR }' > "$T/$run.score"
done
awk -v a="$(cat "$T/gpu.score")" -v b="$(cat "$T/bf16.score")" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a < 0 && d <= 0.02 * -a) }'
check $? "bf16 training follows fp32's: mean test score after 12 steps $(cat "$T/bf16.score") vs $(cat "$T/gpu.score")"
# The attention kernels: fused by default in bf16, tiled in fp32 (TRANSFORMER_ATTENTION=batched too).
grep -q "^device: .*bf16, fused tensor-core attention kernels" "$T/bf16.log" &&
    grep -q "^device: .*fp32, tiled attention kernels$" "$T/gpu.log"
check $? "the attention kernels by default: bf16 fused, fp32 tiled ($(grep -m1 '^device:' "$T/bf16.log" | sed 's/.*, bf16/bf16/'); $(grep -m1 '^device:' "$T/gpu.log" | sed 's/.*, fp32/fp32/'))"
# The default model on the GPU trains 2 minutes, a checkpoint a minute; --time keeps it.
"$B"/train --data "$T/corpus" --device cuda --max-steps 1 --max-tokens 400 --no-eval --out "$T/budget" > "$T/budget.log" 2>&1 &&
    grep -q "^budget on the GPU: 2m00s, a checkpoint every 1m00s" "$T/budget.log" &&
    "$B"/train --data "$T/corpus" --device cuda --max-steps 1 --max-tokens 400 --no-eval --time 5m --out "$T/budget5" > "$T/budget5.log" 2>&1 &&
    ! grep -q "^budget on the GPU" "$T/budget5.log"
check $? "the default model's budget on the GPU: $(grep -m1 '^budget' "$T/budget.log" || tail -n 1 "$T/budget.log"); with --time 5m none"
TRANSFORMER_ATTENTION=batched "$B"/train $ARGS --no-eval --device cuda --precision fp32 --max-steps 1 --out "$T/batched" > "$T/batched.log" 2>&1
grep -q "^device: .*fp32, tiled attention kernels (batched ones are bf16's)" "$T/batched.log"
check $? "TRANSFORMER_ATTENTION=batched in fp32 takes the tiled kernels ($(grep -m1 '^device:' "$T/batched.log" | sed 's/.*, fp32/fp32/'))"

# ./translate: fp32 on the GPU gives the CPU's lines; a GPU checkpoint reads on the CPU and a
# CPU checkpoint on the GPU.
cut -c1-200 "$T/corpus/test.en" > "$T/in.txt"
for opts in "--beam 1" "--beam 4"; do
    "$B"/translate --model "$C" --device cpu $opts < "$T/in.txt" > "$T/cpu.txt" 2> /dev/null
    "$B"/translate --model "$C" --device cuda --precision fp32 $opts < "$T/in.txt" > "$T/gpu.txt" 2> "$T/err.txt"
    s=$?
    cmp -s "$T/cpu.txt" "$T/gpu.txt" && [ "$s" -eq 0 ] && [ "$(wc -l < "$T/gpu.txt")" -eq 20 ]
    check $? "./translate $opts: the GPU (fp32) writes the CPU's 20 lines (exit $s)"
done
# n-best: the same hypotheses in the same order, scores within 1e-4
"$B"/translate --model "$C" --device cpu --nbest 2 < "$T/in.txt" > "$T/cpu.txt" 2> /dev/null
"$B"/translate --model "$C" --device cuda --precision fp32 --nbest 2 < "$T/in.txt" > "$T/gpu.txt" 2> /dev/null
awk -F' [|][|][|] ' 'function gap(a, b) { return a > b ? a - b : b - a }
    NR == FNR { text[FNR] = $1 FS $2; s3[FNR] = $3; s4[FNR] = $4; next }
    { if (text[FNR] != $1 FS $2) bad++; if (gap($3, s3[FNR]) > worst) worst = gap($3, s3[FNR]);
      if (gap($4, s4[FNR]) > worst) worst = gap($4, s4[FNR]) }
    END { printf "%d lines, %d texts differ, scores within %g\n", FNR, bad, worst; exit !(FNR == 40 && bad == 0 && worst <= 1e-4) }' \
    "$T/cpu.txt" "$T/gpu.txt" > "$T/nbest.txt"
check $? "./translate --nbest 2: the GPU's n-best lists are the CPU's: $(cat "$T/nbest.txt")"
# The options and the bad-input rules work the same on both devices: for each, the GPU's fp32
# output and exit status are the CPU's (the length penalty, the length limits, alignments, prefixes, sentence splitting, over-long lines cut or refused, empty
# and blank lines, invalid UTF-8 refused or replaced, an ensemble, sampling with a seed); for
# --score, the log-probabilities within 1e-4.
printf 'sun moon. Moon sun!\n\n   \nstar sky sea star sun moon star sky sea star sun moon star\n' > "$T/odd.txt"
printf 'star sky\xff sea\n' > "$T/bad_utf8.txt"
awk '{ print $0 " ||| " $1 }' "$T/in.txt" > "$T/prefixed.txt"
same=0 differ=""
for case in "in|--beam 4 --alpha 0" "in|--beam 4 --alpha 2" "in|--beam 3 --max-len-a 0 --max-len-b 2" \
            "in|--beam 1 --max-len-a 0.5 --max-len-b 1" "in|--beam 2 --alignment" \
            "prefixed|--beam 2 --prefix-inline" "odd|--beam 2 --split-sentences" "odd|--split-long --max-input-tokens 4" \
            "odd|--max-input-tokens 4" "odd|--beam 4" "bad_utf8|--beam 1" "bad_utf8|--replace-invalid" \
            "in|--beam 2 --ensemble $C" "in|--beam 1 --sampling topk:3 --seed 5" "in|--beam 1 --sampling topp:0.9 --temperature 2"; do
    input=${case%%|*} opts=${case#*|}
    "$B"/translate --model "$G" --device cpu --quiet $opts < "$T/$input.txt" > "$T/o_cpu.txt" 2> "$T/e_cpu.txt"
    sc=$?
    "$B"/translate --model "$G" --device cuda --precision fp32 --quiet $opts < "$T/$input.txt" > "$T/o_gpu.txt" 2> "$T/e_gpu.txt"
    sg=$?
    if [ $sc -eq $sg ] && cmp -s "$T/o_cpu.txt" "$T/o_gpu.txt" && [ "$(head -n 1 "$T/e_cpu.txt")" = "$(head -n 1 "$T/e_gpu.txt")" ]; then
        same=$((same + 1))
    else
        differ="$differ [$input: $opts: exit $sc/$sg, $(head -n 1 "$T/e_gpu.txt" | cut -c1-80)]"
    fi
done
[ -z "$differ" ]
check $? "./translate's options and bad-input rules on the GPU (fp32) give the CPU's output and exit status: $same of 15 cases$differ"
awk '{ print $0 " ||| " $0 }' "$T/in.txt" > "$T/pairs.txt"
"$B"/translate --model "$G" --device cpu --score --score-tokens < "$T/pairs.txt" > "$T/s_cpu.txt" 2> /dev/null
"$B"/translate --model "$G" --device cuda --precision fp32 --score --score-tokens < "$T/pairs.txt" > "$T/s_gpu.txt" 2> /dev/null
paste -d '\n' "$T/s_cpu.txt" "$T/s_gpu.txt" | paste - - | awk -F'\t' '
    { n = split($1, a, /[ |]+/); m = split($2, b, /[ |]+/); if (n != m) bad++;
      for (i = 1; i <= n; i++) if (a[i] ~ /^-?[0-9.e-]+$/) { d = a[i] - b[i]; if (d < 0) d = -d; if (d > w) w = d } }
    END { printf "%d lines, %d differ in shape, log-probabilities within %g\n", NR, bad, w; exit !(NR == 20 && bad == 0 && w <= 1e-4) }' > "$T/score.txt"
check $? "./translate --score --score-tokens on the GPU: the CPU's log-probabilities: $(cat "$T/score.txt")"
# --attention DIR: the GPU's pictures are the CPU's, but for their numbers' last digits (within 1e-4)
head -n 5 "$T/in.txt" > "$T/in5.txt"
"$B"/translate --model "$G" --device cpu --quiet --attention "$T/att_cpu" < "$T/in5.txt" > /dev/null 2>&1
"$B"/translate --model "$G" --device cuda --precision fp32 --quiet --attention "$T/att_gpu" < "$T/in5.txt" > /dev/null 2>&1
files=0 bad=0 worst=0
for f in "$T"/att_cpu/*.svg; do
    g="$T/att_gpu/$(basename "$f")"
    files=$((files + 1))
    [ -f "$g" ] || { bad=$((bad + 1)); continue; }
    r=$(paste -d '\n' "$f" "$g" | paste - - | awk -F'\t' '
        { a = $1; b = $2; gsub(/-?[0-9]+[.][0-9]+(e-?[0-9]+)?/, "N", a); gsub(/-?[0-9]+[.][0-9]+(e-?[0-9]+)?/, "N", b)
          if (a != b) bad = 1
          n = split($1, x, /[^-0-9.e]+/); split($2, y, /[^-0-9.e]+/)
          for (i = 1; i <= n; i++) if (x[i] ~ /[0-9][.][0-9]/) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > w) w = d } }
        END { printf "%d %g\n", bad + (NR == 0), w }')
    bad=$((bad + ${r%% *}))
    worst=$(awk -v a="$worst" -v b="${r#* }" 'BEGIN { print (b > a ? b : a) }')
done
[ $files -eq 5 ] && [ $bad -eq 0 ] && awk -v w="$worst" 'BEGIN { exit !(w <= 1e-4) }'
check $? "./translate --attention on the GPU: the CPU's $files pictures, numbers within $worst ($bad differ in more)"
"$B"/translate --model "$G" --device cpu < "$T/in.txt" > "$T/g_on_cpu.txt" 2> /dev/null
s=$?
"$B"/translate --model "$G" --device cuda --precision fp32 < "$T/in.txt" > "$T/g_on_gpu.txt" 2> /dev/null
[ "$s" -eq 0 ] && [ "$(wc -l < "$T/g_on_cpu.txt")" -eq 20 ] && cmp -s "$T/g_on_cpu.txt" "$T/g_on_gpu.txt"
check $? "a checkpoint written on the GPU translates on the CPU, as on the GPU (20 lines)"
"$B"/translate --model "$G" --device cuda --precision bf16 < "$T/in.txt" > "$T/bf16.txt" 2> "$T/err.txt"
s=$?
[ "$s" -eq 0 ] && [ "$(wc -l < "$T/bf16.txt")" -eq 20 ]
check $? "./translate --precision bf16 on the GPU: exit $s, 20 lines"
echo sun | "$B"/translate --model "$G" --device cuda --precision int8 > /dev/null 2> "$T/err.txt"
[ $? -eq 2 ] && grep -q "precision" "$T/err.txt"
check $? "--device cuda --precision int8 is refused (int8 is a CPU option): $(head -n 1 "$T/err.txt")"
# A CUDA library built from other sources than the program (its interface checksum differs, or
# it predates the checksum) is refused with the reason, not called (a stale program crashed so).
if printf 'unsigned transformer_cuda_abi(void) { return 7u; }\nvoid* transformer_cuda_backend(int p, void* e) { return 0; }\n' |
       ${CC:-cc} -shared -fPIC -x c - -o "$T/other.so" 2> "$T/cc.txt"; then
    echo sun | TRANSFORMER_CUDA_EMULATOR="$T/other.so" "$B"/translate --model "$G" --device cuda > /dev/null 2> "$T/err.txt"
    s=$?
    [ $s -ne 0 ] && grep -q "other.so was built from other sources than this program (interface checksum 7, this program's [0-9]*): rebuild both (make)" "$T/err.txt"
    check $? "a CUDA library built from other sources is refused (exit $s): $(head -n 1 "$T/err.txt" | sed 's|.*/||')"
else
    skip "the CUDA library's interface check: no C compiler to build a stand-in ($(head -n 1 "$T/cc.txt"))"
fi
# TRANSFORMER_ATTENTION picks the GPU's attention kernels; a value it does not know is refused.
echo sun | TRANSFORMER_ATTENTION=flash "$B"/translate --model "$G" --device cuda > /dev/null 2> "$T/err.txt"
s=$?
[ $s -ne 0 ] && grep -q "TRANSFORMER_ATTENTION is tiled, rowwise, batched or fused, not 'flash'" "$T/err.txt"
check $? "TRANSFORMER_ATTENTION=flash is refused (exit $s): $(head -n 1 "$T/err.txt")"
echo sun | TRANSFORMER_FUSED_WARPS=6 "$B"/translate --model "$G" --device cuda > /dev/null 2> "$T/err.txt"
s=$?
[ $s -ne 0 ] && grep -q "TRANSFORMER_FUSED_WARPS is 4 or 8, not '6'" "$T/err.txt"
check $? "TRANSFORMER_FUSED_WARPS=6 is refused (exit $s): $(head -n 1 "$T/err.txt")"
# TRANSFORMER_GEMM_TUNE=N times N of cuBLASLt's algorithms per shape (one line each on stderr);
# the translation is a translation still (on the emulator, whose algorithms are alike, the same)
"$B"/translate --model "$G" --device cuda --precision bf16 < "$T/in.txt" > "$T/untuned.txt" 2> /dev/null
TRANSFORMER_GEMM_TUNE=3 "$B"/translate --model "$G" --device cuda --precision bf16 < "$T/in.txt" > "$T/tuned.txt" 2> "$T/err.txt"
s=$?
[ "$s" -eq 0 ] && [ "$(wc -l < "$T/tuned.txt")" -eq 20 ] && grep -q "^gemm-tune: .* of 3 " "$T/err.txt" &&
    { [ -z "${TRANSFORMER_CUDA_EMULATOR:-}" ] || cmp -s "$T/tuned.txt" "$T/untuned.txt"; }
check $? "TRANSFORMER_GEMM_TUNE=3: exit $s, 20 lines, $(grep -c '^gemm-tune:' "$T/err.txt") shapes timed ($(grep -m1 '^gemm-tune:' "$T/err.txt"))"
# the heuristic (here: the timing) runs once a product plan, a bucket of shapes, also where the
# first shape met is the bucket's own (17 to 64 rows: a batch a line, 3 lines joined)
tail -n +2 "$T/in.txt" > "$T/in2.txt"
tail -n +3 "$T/in.txt" > "$T/in3.txt"
paste -d ' ' "$T/in.txt" "$T/in2.txt" "$T/in3.txt" > "$T/long.txt"
TRANSFORMER_GEMM_TUNE=3 "$B"/translate --model "$G" --device cuda --precision bf16 --batch-tokens 1 < "$T/long.txt" \
    > /dev/null 2> "$T/err.txt"
tuned=$(sed -n 's/): the heuristic.*//p' "$T/err.txt" | sort)
[ -n "$tuned" ] && [ "$(printf '%s\n' "$tuned" | uniq | wc -l)" -eq "$(printf '%s\n' "$tuned" | wc -l)" ]
check $? "TRANSFORMER_GEMM_TUNE=3: each of the $(printf '%s\n' "$tuned" | wc -l) plans timed once ($(printf '%s\n' "$tuned" | uniq -d | head -n 1))"
echo sun | TRANSFORMER_GEMM_TUNE=x "$B"/translate --model "$G" --device cuda > /dev/null 2> "$T/err.txt"
s=$?
[ $s -ne 0 ] && grep -q "TRANSFORMER_GEMM_TUNE is a count of algorithms to time, 0 to 64, not 'x'" "$T/err.txt"
check $? "TRANSFORMER_GEMM_TUNE=x is refused (exit $s): $(head -n 1 "$T/err.txt")"

# A full GPU (the emulator's memory capped by CUDA_EMULATOR_MEMORY_MB; a real GPU's cannot be
# capped from here): the least memory in which 2 training steps run (found by halving, in steps
# of 0.1 MB), then in it the same run with its final evaluation (which loads the average into the
# trained model, not into a second one beside it); below it, ./train and ./translate stop with
# the option to lower and exit 1, and a failed --resume leaves the run's checkpoint as it was.
if [ -n "${TRANSFORMER_CUDA_EMULATOR:-}" ]; then
    MEM_ARGS="$ARGS --device cuda --max-steps 2"
    fits() {   # fits MB: do 2 training steps (no evaluation) run in MB of device memory?
        rm -rf "$T/mem"
        CUDA_EMULATOR_MEMORY_MB=$1 "$B"/train $MEM_ARGS --no-eval --out "$T/mem" > "$T/mem.log" 2>&1
    }
    lo=1 hi=2000   # tenths of a MB: lo does not fit, hi does
    if ! fits 0.1 && fits 200; then
        while [ $((hi - lo)) -gt 1 ]; do
            mid=$(((lo + hi) / 2))
            if fits "$(awk -v t=$mid 'BEGIN { print t / 10 }')"; then hi=$mid; else lo=$mid; fi
        done
        least=$(awk -v t=$hi 'BEGIN { print t / 10 }')
        rm -rf "$T/mem"
        CUDA_EMULATOR_MEMORY_MB=$least "$B"/train $MEM_ARGS --out "$T/mem" > "$T/mem.log" 2>&1
        s=$?
        [ $s -eq 0 ] && grep -q '^test, last checkpoint, greedy ' "$T/mem.log" && grep -q '^test, last checkpoint, beam ' "$T/mem.log"
        check $? "./train's final evaluation fits the $least MB its 2 training steps took (exit $s: $(grep -m1 -E '^test, last|out of GPU' "$T/mem.log" | cut -c1-60))"
        below=$(awk -v t=$lo 'BEGIN { print t / 10 }')
        sum=$(cksum < "$T/mem/ckpt-00000002.safetensors")
        CUDA_EMULATOR_MEMORY_MB=$below "$B"/train $ARGS --device cuda --max-steps 4 --no-eval --out "$T/mem" --resume > "$T/mem.log" 2>&1
        s=$?
        [ $s -eq 1 ] && grep -q "out of GPU memory: lower --max-tokens" "$T/mem.log" &&
            [ "$(cksum < "$T/mem/ckpt-00000002.safetensors")" = "$sum" ] && [ ! -e "$T/mem/ckpt-00000004.safetensors" ]
        check $? "./train --resume in $below MB: exit $s, names --max-tokens, the checkpoint as it was ($(grep -m1 'out of GPU' "$T/mem.log"))"
    else
        check 1 "2 training steps run in 200 MB of emulated device memory and not in 0.1 MB ($(tail -n 1 "$T/mem.log"))"
    fi
    CUDA_EMULATOR_MEMORY_MB=1 "$B"/translate --model "$G" --device cuda < "$T/in.txt" > "$T/oom.txt" 2> "$T/err.txt"
    s=$?
    [ $s -eq 1 ] && grep -q "out of GPU memory: lower .*--batch-tokens" "$T/err.txt" && grep -q "^CUDA error (.*): cudaMalloc" "$T/err.txt"
    check $? "./translate in 1 MB of device memory: exit $s, names the call and --batch-tokens ($(grep -m1 '^CUDA error' "$T/err.txt"))"
else
    skip "the full-GPU checks: a real GPU's memory cannot be capped here (the emulator's can: CUDA_EMULATOR_MEMORY_MB)"
fi

check_summary cli_cuda
