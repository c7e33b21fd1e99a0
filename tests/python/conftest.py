# The models the tests of the Python package (bindings/python) run on, found where the C++ tests
# find them: stories260K in the shared folder (CERA_SHARED_DIR, else ../shared beside the
# repository), converted once per session with `cera convert --llama2c` (CERA_BIN, else the main
# build's build/apps/cli/cera); SmolLM2 and all-MiniLM-L6-v2 in the model cache `make models`
# fills (tests/model_cache.h: $CERA_CACHE_DIR/models, $XDG_CACHE_HOME/cera/models or
# ~/.cache/cera/models). A model that is not there skips its tests, as the C++ tests do.
# Every test is bounded by SIGALRM: its handler raises inside cera's waits like Ctrl-C does.
# By hand: bash scripts/test-python.sh [pytest arguments]
import os
import signal
import subprocess
from pathlib import Path

import pytest

import cera

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TEST_SECONDS = 300


def shared_dir():
    return Path(os.environ.get("CERA_SHARED_DIR") or REPO.parent / "shared")


def model_cache():
    if os.environ.get("CERA_CACHE_DIR"):
        return Path(os.environ["CERA_CACHE_DIR"]) / "models"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.environ.get("HOME", "/"), ".cache")
    return Path(base) / "cera" / "models"


def stories_reference():
    """llama2.c's greedy text from BOS (shared/models/README.md); the file ends with a newline
    the decode does not print."""
    text = (shared_dir() / "models" / "stories260K.greedy-256.txt").read_text(encoding="utf-8")
    return text[:-1] if text.endswith("\n") else text


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


def pytest_configure(config):
    config.addinivalue_line("markers", "time_limit(seconds): this test's bound instead of the default")


@pytest.fixture(scope="session")
def cera_bin():
    given = os.environ.get("CERA_BIN")
    path = Path(given) if given else REPO / "build" / "apps" / "cli" / "cera"
    if not os.access(path, os.X_OK):
        if given:
            pytest.fail(f"CERA_BIN={given} is not an executable (build the target cera)")
        pytest.skip(f"{path} is missing: build the target cera (or set CERA_BIN) to convert the test models")
    return str(path)


@pytest.fixture(scope="session")
def stories_gguf(cera_bin, tmp_path_factory):
    models = shared_dir() / "models"
    out = tmp_path_factory.mktemp("stories") / "stories260K.gguf"
    done = subprocess.run(
        [cera_bin, "convert", "--llama2c", str(models / "stories260K.bin"), "--tokenizer", str(models / "tok512.bin"),
         "-o", str(out)],
        capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return str(out)


@pytest.fixture(scope="session")
def stories(stories_gguf):
    with cera.Engine(stories_gguf, device="cpu") as engine:
        yield engine


@pytest.fixture(scope="session")
def smollm2_path():
    path = model_cache() / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        pytest.skip(f"{path} is missing: run `make models`")
    return str(path)


@pytest.fixture(scope="session")
def smollm2(smollm2_path):
    with cera.Engine(smollm2_path, device="cpu", n_ctx=2048, max_parallel=2) as engine:
        yield engine
