#!/bin/bash
# test/gpu_pack.sh (make gpu-pack) — readies, on this machine, what `make gpu-check` needs on a
# GPU machine that reaches no package archive, and prints the call that runs it there:
#   - the default corpus, data/corpus (make data: Debian's SWORD packages), for the 3-minute
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
gpu-pack: ready. On the machine with a GPU (the device tool's run), one call, then the same with
GPU_CHECK_CONTINUE=1 for as long as it exits 3 (steps left for the next call):
  command: GPU_CHECK_SECONDS=540 LOG_DIR=$OUT make gpu-check
  carry:   ["data/corpus", ".whl"]
  timeout_s: 600
A session lent 15 minutes of device time (start-up included) has about one such call, and the
next session's machine starts bare (GPU_CHECK_CONTINUE finds nothing there): give each session
its own stages instead, in this order, each call with the build first:
  1. STAGES="build tests"            (every op and the model against the CPU, the programs)
  2. STAGES="build bench"            (training speed, the attention kernels, PyTorch)
  3. STAGES="build train translate"  (3-minute ./train, GPU vs CPU translations, decoding speed)
  4. STAGES="build sanitize"         (compute-sanitizer memcheck and racecheck)
e.g. command: STAGES="build tests" GPU_CHECK_SECONDS=540 LOG_DIR=$OUT make gpu-check
EOF
