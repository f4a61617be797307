#!/bin/sh
# bench/bench_attention.sh — our attention kernels beside PyTorch's at NMT lengths, on the GPU
# (make bench-attention; make gpu-check runs it): build/bench_attention's lines, then
# bench/bench_torch.py attention's for the same config, precision, tokens and lengths, then per
# length the three attentions' forward + backward time of each and PyTorch's time over ours
# (above 1: ours is faster), and last which of ours is fastest at each length.
#   sh bench/bench_attention.sh [BUILD]    CONFIG, PRECISION, TOKENS, LENGTHS override the defaults
set -u
BUILD=${1:-build}
PY=${PYTHON:-python3}
set -- --config "${CONFIG:-base}" --precision "${PRECISION:-bf16}" --tokens "${TOKENS:-25000}" \
    --lengths "${LENGTHS:-10,16,32,64,128}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$BUILD/bench_attention" --device cuda "$@" | tee "$out"
[ -s "$out" ] && grep -q '^ours attention' "$out" || { echo "bench_attention printed no timing"; exit 1; }
if $PY -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
    $PY bench/bench_torch.py attention --device cuda "$@" | tee -a "$out"
else
    echo "SKIP the PyTorch column: $PY has no PyTorch with CUDA"
fi
# per (who, kernels, L): the sum of fwd_ms + bwd_ms over the three attentions
awk '
/^(ours|torch) attention / {
    split("", f)
    for (i = 3; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    key = $1 " " f["kernels"]
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    if (!(f["L"] in lseen)) { lseen[f["L"]] = 1; lengths[++nl] = f["L"] }
    ms[key, f["L"]] += f["fwd_ms"] + f["bwd_ms"]
    if ($1 == "torch") torch_key = key
}
END {
    print "# forward + backward of the three attentions, ms; (xN: PyTorch time / ours)"
    for (j = 1; j <= nl; j++) {
        L = lengths[j]
        line = sprintf("L=%-4s", L)
        for (i = 1; i <= n; i++) {
            k = order[i]
            line = line sprintf("  %s %.3f", k, ms[k, L])
            if (torch_key != "" && k !~ /^torch/ && ms[k, L] > 0) line = line sprintf(" (x%.2f)", ms[torch_key, L] / ms[k, L])
        }
        print line
        best = ""
        for (i = 1; i <= n; i++)
            if (order[i] !~ /^torch/ && (best == "" || ms[order[i], L] < ms[best, L])) best = order[i]
        sub(/^ours /, "", best)
        fastest = fastest sprintf(" L=%s %s", L, best)
        if (torch_key != "") fastest = fastest sprintf(" (x%.2f)", ms[torch_key, L] / ms["ours " best, L])
    }
    print "attention, the fastest of ours:" fastest
}' "$out"
