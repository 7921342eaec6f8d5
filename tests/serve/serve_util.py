"""Helpers of the `ringlm serve` tests (Python standard library only): the test models, a server
started on a free loopback port, and a small urllib client.

Environment (set by CTest, see cmake/ringlmServeTests.cmake): RINGLM_CLI (the ringlm binary),
RINGLM_SHARED_DIR (../shared), RINGLM_TEST_DIR (where models and artifacts go).
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def shared_dir() -> str:
    return os.environ.get("RINGLM_SHARED_DIR") or os.path.join(ROOT, "..", "shared")


def cli() -> str:
    return os.environ.get("RINGLM_CLI") or os.path.join(ROOT, "build", "release", "bin", "ringlm")


def test_dir() -> str:
    d = os.environ.get("RINGLM_TEST_DIR") or os.path.join(ROOT, "build", "release", "serve-test")
    os.makedirs(d, exist_ok=True)
    return d


def golden_continuation() -> Optional[str]:
    """llama2.c's greedy stories260K text after "Once upon a time" (None when ../shared lacks it)."""
    path = os.path.join(shared_dir(), "references", "stories260K", "once-upon-a-time.greedy.txt")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        ref = f.read().rstrip("\n")
    prompt = "Once upon a time"
    return ref[len(prompt):] if ref.startswith(prompt) else None


def _convert(args: List[str], out: str) -> str:
    """Runs `ringlm convert ARGS -o out` unless `out` exists (written to a temporary name and
    renamed: tests running at the same time never see half a file)."""
    if os.path.exists(out):
        return out
    tmp = f"{out}.{os.getpid()}.tmp.rlm"
    subprocess.run([cli(), "convert", *args, "-q", "-o", tmp], check=True,
                   stdout=subprocess.DEVNULL)
    os.replace(tmp, out)
    return out


def stories_model() -> Optional[str]:
    """stories260K as f32 (the precision the golden text is checked at), or None without ../shared."""
    src = os.path.join(shared_dir(), "models", "stories260K")
    if not os.path.exists(os.path.join(src, "stories260K.bin")):
        return None
    return _convert([os.path.join(src, "stories260K.bin"), "--tokenizer",
                     os.path.join(src, "tok512.bin"), "--quant", "f32"],
                    os.path.join(test_dir(), "stories260K-f32.rlm"))


def chat_model() -> str:
    """A random-weight model of SmolLM2-135M's shape with 2 layers and a ChatML template: slow
    enough per token to hold a slot while a test acts (its 49,152 x 576 output layer in f32 is
    113 MB a token: ~240 tokens/s on a 38 GB/s host; in q8 it ran 1,200 tokens/s and a
    1,500-token reply could end before a test pressed Stop), and a real chat template. Its
    replies are noise. chat_page.mjs converts the same file."""
    return _convert(["--synthetic", "smollm2-135m", "--layers", "2", "--chat", "chatml",
                     "--quant", "f32"], os.path.join(test_dir(), "synthetic-chatml-2l-f32.rlm"))


class Server:
    """`ringlm serve` on 127.0.0.1 and a free port (--port 0; the port is read from its first
    line). stderr goes to a log file whose tail is shown when a test fails."""

    def __init__(self, model: str, *args: str, startup_s: float = 60) -> None:
        self.log_path = os.path.join(test_dir(), f"serve-{os.getpid()}-{time.time_ns()}.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([cli(), "serve", "-m", model, "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=self.log)
        line = b""
        end = time.monotonic() + startup_s
        while not line.endswith(b"\n"):
            left = end - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"ringlm serve did not start: {self.log_tail()}")
            r, _, _ = select.select([self.proc.stdout], [], [], min(left, 0.5))
            if r:
                c = os.read(self.proc.stdout.fileno(), 1)  # unbuffered: select sees the rest
                if not c:
                    continue
                line += c
        text = line.decode()
        assert "listening on http://127.0.0.1:" in text, text
        self.port = int(text.rsplit(":", 1)[1])
        self.base = f"http://127.0.0.1:{self.port}"

    def log_tail(self, n: int = 3000) -> str:
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self) -> int:
        """SIGTERM, then the exit status (the server stops cleanly: 0)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- client ---------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, *, headers: Optional[Dict[str, str]] = None,
                raw: Optional[bytes] = None, timeout: float = 60) -> Tuple[int, Dict[str, str], bytes]:
        """(status, headers, body bytes); HTTP errors are returned, not raised."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def post_json(self, path: str, body: Any, **kw: Any) -> Tuple[int, Any]:
        status, _, data = self.request("POST", path, body, **kw)
        return status, json.loads(data) if data else None

    def get_json(self, path: str, **kw: Any) -> Tuple[int, Any]:
        status, _, data = self.request("GET", path, **kw)
        return status, json.loads(data) if data else None

    def stream(self, path: str, body: Any, *, headers: Optional[Dict[str, str]] = None,
               timeout: float = 60) -> Iterator[Any]:
        """The server-sent events of a streamed request: each data payload parsed as JSON, the
        final "[DONE]" as the string "[DONE]"."""
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            assert r.headers.get("Content-Type", "").startswith("text/event-stream"), r.headers
            buf = b""
            while True:
                chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
                if not chunk:
                    break
                buf += chunk
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    for line in event.split(b"\n"):
                        if line.startswith(b"data: "):
                            payload = line[6:].decode()
                            yield payload if payload == "[DONE]" else json.loads(payload)

    def metrics(self, headers: Optional[Dict[str, str]] = None) -> Dict[str, float]:
        """/metrics as {"name{labels}": value}."""
        status, _, data = self.request("GET", "/metrics", headers=headers)
        assert status == 200, data
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def connect(self) -> socket.socket:
        """A raw TCP connection to the server (for malformed and slow requests)."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)


def chat_body(content: str, **kw: Any) -> Dict[str, Any]:
    return {"model": "test", "messages": [{"role": "user", "content": content}], **kw}


def wait_until(cond, timeout: float = 30, interval: float = 0.02) -> bool:
    """Polls cond() until true or `timeout` seconds pass (a bound on waiting, not a timing
    assertion: the tests assert what happened, never how long it took)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(interval)
    return cond()
