"""test/test_sacrebleu.py — ./bleu against sacreBLEU 2.6.0 itself: chrF and chrF++ (CHRF), and
several references per line (BLEU, chrF, chrF++), and TER.

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
200 random corpora of 2 to 4 reference files with empty lines here and there. TER (edits found by
sacreBLEU's shift search, so exact equality checks the search step for step): the first 300 lines
of each shared case (30 of shuffled_words), hand-picked lines (a block moved, Greek capital sigma at a word's end and
before a combining mark, U+0130, case), 60 random corpora built by moving blocks of a reference's
words around (up to 80 words a line; one in ten a few words against up to 80, which widens the beam), 60
of 2 to 4 reference files; and Python's str.lower() itself, which TER applies first: every code
point, and each between 'A' or '1' and a capital sigma (its Final_Sigma rule), lowered by
build/test_bleu --lowercase against Python (SKIP when this Python's Unicode version is not the
one toolkit/unicode_lower.h was generated from). Also the signature lines, each metric's printed
line (BLEU's with its precisions, brevity penalty and lengths) on 40 random corpora against
sacreBLEU's Score.format, and a bad --metric refused.

Usage: python3 test/test_sacrebleu.py [PROGRAM_DIR [BUILD_DIR]]    Ends with "sacrebleu: N passed, M failed".
Without the sacrebleu package it says SKIP and why; REQUIRE_SACREBLEU=1 (CI) makes that a failure.
"""
import os
import random
import subprocess
import sys

from checks import check, skip, summary, skip_without_sacrebleu, write, read_lines, bleu_cases_dir

program_dir = sys.argv[1] if len(sys.argv) > 1 else "."
build_dir = sys.argv[2] if len(sys.argv) > 2 else "build"


try:
    from sacrebleu.metrics import BLEU, CHRF, TER
except ImportError as e:
    skip_without_sacrebleu("sacrebleu", e)


def ours(hyps, refs):
    """./bleu's chrF and chrF++ scores (strings, 15 decimals) of the hypotheses."""
    return ours_multi(hyps, [refs], "chrf,chrf++")


def theirs(hyps, refs):
    # As sacreBLEU's CLI reads files: each line rstripped.
    hyps = [h.rstrip() for h in hyps]
    refs = [r.rstrip() for r in refs]
    return ["%.15f" % CHRF(word_order=w).corpus_score(hyps, [refs]).score for w in (0, 2)]


def compare(what, hyps, refs):
    a, b = ours(hyps, refs), theirs(hyps, refs)
    check(a == b, f"{what}: chrF, chrF++ {a} == sacreBLEU's {b}")
    return a == b


def ours_multi(hyps, ref_streams, metrics="bleu,chrf,chrf++"):
    """./bleu's scores (strings, 15 decimals; by default BLEU, chrF and chrF++) against several reference files."""
    files = [write(f"ref{k}.txt", refs) for k, refs in enumerate(ref_streams)]
    out = subprocess.run([os.path.join(program_dir, "bleu"), *files, "--hyp", write("hyp.txt", hyps),
                          "--metric", metrics, "--score-only", "--width", "15"],
                         capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else [f"exit {out.returncode}: {out.stderr.strip()}"]


def ours_ter(hyps, ref_streams):
    return ours_multi(hyps, ref_streams, "ter")


def theirs_ter(hyps, ref_streams):
    return ["%.15f" % TER().corpus_score([h.rstrip() for h in hyps],
                                         [[r.rstrip() for r in refs] for refs in ref_streams]).score]


def compare_ter(what, hyps, ref_streams):
    a, b = ours_ter(hyps, ref_streams), theirs_ter(hyps, ref_streams)
    check(a == b, f"TER {what}: {a} == sacreBLEU's {b}")


# ---- the shared BLEU cases: real system outputs of one reference
cases = bleu_cases_dir()
expected = os.path.join(cases, "expected.json")


if os.path.isfile(expected):
    import json
    with open(expected, encoding="utf-8") as f:
        for case in json.load(f)["cases"]:   # each case's system output and reference file
            hyps, refs = read_lines(os.path.join(cases, case["case"] + ".hyp")), read_lines(os.path.join(cases, case["ref"]))
            compare(case["case"], hyps, refs)
            # shuffled words: sacreBLEU's shift search runs to its cap on every line, 0.1 s a line
            lines = 30 if case["case"] == "shuffled_words" else 300
            compare_ter(f"{case['case']}, its first {lines} lines", hyps[:lines], [refs[:lines]])
else:
    skip(f"the shared BLEU cases: no {expected} (BLEU_CASES_DIR)")

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
# A metric named twice is scored once, in the place it was first named, as sacreBLEU's -m bleu chrf bleu.
twice = subprocess.run([os.path.join(program_dir, "bleu"), write("r1.txt", ["The cat sat."]), "--hyp",
                        write("h.txt", ["The cat sat."]), "--metric", "bleu,chrf,bleu"], capture_output=True, text=True)
once = subprocess.run([os.path.join(program_dir, "bleu"), write("r1.txt", ["The cat sat."]), "--hyp",
                       write("h.txt", ["The cat sat."]), "--metric", "bleu,chrf"], capture_output=True, text=True)
check(twice.returncode == 0 and twice.stdout == once.stdout and twice.stdout.count("signature:") == 2,
      f"--metric bleu,chrf,bleu prints bleu,chrf's two blocks, BLEU once ({twice.stdout.count('BLEU =')} BLEU lines)")
compare_multi("a line empty in every reference file (no tokens, as sacreBLEU scores it)",
              ["a b c d", "b"], [["a b c d", ""], ["b c", " "]])
compare("an empty reference line (no tokens, as sacreBLEU 2.6.0 scores it)",
        ["the cat sat on the mat", "hello"], ["the cat sat on the mat", ""])
run = subprocess.run([os.path.join(program_dir, "bleu"), write("r1.txt", ["a", "b"]), write("r2.txt", ["b"]),
                      "--hyp", write("h.txt", ["a", "b"])], capture_output=True, text=True)
check(run.returncode == 1 and "line counts differ" in run.stderr,
      f"a reference file of another length refused, exit 1 ({run.returncode}): {run.stderr.strip()}")

# ---- TER
compare_ter("a block of two words moved: one shift", ["c d a b e"], [["a b c d e"]])
compare_ter("Greek capital sigma: final after a letter, medial before one, a combining mark skipped",
            ["\u039f\u0394\u039f\u03a3 \u03a3\u0391\u03a3 \u0391\u03a3\u0301 \u03a3"],
            [["\u03bf\u03b4\u03bf\u03c2 \u03c3\u03b1\u03c2 \u03b1\u03c3\u0301 \u03c3"]])
compare_ter("U+0130 (lowers to two code points), German sharp s, Cyrillic, title case",
            ["\u0130STANBUL Stra\u00dfe \u041c\u041e\u0421\u041a\u0412\u0410 \u01c5"],
            [["i\u0307stanbul stra\u00dfe \u043c\u043e\u0441\u043a\u0432\u0430 \u01c6"]])
compare_ter("an empty hypothesis, an empty reference, both", ["", "a b", ""], [["a b c", "", ""]])
ter_words = ("the a cat dog sat on mat Mat THE Cat . , and or \u03a3\u0391\u03a3 \u03c3\u03b1\u03c2 "
             "\u039f\u0394\u039f\u03a3 \u0130stanbul stra\u00dfe \u00c9T\u00c9 \u00e9t\u00e9").split()


def moved_blocks():
    """1..8 lines: a reference of 0..80 words, its hypothesis the same words with up to 4 blocks
    of 1..5 moved and a word changed, or (one in ten) 0..3 unrelated words (a reference over 50
    times as long widens the beam)."""
    hyps, refs = [], []
    for _ in range(rng.randint(1, 8)):
        ref = [rng.choice(ter_words) for _ in range(rng.randint(0, 80))]
        hyp = list(ref)
        for _ in range(rng.randint(0, 4)):
            if len(hyp) > 2:
                i = rng.randrange(len(hyp))
                k = rng.randint(1, min(5, len(hyp) - i))
                block = hyp[i:i + k]
                del hyp[i:i + k]
                j = rng.randint(0, len(hyp))
                hyp[j:j] = block
        if hyp and rng.random() < 0.5:
            hyp[rng.randrange(len(hyp))] = rng.choice(ter_words)
        if rng.random() < 0.1:
            hyp = [rng.choice(ter_words) for _ in range(rng.randint(0, 3))]
        hyps.append(" ".join(hyp))
        refs.append(" ".join(ref))
    return hyps, [refs]


random_corpora("60 random corpora of blocks moved: TER equals sacreBLEU's to 15 decimals", 60, moved_blocks,
               ours_ter, theirs_ter)
random_corpora("60 random corpora of 2..4 reference files: TER equals sacreBLEU's to 15 decimals", 60,
               random_streams, ours_ter, theirs_ter)

# Python's str.lower(), every code point, through build/test_bleu --lowercase (toolkit/ter_score.cpp's py_lower)
import unicodedata
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "toolkit", "unicode_lower.h"), encoding="utf-8") as f:
    table_version = f.read().split('kUnicodeLowerVersion = "')[1].split('"')[0]
lowercase = os.path.join(build_dir, "test_bleu")
if unicodedata.unidata_version != table_version:
    skip(f"str.lower() on every code point: this Python has Unicode {unicodedata.unidata_version}, "
         f"toolkit/unicode_lower.h was generated from {table_version}")
elif not os.path.isfile(lowercase):
    check(False, f"str.lower() on every code point: {lowercase} exists (make test builds it)")
else:
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    text = "\n".join(points + ["A" + c + "\u03a3" for c in points] + ["1" + c + "\u03a3" for c in points] +
                      ["A\u03a3" + c for c in points])
    run = subprocess.run([lowercase, "--lowercase"], input=text.encode("utf-8"), capture_output=True)
    ours_low, theirs_low = run.stdout.decode("utf-8", "replace").split("\n"), text.lower().split("\n")
    differ = [i for i in range(len(theirs_low)) if i >= len(ours_low) or ours_low[i] != theirs_low[i]]
    check(run.returncode == 0 and len(ours_low) == len(theirs_low) and not differ,
          f"str.lower() of {len(points)} code points, alone and around a capital sigma: py_lower == Python's "
          f"(Unicode {table_version}; {len(differ)} lines differ"
          + (f", first {ascii(text.split(chr(10))[differ[0]])}: {ascii(ours_low[differ[0]] if differ[0] < len(ours_low) else None)} "
             f"!= {ascii(theirs_low[differ[0]])}" if differ else "") + ")")
    check(all(c.lower().lower() == c.lower() for c in points),
          "Python's lower() is idempotent on every code point (sacreBLEU lowers TER's references twice, as ./bleu does)")

# ---- the printed lines
out = subprocess.run([os.path.join(program_dir, "bleu"), write("r.txt", ["The cat sat."]), "--hyp",
                      write("h.txt", ["The cat sat."]), "--metric", "chrf++"], capture_output=True, text=True).stdout
check(out == "chrF2++ = 100.00\nsignature: nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no\n",
      f"--metric chrf++ prints sacreBLEU's score line and signature: {out!r}")
out = subprocess.run([os.path.join(program_dir, "bleu"), write("r.txt", ["a b c d"]), "--hyp",
                      write("h.txt", ["c d a b"]), "--metric", "ter"], capture_output=True, text=True).stdout
check(out == "TER = 25.00\nsignature: nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no\n",
      f"--metric ter prints sacreBLEU's score line and signature: {out!r}")
run = subprocess.run([os.path.join(program_dir, "bleu"), write("r.txt", ["a"]), "--hyp", write("h.txt", ["a"]),
                      "--metric", "meteor"], capture_output=True, text=True)
check(run.returncode == 2 and "--metric meteor" in run.stderr,
      f"--metric meteor refused, exit 2 ({run.returncode}): {run.stderr.strip()}")


# Each metric's printed line (not --score-only: the line a user reads, built from the corpus
# statistics' sums) on random corpora, against sacreBLEU's Score.format at the same width.
def printed_lines(hyps, refs):
    out = subprocess.run([os.path.join(program_dir, "bleu"), write("r.txt", refs), "--hyp", write("h.txt", hyps),
                          "--metric", "bleu,chrf,chrf++,ter", "--width", "4"], capture_output=True, text=True)
    return out.stdout.split("\n")[0:8:2] if out.returncode == 0 else [f"exit {out.returncode}: {out.stderr.strip()}"]


def theirs_printed(hyps, refs):
    hyps, refs = [h.rstrip() for h in hyps], [r.rstrip() for r in refs]
    return [m.corpus_score(hyps, [refs]).format(width=4) for m in (BLEU(), CHRF(), CHRF(word_order=2), TER())]


random_corpora("40 random corpora: the printed lines (BLEU with its precisions, brevity penalty and lengths; chrF; "
               "chrF++; TER; --width 4) equal sacreBLEU's Score.format", 40, random_lines, printed_lines, theirs_printed)

sys.exit(summary("sacrebleu"))
