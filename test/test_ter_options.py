"""test/test_ter_options.py — ./bleu's TER options against sacreBLEU 2.6.0's TER(normalized=...,
no_punct=..., asian_support=..., case_sensitive=...): its Tercom tokenizer, step for step.

For each of the 16 combinations of --ter-case-sensitive, --ter-normalized, --ter-no-punct and
--ter-asian-support, ./bleu --metric ter --width 15 --score-only scores the same files as
sacreBLEU's TER(...).corpus_score (its input rstripped, as ./bleu does), and the two strings
(15 decimals) must be equal. Cases: hand-picked lines (XML entities and a doubly escaped one,
possessives 's in the middle and at the end, numbers such as 1,000.5 and 3-4, ASCII punctuation,
a reference that tokenizing twice changes (sacreBLEU tokenizes each reference twice: in
Metric._cache_references and again in TER._extract_reference_info),
CJK ideographs and the other CJK ranges at their edges, kana runs (never split: sacreBLEU's kana
rules cannot match), CJK and full-width punctuation, mixed case and Greek capital sigma), 40 random
corpora a combination drawn from ASCII, CJK, kana, Asian and full-width punctuation and white
space, and 4 corpora of 2 or 3 reference files a combination. With the default options, the
shift search and the edit distance's beam at their bounds: a block of 10 words (the longest a
shift may move) and a reference exactly 50 times the hypothesis' length (where the beam is not
yet widened). Also the score line and signature
./bleu prints without --score-only, against sacreBLEU's (its version field left off), for a few
combinations.

Usage: python3 test/test_ter_options.py [PROGRAM_DIR [BUILD_DIR]]    Ends with "ter_options: N passed, M failed".
Without the sacrebleu package it says SKIP and why; REQUIRE_SACREBLEU=1 (CI) makes that a failure.
"""
import itertools
import os
import random
import subprocess
import sys

from checks import check, summary, skip_without_sacrebleu, write

program_dir = sys.argv[1] if len(sys.argv) > 1 else "."
build_dir = sys.argv[2] if len(sys.argv) > 2 else "build"   # unused: ./bleu is all this test runs

try:
    from sacrebleu.metrics import TER
except ImportError as e:
    skip_without_sacrebleu("ter_options", e)


FLAGS = ["--ter-case-sensitive", "--ter-normalized", "--ter-no-punct", "--ter-asian-support"]
KWARGS = ["case_sensitive", "normalized", "no_punct", "asian_support"]
COMBOS = list(itertools.product([False, True], repeat=4))   # in FLAGS' order


def combo_name(combo):
    return "+".join(f[len("--ter-"):] for f, on in zip(FLAGS, combo) if on) or "defaults"


def run_bleu(hyps, ref_streams, combo, extra):
    files = [write(f"ref{k}.txt", refs) for k, refs in enumerate(ref_streams)]
    flags = [f for f, on in zip(FLAGS, combo) if on]
    return subprocess.run([os.path.join(program_dir, "bleu"), *files, "--hyp", write("hyp.txt", hyps),
                           "--metric", "ter", *flags, *extra], capture_output=True, text=True)


def ours(hyps, ref_streams, combo):
    out = run_bleu(hyps, ref_streams, combo, ["--width", "15", "--score-only"])
    return out.stdout.strip() if out.returncode == 0 else f"exit {out.returncode}: {out.stderr.strip()}"


def sacrebleu_ter(combo):
    return TER(**dict(zip(KWARGS, combo)))


def theirs(hyps, ref_streams, combo):
    score = sacrebleu_ter(combo).corpus_score([h.rstrip() for h in hyps],
                                              [[r.rstrip() for r in refs] for refs in ref_streams])
    return "%.15f" % score.score


# ---- hand-picked lines: (what, hypotheses, references), one reference file
HAND_PICKED = [
    ("XML entities, possessives 's mid-line and at the end",
     ["He said &quot;John's car&quot; &amp; left", "the boss's desk's", "&amp;lt;b&amp;gt; JAMES'S", "it's Tom's"],
     ["He said &quot;Johns car&quot; & left.", "the boss 's desk's", "&lt;b&gt; James's", "its Toms"]),
    ("numbers 1,000.5 and 3-4, periods and commas",
     ["It costs 1,000.5 dollars, or 3-4 euros.", "pages 10-20,total 1.000,5", "a.b,c end.", "v2.0-beta -5 5-"],
     ["It costs 1,000 .5 dollars , or 3 - 4 euros", "pages 10 - 20 , total 1.000,5", "a . b , c end", "v2.0 -beta - 5 5 -"]),
    ("ASCII punctuation",
     ["Hello, world! (yes) \"quoted\" {a|b} [c] ~d^ `e` @f #g $h %i", "*j +k <l> =m ?n /o \\p _q ;r :s 'q'"],
     ["Hello world (yes) quoted {a | b} [ c ] ~ d ^ `e` @ f # g $ h % i", "* j + k < l > = m ? n / o \\ p _ q ; r : s ' q '"]),
    ("CJK ideographs and ranges, kana, CJK and full-width punctuation",
     ["我们去了北京。", "「こんにちは」、世界！", "カタカナ・ひらがな．，？", "㐀㇀⺀㌀豈︰㈀㼢㼣 ㇰㇱ", "ｺﾝﾆﾁﾊ｡ 全角（括弧）：；＂"],
     ["我们去北京了。", "「こんにちは」、 世界 ！", "カタカナ ・ ひらがな．，", "㐀 ㇀⺀ 㼣㈀", "ｺﾝﾆﾁﾊ 全角 （ 括弧 ） ："]),
    ("references tokenized twice, as sacreBLEU does: 's before a tab or U+3000, doubly escaped entities",
     ["John 's car is Mary 's too", "\"hi\" < &amp;", "Tom's\tdog"],
     ["John's\tcar is Mary's\u3000too", "&amp;quot;hi&amp;quot; &amp;lt; &amp;amp;", "Tom's\tdog"]),
    ("mixed case, Greek capital sigma",
     ["ΟΔΟΣ ΣΑΣ, Hello WORLD", "İstanbul MiXeD ΣΑΣ.", "The Cat SAT"],
     ["οδος σας, hello world", "istanbul Mixed σας", "the cat sat"]),
]

# ---- the shift search and the beam at their bounds (the options change no word here: defaults only)
X10, Y10 = [f"x{k}" for k in range(10)], [f"y{k}" for k in range(10)]
FILLER = [f"r{k}" for k in range(100)]
BOUNDS = [
    ("a block of 10 words moved, the longest shift: 1 shift, not 2",
     [" ".join(Y10 + X10)], [" ".join(X10 + Y10)]),
    ("a reference exactly 50 times the hypothesis' length: the beam stays 25 wide (sacreBLEU widens it past 50 "
     "only), so matches 9 and 99 words in cannot both be taken",
     ["x y"], [" ".join(FILLER[:9] + ["x"] + FILLER[10:99] + ["y"])]),
]

# ---- random corpora
ALPHABET = (list("abcxyzsABCXYZS0123456789") + list("'-.,?:;!\"()&{}[]^_`~@/#$%*+<=>|\\")
            + ["&quot;", "&amp;", "&lt;", "&gt;", "&amp;quot;", "&amp;lt;", "'s", "'S", "1,000.5", "3-4", "\u03a3", "\u0130"]
            + list("我们北京世界一鿿㐀䶿㇀㇯⺀⻿㌀㏿豈﫿︰﹏㈀㼢㼣")   # CJK ranges, at their edges
            + list("ぁあがなゟ゠アカタナヿㇰㇿ")                   # Hiragana, Katakana, Phonetic Extensions
            + list("、。〈】〒〔〟〠｡･・")                         # ASIAN_PUNCT (and 〒 〠, next to it)
            + list("．，？：；！＂（）Ａ")                         # FULL_WIDTH_PUNCT (and Ａ)
            + [" "] * 12 + ["\t", "\u3000", "\u00a0"])


def random_corpus(rng, streams=1):
    def line():
        return [rng.choice(ALPHABET) for _ in range(rng.randint(0, 24))]

    def edit(chunks):
        out = []
        for c in chunks:
            r = rng.random()
            if r < 0.7:
                out.append(c)
            elif r < 0.8:
                out.append(rng.choice(ALPHABET))
            elif r < 0.9:
                out += [c, rng.choice(ALPHABET)]
        if len(out) > 4 and rng.random() < 0.3:   # a block moved
            a, b = sorted(rng.sample(range(len(out)), 2))
            out = out[b:] + out[a:b] + out[:a]
        return "".join(out)

    n = rng.randint(1, 6)
    refs = [line() for _ in range(n)]
    hyps = [edit(r) for r in refs]
    ref_streams = [["".join(r) for r in refs]] + [[edit(r) for r in refs] for _ in range(streams - 1)]
    return hyps, ref_streams


def compare_many(what, combo, corpora):
    """All corpora scored both ways under combo: none may differ (the first that does is shown)."""
    bad = []
    for hyps, ref_streams in corpora:
        a, b = ours(hyps, ref_streams, combo), theirs(hyps, ref_streams, combo)
        if a != b:
            bad.append(f"{a} != sacreBLEU's {b} on hyps {hyps!r}, refs {ref_streams!r}")
    check(not bad, f"TER {combo_name(combo)}, {what}: {len(corpora) - len(bad)} of {len(corpora)} equal sacreBLEU's"
          + (f" ({bad[0]})" if bad else ""))


rng = random.Random(20240601)
their_hand_picked = set()
for combo in COMBOS:
    name = combo_name(combo)
    for what, hyps, refs in HAND_PICKED:
        a, b = ours(hyps, [refs], combo), theirs(hyps, [refs], combo)
        their_hand_picked.add((what, b))
        check(a == b, f"TER {name}, {what}: {a} == sacreBLEU's {b}")
    compare_many("40 random corpora (1 reference file)", combo, [random_corpus(rng) for _ in range(40)])
    compare_many("4 random corpora of 2 or 3 reference files", combo,
                 [random_corpus(rng, streams=rng.randint(2, 3)) for _ in range(4)])

for what, hyps, refs in BOUNDS:
    a, b = ours(hyps, [refs], COMBOS[0]), theirs(hyps, [refs], COMBOS[0])
    check(a == b, f"TER, {what}: {a} == sacreBLEU's {b}")

# The hand-picked lines tell the options apart (else the comparisons above would prove little).
distinct = len(their_hand_picked)
check(distinct >= 3 * len(HAND_PICKED),
      f"the hand-picked lines' sacreBLEU scores differ between combinations ({distinct} distinct (case, score) pairs)")

# ---- the printed score line and signature
for combo in [(False, False, False, False), (True, True, False, True), (False, True, True, False), (True, True, True, True)]:
    hyps, refs = HAND_PICKED[3][1], HAND_PICKED[3][2]   # CJK
    metric = sacrebleu_ter(combo)
    score = metric.corpus_score(hyps, [refs])
    signature = metric.get_signature().format().rsplit("|version:", 1)[0]
    expected = f"{score}\nsignature: {signature}\n"
    out = run_bleu(hyps, [refs], combo, [])
    check(out.returncode == 0 and out.stdout == expected,
          f"TER {combo_name(combo)}: ./bleu prints {out.stdout!r} (stderr {out.stderr.strip()!r}), sacreBLEU {expected!r}")

sys.exit(summary("ter_options"))
