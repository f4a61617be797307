#!/usr/bin/env python3
"""bench/bench_ct2.py -- CTranslate2 speed/quality anchor for our decoder.

Converts our checkpoint (safetensors, tensor names as in DESIGN.md "Checkpoints", config JSON
in __metadata__["config"]) to CTranslate2 models, int8 and float32, in a temporary folder,
then decodes lines of token ids with CTranslate2 on the CPU (or, --device cuda --types
float16,bfloat16, on the GPU: bench/bench_translate_gpu.sh), greedy and beam 4, and times it.
Needs only numpy and the ctranslate2 wheel (no torch); install it once with

    python3 -m pip install ctranslate2        # CPU wheel with its own oneDNN / OpenMP

and run it with the same python3:

    ./bpe encode --vocab runs/default/vocab.bpe < data/corpus/default/test.en > /tmp/test.ids
    python3 bench/bench_ct2.py --input /tmp/test.ids [--weights F] [--output P] [--threads 2]
    python3 bench/bench_ct2.py --check [--weights F] [--threads 2]     (see "At its best")
    ./bpe decode --vocab runs/default/vocab.bpe < P.beam4.int8 | ./bleu test.es --score-only

Conversion (exact same function as test/reference.py's Transformer):
  post-LN (pre_norm=False, no final LayerNorm), LayerNorm eps 1e-5 (config layer_norm_epsilon),
  ReLU FFN, embeddings scaled by sqrt(d_model) (scale_embeddings), one shared matrix E for the
  source and target embeddings and the output projection (no bias); self-attention q|k|v fused
  into linear[0], cross-attention q in linear[0] and k|v fused into linear[1]; the position
  table is OUR interleaved sinusoid (PE(pos,2i)=sin, PE(pos,2i+1)=cos, row 0 = position 0),
  stored explicitly, so CT2's own (concatenated, 1-based) table is never used.
  Vocabulary: id i <-> token string "<pad>" "<unk>" "<s>" "</s>" for 0..3, str(i) otherwise.
Decoding: source = ids + "</s>" (the spec's add_source_eos is False: CT2 does not append it),
  decoder starts from <s>; sentences sorted by length, batches of --batch (100) sentences (or
  --batch-tokens, ours' batches: sentences x longest <= N source tokens), each
  batch with max_decoding_length = (longest source incl. </s>) + 50 (CT2 takes one limit per
  call; ours is per sentence: a*len+b with a=1, b=50; the limit counts </s>); no input
  truncation. Beam: length_penalty 0.6 -- CT2 ranks finished hypotheses by logP / |Y|^alpha
  (|Y| counts </s> because return_end_token=True), not GNMT's ((5+|Y|)/6)^alpha (CT2 has no
  GNMT option), and stops a sentence when beam_size hypotheses have finished (patience 1),
  not with the tensor2tensor bound. intra_threads --threads, inter_threads --inter-threads (1):
  every batch is submitted at once (asynchronous), so with inter_threads N, N batches decode side
  by side, each on --threads threads (CTranslate2's layout for throughput: --threads 1
  --inter-threads N on N cores; on a 2-core VM it decoded the test set 1.1-4.0x faster than one
  batch at a time on 2 threads, 2026-12-01).
At its best (--check; bench/bench_translate.sh prints no CTranslate2 ratio unless it passes):
  CTranslate2 reports the CPU backend it selected in its INFO log, which --check captures
  while loading the int8 model: the ISA of its own kernels must be at least AVX2 on a CPU
  that has AVX2 (AVX-512 is never chosen automatically, by CTranslate2's design; forced with
  CT2_FORCE_CPU_ISA=AVX512 on a Zen 5 it ran within noise of AVX2, 2026-12-01), the SGEMM
  and int8 GEMM backends must be MKL on an Intel CPU (oneDNN is accepted elsewhere, where
  CTranslate2 picks it; CT2_USE_MKL=0 forces it), the int8 model must
  run in an int8 compute type, MKL_ENABLE_INSTRUCTIONS / MKL_CBWR (which cap MKL's
  kernels) must be unset, and intra_threads must be --threads. Prints "# ..." lines with the
  version and the backend, then "anchor: CTranslate2 at its best (...)" (exit 0) or
  "no ratio for CTranslate2: ..." (exit 1).
Prints: ct2 decode <greedy|beam4> <int8|float32> sentences_per_s=X tokens_per_s=Y ms=Z
  tokens = output tokens including </s> (as bench/bench_torch.py counts them); timed after a
  warm-up: the same search on the first --warmup sentences (default: --batch) in one batch,
  untimed (as build/bench_decode --warmup and bench_torch.py --warmup); then
  "# warm-up <greedy|beam4> <type>: N sentences in one batch" and
  "# batches <greedy|beam4> <type>: N N ..." (each batch's sentences, in decoding order).
  --output P writes the hypotheses (ids, without </s>) to
  P.<greedy|beam4>.<int8|float32>.
"""
import argparse
import json
import logging
import os
import re
import struct
import sys
import tempfile
import time

import numpy as np

sys.dont_write_bytecode = True  # no bench/__pycache__ from importing batching.py
from batching import sorted_batches  # noqa: E402  (bench/, this script's folder)
from torch_check import cpu_isa  # noqa: E402  (bench/; no torch imported)

try:
    import ctranslate2
    from ctranslate2.specs import common_spec, transformer_spec
except ImportError:
    sys.exit(f"ctranslate2 is not installed for {sys.executable}: "
             f"{sys.executable} -m pip install ctranslate2")

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]
POS_ROWS = 1100          # rows of the position table (sources up to ~1000 tokens + 50)
LN_EPS = 1e-5
QUANTIZATIONS = ("int8", "float32", "float16", "bfloat16")   # float16, bfloat16: on the GPU


# ----------------------------------------------------------------------------------------------
# Checkpoint


def load_safetensors(path):
    """({name: float32 ndarray}, {metadata}) of our checkpoint format."""
    dtypes = {"F32": "<f4", "I32": "<i4", "F64": "<f8", "I64": "<i8"}
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        sys.exit(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        sys.exit(f"{path}: header length {n} exceeds the file size {len(raw)}")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = memoryview(raw)[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if end > len(data):
            sys.exit(f"{path}: tensor {name} is truncated")
        arr = np.frombuffer(data[begin:end], dtype=dtypes[info["dtype"]])
        tensors[name] = arr.reshape(info["shape"]).astype(np.float32)
    if "config" not in meta:
        sys.exit(f"{path}: no 'config' in the safetensors metadata")
    cfg = json.loads(meta["config"])
    return tensors, {k: float(v) for k, v in cfg.items()}


def sinusoid_table(n_pos, d_model):
    """Ours (test/reference.py): PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos,
    interleaved, computed in float64, rounded once to float32.          # (n_pos, d_model)"""
    pos = np.arange(n_pos, dtype=np.float64)[:, None]
    col = np.arange(d_model)
    two_i = (col - col % 2).astype(np.float64)
    angle = pos / np.power(10000.0, two_i / d_model)
    return np.where(col % 2 == 0, np.sin(angle), np.cos(angle)).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# Conversion


def token_of(i):
    return SPECIALS[i] if i < len(SPECIALS) else str(i)


def id_of(tok):
    return SPECIALS.index(tok) if tok in SPECIALS else int(tok)


def build_spec(tensors, cfg):
    n_enc, n_dec, h = int(cfg["n_enc"]), int(cfg["n_dec"]), int(cfg["n_heads"])
    d, vocab = int(cfg["d_model"]), int(cfg["vocab"])
    d_k, d_v = int(cfg.get("d_k", d // h)), int(cfg.get("d_v", d // h))
    if int(cfg.get("pre_ln", 0)) or int(cfg.get("learned_pos", 0)):
        sys.exit("only the post-LN, sinusoidal-position model is converted")
    if d_k != d_v:
        sys.exit(f"CTranslate2 needs d_k == d_v (got {d_k}, {d_v})")
    head_dim = None if d_k * h == d else d_k

    def t(name):
        if name not in tensors:
            sys.exit(f"checkpoint: missing tensor {name}")
        return tensors[name]

    def linear(spec, prefix):
        spec.weight = t(prefix + ".weight")
        if prefix + ".bias" in tensors:
            spec.bias = tensors[prefix + ".bias"]

    def fused(spec, prefixes):
        spec.weight = np.concatenate([t(p + ".weight") for p in prefixes])
        biases = [tensors.get(p + ".bias") for p in prefixes]
        if any(b is not None for b in biases):
            spec.bias = np.concatenate([b if b is not None else
                                        np.zeros(t(p + ".weight").shape[0], np.float32)
                                        for b, p in zip(biases, prefixes)])

    def layer_norm(spec, prefix):
        spec.gamma = t(prefix + ".weight")
        spec.beta = t(prefix + ".bias")

    def attention(spec, prefix, self_attention):
        names = [f"{prefix}.{p}_proj" for p in ("q", "k", "v")]
        if self_attention:
            fused(spec.linear[0], names)           # [q; k; v]
        else:
            linear(spec.linear[0], names[0])       # q from the decoder
            fused(spec.linear[1], names[1:])       # [k; v] from the encoder memory
        linear(spec.linear[-1], prefix + ".out_proj")

    def ffn(spec, prefix):
        linear(spec.linear_0, prefix + ".fc1")
        linear(spec.linear_1, prefix + ".fc2")

    encoder = transformer_spec.TransformerEncoderSpec(
        n_enc, h, pre_norm=False, activation=common_spec.Activation.RELU, head_dim=head_dim)
    decoder = transformer_spec.TransformerDecoderSpec(
        n_dec, h, pre_norm=False, activation=common_spec.Activation.RELU, head_dim=head_dim)
    spec = transformer_spec.TransformerSpec(encoder, decoder)

    E = t("embed.weight")
    if E.shape != (vocab, d):
        sys.exit(f"embed.weight has shape {E.shape}, config says ({vocab}, {d})")
    pe = sinusoid_table(POS_ROWS, d)
    encoder.embeddings[0].weight = E
    encoder.scale_embeddings = True                  # E[tok] * sqrt(d_model)
    encoder.position_encodings.encodings = pe
    decoder.embeddings.weight = E
    decoder.scale_embeddings = True
    decoder.position_encodings.encodings = pe
    decoder.projection.weight = E                    # tied output projection, no bias
    for i, layer in enumerate(encoder.layer):
        p = f"encoder.layers.{i}"
        attention(layer.self_attention, p + ".self_attn", True)
        layer_norm(layer.self_attention.layer_norm, p + ".norm1")   # post-LN: LN(x + attn)
        ffn(layer.ffn, p + ".ffn")
        layer_norm(layer.ffn.layer_norm, p + ".norm2")
    for i, layer in enumerate(decoder.layer):
        p = f"decoder.layers.{i}"
        attention(layer.self_attention, p + ".self_attn", True)
        layer_norm(layer.self_attention.layer_norm, p + ".norm1")
        attention(layer.attention, p + ".cross_attn", False)
        layer_norm(layer.attention.layer_norm, p + ".norm2")
        ffn(layer.ffn, p + ".ffn")
        layer_norm(layer.ffn.layer_norm, p + ".norm3")

    spec.config.layer_norm_epsilon = LN_EPS
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = SPECIALS[1:4]
    spec.config.decoder_start_token = SPECIALS[BOS]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = False               # we pass </s> ourselves
    tokens = [token_of(i) for i in range(vocab)]
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    return spec


def convert(weights, out_dir, quantization):
    tensors, cfg = load_safetensors(weights)
    spec = build_spec(tensors, cfg)
    spec.validate()
    spec.optimize(quantization=quantization)
    os.makedirs(out_dir, exist_ok=True)
    spec.save(out_dir)
    return cfg


# ----------------------------------------------------------------------------------------------
# Decoding


def read_sources(path):
    """Lines of token ids -> token strings ending with </s> (appended when missing)."""
    srcs = []
    with open(path) as f:
        for line in f:
            ids = [int(x) for x in line.split()]
            if not ids or ids[-1] != EOS:
                ids.append(EOS)
            srcs.append([token_of(i) for i in ids])
    return srcs


def decode(translator, srcs, batch, beam, alpha, max_len_b, batch_tokens=0, sizes=None):
    """srcs sorted by length, batches of `batch` (or of batch_tokens, as ours), one
    translate_batch call per batch (its max_decoding_length from its longest source), all
    submitted at once (asynchronous=True): the translator's inter_threads replicas take them in
    turn, one at a time with inter_threads 1; each batch's sentence count appended to `sizes`
    when given. -> hypotheses (ids incl. </s>) in input order."""
    out = [None] * len(srcs)
    pending = []
    for idx in sorted_batches([len(s) for s in srcs], batch, batch_tokens):
        chunk = [srcs[i] for i in idx]
        if sizes is not None:
            sizes.append(len(chunk))
        pending.append((idx, translator.translate_batch(
            chunk, max_batch_size=len(chunk), batch_type="examples", beam_size=beam,
            length_penalty=alpha if beam > 1 else 0.0, return_end_token=True,
            max_input_length=0, max_decoding_length=max(len(s) for s in chunk) + max_len_b,
            asynchronous=True)))
    for idx, results in pending:
        for i, r in zip(idx, results):
            out[i] = [id_of(tok) for tok in r.result().hypotheses[0]]
    return out


# ----------------------------------------------------------------------------------------------
# At its best


def backend_report(weights, threads):
    """CTranslate2's INFO log while it loads the int8 model and translates one sentence (the
    C++ library writes it to file descriptor 2, captured here)."""
    with tempfile.TemporaryDirectory(prefix="ct2-check-") as tmp, tempfile.TemporaryFile() as log:
        convert(weights, os.path.join(tmp, "int8"), "int8")
        ctranslate2.set_log_level(logging.INFO)
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            t = ctranslate2.Translator(os.path.join(tmp, "int8"), device="cpu", compute_type="default",
                                       inter_threads=1, intra_threads=threads)
            t.translate_batch([[token_of(5), SPECIALS[EOS]]], max_decoding_length=2)
            del t
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            ctranslate2.set_log_level(logging.WARNING)
        log.seek(0)
        return log.read().decode(errors="replace")


def check(weights, threads):
    """Prints the backend and the verdict; returns the exit status (0: at its best)."""
    report = backend_report(weights, threads)
    field = lambda key: (re.search(re.escape(key) + r":\s*(.+)", report) or [None, "?"])[1].strip()
    isa, sgemm, s8 = field("Selected ISA"), field("SGEMM backend"), field("GEMM_S8 backend")
    ctype, mkl = field("Selected compute type"), field("Use Intel MKL")
    print(f"# CTranslate2 {ctranslate2.__version__} ({os.path.dirname(ctranslate2.__file__)}), "
          f"intra_threads {threads}")
    print(f"# CTranslate2 CPU backend: ISA {isa} (CPU: {cpu_isa().upper()}), "
          f"Intel MKL {mkl}, SGEMM {sgemm}, GEMM_S8 {s8}, int8 model in {ctype}")
    why = []
    if cpu_isa() != "sse" and isa not in ("AVX2", "AVX512"):
        why.append(f"its kernels run with ISA {isa} on a CPU with AVX2"
                   + (f" (CT2_FORCE_CPU_ISA={os.environ['CT2_FORCE_CPU_ISA']})" if os.environ.get("CT2_FORCE_CPU_ISA") else ""))
    intel = "GenuineIntel" in report   # CTranslate2 picks MKL there, oneDNN elsewhere
    for name, value in (("SGEMM", sgemm), ("GEMM_S8", s8)):
        if not value.startswith(("MKL",) if intel else ("MKL", "DNNL")):
            why.append(f"its {name} backend is {value}, not {'MKL (on an Intel CPU)' if intel else 'MKL or oneDNN'}"
                       + (f" (CT2_USE_MKL={os.environ['CT2_USE_MKL']})" if os.environ.get("CT2_USE_MKL") else ""))
    if not ctype.startswith("int8"):
        why.append(f"the int8 model runs in {ctype}")
    for var in ("MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR"):
        if os.environ.get(var):
            why.append(f"{var}={os.environ[var]} caps MKL's kernels (unset it)")
    if why:
        print("no ratio for CTranslate2: " + "; ".join(why))
        return 1
    print(f"anchor: CTranslate2 at its best (ISA {isa}, SGEMM {sgemm.split()[0]}, int8 GEMM "
          f"{s8.split()[0]}, {threads} threads)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--weights", default="runs/default/average.safetensors",
                    help="our checkpoint (default runs/default/average.safetensors)")
    ap.add_argument("--input", help="file of token-id lines (./bpe encode); needed unless --check")
    ap.add_argument("--check", action="store_true",
                    help="only check that CTranslate2 runs at its best here (see the header)")
    ap.add_argument("--output", help="write hypotheses (ids) to OUTPUT.<greedy|beamK>.<type>")
    ap.add_argument("--threads", type=int, default=2, help="CT2 intra_threads (default 2)")
    ap.add_argument("--inter-threads", type=int, default=1,
                    help="CT2 inter_threads: batches decoded at once, each on --threads threads (default 1; "
                         "CTranslate2's throughput layout on N cores is --threads 1 --inter-threads N)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where CTranslate2 decodes (cuda: with --types float16,bfloat16,float32)")
    ap.add_argument("--batch", type=int, default=100, help="sentences per batch (default 100)")
    ap.add_argument("--batch-tokens", type=int, default=0,
                    help="instead of --batch, ours' batches: sorted by length, sentences x longest <= N "
                    "source tokens (build/bench_decode --batch-tokens)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="before each timed search, that search on the first N sentences in one batch, "
                    "untimed (default: --batch; build/bench_decode --warmup, bench_torch.py --warmup)")
    ap.add_argument("--beam", type=int, default=4, help="beam size of the beam run (default 4)")
    ap.add_argument("--alpha", type=float, default=0.6, help="length penalty (default 0.6)")
    ap.add_argument("--max-len-b", type=int, default=50,
                    help="max output length = longest source in the batch + B (default 50)")
    ap.add_argument("--types", default=None,
                    help="comma-separated model types to convert and run (default: int8,float32 "
                    "on the CPU, float16,bfloat16,float32 on the GPU)")
    ap.add_argument("--modes", default="greedy,beam",
                    help="comma-separated decoders to run (default greedy,beam)")
    ap.add_argument("--model-dir", help="keep the converted models in MODEL_DIR/<type> "
                    "(default: a temporary folder, removed at the end)")
    args = ap.parse_args()
    if args.threads < 1 or args.inter_threads < 1:
        ap.error("--threads and --inter-threads must be at least 1")
    if args.check:
        sys.exit(check(args.weights, args.threads))
    if not args.input:
        ap.error("--input is required (or --check)")
    if args.types is None:   # float16 and bfloat16 are GPU types (bfloat16's conversion needs torch)
        args.types = "int8,float32" if args.device == "cpu" else "float16,bfloat16,float32"
    types = [x for x in args.types.split(",") if x]
    for q in types:
        if q not in QUANTIZATIONS:
            sys.exit(f"unknown type '{q}' (choose from {', '.join(QUANTIZATIONS)})")
    beams = [{"greedy": 1, "beam": args.beam}[m] for m in args.modes.split(",") if m]

    srcs = read_sources(args.input)
    print(f"# ctranslate2 {ctranslate2.__version__}, {args.device} compute types "
          f"{sorted(ctranslate2.get_supported_compute_types(args.device))}, intra_threads "
          f"{args.threads}, inter_threads {args.inter_threads}, {len(srcs)} sentences, "
          + (f"batches of {args.batch_tokens} source tokens" if args.batch_tokens > 0 else f"batch {args.batch}"),
          flush=True)
    with tempfile.TemporaryDirectory(prefix="ct2-") as tmp:
        root = args.model_dir or tmp
        for q in types:
            model_dir = os.path.join(root, q)
            t0 = time.perf_counter()
            cfg = convert(args.weights, model_dir, q)
            print(f"# converted {args.weights} -> {q} in {time.perf_counter() - t0:.1f} s "
                  f"(d_model {int(cfg['d_model'])}, {int(cfg['n_enc'])}+{int(cfg['n_dec'])} "
                  f"layers, vocab {int(cfg['vocab'])})", flush=True)
            translator = ctranslate2.Translator(model_dir, device=args.device, compute_type="default",
                                                inter_threads=args.inter_threads, intra_threads=args.threads)
            for beam in beams:
                label = "greedy" if beam == 1 else f"beam{beam}"
                warmup = args.batch if args.warmup is None else args.warmup
                if warmup > 0:   # untimed: the same search on the first sentences, one batch (a
                    # batch for each of the inter_threads replicas, submitted at once)
                    decode(translator, srcs[:warmup] * args.inter_threads, len(srcs[:warmup]), beam,
                           args.alpha, args.max_len_b)
                    print(f"# warm-up {label} {q}: {len(srcs[:warmup])} sentences in one batch", flush=True)
                sizes = []
                t0 = time.perf_counter()
                outs = decode(translator, srcs, args.batch, beam, args.alpha, args.max_len_b, args.batch_tokens, sizes)
                ms = 1000.0 * (time.perf_counter() - t0)
                n_tok = sum(len(o) for o in outs)
                print(f"ct2 decode {label} {q} sentences_per_s={len(srcs) / ms * 1000:.1f} "
                      f"tokens_per_s={n_tok / ms * 1000:.0f} ms={ms:.1f}"
                      f"  # {len(srcs)} sentences, {n_tok} output tokens", flush=True)
                print(f"# batches {label} {q}: " + " ".join(str(n) for n in sizes), flush=True)
                if args.output:
                    with open(f"{args.output}.{label}.{q}", "w") as f:
                        for o in outs:
                            f.write(" ".join(str(x) for x in o if x != EOS) + "\n")
            del translator


if __name__ == "__main__":
    main()
