"""test/test_sacrebleu.py — ./bleu against sacreBLEU 2.6.0 itself: chrF and chrF++ (CHRF), and
several references per line (BLEU, chrF, chrF++).

Both score the same files and print the score with 15 decimals (./bleu --width 15; Python's
'%.15f'), which tells two different doubles apart at these magnitudes (0..100), so equal
strings mean the same double: the statistics and the arithmetic's order are sacreBLEU's.
(BLEU is compared within 1e-12 instead: Python 3.12's compensated sum() moves it by an ulp;
test_bleu checks single-reference BLEU bit for bit against ../shared/bleu.)
Cases: ../shared/bleu's system outputs against its reference (or $BLEU_CASES_DIR; skipped,
saying so, when absent), hand-picked lines (punctuation off both ends of a word, one-character
words, Python's white space such as U+00A0 and U+3000, empty hypotheses, a reference without
6-grams), and 300 random corpora of 1 to 30 lines over letters, accented and CJK characters,
punctuation and white space (empty references among them: sacreBLEU 2.6.0 scores an empty
reference as one of no tokens). Several references: chosen cases (the closest reference length
and its tie, clipping by the largest count, lines empty in some or all reference files) and
200 random corpora of 2 to 4 reference files with empty lines here and there. Also the signature
lines and a bad --metric refused.

Usage: python3 test/test_sacrebleu.py [PROGRAM_DIR]    Ends with "sacrebleu: N passed, M failed".
Without the sacrebleu package it says SKIP and why; REQUIRE_SACREBLEU=1 (CI) makes that a failure.
"""
import os
import random
import subprocess
import sys
import tempfile

from checks import check, summary

program_dir = sys.argv[1] if len(sys.argv) > 1 else "."


try:
    from sacrebleu.metrics import BLEU, CHRF
except ImportError:
    if os.environ.get("REQUIRE_SACREBLEU") == "1":
        check(False, "sacrebleu is importable (REQUIRE_SACREBLEU=1; pip install sacrebleu)")
        sys.exit(summary("sacrebleu"))
    print("SKIP test_sacrebleu: the sacrebleu package is not installed (pip install sacrebleu)")
    sys.exit(summary("sacrebleu", skipped=1))

tmp_dir = tempfile.TemporaryDirectory()   # removed at exit
tmp = tmp_dir.name


def write(name, lines):
    path = os.path.join(tmp, name)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def ours(hyps, refs):
    """./bleu's chrF and chrF++ scores (strings, 15 decimals) of the hypotheses."""
    out = subprocess.run([os.path.join(program_dir, "bleu"), write("ref.txt", refs), "--hyp", write("hyp.txt", hyps),
                          "--metric", "chrf,chrf++", "--score-only", "--width", "15"],
                         capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else [f"exit {out.returncode}: {out.stderr.strip()}"]


def theirs(hyps, refs):
    # As sacreBLEU's CLI reads files: each line rstripped.
    hyps = [h.rstrip() for h in hyps]
    refs = [r.rstrip() for r in refs]
    return ["%.15f" % CHRF(word_order=w).corpus_score(hyps, [refs]).score for w in (0, 2)]


def compare(what, hyps, refs):
    a, b = ours(hyps, refs), theirs(hyps, refs)
    check(a == b, f"{what}: chrF, chrF++ {a} == sacreBLEU's {b}")
    return a == b


# ---- the shared BLEU cases: real system outputs of one reference
cases = os.environ.get("BLEU_CASES_DIR", os.path.join("..", "shared", "bleu"))
expected = os.path.join(cases, "expected.json")


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


if os.path.isfile(expected):
    import json
    with open(expected, encoding="utf-8") as f:
        for case in json.load(f)["cases"]:   # each case's system output and reference file
            compare(case["case"], read_lines(os.path.join(cases, case["case"] + ".hyp")),
                    read_lines(os.path.join(cases, case["ref"])))
else:
    print(f"SKIP the shared BLEU cases: no {expected} (BLEU_CASES_DIR)")

# ---- hand-picked lines
compare("punctuation off a word's end, then its start; one-character words",
        ["Hello, world! (yes) x . \"quoted\" -a- ¿qué?", "a b c"],
        ["Hello world! yes) x. quoted\" a- ¿qué", "a, b c."])
compare("Python's white space inside lines (U+00A0, U+3000, tab, U+2009)",
        ["one\u00a0two\tthree\u3000four", "five\u2009six"],
        ["one two three four", "five six"])
compare("an empty hypothesis, a reference without 6-grams",
        ["", "abc"], ["short", "ab"])
compare("CJK and accents", ["我们去了北京。", "Él está aquí, ¿no?"], ["我们去北京了。", "Él está allí, ¿verdad?"])

# ---- random corpora
def random_corpora(what, count, make, score_ours, score_theirs, same=lambda a, b: a == b):
    """Scores `count` corpora from make() (hyps, references) both ways: none may differ (the
    first three that do are shown)."""
    bad = 0
    for n in range(count):
        hyps, refs = make()
        a, b = score_ours(hyps, refs), score_theirs(hyps, refs)
        if not same(a, b):
            bad += 1
            if bad <= 3:
                print(f"  differs on random corpus {n}: ours {a}, sacreBLEU {b}")
    check(bad == 0, f"{what} ({bad} differ)")


alphabet = (list("abcdefgh ABC") + ["é", "ñ", "ü", "北", "京", "。", ",", ".", "!", "?", "(", ")", "\"", "'", "-",
            " ", " ", " ", "\u00a0", "\t", "\u3000"])
rng = random.Random(5)


def random_lines():
    """1..30 hypotheses and references of characters (some empty, or white space only: empty
    once rstripped)."""
    lines = rng.randint(1, 30)
    def line():
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
    return [line() for _ in range(lines)], [line() for _ in range(lines)]


random_corpora("300 random corpora of 1..30 lines: chrF and chrF++ equal sacreBLEU's to 15 decimals", 300,
               random_lines, ours, theirs)

# ---- several references per line
def ours_multi(hyps, ref_streams):
    """./bleu's BLEU, chrF and chrF++ (floats) against several reference files."""
    files = [write(f"ref{k}.txt", refs) for k, refs in enumerate(ref_streams)]
    out = subprocess.run([os.path.join(program_dir, "bleu"), *files, "--hyp", write("hyp.txt", hyps),
                          "--metric", "bleu,chrf,chrf++", "--score-only", "--width", "15"],
                         capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else [f"exit {out.returncode}: {out.stderr.strip()}"]


def theirs_multi(hyps, ref_streams):
    hyps = [h.rstrip() for h in hyps]
    streams = [[r.rstrip() for r in refs] for refs in ref_streams]
    return ["%.15f" % BLEU().corpus_score(hyps, streams).score] + \
           ["%.15f" % CHRF(word_order=w).corpus_score(hyps, streams).score for w in (0, 2)]


def same_multi(a, b):
    """BLEU within 1e-12 (see the header), chrF and chrF++ to the last printed digit."""
    return len(a) == 3 and len(b) == 3 and abs(float(a[0]) - float(b[0])) <= 1e-12 and a[1:] == b[1:]


def compare_multi(what, hyps, ref_streams):
    a, b = ours_multi(hyps, ref_streams), theirs_multi(hyps, ref_streams)
    check(same_multi(a, b), f"{what}: BLEU, chrF, chrF++ {a} == sacreBLEU's {b}")


compare_multi("2 references: the closest length (4 of 3 and 4 tokens), counts clipped by the larger",
              ["the the cat sat", "a b c d e"], [["the cat sat", "a b c"], ["the the the cat", "a b c d e f g"]])
compare_multi("2 references: a tie in length (5 tokens between 4 and 6: the shorter)",
              ["one two three four five"], [["one two three four"], ["one two three four five six"]])
compare_multi("3 references, a line empty in two of them",
              ["the cat sat on the mat", "hello there"], [["the cat is on the mat", ""], ["", "hello there friend"],
                                                          ["a cat sat on a mat", ""]])
compare_multi("the same reference twice == once", ["the cat sat on the mat"], [["the cat is on the mat"]] * 2)
words = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "é", "北京", ",", ".", "!", "?", "\"", "(", ")"]


def random_streams():
    """1..20 hypotheses and 2..4 reference files of words (some lines empty)."""
    lines = rng.randint(1, 20)
    def sentence():
        return " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
    return [sentence() for _ in range(lines)], [[sentence() for _ in range(lines)] for _ in range(rng.randint(2, 4))]


random_corpora("200 random corpora of 2..4 reference files: BLEU, chrF, chrF++ equal sacreBLEU's", 200,
               random_streams, ours_multi, theirs_multi, same_multi)
out = subprocess.run([os.path.join(program_dir, "bleu"), write("r1.txt", ["The cat sat."]), write("r2.txt", ["A cat."]),
                      "--hyp", write("h.txt", ["The cat sat."]), "--metric", "bleu,chrf"], capture_output=True, text=True)
check(out.returncode == 0 and "signature: nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp\n" in out.stdout and
      "signature: nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no\n" in out.stdout,
      f"2 reference files: the signatures say nrefs:2 ({out.stdout!r})")
compare_multi("a line empty in every reference file (no tokens, as sacreBLEU scores it)",
              ["a b c d", "b"], [["a b c d", ""], ["b c", " "]])
compare("an empty reference line (no tokens, as sacreBLEU 2.6.0 scores it)",
        ["the cat sat on the mat", "hello"], ["the cat sat on the mat", ""])
run = subprocess.run([os.path.join(program_dir, "bleu"), write("r1.txt", ["a", "b"]), write("r2.txt", ["b"]),
                      "--hyp", write("h.txt", ["a", "b"])], capture_output=True, text=True)
check(run.returncode == 1 and "line counts differ" in run.stderr,
      f"a reference file of another length refused, exit 1 ({run.returncode}): {run.stderr.strip()}")

# ---- the printed lines
out = subprocess.run([os.path.join(program_dir, "bleu"), write("r.txt", ["The cat sat."]), "--hyp",
                      write("h.txt", ["The cat sat."]), "--metric", "chrf++"], capture_output=True, text=True).stdout
check(out == "chrF2++ = 100.00\nsignature: nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no\n",
      f"--metric chrf++ prints sacreBLEU's score line and signature: {out!r}")
run = subprocess.run([os.path.join(program_dir, "bleu"), write("r.txt", ["a"]), "--hyp", write("h.txt", ["a"]),
                      "--metric", "ter"], capture_output=True, text=True)
check(run.returncode == 2 and "--metric ter" in run.stderr, f"--metric ter refused, exit 2 ({run.returncode}): {run.stderr.strip()}")

sys.exit(summary("sacrebleu"))
