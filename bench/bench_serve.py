#!/usr/bin/env python3
"""bench/bench_serve.py [MODEL] — `./translate --serve` throughput and latency (`make bench-serve`).

The same LINES lines of DATA are translated by ./translate reading them from stdin (batch
mode: the reference) and by the server with 1, 8 and 32 concurrent clients, each sending one
line per request over a kept-alive connection, with dynamic batching on (--batch-wait WAIT ms)
and off (--no-batching). Prints lines/s, the ratio to stdin mode, and the median and p99
request latency, and checks that every answer equals stdin mode's translation.

  MODEL      checkpoint (default runs/default/average.safetensors); SKIP, saying so, when absent
  DATA       source text (default data/corpus/default/test.en); LINES first lines (default 200)
  CLIENTS    concurrent clients (default "1 8 32"); WAIT --batch-wait in ms (default 5)
  TRANSLATE  the program (default ./translate); extra ./translate options in OPTS (e.g. --beam 1)
  THREADS    OpenMP threads of both sides (default: OpenMP's, all cores)
Python's standard library is the client (threads, http.client); it shares the machine's cores
with the server, as a real client on the same machine would.
"""
import http.client
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time

from torch_check import cpu_model   # bench/ (this script's folder); no torch imported

MODEL = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else "runs/default/average.safetensors"
DATA = os.environ.get("DATA", "data/corpus/default/test.en")
LINES = int(os.environ.get("LINES", "200"))
CLIENTS = [int(c) for c in os.environ.get("CLIENTS", "1 8 32").split()]
WAIT = os.environ.get("WAIT", "5")
TRANSLATE = os.environ.get("TRANSLATE", "./translate")
OPTS = shlex.split(os.environ.get("OPTS", ""))
if os.environ.get("THREADS"):
    os.environ["OMP_NUM_THREADS"] = os.environ["THREADS"]


def stdin_mode(lines):
    """(seconds without the model's loading, translations): ./translate < lines."""
    text = "\n".join(lines).encode() + b"\n"
    t0 = time.time()
    subprocess.run([TRANSLATE, "--model", MODEL, *OPTS], input=b"", check=True, stdout=subprocess.DEVNULL)
    load = time.time() - t0
    t0 = time.time()
    r = subprocess.run([TRANSLATE, "--model", MODEL, *OPTS], input=text, check=True, stdout=subprocess.PIPE)
    return time.time() - t0 - load, load, r.stdout.decode().split("\n")[:-1]


def start_server(*opts):
    p = subprocess.Popen([TRANSLATE, "--model", MODEL, *OPTS, "--serve", "0", *opts], stderr=subprocess.PIPE)
    for raw in p.stderr:
        m = re.search(r"http://127\.0\.0\.1:(\d+) ", raw.decode(errors="replace"))
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()   # drain
            return p, int(m.group(1))
    raise RuntimeError("the server did not start")


def run_clients(port, lines, n_clients):
    """(seconds, latencies, answers): n_clients threads send one line per request until done."""
    answers = [None] * len(lines)
    latencies = []
    next_line = [0]
    lock = threading.Lock()

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        while True:
            with lock:
                i = next_line[0]
                next_line[0] += 1
            if i >= len(lines):
                break
            body = json.dumps([{"src": lines[i]}]).encode()
            t0 = time.time()
            conn.request("POST", "/translate", body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            raw = r.read()
            took = time.time() - t0
            answers[i] = json.loads(raw)[0][0]["tgt"] if r.status == 200 else None
            with lock:
                latencies.append(took)
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(n_clients)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.time() - t0, latencies, answers


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    if not os.path.isfile(MODEL):
        print(f"bench_serve: SKIP, no model at {MODEL} (train one: make && ./train; or MODEL=FILE)")
        return 0
    if not os.path.isfile(DATA):
        print(f"bench_serve: SKIP, no text at {DATA} (make data, or DATA=FILE)")
        return 0
    with open(DATA, encoding="utf-8") as f:
        lines = [x.rstrip("\n") for x in f][:LINES]
    cpu = cpu_model()
    threads = os.environ.get("OMP_NUM_THREADS", "all")
    print(f"# CPU: {cpu}; {os.cpu_count()} cores, OpenMP threads: {threads}; "
          f"load average {open('/proc/loadavg').read().split()[0]}")
    print(f"# {TRANSLATE} --model {MODEL} {' '.join(OPTS)}; {len(lines)} lines of {DATA}; one line per request")
    secs, load, reference = stdin_mode(lines)
    base = len(lines) / secs
    print(f"{'mode':<34} | {'lines/s':>8} | {'vs stdin':>8} | {'median ms':>9} | {'p99 ms':>8} | same output")
    print(f"{'stdin (batch mode), model load excluded':<34} | {base:8.1f} | {1:8.2f} | {'-':>9} | {'-':>8} | reference"
          f" ({secs:.1f} s + {load:.1f} s load)")
    for batching in (True, False):
        proc, port = start_server(*(["--batch-wait", WAIT] if batching else ["--no-batching"]))
        try:
            for n in CLIENTS:
                secs, lat, answers = run_clients(port, lines, n)
                same = sum(a == r for a, r in zip(answers, reference))
                name = f"serve, {n} client{'s' if n > 1 else ''}, " + (f"batching ({WAIT} ms)" if batching else "no batching")
                print(f"{name:<34} | {len(lines) / secs:8.1f} | {len(lines) / secs / base:8.2f} | "
                      f"{1000 * statistics.median(lat):9.0f} | {1000 * percentile(lat, 0.99):8.0f} | "
                      f"{same}/{len(lines)}", flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
        print(f"# server exit status {proc.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
