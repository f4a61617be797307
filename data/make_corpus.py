#!/usr/bin/env python3
"""make_corpus.py -- builds the default English->Spanish corpus: Bible verses, KJV -> RV1909.

Source: the public-domain SWORD modules engKJV2006eb (King James Version, package
sword-text-kjv) and spaRV1909eb (Reina-Valera 1909, package sword-text-sparv), dumped with
`mod2imp MODULE` from libsword-utils. Both use the KJV versification, so verses are aligned
by key ("Book C:V"). See ../shared/CORPUS.md (the facts this script relies on).

Run:    python3 data/make_corpus.py [--out DIR] [--force]      (`make data` runs this)
Needs:  Python 3 standard library; the three Debian packages above, which it installs with
        apt-get when they are missing and it runs as root (otherwise it says what to install).
Writes: DIR/{train,dev,test}.{en,es} (one sentence per line, line i of .en translates to
        line i of .es), DIR/README.md (provenance, choices, statistics) and DIR/.complete
        (a stamp written last). Default DIR: data/corpus/default beside this script.
        When the stamp is there and matches the files and this script, it does nothing;
        every file is written under a temporary name and renamed, so an interrupted run
        leaves no half-written corpus behind; the temporary file is removed when a write fails
        or is interrupted (Ctrl-C, SIGTERM), and one left by a run killed outright (kill -9)
        is removed by the next build.

Pipeline (counts of each step are printed and written to README.md):
  1. dump both modules; parse "$$$Book C:V" records; drop chapter/verse 0 keys (intros).
  2. clean the OSIS markup: <w> word tags keep their words; <note> dropped with content;
     <title> dropped except psalm superscriptions (KJV marks them type="psalm"; RV1909 has
     them as plain text); <transChange>, <q>, <divineName>, <foreign>, milestones and every
     other tag removed keeping text; XML entities decoded; pilcrow U+00B6 removed; NFC;
     white space collapsed.
     Spanish only: RV1909 glues a <transChange> to a neighbouring <w> without a space
     ("Y FUÉ</w><transChange>que</transChange>"): a space is inserted between the two tags.
     The Hebrew letter names that open Psalm 119's stanzas in RV1909 ("ALEPH.", "BETH")
     are removed (KJV has them as <title>, which is dropped). RV1909 writes the first word
     of every chapter in capitals ("EN el principio", "DE SIETE años", "¡OH Jehová"): in
     verse 1 the first run of all-capital words is case-normalised ("En el principio",
     "De siete años", "¡Oh Jehová"); emphatic capitals elsewhere ("YO SOY EL QUE SOY",
     "JEHOVÁ") are the text's own and are kept, as KJV keeps "LORD" and "I AM".
  3. shifted chapters: RV1909 numbers some chapters differently, which misaligns them.
     Both modules carry Strong's numbers; a verse is misaligned when its KJV Strong's set
     overlaps (Jaccard) an RV verse at offset d != 0 (|d| <= 8, same chapter) by at least
     0.25 more than the RV verse with the same key. A chapter with >= 3 misaligned verses
     is shifted and dropped whole; the detected list is compared with CORPUS.md's list and
     both are dropped (union). Local differences are dropped with their neighbours: a
     flagged verse in a chapter with 1-2 of them, and the neighbours of a verse that RV1909
     leaves empty (it merged that verse into the one before or after).
     RV1909 also appends the epistles' subscriptions ("Fué escrita de Corinto...") to their
     last verse after "Amén."; KJV has them as <title> (dropped), so RV's are cut off.
  4. drop empty verses, pairs whose word-count ratio es/en is outside [0.45, 2.0], and
     duplicate pairs (the first occurrence is kept).
  5. split by whole chapters with a stable hash (SHA-1) of "Book chapter": ~5% test, ~5% dev,
     the rest train. Then every train pair whose English or Spanish side, lower-cased,
     equals a dev or test side is dropped (formulas such as "And the LORD spake unto Moses,
     saying," recur), so `grep -cFxf test.en train.en` prints 0.
"""
import argparse
import collections
import hashlib
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unicodedata

VERSION = 1  # shown in README.md; the stamp also records a hash of this script, so any
             # edit of the script makes the next run rebuild
MODULES = {"en": "engKJV2006eb", "es": "spaRV1909eb"}
PACKAGES = ["libsword-utils", "sword-text-kjv", "sword-text-sparv"]
SPLITS = ("train", "dev", "test")
LANGS = ("en", "es")
RATIO_MIN, RATIO_MAX = 0.45, 2.0
TEST_PER_MILLE, DEV_PER_MILLE = 50, 50
SHIFT_MAX_OFFSET, SHIFT_MARGIN, SHIFT_MIN_VERSES = 8, 0.25, 3
# CORPUS.md: chapters RV1909 numbers differently from KJV (book names as mod2imp prints them).
KNOWN_SHIFTED = [("Numbers", 13), ("Numbers", 30), ("I Samuel", 24), ("I Kings", 22),
                 ("I Chronicles", 21), ("II Chronicles", 33), ("Job", 39), ("Job", 40),
                 ("Hosea", 12), ("Jonah", 2)]
PSALM119_LETTERS = ("ALEPH|BETH|GIMEL|DALETH|HE|VAU|ZAIN|CHETH|TETH|JOD|CAPH|LAMED|MEM|NUN|"
                    "SAMECH|AIN|PE|TZADDI|COPH|KOPH|RESH|SIN|SCHIN|SHIN|TAU")


def log(msg):
    print("make_corpus: " + msg, flush=True)


# ---------------------------------------------------------------- packages and dumping

def run_mod2imp(module):
    """Returns the module's dump as text, or None when mod2imp or the module is missing."""
    if shutil.which("mod2imp") is None:
        return None
    proc = subprocess.run(["mod2imp", module], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    text = proc.stdout.decode("utf-8", errors="replace")
    if proc.returncode != 0 or text.count("$$$") < 1000:
        return None
    return text


def install_packages():
    """apt-get installs PACKAGES (running apt-get update first if the install fails)."""
    hint = "please install them: sudo apt-get install " + " ".join(PACKAGES)
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        sys.exit("make_corpus: error: missing SWORD packages and not root (or no apt-get); "
                 + hint)
    cmd = ["apt-get", "install", "-y", "--no-install-recommends"] + PACKAGES
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    log("installing " + " ".join(PACKAGES))
    if subprocess.run(cmd, env=env).returncode == 0:
        return
    log("apt-get install failed; running apt-get update and trying again")
    if (subprocess.run(["apt-get", "update"], env=env).returncode != 0
            or subprocess.run(cmd, env=env).returncode != 0):
        sys.exit("make_corpus: error: apt-get could not install the SWORD packages; " + hint)


def dump_modules():
    """Returns {lang: dump text}, installing the packages once if needed."""
    dumps = {lang: run_mod2imp(mod) for lang, mod in MODULES.items()}
    if any(d is None for d in dumps.values()):
        install_packages()
        dumps = {lang: run_mod2imp(mod) for lang, mod in MODULES.items()}
    for lang, d in dumps.items():
        if d is None:
            sys.exit("make_corpus: error: `mod2imp %s` gives no text even after installing %s"
                     % (MODULES[lang], " ".join(PACKAGES)))
    return dumps


KEY_RE = re.compile(r"^\$\$\$(.+) (\d+):(\d+)$")


def parse_dump(text):
    """'$$$Book C:V' + markup lines -> ordered {(book, chapter, verse): raw markup}."""
    verses, key = {}, None
    for line in text.split("\n"):
        if line.startswith("$$$"):
            m = KEY_RE.match(line)
            key = (m.group(1), int(m.group(2)), int(m.group(3))) if m else None
            if key is not None:
                verses[key] = ""
        elif key is not None:
            verses[key] += line + " "
    return verses


# ---------------------------------------------------------------- cleaning

NOTE_RE = re.compile(r"<note\b[^>]*>.*?</note>", re.S)
TITLE_RE = re.compile(r"<title\b([^>]*)>(.*?)</title>", re.S)
TAG_RE = re.compile(r"<[^>]*>")
SPACE_BEFORE_PUNCT_RE = re.compile(r" +([,.;:!?)\]])")
PS119_RE = re.compile(r"^(?:%s)\b\.?\s*" % PSALM119_LETTERS)
WORD_RE = re.compile(r"[^\W\d_]+")


def keep_psalm_title(m):
    return " " + m.group(2) + " " if 'type="psalm"' in m.group(1) else " "


def strip_markup(raw, lang):
    """OSIS markup of one verse -> plain text (NFC, single spaces)."""
    t = NOTE_RE.sub(" ", raw)
    t = TITLE_RE.sub(keep_psalm_title, t)
    if lang == "es":  # RV1909 glues <transChange> to a <w> with no space between words
        t = t.replace("</w><transChange", "</w> <transChange")
        t = t.replace("</transChange><w ", "</transChange> <w ")
    t = TAG_RE.sub("", t)
    t = html.unescape(t).replace("\u00b6", " ")
    t = unicodedata.normalize("NFC", t)
    t = " ".join(t.split())
    return SPACE_BEFORE_PUNCT_RE.sub(r"\1", t)


def is_caps_word(w):
    return len(w) >= 2 and w.isupper()


def normalize_chapter_caps(text):
    """'EN el principio' -> 'En el principio': the first run of all-capital words (joined by
    single spaces) becomes Capitalised + lower case."""
    words = list(WORD_RE.finditer(text))
    for i, m in enumerate(words):
        if not is_caps_word(m.group()):
            continue
        run = [m]
        for n in words[i + 1:]:
            gap = text[run[-1].end():n.start()]
            if gap != " " or not is_caps_word(n.group()):
                break
            run.append(n)
        out, pos = [], 0
        for j, r in enumerate(run):
            w = r.group()
            out += [text[pos:r.start()], w.capitalize() if j == 0 else w.lower()]
            pos = r.end()
        return "".join(out) + text[pos:]
    return text


def clean_verse(raw, lang, key):
    t = strip_markup(raw, lang)
    if lang == "es":
        book, chapter, verse = key
        if book == "Psalms" and chapter == 119 and verse % 8 == 1:
            t = PS119_RE.sub("", t)
        if verse == 1:
            t = normalize_chapter_caps(t)
    return t


# ---------------------------------------------------------------- shifted chapters

def strongs_set(raw):
    """Strong's numbers of a verse, e.g. {'H430', 'H7225'} (leading zeros dropped)."""
    out = set()
    for attr in re.findall(r'lemma="([^"]*)"', raw):
        for x in attr.split():
            m = re.match(r"strong:([HG])0*(\d+)", x)
            if m:
                out.add(m.group(1) + m.group(2))
    return out


def jaccard(a, b):
    return len(a & b) / len(a | b) if a and b else 0.0


def misaligned_verses(chapter_keys, strong_en, strong_es):
    """Verses of one chapter whose KJV Strong's set matches a neighbouring RV verse clearly
    better than the RV verse with the same key. Returns [(verse, best offset)]."""
    book, chapter = chapter_keys[0][:2]
    out = []
    for key in chapter_keys:
        a = strong_en[key]
        if len(a) < 3:
            continue
        v = key[2]
        own = jaccard(a, strong_es.get(key, set()))
        best, best_d = own, 0
        for d in range(-SHIFT_MAX_OFFSET, SHIFT_MAX_OFFSET + 1):
            j = jaccard(a, strong_es.get((book, chapter, v + d), set())) if d else 0.0
            if j > best:
                best, best_d = j, d
        if best_d != 0 and best >= own + SHIFT_MARGIN:
            out.append((v, best_d))
    return out


def detect_shifts(raw_en, raw_es, keys):
    """Returns (shifted chapters [(book, ch)], misaligned verse keys elsewhere)."""
    strong_en = {k: strongs_set(raw_en[k]) for k in keys}
    strong_es = {k: strongs_set(raw_es.get(k, "")) for k in keys}
    chapters = collections.OrderedDict()
    for k in keys:
        chapters.setdefault(k[:2], []).append(k)
    shifted, local = [], []
    for ch, ch_keys in chapters.items():
        bad = misaligned_verses(ch_keys, strong_en, strong_es)
        if len(bad) >= SHIFT_MIN_VERSES:
            shifted.append(ch)
            offsets = collections.Counter(d for _, d in bad).most_common(1)[0][0]
            log("  shifted: %s %d (%d of %d verses misaligned, typical offset %+d)"
                % (ch[0], ch[1], len(bad), len(ch_keys), offsets))
        else:
            local += [ch + (v,) for v, _ in bad]
    return shifted, local


def report_shift_comparison(detected):
    known, found = set(KNOWN_SHIFTED), set(detected)
    fmt = lambda s: ", ".join("%s %d" % c for c in sorted(s)) or "none"
    if known == found:
        log("shift detection agrees with CORPUS.md's list (%d chapters)" % len(found))
    else:
        log("shift detection differs from CORPUS.md: only detected: %s; only listed: %s"
            % (fmt(found - known), fmt(known - found)))
    return known | found


# ---------------------------------------------------------------- pairs, filters, split

def word_ratio(en, es):
    return len(es.split()) / max(1, len(en.split()))


SUBSCRIPTION_RE = re.compile(r"<chapter eID[^>]*/>\s*<title>")


def strip_subscription(raw_en, es):
    """KJV ends 14 epistles with a subscription <title> ("Written to the Romans from
    Corinthus..."), dropped with the titles; RV1909 has it as plain text after the closing
    "Amén.", which is cut off here so that both sides say the same."""
    if not SUBSCRIPTION_RE.search(raw_en):
        return es
    cut = es.rfind("Amén.")
    return es[:cut + len("Amén.")] if cut >= 0 else es


def clean_all(raw_en, raw_es, keys):
    """-> {key: (en, es)} cleaned text of every key."""
    out = {}
    for k in keys:
        en = clean_verse(raw_en[k], "en", k)
        es = strip_subscription(raw_en[k], clean_verse(raw_es.get(k, ""), "es", k))
        out[k] = (en, es)
    return out


def local_misalignments(keys, text, flagged):
    """Verses next to a local versification difference: each Strong's-flagged verse and
    its neighbours, and the neighbours of a verse that RV1909 leaves empty (its content
    went into a neighbour)."""
    present, bad = set(keys), set()
    for k in keys:
        empty_es = text[k][0] and not text[k][1]  # dropped later as empty, neighbours here
        if k in flagged or empty_es:
            near = [k[:2] + (k[2] + d,) for d in (-1, 1)] + ([k] if k in flagged else [])
            bad.update(n for n in near if n in present)
    return bad


def build_pairs(raw_en, raw_es, stats):
    """Aligned, cleaned, filtered, de-duplicated [(key, en, es)] in Bible order."""
    keys = [k for k in raw_en if k[1] != 0 and k[2] != 0]
    stats["verses (KJV keys, chapter/verse 0 dropped)"] = len(keys)
    log("detecting shifted chapters with Strong's numbers")
    shifted, flagged = detect_shifts(raw_en, raw_es, keys)
    dropped_chapters = report_shift_comparison(shifted)
    keys = [k for k in keys if k[:2] not in dropped_chapters]
    stats["verses after dropping %d shifted chapters" % len(dropped_chapters)] = len(keys)
    text = clean_all(raw_en, raw_es, keys)
    local = local_misalignments(keys, text, set(flagged))
    keys = [k for k in keys if k not in local]
    stats["verses dropped around local misalignments"] = len(local)
    pairs, seen = [], set()
    n_empty = n_ratio = n_dup = 0
    for k in keys:
        en, es = text[k]
        if not en or not es:
            n_empty += 1
        elif not RATIO_MIN <= word_ratio(en, es) <= RATIO_MAX:
            n_ratio += 1
        elif (en, es) in seen:
            n_dup += 1
        else:
            seen.add((en, es))
            pairs.append((k, en, es))
    stats["empty verses dropped"] = n_empty
    stats["ratio es/en outside [%.2f, %.2f] dropped" % (RATIO_MIN, RATIO_MAX)] = n_ratio
    stats["duplicate pairs dropped"] = n_dup
    stats["pairs after cleaning"] = len(pairs)
    return pairs, sorted(dropped_chapters), sorted(local)


def split_of(book, chapter):
    """Stable split of a whole chapter from SHA-1("Book chapter")."""
    h = int(hashlib.sha1(("%s %d" % (book, chapter)).encode("utf-8")).hexdigest()[:8], 16)
    r = h % 1000
    return "test" if r < TEST_PER_MILLE else "dev" if r < TEST_PER_MILLE + DEV_PER_MILLE \
        else "train"


def split_pairs(pairs, stats):
    """-> {split: [(en, es)]}, train with every pair sharing a held-out side removed."""
    out = {s: [] for s in SPLITS}
    for key, en, es in pairs:
        out[split_of(key[0], key[1])].append((en, es))
    held_en = {en.lower() for s in ("dev", "test") for en, _ in out[s]}
    held_es = {es.lower() for s in ("dev", "test") for _, es in out[s]}
    before = len(out["train"])
    out["train"] = [(en, es) for en, es in out["train"]
                    if en.lower() not in held_en and es.lower() not in held_es]
    stats["train pairs dropped for sharing a side with dev/test"] = before - len(out["train"])
    for s in SPLITS:
        stats["%s pairs" % s] = len(out[s])
    return out


# ---------------------------------------------------------------- output

def stamp_path(out_dir):
    return os.path.join(out_dir, ".complete")


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def script_hash():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()


def is_complete(out_dir):
    """True when the stamp exists, was written by this very script, and every file has the
    line count it records."""
    try:
        with open(stamp_path(out_dir), encoding="utf-8") as f:
            stamp = json.load(f)
        if stamp.get("version") != VERSION or stamp.get("script") != script_hash():
            return False
        for s in SPLITS:
            for lang in LANGS:
                if count_lines(os.path.join(out_dir, "%s.%s" % (s, lang))) != stamp["counts"][s]:
                    return False
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False


OUTPUTS = ["%s.%s" % (s, lang) for s in SPLITS for lang in LANGS] + ["README.md", ".complete"]
TMP_RE = re.compile(r"^(?P<name>.+)\.tmp(?P<pid>\d+)$")


def write_atomic(path, text):
    """Writes path through path.tmpPID, renamed when complete; the temporary file is removed
    when the write fails or is interrupted (a full disk, Ctrl-C, SIGTERM)."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, someone else's (EPERM)
        pass
    return True


def remove_stale_temporaries(out_dir):
    """Removes OUTPUT.tmpPID files that a run killed outright (kill -9, a power cut) left in
    out_dir; those of a running build (its PID alive) stay."""
    for entry in os.listdir(out_dir):
        m = TMP_RE.match(entry)
        if m and m.group("name") in OUTPUTS and not pid_alive(int(m.group("pid"))):
            os.remove(os.path.join(out_dir, entry))
            log("removed %s, left by an interrupted build" % entry)


def readme_text(stats, dropped_chapters, local, seconds):
    lines = ["# Default corpus: English (KJV) -> Spanish (Reina-Valera 1909)", "",
             "Built by data/make_corpus.py (version %d) from the SWORD modules %s and %s"
             % (VERSION, MODULES["en"], MODULES["es"]),
             "(Debian packages %s; public domain, see /usr/share/doc/sword-text-*/copyright)."
             % ", ".join(PACKAGES), "",
             "One verse per line; line i of X.en translates to line i of X.es. The cleaning,",
             "alignment and split are described in the header of data/make_corpus.py.", "",
             "## Counts", ""]
    lines += ["- %s: %d" % (k, v) for k, v in stats.items()]
    lines += ["", "## Dropped chapters (versification shifts)", "",
              ", ".join("%s %d" % c for c in dropped_chapters), "",
              "Verses dropped around local misalignments: "
              + (", ".join("%s %d:%d" % k for k in local) or "none"), "",
              "Built in %.1f s." % seconds, ""]
    return "\n".join(lines)


def write_corpus(out_dir, splits, stats, dropped_chapters, local, seconds):
    os.makedirs(out_dir, exist_ok=True)
    remove_stale_temporaries(out_dir)
    try:
        os.remove(stamp_path(out_dir))  # the set is incomplete until the new stamp lands
    except FileNotFoundError:
        pass
    for s in SPLITS:
        for i, lang in enumerate(LANGS):
            text = "".join(pair[i] + "\n" for pair in splits[s])
            write_atomic(os.path.join(out_dir, "%s.%s" % (s, lang)), text)
    write_atomic(os.path.join(out_dir, "README.md"),
                 readme_text(stats, dropped_chapters, local, seconds))
    stamp = {"version": VERSION, "script": script_hash(), "counts": {s: len(splits[s]) for s in SPLITS}}
    write_atomic(stamp_path(out_dir), json.dumps(stamp) + "\n")


# ---------------------------------------------------------------- main

def parse_args():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(
        description="Build the default English->Spanish Bible corpus (KJV -> Reina-Valera "
                    "1909) into DIR/{train,dev,test}.{en,es}. Does nothing when DIR already "
                    "holds a complete corpus of this version.")
    p.add_argument("--out", metavar="DIR", default=os.path.join(here, "corpus", "default"),
                   help="output folder (default: %(default)s)")
    p.add_argument("--force", action="store_true", help="rebuild even when complete")
    return p.parse_args()


def main():
    args = parse_args()
    # SIGTERM ends the build as Ctrl-C does, through write_atomic's clean-up (its default action
    # would leave a temporary file behind)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if not args.force and is_complete(args.out):
        log("corpus already complete in %s (delete %s or pass --force to rebuild)"
            % (args.out, stamp_path(args.out)))
        return 0
    t0 = time.time()
    dumps = dump_modules()
    raw_en, raw_es = parse_dump(dumps["en"]), parse_dump(dumps["es"])
    stats = collections.OrderedDict()
    pairs, dropped_chapters, local = build_pairs(raw_en, raw_es, stats)
    splits = split_pairs(pairs, stats)
    write_corpus(args.out, splits, stats, dropped_chapters, local, time.time() - t0)
    for k, v in stats.items():
        log("  %-55s %6d" % (k, v))
    log("wrote %s: train %d, dev %d, test %d pairs in %.1f s"
        % (args.out, len(splits["train"]), len(splits["dev"]), len(splits["test"]),
           time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
