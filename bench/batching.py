"""bench/batching.py — the test-set batches every decoder of the benchmarks gets: sorted by
length (stable), `batch` sentences each or ours' batches (toolkit/decode.cpp's decode_sorted).
Imported by bench_torch.py and bench_ct2.py (each run by its own interpreter: plain Python only)."""


def sorted_batches(lengths, batch, batch_tokens=0):
    """Index lists of the sources sorted by length (stable): `batch` sentences each, or with
    batch_tokens > 0 ours' batches: as many sentences as keep their count x the longest's
    length within batch_tokens."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    start = 0
    while start < len(order):
        end = min(start + batch, len(order)) if batch_tokens <= 0 else start + 1
        while batch_tokens > 0 and end < len(order) and (end + 1 - start) * lengths[order[end]] <= batch_tokens:
            end += 1
        yield order[start:end]
        start = end
