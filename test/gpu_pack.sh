#!/bin/bash
# test/gpu_pack.sh (make gpu-pack) — readies, on this machine, what `make gpu-check` needs on a
# GPU machine that reaches no package archive, and prints the call that runs it there:
#   - the default corpus, data/corpus (make data: Debian's SWORD packages), for the 2-minute
#     training run and the translation steps;
#   - CTranslate2's wheel for the GPU machine's Python (3.12, manylinux) in .whl, for the
#     decoding benchmark's CTranslate2 rows (gpu_check.sh installs it there; its other needs,
#     numpy and PyYAML, are on that machine's image).
# Both are ignored by git and travel as the call's `carry`; the working tree and they must stay
# under the device tool's 64 MiB. Without pip or the package index the wheel is left out and
# the CTranslate2 rows will say so.
set -eu
cd "$(dirname "$0")/.."
LIMIT=$((64 * 1024 * 1024))

make data
# The ids caches ./train leaves beside the corpus (toolkit/parallel_data.cpp; 28 MB on the default
# corpus, and one set per vocabulary) would take the carry's room: rebuilt in seconds there.
rm -f data/corpus/*/*.ids-*.bin
mkdir -p .whl
rm -f .whl/ctranslate2-*.whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "ctranslate2${CT2_VERSION:+==$CT2_VERSION}" ||
    echo "gpu-pack: no CTranslate2 wheel could be fetched; the GPU benchmark's CTranslate2 rows will say so"

# What travels: the files git tracks or would add, and the carried folders.
tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 -r du -cb 2> /dev/null | awk '/\ttotal$/ { s += $1 } END { print s + 0 }')
carried=$(du -sb data/corpus .whl | awk '{ s += $1 } END { print s + 0 }')
total=$((tree + carried))
awk -v t="$tree" -v c="$carried" 'BEGIN { printf "gpu-pack: working tree %.1f MB + data/corpus and .whl %.1f MB = %.1f MB of the %.1f MB (64 MiB) a call carries\n", t / 1e6, c / 1e6, (t + c) / 1e6, 64 * 1048576 / 1e6 }'
if [ "$total" -gt "$LIMIT" ]; then
    echo "gpu-pack: over the limit: leave .whl out of the carry (the CTranslate2 rows then say why)"
    exit 1
fi
cat << 'EOF'
gpu-pack: ready. A session lent 15 minutes of device time runs the check in two calls, in the
order of what the GPU issues need (tests, sanitizers, benchmark tables, the training run, the
translations, then the diagnostics); on 2026-11-27 an H100 took 151 s, then 532 s, for less
than the check holds now, so expect the second call to be cut:
  1. command: GPU_CHECK_SECONDS=500 LOG_DIR=$OUT make gpu-check
     carry:   ["data/corpus", ".whl"]                         timeout_s: 560
  2. here, at once: mkdir -p .gpu-check && cp <call 1's files_at>/state .gpu-check/state
     command: GPU_CHECK_CONTINUE=1 GPU_CHECK_SECONDS=<device seconds left - 60> LOG_DIR=$OUT make gpu-check
     carry:   ["data/corpus", ".whl", ".gpu-check/state"]     timeout_s: <that + 60, at most 600>
The second call skips what the first finished and runs first what the first's budget cut. Sent
within 30 seconds of the first's answer it finds the machine warm, with the build and the
model; if it went cold, the carried state still skips the finished steps and the fresh machine
builds (and trains) again. What is cut is listed at the end (exit status 3); a later session
names the stages still owed (e.g. STAGES="build translate diagnose"), and GPU_CHECK_SKIP the
steps a short call leaves out (they SKIP and stay owed). On 2026-12-04 an H200 passed every
step in three calls (12 minutes): this one first (296 s: the build, the 1-minute training run,
bench-decode, then the 8 racechecks side by side, GPU_CHECK_SANITIZE_LAST=1),
     command: STAGES="build sanitize train translate" GPU_CHECK_SANITIZE_LAST=1 GPU_CHECK_SKIP="memcheck-* racecheck-ops gpu-* cpu-* bleu-*" GPU_CHECK_TRAIN_TIME=1m GPU_CHECK_SECONDS=540 LOG_DIR=$OUT make gpu-check
     carry:   ["data/corpus", ".whl"]                         timeout_s: 600
then, with its state carried as in 2. above, the rest: GPU_CHECK_SKIP="racecheck-*" (memcheck
and the translations, 39 s), then STAGES="build tests bench train diagnose" (335 s). To
measure a change of speed, STAGES="build bench translate" alone. give_back when done.
After a failed start, status's budget_left_s less 180 is the timeout_s (at most 600), and
GPU_CHECK_SECONDS that less 60.
The sanitizer steps run side by side (SANITIZE_JOBS=9; 1: one at a time). `GPU_CHECK_DRY=1
GPU_CHECK_DRY_STEP=30 make gpu-check` lists the steps in order here, running none. $OUT gets
summary.txt, state and logs.tar.gz after every step, so a call killed at timeout_s still
brings back what it did. The call sends the checkout the session started in: run gpu-pack there.
EOF
