#!/bin/bash
# test/test_robust.sh — bad input and bad luck, end to end (README "Bad input" table; the rows
# not already covered by test/test_cli.sh): damaged, foreign and mismatched checkpoints, a
# vocabulary that is not the model's, odd input lines, bad training data, --resume with a
# contradicting option, non-finite steps (an absurd learning rate; a test-only NaN gradient)
# and a checkpoint write on a full disk (a small tmpfs; without mount, a file-size limit).
# Run from the repository root after `make`; argument: the folder holding the programs.
# Ends with "robust: N passed, M failed[, K skipped]".
set -u
B=${1:-.}
. test/check.sh
T=$(mktemp -d)
MNT=""
cleanup() { [ -n "$MNT" ] && umount "$MNT" 2> /dev/null; rm -rf "$T"; }
trap cleanup EXIT

mkdir -p "$T/corpus"
awk 'BEGIN { srand(3); split("sun moon star sky sea land tree rock fire rain", w, " ");
  for (i = 0; i < 300; i++) { n = 2 + int(rand() * 5); en = ""; es = "";
    for (j = 0; j < n; j++) { x = w[1 + int(rand() * 10)]; en = en (j ? " " : "") x; es = x "o" (j ? " " : "") es }
    print en > "'"$T"'/corpus/train.en"; print es > "'"$T"'/corpus/train.es" } }'
TA="--config tiny --d-model 32 --d-ff 64 --vocab-size 300 --max-tokens 400 --no-eval --time 0 --save-every 0"
"$B"/train $TA --data "$T/corpus" --out "$T/run" --max-steps 4 --save-every-steps 2 > "$T/train.log" 2>&1
check $? "a tiny model to damage (4 steps): $(tail -n 1 "$T/train.log")"
C="$T/run/ckpt-00000004.safetensors"

# expect WHAT STATUS PATTERN: the last command's status ($s) and stderr ($T/err.txt)
expect() {
    [ "$s" = "$2" ] && grep -q -- "$3" "$T/err.txt"
    check $? "$1: exit $s (want $2), message: $(grep -m1 -- "$3" "$T/err.txt" | head -c 160 || head -c 160 "$T/err.txt")"
}
translate_with() { echo "sun moon" | "$B"/translate --model "$1" > "$T/out.txt" 2> "$T/err.txt"; s=$?; }
# damage FILE OUT PYTHON: OUT is FILE changed by PYTHON (a function of f, the bytes; n, the header length)
damage() {
    python3 - "$1" "$2" "$3" <<'PY'
import sys, struct, json
f = bytearray(open(sys.argv[1], "rb").read()); n = struct.unpack("<Q", f[:8])[0]
exec(sys.argv[3])
open(sys.argv[2], "wb").write(f)
PY
}
# ---- checkpoints
rewrite_meta "$C" "$T/notag.safetensors" 'del h["__metadata__"]["format"]'
translate_with "$T/notag.safetensors"; expect "another program's safetensors file (no format tag)" 1 "not a checkpoint of this program"
# A "step" that is not a count (strtoull had read "-3" as 2^64 - 3, i.e. step -3: a resumed run
# then trained on NaN updates and blamed the learning rate)
for v in -3 " 7" +7 99999999999999999999 9223372036854775808; do
    rewrite_meta "$C" "$T/step.safetensors" "h['__metadata__']['step'] = '$v'"
    translate_with "$T/step.safetensors"; expect "metadata \"step\": \"$v\"" 1 'metadata has no valid "step"'
done
# The four checksums as README defines them, computed here from the file alone: FNV-1a over
# little-endian 8-byte words, then the tail bytes; Adam's over v, started from m's.
python3 - "$C" > "$T/sums.txt" 2>&1 <<'PY'
import sys, struct, json
f = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", f[:8])[0]
h = json.loads(f[8:8 + n]); meta = h.pop("__metadata__"); data = f[8 + n:]
def fnv(b, x=0xcbf29ce484222325):
    words = len(b) // 8
    for (w,) in struct.iter_unpack("<Q", b[:8 * words]): x = ((x ^ w) * 0x100000001b3) % 2**64
    for c in b[8 * words:]: x = ((x ^ c) * 0x100000001b3) % 2**64
    return x
part = lambda names: b"".join(data[h[k]["data_offsets"][0]:h[k]["data_offsets"][1]]
                              for k in sorted(names, key=lambda k: h[k]["data_offsets"][0]))
params = part([k for k in h if not k.startswith("optimizer.")])
want = {"params_checksum": fnv(params),
        "optimizer_checksum": fnv(part(["optimizer.v"]), fnv(part(["optimizer.m"]))),
        "tokenizer_checksum": fnv(meta["tokenizer"].encode()), "config_checksum": fnv(meta["config"].encode())}
bad = [k for k in want if meta.get(k) != "%016x" % want[k]]
print(f"{len(params)} parameter bytes, {len(meta['tokenizer'])}-byte vocabulary:",
      ", ".join(f"{k} {meta.get(k)}" + (f" (want {want[k]:016x})" if k in bad else "") for k in want))
sys.exit(1 if bad else 0)
PY
check $? "the checkpoint's checksums are FNV-1a over 8-byte words, then the tail bytes, as README says: $(cat "$T/sums.txt")"
damage "$C" "$T/flip-param.safetensors" 'f[8 + n + 1000] ^= 0x08'
translate_with "$T/flip-param.safetensors"; expect "one bit flipped in the parameters" 1 "parameters: checksum mismatch"
damage "$C" "$T/flip-adam.safetensors" 'f[len(f) - 1000] ^= 0x01'
translate_with "$T/flip-adam.safetensors"
[ $s -eq 0 ]; check $? "one bit flipped in Adam's state: ./translate (which does not read it) translates (exit $s)"
mkdir -p "$T/resume-flip" && cp "$T/flip-adam.safetensors" "$T/resume-flip/ckpt-00000004.safetensors"
"$B"/train $TA --data "$T/corpus" --out "$T/resume-flip" --resume --max-steps 6 > /dev/null 2> "$T/err.txt"; s=$?
expect "one bit flipped in Adam's state: ./train --resume refuses" 1 "Adam's state: checksum mismatch"
# Half of Adam's state (optimizer.v left out of the header): --resume refuses; it does not go on
# with a fresh state as from a file that holds none.
rewrite_meta "$C" "$T/half-adam.safetensors" 'del h["optimizer.v"]'
mkdir -p "$T/resume-half" && cp "$T/half-adam.safetensors" "$T/resume-half/ckpt-00000004.safetensors"
"$B"/train $TA --data "$T/corpus" --out "$T/resume-half" --resume --max-steps 6 > /dev/null 2> "$T/err.txt"; s=$?
expect "optimizer.m without optimizer.v: ./train --resume refuses" 1 'no tensor "optimizer.v"'
# The run's options and state read back by --resume (no checksum covers them): a value that is
# not a number in the option's range is an error naming the key (warmup "abc" had resumed with
# warmup 0, a NaN learning rate; an edited best_value had reset the best checkpoint's score)
for kv in "warmup:abc" "accum:0" "adam_beta2:1.5" "lr_scale:nan" "seed:-1" "best_value:x" "sampler_index:-2" "vocab_size:12" "max_len_ratio:0.5"; do
    mkdir -p "$T/resume-meta" && rm -f "$T/resume-meta/"*.safetensors
    rewrite_meta "$C" "$T/resume-meta/ckpt-00000004.safetensors" "h['__metadata__']['${kv%%:*}'] = '${kv#*:}'"
    "$B"/train $TA --data "$T/corpus" --out "$T/resume-meta" --resume --max-steps 6 > /dev/null 2> "$T/err.txt"; s=$?
    expect "--resume from a checkpoint whose metadata says ${kv%%:*} '${kv#*:}'" 1 "metadata \"${kv%%:*}\" is '${kv#*:}', not a valid value"
done
# ... the same with the option given again: the damage is said, not a contradiction with it
# (another key damaged beside a contradicting option: the damage first, the file being unusable)
for kv in "seed:-1:--seed 5" "warmup:abc:--warmup 7" "lr_scale:nan:--lr-scale 2" "seed:99999999999999999999:--seed 5" \
          "adam_beta2:1.5:--lr-scale 2"; do
    key=${kv%%:*}; rest=${kv#*:}; value=${rest%%:*}; opt=${rest#*:}
    mkdir -p "$T/resume-meta" && rm -f "$T/resume-meta/"*.safetensors
    rewrite_meta "$C" "$T/resume-meta/ckpt-00000004.safetensors" "h['__metadata__']['$key'] = '$value'"
    "$B"/train $TA --data "$T/corpus" --out "$T/resume-meta" --resume --max-steps 6 $opt > /dev/null 2> "$T/err.txt"; s=$?
    expect "--resume $opt from a checkpoint whose metadata says $key '$value'" 1 "metadata \"$key\" is '$value', not a valid value"
done
# ... and every value ./train writes reads back: a best dev loss of inf, the largest counts
for kv in "best_value:inf" "best_value:nan" "evals_since_best:9223372036854775807"; do
    mkdir -p "$T/resume-meta" && rm -f "$T/resume-meta/"*.safetensors
    rewrite_meta "$C" "$T/resume-meta/ckpt-00000004.safetensors" "h['__metadata__']['${kv%%:*}'] = '${kv#*:}'"
    "$B"/train $TA --data "$T/corpus" --out "$T/resume-meta" --resume --max-steps 6 > /dev/null 2> "$T/err.txt"; s=$?
    [ $s -eq 0 ]; check $? "--resume from a checkpoint whose metadata says ${kv%%:*} '${kv#*:}': resumes (exit $s) $(head -c 120 "$T/err.txt")"
done
damage "$C" "$T/flip-header.safetensors" 'i = f.index(b"\"data_offsets\": [0, "); f[i + 20] ^= 0x01'
translate_with "$T/flip-header.safetensors"; expect "one bit flipped in the header (an offset)" 1 "data_offsets do not match\|overlaps\|truncated"
damage "$C" "$T/flip-vocab.safetensors" 'i = f.index(b"merge "); f[i + 12] ^= 0x01'
translate_with "$T/flip-vocab.safetensors"; expect "one bit flipped in the vocabulary inside the checkpoint" 1 "vocabulary (tokenizer): checksum mismatch\|tokenizer"
"$B"/bpe learn --vocab-size 280 --out "$T/other.bpe" "$T/corpus/train.en" > /dev/null 2>&1
rewrite_meta "$C" "$T/other-vocab.safetensors" 'h["__metadata__"]["tokenizer"] = open(sys.argv[1].rsplit("/", 2)[0] + "/other.bpe").read(); h["__metadata__"].pop("tokenizer_checksum")'
translate_with "$T/other-vocab.safetensors"; expect "a vocabulary of another size than the model's (no checksum to catch it)" 1 "tokenizer has 280 ids, the model"
rewrite_meta "$C" "$T/edited-cfg.safetensors" 'c = json.loads(h["__metadata__"]["config"]); c["n_heads"] = 2; c["d_k"] = 16; c["d_v"] = 16; h["__metadata__"]["config"] = json.dumps(c)'
translate_with "$T/edited-cfg.safetensors"; expect "an edited config that still fits the tensors (other heads)" 1 "the config: checksum mismatch"
rewrite_meta "$C" "$T/other-cfg.safetensors" 'c = json.loads(h["__metadata__"]["config"]); c["d_ff"] = 128; h["__metadata__"]["config"] = json.dumps(c); h["__metadata__"].pop("config_checksum")'
translate_with "$T/other-cfg.safetensors"; expect "a config that does not match the tensors (no checksum to catch it)" 1 "d_ff\|shape\|needs"
# Configs no program writes (edited, the checksum dropped): each refused by name. 2.5 layers had
# loaded as 2 (the tensors fit), a flag of 2 as true, an int given as true as 1.
bad_config() {   # WHAT PYTHON-EDIT-OF-c PATTERN
    rewrite_meta "$C" "$T/bad-cfg.safetensors" "c = json.loads(h['__metadata__']['config']); $2; h['__metadata__']['config'] = json.dumps(c); h['__metadata__'].pop('config_checksum')"
    translate_with "$T/bad-cfg.safetensors"; expect "config $1" 1 "$3"
}
bad_config 'of 2.5 encoder layers' 'c["n_enc"] = c["n_enc"] + 0.5' 'config "n_enc" is not a whole number (2.5)'
bad_config 'with learned_pos 2' 'c["learned_pos"] = 2' 'config "learned_pos" is not 0 or 1 (false or true): 2'
bad_config 'with pre_ln false (JSON false: read) and d_ff 128' 'c["pre_ln"] = False; c["d_ff"] = 128' 'the config needs \[128, 32\]'
bad_config 'with d_model true' 'c["d_model"] = True' 'config "d_model" is true/false, not a number'
bad_config 'with a dropout "0.1"' 'c["p_drop"] = "0.1"' 'config "p_drop" is not a number'
bad_config 'with max_len 1e31' 'c["max_len"] = 1e31' 'config "max_len" is out of range'
bad_config 'without vocab' 'del c["vocab"]' 'config has no "vocab"'
bad_config 'of 0 heads' 'c["n_heads"] = 0' 'config: d_model, d_ff, heads, d_k and d_v must be positive'
bad_config 'that is a list' 'c = [c]' 'config is not a JSON object'
# A NaN in the parameters of a file without a checksum to catch it (an older format, an edit):
# refused by ./translate and ./average, which had translated it to junk and given the average a
# fresh checksum.
rewrite_meta "$C" "$T/nan-nosum.safetensors" 'h["__metadata__"].pop("params_checksum")'
damage "$T/nan-nosum.safetensors" "$T/nan-param.safetensors" 'o = json.loads(f[8:8 + n])["embed.weight"]["data_offsets"][0]; f[8 + n + o + 40:8 + n + o + 44] = struct.pack("<f", float("nan"))'
translate_with "$T/nan-param.safetensors"; expect "a NaN in the parameters (no checksum): ./translate" 1 'tensor "embed.weight" holds a non-finite value (nan at element 10)'
"$B"/average --out "$T/nan-avg.safetensors" "$T/nan-param.safetensors" "$C" > /dev/null 2> "$T/err.txt"; s=$?
[ ! -e "$T/nan-avg.safetensors" ] || s="$s, written"
expect "... ./average" 1 'tensor "embed.weight" holds a non-finite value'
translate_with "$T/nan-nosum.safetensors"; [ $s -eq 0 ]; check $? "the same file without the NaN translates (exit $s): the checksum is optional, the NaN is what is refused"
# Finite but enormous weights (the feed-forward layers' times 1e30, no checksum): the activations
# overflow, the log-probabilities are NaN, and ./translate refuses to print from the model,
# naming the line (it had printed junk with "-nan" scores, exit 0). Line 1 is empty (answered
# without the model): the message names line 2, and nothing is printed.
damage "$T/nan-nosum.safetensors" "$T/huge.safetensors" 'import array
for k, v in json.loads(f[8:8 + n]).items():
    if ".ffn." in k:
        a, b = (8 + n + o for o in v["data_offsets"]); f[a:b] = array.array("f", [x * 1e30 for x in array.array("f", bytes(f[a:b]))]).tobytes()'
NAN_MSG="line 2: the model's log-probabilities are not numbers (NaN): its activations overflow fp32"
for how in "--beam 4" "--beam 1" "--beam 4 --nbest 2" "--score"; do
    if [ "$how" = --score ]; then printf ' ||| \nsun moon ||| solo\n'; else printf '\nsun moon\n'; fi |
        "$B"/translate --model "$T/huge.safetensors" $how > "$T/out.txt" 2> "$T/err.txt"; s=$?
    [ -z "$(tr -d '\n' < "$T/out.txt")" ] || s="$s, printed: $(head -c 60 "$T/out.txt")"
    expect "finite but enormous weights (feed-forward x 1e30), $how: refused at line 2, nothing printed" 1 "$NAN_MSG"
done
# ... and where the first line is the model's first, line 1 named (a flip let an index of 0 through)
for how in "--beam 1" "--score"; do
    if [ "$how" = --score ]; then echo 'sun moon ||| solo'; else echo 'sun moon'; fi |
        "$B"/translate --model "$T/huge.safetensors" $how > "$T/out.txt" 2> "$T/err.txt"; s=$?
    [ -z "$(tr -d '\n' < "$T/out.txt")" ] || s="$s, printed: $(head -c 60 "$T/out.txt")"
    expect "... a NaN at the first line, $how: refused at line 1, nothing printed" 1 "line 1: the model's log-probabilities are not numbers"
done
"$B"/train $TA --data "$T/corpus" --out "$T/run2" --max-steps 2 --save-every-steps 2 --d-model 16 > /dev/null 2>&1
"$B"/average --out "$T/avg.safetensors" "$C" "$T/run2/ckpt-00000002.safetensors" > /dev/null 2> "$T/err.txt"; s=$?
expect "./average of checkpoints of two different models" 1 "config differs"
[ ! -e "$T/avg.safetensors" ]; check $? "... and writes no output"

# ---- ./train and its output folder
"$B"/train $TA --data "$T/corpus" --out "$T/run" --max-steps 6 > /dev/null 2> "$T/err.txt"; s=$?
expect "--out holding checkpoints, without --resume" 1 "already holds checkpoints"
cp -r "$T/run" "$T/conflict"
"$B"/train $TA --data "$T/corpus" --out "$T/conflict" --resume --max-steps 6 --lr-scale 2 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--resume with --lr-scale 2 against the checkpoint's 1" 2 "lr-scale 2 contradicts the checkpoint's 1"
"$B"/train $TA --data "$T/corpus" --out "$T/conflict" --resume --max-steps 6 --warmup 7 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--resume with --warmup 7 against the checkpoint's 1000" 2 "warmup 7 contradicts"
# --accum and --max-tokens as given (one process: no "on 1 ranks", which test_dist's 2 ranks say)
"$B"/train $TA --data "$T/corpus" --out "$T/conflict" --resume --max-steps 6 --accum 2 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--resume with --accum 2 against the checkpoint's 1" 2 "resume: --accum 2 contradicts the checkpoint's 1;"
"$B"/train ${TA/--max-tokens 400/--max-tokens 500} --data "$T/corpus" --out "$T/conflict" --resume --max-steps 6 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--resume with --max-tokens 500 against the checkpoint's 400" 2 "resume: --max-tokens 500 contradicts the checkpoint's 400;"
# reals compare exactly too, and print in the digits that tell them apart (within a relative 1e-6
# --lr-scale 1.0000001 had passed for 1, the run going on with 1; and both printed as "1")
"$B"/train $TA --data "$T/corpus" --out "$T/conflict" --resume --max-steps 6 --lr-scale 1.0000001 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--resume with --lr-scale 1.0000001 against the checkpoint's 1" 2 "lr-scale 1.0000001 contradicts the checkpoint's 1;"
# integers compare exactly (a relative 1e-6 had let --seed 1234568 pass for 1234567, the run going
# on with the checkpoint's) and print whole (it had said 1.23457e+06)
"$B"/train $TA --data "$T/corpus" --out "$T/seeded" --max-steps 1 --seed 1234567 > /dev/null 2>&1
"$B"/train $TA --data "$T/corpus" --out "$T/seeded" --resume --max-steps 2 --seed 1234568 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--resume with --seed 1234568 against the checkpoint's 1234567" 2 "seed 1234568 contradicts the checkpoint's 1234567;"
# Adam's options too (they had been replaced by the checkpoint's silently: --adam-beta1 0.8 trained
# on with 0.9)
for given in "--adam-beta1 0.8:adam-beta1 0.8 contradicts the checkpoint's 0.9;" "--adam-beta2 0.999:adam-beta2 0.999 contradicts the checkpoint's 0.98;" \
             "--adam-eps 1e-08:adam-eps 1e-08 contradicts the checkpoint's 1e-09;"; do
    "$B"/train $TA --data "$T/corpus" --out "$T/seeded" --resume --max-steps 2 ${given%%:*} > "$T/out.txt" 2> "$T/err.txt"; s=$?
    expect "--resume with ${given%%:*} against the checkpoint's" 2 "${given#*:}"
done
# and the vocabulary's size (--vocab-size 500 had trained on with the checkpoint's 300 ids): against
# the size BPE learned at, or, where the checkpoint does not say it, its tokenizer's ids
"$B"/train ${TA/--vocab-size 300/--vocab-size 500} --data "$T/corpus" --out "$T/seeded" --resume --max-steps 2 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--resume with --vocab-size 500 against the 300 BPE learned at" 2 "vocab-size 500 contradicts the checkpoint's 300;"
mkdir -p "$T/unsized"; cp "$T/seeded/vocab.bpe" "$T/unsized/"
rewrite_meta "$T/seeded/ckpt-00000001.safetensors" "$T/unsized/ckpt-00000001.safetensors" 'del h["__metadata__"]["vocab_size"]'
"$B"/train ${TA/--vocab-size 300/--vocab-size 299} --data "$T/corpus" --out "$T/unsized" --resume --max-steps 2 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "... --vocab-size 299 with a checkpoint that does not say (a tokenizer of 300 ids)" 2 "vocab-size 299 contradicts the checkpoint's tokenizer of 300 ids;"
"$B"/train $TA --data "$T/corpus" --out "$T/unsized" --resume --max-steps 2 > "$T/out.txt" 2> "$T/err.txt"; s=$?
[ $s -eq 0 ] && [ -e "$T/unsized/ckpt-00000002.safetensors" ]; check $? "... --vocab-size 300 there: trains on (exit $s)"
# a corpus too small for the size asked: BPE learns fewer ids (322 of 2000), and the run's own
# --vocab-size 2000 given again resumes, also from a checkpoint a resumed run wrote; 500 does not
"$B"/train ${TA/--vocab-size 300/--vocab-size 2000} --data "$T/corpus" --out "$T/small-bpe" --max-steps 1 > "$T/out.txt" 2>&1
"$B"/train ${TA/--vocab-size 300/--vocab-size 2000} --data "$T/corpus" --out "$T/small-bpe" --resume --max-steps 2 > /dev/null 2> "$T/err.txt"; s=$?
"$B"/train ${TA/--vocab-size 300/--vocab-size 2000} --data "$T/corpus" --out "$T/small-bpe" --resume --max-steps 3 > /dev/null 2>> "$T/err.txt"; s="$s $?"
[ "$s" = "0 0" ] && [ -e "$T/small-bpe/ckpt-00000003.safetensors" ] && grep -q "learned 322 ids" "$T/out.txt"
check $? "--vocab-size 2000 learned 322 ids; --resume --vocab-size 2000 twice trains on (exits $s): $(head -c 120 "$T/err.txt")"
"$B"/train ${TA/--vocab-size 300/--vocab-size 500} --data "$T/corpus" --out "$T/small-bpe" --resume --max-steps 4 > /dev/null 2> "$T/err.txt"; s=$?
expect "... --vocab-size 500 there, after the resumed run's checkpoint" 2 "vocab-size 500 contradicts the checkpoint's 2000;"
# a run of --vocab has no BPE size of its own: its checkpoints, a resumed run's too, do not say one,
# and a second resume with --vocab-size of its tokenizer's 300 ids trains on
"$B"/train ${TA/--vocab-size 300/} --vocab "$T/run/vocab.bpe" --data "$T/corpus" --out "$T/vocabrun" --max-steps 1 > /dev/null 2>&1
"$B"/train ${TA/--vocab-size 300/} --data "$T/corpus" --out "$T/vocabrun" --resume --max-steps 2 > /dev/null 2>&1
"$B"/train $TA --data "$T/corpus" --out "$T/vocabrun" --resume --max-steps 3 > /dev/null 2> "$T/err.txt"; s=$?
[ "$(meta_value "$T/vocabrun/ckpt-00000002.safetensors" vocab_size 2>&1)" = "(none)" ] && [ $s -eq 0 ] && [ -e "$T/vocabrun/ckpt-00000003.safetensors" ]
check $? "a --vocab run resumed: no vocab_size recorded; resumed again with --vocab-size 300 (its ids), trains on (exit $s): $(head -c 100 "$T/err.txt")"
# --resume --vocab FILE: FILE must be the checkpoint's tokenizer (the same file: trains on; another, refused)
"$B"/train ${TA/--vocab-size 300/} --vocab "$T/run/vocab.bpe" --data "$T/corpus" --out "$T/vocabrun" --resume --max-steps 4 \
    > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 0 ] && [ -e "$T/vocabrun/ckpt-00000004.safetensors" ]
check $? "... resumed with --vocab of its own vocab.bpe: trains on (exit $s): $(head -c 100 "$T/err.txt")"
"$B"/train ${TA/--vocab-size 300/} --vocab "$T/small-bpe/vocab.bpe" --data "$T/corpus" --out "$T/vocabrun" --resume \
    --max-steps 5 > /dev/null 2> "$T/err.txt"; s=$?
expect "... resumed with --vocab of another tokenizer (322 ids)" 2 "^train: error: --resume: --vocab .*small-bpe/vocab.bpe is not the checkpoint's tokenizer; a resumed run keeps"
"$B"/train ${TA/--vocab-size 300/} --vocab "$T/missing.bpe" --data "$T/corpus" --out "$T/vocabrun" --resume \
    --max-steps 5 > /dev/null 2> "$T/err.txt"; s=$?
expect "... resumed with --vocab of a missing file" 1 "cannot read .*missing.bpe"
# --max-len-ratio is kept too: a run started with it resumes without it (its batches had differed:
# "the training data or batching differs", exit 1), and another value is refused
"$B"/train $TA --data "$T/corpus" --out "$T/ratio" --max-steps 1 --max-len-ratio 1 > "$T/out.txt" 2>&1
"$B"/train $TA --data "$T/corpus" --out "$T/ratio" --resume --max-steps 2 > "$T/out2.txt" 2> "$T/err.txt"; s=$?
[ $s -eq 0 ] && grep -q "237 as one side over 1 times" "$T/out.txt" && grep -q "237 as one side over 1 times" "$T/out2.txt"
check $? "a run of --max-len-ratio 1 (237 pairs skipped) resumes without it, skipping the same (exit $s): $(head -c 100 "$T/err.txt")"
"$B"/train $TA --data "$T/corpus" --out "$T/ratio" --resume --max-steps 3 --max-len-ratio 9 > /dev/null 2> "$T/err.txt"; s=$?
expect "... --max-len-ratio 9 there" 2 "max-len-ratio 9 contradicts the checkpoint's 1;"
"$B"/train $TA --data "$T/corpus" --out "$T/conflict" --resume --max-steps 6 --d-model 64 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--resume with --d-model 64 against the checkpoint's 32" 2 "continues the checkpoint's model.*d_model: 64 vs 32"
"$B"/train $TA --data "$T/corpus" --out "$T/conflict" --resume --max-steps 6 --dropout 0.3 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--resume with --dropout 0.3 against the checkpoint's 0.1" 2 "p_drop: 0.3"
[ "$(ls "$T/conflict" | grep -c '^ckpt-')" -eq 2 ]; check $? "... refused before any step (2 checkpoints, as before)"
"$B"/train $TA --data "$T/corpus" --out "$T/conflict" --resume --max-steps 6 --lr-scale 1 --max-tokens 400 \
    --adam-beta1 0.9 --adam-beta2 0.98 --adam-eps 1e-9 > "$T/out.txt" 2> "$T/err.txt"
s=$?; [ $s -eq 0 ] && [ -e "$T/conflict/ckpt-00000006.safetensors" ]
check $? "--resume with the checkpoint's own values (--lr-scale 1 --max-tokens 400 --adam-beta1 0.9 --adam-beta2 0.98 --adam-eps 1e-9) continues (exit $s)"
cp -r "$T/run" "$T/vocabfix"; cp "$T/other.bpe" "$T/vocabfix/vocab.bpe"
"$B"/train $TA --data "$T/corpus" --out "$T/vocabfix" --resume --max-steps 6 > "$T/out.txt" 2> "$T/err.txt"; s=$?
[ $s -eq 0 ] && cmp -s "$T/vocabfix/vocab.bpe" "$T/run/vocab.bpe" && grep -q "not the checkpoint's tokenizer, written again" "$T/out.txt"
check $? "--resume with another vocab.bpe in --out: it is written again from the checkpoint's tokenizer, and said (exit $s)"
head -n 200 "$T/corpus/train.en" > "$T/fewer.en"; mkdir -p "$T/fewer"; mv "$T/fewer.en" "$T/fewer/train.en"; head -n 200 "$T/corpus/train.es" > "$T/fewer/train.es"
"$B"/train $TA --data "$T/fewer" --out "$T/conflict" --resume --max-steps 8 > /dev/null 2> "$T/err.txt"; s=$?
expect "--resume with other training data" 1 "fewer/train.en is not the text the run trained on"
mkdir -p "$T/nohash"; cp "$T/conflict"/vocab.bpe "$T/nohash/"; last=$(ls "$T/conflict"/ckpt-* | tail -n 1)
rewrite_meta "$last" "$T/nohash/$(basename "$last")" 'for k in ("train_src_ids_hash", "train_tgt_ids_hash", "train_src_hash", "train_tgt_hash"): del h["__metadata__"][k]'
"$B"/train $TA --data "$T/fewer" --out "$T/nohash" --resume --max-steps 8 > /dev/null 2> "$T/err.txt"; s=$?
expect "... from a checkpoint without the data's hashes (an older one): the batches tell" 1 "training data or batching differs"
# Other text of the same sentence lengths ("land" and "tree" swapped in the English: one token each,
# so the same batches) had resumed silently, training on other sentences
mkdir -p "$T/swapped" "$T/swapped-run"; cp "$T/corpus/train.es" "$T/swapped/"; cp "$T/run"/* "$T/swapped-run/"
sed 's/land/@/g; s/tree/land/g; s/@/tree/g' "$T/corpus/train.en" > "$T/swapped/train.en"
"$B"/train $TA --data "$T/swapped" --out "$T/swapped-run" --resume --max-steps 6 > /dev/null 2> "$T/err.txt"; s=$?
[ ! -e "$T/swapped-run/ckpt-00000006.safetensors" ] || s="$s, trained"
expect "--resume with other text of the same sentence lengths (land and tree swapped)" 1 "swapped/train.en is not the text the run trained on (its token ids' hash [0-9a-f]*, the checkpoint's [0-9a-f]*)"
# The same sentences with CRLF line ends and blanks at the lines' ends (moved through Windows):
# other bytes, the same token ids, so the run resumes (it had been refused, the hash being the
# bytes'). A checkpoint of the versions before (the bytes' hashes alone) still refuses them.
mkdir -p "$T/crlf" "$T/crlf-run"; cp "$T/run"/* "$T/crlf-run/"
for l in en es; do sed 's/$/ \r/' "$T/corpus/train.$l" > "$T/crlf/train.$l"; done
"$B"/train $TA --data "$T/crlf" --out "$T/crlf-run" --resume --max-steps 6 > /dev/null 2> "$T/err.txt"; s=$?
[ $s -eq 0 ] && [ -e "$T/crlf-run/ckpt-00000006.safetensors" ] && ! cmp -s "$T/crlf/train.en" "$T/corpus/train.en"
check $? "--resume with the training text in CRLF and with trailing blanks: the same token ids, resumed to step 6 (exit $s)"
python3 test/same_tensors.py "$T/crlf-run/ckpt-00000006.safetensors" "$T/conflict/ckpt-00000006.safetensors" > "$T/same.txt"
check $? "... its step-6 checkpoint's tensors bitwise those of the same resume on the LF text: $(tail -n 1 "$T/same.txt")"
mkdir -p "$T/crlf-old"; cp "$T/run/vocab.bpe" "$T/crlf-old/"; last=$(ls "$T/run"/ckpt-* | tail -n 1)
rewrite_meta "$last" "$T/crlf-old/$(basename "$last")" 'for k in ("train_src_ids_hash", "train_tgt_ids_hash"): del h["__metadata__"][k]'
"$B"/train $TA --data "$T/crlf" --out "$T/crlf-old" --resume --max-steps 6 > /dev/null 2> "$T/err.txt"; s=$?
expect "... from a checkpoint with the bytes' hashes alone (an older one): refused as before" 1 "crlf/train.en is not the text the run trained on (hash of its bytes [0-9a-f]*, the checkpoint's"
mkdir -p "$T/avg-last" && cp "$C" "$T/avg-last/" && cp "$T/run/vocab.bpe" "$T/avg-last/"
"$B"/average --out "$T/avg-last/ckpt-00000005.safetensors" "$C" > /dev/null 2>&1
"$B"/train $TA --data "$T/corpus" --out "$T/avg-last" --resume --max-steps 8 > /dev/null 2> "$T/err.txt"; s=$?
expect "--resume whose last checkpoint is an average (no training state)" 1 "holds parameters only, no training state"
# A vocab.bpe left in --out by a run that ended before its first checkpoint (truncated, or from
# other data or another --vocab-size) is replaced by the one learnt from this run's data.
for left in truncated other; do
    mkdir -p "$T/left-$left"
    if [ $left = truncated ]; then head -c 100 "$T/run/vocab.bpe" > "$T/left-$left/vocab.bpe"; else cp "$T/other.bpe" "$T/left-$left/vocab.bpe"; fi
    "$B"/train $TA --data "$T/corpus" --out "$T/left-$left" --max-steps 2 > "$T/out.txt" 2> "$T/err.txt"; s=$?
    [ $s -eq 0 ] && cmp -s "$T/left-$left/vocab.bpe" "$T/run/vocab.bpe" && grep -q "replacing the one an earlier run left there" "$T/out.txt"
    check $? "vocab.bpe in --out ($left), no checkpoints: replaced by this data's (== a fresh run's), and said (exit $s)"
done

# ---- training data
mkdir -p "$T/d"
data_case() {  # data_case WHAT STATUS PATTERN: trains on $T/d/train.{en,es}
    "$B"/train $TA --data "$T/d" --out "$T/d-out-$RANDOM" --max-steps 1 > "$T/out.txt" 2> "$T/err.txt"; s=$?
    expect "$@"
}
rm -f "$T/d"/*; data_case "missing training files" 1 "no training data: expected"
printf 'a b\nc d\n' > "$T/d/train.en"; printf 'x\n' > "$T/d/train.es"
data_case "misaligned files (2 and 1 lines)" 1 "line counts differ: .*train.en has 2 lines, .*train.es has 1"
: > "$T/d/train.en"; : > "$T/d/train.es"; data_case "empty files" 1 "no sentences"
printf 'sun\nmo\377on\n' > "$T/d/train.en"; printf 'sol\nluna\n' > "$T/d/train.es"
data_case "invalid UTF-8 in the training data" 1 "train.en:2: invalid UTF-8"
printf 'sun\nmo\000on\n' > "$T/d/train.en"; data_case "a NUL byte in the training data" 1 "train.en:2: NUL byte"
printf 'sun\nmoon\n' | gzip > "$T/d/train.en"
data_case "gzip-compressed training data (it had said invalid UTF-8 at byte 2)" 1 "train.en is gzip-compressed: the data must be plain UTF-8"
printf '\377\376s\000u\000n\000\n\000' > "$T/d/train.en"
data_case "UTF-16 training data (it had said invalid UTF-8 at byte 1)" 1 "train.en is UTF-16 (it starts with a UTF-16 byte-order mark)"
printf 'sun\rmoon\r' > "$T/d/train.en"
data_case "old Mac line ends in the training data (it had said the line counts differ: 1 and 2)" 1 "train.en has old Mac line ends (carriage returns, no line feeds)"
rm -f "$T/d/train.en"; mkdir "$T/d/train.en"
data_case "a folder named train.en (it had read as an empty file)" 1 "cannot read .*train.en: Is a directory"
rmdir "$T/d/train.en"
"$B"/train --config tiny --d-model 32 --d-ff 64 --no-eval --data "$T/corpus" --vocab "$T" --out "$T/vocab-folder" --max-steps 1 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--vocab naming a folder" 1 "cannot read .*: Is a directory"
# --vocab is read as ./bpe reads it, byte for byte: a file cut short in its last line (here only
# the final newline; cut inside the last piece, "merge 304 s ky" had trained as "merge 304 s k")
# and CRLF line ends are refused (lines had been trimmed and rejoined, so both were accepted)
head -c -1 "$T/run/vocab.bpe" > "$T/cut.bpe"; sed 's/$/\r/' "$T/run/vocab.bpe" > "$T/crlf.bpe"
"$B"/train --config tiny --d-model 32 --d-ff 64 --no-eval --data "$T/corpus" --vocab "$T/cut.bpe" --out "$T/vocab-cut" --max-steps 1 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--vocab whose last line lost its newline (a truncated file)" 1 "cut.bpe: vocabulary: last line has no newline"
"$B"/train --config tiny --d-model 32 --d-ff 64 --no-eval --data "$T/corpus" --vocab "$T/crlf.bpe" --out "$T/vocab-crlf" --max-steps 1 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "--vocab with CRLF line ends (./bpe refuses it too)" 1 "crlf.bpe: vocabulary: contains a carriage return"
cp "$T/corpus/train.en" "$T/corpus/train.es" "$T/d/"; sed -i '5s/.*//' "$T/d/train.en"
data_case "an empty line in the training data: skipped and counted" 0 "skipped 1 pairs with an empty line"
# a misaligned pair (40 words against one): kept by default, skipped and counted with --max-len-ratio 9
cp "$T/corpus/train.en" "$T/corpus/train.es" "$T/d/"
sed -i "7s/.*/$(printf 'sun moon star sky sea land tree rock %.0s' 1 2 3 4 5)/" "$T/d/train.en"; sed -i '7s/.*/sol/' "$T/d/train.es"
"$B"/train $TA --data "$T/d" --out "$T/ratio-off" --max-steps 1 > "$T/off.txt" 2>&1; s1=$?
"$B"/train $TA --data "$T/d" --out "$T/ratio-9" --max-steps 1 --max-len-ratio 9 > "$T/on.txt" 2>&1; s2=$?
[ $s1 = 0 ] && [ $s2 = 0 ] && grep -q '^data: 300 train pairs (0 skipped as longer than [0-9]* tokens, 0 empty)' "$T/off.txt" &&
    grep -q "^data: 299 train pairs (0 skipped as longer than [0-9]* tokens, 1 as one side over 9 times the other's length, 0 empty)" "$T/on.txt"
check $? "--max-len-ratio 9: the pair of 40 words against one skipped and counted, kept without it (exit $s1, $s2: $(grep -h '^data: [0-9]' "$T/off.txt" "$T/on.txt" | tr '\n' ' '))"
# --max-len 9 keeps sentences of 8 tokens (9 positions with </s>): a pair of 9 bytes (byte pieces
# only, one token each) is skipped, and the data line says longer than 8 tokens (it had said 9)
printf 'bpe-vocab 1 size 260 specials 4 bytes 256 chars 0 merges 0\n' > "$T/bytes.bpe"
printf 'abcdefgh\nabcdefghi\n' > "$T/d/train.en"; printf 'abcdefgh\nab\n' > "$T/d/train.es"
"$B"/train --config tiny --d-model 32 --d-ff 64 --max-tokens 400 --no-eval --time 0 --save-every 0 --vocab "$T/bytes.bpe" \
    --data "$T/d" --out "$T/maxlen" --max-steps 1 --max-len 9 > "$T/out.txt" 2>&1; s=$?
[ $s = 0 ] && grep -q '^data: 1 train pairs (1 skipped as longer than 8 tokens, 0 empty)' "$T/out.txt"
check $? "--max-len 9: a pair of 8 tokens kept, one of 9 skipped as longer than 8 tokens (exit $s: $(grep '^data: [0-9]' "$T/out.txt"))"
# dev pairs longer than --max-len count in the dev loss (sinusoids reach any position): with every
# dev pair past --max-len 12 the dev loss had been left out of log.csv (NaN), silently
cp "$T/corpus/train.en" "$T/corpus/train.es" "$T/d/"
for i in 1 2; do echo "sun moon star sky sea land tree rock fire rain sun moon star sky sea land tree rock fire rain"; done > "$T/d/dev.en"
for i in 1 2; do echo "suno moono staro skyo seao lando treeo rocko fireo raino suno moono staro skyo seao lando treeo rocko fireo raino"; done > "$T/d/dev.es"
"$B"/train $TA --data "$T/d" --out "$T/devlong" --max-steps 1 --max-len 12 --eval-every 1 --no-eval-bleu > "$T/out.txt" 2>&1; s=$?
[ $s = 0 ] && grep -q '^dev,1,[^,]*,[^,]*,[^,]*,[0-9]' "$T/devlong/log.csv" && grep -q '^step *1 | dev loss [0-9]' "$T/out.txt"
check $? "dev pairs all longer than --max-len 12: the dev loss is computed on them (exit $s: $(grep '^dev,1' "$T/devlong/log.csv"))"
# ... up to 1,024 tokens, as ./translate takes: a dev line past that (its attention alone would
# take gigabytes at 100,000 tokens) is left out, and said
awk 'BEGIN { for (i = 0; i < 1100; i++) printf "x%c ", 97 + i % 26; print "" }' > "$T/d/long.txt"
{ cat "$T/d/long.txt"; echo "sun moon"; } > "$T/d/dev.en"
{ cat "$T/d/long.txt"; echo "suno moono"; } > "$T/d/dev.es"
"$B"/train $TA --data "$T/d" --out "$T/devhuge" --max-steps 1 --max-len 12 --eval-every 1 --no-eval-bleu > "$T/out.txt" 2>&1; s=$?
[ $s = 0 ] && grep -q '^data: .*, 2 dev (1 longer than 1024 tokens: not in the dev loss)' "$T/out.txt" &&
    grep -q '^dev,1,[^,]*,[^,]*,[^,]*,[0-9]' "$T/devhuge/log.csv"
check $? "a dev line of 1,100 words: left out of the dev loss and said, the other counted (exit $s: $(grep -m1 '^data: .* dev' "$T/out.txt"))"
# ... and dev BLEU and the final report translate such a line from its first 1,024 tokens, as
# ./translate takes no more, and say so (a dev file of old Mac line ends, one line of 600 verses,
# had stopped ./train at its first evaluation: out of memory allocating 96483.8 MB)
"$B"/train --config tiny --d-model 32 --d-ff 64 --vocab-size 300 --max-tokens 400 --time 0 --save-every 0 --beam 1 \
    --data "$T/d" --out "$T/devcut" --max-steps 1 --max-len 12 --eval-every 1 > "$T/out.txt" 2>&1; s=$?
[ $s = 0 ] && grep -q '^dev, .*\[1 source line longer than 1024 tokens: its first 1024 tokens translated\]' "$T/out.txt" &&
    grep -q '^dev,1,[^,]*,[^,]*,[^,]*,[0-9][^,]*,[0-9]' "$T/devcut/log.csv"
check $? "a dev line of 1,100 words: dev BLEU and the report translate its first 1,024 tokens, and say so (exit $s: $(grep -o '\[1 source line[^]]*\]' "$T/out.txt"))"
# ... and a dev set of that line alone (no pair in the dev loss) still prints its evaluations:
# dev BLEU was computed, logged and kept best.safetensors, without a line on the terminal
cp "$T/d/long.txt" "$T/d/dev.en"; cp "$T/d/long.txt" "$T/d/dev.es"
"$B"/train $TA --data "$T/d" --out "$T/devnoloss" --max-steps 1 --max-len 12 --eval-every 1 > "$T/out.txt" 2>&1; s=$?
[ $s = 0 ] && grep -q '^step *1 | dev loss - | dev BLEU [0-9.]* (1 lines, greedy' "$T/out.txt"
check $? "dev pairs all past the dev loss's 1,024 tokens: each evaluation's line still says its dev BLEU (exit $s: $(grep -m1 '^step *1 |' "$T/out.txt"))"
rm -f "$T/d"/dev.*
# The dev loss's bounds exactly, with byte pieces (a token a byte, $T/bytes.bpe): sinusoids take
# a dev line of 1,024 tokens and leave out one of 1,025; a learned table of 9 positions takes 8
# tokens and leaves out 9; dev lines within the bounds are not said (the note had counted the
# lines one token longer than the bound, or said "0 ... not in the dev loss")
mkdir -p "$T/b"; printf 'abcdefgh\nab\n' > "$T/b/train.en"; cp "$T/b/train.en" "$T/b/train.es"
dev_bound() {  # dev_bound NAME OPTIONS... : trains one step on $T/b, dev.{en,es} alike, the data line in $T/b-NAME.txt
    name=$1; shift; cp "$T/b/dev.en" "$T/b/dev.es"
    "$B"/train --config tiny --d-model 32 --d-ff 64 --max-tokens 2100 --no-eval --time 0 --save-every 0 --vocab "$T/bytes.bpe" \
        --data "$T/b" --out "$T/b-$name" --max-steps 1 --eval-every 1 --no-eval-bleu "$@" > "$T/b-$name.txt" 2>&1; s=$?
    [ $s = 0 ] && grep -q '^dev,1,[^,]*,[^,]*,[^,]*,[0-9]' "$T/b-$name/log.csv"
}
awk 'BEGIN { for (n = 1024; n <= 1025; n++) { s = ""; for (i = 0; i < n; i++) s = s "a"; print s }; print "ab" }' > "$T/b/dev.en"
dev_bound sines --max-len 12 && grep -q '^data: 2 train pairs .*, 3 dev (1 longer than 1024 tokens: not in the dev loss), 0 test$' "$T/b-sines.txt"
check $? "dev lines of 1,024, 1,025 and 2 tokens: the one of 1,025 left out of the dev loss, said (exit $s: $(grep -m1 '^data: [0-9]' "$T/b-sines.txt"))"
printf 'abcdefgh\nabcdefghi\n' > "$T/b/dev.en"
dev_bound learned --learned-pos --max-len 9 && grep -q '^data: 2 train pairs .*, 2 dev (1 past the learned position table: not in the dev loss), 0 test$' "$T/b-learned.txt"
check $? "--learned-pos --max-len 9, dev lines of 8 and 9 tokens: the one of 9 left out of the dev loss, said (exit $s: $(grep -m1 '^data: [0-9]' "$T/b-learned.txt"))"
printf 'abcdefgh\nab\n' > "$T/b/dev.en"
dev_bound within --learned-pos --max-len 9 && grep -q '^data: 2 train pairs .*, 2 dev, 0 test$' "$T/b-within.txt" &&
    dev_bound within-sines --max-len 9 && grep -q '^data: 2 train pairs .*, 2 dev, 0 test$' "$T/b-within-sines.txt"
check $? "dev lines within the bounds (8 and 2 tokens), learned positions and sinusoids: no note (exit $s: $(grep -h '^data: [0-9]' "$T/b-within.txt" "$T/b-within-sines.txt" | tr '\n' ' '))"
grep -q '^trained 1 step in ' "$T/b-within.txt"
check $? "one step trained: '$(grep -m1 '^trained' "$T/b-within.txt")' (singular)"
cp "$T/corpus/train.en" "$T/corpus/train.es" "$T/d/"; head -n 3 "$T/corpus/train.en" | sed '2s/.*//' > "$T/d/dev.en"; head -n 3 "$T/corpus/train.es" > "$T/d/dev.es"
data_case "an empty line in the dev data: refused (it must stay aligned)" 1 "dev.en:2: empty line"
rm -f "$T/d"/dev.*
head -n 3 "$T/corpus/train.es" > "$T/d/test.es"
data_case "test.es without test.en: refused (no silent end of the test evaluation)" 1 "test.es has no .*test.en beside it"
rm -f "$T/d"/test.*
sed 's/$/\r/' "$T/corpus/train.en" > "$T/d/train.en"; sed 's/$/\r/' "$T/corpus/train.es" > "$T/d/train.es"
"$B"/train $TA --data "$T/d" --out "$T/crlf" --max-steps 2 --save-every-steps 2 --seed 5 > /dev/null 2>&1; s1=$?
"$B"/train $TA --data "$T/corpus" --out "$T/lf" --max-steps 2 --save-every-steps 2 --seed 5 > /dev/null 2>&1
data_section() {  # the checkpoint's tensors (parameters, Adam state): the bytes after the header
    python3 -c 'import sys, struct; f = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", f[:8])[0]; sys.stdout.buffer.write(f[8 + n:])' "$1"
}
[ $s1 -eq 0 ] && [ -s "$T/crlf/ckpt-00000002.safetensors" ] && [ -s "$T/lf/ckpt-00000002.safetensors" ] &&
    cmp -s "$T/crlf/vocab.bpe" "$T/lf/vocab.bpe" &&
    [ "$(data_section "$T/crlf/ckpt-00000002.safetensors" | md5sum)" = "$(data_section "$T/lf/ckpt-00000002.safetensors" | md5sum)" ]
check $? "CRLF training data (exit $s1): the same vocabulary and parameters as LF"
no_adam() { python3 -c 'import sys, json, struct; f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; sys.exit(any(k.startswith("optimizer") for k in json.loads(f.read(n))))' "$1"; }
no_adam "$T/lf/average.safetensors" && python3 test/same_tensors.py "$T/lf/average.safetensors" "$T/lf/ckpt-00000002.safetensors" --skip optimizer > /dev/null
check $? "one checkpoint, nothing to average: average.safetensors holds its parameters (bitwise) and no Adam state"

# ---- ./translate's input lines
M="$T/run/average.safetensors"
printf 'sun moon\nstar sky\n' > "$T/lf.txt"; printf 'sun moon\r\nstar sky\r\n' > "$T/crlf.txt"; printf 'sun moon\nstar sky' > "$T/nofinal.txt"
"$B"/translate --model "$M" < "$T/lf.txt" > "$T/lf.out"; s1=$?
"$B"/translate --model "$M" < "$T/crlf.txt" > "$T/crlf.out"; s2=$?
[ $s1 -eq 0 ] && [ $s2 -eq 0 ] && cmp -s "$T/lf.out" "$T/crlf.out" && [ "$(wc -l < "$T/lf.out")" -eq 2 ]
check $? "CRLF input lines: the same 2 translations as LF (exit $s1, $s2)"
"$B"/translate --model "$M" < "$T/nofinal.txt" > "$T/nofinal.out"; s=$?
[ $s -eq 0 ] && cmp -s "$T/lf.out" "$T/nofinal.out"; check $? "no final newline: the last line translated and ended with a newline (exit $s)"
printf 'sun\000moon\n' | "$B"/translate --model "$M" > "$T/out.txt" 2> "$T/err.txt"; s=$?
[ $s -eq 0 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ]; check $? "a NUL byte in a line: translated as a byte, one output line (exit $s)"
printf '  \tsun \377 moon\n' | "$B"/translate --model "$M" > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "invalid UTF-8 after leading blanks: its byte counted in the line as given (it had been counted after them: byte 4)" 1 "line 1: invalid UTF-8 at byte 7 "
"$B"/translate --model "$M" < /dev/null > "$T/out.txt" 2> "$T/err.txt"; s=$?
[ $s -eq 0 ] && [ ! -s "$T/out.txt" ]; check $? "empty input: no output, exit 0 ($s)"
head -c 1048576 /dev/zero | tr '\0' 'a' > "$T/mb.txt"; echo >> "$T/mb.txt"; echo "sun" >> "$T/mb.txt"
"$B"/translate --model "$M" < "$T/mb.txt" > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "a 1 MB line" 1 "line 1: [0-9]* tokens, more than --max-input-tokens"

# ---- non-finite steps
"$B"/train $TA --data "$T/corpus" --out "$T/nan" --max-steps 30 --save-every-steps 1 --lr-scale 1e30 --warmup 1 \
    --max-nonfinite 3 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "an absurd learning rate (--lr-scale 1e30): stops after 3 non-finite steps in a row" 3 "3 non-finite steps in a row"
[ "$(grep -c 'step skipped' "$T/out.txt")" -eq 3 ] && [ "$(grep -c '^nonfinite,' "$T/nan/log.csv")" -eq 3 ] &&
    head -n 1 "$T/nan/log.csv" | grep -qx 'event,step,epoch,train_loss,lr,dev_loss,bleu_dev,bleu_test,elapsed_s'
check $? "... each skipped step on stdout and as a 'nonfinite' row of log.csv (columns unchanged)"
last=$(ls "$T/nan" | grep '^ckpt-' | tail -n 1)
grep -q "last good checkpoint is .*$last" "$T/err.txt" && echo | "$B"/translate --model "$T/nan/$last" > /dev/null 2>&1
check $? "... the last good checkpoint ($last) is named, kept, and loads"
TRAIN_TEST_NONFINITE=3,4 "$B"/train $TA --data "$T/corpus" --out "$T/nan2" --max-steps 6 --save-every-steps 2 \
    > "$T/out.txt" 2> "$T/err.txt"; s=$?
[ $s -eq 0 ] && [ "$(grep -c '^nonfinite,' "$T/nan2/log.csv")" -eq 2 ] && grep -q "skipped 2 steps" "$T/out.txt" &&
    [ -e "$T/nan2/ckpt-00000006.safetensors" ]
check $? "a NaN gradient at two steps (test switch): both skipped and counted, the run reaches step 6 (exit $s)"
printed=$(sed -n 's/^step *\([0-9]*\) | non-finite.*/\1/p' "$T/out.txt" | tr '\n' ' ')
logged=$(awk -F, '$1 == "nonfinite" { printf "%s ", $2 }' "$T/nan2/log.csv")
[ "$printed" = "3 3 " ] && [ "$logged" = "2 2 " ]
check $? "... printed as the step tried, 3 both times ('$printed'), logged at the last completed step, 2 ('$logged')"
# Every step of an epoch skipped (--max-epochs 1, --max-nonfinite above the epoch's steps): the
# run completed none and saved nothing; the end had read the empty list of checkpoints (a crash).
# One process: its errors say "train: error:", no rank.
poison=$(seq -s, 1 60)
TRAIN_TEST_NONFINITE=$poison "$B"/train $TA --data "$T/corpus" --out "$T/nan3" --max-steps 0 --max-epochs 1 \
    --max-nonfinite 100 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "every step of the run's one epoch non-finite (test switch)" 3 "^train: error: no step completed: all [0-9]* tried had a non-finite"
! ls "$T/nan3" | grep -q '^ckpt-\|^average' && [ "$(grep -c '^nonfinite,' "$T/nan3/log.csv")" -ge 2 ]
check $? "... no checkpoint or average written, each skipped step logged ($(grep -c '^nonfinite,' "$T/nan3/log.csv") rows)"
TRAIN_TEST_NONFINITE=$poison "$B"/train --max-tokens 400 --no-eval --time 0 --save-every 0 --data "$T/corpus" \
    --init-from "$C" --out "$T/nan4" --max-steps 0 --max-epochs 1 --max-nonfinite 100 > "$T/out.txt" 2> "$T/err.txt"; s=$?
expect "... fine-tuning (--init-from) likewise" 3 "no step completed: all [0-9]* tried"

# ---- a full disk during a checkpoint write
size=$(stat -c %s "$C")
mkdir -p "$T/disk"
if mount -t tmpfs -o size=$(( (size * 3 / 2 + 4096 * 4) / 1024 ))k tmpfs "$T/disk" 2> /dev/null; then
    MNT="$T/disk"
    "$B"/train $TA --data "$T/corpus" --out "$T/disk/run" --max-steps 6 --save-every-steps 2 > "$T/out.txt" 2> "$T/err.txt"; s=$?
    expect "a full disk (tmpfs of 1.5 checkpoints) at the second checkpoint: training stops" 1 "No space left on device.*previous checkpoint .*ckpt-00000002.safetensors is intact"
    ls "$T/disk/run" | grep -q tmp; [ $? -ne 0 ] && echo | "$B"/translate --model "$T/disk/run/ckpt-00000002.safetensors" > /dev/null 2>&1
    check $? "... the previous checkpoint loads and no temporary file is left: $(ls "$T/disk/run" | tr '\n' ' ')"
    "$B"/train $TA --data "$T/corpus" --out "$T/disk/run" --max-steps 6 --save-every-steps 2 --keep 1 --resume > /dev/null 2> "$T/err.txt"
    s=$?; expect "... --resume on the still-full disk fails again the same way" 1 "No space left on device"
else
    cp -r "$T/run" "$T/fsize"
    (ulimit -f $(( size / 2048 )); exec "$B"/train $TA --data "$T/corpus" --out "$T/fsize" --resume --max-steps 6 --save-every-steps 2) \
        > "$T/out.txt" 2> "$T/err.txt"; s=$?
    expect "a file-size limit (mount refused here: ulimit -f) at the next checkpoint: training stops" 1 "File too large.*previous checkpoint .*ckpt-00000004.safetensors is intact"
    echo | "$B"/translate --model "$T/fsize/ckpt-00000004.safetensors" > /dev/null 2>&1
    check $? "... the previous checkpoint loads"
fi
check_summary robust
