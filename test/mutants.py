#!/usr/bin/env python3
"""test/mutants.py -- do the tests see a wrong layer? Mutation testing over test/mutants.txt.

make test says every layer, the model and the decoder match PyTorch and float64; that claim is
only as good as the tests' power to fail. Each entry of test/mutants.txt is one plausible
mistake (a scale left out, a mask off by one, another label-smoothing convention, Adam without
bias correction, a GPU kernel forgetting a term). For each, this script edits a copy of the
tree, rebuilds it, and runs the suites the entry names (test/run_tests.sh, in order, until one
fails). The mutant is KILLED when a suite fails (or its build or run times out), SURVIVED when
every suite passes: then the tests cannot see that mistake, and the run exits 1.

  python3 test/mutants.py                  every mutant (make mutants; 35-45 minutes on 2 cores)
  python3 test/mutants.py --only a,b       the named ones
  python3 test/mutants.py --list           names and what each breaks
  python3 test/mutants.py --check          each edit still applies to the code as it is (make test)
  python3 test/mutants.py --sweep model/search.h:14-131 --suites "ops decode"
                                           every comparison, logical operator and +-1 of those lines
                                           flipped, one at a time (make mutants-sweep): a survivor is
                                           either equivalent (read it) or a mistake no test sees

The copy lives in --work (build/mutants/tree): the files git tracks or would track, copied when
they differ, so a second run rebuilds only what changed. Before the first mutant the named
suites run on the unmutated copy and must pass: a suite that fails anyway proves nothing.
"""
import argparse
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST = os.path.join(ROOT, "test", "mutants.txt")
FIELDS = ("file", "after", "find", "replace", "suites", "what")
REQUIRED = ("file", "find", "replace", "suites", "what")
# What the suites below need built in the copy (make targets; the programs land in its root).
# (A suite whose pieces are missing fails the baseline run, below, before any mutant.)
TARGETS = ["all", "build/test_core", "build/test_ops", "build/test_decode", "build/test_train", "build/test_cuda",
           "build/test_bleu", "build/test_tokenizer", "build/test_data", "build/test_sentences", "build/test_gemm_int8",
           "build/test_gemm", "build/test_gemm_bf16", "build/test_attention", "build/emu/libtransformer_cuda.so",
           "build/emu/libtransformer_nccl.so", "build/translate_nohttp",   # (suite serve_without_http)
           # the benchmarks' programs (suites bench_env, gpu_bench_emulated)
           "build/bench_train", "build/bench_decode", "build/bench_attention", "build/fp32_peak"]
SUITE_TIMEOUT = 900   # seconds; a mutant that hangs a suite this long (or 10 times its own time, at least 120 s) is killed by it


def parse(path):
    """The entries of test/mutants.txt, as dicts in file order (with their line numbers)."""
    entries, cur = [], None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            m = re.fullmatch(r"\[([a-z0-9-]+)\]", line)
            if m:
                cur = {"name": m.group(1), "line": n}
                entries.append(cur)
                continue
            key, sep, value = line.partition(": ")
            if cur is None or not sep or key not in FIELDS or key in cur:
                raise SystemExit(f"{path}:{n}: expected [name] or one of {', '.join(FIELDS)} (once each): {line!r}")
            cur[key] = value
    return entries


def known_suites():
    """The suite names test/run_tests.sh runs (its `run NAME ...` lines)."""
    with open(os.path.join(ROOT, "test", "run_tests.sh"), encoding="utf-8") as f:
        return set(re.findall(r"^\s*run ([a-z0-9_]+) ", f.read(), re.M))


def mutate(text, e):
    """text with entry e's edit made, or raise ValueError saying why it does not apply."""
    if "at" in e:   # a sweep's mutant: `find` stands at offset `at`
        if text[e["at"]:e["at"] + len(e["find"])] != e["find"]:
            raise ValueError(f"`find` is not at offset {e['at']}: {e['find']!r}")
        return text[:e["at"]] + e["replace"] + text[e["at"] + len(e["find"]):]
    start = 0
    if "after" in e:
        if text.count(e["after"]) != 1:
            raise ValueError(f"`after` found {text.count(e['after'])} times, not once: {e['after']!r}")
        start = text.index(e["after"]) + len(e["after"])
    elif text.count(e["find"]) != 1:
        raise ValueError(f"`find` found {text.count(e['find'])} times, not once (add `after`): {e['find']!r}")
    at = text.find(e["find"], start)
    if at < 0:
        raise ValueError(f"`find` not found after `after`: {e['find']!r}")
    return text[:at] + e["replace"] + text[at + len(e["find"]):]


def check(entries, root):
    """Problems with the entries against the tree at root (empty: every edit applies)."""
    problems, names, suites = [], set(), known_suites()
    for e in entries:
        where = f"mutants.txt:{e['line']} [{e['name']}]"
        missing = [k for k in REQUIRED if k not in e]
        if missing:
            problems.append(f"{where}: missing {', '.join(missing)}")
            continue
        if e["name"] in names:
            problems.append(f"{where}: the name is used twice")
        names.add(e["name"])
        if e["find"] == e["replace"]:
            problems.append(f"{where}: `replace` is `find`: no edit")
        unknown = [s for s in e["suites"].split() if s not in suites]
        if unknown or not e["suites"].split():
            problems.append(f"{where}: suites not in test/run_tests.sh: {e['suites']!r}")
        path = os.path.join(root, e["file"])
        if not os.path.isfile(path):
            problems.append(f"{where}: no file {e['file']}")
            continue
        with open(path, encoding="utf-8") as f:
            try:
                mutate(f.read(), e)
            except ValueError as err:
                problems.append(f"{where}: {e['file']}: {err}")
    return problems


# --sweep: the operator flips tried on each line, as (pattern, replacement); the code style puts
# spaces around binary operators, so " < " is a comparison and never a template's bracket.
FLIPS = [(r" < ", " <= "), (r" <= ", " < "), (r" > ", " >= "), (r" >= ", " > "), (r" == ", " != "),
         (r" != ", " == "), (r" && ", " || "), (r" \|\| ", " && "), (r" \+ 1(?![\w.])", " + 0"),
         (r" - 1(?![\w.])", " - 0"), (r"!\(", "(")]
SWEEP_SUFFIXES = (".c", ".cc", ".cpp", ".cu", ".h", ".hpp")


def code_only(line):
    """line with its string and character literals and its comments blanked (the same length)."""
    out, i, quote = list(line), 0, None
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                out[i] = " "
                if i + 1 < len(line):
                    out[i + 1] = " "
                i += 2
                continue
            if c == quote:
                quote = None
            else:
                out[i] = " "
        elif c in "\"'":
            quote = c
        elif line.startswith("//", i):
            return "".join(out[:i]) + " " * (len(line) - i)
        elif line.startswith("/*", i):
            end = line.find("*/", i + 2)
            end = len(line) if end < 0 else end + 2
            out[i:end] = " " * (end - i)
            i = end
            continue
        i += 1
    return "".join(out)


def sweep_entries(spec, suites, root):
    """Mutants (entries as parse() gives) flipping each operator of FLIPS on lines FIRST-LAST of
    FILE (spec "FILE:FIRST-LAST"), outside literals, comments and preprocessor lines."""
    m = re.fullmatch(r"(.+):(\d+)-(\d+)", spec)
    if not m:
        raise ValueError(f"--sweep takes FILE:FIRST-LAST, not {spec!r}")
    rel, first, last = m.group(1), int(m.group(2)), int(m.group(3))
    if not rel.endswith(SWEEP_SUFFIXES):
        raise ValueError(f"the flips are C, C++ and CUDA operators; {rel} is none of {' '.join(SWEEP_SUFFIXES)}")
    path = os.path.join(root, rel)
    if not os.path.isfile(path):
        raise ValueError(f"no file {rel}")
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if not 1 <= first <= last <= len(lines):
        raise ValueError(f"lines {first}-{last} are not within {rel}'s 1-{len(lines)}")
    entries, offset = [], sum(len(l) + 1 for l in lines[:first - 1])
    for n in range(first, last + 1):
        line = lines[n - 1]
        code = code_only(line)   # (the tree has no comment of several lines: /* */ stay within one)
        for pattern, replace in FLIPS if not code.lstrip().startswith("#") else ():
            for hit in re.finditer(pattern, code):
                find = hit.group(0)
                entries.append({"name": f"{rel}:{n}:{hit.start() + 1}", "file": rel, "at": offset + hit.start(),
                                "find": find, "replace": replace, "suites": suites, "line": n,
                                "what": f"{find.strip()} -> {replace.strip()}: "
                                        f"{(line[:hit.start()] + replace + line[hit.end():]).strip()}"})
        offset += len(line) + 1
    return entries


SELF_CHECKS = 4


def self_check(entries):
    """check() must find an edit that no longer applies and a suite that does not exist; --sweep
    must flip the operators of code and none in a literal, a comment or a preprocessor line."""
    first = dict(entries[0])
    gone = dict(first, find=first["find"] + " /* not in the file */")
    unknown = dict(first, suites="no_such_suite")
    twice = dict(first, after="(")   # an anchor found many times
    problems = []
    for what, e in (("a `find` not in the file", gone), ("an unknown suite", unknown), ("an ambiguous `after`", twice)):
        if not check([e], ROOT):
            problems.append(f"self-check: check() passed an entry with {what}")
    text = ('int f(int a) {\n    return a + 1 < 2 && !(a == 3) ? 1 : g("a < b", \'<\');  // a > b\n}\n'
            '#if X > 1\n/* c != d */ int h = 1 + 10 - 1;\n')
    want = ["+ 1 -> + 0", "< -> <=", "&& -> ||", "!( -> (", "== -> !=", "- 1 -> - 0"]
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "f.cpp"), "w", encoding="utf-8") as f:
            f.write(text)
        swept = sweep_entries("f.cpp:1-5", "decode", d)
    got = [e["what"].split(":")[0] for e in swept]
    applied = [mutate(text, e) for e in swept]
    if sorted(got) != sorted(want) or any(t.count("\n") != text.count("\n") or t == text for t in applied):
        problems.append(f"self-check: --sweep flipped {got}, not {want}")
    return problems


def tracked_files():
    """The files git tracks here and the untracked ones it does not ignore (as the working tree has them)."""
    r = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f"error: make mutants copies the files git lists, and git ls-files failed in {ROOT}: "
                         f"{r.stderr.decode(errors='replace').strip()}")
    out = r.stdout.decode()
    return [p for p in out.split("\0") if p and os.path.isfile(os.path.join(ROOT, p))]


def sync(tree):
    """Copies the working tree's files into `tree` where they differ; returns how many were copied."""
    copied = 0
    for rel in tracked_files():
        src, dst = os.path.join(ROOT, rel), os.path.join(tree, rel)
        with open(src, "rb") as f:
            data = f.read()
        if os.path.isfile(dst):
            with open(dst, "rb") as f:
                if f.read() == data:
                    continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        # written now, not with the source's time (copy2): a mutant restored in the copy after the
        # source changed left objects newer than that time, and make would keep them
        shutil.copy(src, dst)
        copied += 1
    return copied


def limit_memory():
    """Each process of a suite gets at most half the machine's memory (address space): a mutant
    that allocates without end (a loop that never advances, pushing) fails there, instead of
    filling the machine before its timeout. The baseline run shows the suites fit."""
    half = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    resource.setrlimit(resource.RLIMIT_AS, (half, half))


def run_group(cmd, cwd, timeout, env=None):
    """subprocess.run(cmd) in a process group of its own, all of which a timeout kills: a mutant's
    test binary in an endless loop, or a server a test started, had outlived the killed shell and
    kept a core busy (or filled memory) through the rest of the run."""
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          errors="replace", start_new_session=True, preexec_fn=limit_memory) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def build(tree, jobs, targets=TARGETS):
    """(ok, seconds, output tail) of making `targets` in the copy."""
    t0 = time.time()
    try:
        r = run_group(["make", f"-j{jobs}", *targets], tree, SUITE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return False, time.time() - t0, "the build timed out"
    return r.returncode == 0, time.time() - t0, (r.stdout + r.stderr)[-2000:]


def run_suite(tree, suite, timeout=SUITE_TIMEOUT):
    """(failed checks, first FAIL line or reason, seconds) of one suite of test/run_tests.sh in the copy."""
    t0 = time.time()
    env = dict(os.environ, SUITES=suite)
    # the shared sacreBLEU cases sit beside the repository (../shared/bleu), not beside the copy
    env.setdefault("BLEU_CASES_DIR", os.path.join(os.path.dirname(ROOT), "shared", "bleu"))
    try:
        r = run_group(["sh", "test/run_tests.sh", "build", "."], tree, timeout, env)
    except subprocess.TimeoutExpired:
        return 1, f"timed out after {timeout:.0f} s", time.time() - t0
    out = r.stdout + r.stderr
    m = re.search(r"^tests: (\d+) passed, (\d+) failed", out, re.M)
    failed = int(m.group(2)) if m else 1
    if r.returncode != 0 and failed == 0:
        failed = 1
    fail_lines = [l.strip() for l in out.splitlines() if re.match(r"\s*FAIL", l)]
    first = fail_lines[0] if fail_lines else ("no closing line" if not m else "")
    return failed, first[:160], time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only check that every edit applies (no build)")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("--only", default="", help="comma-separated names to run (default: all)")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "mutants"), help="folder for the copy")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="make -j")
    ap.add_argument("--sweep", default="", metavar="FILE:FIRST-LAST",
                    help="instead of mutants.txt: flip each operator of these lines, one mutant each")
    ap.add_argument("--suites", default="", help="--sweep: the suites each mutant runs, in order")
    ap.add_argument("--targets", default="", help="make targets built in the copy (default: all the suites need)")
    a = ap.parse_args()

    if a.sweep:
        if not a.suites.split() or [s for s in a.suites.split() if s not in known_suites()]:
            print(f"error: --sweep needs --suites, names of test/run_tests.sh's suites (got {a.suites!r})",
                  file=sys.stderr)
            return 2
        try:
            entries = sweep_entries(a.sweep, a.suites, ROOT)
        except ValueError as err:
            print("error: --sweep:", err, file=sys.stderr)
            return 2
        print(f"# sweep: {len(entries)} mutants of {a.sweep}", flush=True)
        problems = []
    else:
        entries = parse(LIST)
        problems = check(entries, ROOT)
    if a.check:
        problems += self_check(entries)
        for p in problems:
            print("FAIL", p)
        total = len(entries) + SELF_CHECKS
        print(f"checked {len(entries)} mutants of test/mutants.txt (each edit applies once, each suite exists), "
              f"{SELF_CHECKS - 1} broken entries that the check must refuse and --sweep's flips of a sample")
        print(f"mutants_list: {total - len(problems)} passed, {len(problems)} failed")
        return 1 if problems else 0
    if problems:
        for p in problems:
            print("error:", p, file=sys.stderr)
        return 2
    if a.list:
        for e in entries:
            print(f"{e['name']:42} {e['file']:22} {e['suites']:36} {e['what']}")
        return 0
    if a.only:
        wanted = a.only.split(",")
        unknown = [w for w in wanted if w not in {e["name"] for e in entries}]
        if unknown:
            print("error: no mutant named", ", ".join(unknown), "(see --list)", file=sys.stderr)
            return 2
        entries = [e for e in entries if e["name"] in wanted]

    tree = os.path.join(a.work, "tree")
    os.makedirs(tree, exist_ok=True)
    print(f"# copy: {tree} ({sync(tree)} files copied)", flush=True)
    targets = a.targets.split() or TARGETS
    ok, secs, tail = build(tree, a.jobs, targets)
    if not ok:
        print(tail, "\nerror: the unmutated copy does not build", file=sys.stderr)
        return 2
    print(f"# built in {secs:.0f} s", flush=True)
    baseline, limit = [], {}
    for s in dict.fromkeys(x for e in entries for x in e["suites"].split()):
        failed, first, secs = run_suite(tree, s)
        print(f"# baseline {s}: {'passes' if failed == 0 else 'FAILS: ' + first} ({secs:.0f} s)", flush=True)
        if failed:
            baseline.append(s)
        # a mutant that makes a suite 10 times slower has broken it (a flipped loop bound may never end)
        limit[s] = min(SUITE_TIMEOUT, max(120, 10 * secs))
    if baseline:
        print(f"error: without a mutant these suites fail already: {' '.join(baseline)}", file=sys.stderr)
        return 2

    killed, survived, broken = [], [], []
    for e in entries:
        path = os.path.join(tree, e["file"])
        with open(path, encoding="utf-8") as f:
            original = f.read()
        t0 = time.time()
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(mutate(original, e))
            ok, _, tail = build(tree, a.jobs, targets)
            if not ok:
                broken.append(e["name"])
                print(f"BROKEN   {e['name']}: the mutant does not build\n{tail}", flush=True)
                continue
            verdict = None
            for s in e["suites"].split():
                failed, first, _ = run_suite(tree, s, limit[s])
                if failed:
                    verdict = (s, failed, first)
                    break
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original)
        secs = time.time() - t0
        if verdict:
            killed.append(e["name"])
            s, failed, first = verdict
            print(f"KILLED   {e['name']} by {s} ({failed} failed; {secs:.0f} s): {first}", flush=True)
        else:
            survived.append(e["name"])
            print(f"SURVIVED {e['name']}: {e['suites']} all pass ({secs:.0f} s) -- {e['what']}", flush=True)
    print(f"mutants: {len(killed)} killed, {len(survived)} survived, {len(broken)} did not build")
    if survived and a.sweep:   # a flip may change nothing (a guard's twin, a tie that cannot occur)
        print("survived (each either changes nothing the program does, or is a mistake no test sees: "
              "read each; a real one gets a test and an entry in test/mutants.txt):", " ".join(survived))
        return 0
    if survived:
        print("survived (the tests cannot see these mistakes):", " ".join(survived))
    return 1 if survived or broken else 0


if __name__ == "__main__":
    sys.exit(main())
