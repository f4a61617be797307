#!/bin/sh
# test/test_corpus.sh — builds the default corpus (data/make_corpus.py; installs the SWORD
# packages when missing) and checks it: sizes, aligned line counts, no empty lines, no
# dev/test sentence in train, no markup left, valid UTF-8.
#
# Run from the repository root:  sh test/test_corpus.sh [CORPUS_DIR]
# (default CORPUS_DIR: data/corpus/default). Prints PASS/FAIL per check and ends with
# "corpus: N passed, M failed"; exits non-zero when a check fails.
set -u
DIR=${1:-data/corpus/default}
PY=${PYTHON:-python3}
. test/check.sh


in_range() {  # in_range N LO HI -> exit status 0 when LO <= N <= HI
    [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]
}

lines() { wc -l < "$1" | tr -d ' '; }

"$PY" data/make_corpus.py --out "$DIR"
check $? "make_corpus.py exits 0"

# Expected pairs per split (CORPUS.md: about 27,200 / 1,900 / 1,460; our hash split gives
# 27,536 / 1,464 / 1,581): generous ranges that still catch a broken pipeline.
for spec in "train 25000 30000" "dev 1100 2300" "test 1100 2300"; do
    set -- $spec
    split=$1; lo=$2; hi=$3
    for lang in en es; do
        [ -f "$DIR/$split.$lang" ]
        check $? "$split.$lang exists"
    done
    n_en=$(lines "$DIR/$split.en" 2>/dev/null || echo -1)
    n_es=$(lines "$DIR/$split.es" 2>/dev/null || echo -2)
    [ "$n_en" -eq "$n_es" ]
    check $? "$split: equal line counts (en $n_en, es $n_es)"
    in_range "$n_en" "$lo" "$hi"
    check $? "$split: $n_en pairs in [$lo, $hi]"
    for lang in en es; do
        f="$DIR/$split.$lang"
        n=$(grep -c -e '^[[:space:]]*$' "$f")
        [ "$n" -eq 0 ]
        check $? "$split.$lang: $n empty lines"
        n=$(grep -c -F -e '<' -e '>' -e '¶' "$f")
        [ "$n" -eq 0 ]
        check $? "$split.$lang: $n lines with markup (<, >, U+00B6)"
        iconv -f UTF-8 -t UTF-8 "$f" > /dev/null 2>&1
        check $? "$split.$lang: valid UTF-8"
        n=$(( $(wc -c < "$f") - $(tr -d '\000' < "$f" | wc -c) ))
        [ "$n" -eq 0 ]
        check $? "$split.$lang: $n NUL bytes"
    done
done

# Leakage: no held-out sentence appears verbatim in train (either language).
for held in dev test; do
    for lang in en es; do
        n=$(grep -cFxf "$DIR/$held.$lang" "$DIR/train.$lang")
        [ "$n" -eq 0 ]
        check $? "grep -cFxf $held.$lang train.$lang prints $n (want 0)"
    done
done

# Idempotence: a second run finds the stamp and does nothing.
out=$("$PY" data/make_corpus.py --out "$DIR")
echo "$out" | grep -q "already complete"
check $? "second run does nothing ('$out')"

# Temporary files (X.tmpPID, renamed when complete) never stay behind: a write that fails
# half-way (a character that cannot be encoded, as a full disk would fail it) removes its own;
# so does a build ended by SIGTERM in the middle of a write (sent as the file is opened); one
# that a build killed outright left (the PID of a process now gone) goes at the next build,
# while a file of that shape that is not one of the corpus's stays.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$PY" -c "import sys; sys.path.insert(0, 'data'); import make_corpus as m
m.write_atomic(sys.argv[1], 'sun\n\udc80\n')" "$T/train.en" 2> /dev/null
s=$?
left=$(ls -A "$T")
[ $s -ne 0 ] && [ -z "$left" ]
check $? "write_atomic failing half-way: exit $s (want non-zero), left behind: '$left' (want nothing)"
mkdir "$T/term"
"$PY" -c "import builtins, os, signal, sys; sys.path.insert(0, 'data'); import make_corpus as m
def open_then_term(*a, **k):
    f = builtins.open(*a, **k)
    if '.tmp' in a[0]: os.kill(os.getpid(), signal.SIGTERM)
    return f
m.open = open_then_term
sys.argv[1:] = ['--out', sys.argv[1]]
m.main()" "$T/term" > /dev/null 2>&1
s=$?
left=$(ls -A "$T/term")
[ $s -eq 143 ] && [ -z "$left" ]
check $? "a build ended by SIGTERM as it opens its first file: exit $s (want 143), left behind: '$left' (want nothing)"
sh -c 'exit 0' & dead=$!; wait $dead
mkdir "$T/stale"; echo half > "$T/stale/train.en.tmp$dead"; echo mine > "$T/stale/notes.tmp$dead"
"$PY" data/make_corpus.py --out "$T/stale" > "$T/log" 2>&1
s=$?
left=$(cd "$T/stale" && ls -A | grep '\.tmp' | tr '\n' ' ')
[ $s -eq 0 ] && [ "$left" = "notes.tmp$dead " ] && [ -f "$T/stale/.complete" ] && grep -q "removed train.en.tmp$dead" "$T/log"
check $? "a build over train.en.tmp$dead left by a killed one: exit $s, .tmp files after it: '$left' (want only notes.tmp$dead, not the corpus's), said"

check_summary corpus
