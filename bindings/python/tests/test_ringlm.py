"""The ringlm Python package over libringlm.so (RINGLM_LIBRARY): the golden greedy text of
stories260K, streaming, the caller's memory, tokenizer, zero-copy logits, stops, rewind,
speculation, grammars, log-probabilities, snapshots, cancel, and errors as ringlm.Error."""

import ctypes
import json
import os
import threading

import pytest

import ringlm
from ringlm import Error, Grammar, Model, Session, StopReason

PROMPT = "Once upon a time"


def greedy(session, prompt=PROMPT, n=300, **kw):
    return "".join(session.generate(prompt, max_tokens=n, temperature=0, **kw))


def test_golden_greedy_text(model, golden):
    with Session(model, n_ctx=512) as s:
        text = greedy(s)
        assert text[:len(golden)] == golden
        assert s.last_stop == StopReason.MAX_TOKENS


def test_generate_streams_pieces(model, golden):
    with Session(model, n_ctx=512) as s:
        pieces = list(s.generate(PROMPT, max_tokens=50, temperature=0))
        assert len(pieces) > 20 and all(isinstance(p, str) and p for p in pieces)
        assert golden.startswith("".join(pieces))


def test_model_info_and_tokenizer(model):
    info = model.info
    assert (info.vocab_size, info.dim, info.n_layers, info.max_context) == (512, 64, 5, 512)
    assert info.bos_id == 1 and info.add_bos
    ids = model.tokenize(PROMPT)
    assert ids == [1, 403, 407, 261, 378]
    assert model.tokenize(PROMPT, add_bos=False) == ids[1:]
    assert model.detokenize(ids[1:]) == PROMPT
    text = "héllo ☃ wörld"  # byte-fallback pieces: multi-byte characters survive the round trip
    assert model.detokenize(model.tokenize(text, add_bos=False)) == text
    assert model.is_end(info.eos_id) and not model.is_end(ids[1])
    assert model.chat_template is None


def test_step_results(model):
    with Session(model, n_ctx=512) as s:
        s.set_sampling(temperature=0)
        s.feed_text(PROMPT)
        r = s.step()
        assert r.n_evaluated == 5 and r.position == 5 and r.stop == StopReason.NONE
        assert r.text == "," and r.data == b"," and r.logprob is None
        r2 = s.step()
        assert r2.position == 6 and r2.n_evaluated == 1
        assert s.position == 6


def test_caller_memory(model, golden):
    need = Session.memory_bytes(model, n_ctx=256)
    mem = bytearray(need)
    with Session(model, n_ctx=256, memory=mem) as s:
        assert s.memory is mem
        assert golden.startswith(greedy(s, n=40))
        with pytest.raises(BufferError):
            mem.extend(b"x")  # the session holds the buffer: it cannot move
    # A memoryview slice of a larger buffer works too; a short or read-only one is refused.
    big = bytearray(need + 100)
    with Session(model, n_ctx=256, memory=memoryview(big)[50:50 + need]) as s:
        assert golden.startswith(greedy(s, n=10))
    with pytest.raises(Error) as e:
        Session(model, n_ctx=256, memory=bytearray(need - 64))
    assert e.value.status == "RLM_ERR_BUFFER_TOO_SMALL"
    with pytest.raises(Error) as e:
        Session(model, n_ctx=256, memory=bytes(need))
    assert e.value.status == "RLM_ERR_INVALID_ARGUMENT"


def test_logits_zero_copy(model):
    np = pytest.importorskip("numpy")
    with Session(model, n_ctx=256) as s:
        s.feed_text(PROMPT)
        s.eval()
        logits = s.logits()
        assert logits.shape == (512,) and logits.dtype == np.float32
        # A view of the session's memory, not a copy.
        base = ctypes.addressof(ctypes.c_char.from_buffer(s.memory))
        assert base <= logits.ctypes.data < base + len(s.memory)
        assert not logits.flags.writeable
        view = s.logits_view()
        assert view[7] == logits[7]
        best = int(np.argmax(logits))
        s.set_sampling(temperature=0)
        assert s.step().token == best


def test_stop_strings(model, golden):
    with Session(model, n_ctx=512) as s:
        text = greedy(s, n=100, stop=["park"])
        assert s.last_stop == StopReason.STOP_STRING
        assert golden.startswith(text) and golden[len(text):].startswith("park")


def test_rewind_regenerates_the_same(model):
    with Session(model, n_ctx=512) as s:
        first = greedy(s, n=30)
        n_prompt = len(model.tokenize(PROMPT))
        s.rewind(n_prompt - 1)  # drop the last prompt token: it runs again with the next feed
        s.feed_tokens(model.tokenize(PROMPT)[n_prompt - 1:])
        again = "".join(s.generate(None, max_tokens=30, temperature=0, reset=False))
        assert again == first


def test_speculative_lookup_identical(model):
    with Session(model, n_ctx=512) as plain:
        want = greedy(plain, n=200)
    with Session(model, n_ctx=512, max_draft=8) as s:
        s.set_speculation("lookup")
        assert greedy(s, n=200) == want
        stats = s.spec_stats()
        assert stats["drafted"] > 0 and stats["accepted"] > 0


def test_grammar_and_json_schema(model):
    with Session(model, n_ctx=512, grammar_state_bytes=256 << 10) as s:
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
                  "additionalProperties": False}
        doc = json.loads(greedy(s, n=60, json_schema=schema))
        assert set(doc) == {"n"}
        assert s.last_stop == StopReason.GRAMMAR
        g = Grammar(model, 'root ::= ("yes" | "no") "!"')
        assert greedy(s, n=10, grammar=g) in ("yes!", "no!")
        json.loads(greedy(s, n=40, grammar=Grammar.json(model)))
    with pytest.raises(Error) as e:
        Grammar(model, "root ::= (")
    assert e.value.status == "RLM_ERR_GRAMMAR" and "line 1" in e.value.message
    with Session(model, n_ctx=64) as s, pytest.raises(Error) as e:
        s.set_grammar(Grammar.json(model))  # no grammar memory in this session
    assert e.value.status == "RLM_ERR_BAD_STATE"


def test_logprobs(model):
    with Session(model, n_ctx=512) as s:
        s.set_logprobs(True, top_n=3)
        s.set_sampling(temperature=0)
        s.feed_text(PROMPT)
        for _ in range(5):
            r = s.step()
            assert r.logprob is not None and r.logprob <= 0
            assert r.sampler_logprob == 0.0  # greedy: probability 1
            assert len(r.top) == 3 and r.top[0][0] == r.token
            assert r.top[0][1] == pytest.approx(r.logprob)


def test_snapshots(model):
    with Session(model, n_ctx=512) as s, Session(model, n_ctx=512) as t:
        s.set_sampling(temperature=0.9, seed=7)
        s.feed_text(PROMPT)
        s.eval()
        snap = s.save()
        assert isinstance(snap, bytes) and len(snap) > 0
        a = "".join(s.generate(None, max_tokens=40, reset=False, temperature=0.9, seed=7))
        t.restore(snap)
        b = "".join(t.generate(None, max_tokens=40, reset=False, temperature=0.9, seed=7))
        assert a == b
        with pytest.raises(Error) as e:
            t.restore(snap[:-10])
        assert e.value.status == "RLM_ERR_SNAPSHOT_CORRUPT"


def test_cancel_from_another_thread(model):
    # A thread cancels while the main thread generates: a step raises RLM_ERR_CANCELLED and the
    # session stays usable. (A cancel between two steps has no effect, so it is repeated.)
    with Session(model, n_ctx=512) as s:
        for _ in range(20):
            done = threading.Event()

            def canceller():
                while not done.is_set():
                    s.cancel()

            t = threading.Thread(target=canceller)
            t.start()
            try:
                greedy(s, n=500)
                cancelled = False
            except Error as e:
                assert e.status == "RLM_ERR_CANCELLED"
                cancelled = True
            finally:
                done.set()
                t.join()
            if cancelled:
                break
        assert cancelled
        assert greedy(s, n=5)  # still usable


def test_errors(model, tmp_path):
    with pytest.raises(Error) as e:
        Session(model, n_ctx=1)
    assert e.value.status == "RLM_ERR_INVALID_ARGUMENT" and "n_ctx" in e.value.message
    assert e.value.code == 1 and str(e.value).startswith("RLM_ERR_INVALID_ARGUMENT: ")
    bad = tmp_path / "junk.rlm"
    bad.write_bytes(os.urandom(4096))
    with pytest.raises(Error) as e:
        Model.open(bad)
    assert e.value.status.startswith("RLM_ERR_MODEL_")
    with pytest.raises(Error) as e:
        Model.open(tmp_path / "missing.rlm")
    assert e.value.status == "RLM_ERR_NOT_FOUND"
    with pytest.raises(Error) as e:
        Model.open(tmp_path)  # a directory
    assert e.value.status == "RLM_ERR_INVALID_ARGUMENT"
    with Session(model, n_ctx=64) as s:
        with pytest.raises(Error) as e:
            s.feed_tokens([100000])
        assert e.value.status == "RLM_ERR_TOKEN_OUT_OF_RANGE"
        with pytest.raises(TypeError):
            s.set_sampling(temprature=0)
    with pytest.raises(TypeError):
        Session(model, n_ctxx=5)
    s = Session(model, n_ctx=64)
    s.close()
    with pytest.raises(Error) as e:
        s.step()
    assert e.value.status == "RLM_ERR_BAD_STATE"


def test_model_close_refused_while_sessions_live(model_path):
    m = Model.open(model_path)
    s = Session(m, n_ctx=64)
    with pytest.raises(Error) as e:
        m.close()
    assert e.value.status == "RLM_ERR_BAD_STATE"
    s.close()
    m.close()


def test_library_path():
    assert os.path.exists(ringlm.library_path())
