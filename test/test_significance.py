"""test/test_significance.py — ./bleu's significance tests against sacreBLEU 2.6.0's own
(toolkit/significance.h): --confidence against corpus_score(n_bootstrap=...), --paired-bs and
--paired-ar against sacreBLEU's PairedTest, for BLEU, chrF, chrF++ and TER.

Every number is compared as printed with 17 decimals (./bleu --width 17 --score-only; Python's
'%.17f'), so equal strings mean the same double: the same resamples (NumPy's default_rng, drawn
by toolkit/numpy_random.h), summed and scored in the same types (float32 where NumPy's arrays
are), the same mean and interval, the same p-value. Cases: the first 300 lines of three of
../shared/bleu's system outputs (or $BLEU_CASES_DIR; skipped, saying so, when absent); 40 random
corpora of 1 to 40 lines, two or three systems, one to three reference files (empty lines, lines
without a match, identical systems: chrF's and TER's degenerate scores, which NumPy holds as
float64), each metric and test; the random draws themselves (bits, then indices) against NumPy's
for several seeds, ranges and counts. Also the signatures and the refused option combinations.

Usage: python3 test/test_significance.py [PROGRAM_DIR [BUILD_DIR]]    Ends with "significance: N passed, M failed".
Without sacrebleu or numpy it says SKIP and why; REQUIRE_SACREBLEU=1 (CI) makes that a failure.
"""
import os
import random
import subprocess
import sys

from checks import check, skip, summary, skip_without_sacrebleu, write, read_lines, bleu_cases_dir

program_dir = sys.argv[1] if len(sys.argv) > 1 else "."
build_dir = sys.argv[2] if len(sys.argv) > 2 else "build"
bleu = os.path.join(program_dir, "bleu")

try:
    import numpy as np
    from sacrebleu.metrics import BLEU, CHRF, TER
    from sacrebleu.significance import PairedTest
except ImportError as e:
    skip_without_sacrebleu("significance", e)

if int(np.__version__.split(".")[0]) < 2:
    # NumPy 1's value-based casting gives the resamples' sums and scores other types (float64 where
    # NumPy 2 keeps float32), so sacreBLEU's numbers there are not the ones ./bleu reproduces.
    print(f"SKIP test_significance: NumPy {np.__version__}; ./bleu reproduces sacreBLEU under NumPy 2's casting rules")
    sys.exit(summary("significance", skipped=1))
os.environ.pop("SACREBLEU_SEED", None)   # sacreBLEU's default seed, 12345, as ./bleu's
METRICS = {"bleu": BLEU, "chrf": CHRF, "chrf++": lambda: CHRF(word_order=2), "ter": TER}


def run_ours(ref_streams, systems, metric, *options):
    files = [write(f"ref{k}.txt", refs) for k, refs in enumerate(ref_streams)]
    hyp_args = []
    for k, hyps in enumerate(systems):
        hyp_args += ["--hyp", write(f"sys{k}.txt", hyps)]
    out = subprocess.run([bleu, *files, *hyp_args, "--metric", metric, "--width", "17", "--score-only", *options],
                         capture_output=True, text=True)
    return out.stdout.split("\n")[:-1] if out.returncode == 0 else [f"exit {out.returncode}: {out.stderr.strip()}"]


def f17(x):
    return "%.17f" % x


def theirs_confidence(ref_streams, hyps, metric, n, metrics=METRICS):
    try:
        s = metrics[metric]().corpus_score(hyps, ref_streams, n_bootstrap=n)
    except TypeError:   # statistics.mean of float32 and float scores (a degenerate resample): sacreBLEU fails
        return None
    return [f17(s.score) + (f" (μ = {f17(s._mean)} ± {f17(s._ci)})" if s._mean > 0 else "")]


def theirs_paired(ref_streams, systems, metric, test, n, confidence=-1, metrics=METRICS):
    named = [(f"sys{k}", hyps) for k, hyps in enumerate(systems)]
    _, scores = PairedTest(named, {metric: metrics[metric]()}, ref_streams, test_type=test, n_samples=n,
                           n_ar_confidence=confidence)()
    rows = [v for k, v in scores.items() if k != "System"][0]
    out = []
    for k, r in enumerate(rows):
        line = f17(r.score)
        if r.mean is not None:
            line += f" {f17(r.mean)} {f17(r.ci)}"
        if k > 0:
            line += f" {f17(r.p_value)}"
        out.append(line)
    return out


not_comparable = []   # runs sacreBLEU itself cannot score
ter_ar_multi = []     # TER --paired-ar with several references: not compared (see compare_all)


def check_none_differ(differ, what):
    """One check that no comparison in `differ` (descriptions of those that differ) did, the first
    three printed."""
    for d in differ[:3]:
        print("  " + d)
    check(not differ, what)


def compare_all(what, ref_streams, systems, bs_n=1000, ar_n=1000, ar_confidence=200, metrics=METRICS, options=()):
    """--confidence (first system), --paired-bs and --paired-ar (with its intervals) for each metric
    (sacreBLEU's metric objects made by metrics[m](), ./bleu given `options`); returns the
    descriptions that differ."""
    differ = []
    for m in metrics:
        runs = [("--confidence", run_ours(ref_streams, systems[:1], m, "--confidence", "--confidence-n", str(bs_n), *options),
                 theirs_confidence(ref_streams, systems[0], m, bs_n, metrics)),
                ("--paired-bs", run_ours(ref_streams, systems, m, "--paired-bs", "--paired-bs-n", str(bs_n), *options),
                 theirs_paired(ref_streams, systems, m, "bs", bs_n, metrics=metrics)),
                ("--paired-ar --confidence", run_ours(ref_streams, systems, m, "--paired-ar", "--paired-ar-n", str(ar_n),
                                                      "--confidence", "--confidence-n", str(ar_confidence), *options),
                 theirs_paired(ref_streams, systems, m, "ar", ar_n, ar_confidence, metrics))]
        if m == "ter" and len(ref_streams) > 1:
            # TER's mean reference lengths are fractions here, and NumPy sums a randomization trial's
            # lines in its BLAS's order (toolkit/significance.h): ties between trials and the real
            # difference can break the other way, so the p-values are not comparable.
            runs.pop()
            ter_ar_multi.append(what)
        for name, a, b in runs:
            if b is None:
                not_comparable.append(f"{what}, {m} {name}")
            elif a != b:
                differ.append(f"{what}, {m} {name}: ours {a} != sacreBLEU's {b}")
    return differ


# ---- NumPy's draws
draws_bin = os.path.join(build_dir, "test_bleu")
rng_means = random.Random(3)
bad = []
for seed, n, bits, count in [(12345, 1581, 0, 5000), (12345, 3, 31, 100), (1, 1, 33, 10), (7, 2, 1000, 999),
                             (4294967295, 2147483649, 64, 2000), (99, 1000003, 7, 3001), (0, 5, 9, 50)]:
    run = subprocess.run([draws_bin, "--numpy-draws", str(seed), str(n), str(bits), str(count)], capture_output=True,
                         text=True)
    g = np.random.default_rng(seed)
    want_bits = "".join("1" if b else "0" for b in g.integers(2, size=bits, dtype=bool))
    want_idx = " ".join(str(i) for i in g.choice(n, size=count, replace=True)) + (" " if count else "")
    got = run.stdout.split("\n")
    if run.returncode != 0 or got[:2] != [want_bits, want_idx]:
        bad.append(f"seed {seed}, n {n}, {bits} bits, {count} indices")
check(not bad, f"NumpyGenerator's bits then choice == NumPy {np.__version__}'s default_rng(seed).integers(2, bool) then .choice(n) "
      f"for 7 seeds (0 among them) and ranges (a range past 2^31: Lemire's rejection){': ' + '; '.join(bad) if bad else ''}")

# ---- Python's statistics.mean (--confidence's mean): ties, magnitudes, float32 values
import statistics
mean_cases = [[1.0, 2.0 ** -53], [1.0, 3 * 2.0 ** -53], [3.0, 2.0 ** -52, 0.0], [0.0], [7.25],
              [1e-300, 1e300, 5.0], [2.0 ** -1074, 1.0]]
for n in range(300):
    size = rng_means.randint(1, 2000)
    scale = 10.0 ** rng_means.randint(-30, 5)
    values = [rng_means.random() * scale for _ in range(size)]
    if n % 3 == 0:
        values = [float(np.float32(v)) for v in values]
    if n % 5 == 0:   # halves of the last bit: sums that land between two doubles
        values = [v + 2.0 ** -52 * rng_means.randint(0, 3) for v in [1.0] * size]
    mean_cases.append(values)
run = subprocess.run([draws_bin, "--python-mean"], input="".join(" ".join(v.hex() for v in c) + "\n" for c in mean_cases),
                     capture_output=True, text=True)
got = run.stdout.split("\n")[:-1]
differ = [k for k, c in enumerate(mean_cases) if k >= len(got) or float.fromhex(got[k]) != statistics.mean(c)]
check(run.returncode == 0 and not differ,
      f"python_mean == Python's statistics.mean on {len(mean_cases)} lists (ties to even between two doubles, "
      f"1e-300 beside 1e300, float32 values, 1..2,000 values; {len(differ)} differ"
      + (f", first {differ[0]}: {got[differ[0]] if differ[0] < len(got) else None} != "
         f"{statistics.mean(mean_cases[differ[0]]).hex()}" if differ else "") + ")")

# ---- the shared cases: real system outputs, first 300 lines
cases = bleu_cases_dir()


if os.path.isfile(os.path.join(cases, "dev.es.ref")):
    ref = read_lines(os.path.join(cases, "dev.es.ref"), rstrip=True)[:300]
    systems = [read_lines(os.path.join(cases, name + ".hyp"), rstrip=True)[:300]
               for name in ("drop_third_word", "punct_spacing", "lowercased")]
    differ = compare_all("the shared cases", [ref], systems, ar_n=2000, ar_confidence=500)
    check_none_differ(differ, "3 shared system outputs (300 lines) against ../shared/bleu's reference, BLEU, chrF, chrF++, TER: "
          "--confidence (1,000 resamples), --paired-bs (1,000), --paired-ar (2,000 trials, 500 for the intervals): "
          f"every score, mean, interval and p-value equal sacreBLEU's to 17 decimals ({len(differ)} of 12 differ)")
else:
    skip(f"the shared cases: no {os.path.join(cases, 'dev.es.ref')} (BLEU_CASES_DIR)")

# ---- random corpora
rng = random.Random(11)
words = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "é", "北京", ",", ".", "!", "The", "CAT"]


def sentence():
    return " ".join(rng.choice(words) for _ in range(rng.randint(0, 10)))


differ = []
for n in range(40):
    lines = rng.randint(1, 40)
    ref_streams = [[sentence() for _ in range(lines)] for _ in range(rng.randint(1, 3))]
    base = [sentence() for _ in range(lines)]
    others = [[sentence() if rng.random() < 0.5 else h for h in base] for _ in range(rng.randint(1, 2))]
    if n % 10 == 3:
        others[0] = list(base)                  # a system identical to the baseline: every Δ is 0
    if n % 10 == 7:
        base = ["zzz"] * lines                  # no match anywhere: chrF's and BLEU's scores 0
    if n % 10 == 9:
        ref_streams = [[""] * lines]            # empty references: TER's scores 0 or 100 (Python floats)
    differ += compare_all(f"random corpus {n}", ref_streams, [base] + others, bs_n=200, ar_n=300, ar_confidence=100)
check_none_differ(differ, "40 random corpora (1..40 lines, 2..3 systems, 1..3 reference files; identical systems, no "
      "matches, empty references among them), each metric: --confidence, --paired-bs, --paired-ar equal "
      f"sacreBLEU's to 17 decimals ({len(differ)} differ; not compared: TER's --paired-ar on the {len(ter_ar_multi)} corpora "
      f"of several reference files, and {len(not_comparable)} --confidence runs, where "
      f"sacreBLEU's corpus_score stops with a TypeError, its statistics.mean refusing float32 and float scores "
      f"together)")

# ---- the metrics' options (test_metric_options.py, test_ter_options.py): smoothing, chrF's beta and eps
# smoothing change the resamples' arithmetic (float32 where NumPy's arrays are)
OPTION_SETS = [
    # add-k 2: a whole value, because sacreBLEU's --paired-ar adds k to its trials' int64 counts in place,
    # which truncates a fraction (k = 0.5 adds 0 there, and 0.5 to the real scores); ./bleu adds k as given
    ("bleu", lambda: BLEU(tokenize="intl", lowercase=True, smooth_method="add-k", smooth_value=2.0),
     ["--tokenize", "intl", "--lowercase", "--smooth-method", "add-k", "--smooth-value", "2"]),
    ("bleu", lambda: BLEU(tokenize="char", smooth_method="floor"), ["--tokenize", "char", "--smooth-method", "floor"]),
    ("bleu", lambda: BLEU(tokenize="zh", smooth_method="none"), ["--tokenize", "zh", "--smooth-method", "none"]),
    ("chrf", lambda: CHRF(char_order=4, word_order=1, beta=3, whitespace=True, eps_smoothing=True),
     ["--chrf-char-order", "4", "--chrf-word-order", "1", "--chrf-beta", "3", "--chrf-whitespace", "--chrf-eps-smoothing"]),
    ("chrf", lambda: CHRF(lowercase=True, beta=1), ["--chrf-lowercase", "--chrf-beta", "1"]),
    ("ter", lambda: TER(normalized=True, no_punct=True, case_sensitive=True),
     ["--ter-normalized", "--ter-no-punct", "--ter-case-sensitive"]),
]
differ = []
for n in range(8):
    lines = rng.randint(2, 30)
    ref_streams = [[sentence() for _ in range(lines)]]
    base = [sentence() for _ in range(lines)]
    others = [[sentence() if rng.random() < 0.5 else h for h in base]]
    for metric, make, options in OPTION_SETS:
        differ += compare_all(f"random corpus {n}, {metric} {' '.join(options)}", ref_streams, [base] + others, bs_n=200,
                              ar_n=300, ar_confidence=100, metrics={metric: make}, options=options)
check_none_differ(differ, f"8 random corpora × {len(OPTION_SETS)} metric option sets (BLEU intl+lowercase+add-k 2, char+floor, "
      "zh+none; chrF order 4+1, beta 3, white space, eps smoothing; chrF lowercase beta 1; TER normalized, no "
      f"punctuation, case-sensitive): --confidence, --paired-bs, --paired-ar equal sacreBLEU's to 17 decimals ({len(differ)} differ)")

# ---- chrF's eps smoothing on resamples of empty lines: a resample of empty hypotheses scores a
# float32 0 (its orders' F-betas are float32 zeros), of empty hypotheses and references a Python
# 1e-14; which one decides the dtype of the scores' array, and so the mean's arithmetic.
eps_chrf = {"chrf": lambda: CHRF(char_order=4, word_order=1, eps_smoothing=True)}
eps_options = ("--chrf-char-order", "4", "--chrf-word-order", "1", "--chrf-eps-smoothing")
differ = compare_all("empty hypotheses", [["the cat", "a dog ran", "sat"]], [["", "", "the cat"], ["", "a dog", ""]],
                     bs_n=200, ar_n=300, ar_confidence=100, metrics=eps_chrf, options=eps_options)
differ += compare_all("empty hypotheses and references", [["", "", "the cat"]], [["", "", "the cat"], ["", "a", ""]],
                      bs_n=200, ar_n=300, ar_confidence=100, metrics=eps_chrf, options=eps_options)
check_none_differ(differ, "chrF with eps smoothing, 3 lines of which 2 empty (resamples of empty hypotheses, and of empty "
      "hypotheses and references): --confidence, --paired-bs, --paired-ar equal sacreBLEU's to 17 decimals "
      f"({len(differ)} differ)")

# ---- TER of empty hypotheses against empty references: resamples of no edits over no reference
# words score 0 (sacreBLEU's TER: 100 only where there are edits)
ter_only = {"ter": METRICS["ter"]}
differ = compare_all("empty hypotheses and references, TER", [["", "", ""]], [["", "", ""], ["", "a b", ""]],
                     bs_n=200, ar_n=300, ar_confidence=100, metrics=ter_only)
check_none_differ(differ, "TER of empty hypotheses against empty references (resamples of 0 edits over 0 words score 0): "
      f"--confidence, --paired-bs, --paired-ar equal sacreBLEU's to 17 decimals ({len(differ)} differ)")

# ---- few resamples: 2 to 9 (NumPy's mean sums fewer than 8 scores one by one, 8 and more in
# 8 accumulators), and the interval's bounds then the lowest and highest score (n // 40 = 0)
differ = []
for n, resamples in enumerate([2, 5, 7, 8, 9, 8, 7, 8]):
    lines = rng.randint(5, 30)
    ref_streams = [[sentence() for _ in range(lines)]]
    base = [sentence() for _ in range(lines)]
    others = [[sentence() if rng.random() < 0.5 else h for h in base]]
    differ += compare_all(f"random corpus {n}, {resamples} resamples", ref_streams, [base] + others, bs_n=resamples,
                          ar_n=resamples, ar_confidence=resamples)
check_none_differ(differ, "8 random corpora with 2, 5, 7, 8 or 9 resamples and trials, each metric: --confidence, --paired-bs, "
      f"--paired-ar equal sacreBLEU's to 17 decimals ({len(differ)} differ)")

# ---- --paired-ar without --confidence: scores and p-values alone (no interval drawn or printed)
differ = []
lines = 12
ref_streams = [[sentence() for _ in range(lines)]]
base = [sentence() for _ in range(lines)]
systems = [base, [sentence() if rng.random() < 0.5 else h for h in base]]
for m in METRICS:
    a = run_ours(ref_streams, systems, m, "--paired-ar", "--paired-ar-n", "300")
    b = theirs_paired(ref_streams, systems, m, "ar", 300)
    if a != b:
        differ.append(f"{m}: ours {a} != sacreBLEU's {b}")
check_none_differ(differ, "--paired-ar without --confidence (12 lines, 300 trials), each metric: the scores and p-value alone, "
      f"equal to sacreBLEU's to 17 decimals ({len(differ)} differ)")

# ---- the printed lines and signatures
ref_file, h1, h2 = write("r.txt", ["the cat sat on the mat"] * 3), write("h1.txt", ["the cat sat"] * 3), \
    write("h2.txt", ["the cat sat on a mat"] * 3)
out = subprocess.run([bleu, ref_file, "--hyp", h1, "--hyp", h2, "--paired-bs", "--metric", "bleu,ter"],
                     capture_output=True, text=True)
lines = out.stdout.split("\n")
check(out.returncode == 0 and lines[0] == f"BLEU: paired bootstrap resampling (1000 resamples), each system against the baseline {h1}"
      and lines[3] == "signature: nrefs:1|bs:1000|seed:12345|case:mixed|eff:no|tok:13a|smooth:exp"
      and lines[7] == "signature: nrefs:1|bs:1000|seed:12345|case:lc|tok:tercom|norm:no|punct:yes|asian:no"
      and "(p = " in lines[2] and lines[2].startswith(f"  {h2}"),
      f"--paired-bs prints a block per metric: a title, the baseline, each system with its p-value, the signature "
      f"with bs and seed as sacreBLEU's ({out.stdout!r})")
out = subprocess.run([bleu, ref_file, "--hyp", h1, "--hyp", h2, "--paired-ar", "--confidence", "--seed", "7"],
                     capture_output=True, text=True)
check(out.returncode == 0 and "signature: nrefs:1|bs:1000|ar:10000|seed:7|case:mixed" in out.stdout,
      f"--paired-ar --confidence --seed 7: the signature says bs:1000|ar:10000|seed:7 ({out.stdout!r})")
out = subprocess.run([bleu, ref_file, "--hyp", h1, "--confidence", "--metric", "chrf"], capture_output=True, text=True)
check(out.returncode == 0 and out.stdout.startswith("chrF2 = ") and " (μ = " in out.stdout
      and "signature: nrefs:1|bs:1000|seed:12345|case:mixed|eff:yes|nc:6|nw:0|space:no\n" in out.stdout,
      f"--confidence: the score line with (μ = mean ± interval), the signature with bs and seed ({out.stdout!r})")
for args, why in [([h1, "--hyp", h2], "two --hyp without a paired test"),
                  ([h1, "--paired-bs"], "a paired test of one system"),
                  ([h1, "--hyp", h2, "--paired-bs", "--paired-ar"], "both paired tests"),
                  (["-", "--hyp", "-", "--paired-bs"], "stdin as two systems"),
                  ([h1, "--seed", "0"], "--seed 0 (sacreBLEU's paired tests draw unseeded then)"),
                  ([h1, "--seed", "4294967296"], "--seed 2^32 (NumPy's seed of two words)"),
                  ([h1, "--confidence-n", "1"], "--confidence-n 1")]:
    run = subprocess.run([bleu, ref_file, "--hyp", *args], capture_output=True, text=True, input="")
    check(run.returncode == 2 and run.stderr.strip() != "",
          f"{why}: refused, exit 2 ({run.returncode}): {run.stderr.strip()[:120]}")

sys.exit(summary("significance"))
