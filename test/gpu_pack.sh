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
gpu-pack: ready. A session lent 15 minutes of device time runs the check in two calls, the
second sent within 30 seconds of the first's answer (the machine then is still warm and keeps
the build; on 2026-11-27 an H100 took 151 s, then 532 s with the training run; the benchmarks
against PyTorch, ncu's kernels and the step with tuned products have been added since, about 5
minutes more):
  1. command: STAGES="build tests bench" GPU_CHECK_SECONDS=400 LOG_DIR=$OUT make gpu-check
     carry:   []                                     timeout_s: 460
  2. command: GPU_CHECK_CONTINUE=1 GPU_CHECK_SECONDS=<device seconds left - 60> LOG_DIR=$OUT make gpu-check
     carry:   ["data/corpus", ".whl"]                timeout_s: <that + 60, at most 600>
The second call has every stage: it skips what the first finished and runs first what the
first's budget cut. The whole check no longer fits 15 minutes: what is cut is listed at the
end (exit status 3); the state lives on the warm machine only, so a later session starts again
from the build and may name just the stages still owed (e.g. STAGES="build sanitize"). The
sanitizers come last, racecheck over test_cuda a part at a time.
EOF
