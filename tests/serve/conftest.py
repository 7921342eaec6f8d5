"""Fixtures of the `ringlm serve` tests: the models (skipped cleanly without ../shared) and one
stories260K server shared by the tests that need no special flags."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_util  # noqa: E402


@pytest.fixture(scope="session")
def golden() -> str:
    text = serve_util.golden_continuation()
    if not text:
        pytest.skip("../shared/references/stories260K absent: no golden text")
    return text


@pytest.fixture(scope="session")
def stories() -> str:
    path = serve_util.stories_model()
    if not path:
        pytest.skip("../shared/models/stories260K absent")
    return path


@pytest.fixture(scope="session")
def chat_model() -> str:
    return serve_util.chat_model()


@pytest.fixture(scope="module")
def server(stories):
    srv = serve_util.Server(stories, "--slots", "2", "--queue", "8")
    yield srv
    assert srv.alive(), "the server died: " + srv.log_tail()
    assert srv.stop() == 0, srv.log_tail()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, attach the tail of the server's log to the report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        srv = item.funcargs.get("server") if hasattr(item, "funcargs") else None
        if srv is not None:
            rep.sections.append(("ringlm serve log (tail)", srv.log_tail()))
