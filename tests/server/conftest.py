# The `cera serve` process the server tests talk to: started on a free loopback port with
# SmolLM2-135M-Instruct on the CPU, stopped with SIGTERM at the end, and judged on the way out
# (exit status 0, no sanitizer report on its stderr). Every test is bounded by SIGALRM, so a hung
# server fails the test that met it instead of the whole ctest run's timeout.
# By hand: CERA_BIN=build/apps/cli/cera $(bash scripts/test-venv.sh) -m pytest -q tests/server/test_errors.py
import os
import signal

import pytest

from cera_server import CeraServer, model_path, require_env

DEFAULT_TEST_SECONDS = 180


def pytest_configure(config):
    config.addinivalue_line("markers", "time_limit(seconds): this test's bound instead of the default")


@pytest.fixture(autouse=True)
def _bounded(request):
    marker = request.node.get_closest_marker("time_limit")
    seconds = marker.args[0] if marker else DEFAULT_TEST_SECONDS

    def on_alarm(signum, frame):
        raise TimeoutError(f"{request.node.nodeid} ran past its {seconds} s bound")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="session")
def cera_bin():
    path = require_env("CERA_BIN")
    if not os.access(path, os.X_OK):
        pytest.fail(f"CERA_BIN={path} is not an executable (build the target cera)")
    return path


@pytest.fixture(scope="session")
def model():
    return model_path()


@pytest.fixture(scope="module")
def server(cera_bin, model):
    """The default server of a test file: `cera serve -m SmolLM2 --port 0 -t 2`."""
    s = CeraServer(cera_bin, model)
    s.start()
    yield s
    s.stop_and_check()


@pytest.fixture
def start_server(cera_bin, model):
    """A factory for servers with extra options (a small context, an API key, ...); each one is
    stopped and checked when the test ends."""
    started = []

    def start(*args, **kwargs):
        s = CeraServer(cera_bin, model, list(args), **kwargs)
        started.append(s)
        s.start()
        return s

    yield start
    failures = []
    for s in started:
        try:
            s.stop_and_check()
        except AssertionError as e:
            failures.append(str(e))
    if failures:
        pytest.fail("\n".join(failures))
