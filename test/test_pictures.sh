#!/bin/sh
# test/test_pictures.sh — the pictures and alignments (toolkit/attention_view.h,
# toolkit/curves.h): build/test_attention (alignment on constructed attention, model_attention
# against the decoder, escaping) writes a picture with the probabilities it drew; then, as a
# user runs them, ./train on a toy corpus (curves.svg at each evaluation, at the end and after
# --resume) and ./translate --attention / --alignment (greedy and beam, pieces and words, a
# line with < & quotes, an empty line, n-best). Every SVG is parsed as XML and rendered with
# rsvg-convert (test/check_svg.py). Run from the repository root after `make`:
#   sh test/test_pictures.sh BUILD_DIR PROGRAM_DIR
# Ends with "pictures: N passed, M failed"; exits non-zero on failure.
set -u
BUILD=${1:-build}
B=${2:-.}
. test/check.sh
T=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT

# Runs a command that ends with "NAME: N passed, M failed" and adds its counts to ours.
absorb() {
    "$@" > "$T/sub.log" 2>&1
    status=$?
    cat "$T/sub.log"
    line=$(grep -E '^[a-z_]+: [0-9]+ passed, [0-9]+ failed' "$T/sub.log" | tail -n 1)
    if [ -z "$line" ]; then check 1 "$* printed no closing line (exit $status)"; return; fi
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\1/')
    f=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\2/')
    [ "$status" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    passed=$((passed + p))
    failed=$((failed + f))
}

if ! command -v rsvg-convert > /dev/null || ! command -v python3 > /dev/null; then
    skip "every rendering check: rsvg-convert (Debian's librsvg2-bin) or python3 missing"
    absorb "$BUILD/test_attention"
    check_summary pictures
    exit $?
fi
SVG="python3 test/check_svg.py"

mkdir -p "$T/unit"
absorb "$BUILD/test_attention" "$T/unit"
absorb $SVG render "$T/unit/pieces.svg" "$T/unit/words.svg" "$T/unit/curves.svg"
absorb $SVG heatmaps "$T/unit/pieces.svg" "$T/unit/maps.json"
absorb $SVG lines "$T/unit/pieces.svg" 0   # a model of 3 encoder and 2 decoder layers: each kind's last
absorb $SVG heatmaps "$T/unit/words.svg"
absorb $SVG words "$T/unit/words.svg"
absorb $SVG curves "$T/unit/curves.svg" "$T/unit/log.csv"
absorb $SVG render "$T/unit/curves_hours.svg"
absorb $SVG curves "$T/unit/curves_hours.svg" "$T/unit/log_hours.csv"
absorb $SVG curves "$T/unit/curves_flat.svg" "$T/unit/log_flat.csv"
for l in _steps_first _elapsed_first _three_hours _step0 _empty _million; do
    absorb $SVG render "$T/unit/curves$l.svg"
    absorb $SVG curves "$T/unit/curves$l.svg" "$T/unit/log$l.csv"
done

# A toy corpus (as test_cli.sh's): Spanish-like suffixes on reversed words.
mkdir -p "$T/corpus"
awk 'BEGIN { srand(5); split("sun moon star sky sea land tree rock fire rain", w, " ");
  for (i = 0; i < 600; i++) { n = 2 + int(rand() * 5); en = ""; es = "";
    for (j = 0; j < n; j++) { x = w[1 + int(rand() * 10)]; en = en (j ? " " : "") x; es = x "o" (j ? " " : "") es }
    f = i < 20 ? "test" : i < 40 ? "dev" : "train";
    print en > "'"$T"'/corpus/" f ".en"; print es > "'"$T"'/corpus/" f ".es" } }'
train() {
    "$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 300 --data "$T/corpus" --out "$T/run" \
        --max-tokens 400 --save-every-steps 10 --warmup 20 --log-every 0.01s --eval-every 10 "$@" > "$T/train.log" 2>&1
}
train --max-steps 30
check $? "./train runs 30 steps"
[ -f "$T/run/curves.svg" ]; check $? "./train writes curves.svg in --out"
absorb $SVG render "$T/run/curves.svg"
absorb $SVG curves "$T/run/curves.svg" "$T/run/log.csv"
rows1=$(($(wc -l < "$T/run/log.csv") - 1))
train --max-steps 40 --resume
check $? "./train --resume runs to step 40"
rows2=$(($(wc -l < "$T/run/log.csv") - 1))
[ "$rows2" -gt "$rows1" ]; check $? "the resumed run appends to log.csv ($rows1 -> $rows2 rows)"
absorb $SVG curves "$T/run/curves.svg" "$T/run/log.csv"
rm "$T/run/curves.svg"
"$B"/train --out "$T/run" --redraw-curves; check $? "./train --redraw-curves redraws curves.svg from log.csv"
absorb $SVG curves "$T/run/curves.svg" "$T/run/log.csv"
# curves.svg is written as every output is (toolkit/files.h): a link is followed, not replaced.
mv "$T/run/curves.svg" "$T/kept.svg" && ln -s "$T/kept.svg" "$T/run/curves.svg" && : > "$T/kept.svg"
"$B"/train --out "$T/run" --redraw-curves > /dev/null
s=$?; [ $s -eq 0 ] && [ -L "$T/run/curves.svg" ] && [ -s "$T/kept.svg" ]
check $? "--redraw-curves through a link to curves.svg: the link stays, the file it names is redrawn (exit $s)"
"$B"/train --out "$T/missing" --redraw-curves 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "cannot read" "$T/err.txt"; check $? "--redraw-curves without a log.csv: error, exit 1 ($s)"

M="$T/run/average.safetensors"
printf 'sun moon star\n\nrock < fire & "sea"\nsky\n' > "$T/in.txt"
for beam in 1 4; do
    rm -rf "$T/att"
    "$B"/translate --model "$M" --beam $beam --attention "$T/att" --alignment < "$T/in.txt" > "$T/out.txt" 2> "$T/err.txt"
    check $? "./translate --beam $beam --attention DIR --alignment exits 0"
    n=$(ls "$T/att" | wc -l); [ "$n" -eq 4 ] && [ -f "$T/att/000001.svg" ] && [ -f "$T/att/000004.svg" ]
    check $? "--beam $beam: one SVG per input line, 000001.svg .. 000004.svg ($n files)"
    absorb $SVG render "$T/att/000001.svg" "$T/att/000002.svg" "$T/att/000003.svg"
    absorb $SVG heatmaps "$T/att/000003.svg"
    absorb $SVG lines "$T/att/000003.svg" 0
    absorb $SVG alignment "$T/in.txt" "$T/out.txt"
    "$B"/translate --model "$M" --beam $beam < "$T/in.txt" > "$T/plain.txt"
    sed 's/ ||| [0-9 -]*$//' "$T/out.txt" | cmp -s - "$T/plain.txt"
    check $? "--beam $beam: the translations are those of a run without --alignment"
done
python3 -c "
import sys, xml.etree.ElementTree as ET
g = [e for e in ET.parse('$T/att/000003.svg').getroot().iter('{http://www.w3.org/2000/svg}g') if e.get('data-source') is not None][0]
sys.exit(g.get('data-source') != 'rock < fire & \"sea\"')"
check $? "a line with < & quotes: its picture holds the line as it was (parsed back from the XML)"
"$B"/translate --model "$M" --attention "$T/words" --attention-words --attention-layer 1 < "$T/in.txt" > /dev/null
check $? "--attention-words --attention-layer 1 exits 0"
absorb $SVG render "$T/words/000003.svg"
absorb $SVG heatmaps "$T/words/000003.svg"
absorb $SVG words "$T/words/000003.svg"
absorb $SVG lines "$T/words/000003.svg" 1
"$B"/translate --model "$M" --nbest 2 --alignment < "$T/in.txt" > "$T/nbest.txt"; s=$?
[ $s -eq 0 ] && awk -F ' \\|\\|\\| ' 'NF != 5 { bad = 1 } END { exit bad || NR == 0 }' "$T/nbest.txt"
check $? "--nbest 2 --alignment: every line 'LINE ||| text ||| score ||| logprob ||| pairs' (exit $s, $(wc -l < "$T/nbest.txt") lines)"
# --nbest with --attention: one picture per input line, numbered from 1, of its best hypothesis
# (the first n-best line; flips drew the last hypothesis, or numbered the pictures from 0)
rm -rf "$T/att"
"$B"/translate --model "$M" --beam 4 --nbest 3 --attention "$T/att" < "$T/in.txt" > "$T/nbest3.txt"; s=$?
python3 -c "
import os, sys, xml.etree.ElementTree as ET
best = {}
for l in open('$T/nbest3.txt', encoding='utf-8'):
    f = l.rstrip('\n').split(' ||| ')
    best.setdefault(int(f[0]), f[1])
names = sorted(os.listdir('$T/att'))
want = ['%06d.svg' % (i + 1) for i in range(4)]
drawn = []
for i, name in enumerate(want):
    if name not in names:
        sys.exit('no ' + name + ' among ' + ' '.join(names))
    g = [e for e in ET.parse('$T/att/' + name).getroot().iter('{http://www.w3.org/2000/svg}g') if e.get('data-translation') is not None][0]
    drawn.append(g.get('data-translation'))
print('  pictures:', names, 'of', drawn)
sys.exit(names != want or drawn != [best[i] for i in range(4)])"
check $? "--beam 4 --nbest 3 --attention: 000001.svg .. 000004.svg, each of its line's best hypothesis (exit $s)"
# a translation holding a line break (here a prefix's '\r'; a model's byte pieces, row 63) is
# printed with a space there: --alignment counts its words as printed, one pair per word (the
# '\r' had joined the two words into one: 'luno solo ||| 0-0', every later index one short)
printf 'sun moon ||| luno\rsol\n' | "$B"/translate --model "$M" --prefix-inline --alignment > "$T/break.txt"; s=$?
awk -F ' \\|\\|\\| ' '{ w = split($1, x, " "); n = split($2, y, " "); sub(/.*-/, "", y[n]) }
    END { exit !(NR == 1 && w >= 2 && n == w && y[n] == w - 1) }' "$T/break.txt"
check $? "--alignment of a translation with a carriage return (printed as a space): a pair for each of its words (exit $s): $(cat "$T/break.txt")"
# --alignment's default layer is the decoder's last (2 in --config tiny): the same pairs as
# --alignment-layer 2 on the 20 test lines, where layer 1 (the check's control) gives others.
for layer in "" 1 2; do
    "$B"/translate --model "$M" --alignment ${layer:+--alignment-layer $layer} < "$T/corpus/test.en" > "$T/align$layer.txt"
done
differ=$(paste -d '\n' "$T/align.txt" "$T/align1.txt" | awk 'NR % 2 { a = $0; next } a != $0 { n++ } END { print n + 0 }')
[ "$(wc -l < "$T/align.txt")" -eq 20 ] && cmp -s "$T/align.txt" "$T/align2.txt" && [ "$differ" -gt 0 ]
check $? "--alignment reads the last decoder layer by default: = --alignment-layer 2 on 20 lines; layer 1 differs on $differ"
echo sun | "$B"/translate --model "$M" --attention "$T/layer3" --attention-layer 3 > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q -- "--attention-layer 3" "$T/err.txt"; check $? "--attention-layer beyond the model's layers: error naming it, exit 1 ($s)"
echo sun | "$B"/translate --model "$M" --alignment --alignment-layer 3 > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q -- "--alignment-layer 3" "$T/err.txt"; check $? "--alignment-layer beyond the decoder's layers: error naming it, exit 1 ($s)"
# the options that shape --attention's pictures and --alignment's pairs without them: refused (they
# had been ignored silently, the run printing plain translations)
for c in "--attention-words|add --attention" "--attention-layer 1|add --attention" "--alignment --attention-layer 1|add --attention" \
         "--alignment-layer 1|add --alignment"; do
    echo sun | "$B"/translate --model "$M" ${c%%|*} > "$T/out.txt" 2> "$T/err.txt"
    s=$?; [ $s -eq 2 ] && grep -q -- "${c#*|}" "$T/err.txt" && [ ! -s "$T/out.txt" ]
    check $? "translate ${c%%|*}: refused, exit 2 ($s): $(head -c 100 "$T/err.txt")"
done
echo sun | "$B"/translate --model "$M" --alignment --split-long > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 2 ]; check $? "--alignment with --split-long is refused (exit 2, $s)"
echo sun | "$B"/translate --model "$M" --attention /dev/null/x > /dev/null 2> "$T/err.txt"
s=$?; [ $s -eq 1 ] && grep -q "attention" "$T/err.txt"; check $? "--attention into an impossible folder: error, exit 1 ($s)"
check_summary pictures
