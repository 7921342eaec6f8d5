"""ringlm: on-device text generation in caller-owned memory, from Python.

A thin layer over libringlm's C ABI (ctypes; no compiled extension)::

    import ringlm
    model = ringlm.Model.open("stories260K.rlm")          # mmap: nothing copied
    with ringlm.Session(model, n_ctx=512) as s:
        for piece in s.generate("Once upon a time", max_tokens=64, temperature=0):
            print(piece, end="", flush=True)

The session's memory is one Python buffer (a ``bytearray`` the session allocates, or one you
pass as ``memory=``, sized by :meth:`Session.memory_bytes`); the runtime allocates nothing
behind it. Every failure raises :class:`Error`, which carries the runtime's status name
(``"RLM_ERR_CAPACITY"``) and its message.

Threads: a session is used by one thread at a time, except :meth:`Session.cancel`, which any
thread may call while another runs a step (ctypes releases the GIL during the call).
"""

from __future__ import annotations

import codecs
import ctypes
import enum
import json as _json
import mmap
import os
import stat
import weakref
from ctypes import POINTER, byref, c_char, c_char_p, c_float, c_int32, c_size_t, c_uint64, c_void_p
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from . import _capi
from ._capi import (RLM_OK, RLM_TOKENIZE_ADD_BOS, RLM_TOKENIZE_PARSE_SPECIALS, new_struct,
                    rlm_logit_bias, rlm_model, rlm_model_info, rlm_sampling, rlm_session_config,
                    rlm_session_info, rlm_spec_stats, rlm_speculation, rlm_step_result,
                    rlm_token_logprob)

__all__ = ["Error", "Model", "ModelInfo", "Session", "StepResult", "StopReason", "Grammar",
           "library_path", "__version__"]
__version__ = "0.1.0"

Buffer = Union[bytearray, memoryview, mmap.mmap, Any]  # anything with a writable buffer


class Error(Exception):
    """A failed ringlm call. ``status`` is the status name (``"RLM_ERR_BUFFER_TOO_SMALL"``),
    ``code`` its number (-1 for errors of the Python layer that have no runtime status), and
    ``message`` the runtime's explanation."""

    def __init__(self, status: str, message: str, code: int = -1) -> None:
        super().__init__(f"{status}: {message}" if message else status)
        self.status = status
        self.message = message
        self.code = code


def _lib() -> ctypes.CDLL:
    try:
        return _capi.lib()
    except _capi.LibraryNotFound as e:
        raise Error("RLM_ERR_NOT_FOUND", str(e), 11) from None


def _status_name(code: int) -> str:
    return _lib().rlm_status_string(code).decode()


def _check(code: int, message: Union[str, bytes, None] = "") -> None:
    if code != RLM_OK:
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        raise Error(_status_name(code), message or "", code)


def library_path() -> Optional[str]:
    """Path of the libringlm.so in use (loads it if needed)."""
    _lib()
    return _capi.library_path()


class StopReason(enum.IntEnum):
    """Why a turn ended (rlm_stop_reason)."""
    NONE = 0
    END_TOKEN = 1
    STOP_STRING = 2
    MAX_TOKENS = 3
    GRAMMAR = 4


@dataclass(frozen=True)
class ModelInfo:
    """Hyperparameters and vocabulary facts of an opened model (rlm_model_info)."""
    n_layers: int
    dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    vocab_size: int
    max_context: int
    bos_id: int
    eos_id: int
    n_tensors: int
    weight_bytes: int
    add_bos: bool


@dataclass(frozen=True)
class StepResult:
    """One generated token (rlm_step_result). ``data`` is the exact bytes the step released,
    ``text`` the same decoded as UTF-8 (the runtime holds back partial characters, so a step's
    bytes are whole characters). ``logprob`` / ``sampler_logprob`` / ``top`` are set while
    :meth:`Session.set_logprobs` is on (else None / empty)."""
    token: int
    position: int
    text: str
    data: bytes
    stop: StopReason
    n_evaluated: int
    logprob: Optional[float] = None
    sampler_logprob: Optional[float] = None
    top: List[Tuple[int, float]] = field(default_factory=list)


def _aligned_view(buf: Buffer, size: int, alignment: int, what: str) -> Tuple[Any, int]:
    """(ctypes array over buf, address of its first `alignment`-aligned byte with `size` bytes
    after it). The array holds buf's buffer export: a bytearray cannot be resized meanwhile."""
    try:
        n = memoryview(buf).nbytes
        arr = (c_char * n).from_buffer(buf)
    except (TypeError, ValueError) as e:
        raise Error("RLM_ERR_INVALID_ARGUMENT",
                    f"{what} must be a writable, contiguous buffer (bytearray, memoryview, mmap): {e}",
                    1) from None
    addr = ctypes.addressof(arr)
    off = (-addr) % alignment
    if n - off < size:
        raise Error("RLM_ERR_BUFFER_TOO_SMALL",
                    f"{what} of {n} bytes holds {max(n - off, 0)} after aligning to {alignment}; "
                    f"{size} are needed ({size + alignment - 1} with room for the alignment)", 3)
    return arr, addr + off


class Model:
    """A verified model file, used in place (no copy). Open with :meth:`open` (a memory map) or
    :meth:`from_buffer`. It must outlive its sessions and grammars (they keep a reference)."""

    def __init__(self, buffer: Buffer, *, _mmap: Optional[mmap.mmap] = None) -> None:
        lib = _lib()
        self._mmap = _mmap
        self._users: "weakref.WeakSet[Any]" = weakref.WeakSet()  # open sessions and grammars
        self._arr, addr = _aligned_view(buffer, 0, 1, "model bytes")
        self._size = memoryview(buffer).nbytes
        self._model = rlm_model()
        st = lib.rlm_model_open(c_void_p(addr), self._size, byref(self._model))
        if st != RLM_OK:
            msg = lib.rlm_model_error(byref(self._model))
            self._arr = None
            if _mmap is not None:
                _mmap.close()
            _check(st, msg)
        info = new_struct(rlm_model_info, "rlm_model_info_default")
        _check(lib.rlm_model_get_info(byref(self._model), byref(info)))
        self.info = ModelInfo(info.n_layers, info.dim, info.n_heads, info.n_kv_heads,
                              info.head_dim, info.ffn_dim, info.vocab_size, info.max_context,
                              info.bos_id, info.eos_id, info.n_tensors, info.weight_bytes,
                              bool(info.add_bos))

    @classmethod
    def open(cls, path: Union[str, os.PathLike]) -> "Model":
        """Maps the model file (private copy-on-write mapping: the pages are the file's, shared
        with the page cache; nothing is read ahead or copied) and verifies it."""
        p = os.fspath(path)
        try:
            # stat before open: opening a FIFO would block; a directory or device is no model.
            st = os.stat(p)
            if not stat.S_ISREG(st.st_mode):
                raise Error("RLM_ERR_INVALID_ARGUMENT", f"'{p}' is not a regular file", 1)
            if st.st_size == 0:
                raise Error("RLM_ERR_MODEL_TRUNCATED", f"'{p}' is empty", 20)
            with open(p, "rb") as f:
                # ACCESS_COPY: ctypes needs a writable buffer to take its address; the runtime
                # never writes to model bytes, so no page is ever copied.
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except OSError as e:
            raise Error("RLM_ERR_NOT_FOUND", f"cannot open '{p}': {e.strerror}", 11) from None
        return cls(mm, _mmap=mm)

    @classmethod
    def from_buffer(cls, buffer: Buffer) -> "Model":
        """A model over bytes already in memory (a writable buffer whose start is 64-byte
        aligned, e.g. an mmap). Borrowed: keep it unchanged while the model is in use."""
        return cls(buffer)

    def close(self) -> None:
        """Drops the mapping. Sessions on the model must be closed first (else Error
        RLM_ERR_BAD_STATE: they point into its bytes)."""
        if any(getattr(u, "_handle", None) is not None for u in self._users):
            raise Error("RLM_ERR_BAD_STATE", "sessions or grammars on this model are still open", 5)
        self._arr = None
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def _ptr(self) -> Any:
        if self._arr is None:
            raise Error("RLM_ERR_BAD_STATE", "the model is closed", 5)
        return byref(self._model)

    @property
    def vocab_size(self) -> int:
        return self.info.vocab_size

    def tokenize(self, text: str, *, add_bos: bool = True, parse_specials: bool = False) -> List[int]:
        """Token ids of `text`. BOS first when add_bos and the model has one. Special-token text
        ("<|im_end|>") becomes the token only with parse_specials (never for text a user typed)."""
        lib = _lib()
        data = text.encode("utf-8")
        flags = (RLM_TOKENIZE_ADD_BOS if add_bos else 0) | (
            RLM_TOKENIZE_PARSE_SPECIALS if parse_specials else 0)
        scratch_bytes = lib.rlm_tokenize_scratch_bytes(self._ptr, len(data))
        scratch = (c_uint64 * ((scratch_bytes + 7) // 8 + 1))()
        cap = len(data) + 2
        while True:
            toks = (c_int32 * max(cap, 1))()
            n = c_size_t(0)
            st = lib.rlm_tokenize_ex(self._ptr, data, len(data), flags, toks, cap, byref(n),
                                     scratch, ctypes.sizeof(scratch))
            if st == _capi.RLM_ERR_CAPACITY and n.value > cap:
                cap = n.value
                continue
            _check(st, "tokenize")
            return list(toks[:n.value])

    def token_bytes(self, token: int, prev: int = -1) -> bytes:
        """The bytes `token` adds to a text after `prev` (-1: at the start)."""
        lib = _lib()
        buf = ctypes.create_string_buffer(64)
        n = c_size_t(0)
        st = lib.rlm_token_text_after(self._ptr, prev, token, buf, 64, byref(n))
        if st == _capi.RLM_ERR_CAPACITY:
            buf = ctypes.create_string_buffer(n.value)
            st = lib.rlm_token_text_after(self._ptr, prev, token, buf, n.value, byref(n))
        _check(st, f"token {token}")
        return buf.raw[:n.value]

    def detokenize(self, tokens: Iterable[int]) -> str:
        """The text of a token sequence (invalid UTF-8, e.g. a cut character, as U+FFFD)."""
        out = bytearray()
        prev = -1
        for t in tokens:
            out += self.token_bytes(t, prev)
            prev = t
        return out.decode("utf-8", "replace")

    def token_lookup(self, piece: str) -> int:
        """The id of the token whose piece is exactly `piece` (e.g. "<|im_end|>")."""
        data = piece.encode("utf-8")
        tok = c_int32(0)
        _check(_lib().rlm_token_lookup(self._ptr, data, len(data), byref(tok)), repr(piece))
        return tok.value

    def is_end(self, token: int) -> bool:
        """Whether generation normally ends at `token` (EOS / end-of-turn)."""
        return bool(_lib().rlm_token_is_end(self._ptr, token))

    @property
    def chat_template(self) -> Optional[str]:
        """The chat template text the file carries, or None."""
        p = c_void_p()
        n = c_size_t(0)
        if _lib().rlm_model_chat_template(self._ptr, byref(p), byref(n)) != RLM_OK:
            return None
        return ctypes.string_at(p, n.value).decode("utf-8", "replace")


class Grammar:
    """A GBNF grammar compiled against a model (read-only: any number of sessions may use it).
    Sessions that use grammars need ``grammar_state_bytes`` (e.g. 262144) in their config."""

    def __init__(self, model: Model, gbnf: str) -> None:
        lib = _lib()
        self.model = model
        self.gbnf = gbnf
        data = gbnf.encode("utf-8")
        size = c_size_t(0)
        _check(lib.rlm_grammar_memory(model._ptr, data, len(data), byref(size)), "grammar memory")
        self._mem = bytearray(size.value + 63)
        self._arr, addr = _aligned_view(self._mem, size.value, 64, "grammar memory")
        handle = c_void_p()
        msg = ctypes.create_string_buffer(512)
        st = lib.rlm_grammar_compile(model._ptr, data, len(data), c_void_p(addr), size.value,
                                     byref(handle), msg, 512)
        _check(st, msg.value)
        self._handle = handle
        model._users.add(self)

    @classmethod
    def json(cls, model: Model) -> "Grammar":
        """The built-in grammar of any JSON value."""
        return cls(model, _lib().rlm_json_gbnf().decode())

    @staticmethod
    def json_schema_to_gbnf(schema: Union[str, Dict[str, Any], bool]) -> str:
        """GBNF of a JSON Schema (a dict, or its JSON text); the subset README "JSON Schema" lists."""
        lib = _lib()
        text = schema if isinstance(schema, str) else _json.dumps(schema)
        data = text.encode("utf-8")
        scratch_n = lib.rlm_json_schema_scratch_bytes(data, len(data))
        scratch = bytearray(scratch_n + 63)
        arr, addr = _aligned_view(scratch, scratch_n, 64, "schema scratch")
        n = c_size_t(0)
        msg = ctypes.create_string_buffer(512)
        st = lib.rlm_json_schema_to_gbnf(data, len(data), c_void_p(addr), scratch_n, None, 0,
                                         byref(n), msg, 512)
        if st == _capi.RLM_ERR_BUFFER_TOO_SMALL:
            out = ctypes.create_string_buffer(n.value + 1)
            st = lib.rlm_json_schema_to_gbnf(data, len(data), c_void_p(addr), scratch_n, out,
                                             n.value + 1, byref(n), msg, 512)
            _check(st, msg.value)
            return out.raw[:n.value].decode("utf-8")
        _check(st, msg.value)
        return ""

    @classmethod
    def from_json_schema(cls, model: Model, schema: Union[str, Dict[str, Any], bool]) -> "Grammar":
        """A grammar whose sentences are the JSON documents valid against `schema`."""
        return cls(model, cls.json_schema_to_gbnf(schema))


_KV = {"f32": 0, "f16": 1, "q8": 2}
_SAMPLING_FIELDS = {name for name, _ in rlm_sampling._fields_} - {
    "struct_size", "logit_bias", "n_logit_bias", "dry_sequence_breakers",
    "n_dry_sequence_breakers"}
_CONFIG_FIELDS = {name for name, _ in rlm_session_config._fields_} - {"struct_size", "kv_dtype",
                                                                       "kernels", "backend"}


class Session:
    """A generation session in one caller-owned block of memory.

    ``Session(model, n_ctx=512, threads=2)`` allocates the block as a bytearray; pass
    ``memory=`` (a writable buffer of at least :meth:`memory_bytes` bytes: bytearray,
    memoryview, mmap, numpy array) to provide it yourself. Other keyword arguments are fields of
    rlm_session_config: ``kv="f16"|"f32"|"q8"`` (default f16, the runtime's), ``n_sink``,
    ``n_batch``, ``max_pending``,
    ``max_text_bytes``, ``max_stop_strings``, ``stop_string_bytes``, ``max_logit_bias``,
    ``max_draft`` (speculative decoding), ``grammar_state_bytes`` / ``grammar_cache_bytes``
    (grammars), ``max_logit_rows``, ``max_beams``, ``kernels``, ``backend``.
    Close it (or use ``with``) to join its worker threads before the memory goes."""

    @staticmethod
    def _config(model: Model, n_ctx: int, threads: int, kv: str, **cfg: Any) -> rlm_session_config:
        c = new_struct(rlm_session_config, "rlm_session_config_default")
        c.n_ctx = n_ctx
        c.n_threads = threads
        if kv not in _KV:
            raise Error("RLM_ERR_INVALID_ARGUMENT", f"kv must be one of f32, f16, q8, not {kv!r}", 1)
        c.kv_dtype = _KV[kv]
        for k, v in cfg.items():
            if k in ("kernels", "backend"):
                setattr(c, k, None if v is None else v.encode())
            elif k in _CONFIG_FIELDS:
                setattr(c, k, int(v))
            else:
                raise TypeError(f"unknown session config field {k!r}")
        return c

    @staticmethod
    def memory_bytes(model: Model, *, n_ctx: int = 0, threads: int = 1, kv: str = "f16",
                     **config: Any) -> int:
        """Bytes a ``memory=`` buffer needs for this config: the size query's answer plus room
        to align the session's start (the alignment it asks for)."""
        size, align = Session._query(model, Session._config(model, n_ctx, threads, kv, **config))
        return size + align - 1

    @staticmethod
    def _query(model: Model, cfg: rlm_session_config) -> Tuple[int, int]:
        lib = _lib()
        size, align = c_size_t(0), c_size_t(0)
        st = lib.rlm_session_memory(model._ptr, byref(cfg), byref(size), byref(align))
        if st != RLM_OK:
            msg = ctypes.create_string_buffer(512)
            lib.rlm_session_config_check(model._ptr, byref(cfg), msg, 512)
            _check(st, msg.value)
        return size.value, max(align.value, 1)

    def __init__(self, model: Model, *, n_ctx: int = 0, threads: int = 1,
                 memory: Optional[Buffer] = None, kv: str = "f16", **config: Any) -> None:
        self._handle: Optional[c_void_p] = None
        lib = _lib()
        self.model = model
        cfg = self._config(model, n_ctx, threads, kv, **config)
        self._cfg = cfg
        size, align = self._query(model, cfg)
        self.memory = bytearray(size + align - 1) if memory is None else memory
        self._arr, addr = _aligned_view(self.memory, size, align, "session memory")
        self.nbytes = size
        handle = c_void_p()
        st = lib.rlm_session_init(model._ptr, byref(cfg), c_void_p(addr), size, byref(handle))
        if st != RLM_OK:
            self._arr = None
            _check(st, lib.rlm_session_error(handle))
        self._handle = handle
        model._users.add(self)
        self._top: Any = None            # the logprobs array the session writes into
        self._grammar: Optional[Grammar] = None
        self._draft: Optional[Session] = None
        self._result = new_struct(rlm_step_result, "rlm_step_result_default")
        self.last_stop = StopReason.NONE

    # -- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        """Releases the session (joins its worker threads). Idempotent."""
        if self._handle is not None:
            _lib().rlm_session_release(self._handle)
            self._handle = None
            self._arr = None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def _h(self) -> c_void_p:
        if self._handle is None:
            raise Error("RLM_ERR_BAD_STATE", "the session is closed", 5)
        return self._handle

    def _check(self, st: int, what: str = "") -> None:
        if st != RLM_OK:
            msg = _lib().rlm_session_error(self._h).decode("utf-8", "replace")
            _check(st, f"{what}: {msg}" if what and msg else (msg or what))

    @property
    def info(self) -> Dict[str, str]:
        """Kernels and backend in use."""
        i = new_struct(rlm_session_info, "rlm_session_info_default")
        self._check(_lib().rlm_session_get_info(self._h, byref(i)))
        return {"kernels": (i.kernels or b"").decode(), "backend": (i.backend or b"").decode()}

    # -- the sequence ---------------------------------------------------------------------------

    @property
    def position(self) -> int:
        """Tokens in the KV cache (the position of the next token to run)."""
        return int(_lib().rlm_session_position(self._h))

    def reset(self) -> None:
        """Forget the sequence (sampling and stops are kept)."""
        self._check(_lib().rlm_session_reset(self._h), "reset")

    def rewind(self, position: int) -> None:
        """Drop positions >= `position` (e.g. to reuse a shared prefix); RLM_ERR_REWIND once the
        ring has wrapped past it."""
        self._check(_lib().rlm_session_rewind(self._h, position), "rewind")

    def feed_text(self, text: str, *, parse_specials: bool = True) -> None:
        """Queue text (tokenized in the runtime; BOS first at position 0 per the model). Starts a
        new turn. parse_specials=False keeps special-token text as text (use it for untrusted
        input)."""
        data = text.encode("utf-8")
        self._check(_lib().rlm_session_feed_text_ex(
            self._h, data, len(data), RLM_TOKENIZE_PARSE_SPECIALS if parse_specials else 0), "feed_text")

    def feed_tokens(self, tokens: Sequence[int]) -> None:
        """Queue token ids as given (no BOS added). Starts a new turn."""
        arr = (c_int32 * len(tokens))(*tokens)
        self._check(_lib().rlm_session_feed_tokens(self._h, arr, len(tokens)), "feed_tokens")

    # -- sampling and stops ---------------------------------------------------------------------

    def set_sampling(self, *, logit_bias: Optional[Dict[int, float]] = None,
                     dry_sequence_breakers: Optional[Sequence[str]] = None, **fields: Any) -> None:
        """Sampling parameters: the runtime's defaults (temperature 0.8, top_k 40, top_p 0.95,
        min_p 0.05, seed 0x5eed ...) overridden by the fields given, named as in rlm_sampling
        (temperature=0 is greedy). Reseeds the RNG."""
        s = new_struct(rlm_sampling, "rlm_sampling_default")
        for k, v in fields.items():
            if k not in _SAMPLING_FIELDS:
                raise TypeError(f"unknown sampling parameter {k!r}")
            setattr(s, k, v)
        keep: List[Any] = []
        if logit_bias:
            arr = (rlm_logit_bias * len(logit_bias))(*[rlm_logit_bias(int(t), float(b))
                                                       for t, b in logit_bias.items()])
            keep.append(arr)
            s.logit_bias = ctypes.cast(arr, POINTER(rlm_logit_bias))
            s.n_logit_bias = len(logit_bias)
        if dry_sequence_breakers is not None:
            enc = [b.encode("utf-8") for b in dry_sequence_breakers]
            arr2 = (c_char_p * max(len(enc), 1))(*enc)
            keep.append(arr2)
            s.dry_sequence_breakers = ctypes.cast(arr2, POINTER(c_char_p))
            s.n_dry_sequence_breakers = len(enc)
        self._check(_lib().rlm_session_set_sampling(self._h, byref(s)), "sampling")  # copies in

    def set_stops(self, strings: Iterable[str] = (), tokens: Iterable[int] = ()) -> None:
        """Replace the extra stop strings and end tokens (never released in the output)."""
        lib = _lib()
        self._check(lib.rlm_session_clear_stops(self._h), "stops")
        for t in tokens:
            self._check(lib.rlm_session_add_stop_token(self._h, t), "stop token")
        for s in strings:
            data = s.encode("utf-8")
            self._check(lib.rlm_session_add_stop_string(self._h, data, len(data)), "stop string")

    def set_max_tokens(self, n: int) -> None:
        """Tokens per turn before StopReason.MAX_TOKENS; 0 = unlimited."""
        self._check(_lib().rlm_session_set_max_tokens(self._h, n), "max_tokens")

    def set_ignore_eos(self, ignore: bool) -> None:
        """Keep going past the model's own end tokens (added stop tokens still stop)."""
        self._check(_lib().rlm_session_set_ignore_eos(self._h, 1 if ignore else 0), "ignore_eos")

    def set_grammar(self, grammar: Optional[Grammar]) -> None:
        """Constrain each turn's output to `grammar` (None: off). Needs grammar_state_bytes."""
        self._check(_lib().rlm_session_set_grammar(
            self._h, grammar._handle if grammar is not None else None), "grammar")
        self._grammar = grammar

    def set_logprobs(self, enabled: bool = True, top_n: int = 0) -> None:
        """Log-probabilities in every StepResult; with top_n, the top_n most probable tokens."""
        self._top = (rlm_token_logprob * top_n)() if top_n > 0 else None
        self._check(_lib().rlm_session_set_logprobs(
            self._h, 1 if enabled else 0,
            ctypes.cast(self._top, POINTER(rlm_token_logprob)) if self._top is not None else None,
            top_n), "logprobs")

    def set_speculation(self, mode: Optional[Union[str, "Session"]] = "lookup", *, n_max: int = 0,
                        ngram_min: int = 2, ngram_max: int = 4, p_min: float = 0.75) -> None:
        """Speculative decoding (the session needs max_draft > 0): ``"lookup"`` (prompt lookup),
        a draft :class:`Session` on a smaller model of the same vocabulary, or None (off). The
        output is the same token for token; only the speed differs."""
        sp = new_struct(rlm_speculation, "rlm_speculation_default")
        sp.n_max, sp.ngram_min, sp.ngram_max, sp.p_min = n_max, ngram_min, ngram_max, p_min
        self._draft = None
        if mode is None:
            sp.mode = 0
        elif mode == "lookup":
            sp.mode = 2
        elif isinstance(mode, Session):
            sp.mode = 1
            sp.draft = mode._h
            self._draft = mode
        else:
            raise Error("RLM_ERR_INVALID_ARGUMENT", f"speculation mode {mode!r}: 'lookup', a "
                        "draft Session or None", 1)
        self._check(_lib().rlm_session_set_speculation(self._h, byref(sp)), "speculation")

    def spec_stats(self) -> Dict[str, int]:
        """Speculation counters since set_speculation: verify_passes, drafted, accepted,
        draft_passes."""
        st = new_struct(rlm_spec_stats, "rlm_spec_stats_default")
        self._check(_lib().rlm_session_spec_stats(self._h, byref(st)), "spec stats")
        return {k: int(getattr(st, k)) for k in ("verify_passes", "drafted", "accepted", "draft_passes")}

    # -- running --------------------------------------------------------------------------------

    def step(self) -> StepResult:
        """Runs pending input (or the last token) and samples one token."""
        r = self._result
        self._check(_lib().rlm_step(self._h, byref(r)), "step")
        data = ctypes.string_at(r.text, r.text_len) if r.text_len else b""
        lp = None if r.logprob != r.logprob else float(r.logprob)  # NaN: logprobs off
        slp = None if r.sampler_logprob != r.sampler_logprob else float(r.sampler_logprob)
        top = [(int(self._top[i].token), float(self._top[i].logprob)) for i in range(r.n_top)] \
            if self._top is not None else []
        return StepResult(int(r.token), int(r.position), data.decode("utf-8", "replace"), data,
                          StopReason(r.stop), int(r.n_evaluated), lp, slp, top)

    def eval(self) -> None:
        """Runs pending input without sampling (the raw logits become readable)."""
        self._check(_lib().rlm_session_eval(self._h), "eval")

    def _logits_ptr(self) -> Tuple[Any, int]:
        p = POINTER(c_float)()
        n = c_size_t(0)
        self._check(_lib().rlm_session_logits(self._h, byref(p), byref(n)), "logits")
        return p, n.value

    def logits(self) -> Any:
        """The logits of the last evaluated position as a read-only numpy array that views the
        session's memory (no copy): valid until the next call on this session. Needs numpy
        (imported here, on first use); :meth:`logits_view` needs nothing."""
        import numpy as np  # optional dependency: only this method needs it
        p, n = self._logits_ptr()
        a = np.ctypeslib.as_array(p, shape=(n,))
        a.flags.writeable = False
        return a

    def logits_view(self) -> memoryview:
        """The same logits as a read-only float memoryview (no copy, no numpy)."""
        p, n = self._logits_ptr()
        arr = (c_float * n).from_address(ctypes.addressof(p.contents))
        return memoryview(arr).cast("B").toreadonly().cast("f")

    def cancel(self) -> None:
        """Stops the step running on this session in another thread (it raises an Error with
        status RLM_ERR_CANCELLED); the session stays valid. Safe from any thread."""
        _lib().rlm_session_cancel(self._h)

    def generate(self, prompt: Optional[str] = None, *, max_tokens: int = 256,
                 stop: Iterable[str] = (), grammar: Optional[Grammar] = None,
                 json_schema: Optional[Union[str, Dict[str, Any]]] = None,
                 reset: bool = True, parse_specials: bool = True,
                 **sampling: Any) -> Iterator[str]:
        """Streams the continuation of `prompt` as text pieces (whole UTF-8 characters; stop
        strings never appear). ``reset`` (default) starts a fresh sequence; reset=False
        continues the current one (a chat turn). ``prompt=None`` generates from what is already
        fed. Sampling keywords are rlm_sampling fields (``temperature=0`` is greedy, ``seed``,
        ``top_p`` ...). ``grammar`` / ``json_schema`` constrain the output (the session needs
        grammar_state_bytes). After the iterator ends, :attr:`last_stop` says why."""
        if reset:
            self.reset()
        self.set_sampling(**sampling)
        self.set_stops(stop)
        self.set_max_tokens(max_tokens)
        if json_schema is not None:
            grammar = Grammar.from_json_schema(self.model, json_schema)
        self.set_grammar(grammar)
        if prompt is not None:
            self.feed_text(prompt, parse_specials=parse_specials)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.last_stop = StopReason.NONE
        while True:
            r = self.step()
            piece = decoder.decode(r.data)
            if piece:
                yield piece
            if r.stop != StopReason.NONE:
                self.last_stop = r.stop
                break
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail

    # -- snapshots ------------------------------------------------------------------------------

    def save(self) -> bytes:
        """A snapshot of the session's state (positions, live KV entries, sampling, RNG...)."""
        lib = _lib()
        n = c_size_t(0)
        self._check(lib.rlm_session_snapshot_bytes(self._h, byref(n)), "snapshot size")
        buf = (c_uint64 * ((n.value + 7) // 8))()
        out = c_size_t(0)
        self._check(lib.rlm_session_save(self._h, buf, ctypes.sizeof(buf), byref(out)), "save")
        return ctypes.string_at(buf, out.value)

    def restore(self, snapshot: Union[bytes, bytearray, memoryview]) -> None:
        """Replace the state with a snapshot's (same model; a compatible config)."""
        data = bytes(snapshot)
        buf = (c_uint64 * ((len(data) + 7) // 8 or 1))()
        ctypes.memmove(buf, data, len(data))
        self._check(_lib().rlm_session_restore(self._h, buf, len(data)), "restore")
