#!/usr/bin/env python3
"""Serving overhead of `ringlm serve`: decode tok/s of one streamed request against `ringlm
generate` on the same model and settings. A measurement, not a test: it prints figures.

    python3 scripts/bench_serve.py MODEL [-n 256] [--runs 3] [-- SESSION FLAGS...]

For each run: `ringlm generate -m MODEL -p PROMPT -n N --temp 0` (its stats line's decode tok/s),
then one streamed /v1/completions request of N tokens (temperature 0) to a `ringlm serve` started
with the same session flags; the client's decode tok/s is (tokens - 1) / (time of the last
chunk - time of the first), measured where the client receives them, so it includes HTTP, JSON
and the server-sent events. The server's own figure (its /metrics) is printed too. Best of the
runs for each (the machine may be shared).
"""

import argparse
import json
import os
import re
import select
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT = "Once upon a time"


def generate_tps(cli, model, n, flags):
    r = subprocess.run([cli, "generate", "-m", model, "-p", PROMPT, "-n", str(n), "--temp", "0", *flags],
                       capture_output=True, text=True, check=True)
    m = re.search(r"decode ([0-9.]+) tok/s \((\d+) tokens\)", r.stderr)
    if not m:
        sys.exit(f"no decode figure in: {r.stderr}")
    return float(m.group(1)), int(m.group(2)) + 1


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


def serve_tps(port, n):
    body = json.dumps({"prompt": PROMPT, "max_tokens": n, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    # The client does as little as it can per chunk (it shares the CPU with the server): it
    # notes when each read arrived and how many events it held, and parses only the usage event.
    reads, tail = [], b""
    with urllib.request.urlopen(req) as r:
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            reads.append((time.perf_counter(), chunk.count(b"\n\ndata: {")))
            tail = (tail + chunk)[-4096:]
    usage = json.loads(tail.rsplit(b"data: ", 2)[1].strip())["usage"]
    # The first read holds the first content chunk (completions send no role chunk); the
    # events of the last read include the finish, usage and [DONE] events.
    times = [reads[0][0], reads[-1][0]]
    tokens = usage["completion_tokens"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
        m = re.search(rb"ringlm_decode_tokens_per_second ([0-9.e+]+)", r.read())
    return (tokens - 1) / (times[-1] - times[0]), float(m.group(1)), tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("-n", type=int, default=256, help="tokens to generate (default 256)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "release", "bin", "ringlm"))
    argv = sys.argv[1:]
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    a.flags = flags
    gen, client, server = [], [], []
    proc, port = start_server(a.cli, a.model, a.flags)
    try:
        for _ in range(a.runs):
            g, g_tokens = generate_tps(a.cli, a.model, a.n, a.flags)
            c, s, s_tokens = serve_tps(port, a.n)
            if g_tokens != s_tokens:
                print(f"note: generate made {g_tokens} tokens, the server {s_tokens}")
            gen.append(g)
            client.append(c)
            server.append(s)
    finally:
        proc.terminate()
        proc.wait()
    g, c, s = max(gen), max(client), max(server)
    print(f"model {os.path.basename(a.model)}, {a.n} tokens, flags {' '.join(a.flags) or '(none)'}, best of {a.runs}")
    print(f"  ringlm generate:           {g:10.1f} tok/s")
    print(f"  ringlm serve, client side: {c:10.1f} tok/s  ({100 * c / g:.1f} % of generate)")
    print(f"  ringlm serve, server side: {s:10.1f} tok/s  ({100 * s / g:.1f} % of generate)")


if __name__ == "__main__":
    main()
