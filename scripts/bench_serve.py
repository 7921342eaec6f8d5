#!/usr/bin/env python3
"""Serving overhead of `ringlm serve` against `ringlm generate` on the same model and settings.
A measurement, not a test: it prints figures.

    python3 scripts/bench_serve.py MODEL [-n 256] [--runs 5] [-- SESSION FLAGS...]

Two figures for each side, both for decoding (tokens after the first):
  - CPU time per token, which a busy machine hardly changes: for generate, the child's CPU time
    of `-n N` runs minus that of `-n 1` runs; for the server, the server process's CPU time
    (/proc/PID/stat) over streamed /v1/completions requests of N tokens minus requests of 1.
    Expressed as tok/s of one core: tokens / CPU seconds.
  - wall-clock decode tok/s, best of the runs: generate's stats line, and for the server the
    time between the first and the last streamed event as the client receives them (HTTP, JSON,
    server-sent events included).
The model must not stop before N tokens (greedy stories260K and random-weight models do not).
"""

import argparse
import json
import os
import re
import resource
import select
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT = "Once upon a time"


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def generate(cli, model, n, flags):
    """(decode tok/s from the stats line, tokens, CPU seconds of the run)."""
    c0 = children_cpu()
    r = subprocess.run([cli, "generate", "-m", model, "-p", PROMPT, "-n", str(n), "--temp", "0", *flags],
                       capture_output=True, text=True, check=True)
    cpu = children_cpu() - c0
    m = re.search(r"decode ([0-9.]+) tok/s \((\d+) tokens\)", r.stderr)
    if not m:
        sys.exit(f"no decode figure in: {r.stderr}")
    return float(m.group(1)), int(m.group(2)) + 1, cpu


def start_server(cli, model, flags):
    proc = subprocess.Popen([cli, "serve", "-m", model, "--port", "0", "--quiet", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = b""
    while not line.endswith(b"\n"):
        select.select([proc.stdout], [], [], 60)
        c = os.read(proc.stdout.fileno(), 1)
        if not c:
            sys.exit("ringlm serve did not start")
        line += c
    return proc, int(line.decode().rsplit(":", 1)[1])


def process_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(port, n):
    """(client-side decode tok/s, tokens) of one streamed completion of n tokens."""
    body = json.dumps({"prompt": PROMPT, "max_tokens": n, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    # The client does as little as it can per read (it shares the CPU with the server): it notes
    # when each read arrived and keeps the tail, for the usage event.
    first = last = None
    tail = b""
    with urllib.request.urlopen(req) as r:
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            last = time.perf_counter()
            if first is None:
                first = last
            tail = (tail + chunk)[-4096:]
    tokens = json.loads(tail.rsplit(b"data: ", 2)[1].strip())["usage"]["completion_tokens"]
    return ((tokens - 1) / (last - first) if last > first else 0.0), tokens


def main():
    argv = sys.argv[1:]
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("-n", type=int, default=256, help="tokens per request (default 256)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "release", "bin", "ringlm"))
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)

    gen_wall, gen_cpu_n, gen_cpu_1, srv_wall = [], 0.0, 0.0, []
    proc, port = start_server(a.cli, a.model, flags)
    try:
        serve(port, 2)  # warm-up: pages of the model, the first connection
        srv_cpu_n = srv_cpu_1 = 0.0
        for _ in range(a.runs):
            tps, g_tokens, cpu = generate(a.cli, a.model, a.n, flags)
            gen_wall.append(tps)
            gen_cpu_n += cpu
            gen_cpu_1 += generate(a.cli, a.model, 1, flags)[2]
            c0 = process_cpu(proc.pid)
            tps, s_tokens = serve(port, a.n)
            c1 = process_cpu(proc.pid)
            serve(port, 1)
            c2 = process_cpu(proc.pid)
            srv_wall.append(tps)
            srv_cpu_n += c1 - c0
            srv_cpu_1 += c2 - c1
            if g_tokens != s_tokens:
                print(f"note: generate made {g_tokens} tokens, the server {s_tokens}")
    finally:
        proc.terminate()
        proc.wait()
    tokens = a.runs * (a.n - 1)
    gen_core = tokens / max(gen_cpu_n - gen_cpu_1, 1e-9)
    srv_core = tokens / max(srv_cpu_n - srv_cpu_1, 1e-9)
    g, s = max(gen_wall), max(srv_wall)
    print(f"model {os.path.basename(a.model)}, {a.n} tokens x {a.runs} runs, flags {' '.join(flags) or '(none)'}")
    print(f"  CPU time per token   generate {1e6 / gen_core:9.1f} us ({gen_core:9.1f} tok/s per core)"
          f"   serve {1e6 / srv_core:9.1f} us ({srv_core:9.1f} tok/s per core): {100 * srv_core / gen_core:.1f} %")
    print(f"  wall clock, best     generate {g:9.1f} tok/s   serve (client side) {s:9.1f} tok/s: {100 * s / g:.1f} %")


if __name__ == "__main__":
    main()
