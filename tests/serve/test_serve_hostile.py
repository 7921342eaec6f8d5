"""Hostile requests against `ringlm serve`: malformed JSON, wrong types, prompts over the context,
max_tokens beyond limits, invalid UTF-8, deep nesting, huge bodies and headers, and slowloris-style
partial requests. Each is refused with a 4xx (the OpenAI error shape when a response is possible)
or the connection is closed; the server stays up and answers correctly afterwards."""

import json
import socket
import threading
import time

import pytest

from serve_util import Server, chat_body, wait_until

TIMEOUT_S = 1  # --request-timeout of the server under test: slow requests are cut after this


@pytest.fixture(scope="module")
def hostile(stories):
    srv = Server(stories, "--slots", "2", "--request-timeout", str(TIMEOUT_S),
                 "--max-body-bytes", "65536", "--max-header-bytes", "8192", "--http-threads", "8")
    yield srv
    assert srv.alive(), "the server died: " + srv.log_tail()
    assert srv.stop() == 0, srv.log_tail()


def assert_error(status, body, want_status, param=None, code=None):
    assert status == want_status, body
    err = json.loads(body)["error"]
    assert isinstance(err["message"], str) and err["message"]
    assert err["type"] in ("invalid_request_error", "server_error")
    if param is not None:
        assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err


LONG = "Once upon a time there was a dog. " * 80  # ~ 800 tokens: over the 512-token context

BAD_BODIES = [
    # (id, raw body, param the error names or None)
    ("truncated-json", b'{"messages": [', None),
    ("not-json", b"hello", None),
    ("empty-body", b"", None),
    ("array-body", b"[1, 2]", None),
    ("string-body", b'"x"', None),
    ("invalid-utf8", b'{"messages":[{"role":"user","content":"\xff\xfe"}]}', None),
    ("overlong-utf8", b'{"messages":[{"role":"user","content":"\xc0\xaf"}]}', None),
    ("lone-surrogate", b'{"messages":[{"role":"user","content":"\\ud800"}]}', None),
    ("deep-nesting", b'{"messages":' + b"[" * 30000 + b"]" * 30000 + b"}", None),
    ("nan-literal", b'{"messages":[{"role":"user","content":"x"}],"temperature":NaN}', None),
]

BAD_FIELDS = [
    # (id, request body, param)
    ("messages-missing", {"model": "x"}, "messages"),
    ("messages-string", {"messages": "hi"}, "messages"),
    ("messages-empty", {"messages": []}, "messages"),
    ("message-not-object", {"messages": [1]}, "messages[0]"),
    ("role-number", {"messages": [{"role": 5, "content": "x"}]}, "messages[0].role"),
    ("role-tool", {"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
    ("content-number", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ("content-missing", {"messages": [{"role": "user"}]}, "messages[0].content"),
    ("content-image", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
     "messages[0].content"),
    ("temperature-string", chat_body("x", temperature="hot"), "temperature"),
    ("temperature-high", chat_body("x", temperature=5), "temperature"),
    ("top-p-zero", chat_body("x", top_p=0), "top_p"),
    ("max-tokens-zero", chat_body("x", max_tokens=0), "max_tokens"),
    ("max-tokens-negative", chat_body("x", max_tokens=-5), "max_tokens"),
    ("max-tokens-fraction", chat_body("x", max_tokens=1.5), "max_tokens"),
    ("max-tokens-string", chat_body("x", max_tokens="10"), "max_tokens"),
    ("max-tokens-huge", chat_body("x", max_tokens=10**15), "max_tokens"),
    ("max-tokens-over-context", chat_body("x", max_tokens=600), "max_tokens"),
    ("stream-string", chat_body("x", stream="yes"), "stream"),
    ("stop-number", chat_body("x", stop=5), "stop"),
    ("stop-empty", chat_body("x", stop=[""]), "stop"),
    ("stop-too-many", chat_body("x", stop=[str(i) for i in range(9)]), "stop"),
    ("seed-string", chat_body("x", seed="x"), "seed"),
    ("n-two", chat_body("x", n=2), "n"),
    ("tools", chat_body("x", tools=[{"type": "function", "function": {"name": "f"}}]), "tools"),
    ("logit-bias-key", chat_body("x", logit_bias={"abc": 1}), "logit_bias"),
    ("logit-bias-range", chat_body("x", logit_bias={"99999": 1}), "logit_bias"),
    ("logit-bias-value", chat_body("x", logit_bias={"5": 1000}), "logit_bias"),
    ("top-logprobs-high", chat_body("x", logprobs=True, top_logprobs=21), "top_logprobs"),
    ("top-logprobs-alone", chat_body("x", top_logprobs=2), "top_logprobs"),
    ("response-format-xml", chat_body("x", response_format={"type": "xml"}), "response_format.type"),
    ("response-format-no-schema", chat_body("x", response_format={"type": "json_schema"}),
     "response_format.json_schema"),
    ("grammar-number", chat_body("x", grammar=5), "grammar"),
]


@pytest.mark.parametrize("raw,param", [b[1:] for b in BAD_BODIES], ids=[b[0] for b in BAD_BODIES])
def test_malformed_bodies(hostile, raw, param):
    status, _, body = hostile.request("POST", "/v1/chat/completions", raw=raw)
    assert_error(status, body, 400, param)


@pytest.mark.parametrize("req,param", [b[1:] for b in BAD_FIELDS], ids=[b[0] for b in BAD_FIELDS])
def test_wrong_fields(hostile, req, param):
    status, _, body = hostile.request("POST", "/v1/chat/completions", req)
    if param == "messages" or param is None:
        assert status == 400, body
    else:
        assert_error(status, body, 400, param)


def test_prompt_over_context(hostile):
    for path, body in (("/v1/chat/completions", chat_body(LONG)),
                       ("/v1/completions", {"prompt": LONG}),
                       ("/v1/completions", {"prompt": list(range(5, 505)) + list(range(5, 105))})):
        status, _, data = hostile.request("POST", path, body)
        assert_error(status, data, 400, code="context_length_exceeded")


def test_completion_prompt_shapes(hostile):
    for prompt in (5, [], [-1], [100000], [[1, 2], [3]], {"a": 1}, None):
        status, _, data = hostile.request("POST", "/v1/completions", {"prompt": prompt})
        assert_error(status, data, 400, "prompt")


def test_methods_and_paths(hostile):
    status, headers, data = hostile.request("GET", "/v1/chat/completions")
    assert_error(status, data, 405)
    status, _, data = hostile.request("GET", "/v1/nothing")
    assert_error(status, data, 404)
    status, _, data = hostile.request("DELETE", "/v1/models")
    assert status == 404


def raw_exchange(srv, data, read_timeout=20):
    """Sends raw bytes on a new connection; returns everything received until the server closes
    (or read_timeout passes)."""
    s = srv.connect()
    s.settimeout(read_timeout)
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    return out


def status_of(response):
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else None


def test_huge_declared_body_refused_unread(hostile):
    resp = raw_exchange(hostile, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                 b"Content-Length: 10000000000\r\n\r\n{\"messages\":")
    assert status_of(resp) == 413, resp
    assert b'"error"' in resp


def test_huge_body_sent(hostile):
    body = json.dumps(chat_body("x" * 200000)).encode()
    status, _, data = hostile.request("POST", "/v1/chat/completions", raw=body)
    assert_error(status, data, 413)


def test_huge_chunked_body_cut(hostile):
    s = hostile.connect()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"x" * 8192
    framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    sent = 0
    try:
        for _ in range(64):  # 512 KiB, eight times the limit
            s.sendall(framed)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    s.settimeout(20)
    resp = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            resp += c
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    assert status_of(resp) in (413, None), resp[:200]


def test_body_without_length(hostile):
    resp = raw_exchange(hostile, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n{}")
    assert status_of(resp) == 411, resp


def test_huge_header(hostile):
    resp = raw_exchange(hostile, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
    assert status_of(resp) in (431, 400), resp[:200]
    resp = raw_exchange(hostile, b"GET /health HTTP/1.1\r\n" +
                        b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 100) for i in range(200)) + b"\r\n")
    assert status_of(resp) in (431, 400), resp[:200]


def test_garbage(hostile):
    for data in (b"HELLO\r\n\r\n", b"\x00\xff\x16\x03\x01" * 100 + b"\r\n\r\n",
                 b"GET " + b"/" * 9000 + b" HTTP/1.1\r\n\r\n", b"POST /v1/completions HTTP/9.9\r\n\r\n"):
        resp = raw_exchange(hostile, data)
        assert resp == b"" or status_of(resp) in (400, 404, 414, 505), resp[:200]


def test_slowloris_is_cut(hostile):
    # A request line that never ends, headers trickled one byte at a time, a body that stalls.
    # Each connection is closed by the server once the request deadline passes; the sender keeps
    # trickling (bounded: 30 s) until it notices.
    def trickle(prefix, byte_every=0.2):
        s = hostile.connect()
        s.sendall(prefix)
        end = time.monotonic() + 30
        closed = False
        got = b""
        while time.monotonic() < end and not closed:
            try:
                s.sendall(b"X")
                s.settimeout(byte_every)
                c = s.recv(4096)
                if not c:
                    closed = True
                got += c
            except socket.timeout:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
        s.close()
        return closed, got

    closed, got = trickle(b"POST /v1/chat/completions HT")
    assert closed, "a request line trickled forever kept its connection"
    closed, got = trickle(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    assert closed
    assert got == b"" or status_of(got) in (400, 408), got[:200]
    closed, got = trickle(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Length: 1000000\r\n\r\n{\"messages\": ")
    assert closed
    assert status_of(got) in (413, 408), got[:200]
    closed, got = trickle(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Length: 5000\r\n\r\n{\"messages\": ")
    assert closed and status_of(got) == 408, got[:200]


def test_many_idle_connections_do_not_starve(hostile, golden):
    # More silent connections than the server has HTTP threads (8): each is dropped after the
    # request deadline, and a real request is answered.
    socks = [hostile.connect() for _ in range(20)]
    for s in socks[::2]:
        s.sendall(b"GET /health HTTP/1.1\r\nHo")
    status, r = hostile.post_json("/v1/chat/completions",
                                  chat_body("Once upon a time", max_tokens=50, temperature=0), timeout=60)
    assert status == 200, r
    assert golden.startswith(r["choices"][0]["message"]["content"])
    for s in socks:
        s.close()


def test_client_gone_mid_request(hostile):
    # Requests abandoned at every stage: before the body, mid-stream, right after sending.
    for _ in range(5):
        s = hostile.connect()
        body = json.dumps(chat_body("Once upon a time", max_tokens=300, stream=True)).encode()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        s.close()
    assert wait_until(lambda: hostile.metrics()["ringlm_slots_busy"] == 0)


def test_still_healthy_after_everything(hostile, golden):
    status, h = hostile.get_json("/health")
    assert status == 200 and h["status"] == "ok"
    status, r = hostile.post_json("/v1/chat/completions",
                                  chat_body("Once upon a time", max_tokens=300, temperature=0))
    assert status == 200
    assert r["choices"][0]["message"]["content"][:len(golden)] == golden
    m = hostile.metrics()
    assert m['ringlm_requests_total{endpoint="/v1/chat/completions",status="400"}'] >= len(BAD_FIELDS)
