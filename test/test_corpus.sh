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

check_summary corpus
