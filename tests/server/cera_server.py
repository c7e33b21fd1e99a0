# Helpers of the server tests: the `cera serve` process (start, wait, stop, judge its stderr),
# plain HTTP through http.client (so a test sees exactly the status, headers and bytes that came
# back, with no client library retrying or reshaping them), /metrics samples and the OpenAI error
# shape. Loopback only.
import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"
HOST = "127.0.0.1"
LISTENING = re.compile(r"cera serve: listening on http://127\.0\.0\.1:(\d+)")
CANCELLED = re.compile(r"cera serve: request (\S+) cancelled: the client disconnected after (\d+) tokens")
SANITIZER = re.compile(r"ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:|AddressSanitizer:DEADLYSIGNAL")
START_SECONDS = float(os.environ.get("CERA_SERVER_START_SECONDS", "180"))


def require_env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set (ctest sets it; by hand: {name}=... pytest ...)")
    return value


def model_path():
    cache = os.environ.get("CERA_CACHE_DIR") or os.path.expanduser("~/.cache/cera")
    path = os.path.join(cache, "models", MODEL_FILE)
    if not os.path.isfile(path):
        pytest.fail(f"{path} is missing: `make models` installs it")
    return path


class CeraServer:
    """One `cera serve` child. stderr is read by a thread into `lines`, so the pipe never fills and
    tests can wait for a line (the cancel log) with a deadline."""

    def __init__(self, binary, model, extra_args=(), threads=2):
        self.args = [binary, "serve", "-m", model, "--host", HOST, "--port", "0", "-t", str(threads), *extra_args]
        self.proc = None
        self.stopped = False
        self.term_sent = False
        self.port = None
        self.lines = []
        self._cond = threading.Condition()
        self._reader = None

    # --- lifetime -------------------------------------------------------------------------------

    def start(self):
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_SECONDS
        m = self.wait_for_line(LISTENING, deadline - time.monotonic())
        if m is None:
            self._fail_start("no 'listening on' line")
        self.port = int(m.group(1))
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._fail_start(f"it exited with {self.proc.returncode}")
            try:
                status, _, _ = self.request("GET", "/health", timeout=5)
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self._fail_start("GET /health never answered 200")

    def _fail_start(self, why):
        self.kill()
        pytest.fail(f"cera serve did not start ({why}): {' '.join(self.args)}\nstderr:\n{self.stderr_text()}")

    def _read_stderr(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for_line(self, pattern, timeout, start=0):
        """The first match of `pattern` in stderr lines from index `start` on, or None after timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            seen = start
            while True:
                for line in self.lines[seen:]:
                    m = pattern.search(line)
                    if m:
                        return m
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    return None
                self._cond.wait(min(left, 0.5))

    def stderr_text(self, tail=200):
        with self._cond:
            return "\n".join(self.lines[-tail:])

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait(30)

    def terminate(self):
        """SIGTERM once; stop_and_check then only waits and judges."""
        if not self.term_sent:
            self.term_sent = True
            self.proc.send_signal(signal.SIGTERM)

    def sanitizer_report(self):
        with self._cond:
            text = "\n".join(self.lines)
        m = SANITIZER.search(text)
        return None if m is None else text[max(0, m.start() - 200):m.start() + 4000]

    def stop_and_check(self, timeout=60):
        """SIGTERM, then: the exit status is 0 and stderr has no sanitizer report. Once only."""
        if self.proc is None or self.stopped:
            return
        self.stopped = True
        died_before = None if self.term_sent else self.proc.poll()
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"cera serve did not exit within {timeout} s of SIGTERM\n{self.stderr_text()}")
        self._reader.join(10)
        report = self.sanitizer_report()
        assert report is None, f"cera serve's stderr has a sanitizer report:\n{report}"
        assert died_before is None, f"cera serve died during the tests (status {died_before}):\n{self.stderr_text()}"
        assert self.proc.returncode == 0, (
            f"cera serve exited with {self.proc.returncode} after SIGTERM:\n{self.stderr_text()}")

    # --- HTTP -------------------------------------------------------------------------------------

    @property
    def base_url(self):
        return f"http://{HOST}:{self.port}"

    def connection(self, timeout=60):
        return http.client.HTTPConnection(HOST, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers as a dict with lower-case names, body bytes); a dict body is sent as JSON."""
        hdrs = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode()
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def post(self, path, body, headers=None, timeout=120):
        """POST and decode the JSON answer: (status, headers, object)."""
        status, hdrs, data = self.request("POST", path, body, headers, timeout)
        try:
            obj = json.loads(data)
        except ValueError:
            raise AssertionError(f"POST {path} answered {status} with a body that is not JSON: {data[:300]!r}")
        return status, hdrs, obj

    def tokenize(self, **fields):
        status, _, obj = self.post("/tokenize", fields)
        assert status == 200, f"/tokenize {fields}: {status} {obj}"
        return obj["tokens"]

    def detokenize(self, ids):
        status, _, obj = self.post("/detokenize", {"tokens": ids})
        assert status == 200, f"/detokenize: {status} {obj}"
        return obj["content"]

    def metrics_text(self):
        status, hdrs, data = self.request("GET", "/metrics", timeout=30)
        assert status == 200, f"GET /metrics: {status} {data[:300]!r}"
        return data.decode()

    def metrics(self):
        return parse_metrics(self.metrics_text())

    def wait_idle(self, timeout=30):
        """Poll /metrics until nothing runs, nothing waits and no KV block is used; the last sample."""
        deadline = time.monotonic() + timeout
        while True:
            m = self.metrics()
            idle = (m.get("cera:num_requests_running") == 0 and m.get("cera:num_requests_waiting") == 0
                    and m.get("cera:kv_blocks_used") == 0)
            if idle or time.monotonic() > deadline:
                return m
            time.sleep(0.1)

    def openai(self, **kwargs):
        import openai
        kwargs.setdefault("api_key", "none")
        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("timeout", 120)
        return openai.OpenAI(base_url=self.base_url + "/v1", **kwargs)


def parse_metrics(text):
    """{sample name with its labels as written, e.g. 'cera:request_success_total{finished_reason="stop"}': value},
    through prometheus_client's own parser (which also proves the text parses)."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = s.name
            if s.labels:
                key += "{" + ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items())) + "}"
            out[key] = s.value
    return out


def assert_error(status, obj, want_status, want_type=None, want_code=None, want_param=None):
    """OpenAI's error shape: {"error": {"message", "type", "param", "code"}} with the given values."""
    assert status == want_status, f"want {want_status}, got {status}: {obj}"
    assert isinstance(obj, dict) and set(obj) == {"error"}, f"not OpenAI's error shape: {obj}"
    err = obj["error"]
    assert isinstance(err, dict), obj
    for key in ("message", "type", "param", "code"):
        assert key in err, f"error has no '{key}': {obj}"
    assert isinstance(err["message"], str) and err["message"], obj
    assert isinstance(err["type"], str) and err["type"], obj
    assert err["param"] is None or isinstance(err["param"], str), obj
    assert err["code"] is None or isinstance(err["code"], str), obj
    if want_type is not None:
        assert err["type"] == want_type, f"type: want {want_type}: {obj}"
    if want_code is not None:
        assert err["code"] == want_code, f"code: want {want_code}: {obj}"
    if want_param is not None:
        assert err["param"] == want_param, f"param: want {want_param}: {obj}"
    return err


def sse_events(resp):
    """The `data:` payloads of an SSE response (http.client), in order, '[DONE]' included."""
    buf = b""
    while True:
        chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    yield line[5:].strip().decode()
