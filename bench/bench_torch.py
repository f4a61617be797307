#!/usr/bin/python3
"""bench/bench_torch.py -- PyTorch speed anchor for the C++/CUDA Transformer.

Uses the model and the fast batched decoders of test/reference.py (same numerics as the
C++). Measured with the machine's best PyTorch settings: all cores, the OpenMP build of
OpenBLAS with a kernel for the CPU, and tcmalloc, as bench/torch_env.sh's $TORCH prefix
sets them; bench/bench.sh runs bench/torch_check.py first and prints no ratio unless
PyTorch is at its best. By hand (the BLAS and allocator it loaded are printed):

    . bench/torch_env.sh
    $TORCH /usr/bin/python3 bench/bench_torch.py train [--configs tiny,small,base] [--steps N]
    $TORCH /usr/bin/python3 bench/bench_torch.py decode [--weights F] [--input F]

train:  one full training step (forward, backward, Adam) on a fixed synthetic batch of
        sentence pairs of exactly 25 source and 25 target tokens (164 pairs = 4,100 + 4,100
        tokens; base: 82 pairs), dropout 0.1, label smoothing 0.1, post-LN. 2 warm-up steps,
        then the median over --steps. Each config runs in its own process so that peak RSS
        is per config. Prints: torch train <config> ms_per_step=X tokens_per_s=Y peak_rss_mb=Z
        --device cuda (make gpu-check): the same model on the GPU with the paper's batches
        (--tokens 25000 source + 25000 target tokens a step), eager with bf16 autocast and then
        torch.compile, --warmup-steps (3) warm-up steps, the median of --steps (10): torch train
        <config>-<eager|compile> ms_per_step=X tokens_per_s=Y peak_gpu_mb=Z  # ..., W warm-up steps,
        the median of S (bench/bench_train_gpu.sh compares them with ours')
attention: --device cuda --precision bf16 --config base (make gpu-check, beside
        build/bench_attention): §3.2's attention alone, forward and backward of torch's
        scaled_dot_product_attention at --lengths, --tokens per batch, the masks the model uses.
        Prints: torch attention kernels=sdpa L=.. B=.. kind=enc-self|dec-self|cross fwd_ms=..
        bwd_ms=.. tflops=..
decode: "small" config, random init: 200 source sentences of 20 tokens (19 + </s>) in one
        batch; every hypothesis is FORCED to exactly 20 target tokens (</s> gets log-prob -inf,
        so nothing stops early), greedy and beam 4 (alpha 0.6) with the fast batched decoders,
        each the median of --repeats runs (default 3, as build/bench_decode's) after a warm-up:
        the same search on the first --warmup (8) sentences in one batch, untimed (as
        build/bench_decode --warmup and bench_ct2.py --warmup). --searches greedy,beam picks the
        searches. tokens_per_s = output tokens (200 * 20) / second.
        Prints: torch decode <greedy|beam4> tokens_per_s=X ms=Y, and with --input
        "# batches <greedy|beam4>: N N ..." (each batch's sentences, in decoding order), and
        "# warm-up <greedy|beam4>: N sentences in one batch"
        --weights FILE.safetensors loads a checkpoint (tensors named as in DESIGN.md, config
        JSON in __metadata__["config"]); --input FILE decodes lines of token ids instead
        (no forced length; max length a*len+b; one timed run, as ours), --batch N in batches of N sentences sorted
        by length (--batch-tokens N: as ours, sentences x longest <= N), --output F writes the hypotheses (ids) to F.greedy and F.beam4.
        --device cuda (make bench-translate DEVICE=cuda): the same decoders on the GPU (every tensor they
        make is put there by torch.set_default_device), --precision bf16 under bf16 autocast;
        --config picks the random-weights model, --sentences and --length the synthetic batch.
"""
import argparse
import math
import os
import resource
import statistics
import subprocess
import sys
import time

import torch

sys.dont_write_bytecode = True  # no test/__pycache__ from importing reference.py
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test"))
import reference as R  # noqa: E402
from torch_check import loaded_libraries  # noqa: E402  (bench/, this script's folder)
from batching import sorted_batches  # noqa: E402  (bench/, this script's folder)

# name: (layers, d_model, d_ff, heads, vocab, sentence pairs, timed steps)
CONFIGS = {
    "tiny": (2, 128, 512, 4, 8000, 164, 5),
    "small": (3, 256, 1024, 4, 8000, 164, 5),
    "base": (6, 512, 2048, 8, 37000, 82, 3),
    "big": (6, 1024, 4096, 16, 37000, 82, 3),
}
SENT_LEN = 25            # tokens per source and per target sentence in the train batch
DEC_SENTS, DEC_LEN = 200, 20


def model_config(name):
    n, d, d_ff, h, vocab, _, _ = CONFIGS[name]
    return dict(n_enc=n, n_dec=n, d_model=d, d_ff=d_ff, n_heads=h, d_k=d // h, d_v=d // h,
                vocab=vocab, max_len=256, pre_ln=0, learned_pos=0, label_smoothing=0.1,
                lr_scale=1.0, warmup=4000)


def print_environment():
    torch.ones(64, 64) @ torch.ones(64, 64)  # make sure the BLAS is loaded
    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    libs = loaded_libraries()
    print("# loaded: " + " ".join(libs))
    if not any("openblas-openmp" in x for x in libs) or not any("tcmalloc" in x for x in libs):
        print("# WARNING: not the OpenMP OpenBLAS + tcmalloc setup (bench/torch_check.py says why)")


def synthetic_batch(n_pairs, vocab, gen):
    """n_pairs of exactly SENT_LEN source and SENT_LEN target tokens, no padding."""
    body = torch.randint(4, vocab, (n_pairs, SENT_LEN - 1), generator=gen)   # (B, 24)
    tgt = torch.randint(4, vocab, (n_pairs, SENT_LEN - 1), generator=gen)    # (B, 24)
    eos = torch.full((n_pairs, 1), R.EOS, dtype=torch.int64)
    bos = torch.full((n_pairs, 1), R.BOS, dtype=torch.int64)
    return {"src": torch.cat([body, eos], 1),        # (B, 25)
            "tgt_in": torch.cat([bos, tgt], 1),      # (B, 25)
            "labels": torch.cat([tgt, eos], 1)}      # (B, 25)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def autocast_step(fwd, opt, step, batch, cfg, device):
    """One Adam step with the forward under bf16 autocast on `device`, the loss in fp32."""
    for group in opt.param_groups:
        group["lr"] = R.lr_at(step, cfg)
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device, dtype=torch.bfloat16):
        logits = fwd(batch["src"], batch["tgt_in"])
    loss = R.loss_fn(logits.float(), batch["labels"], cfg["label_smoothing"])
    loss.backward()
    opt.step()
    return loss.detach()


def bench_train(name, steps, bf16=False):
    """Training steps on the CPU; bf16: the forward under CPU bf16 autocast (oneDNN's bf16
    products, on AMX where the CPU has it), the loss in fp32."""
    cfg = model_config(name)
    n_pairs = CONFIGS[name][5]
    steps = steps or CONFIGS[name][6]
    torch.manual_seed(0)
    model = R.Transformer(cfg, dropout=0.1)
    R.init_params(model)
    model.train()
    batch = synthetic_batch(n_pairs, cfg["vocab"], torch.Generator().manual_seed(0))
    opt = R.make_optimizer(model)
    times, cpu = [], []
    for step in range(1, 2 + steps + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        if bf16:
            loss = autocast_step(model, opt, step, batch, cfg, "cpu")
        else:
            loss = R.train_step(model, opt, step, batch, cfg)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    ms = 1000.0 * statistics.median(times[2:])
    cpu_ms = 1000.0 * statistics.median(cpu[2:])
    tokens = 2 * n_pairs * SENT_LEN
    print(f"torch train {name} ms_per_step={ms:.1f} tokens_per_s={tokens / ms * 1000:.0f} "
          f"peak_rss_mb={peak_rss_mb():.0f}  # {'bf16 autocast' if bf16 else 'fp32'}, loss {float(loss):.3f}, {steps} timed steps, "
          f"process CPU {cpu_ms:.0f} ms/step (wall > CPU/threads means other load)", flush=True)


def bench_train_gpu(name, tokens, steps, warmup):
    """The same model and batch on the GPU: eager with bf16 autocast, then torch.compile of it;
    `tokens` source (and as many target) tokens a step in pairs of 25 + 25."""
    cfg = model_config(name)
    n_pairs = max(1, tokens // SENT_LEN)
    steps = steps or 10
    batch = {k: v.cuda() for k, v in synthetic_batch(n_pairs, cfg["vocab"], torch.Generator().manual_seed(0)).items()}
    for mode in ("eager", "compile"):
        torch.manual_seed(0)
        model = R.Transformer(cfg, dropout=0.3 if name == "big" else 0.1).cuda()
        R.init_params(model)
        model.train()
        opt = R.make_optimizer(model)
        fwd = torch.compile(model) if mode == "compile" else model
        torch.cuda.reset_peak_memory_stats()
        times = []
        for step in range(1, warmup + steps + 1):   # the warm-up steps include compilation
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            loss = autocast_step(fwd, opt, step, batch, cfg, "cuda")
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        ms = 1000.0 * statistics.median(times[warmup:])
        print(f"torch train {name}-{mode} ms_per_step={ms:.1f} tokens_per_s={2 * n_pairs * SENT_LEN / ms * 1000:.0f} "
              f"peak_gpu_mb={torch.cuda.max_memory_allocated() / 1e6:.0f}  # {torch.cuda.get_device_name()}, "
              f"bf16 autocast, {n_pairs} pairs of 25 + 25 tokens, loss {float(loss):.3f}, "
              f"{warmup} warm-up steps, the median of {steps}", flush=True)
        del model, opt, fwd


def bench_attention(args):
    """§3.2's attention alone, as bench/bench_attention.cpp times ours: B = tokens / L sentences of
    L tokens, q, k, v as column blocks of the model's projections, forward then backward of
    torch's scaled_dot_product_attention (its fastest kernel for the mask: the key-padding mask
    of the encoder's self-attention and the cross-attention, is_causal for the decoder's; before
    torch 2.0, which has none, softmax(QK^T / sqrt(dk) + mask) V written out)."""
    import torch.nn.functional as F
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    h, dk = model_config(args.config)["n_heads"], model_config(args.config)["d_k"]
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    dev = args.device
    for L in [int(x) for x in args.lengths.split(",") if x]:
        B = max(1, args.tokens // L)
        for kind in ("enc-self", "dec-self", "cross"):
            g = torch.Generator(device=dev).manual_seed(0)
            qkv = torch.rand(B, L, 3 * h * dk, device=dev, dtype=dtype, generator=g) * 2 - 1
            qkv.requires_grad_(True)
            heads = lambda x: x.view(B, L, h, dk).transpose(1, 2)   # (B, h, L, dk) views
            q, k, v = (heads(t) for t in qkv.split(h * dk, dim=-1))
            keep = torch.ones(B, 1, 1, L, dtype=torch.bool, device=dev)   # no padding, as ours
            mask = None if kind == "dec-self" else keep
            dctx = torch.rand(B, h, L, dk, device=dev, dtype=dtype, generator=g)

            def forward():
                if sdpa:
                    return sdpa(q, k, v, attn_mask=mask, is_causal=kind == "dec-self")
                scores = (q @ k.transpose(-1, -2)).float() / math.sqrt(dk)   # torch < 2.0: the math
                if kind == "dec-self":
                    scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool, device=dev).triu(1), float("-inf"))
                else:
                    scores = scores.masked_fill(~mask, float("-inf"))
                return torch.softmax(scores, dim=-1).to(dtype) @ v
            out = forward()
            out.backward(dctx)   # untimed
            sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
            sync()
            t0 = time.perf_counter()
            outs = [forward() for _ in range(args.repeat)]
            sync()
            t1 = time.perf_counter()
            for o in outs:
                o.backward(dctx)
            sync()
            t2 = time.perf_counter()
            fwd_ms, bwd_ms = 1000 * (t1 - t0) / args.repeat, 1000 * (t2 - t1) / args.repeat
            flops = 3 * 2 * B * h * L * L * 2 * dk
            print(f"torch attention kernels={'sdpa' if sdpa else 'math'} L={L} B={B} kind={kind} fwd_ms={fwd_ms:.3f} bwd_ms={bwd_ms:.3f} "
                  f"tflops={flops / ((fwd_ms + bwd_ms) * 1e9):.2f}", flush=True)
            del outs, out, qkv


def gpu_environment():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    a @ a
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
    tflops = 10 * 2 * 8192 ** 3 / (time.perf_counter() - t0) / 1e12
    print(f"# torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name()}; "
          f"bf16 8192^3 matmul {tflops:.0f} TFLOP/s", flush=True)


def run_train(args):
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    if args.device == "cuda":
        gpu_environment()
        for name in names:
            bench_train_gpu(name, args.tokens, args.steps, args.warmup_steps)
        return
    for name in names:
        if name not in CONFIGS:
            sys.exit(f"unknown config '{name}' (choose from {', '.join(CONFIGS)})")
    if len(names) == 1:
        print_environment()
        bench_train(names[0], args.steps, args.precision == "bf16")
        return
    for name in names:  # one process per config: peak RSS per config
        cmd = [sys.executable, os.path.abspath(__file__), "train", "--configs", name,
               "--threads", str(args.threads), "--precision", args.precision] + \
              (["--steps", str(args.steps)] if args.steps else [])
        if subprocess.run(cmd).returncode != 0:
            sys.exit(f"train benchmark of {name} failed")


def load_checkpoint(path):
    """Our checkpoint format: DESIGN.md tensor names, config JSON in metadata "config"."""
    tensors, meta = R.load_safetensors(path)
    if "config" not in meta:
        sys.exit(f"{path}: no 'config' in the safetensors metadata")
    model = R.Transformer(R.config_from_metadata(meta))
    names = set(model.state_dict())
    missing = names - set(tensors)
    if missing:
        sys.exit(f"{path}: missing tensors, e.g. {sorted(missing)[:3]}")
    model.load_state_dict({k: v for k, v in tensors.items() if k in names})
    return model.eval()


def read_sources(path):
    """Lines of token ids; </s> appended when missing."""
    srcs = []
    with open(path) as f:
        for line in f:
            ids = [int(x) for x in line.split()]
            srcs.append(ids if ids and ids[-1] == R.EOS else ids + [R.EOS])
    return srcs


def timed(fn, runs=1):
    """(fn()'s last result, the median ms of `runs` calls: the upper one of an even count, as
    build/bench_decode takes it)"""
    ms = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        ms.append(1000.0 * (time.perf_counter() - t0))
    return out, sorted(ms)[len(ms) // 2]


def decode_model(args):
    """The checkpoint, or the --config preset with random weights, on args.device."""
    if args.weights:
        return load_checkpoint(args.weights).to(args.device)
    torch.manual_seed(0)
    model = R.Transformer(model_config(args.config))   # made on the CPU: the same weights on either device
    R.init_params(model)
    return model.to(args.device).eval()


def run_decode(args):
    if args.device == "cuda":
        gpu_environment()
    else:
        print_environment()
    model = decode_model(args)
    if args.device == "cuda":
        torch.set_default_device("cuda")   # the decoders' own tensors (ids, scores, caches)
    vocab = model.cfg["vocab"]
    if args.input:
        srcs, force = read_sources(args.input), None
    else:
        gen = torch.Generator(device="cpu").manual_seed(1)
        srcs = [torch.randint(4, vocab, (args.length - 1,), generator=gen, device="cpu").tolist() + [R.EOS]
                for _ in range(args.sentences)]
        force = args.length
    a, b = args.max_len_a, args.max_len_b
    bf16 = args.precision == "bf16"

    def run(decoder, sources, batch, batch_tokens, sizes=None):
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=bf16):
            out = in_batches(decoder, sources, batch, batch_tokens, sizes)
        if args.device == "cuda":
            torch.cuda.synchronize()
        return out

    runs = 1 if args.input else args.repeats   # as build/bench_decode: --input once, synthetic the median
    decoders = {"greedy": lambda s: R.greedy_fast(model, s, a, b, force),
                "beam": lambda s: R.beam_fast(model, s, args.beam, args.alpha, a, b, force)}
    where = f"{torch.cuda.get_device_name()}, {args.precision}" if args.device == "cuda" else f"cpu, {args.precision}"
    for search in [x for x in args.searches.split(",") if x]:
        if search not in decoders:
            sys.exit(f"--searches: greedy or beam, not '{search}'")
        label = "greedy" if search == "greedy" else f"beam{args.beam}"
        if args.warmup > 0:   # untimed: the same search on the first sources, one batch
            run(decoders[search], srcs[:args.warmup], 0, 0)
            print(f"# warm-up {label}: {len(srcs[:args.warmup])} sentences in one batch", flush=True)
        sizes = []
        outs, ms = timed(lambda: run(decoders[search], srcs, args.batch, args.batch_tokens, sizes), runs)
        n_tok = sum(len(o[0]) for o in outs)
        print(f"torch decode {label} tokens_per_s={n_tok / ms * 1000:.0f} ms={ms:.1f}"
              f" sentences_per_s={len(srcs) / ms * 1000:.1f}"
              f"  # {len(srcs)} sentences, {n_tok} output tokens, median of {runs} runs, {where}", flush=True)
        if args.input:
            print(f"# batches {label}: " + " ".join(str(n) for n in sizes[-len(sizes) // runs:]), flush=True)
        if args.output:
            with open(f"{args.output}.{label}", "w") as f:
                for o in outs:
                    f.write(" ".join(str(t) for t in o[0] if t != R.EOS) + "\n")


def in_batches(decoder, srcs, batch, batch_tokens=0, sizes=None):
    """decoder(list of sources) over srcs sorted by length in batches of `batch` sentences
    (0: all at once) or of batch_tokens as ours, results in input order; each batch's sentence
    count appended to `sizes` when given."""
    if batch <= 0 and batch_tokens <= 0:
        if sizes is not None:
            sizes.append(len(srcs))
        return decoder(srcs)
    out = [None] * len(srcs)
    for idx in sorted_batches([len(s) for s in srcs], batch, batch_tokens):
        if sizes is not None:
            sizes.append(len(idx))
        for i, o in zip(idx, decoder([srcs[i] for i in idx])):
            out[i] = o
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("mode", choices=["train", "decode", "attention"])
    ap.add_argument("--configs", default="tiny,small,base", help="train: comma-separated configs")
    ap.add_argument("--steps", type=int, default=0,
                    help="train: timed steps after 2 warm-up steps (default 5; base 3)")
    ap.add_argument("--warmup-steps", type=int, default=3,
                    help="train on cuda: untimed steps before the timed ones (default 3, as bench_train_gpu.sh's)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="train: cuda times eager bf16 autocast and torch.compile on the GPU; "
                    "decode: the decoders on the GPU")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="decode on cuda, train on the CPU: bf16 runs under bf16 autocast")
    ap.add_argument("--config", default="small", choices=list(CONFIGS),
                    help="decode without --weights: the random-weights model (default small); "
                    "attention: its heads and d_k")
    ap.add_argument("--sentences", type=int, default=DEC_SENTS,
                    help=f"decode, synthetic: source sentences (default {DEC_SENTS})")
    ap.add_argument("--repeats", type=int, default=3,
                    help="decode, synthetic: timed runs, the median printed (default 3, as build/bench_decode)")
    ap.add_argument("--length", type=int, default=DEC_LEN,
                    help=f"decode, synthetic: source tokens incl. </s> and forced output tokens (default {DEC_LEN})")
    ap.add_argument("--tokens", type=int, default=25000,
                    help="train on cuda: source (and target) tokens a step (default 25000)")
    ap.add_argument("--lengths", default="10,16,32,64,128", help="attention: sentence lengths")
    ap.add_argument("--repeat", type=int, default=10, help="attention: timed calls in a row")
    ap.add_argument("--weights", help="decode: checkpoint .safetensors (default: random small)")
    ap.add_argument("--input", help="decode: file of token-id lines (default: synthetic, forced)")
    ap.add_argument("--output", help="decode: write the hypotheses (token ids) to OUTPUT.greedy "
                    "and OUTPUT.beamK")
    ap.add_argument("--batch", type=int, default=0,
                    help="decode: sentences per batch, sorted by length (default 0: all at once)")
    ap.add_argument("--batch-tokens", type=int, default=0,
                    help="decode: instead of --batch, ours' batches: sorted by length, sentences x longest "
                    "<= N source tokens (build/bench_decode --batch-tokens)")
    ap.add_argument("--warmup", type=int, default=8,
                    help="decode: before each timed search, that search on the first N sources in one batch, "
                    "untimed (default 8; build/bench_decode --warmup, bench_ct2.py --warmup)")
    ap.add_argument("--searches", default="greedy,beam",
                    help="decode: comma-separated searches to time (default greedy,beam)")
    ap.add_argument("--beam", type=int, default=4, help="decode: beam size (default 4)")
    ap.add_argument("--alpha", type=float, default=0.6, help="decode: length penalty alpha")
    ap.add_argument("--max-len-a", type=float, default=1.0, help="decode: max len = a*len + b")
    ap.add_argument("--max-len-b", type=int, default=50, help="decode: max len = a*len + b")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.mode == "attention":
        bench_attention(args)
    else:
        run_train(args) if args.mode == "train" else run_decode(args)


if __name__ == "__main__":
    main()
