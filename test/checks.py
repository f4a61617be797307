"""test/checks.py — the Python tests' check lines and closing count, as test/check.sh is the
shell tests': `check(ok, what)` prints "PASS what" or "FAIL what" and counts it;
`skip(why)` prints "SKIP why" and counts it apart (never a pass), as check.sh's skip does;
`summary(name, skipped)` prints "name: N passed, M failed[, K skipped]" (K: skip()'s count plus
`skipped`) and returns the exit status (1 on a failure). test/run_tests.sh fails a suite that
prints more SKIP lines than its closing line counts. `python3 test/checks.py` checks these
counts themselves (suite checks). A script run as `python3 test/x.py` imports it from its own folder.
For the tests against sacreBLEU: `skip_without_sacrebleu(name, error)`, `write(name, lines)` into a
scratch folder, `read_lines(path)`, `bleu_cases_dir()`.
"""
import os
import sys
import tempfile

passed = 0
failed = 0
skipped_here = 0   # skip()'s count


def check(ok, what):
    global passed, failed
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if ok:
        passed += 1
    else:
        failed += 1
    return ok


def skip(why):
    """A check that cannot run here: prints "SKIP why" and counts it for summary()."""
    global skipped_here
    print(f"SKIP {why}", flush=True)
    skipped_here += 1


def summary(name, skipped=0):
    skipped += skipped_here
    print(f"{name}: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""), flush=True)
    return 1 if failed else 0


def skip_without_sacrebleu(name, error):
    """An import of sacreBLEU (or of what it brings) failed with `error`: under REQUIRE_SACREBLEU=1 (CI)
    a failure, else SKIP saying why. Exits either way."""
    if os.environ.get("REQUIRE_SACREBLEU") == "1":
        check(False, f"sacrebleu is importable (REQUIRE_SACREBLEU=1): {error}")
        sys.exit(summary(name))
    print(f"SKIP test_{name}: {error} (pip install sacrebleu)")
    sys.exit(summary(name, skipped=1))


_scratch = None       # a TemporaryDirectory, removed at exit
_scratch_owner = None  # the process that made it


def scratch_folder():
    """The scratch folder write() writes in: a worker process forked after it was made (a test's
    multiprocessing pool) gets a folder of its own inside it, so that two workers' files of one name
    do not collide (and the parent's exit removes them all)."""
    global _scratch, _scratch_owner
    if _scratch is None:
        _scratch, _scratch_owner = tempfile.TemporaryDirectory(), os.getpid()
    if os.getpid() == _scratch_owner:
        return _scratch.name
    folder = os.path.join(_scratch.name, f"worker-{os.getpid()}")
    os.makedirs(folder, exist_ok=True)
    return folder


def write(name, lines):
    """The lines, each ended by "\n", as UTF-8 file `name` in a scratch folder (lone surrogates kept as
    their bytes); returns its path."""
    path = os.path.join(scratch_folder(), name)
    with open(path, "w", encoding="utf-8", newline="\n", errors="surrogatepass") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def read_lines(path, rstrip=False):
    """A UTF-8 file's lines without their "\n" (and rstripped, as sacreBLEU's CLI reads them, with rstrip)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")[:-1]
    return [line.rstrip() for line in lines] if rstrip else lines


def bleu_cases_dir():
    """../shared/bleu's BLEU cases, or $BLEU_CASES_DIR."""
    return os.environ.get("BLEU_CASES_DIR", os.path.join("..", "shared", "bleu"))


if __name__ == "__main__":   # suite checks: the counts above, in a child Python (its own counters)
    import subprocess
    child = ("import sys; sys.path.insert(0, sys.argv[1]); from checks import check, skip, summary; "
             "check(True, 'a'); skip('b'); skip('c'); check(False, 'd'); sys.exit(summary('t', 1))")
    r = subprocess.run([sys.executable, "-c", child, os.path.dirname(os.path.abspath(__file__))],
                       capture_output=True, text=True)
    want = "PASS a\nSKIP b\nSKIP c\nFAIL d\nt: 1 passed, 1 failed, 3 skipped\n"
    check(r.stdout == want and r.returncode == 1,
          f"check, skip and summary: one pass, two skips, one failure and 1 skipped given: {r.stdout!r} "
          f"(want {want!r}), exit {r.returncode} (want 1)")
    sys.exit(summary("checks"))
