"""`ringlm serve` through Python's standard library client (urllib): the OpenAI request and
response shapes, streaming, the golden greedy text of stories260K, prefix reuse, constrained
output, log-probabilities, the API key, the bounded queue and cancellation on disconnect."""

import json
import socket
import subprocess
import threading

import pytest

import serve_util
from serve_util import Server, chat_body, wait_until

GREEDY = {"temperature": 0}


def reply_text(resp):
    return resp["choices"][0]["message"]["content"]


def collect_stream(events, chat=True):
    """(text, finish_reason, usage, events) of a streamed response; checks the event order."""
    text, finish, usage = "", None, None
    assert events[-1] == "[DONE]", events[-3:]
    for ev in events[:-1]:
        assert "error" not in ev, ev
        if ev.get("usage"):
            usage = ev["usage"]
            assert ev["choices"] == []
            continue
        assert finish is None, "a chunk after the finishing one"
        c = ev["choices"][0]
        text += (c["delta"].get("content") or "") if chat else c["text"]
        finish = c["finish_reason"]
    return text, finish, usage


def test_chat_non_streamed_golden(server, golden):
    status, r = server.post_json("/v1/chat/completions",
                                 chat_body("Once upon a time", max_tokens=300, **GREEDY))
    assert status == 200, r
    assert r["object"] == "chat.completion" and r["id"].startswith("chatcmpl-")
    assert r["model"] == "stories260K-f32.rlm"
    assert r["choices"][0]["message"]["role"] == "assistant"
    text = reply_text(r)
    assert text[:len(golden)] == golden
    assert r["choices"][0]["finish_reason"] == "length"
    u = r["usage"]
    assert u["prompt_tokens"] == 5 and u["completion_tokens"] == 300
    assert u["total_tokens"] == 305


def test_chat_streamed_golden_equals_non_streamed(server, golden):
    body = chat_body("Once upon a time", max_tokens=300, stream=True,
                     stream_options={"include_usage": True}, **GREEDY)
    events = list(server.stream("/v1/chat/completions", body))
    first = events[0]
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len({ev["id"] for ev in events[:-1]}) == 1
    text, finish, usage = collect_stream(events)
    assert text[:len(golden)] == golden
    assert finish == "length"
    assert usage["completion_tokens"] == 300 and usage["prompt_tokens"] == 5
    status, r = server.post_json("/v1/chat/completions",
                                 chat_body("Once upon a time", max_tokens=300, **GREEDY))
    assert reply_text(r) == text


def test_completions_streamed_and_not(server, golden):
    body = {"model": "x", "prompt": "Once upon a time", "max_tokens": 120, **GREEDY}
    status, r = server.post_json("/v1/completions", body)
    assert status == 200, r
    assert r["object"] == "text_completion"
    assert golden.startswith(r["choices"][0]["text"]) and len(r["choices"][0]["text"]) > 200
    events = list(server.stream("/v1/completions", {**body, "stream": True}))
    text, finish, usage = collect_stream(events, chat=False)
    assert text == r["choices"][0]["text"] and finish == "length" and usage is None
    # A prompt of token ids: BOS + "Once upon a time" gives the same continuation.
    status, r2 = server.post_json("/v1/completions", {**body, "prompt": [1, 403, 407, 261, 378]})
    assert status == 200 and r2["choices"][0]["text"] == r["choices"][0]["text"]


def test_models_health_metrics_page(server):
    status, m = server.get_json("/v1/models")
    assert status == 200 and m["object"] == "list"
    assert m["data"][0]["id"] == "stories260K-f32.rlm"
    status, h = server.get_json("/health")
    assert status == 200 and h["status"] == "ok" and h["slots_total"] == 2
    metrics = server.metrics()
    assert metrics["ringlm_slots_total"] == 2
    assert metrics['ringlm_requests_total{endpoint="/health",status="200"}'] >= 1
    assert "ringlm_decode_tokens_per_second" in metrics
    status, headers, page = server.request("GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b"<title>ringlm chat</title>" in page
    # No external resources: nothing is loaded from another origin.
    assert b"http://" not in page.replace(b"http://www.w3.org", b"") and b"https://" not in page


def test_stop_strings_and_seed(server, golden):
    status, r = server.post_json("/v1/chat/completions",
                                 chat_body("Once upon a time", max_tokens=100, stop=["park"], **GREEDY))
    assert status == 200, r
    text = reply_text(r)
    assert r["choices"][0]["finish_reason"] == "stop"
    assert golden.startswith(text) and "park" not in text
    assert golden[len(text):].startswith("park")
    # Sampled with a seed: the same seed gives the same text, and each request its own RNG.
    body = chat_body("Once upon a time", max_tokens=40, temperature=1.0, seed=1234)
    texts = [reply_text(server.post_json("/v1/chat/completions", body)[1]) for _ in range(2)]
    assert texts[0] == texts[1]


def test_follow_up_turn_runs_only_new_tokens(stories):
    # One slot: the follow-up lands where the first turn's tokens are.
    with Server(stories, "--slots", "1") as srv:
        s1, r1 = srv.post_json("/v1/chat/completions",
                               chat_body("Once upon a time", max_tokens=30, **GREEDY))
        assert s1 == 200, r1
        assert r1["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        reply = reply_text(r1)
        before = srv.metrics()["ringlm_prompt_tokens_cached_total"]
        msgs = [{"role": "user", "content": "Once upon a time"},
                {"role": "assistant", "content": reply},
                {"role": "user", "content": " Then they went home."}]
        s2, r2 = srv.post_json("/v1/chat/completions", {"messages": msgs, "max_tokens": 10, **GREEDY})
        assert s2 == 200, r2
        u1, u2 = r1["usage"], r2["usage"]
        # Everything the slot had run (prompt + reply but its last token, which was sampled and
        # not yet run) is reused; only the rest of the new prompt runs.
        cached = u2["prompt_tokens_details"]["cached_tokens"]
        assert cached == u1["prompt_tokens"] + u1["completion_tokens"] - 1
        assert srv.metrics()["ringlm_prompt_tokens_cached_total"] == before + cached


def test_chat_template_and_shared_system_prompt(chat_model):
    system = "You are a helpful assistant. " * 5  # about 200 tokens (the synthetic vocabulary is small)
    with Server(chat_model, "--slots", "1", "--ctx", "1024") as srv:
        body = {"messages": [{"role": "system", "content": system},
                             {"role": "user", "content": "Hello!"}], "max_tokens": 4, **GREEDY}
        s1, r1 = srv.post_json("/v1/chat/completions", body)
        assert s1 == 200, r1
        assert r1["usage"]["prompt_tokens"] > 150  # template markers + system + user
        body["messages"][1]["content"] = "Something else"
        s2, r2 = srv.post_json("/v1/chat/completions", body)
        assert s2 == 200, r2
        # The system prompt's tokens are reused (rounded down to the 64-token prefill chunks).
        assert r2["usage"]["prompt_tokens_details"]["cached_tokens"] >= 128
        # A chat template needs a conversation that ends with a user message.
        body["messages"].append({"role": "assistant", "content": "x"})
        status, r = srv.post_json("/v1/chat/completions", body)
        assert status == 400 and r["error"]["param"] == "messages", r


def test_json_schema_and_grammar(server):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    body = chat_body("Once upon a time", max_tokens=120, **GREEDY,
                     response_format={"type": "json_schema",
                                      "json_schema": {"name": "person", "schema": schema}})
    status, r = server.post_json("/v1/chat/completions", body)
    assert status == 200, r
    assert r["choices"][0]["finish_reason"] == "stop"
    doc = json.loads(reply_text(r))
    assert set(doc) == {"name", "age"} and isinstance(doc["age"], int)
    status, r = server.post_json("/v1/chat/completions",
                                 chat_body("Once upon a time", max_tokens=60, **GREEDY,
                                           response_format={"type": "json_object"}))
    assert status == 200, r
    json.loads(reply_text(r))
    status, r = server.post_json("/v1/completions",
                                 {"prompt": "Once upon a time", "max_tokens": 20, **GREEDY,
                                  "grammar": 'root ::= ("yes" | "no") "."'})
    assert status == 200, r
    assert r["choices"][0]["text"] in ("yes.", "no.")
    status, r = server.post_json("/v1/completions",
                                 {"prompt": "x", "grammar": "root ::= (", "max_tokens": 5})
    assert status == 400 and "grammar" in r["error"]["message"]
    # A grammar compiles to ~300 bytes per byte: requests are limited to 64 KiB of it.
    status, r = server.post_json("/v1/completions",
                                 {"prompt": "x", "grammar": "root ::= " + '"ab" ' * 20000})
    assert status == 400 and r["error"]["param"] == "grammar" and "limit" in r["error"]["message"]


def test_logprobs(server):
    status, r = server.post_json("/v1/chat/completions",
                                 chat_body("Once upon a time", max_tokens=8, logprobs=True,
                                           top_logprobs=3, **GREEDY))
    assert status == 200, r
    content = r["choices"][0]["logprobs"]["content"]
    assert len(content) == 8
    assert "".join(e["token"] for e in content) == reply_text(r)
    for e in content:
        assert e["logprob"] <= 0 and len(e["top_logprobs"]) == 3
        assert bytes(e["bytes"]).decode() == e["token"]
        # Greedy: the sampled token is the most probable one.
        assert e["top_logprobs"][0]["token"] == e["token"]
        assert e["top_logprobs"][0]["logprob"] == pytest.approx(e["logprob"])
    status, r = server.post_json("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4,
                                                     "logprobs": 2, **GREEDY})
    lp = r["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == 4 and len(lp["top_logprobs"][0]) == 2
    assert lp["text_offset"][0] == 0


def test_api_key():
    stories = serve_util.stories_model()
    if not stories:
        pytest.skip("../shared/models/stories260K absent")
    with Server(stories, "--api-key", "sk-test-123") as srv:
        status, r = srv.post_json("/v1/chat/completions", chat_body("Once", max_tokens=2))
        assert status == 401 and r["error"]["code"] == "invalid_api_key"
        status, r = srv.post_json("/v1/chat/completions", chat_body("Once", max_tokens=2),
                                  headers={"Authorization": "Bearer wrong"})
        assert status == 401
        status, _, _ = srv.request("GET", "/metrics")
        assert status == 401
        status, r = srv.post_json("/v1/chat/completions", chat_body("Once", max_tokens=2),
                                  headers={"Authorization": "Bearer sk-test-123"})
        assert status == 200, r
        # The page and the health check need no key.
        assert srv.request("GET", "/")[0] == 200 and srv.request("GET", "/health")[0] == 200


def _long_stream(srv, max_tokens=6000):
    """Starts a long streamed completion on a raw socket; returns the socket once the first
    content chunk has arrived (the request then holds its slot)."""
    body = json.dumps({"prompt": "Hello", "max_tokens": max_tokens, "stream": True, **GREEDY}).encode()
    s = srv.connect()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while b'"text"' not in got:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    return s


def test_queue_full_gets_503_and_disconnect_cancels(chat_model):
    # One slot, one waiting place: A generates, B waits, C is refused.
    with Server(chat_model, "--slots", "1", "--queue", "1", "--ctx", "8192") as srv:
        a = _long_stream(srv)
        assert srv.metrics()["ringlm_slots_busy"] == 1
        result = {}
        b = threading.Thread(target=lambda: result.update(
            b=srv.post_json("/v1/completions", {"prompt": "Hi", "max_tokens": 3, **GREEDY})))
        b.start()
        assert wait_until(lambda: srv.metrics()["ringlm_queue_waiting"] == 1)
        status, headers, data = srv.request("POST", "/v1/completions",
                                            {"prompt": "Hi", "max_tokens": 3})
        assert status == 503, data
        assert headers.get("Retry-After") == "1"
        err = json.loads(data)["error"]
        assert err["code"] == "server_busy" and err["type"] == "server_error"
        # A goes away: its generation is cancelled and B gets the slot.
        a.close()
        b.join(60)
        assert result["b"][0] == 200, result
        assert wait_until(lambda: srv.metrics()["ringlm_slots_busy"] == 0)
        m = srv.metrics()
        assert m["ringlm_requests_cancelled_total"] == 1  # once, however httplib ends the stream
        assert m["ringlm_requests_rejected_total"] == 1
        # A stopped well before its 6000 tokens (B's 3 are in the count too).
        assert m["ringlm_completion_tokens_total"] < 6000
        assert wait_until(lambda: srv.metrics()["ringlm_slots_busy"] == 0)


def test_disconnect_while_waiting_leaves_the_queue(chat_model):
    with Server(chat_model, "--slots", "1", "--queue", "4", "--ctx", "8192") as srv:
        a = _long_stream(srv)
        body = json.dumps({"prompt": "Hi", "max_tokens": 3}).encode()
        w = srv.connect()
        w.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                  str(len(body)).encode() + b"\r\n\r\n" + body)
        assert wait_until(lambda: srv.metrics()["ringlm_queue_waiting"] == 1)
        w.close()
        assert wait_until(lambda: srv.metrics()["ringlm_queue_waiting"] == 0)
        a.close()
        assert wait_until(lambda: srv.metrics()["ringlm_slots_busy"] == 0)
        status, r = srv.post_json("/v1/completions", {"prompt": "Hi", "max_tokens": 3, **GREEDY})
        assert status == 200, r


def test_sigterm_stops_cleanly_and_port_in_use(stories):
    srv = Server(stories)
    assert srv.post_json("/v1/completions", {"prompt": "Once", "max_tokens": 3})[0] == 200
    # A second server on the same port is an error, not a silent sharer of its connections.
    r = subprocess.run([serve_util.cli(), "serve", "-m", stories, "--port", str(srv.port)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "cannot bind" in r.stderr, r.stderr
    assert srv.stop() == 0, srv.log_tail()
