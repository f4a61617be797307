"""test/checks.py — the Python tests' check lines and closing count, as test/check.sh is the
shell tests': `check(ok, what)` prints "PASS what" or "FAIL what" and counts it;
`summary(name, skipped)` prints "name: N passed, M failed[, K skipped]" and returns the exit
status (1 on a failure). A script run as `python3 test/x.py` imports it from its own folder.
"""
passed = 0
failed = 0


def check(ok, what):
    global passed, failed
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if ok:
        passed += 1
    else:
        failed += 1
    return ok


def summary(name, skipped=0):
    print(f"{name}: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""), flush=True)
    return 1 if failed else 0
