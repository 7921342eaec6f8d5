"""ctypes declarations of ringlm's C ABI (runtime/include/ringlm/ringlm.h) and the library loader.

Private: the public API is in ringlm/__init__.py. Structures mirror the header field for field;
every structure with a ``struct_size`` is created through its ``*_default`` function (see
:func:`new_struct`), which also checks that this file and the loaded library agree on its size.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int32,
                    c_size_t, c_uint32, c_uint64, c_void_p)
from typing import Optional, Type, TypeVar

# Status codes (rlm_status) used by the Python layer itself.
RLM_OK = 0
RLM_ERR_INVALID_ARGUMENT = 1
RLM_ERR_BUFFER_TOO_SMALL = 3
RLM_ERR_CAPACITY = 8
RLM_ERR_NOT_FOUND = 11

RLM_TOKENIZE_PARSE_SPECIALS = 0x1
RLM_TOKENIZE_ADD_BOS = 0x2


class rlm_model(Structure):
    _fields_ = [("opaque_", c_uint64 * 64)]


class rlm_model_info(Structure):
    _fields_ = [("struct_size", c_uint32), ("n_layers", c_uint32), ("dim", c_uint32),
                ("n_heads", c_uint32), ("n_kv_heads", c_uint32), ("head_dim", c_uint32),
                ("ffn_dim", c_uint32), ("vocab_size", c_uint32), ("max_context", c_uint32),
                ("bos_id", c_int32), ("eos_id", c_int32), ("n_tensors", c_uint32),
                ("weight_bytes", c_uint64), ("add_bos", c_int32)]


class rlm_session_config(Structure):
    _fields_ = [("struct_size", c_uint32), ("n_ctx", c_uint32), ("n_sink", c_uint32),
                ("kv_dtype", c_int), ("n_threads", c_uint32), ("n_batch", c_uint32),
                ("max_pending", c_uint32), ("max_text_bytes", c_uint32),
                ("stop_string_bytes", c_uint32), ("max_stop_strings", c_uint32),
                ("max_stop_tokens", c_uint32), ("penalty_window", c_uint32),
                ("max_logit_bias", c_uint32), ("kernels", c_char_p), ("backend", c_char_p),
                ("max_draft", c_uint32), ("grammar_state_bytes", c_uint32),
                ("grammar_cache_bytes", c_uint32), ("max_logit_rows", c_uint32),
                ("max_beams", c_uint32), ("max_beam_tokens", c_uint32)]


class rlm_logit_bias(Structure):
    _fields_ = [("token", c_int32), ("bias", c_float)]


class rlm_sampling(Structure):
    _fields_ = [("struct_size", c_uint32), ("temperature", c_float), ("top_k", c_int32),
                ("top_p", c_float), ("min_p", c_float), ("repeat_penalty", c_float),
                ("frequency_penalty", c_float), ("presence_penalty", c_float),
                ("penalty_last_n", c_int32), ("seed", c_uint64),
                ("logit_bias", POINTER(rlm_logit_bias)), ("n_logit_bias", c_uint32),
                ("dry_multiplier", c_float), ("dry_base", c_float),
                ("dry_allowed_length", c_int32), ("dry_penalty_last_n", c_int32),
                ("dry_sequence_breakers", POINTER(c_char_p)),
                ("n_dry_sequence_breakers", c_uint32), ("xtc_probability", c_float),
                ("xtc_threshold", c_float), ("typical_p", c_float), ("top_n_sigma", c_float),
                ("mirostat", c_int32), ("mirostat_tau", c_float), ("mirostat_eta", c_float)]


class rlm_step_result(Structure):
    _fields_ = [("struct_size", c_uint32), ("token", c_int32), ("position", c_uint32),
                ("text", c_void_p), ("text_len", c_size_t), ("stop", c_int),
                ("n_evaluated", c_uint32), ("logprob", c_float), ("sampler_logprob", c_float),
                ("n_top", c_uint32)]


class rlm_token_logprob(Structure):
    _fields_ = [("token", c_int32), ("logprob", c_float)]


class rlm_speculation(Structure):
    _fields_ = [("struct_size", c_uint32), ("mode", c_int), ("n_max", c_uint32),
                ("p_min", c_float), ("draft", c_void_p), ("ngram_min", c_uint32),
                ("ngram_max", c_uint32)]


class rlm_spec_stats(Structure):
    _fields_ = [("struct_size", c_uint32), ("verify_passes", c_uint64), ("drafted", c_uint64),
                ("accepted", c_uint64), ("draft_passes", c_uint64)]


class rlm_session_info(Structure):
    _fields_ = [("struct_size", c_uint32), ("kernels", c_char_p), ("backend", c_char_p),
                ("matmul_f32", c_char_p), ("matmul_f16", c_char_p), ("matmul_q8", c_char_p),
                ("matmul_q4", c_char_p), ("xnnpack_operators", c_uint32),
                ("xnnpack_reserved", c_size_t), ("xnnpack_used", c_size_t)]


_P = c_void_p  # opaque handles (rlm_session*, rlm_grammar*)

# name: (restype, argtypes)
_PROTOTYPES = {
    "rlm_status_string": (c_char_p, [c_int]),
    "rlm_model_open": (c_int, [c_void_p, c_size_t, POINTER(rlm_model)]),
    "rlm_model_error": (c_char_p, [POINTER(rlm_model)]),
    "rlm_model_info_default": (None, [c_void_p]),
    "rlm_model_get_info": (c_int, [POINTER(rlm_model), POINTER(rlm_model_info)]),
    "rlm_session_config_default": (None, [c_void_p]),
    "rlm_session_memory": (c_int, [POINTER(rlm_model), POINTER(rlm_session_config),
                                   POINTER(c_size_t), POINTER(c_size_t)]),
    "rlm_session_config_check": (c_int, [POINTER(rlm_model), POINTER(rlm_session_config),
                                         c_char_p, c_size_t]),
    "rlm_session_init": (c_int, [POINTER(rlm_model), POINTER(rlm_session_config), c_void_p,
                                 c_size_t, POINTER(_P)]),
    "rlm_session_error": (c_char_p, [_P]),
    "rlm_session_release": (c_int, [_P]),
    "rlm_session_info_default": (None, [c_void_p]),
    "rlm_session_get_info": (c_int, [_P, POINTER(rlm_session_info)]),
    "rlm_session_reset": (c_int, [_P]),
    "rlm_session_feed_text_ex": (c_int, [_P, c_char_p, c_size_t, c_uint32]),
    "rlm_session_feed_tokens": (c_int, [_P, POINTER(c_int32), c_size_t]),
    "rlm_sampling_default": (None, [c_void_p]),
    "rlm_session_set_sampling": (c_int, [_P, POINTER(rlm_sampling)]),
    "rlm_session_add_stop_token": (c_int, [_P, c_int32]),
    "rlm_session_add_stop_string": (c_int, [_P, c_char_p, c_size_t]),
    "rlm_session_clear_stops": (c_int, [_P]),
    "rlm_session_set_max_tokens": (c_int, [_P, c_uint32]),
    "rlm_session_set_ignore_eos": (c_int, [_P, c_int]),
    "rlm_step_result_default": (None, [c_void_p]),
    "rlm_step": (c_int, [_P, POINTER(rlm_step_result)]),
    "rlm_session_set_logprobs": (c_int, [_P, c_int, POINTER(rlm_token_logprob), c_uint32]),
    "rlm_session_cancel": (c_int, [_P]),
    "rlm_session_snapshot_bytes": (c_int, [_P, POINTER(c_size_t)]),
    "rlm_session_save": (c_int, [_P, c_void_p, c_size_t, POINTER(c_size_t)]),
    "rlm_session_restore": (c_int, [_P, c_void_p, c_size_t]),
    "rlm_session_eval": (c_int, [_P]),
    "rlm_session_logits": (c_int, [_P, POINTER(POINTER(c_float)), POINTER(c_size_t)]),
    "rlm_session_position": (c_uint32, [_P]),
    "rlm_session_rewind": (c_int, [_P, c_uint32]),
    "rlm_speculation_default": (None, [c_void_p]),
    "rlm_session_set_speculation": (c_int, [_P, POINTER(rlm_speculation)]),
    "rlm_spec_stats_default": (None, [c_void_p]),
    "rlm_session_spec_stats": (c_int, [_P, POINTER(rlm_spec_stats)]),
    "rlm_grammar_memory": (c_int, [POINTER(rlm_model), c_char_p, c_size_t, POINTER(c_size_t)]),
    "rlm_grammar_compile": (c_int, [POINTER(rlm_model), c_char_p, c_size_t, c_void_p, c_size_t,
                                    POINTER(_P), c_char_p, c_size_t]),
    "rlm_json_gbnf": (c_char_p, []),
    "rlm_json_schema_scratch_bytes": (c_size_t, [c_char_p, c_size_t]),
    "rlm_json_schema_to_gbnf": (c_int, [c_char_p, c_size_t, c_void_p, c_size_t, c_char_p,
                                        c_size_t, POINTER(c_size_t), c_char_p, c_size_t]),
    "rlm_session_set_grammar": (c_int, [_P, _P]),
    "rlm_tokenize_scratch_bytes": (c_size_t, [POINTER(rlm_model), c_size_t]),
    "rlm_tokenize_ex": (c_int, [POINTER(rlm_model), c_char_p, c_size_t, c_uint32,
                                POINTER(c_int32), c_size_t, POINTER(c_size_t), c_void_p,
                                c_size_t]),
    "rlm_token_to_bytes": (c_int, [POINTER(rlm_model), c_int32, c_char_p, c_size_t,
                                   POINTER(c_size_t)]),
    "rlm_token_text_after": (c_int, [POINTER(rlm_model), c_int32, c_int32, c_char_p, c_size_t,
                                     POINTER(c_size_t)]),
    "rlm_token_lookup": (c_int, [POINTER(rlm_model), c_char_p, c_size_t, POINTER(c_int32)]),
    "rlm_model_chat_template": (c_int, [POINTER(rlm_model), POINTER(c_void_p),
                                        POINTER(c_size_t)]),
    "rlm_token_is_end": (c_int, [POINTER(rlm_model), c_int32]),
}

_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None
_lock = threading.Lock()


class LibraryNotFound(Exception):
    """Raised by :func:`lib` when libringlm.so cannot be found or loaded (wrapped by the caller)."""


def _candidates():
    env = os.environ.get("RINGLM_LIBRARY")
    if env:
        # An explicit choice is the only one tried: a wrong path is an error, not a fallback.
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.startswith("libringlm") and ".so" in name:
            yield os.path.join(here, name)
    found = ctypes.util.find_library("ringlm")
    if found:
        yield found
    for d in ("/usr/local/lib", "/usr/lib", "/usr/local/lib64", "/usr/lib64"):
        yield os.path.join(d, "libringlm.so")


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use, prototypes set)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in _candidates():
            if os.sep in path and not os.path.exists(path):
                errors.append(f"{path}: no such file")
                continue
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                errors.append(f"{path}: {e}")
                continue
            for name, (restype, argtypes) in _PROTOTYPES.items():
                fn = getattr(handle, name)
                fn.restype = restype
                fn.argtypes = argtypes
            _lib, _lib_path = handle, path
            return handle
        raise LibraryNotFound(
            "libringlm.so not found (" + "; ".join(errors) + "). Set RINGLM_LIBRARY to its path "
            "(a build has it at build/release/lib/libringlm.so or in the build tree's runtime/), "
            "copy it next to the ringlm package, or install ringlm (cmake --install).")


def library_path() -> Optional[str]:
    """Path of the loaded library (None before the first use)."""
    return _lib_path


T = TypeVar("T", bound=Structure)


def new_struct(cls: Type[T], default_fn: str) -> T:
    """A structure filled by its ``*_default`` function. The function writes struct_size (the
    library's sizeof) and the defaults; it runs on a larger scratch block so that a library whose
    struct is larger than this binding's cannot write past it, and a size mismatch raises."""
    scratch = (c_char * (ctypes.sizeof(cls) + 1024))()
    getattr(lib(), default_fn)(ctypes.cast(scratch, c_void_p))
    size = c_uint32.from_buffer(scratch).value
    if size != ctypes.sizeof(cls):
        raise LibraryNotFound(
            f"{cls.__name__}: the library's struct is {size} bytes, this binding's "
            f"{ctypes.sizeof(cls)}: the Python package and libringlm.so are of different versions")
    return cls.from_buffer_copy(scratch)


__all__ = ["lib", "new_struct", "library_path", "LibraryNotFound", "c_double"]
