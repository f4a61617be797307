#!/usr/bin/env python3
"""test/test_serve.py — `./translate --serve` end to end, on 127.0.0.1 only, with a tiny model
trained here (as test_cli.sh does). Python's standard library is the client.

Checks: translations over HTTP equal ./translate's for the same lines and options (fp32, int8,
n-best with scores, --split-long); 16 concurrent clients x 20 requests of 1-30 lines, every
answer complete and correct; each bad request's status and message; a client that
disconnects mid-request does not disturb the others; the per-request timeout; SIGTERM during
a request answers it, refuses new connections and exits 0. With SERVE_DEVICE=cuda, the service
on the GPU instead (main_cuda; make test runs it on the CUDA emulator).

Every server is started on port 0 (the kernel picks a free one, the server prints it), every
call has a timeout, the whole test has one (alarm), and every server is killed at the end.
Usage: python3 test/test_serve.py [PROGRAM_DIR]   Ends with "serve: N passed, M failed".
"""
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else "."
# A program directory (its ./translate), or a translate binary itself (make test also passes
# build/translate_nohttp, the same program built without cpp-httplib, whose refusal is checked).
TRANSLATE = BIN if os.path.isfile(BIN) else os.path.join(BIN, "translate")
TOTAL_TIMEOUT_S = 900   # the whole test (sanitizer builds are slower)
CALL_TIMEOUT_S = 120    # one HTTP call

from checks import check, skip, summary

servers = []
tmp = tempfile.mkdtemp()


def cleanup():
    for p in servers:
        if p.poll() is None:
            p.kill()
            p.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def on_alarm(signum, frame):
    check(False, f"the test did not finish within {TOTAL_TIMEOUT_S} s")
    cleanup()
    summary("serve")
    os._exit(1)


# ---- a tiny model -----------------------------------------------------------------------------
WORDS = "sun moon star sky sea land tree rock fire rain".split()


def toy_sentence(rng, lo=2, hi=6):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def train_model():
    rng = random.Random(3)
    os.makedirs(f"{tmp}/corpus")
    with open(f"{tmp}/corpus/train.en", "w") as en, open(f"{tmp}/corpus/train.es", "w") as es:
        for _ in range(600):
            words = toy_sentence(rng).split()
            en.write(" ".join(words) + "\n")
            es.write(" ".join(w + "o" for w in reversed(words)) + "\n")
    cmd = [os.path.join(BIN, "train"), "--config", "tiny", "--d-model", "32", "--d-ff", "64", "--vocab-size", "300",
           "--data", f"{tmp}/corpus", "--out", f"{tmp}/run", "--max-steps", "40", "--max-tokens", "400",
           "--save-every-steps", "40", "--warmup", "20", "--log-every", "1000s", "--no-eval"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    check(r.returncode == 0, f"a tiny model trains for the test (exit {r.returncode})")
    if r.returncode != 0:
        print(r.stdout.decode(errors="replace")[-2000:])
    return f"{tmp}/run/average.safetensors"


# ---- ./translate on stdin, the reference ------------------------------------------------------
def translate_stdin(model, lines, *opts):
    r = subprocess.run([TRANSLATE, "--model", model, *opts], input="\n".join(lines).encode() + b"\n",
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"./translate {' '.join(opts)} failed: {r.stderr.decode(errors='replace')}")
    return r.stdout.decode().split("\n")[:-1]


# ---- the server -------------------------------------------------------------------------------
class Server:
    def __init__(self, model, *opts, address="0"):
        self.proc = subprocess.Popen([TRANSLATE, "--model", model, "--serve", address, *opts],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        servers.append(self.proc)
        self.log = []
        self.port = None
        ready = threading.Event()

        def read_stderr():
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace")
                self.log.append(line)
                m = re.search(r"serving .* on http://127\.0\.0\.1:(\d+) ", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self.reader = threading.Thread(target=read_stderr, daemon=True)
        self.reader.start()
        ready.wait(120)

    def wait_exit(self, timeout):
        """The exit code, with every line the server wrote already in self.log (the reader reached EOF)."""
        code = self.proc.wait(timeout)
        self.reader.join(10)
        return code

    def request(self, method, path, body=None, headers=None):
        """(status, parsed JSON or None, raw body)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=CALL_TIMEOUT_S)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            raw = r.read()
        finally:
            conn.close()
        try:
            return r.status, json.loads(raw), raw
        except ValueError:
            return r.status, None, raw

    def translate(self, items):
        return self.request("POST", "/translate", json.dumps(items).encode(), {"Content-Type": "application/json"})

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.wait_exit(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.wait_exit(None)


def answer_errors(status, out, lines, expected, nbest=1):
    """What is wrong with an answer to `lines` (a list of strings), or '' when it is right."""
    if status != 200:
        return f"status {status}"
    if not isinstance(out, list) or len(out) != nbest or any(len(o) != len(lines) for o in out):
        return "wrong shape"
    for i, (line, item) in enumerate(zip(lines, out[0])):
        if item.get("src") != line:
            return f"item {i + 1}: src {item.get('src')!r}, sent {line!r}"
        if item.get("tgt") != expected[line]:
            return f"item {i + 1}: tgt {item.get('tgt')!r}, ./translate gave {expected[line]!r}"
        if not isinstance(item.get("pred_score"), (int, float)) or item.get("n_best") != nbest:
            return f"item {i + 1}: no pred_score / n_best"
    return ""


def same_nbest(status, out, ref_rows, n_lines, nbest):
    """(whether the answer's nbest lists hold ./translate --nbest's texts, the largest score difference):
    ref_rows are its "LINE ||| text ||| score ||| logprob" rows, LINE counting from 0."""
    ref = {}
    for row in ref_rows:
        n, text, score, _ = row.split(" ||| ")
        ref.setdefault(int(n), []).append((text, float(score)))
    ok = status == 200 and len(out) == nbest and all(len(o) == n_lines for o in out)
    worst = 0.0
    for k in range(nbest if ok else 0):
        for i in range(n_lines):
            ok = ok and out[k][i]["tgt"] == ref[i][k][0] and out[k][i]["n_best"] == nbest
            worst = max(worst, abs(out[k][i]["pred_score"] - ref[i][k][1]))
    return ok, worst


def items(lines, **opts):
    return [dict(src=line, id=1, **opts) for line in lines]


def enormous_weights(model, out):
    """out: model's checkpoint with its feed-forward weights times 1e30, finite, its checksum of
    the parameters dropped (as in a file of an earlier version): the activations overflow fp32."""
    import array
    import struct
    f = bytearray(open(model, "rb").read())
    n = struct.unpack("<Q", f[:8])[0]
    header = json.loads(f[8:8 + n])
    header["__metadata__"].pop("params_checksum", None)
    for name, t in header.items():
        if name != "__metadata__" and ".ffn." in name:
            a, b = (8 + n + o for o in t["data_offsets"])
            f[a:b] = array.array("f", [x * 1e30 for x in array.array("f", bytes(f[a:b]))]).tobytes()
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    open(out, "wb").write(struct.pack("<Q", len(text)) + text + bytes(f[8 + n:]))


def nan_answers(model, pool):
    """A model whose activations overflow (finite but enormous weights) gives NaN log-probabilities:
    the server answers 500 saying so (it had answered 200, junk with "pred_score": null) and goes
    on."""
    enormous_weights(model, f"{tmp}/enormous.safetensors")
    sn = Server(f"{tmp}/enormous.safetensors")
    status, out, raw = sn.translate(items(pool[:3]))
    error = (out or {}).get("error", "") if isinstance(out, dict) else raw[:100]
    check(status == 500 and "log-probabilities are not numbers (NaN)" in error,
          f"a model with enormous weights: 500 ({status}), {error[:90]!r}")
    # each line alone: a line whose scores are NaN is refused as the request's first (and only) item
    alone = [sn.translate(items([line])) for line in pool[:3]]
    answers = [(status, out if status == 200 else None) for status, out, _ in alone]
    check(all(status == 500 for status, _ in answers),
          f"... and each of the 3 lines alone: 500 ({[a[0] for a in answers]}; {str([a[1] for a in answers])[:80]})")
    check(sn.proc.poll() is None and sn.request("GET", "/health")[0] == 200, "... and the server goes on (/health 200)")
    sn.stop()


def out_of_memory(model, pool, expected):
    """A batch that runs out of memory (the server's address space limited below what a beam-16
    request of 50 lines takes, as memory pressure would) is answered 503 naming it, and the server
    goes on: /health, then the same request answered right once the memory is back. (The server
    had ended: the CPU backend's allocation exits the program, and std::bad_alloc in the decoding
    thread was not caught.) One malloc arena (MALLOC_ARENA_MAX=1): a new connection's thread then
    reserves no 64 MB arena of its own."""
    if os.environ.get("SANITIZED") == "1":
        skip("out of memory in a batch: AddressSanitizer reserves more address space than the limit "
             "(make test checks it)")
        return
    import resource
    os.environ["MALLOC_ARENA_MAX"] = "1"
    so = Server(model, "--batch-wait", "1", "--serve-threads", "2")
    del os.environ["MALLOC_ARENA_MAX"]
    rng = random.Random(5)
    big = [" ".join(rng.choice(WORDS) for _ in range(18)) for _ in range(50)]
    want = translate_stdin(model, big, "--beam", "16")
    first = answer_errors(*so.translate(items(pool[:2]))[:2], pool[:2], expected)   # threads and buffers started
    size_kb = int(re.search(r"VmSize:\s+(\d+) kB", open(f"/proc/{so.proc.pid}/status").read()).group(1))
    limits = resource.prlimit(so.proc.pid, resource.RLIMIT_AS)
    resource.prlimit(so.proc.pid, resource.RLIMIT_AS, ((size_kb + 16 * 1024) * 1024, limits[1]))
    try:
        status, out, raw = so.translate(items(big, beam=16))
        resource.prlimit(so.proc.pid, resource.RLIMIT_AS, limits)
    except (OSError, http.client.HTTPException) as e:   # the server gone
        status, out, raw = f"no answer ({e!r}; server exit {so.proc.wait(10)})", None, b""
    error = (out or {}).get("error", "") if isinstance(out, dict) else raw[:100]
    check(first == "" and status == 503 and "out of memory" in error,
          f"a beam-16 request of 50 lines under an address-space limit 16 MB above the server's size: 503 "
          f"({status}), {error!r}")
    alive = so.proc.poll() is None and so.request("GET", "/health")[0] == 200
    status, out, _ = so.translate(items(big, beam=16)) if alive else ("server gone", None, b"")
    got = [x["tgt"] for x in out[0]] if status == 200 else status
    check(alive and got == want, f"the server goes on: /health 200, and with the limit lifted the same request "
                                 f"equals ./translate --beam 16 ({'yes' if got == want else str(got)[:80]})")
    so.stop()


def main():
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TOTAL_TIMEOUT_S)
    model = train_model()
    rng = random.Random(16)
    pool = sorted(set(toy_sentence(rng, 1, 8) for _ in range(120))) + ["", "sun ñ moon", "star  sky\tsea"]
    expected = dict(zip(pool, translate_stdin(model, pool)))
    check(len(expected) == len(pool), f"./translate translated the {len(pool)} pool lines")

    s = Server(model, "--max-request-lines", "50", "--max-request-bytes", "20000", "--max-input-tokens", "20")
    check(s.port is not None, f"--serve 0 binds 127.0.0.1 and prints the port ({''.join(s.log).strip()[:150]})")
    if s.port is None:
        return
    status, out, _ = s.request("GET", "/health")
    check(status == 200 and out.get("status") == "ok", f"GET /health: 200 ok ({status})")
    status, out, _ = s.request("GET", "/info")
    # (the limits as started: three given, --max-request-beam's 16 and the rest by default)
    limits = dict(max_request_lines=50, max_request_bytes=20000, max_request_beam=16, max_input_tokens=20,
                  split_long=False, split_sentences=False, replace_invalid=False, request_timeout_s=60)
    ok = (status == 200 and out["config"]["d_model"] == 32 and out["vocab_size"] == out["config"]["vocab"] and
          out["device"] == "cpu" and out["precision"] == "fp32" and "version" in out and
          out["limits"] == limits and out["defaults"]["beam"] == 4 and out["ensemble"] == [])
    check(ok, f"GET /info: config, vocabulary, device, precision, version, default beam 4, limits "
              f"{(out or {}).get('limits')} ({status})")

    # The same lines and options as ./translate: one request with all of them, then one per line.
    status, out, _ = s.translate(items(pool[:50]))
    err = answer_errors(status, out, pool[:50], expected)
    check(err == "", f"50 lines in one request equal ./translate's {err}")
    errs = [answer_errors(*s.translate(items([line]))[:2], [line], expected) for line in pool[50:70]]
    check(all(e == "" for e in errs), f"20 one-line requests equal ./translate's {[e for e in errs if e][:1]}")
    # A character past U+FFFF arrives as a JSON surrogate pair (json.dumps escapes it so).
    line = "sun \U0001F600 moon"
    body = json.dumps(items([line]))
    status, out, _ = s.translate(items([line]))
    got = (out[0][0]["src"], out[0][0]["tgt"]) if status == 200 else (f"status {status}", out)
    want = (line, translate_stdin(model, [line])[0])
    check("\\ud83d\\ude00" in body and got == want,
          f"U+1F600 sent as the surrogate pair \\ud83d\\ude00: src read back {got[0]!r} (want {line!r}), "
          f"tgt equal ./translate's ({got[1]!r}, {want[1]!r})")

    # n-best with scores, per-request beam/nbest/alpha, against ./translate --beam 3 --nbest 2 --alpha 1.
    lines = [x for x in pool if x][:10]
    ref = translate_stdin(model, lines, "--beam", "3", "--nbest", "2", "--alpha", "1")
    status, out, _ = s.translate(items(lines, beam=3, nbest=2, alpha=1))
    ok, worst = same_nbest(status, out, ref, len(lines), 2)
    check(ok and worst <= 1e-5, f"beam 3, nbest 2, alpha 1: 2 lists of {len(lines)}, texts and scores equal "
                                f"./translate --nbest's (largest score difference {worst:.2e}, status {status})")
    # An empty line has one translation, the empty one: each list repeats it (its last, as for any
    # item with fewer than nbest), beside a line of 2.
    status, out, _ = s.translate(items(["", lines[0]], beam=3, nbest=2, alpha=1))
    got = [[(x["src"], x["tgt"]) for x in o] for o in out] if status == 200 else status
    check(status == 200 and len(out) == 2 and out[0][0] == out[1][0] and out[0][0]["tgt"] == "" and
          [o[1]["tgt"] for o in out] == [row.split(" ||| ")[1] for row in ref[:2]],
          f"an empty line beside another, beam 3, nbest 2, alpha 1: its one (empty) translation in both lists, the "
          f"other's two equal ./translate --nbest's ({str(got)[:120]})")

    # 16 concurrent clients x 20 requests of 1-30 lines each.
    results = []
    lock = threading.Lock()

    def client(seed, n_requests, server, pool=pool, expected=expected, **opts):
        r = random.Random(seed)
        for _ in range(n_requests):
            lines = [r.choice(pool) for _ in range(r.randint(1, 30))]
            try:
                status, out, _ = server.translate(items(lines, **opts))
                e = answer_errors(status, out, lines, expected)
            except Exception as ex:   # noqa: BLE001 - any failure is a failed answer
                e = f"exception {ex!r}"
            with lock:
                results.append(e)

    def run_all(threads):
        """Starts the threads on a cleared `results`, waits for them; the clients' failed answers."""
        results.clear()
        for t in threads:
            t.start()
        for t in threads:
            t.join(CALL_TIMEOUT_S * 2)
        return [e for e in results if e]

    start = time.time()
    threads = [threading.Thread(target=client, args=(i, 20, s)) for i in range(16)]
    bad = run_all(threads)
    check(len(results) == 320 and not bad,
          f"16 clients x 20 requests of 1-30 lines: {len(results) - len(bad)}/320 complete and correct "
          f"in {time.time() - start:.1f} s {bad[:2]}")
    status, out, _ = s.request("GET", "/health")
    check(status == 200, f"healthy after the concurrent clients ({status})")

    # A burst of 128 clients connecting at once, 5 requests each (1-30 copies of a line), each on
    # a new connection: every one answered. cpp-httplib listens with a queue of 5 connections; the queue
    # overflowed and some connections were reset (64 at once: 31 of 640), until the server
    # widened it (bind_server).
    threads = [threading.Thread(target=client, args=(600 + i, 5, s), kwargs=dict(pool=[x for x in pool if x][:1]))
               for i in range(128)]
    start = time.time()
    bad = run_all(threads)
    check(len(results) == 640 and not bad, f"128 clients connecting at once, 5 requests each: "
                                           f"{len(results) - len(bad)}/640 answered in {time.time() - start:.1f} s {bad[:2]}")
    if shutil.which("ss"):   # (iproute2) its Send-Q of a listening socket is the queue's length
        row = subprocess.run(["ss", "-ltnH", f"sport = :{s.port}"], capture_output=True, text=True).stdout.split()
        check(len(row) > 2 and int(row[2]) >= 128, f"the server's listen queue holds 128 connections or more "
                                                   f"(ss: {' '.join(row[:4])}; cpp-httplib's own is 5)")
    else:
        skip("the listen queue's length: no ss (Debian's iproute2) to read it")

    # Concurrent requests of two searches (greedy, beam 4) never share a batch: each gets its own.
    greedy = dict(zip(pool, translate_stdin(model, pool, "--beam", "1")))
    threads = [threading.Thread(target=client, args=(300 + i, 5, s), kwargs=dict(beam=1, expected=greedy))
               for i in range(4)]
    threads += [threading.Thread(target=client, args=(400 + i, 5, s)) for i in range(4)]
    bad = run_all(threads)
    check(len(results) == 40 and not bad, f"4 greedy + 4 beam-4 concurrent clients: 40 answers equal "
                                          f"./translate --beam 1 / --beam 4 {bad[:2]}")

    # Sampling per request: item i draws from line i's stream, so a request's samples equal
    # ./translate --sampling over its lines, whatever the requests it shares a batch with (8
    # sampling requests of random lines at once, seeds 7 and 8 by turns, which must not share a
    # batch, and greedy ones beside them); another seed, another sample.
    plain = [x for x in pool if x]
    opts = dict(sampling="topk:5", seed=7, temperature=1.5)

    def cli_opts(seed):
        return ("--sampling", "topk:5", "--seed", str(seed), "--temperature", "1.5")

    r = random.Random(5)
    requests = [[r.choice(plain) for _ in range(r.randint(5, 25))] for _ in range(8)]
    seeds = [7 + i % 2 for i in range(len(requests))]
    wanted = [translate_stdin(model, lines, *cli_opts(seed)) for lines, seed in zip(requests, seeds)]
    answers = [None] * len(requests)

    def sampler(i):
        status, out, _ = s.translate(items(requests[i], **dict(opts, seed=seeds[i])))
        answers[i] = [o["tgt"] for o in out[0]] if status == 200 else f"status {status}: {out}"

    threads = [threading.Thread(target=sampler, args=(i,)) for i in range(len(requests))]
    threads += [threading.Thread(target=client, args=(500 + i, 3, s), kwargs=dict(beam=1, expected=greedy))
                for i in range(2)]
    bad = run_all(threads)
    same = sum(a == w for a, w in zip(answers, wanted))
    check(same == len(requests) and len(results) == 6 and not bad,
          f"8 concurrent sampling requests (topk:5, seeds 7 and 8 by turns, T 1.5) equal ./translate --sampling "
          f"--seed over their lines: {same}/8; 6 greedy requests beside them correct {bad[:2]}")
    # (the seeds must matter, or the check above could not tell them apart)
    seed8 = translate_stdin(model, requests[0], *cli_opts(8))
    differ = sum(a != b for a, b in zip(seed8, wanted[0]))
    check(differ > 0, f"seeds 7 and 8 sample differently: {differ} of {len(requests[0])} lines of request 1 differ")

    # Bad requests: status and message.
    too_many = json.dumps(items(["sun"] * 51)).encode()
    too_big = json.dumps(items(["sun " * 7500])).encode()
    too_long = json.dumps(items(["sun moon " * 15])).encode()
    bad_requests = [
        (b'[{"src": "a"', 400, "malformed JSON"),
        (b'', 400, "malformed JSON"),
        (b'[{"src": "a", "alpha": NaN}]', 400, "malformed JSON"),
        (b'[' * 10000, 400, "nesting too deep"),
        (b'{"src": "a"}', 400, "must be a JSON array"),
        (b'[{"src": "a"}, "b"]', 400, "item 2: must be an object"),
        (b'[{"id": 1}]', 400, 'item 1: no "src"'),
        (b'[{"src": ["a"]}]', 400, 'item 1: "src" must be a string'),
        (b'[{"src": "a", "beam": 99}]', 400, 'item 1: "beam" must be an integer in 1..16'),
        (b'[{"src": "a", "beam": 2.5}]', 400, 'item 1: "beam" must be an integer'),
        (b'[{"src": "a", "beam": "2"}]', 400, 'item 1: "beam" must be an integer'),
        (b'[{"src": "a", "beam": 1e999}]', 400, 'item 1: "beam" must be an integer'),
        (b'[{"src": "a", "alpha": -1}]', 400, 'item 1: "alpha" must be a number in 0..10'),
        (b'[{"src": "a", "beam": 2, "nbest": 3}]', 400, '"nbest" 3 is more than "beam" 2'),
        (b'[{"src": "a", "beam": 2}, {"src": "b", "beam": 3}]', 400, 'item 2: "beam" is 3, item 1 said 2'),
        (b'[{"src": "a", "colour": 1}]', 400, 'item 1: unknown key "colour"'),
        (b'[{"src": "a", "sampling": "topk:0"}]', 400, 'item 1: "sampling" must be "topk:K"'),
        (b'[{"src": "a", "sampling": "top:5"}]', 400, 'item 1: "sampling" must be "topk:K"'),
        (b'[{"src": "a", "sampling": 5}]', 400, 'item 1: "sampling" must be "topk:K"'),
        (b'[{"src": "a"}, {"src": "b", "sampling": "topk:5", "beam": 2}]', 400,
         'item 2: "sampling" draws one token per step: "beam" and "nbest" must be 1'),
        # (the server's beam 4 is not the request's: the message names the item that gave "nbest")
        (b'[{"src": "a", "sampling": "topk:5"}, {"src": "b", "nbest": 2}]', 400,
         'item 2: "sampling" draws one token per step: "beam" and "nbest" must be 1'),
        (b'[{"src": "a", "temperature": 2}]', 400, 'item 1: "temperature" applies to sampling'),
        (b'[{"src": "a", "seed": 2}]', 400, 'item 1: "seed" applies to sampling'),
        (b'[{"src": "a", "sampling": "topp:0.9", "temperature": 0}]', 400, 'item 1: "temperature" must be more than 0'),
        (b'[{"src": "a", "sampling": "topk:5", "seed": -1}]', 400, 'item 1: "seed" must be an integer'),
        # 2^53 + 1 reads as 2^53 in a double: it had been accepted, and drawn 2^53's samples
        (b'[{"src": "a", "sampling": "topk:5", "seed": 9007199254740993}]', 400,
         'item 1: "seed" must be an integer in 0..9007199254740991'),
        (b'[{"src": "a", "sampling": "topk:5"}, {"src": "b", "sampling": "topk:6"}]', 400,
         'item 2: "sampling" is "topk:6", item 1 said "topk:5"'),
        (b'[{"src": "a"}, {"src": "sun \xff moon"}]', 400, "item 2: invalid UTF-8 at byte 4"),
        (b'[{"src": "sun \\ud800 moon"}]', 400, "item 1: invalid UTF-8 at byte 4"),
        (too_long, 400, re.compile(r"^item 1: \d+ tokens, more than --max-input-tokens 20 \(--split-long")),
        (too_many, 413, "51 lines, more than --max-request-lines 50"),
        (too_big, 413, "larger than --max-request-bytes 20000"),
        # 10,000 values in 20 KB: refused while parsing, before they take 50 times their bytes
        (b"[" + b",".join([b"0"] * 9999) + b"]", 413, "more than --max-request-lines 50 lines of at most 8 keys"),
        (b'[{"src": "a", "src": 5}]', 400, 'item 1: key "src" given twice'),
        # below 1.4e-45 a float is 0: the decoder thread had stopped the whole server on it
        (b'[{"src": "a", "sampling": "topk:5", "temperature": 1e-50}]', 400, 'item 1: "temperature" must be more than 0'),
        (b'[{"src": "a", "sampling": "topp:1e-50"}]', 400, 'item 1: "sampling" must be "topk:K"'),
        # hex and a leading space, which strtod reads: refused, as in every number option
        (b'[{"src": "a", "sampling": "topp:0x1p-1"}]', 400, 'item 1: "sampling" must be "topk:K"'),
        (b'[{"src": "a", "sampling": "topp: 0.5"}]', 400, 'item 1: "sampling" must be "topk:K"'),
    ]
    for body, want_status, want_msg in bad_requests:
        try:
            status, out, raw = s.request("POST", "/translate", body)
            msg = out.get("error", "") if isinstance(out, dict) else raw[:100].decode("utf-8", "replace")
        except Exception as ex:   # noqa: BLE001
            status, msg = None, repr(ex)
        shown = body[:40] + (b"..." if len(body) > 40 else b"")
        found = want_msg.search(msg) if isinstance(want_msg, re.Pattern) else want_msg in msg
        check(status == want_status and found,
              f"POST {shown!r}: {status} (want {want_status}), message: {msg}")
    # The edges those refusals must not reach: "nbest" 1 beside "sampling" (one token a step is
    # one list), and a body of exactly --max-request-bytes (JSON's spaces after the array).
    exact = b'[{"src": "sun"}]'
    exact += b" " * (20000 - len(exact))
    for body, what in [(b'[{"src": "sun", "sampling": "topk:5", "nbest": 1}]', '"sampling" with "nbest": 1'),
                       (exact, f"a body of exactly --max-request-bytes 20000 ({len(exact)} bytes)")]:
        status, out, raw = s.request("POST", "/translate", body)
        check(status == 200 and isinstance(out, list) and len(out) == 1 and out[0][0]["src"] == "sun",
              f"{what}: answered, 200 ({status}, {raw[:80]!r})")
    status, _, raw = s.request("POST", "/translate", exact + b" ")
    check(status == 413, f"a body of --max-request-bytes + 1: 413 ({status}, {raw[:80]!r})")
    # A request's bytes echoed in a message (an unknown key, a path) that are not UTF-8: the answer
    # is still JSON, which is UTF-8, each bad byte a U+FFFD (they had been copied raw: not JSON).
    for method, path, body, want in [
            ("POST", "/translate", b'[{"src": "a", "\xff\xfe": 1}]', 'item 1: unknown key "\ufffd\ufffd"'),
            ("POST", "/translate", b'[{"src": "a", "\\ud800": 1}]', 'item 1: unknown key "\ufffd\ufffd\ufffd"'),
            ("GET", "/%FF", None, "no such path: GET /\ufffd ")]:
        status, out, raw = s.request(method, path, body)
        msg = out.get("error", "") if isinstance(out, dict) else f"not JSON: {raw[:60]!r}"
        check(status in (400, 404) and want in msg, f"{method} {path} {body!r}: {status}, message: {ascii(msg)}")
    # A UTF-8 byte-order mark before the JSON (Windows tools write one; RFC 8259 8.1 lets a parser
    # ignore it, as Python's json.loads of bytes does): the request is translated as without it
    # (it had been refused as malformed JSON), and a malformed body's error still counts its
    # bytes as sent, the mark's 3 included. A U+FEFF further in is not skipped.
    bom = b"\xef\xbb\xbf"
    status, out, _ = s.request("POST", "/translate", bom + json.dumps(items(pool[:3])).encode())
    err = answer_errors(status, out, pool[:3], expected)
    check(err == "", f"a body starting with a UTF-8 byte-order mark: translated as without it {err} {out}")
    for body, want in [(bom + b'[{"src": "a"', "malformed JSON: unterminated object at byte 15"),
                       (bom + b" " + bom + b"[]", "malformed JSON: expected a value at byte 4")]:
        status, out, raw = s.request("POST", "/translate", body)
        msg = out.get("error", "") if isinstance(out, dict) else f"not JSON: {raw[:60]!r}"
        check(status == 400 and want in msg, f"POST {body!r}: {status} (want 400 {want!r}), message: {msg}")
    # A U+FEFF inside a "src" is the client's text, translated and scored as ./translate does past
    # its input's start (lines 2.. here; at the start it would be dropped as a mark). The tiny
    # model translates most lines to nothing: the scores tell a kept mark from a dropped one.
    marked = ["\ufeff" + pool[0], pool[1] + " \ufeff"]
    kept = [row.split(" ||| ", 1) for row in translate_stdin(model, [pool[2], *marked], "--nbest", "2")]
    kept = [f"{int(n) - 1} ||| {rest}" for n, rest in kept if n != "0"]
    dropped = translate_stdin(model, [pool[0], pool[1]], "--nbest", "2")
    status, out, _ = s.translate(items(marked, nbest=2))
    ok, worst = same_nbest(status, out, kept, len(marked), 2)
    _, apart = same_nbest(status, out, dropped, len(marked), 2)
    check(ok and worst <= 1e-5 and apart > 1e-4,
          f'U+FEFF inside "src" kept as text: texts and scores equal ./translate\'s past line 1 (largest '
          f'difference {worst:.2e}; {apart:.2e} from the lines without the mark), status {status}')
    # --max-request-bytes for the bodies httplib cannot cap by their Content-Length: chunked, and
    # one without a length (read to the end of the connection); both had been read whole.
    def one_answer(c):
        """One whole HTTP answer read from socket c (headers, then Content-Length bytes)."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                return data
            data += chunk
        length = int(re.search(rb"Content-Length: (\d+)", data, re.I).group(1))
        while len(data) - data.index(b"\r\n\r\n") - 4 < length:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
        return data

    def raw_post(head, body_parts, half_close=False, then=None):
        """The answers to a POST sent by hand, and to the request `then` sent after its answer."""
        with socket.create_connection(("127.0.0.1", s.port), timeout=CALL_TIMEOUT_S) as c:
            c.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n")
            try:
                for part in body_parts:
                    c.sendall(part)
                if half_close:
                    c.shutdown(socket.SHUT_WR)
            except OSError:   # the server answered and closed while the rest was sent
                pass
            data = one_answer(c)
            if then:
                c.sendall(then)
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    return data
                data += chunk
    big = json.dumps(items(pool[:40] * 20)).encode()   # about 30 KB, over the 20,000 bytes
    chunks = [b"%x\r\n%s\r\n" % (len(big[i:i + 4096]), big[i:i + 4096]) for i in range(0, len(big), 4096)] + [b"0\r\n\r\n"]
    # chunked, then a GET on the same connection once the 413 is in: answered (the rest of the
    # body read and dropped; stopping there had left it to be taken for requests, 400s)
    health = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    for what, head, parts, half, then, want in [
            ("chunked, then GET /health", b"Transfer-Encoding: chunked\r\n", chunks, False, health, [b"413", b"200"]),
            ("without a length, half-closed", b"Connection: close\r\n", [big], True, None, [b"413"])]:
        reply = raw_post(head, parts, half, then)
        statuses = re.findall(rb"HTTP/1\.1 (\d+)", reply)
        check(statuses == want and b"larger than --max-request-bytes 20000" in reply,
              f"a {len(big)}-byte body {what}: answers {[x.decode() for x in statuses]} (want {[x.decode() for x in want]})")
    # a body past 8 KiB sent as curl -d sends it (httplib parses such bodies as forms, and caps them at
    # 8 KiB by itself), and a multipart form (refused with a message)
    form_body = b"[" + b" " * 9000 + json.dumps(items(pool[:40]))[1:].encode()   # (JSON's whitespace)
    status, out, _ = s.request("POST", "/translate", form_body, {"Content-Type": "application/x-www-form-urlencoded"})
    err = answer_errors(status, out, pool[:40], expected) if status == 200 else f"status {status} {out}"
    check(err == "" and len(form_body) > 8192,
          f"a {len(form_body)}-byte body as application/x-www-form-urlencoded (curl -d): translated {err}")
    multipart = b'--XyZ\r\nContent-Disposition: form-data; name="f"\r\n\r\n[]\r\n--XyZ--\r\n'
    status, out, _ = s.request("POST", "/translate", multipart, {"Content-Type": "multipart/form-data; boundary=XyZ"})
    check(status == 415 and "multipart" in (out or {}).get("error", ""), f"a multipart/form-data body: {status} {out}")
    status, out, _ = s.request("GET", "/nope")
    check(status == 404 and "no such path: GET /nope" in out.get("error", ""), f"GET /nope: {status} {out}")
    status, out, _ = s.request("POST", "/translate/x", b"[]")
    check(status == 404, f"POST /translate/x: {status}")
    status, out, _ = s.translate([])
    check(status == 200 and out == [[]], f"an empty list gives [[]] ({status} {out})")
    t0 = time.time()
    err = answer_errors(*s.translate(items(pool[:30]))[:2], pool[:30], expected)
    decode_30 = time.time() - t0   # the control for the --batch-tokens check below
    check(err == "" and s.proc.poll() is None, f"after the bad requests the server answers correctly {err}")

    # Clients that disconnect mid-request (one while sending its body, one while its lines are
    # decoded) beside 4 well-behaved ones.
    def hang_up_sending():
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            c.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n[{\"src\": \"sun")

    def hang_up_waiting():
        body = json.dumps(items(pool[:30])).encode()
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            c.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    threads = [threading.Thread(target=client, args=(100 + i, 5, s)) for i in range(4)]
    threads += [threading.Thread(target=f) for f in (hang_up_sending, hang_up_waiting) * 3]
    bad = run_all(threads)
    check(len(results) == 20 and not bad,
          f"6 clients hanging up mid-request: the other 4 clients' 20 answers correct {bad[:2]}")
    status, _, _ = s.request("GET", "/health")
    check(status == 200 and s.proc.poll() is None, f"healthy after the hang-ups ({status})")

    # The address: a port in use, a bad value.
    r = subprocess.run([TRANSLATE, "--model", model, "--serve", f"127.0.0.1:{s.port}"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=120)
    check(r.returncode == 1 and b"cannot listen on 127.0.0.1" in r.stderr,
          f"--serve on a port in use: exit 1 ({r.returncode}), {r.stderr.decode(errors='replace').strip()[:120]}")
    for opts, name in [(["--serve", "127.0.0.1:99999"], "--serve"), (["--serve", "localhost:"], "--serve"),
                       (["--serve", "[]:8080"], "--serve"),
                       (["--serve", "eighty"], "--serve"), (["--serve", "0", "--batch-wait", "-1"], "--batch-wait"),
                       (["--serve", "0", "--request-timeout", "0"], "--request-timeout"),
                       (["--serve", "0", "--max-request-beam", "65"], "--max-request-beam"),
                       (["--serve", "0", "--beam", "20"], "--max-request-beam")]:
        try:
            r = subprocess.run([TRANSLATE, "--model", model, *opts], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               timeout=30)
            code, said = r.returncode, r.stderr.decode(errors="replace").strip()
        except subprocess.TimeoutExpired as ex:   # (killed by subprocess.run)
            code, said = None, "still running after 30 s: it served " + (ex.stderr or b"").decode(errors="replace")[:60]
        check(code == 2 and name in said, f"{' '.join(opts)}: refused, exit 2 ({code}), {said[:100]}")
    # Brackets around the host (IPv6's [::1]:PORT) are dropped, those two only: "x127.0.0.1]" and
    # "[127.0.0.1x" are hosts of their own, that cannot be listened on (exit 1).
    for host in ["x127.0.0.1]", "[127.0.0.1x"]:
        try:
            r = subprocess.run([TRANSLATE, "--model", model, "--serve", f"{host}:0"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, timeout=30)
            code, said = r.returncode, r.stderr.decode(errors="replace").strip()
        except subprocess.TimeoutExpired as ex:
            code, said = None, "still running after 30 s: it served " + (ex.stderr or b"").decode(errors="replace")[:60]
        check(code == 1 and f"cannot listen on {host}:0" in said, f"--serve {host}:0: exit 1 ({code}), {said[:100]}")
    # "[127.0.0.1]:0" serves on 127.0.0.1; the largest port and a --beam equal to --max-request-beam
    # are taken (exit 1 only if another program holds port 65535). Each ends on SIGINT (Ctrl-C), exit
    # 0, saying so.
    for address, opts, want in [("[127.0.0.1]:0", [], "any port"), ("127.0.0.1:65535", ["--beam", "16"], "65535")]:
        sa = Server(model, *opts, address=address)
        ok = sa.port is not None and (want != "65535" or sa.port == 65535)
        if sa.proc.poll() is None:
            sa.proc.send_signal(signal.SIGINT)
        try:
            code = sa.wait_exit(60)
        except subprocess.TimeoutExpired:
            code = sa.stop()
        log = "".join(sa.log).strip()
        ok = ok and code == 0 and "translate: stopped (SIGINT)" in log or (
            want == "65535" and code == 1 and "cannot listen on 127.0.0.1:65535" in log)
        check(ok, f"--serve {address} {' '.join(opts)}: serves on 127.0.0.1, {want} (port {sa.port}), SIGINT ends it, "
                  f"exit {code}: {log[-110:]}")
    code = s.stop()
    check(code == 0, f"the first server stops on SIGTERM, exit 0 ({code})")
    # SIGTERM the moment the "serving" line is out, before the listener runs: it had been lost
    # (httplib's stop() did nothing yet), and the server served on until killed.
    codes = []
    for _ in range(40):
        p = subprocess.Popen([TRANSLATE, "--model", model, "--threads", "1", "--serve", "0"], stderr=subprocess.PIPE,
                             stdout=subprocess.DEVNULL)
        servers.append(p)
        while b"serving" not in p.stderr.readline() and p.poll() is None:
            pass
        p.send_signal(signal.SIGTERM)
        try:
            codes.append(p.wait(10))
        except subprocess.TimeoutExpired:
            codes.append("still serving 10 s later")
            p.kill()
            p.wait()
        p.stderr.close()
    check(codes == [0] * 40, f"40 servers sent SIGTERM right after their 'serving' line: all exit 0 ({sorted(set(map(str, codes)))})")

    # int8, --split-long, --no-batching: the same answers as ./translate with the same options.
    long_line = " ".join(WORDS * 4)
    lines = pool[:40] + [long_line]
    ref8 = translate_stdin(model, lines, "--precision", "int8", "--split-long", "--max-input-tokens", "20")
    s8 = Server(model, "--precision", "int8", "--split-long", "--max-input-tokens", "20", "--no-batching")
    status, out, _ = s8.translate(items(lines))
    got = [x["tgt"] for x in out[0]] if status == 200 else []
    check(got == ref8, f"int8 --split-long: 41 lines (one over-long, cut into pieces) equal ./translate's ({status})")
    # the cut line's 2-best: each piece's k-th best joined, scored by the length penalty over all
    # its tokens, as ./translate --nbest scores it
    ref_cut = translate_stdin(model, [long_line], "--precision", "int8", "--split-long", "--max-input-tokens", "20",
                              "--nbest", "2")
    status, out, _ = s8.translate(items([long_line], nbest=2))
    ok, worst = same_nbest(status, out, ref_cut, 1, 2)
    check(ok and worst <= 1e-5, f"int8 --split-long, nbest 2: the cut line's texts and scores equal ./translate "
                                f"--nbest's (largest score difference {worst:.2e}, status {status})")
    expected8 = dict(zip(lines, ref8))
    threads = [threading.Thread(target=client, args=(200 + i, 5, s8, lines[:40], expected8)) for i in range(4)]
    bad = run_all(threads)
    check(len(results) == 20 and not bad, f"int8, --no-batching, 4 concurrent clients: 20 answers correct {bad[:2]}")
    s8.stop()

    # int8 batched: a line's answer does not depend on the lines it was batched with (attention
    # runs over each sentence's own keys, so a sentence decodes alike alone and in any batch).
    ref8b = translate_stdin(model, pool[:40], "--precision", "int8", "--batch-tokens", "1")
    sb = Server(model, "--precision", "int8", "--batch-wait", "20", "--max-request-lines", "200000")
    threads = [threading.Thread(target=client, args=(300 + i, 5, sb, pool[:40], dict(zip(pool[:40], ref8b))))
               for i in range(8)]
    bad = run_all(threads)
    check(len(results) == 40 and not bad,
          f"int8 batched, 8 concurrent clients: 40 answers equal ./translate's, one line a batch {bad[:2]}")
    # One item of 150,000 distinct keys (2 MB, within these limits): refused at once for its
    # unknown keys (the check for a key given twice, run first, had compared each with each: 30 s).
    keys = json.dumps([dict(src="a", **{f"k{i}": 0 for i in range(150000)})]).encode()
    t0 = time.time()
    status, out, _ = sb.request("POST", "/translate", keys)
    took = time.time() - t0
    msg = (out or {}).get("error", "")
    check(status == 400 and 'unknown key "k0"' in msg and took < 5,
          f"an item of 150,000 keys: {status} in {took:.1f} s (want 400 within 5 s), {msg[:60]}")
    sb.stop()

    # An ensemble served (the model twice): /info names it, the answers are ./translate's.
    ref_ens = translate_stdin(model, pool[:30], "--ensemble", model)
    se = Server(model, "--ensemble", model)
    status, out, _ = se.request("GET", "/info")
    check(status == 200 and out.get("ensemble") == [model], f"--ensemble: GET /info lists the member ({status})")
    status, out, _ = se.translate(items(pool[:30]))
    got = [x["tgt"] for x in out[0]] if status == 200 else []
    check(got == ref_ens, f"--ensemble: 30 lines equal ./translate --ensemble's ({status})")
    se.stop()

    # A server's --nbest 3 gives way to a request's smaller "beam" (greedy: one list; beam 2: two),
    # as its --beam gives way to "sampling" (such requests had been refused, 400, for an "nbest"
    # they never gave); an "nbest" a request gives must still fit its beam.
    sn = Server(model, "--nbest", "3")
    lines = [x for x in pool if x][:5]
    status, out, raw = sn.translate(items(lines, beam=1))
    got = [[x["tgt"] for x in o] for o in out] if status == 200 else raw[:100].decode(errors="replace")
    want = [translate_stdin(model, lines, "--beam", "1")]
    check(got == want, f'--nbest 3, a request\'s "beam": 1: one list of {len(lines)}, ./translate --beam 1\'s '
                       f'(first: {str(got)[:60]} vs {str(want)[:60]})')
    status, out, raw = sn.translate(items(lines, beam=2))
    ok, worst = same_nbest(status, out, translate_stdin(model, lines, "--beam", "2", "--nbest", "2"), len(lines), 2)
    check(ok and worst <= 1e-5, f'--nbest 3, a request\'s "beam": 2: two lists, ./translate --beam 2 --nbest 2\'s '
                                f"(status {status}, largest score difference {worst:.2e}) {raw[:100] if status != 200 else ''}")
    status, out, _ = sn.translate(items(lines, beam=2, nbest=3))
    check(status == 400 and '"nbest" 3 is more than "beam" 2' in (out or {}).get("error", ""),
          f'--nbest 3, a request\'s "beam": 2, "nbest": 3: {status} {out}')
    sn.stop()

    # The per-request timeout; --batch-tokens starting a batch long before --batch-wait.
    st = Server(model, "--batch-wait", "10000", "--request-timeout", "1", "--split-sentences")
    t0 = time.time()
    status, out, _ = st.translate(items(["sun"]))
    took = time.time() - t0
    check(status == 503 and "--request-timeout 1 s" in out.get("error", "") and took < 5,
          f"a request waiting longer than --request-timeout: 503 after {took:.1f} s, {out}")
    check(st.request("GET", "/health")[0] == 200, "healthy after the timeout")
    # /health's queued_lines counts a request's lines, not the pieces --split-sentences cuts
    # them into (it had said 3 for this one line), while the request waits for its batch
    answer = {}
    t = threading.Thread(target=lambda: answer.update(r=st.translate(items(["Sun is up. Moon is up. Sky is up."]))))
    t.start()
    time.sleep(0.3)
    status, out, _ = st.request("GET", "/health")
    t.join(CALL_TIMEOUT_S)
    check(status == 200 and out.get("queued_lines") == 1 and answer["r"][0] == 503,
          f"/health while a line of 3 sentences waits (--split-sentences): {out} (want queued_lines 1)")
    # both timed out while queued: dropped, none of their sources (1 line; 3 sentences) decoded
    status, out, _ = st.request("GET", "/health")
    check(status == 200 and (out or {}).get("timed_out") == {"requests": 2, "sources_not_decoded": 4},
          f"/health after the two timeouts: {out} (want timed_out: 2 requests, 4 sources not decoded)")
    # A request that times out while its batch decodes: its sources not yet in a model batch are
    # left out (all had been decoded for nobody, the decoder busy for a second or more while other
    # requests waited). 1,000 lines of 40 words at beam 16, a few dozen lines a model batch; the
    # timeout 4 times what reading, checking and encoding them takes here (the same request with
    # a bad "beam" in its last item, refused after the other 999: this machine's speed), well
    # short of decoding them (about 25 times that). SIGTERM after the 503 lets the decoder end
    # that batch, then the closing line counts them.
    rng = random.Random(7)
    many = [" ".join(rng.choice(WORDS) for _ in range(40)) for _ in range(1000)]
    bad_last = items(many, beam=16)
    bad_last[-1]["beam"] = 99
    t0 = time.time()
    refused = st.translate(bad_last)[0]
    timeout = max(0.05, 4 * (time.time() - t0))
    st.stop()
    sd = Server(model, "--request-timeout", f"{timeout:.3f}")
    status, out, _ = sd.translate(items(many, beam=16))
    t0 = time.time()
    code = sd.stop()
    took = time.time() - t0
    said = next((x.strip() for x in sd.log if "stopped" in x), "no closing line")
    m = re.search(r"(\d+) requests timed out \((\d+) of their sources not decoded\)", said)
    timed_out, left_out = (int(m.group(1)), int(m.group(2))) if m else (None, None)
    check(refused == 400 and status == 503 and code == 0 and timed_out == 1 and left_out is not None and
          0 < left_out < 1000,
          f"a beam-16 request of 1,000 lines timed out (--request-timeout {timeout:.3f}, {status}) while decoded: "
          f"{left_out} of its lines left out of the batch (want 1..999), the server stopped {took:.1f} s after "
          f"the 503: '{said}'")
    sb = Server(model, "--batch-wait", "10000", "--batch-tokens", "60")
    t0 = time.time()
    status, out, _ = sb.translate(items(pool[:30]))
    took = time.time() - t0
    err = answer_errors(status, out, pool[:30], expected)
    check(err == "" and took < decode_30 + 8, f"30 lines (> --batch-tokens 60) decoded at once, not after "
                                              f"--batch-wait 10 s: {took:.1f} s (with --batch-wait 5 ms: "
                                              f"{decode_30:.1f} s) {err}")
    sb.stop()

    out_of_memory(model, pool, expected)
    nan_answers(model, pool)

    # SIGTERM while a request waits: it is answered, new connections are refused, exit 0.
    sg = Server(model, "--batch-wait", "2000")
    answer = {}

    def in_flight():
        answer["r"] = sg.translate(items(pool[:30]))

    t = threading.Thread(target=in_flight)
    t.start()
    time.sleep(0.7)
    sg.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    try:
        socket.create_connection(("127.0.0.1", sg.port), timeout=5).close()
        refused = False
    except OSError:
        refused = True
    t.join(CALL_TIMEOUT_S)
    err = answer_errors(*answer["r"][:2], pool[:30], expected) if "r" in answer else "no answer"
    check(err == "", f"SIGTERM during a request: the request is answered completely {err}")
    check(refused, "after SIGTERM new connections are refused")
    try:
        code = sg.wait_exit(60)
    except subprocess.TimeoutExpired:
        code = "still running after 60 s"
    check(code == 0 and any("stopped (SIGTERM)" in x for x in sg.log),
          f"after SIGTERM the server exits 0 ({code}), {sg.log[-1].strip() if sg.log else ''}")


def main_cuda():
    """SERVE_DEVICE=cuda: the service on the GPU (a real one, or the CUDA emulator that
    TRANSFORMER_CUDA_EMULATOR names): /info says so, and the answers to concurrent requests,
    batched together on the GPU in fp32, equal the CPU's ./translate of each line alone (the GPU's
    fp32 decodes the CPU's tokens, and a sentence decodes alike alone and in a batch)."""
    probe = subprocess.run([TRANSLATE, "--device", "cuda", "--model", "/nonexistent"], input=b"",
                           capture_output=True)
    why = probe.stderr.decode(errors="replace").strip().split("\n")[0]
    if re.search(r"no CUDA backend|NVIDIA driver|no CUDA device|sees no", why):
        skip(f"serve on the GPU: no GPU here and no emulator named ({why})")
        return
    model = train_model()
    rng = random.Random(16)
    pool = sorted(set(toy_sentence(rng, 1, 8) for _ in range(60))) + ["", "sun ñ moon"]
    expected = dict(zip(pool, translate_stdin(model, pool, "--device", "cpu", "--batch-tokens", "1")))
    s = Server(model, "--device", "cuda", "--precision", "fp32", "--batch-wait", "20")
    check(s.port is not None, f"--serve with --device cuda starts ({''.join(s.log).strip()[-150:]})")
    if s.port is None:
        return
    status, out, _ = s.request("GET", "/info")
    check(status == 200 and out["device"] == "cuda" and out["precision"] == "fp32",
          f"GET /info names the GPU: {out.get('device') if out else status}, {out.get('precision') if out else ''}")
    results = []
    lock = threading.Lock()

    def client(seed):
        r = random.Random(seed)
        for _ in range(5):
            lines = [r.choice(pool) for _ in range(r.randint(1, 30))]
            try:
                e = answer_errors(*s.translate(items(lines))[:2], lines, expected)
            except Exception as ex:   # noqa: BLE001 - any failure is a failed answer
                e = f"exception {ex!r}"
            with lock:
                results.append(e)

    threads = [threading.Thread(target=client, args=(700 + i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(CALL_TIMEOUT_S * 2)
    bad = [e for e in results if e]
    check(len(results) == 20 and not bad, f"4 clients x 5 requests of 1-30 lines on the GPU, batched: "
                                          f"{len(results) - len(bad)}/20 equal the CPU's ./translate {bad[:2]}")
    code = s.stop()
    check(code == 0, f"SIGTERM: the GPU server exits 0 ({code})")
    device_out_of_memory(model, pool, expected)


def device_out_of_memory(model, pool, expected):
    """On the emulator, whose device memory CUDA_EMULATOR_MEMORY_MB sets: a request whose batch the
    device has no room for is answered 503 naming cudaMalloc's failure, and the server goes on
    (the CUDA backend's allocation had ended the program)."""
    if not os.environ.get("TRANSFORMER_CUDA_EMULATOR"):
        skip("out of GPU memory in a batch: a real GPU's memory cannot be limited here")
        return
    os.environ["CUDA_EMULATOR_MEMORY_MB"] = "40"
    so = Server(model, "--device", "cuda", "--precision", "fp32", "--batch-wait", "1", "--max-request-lines", "200")
    del os.environ["CUDA_EMULATOR_MEMORY_MB"]
    rng = random.Random(5)
    big = [" ".join(rng.choice(WORDS) for _ in range(18)) for _ in range(200)]
    small = [x for x in pool if x][:3]
    first = answer_errors(*so.translate(items(small))[:2], small, expected)
    try:
        status, out, raw = so.translate(items(big, beam=16))
    except (OSError, http.client.HTTPException) as e:   # the server gone
        status, out, raw = f"no answer ({e!r}; server exit {so.proc.wait(10)})", None, b""
    error = (out or {}).get("error", "") if isinstance(out, dict) else raw[:100]
    check(first == "" and status == 503 and "cannot allocate" in error and "out of memory" in error,
          f"40 MB of emulated device memory: a beam-16 request of 200 lines is answered 503 ({status}), {error!r}")
    after = answer_errors(*so.translate(items(small))[:2], small, expected) if so.proc.poll() is None else "server gone"
    check(after == "", f"... and the server goes on: the next request equals the CPU's ./translate {after}")
    so.stop()


def served_by_this_build():
    """False when ./translate was built without cpp-httplib (make HTTP=0, or httplib.h not found):
    then --serve must be refused, with exit 2 and the reason, before any model is loaded."""
    version = subprocess.run([TRANSLATE, "--version"], capture_output=True, text=True).stdout
    if "--serve: no" not in version:
        return True
    r = subprocess.run([TRANSLATE, "--serve", "0", "--model", "/nonexistent"], capture_output=True, text=True)
    check(r.returncode == 2 and "cpp-httplib" in r.stderr,
          f"built without cpp-httplib, --serve is refused: exit {r.returncode}, {r.stderr.strip()[:200]}")
    if not os.path.isfile(BIN):
        skip("serve: this ./translate was built without cpp-httplib; the service itself is not tested")
    return False


try:   # (every SKIP is counted by checks.skip)
    if os.environ.get("SERVE_DEVICE") == "cuda":
        if served_by_this_build():
            main_cuda()
    elif served_by_this_build():
        main()
except Exception as ex:   # noqa: BLE001 - an error anywhere is a failure, reported
    import traceback
    traceback.print_exc()
    check(False, f"the test ran to its end ({ex!r})")
finally:
    cleanup()
sys.exit(summary("serve"))
