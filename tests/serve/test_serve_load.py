"""A bounded load test of `ringlm serve`: 200 requests from 16 concurrent clients against 2 slots
and a wait queue of 4. Every request is answered (200, or 503 and then retried), every greedy
reply equals the same request's reply when it ran alone, and the server's resident memory after
the run is close to what it was after a warm-up."""

import json
import threading
import time
import urllib.error
import urllib.request

from serve_util import Server, chat_body

N_REQUESTS = 200
N_CLIENTS = 16
WARM_UP = 40
PROMPTS = ["Once upon a time", "Lily and Tom", "The little dog", "One day, a girl named Sue"]


def make_request(i):
    """Request i: a prompt, chat or completions, streamed or not (all greedy)."""
    prompt = PROMPTS[i % len(PROMPTS)]
    kind = ("chat", "chat-stream", "completion")[(i // len(PROMPTS)) % 3]
    if kind == "completion":
        return kind, "/v1/completions", {"prompt": prompt, "max_tokens": 40, "temperature": 0}
    body = chat_body(prompt, max_tokens=40, temperature=0, stream=kind == "chat-stream")
    return kind, "/v1/chat/completions", body


def run_one(base, i):
    """(status, reply text) of request i, once."""
    kind, path, body = make_request(i)
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            data = r.read()
    except urllib.error.HTTPError as e:
        e.read()
        return e.code, None
    if kind == "chat-stream":
        text = ""
        events = [line[6:] for line in data.decode().split("\n") if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        for ev in events[:-1]:
            c = json.loads(ev)["choices"][0]
            text += c["delta"].get("content") or ""
        return 200, text
    r = json.loads(data)
    c = r["choices"][0]
    return 200, c["message"]["content"] if kind == "chat" else c["text"]


def test_load_200_requests_16_clients_2_slots(stories):
    with Server(stories, "--slots", "2", "--queue", "4", "--quiet") as srv:
        # Solo runs: each distinct request alone on the idle server.
        solo = {}
        for i in range(len(PROMPTS) * 3):
            status, text = run_one(srv.base, i)
            assert status == 200
            solo[i] = text
        results, retries, errors = {}, [0], []
        lock = threading.Lock()
        next_i = [0]
        deadline = time.monotonic() + 300  # a bound on the whole run, not an assertion

        def client(limit):
            while time.monotonic() < deadline:
                with lock:
                    if next_i[0] >= limit:
                        return
                    i = next_i[0]
                    next_i[0] += 1
                while time.monotonic() < deadline:
                    try:
                        status, text = run_one(srv.base, i)
                    except Exception as e:  # noqa: BLE001 - recorded and asserted on below
                        with lock:
                            errors.append(f"request {i}: {e!r}")
                        break
                    if status == 503:
                        with lock:
                            retries[0] += 1
                        time.sleep(0.005 * (1 + i % 5))
                        continue
                    with lock:
                        results[i] = (status, text)
                    break

        def phase(limit):
            threads = [threading.Thread(target=client, args=(limit,)) for _ in range(N_CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        phase(WARM_UP)
        rss_warm = srv.rss_kib()
        phase(N_REQUESTS)
        rss_end = srv.rss_kib()
        assert not errors, errors[:5]
        assert len(results) == N_REQUESTS
        wrong = [i for i, (status, text) in results.items()
                 if status != 200 or text != solo[i % (len(PROMPTS) * 3)]]
        assert not wrong, [(i, results[i]) for i in wrong[:3]]
        m = srv.metrics()
        print(f"\n[load] {N_REQUESTS} requests, {N_CLIENTS} clients, 2 slots: {retries[0]} answered "
              f"503 and retried; RSS {rss_warm} KiB after warm-up, {rss_end} KiB at the end; "
              f"{int(m['ringlm_prompt_tokens_cached_total'])} prompt tokens reused")
        assert m["ringlm_requests_rejected_total"] == retries[0]
        assert m["ringlm_slots_busy"] == 0 and m["ringlm_queue_waiting"] == 0
        # Flat memory: the sessions are carved at start; what a request allocates is freed.
        # Generous bound (allocator caches, thread stacks touched late).
        assert rss_end - rss_warm < 32 * 1024, (rss_warm, rss_end)
        assert srv.alive()
