# bench/reported.sh — sourced by the decoding benchmarks (bench_translate.sh on the CPU,
# bench_translate_gpu.sh): what a decoder reports in its output FILE for search K (greedy or
# beam4; CTranslate2's: "K TYPE"), and the comparisons printed under their tables:
#   warmup K FILE     its warm-up ("# warm-up K: 8 sentences in one batch"), empty when none
#   batches K FILE    its batches, the sentences of each in order ("# batches K: 7 4 1")
#   alike K TOKENS NAME:FILE[:TYPE]...
#                     the decoders that ran (a "decode K " result line in FILE) against the
#                     first's warm-up, and its batches unless TOKENS (their size) is -; prints
#                     "#   K: the same warm-up for all N decoders: W" (with batches: "the same
#                     batches for all N decoders: B batches of TOKENS tokens, warm-up W"), or
#                     "#   K: WARM-UPS DIFFER" ("BATCHES DIFFER") " from NAME's (...): what
#                     differs: no fair ratio". A decoder that reports none (the first too)
#                     differs: an empty report is no evidence that the conditions were the same
#                     (and where none ran: "#   K: no decoder ran: nothing to compare").
#   lines_differ A B  how many lines of file A differ from file B's line of the same number
warmup() { grep -h "^# warm-up $1:" "$2" 2> /dev/null | head -n 1 | cut -d: -f2- | sed 's/^ *//'; }
batches() { grep -h "^# batches $1:" "$2" 2> /dev/null | head -n 1 | cut -d: -f2- | sed 's/^ *//'; }
alike() {
    local k=$1 tokens=$2 name file key w b ref="" ref_w="" ref_b="" n=0 differ="" same head nb
    shift 2
    for d; do
        name=${d%%:*} file=${d#*:} key=$k
        case $file in *:*) key="$k ${file#*:}" file=${file%%:*} ;; esac
        grep -q "decode $key " "$file" 2> /dev/null || continue
        n=$((n + 1))
        w=$(warmup "$key" "$file") b=$(batches "$key" "$file")
        [ -n "$ref" ] || ref=$name ref_w=$w ref_b=$b
        [ -n "$w" ] && [ "$w" = "$ref_w" ] || differ="$differ, $name's warm-up (${w:-none})"
        [ "$tokens" = - ] || { [ -n "$b" ] && [ "$b" = "$ref_b" ]; } ||
            differ="$differ, $name's batches ($(echo "$b" | wc -w))"
    done
    [ $n -gt 0 ] || { echo "#   $k: no decoder ran: nothing to compare"; return 0; }
    if [ "$tokens" = - ]; then
        same="warm-up for all $n decoders: $ref_w" head="WARM-UPS DIFFER from $ref's (${ref_w:-none})"
    else
        nb=$(echo "$ref_b" | wc -w)
        same="batches for all $n decoders: $nb batches of $tokens tokens, warm-up $ref_w"
        head="BATCHES DIFFER from $ref's ($nb batches, warm-up ${ref_w:-none})"
    fi
    if [ -z "$differ" ]; then echo "#   $k: the same $same"; else echo "#   $k: $head: ${differ#, }: no fair ratio"; fi
}
lines_differ() { paste -d'\n' "$1" "$2" | paste - - | awk -F'\t' '$1 != $2' | wc -l; }
