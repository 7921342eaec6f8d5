"""Fixtures of the ringlm Python package's tests: stories260K converted to f32 by the ringlm tool
(RINGLM_CLI) into RINGLM_TEST_DIR, and its golden greedy text from ../shared/references. Every
test that needs them is skipped, saying why, when ../shared is absent."""

import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SHARED = os.environ.get("RINGLM_SHARED_DIR") or os.path.join(ROOT, "..", "shared")


@pytest.fixture(scope="session")
def model_path() -> str:
    src = os.path.join(SHARED, "models", "stories260K")
    if not os.path.exists(os.path.join(src, "stories260K.bin")):
        pytest.skip("../shared/models/stories260K absent")
    out_dir = os.environ.get("RINGLM_TEST_DIR") or os.path.join(ROOT, "build", "release", "serve-test")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "stories260K-f32.rlm")
    if not os.path.exists(out):
        cli = os.environ.get("RINGLM_CLI") or os.path.join(ROOT, "build", "release", "bin", "ringlm")
        tmp = f"{out}.{os.getpid()}.tmp.rlm"
        subprocess.run([cli, "convert", os.path.join(src, "stories260K.bin"), "--tokenizer",
                        os.path.join(src, "tok512.bin"), "--quant", "f32", "-q", "-o", tmp],
                       check=True, stdout=subprocess.DEVNULL)
        os.replace(tmp, out)
    return out


@pytest.fixture(scope="session")
def golden() -> str:
    path = os.path.join(SHARED, "references", "stories260K", "once-upon-a-time.greedy.txt")
    if not os.path.exists(path):
        pytest.skip("../shared/references/stories260K absent")
    with open(path, encoding="utf-8") as f:
        ref = f.read().rstrip("\n")
    return ref[len("Once upon a time"):]


@pytest.fixture(scope="session")
def model(model_path):
    import ringlm
    return ringlm.Model.open(model_path)
