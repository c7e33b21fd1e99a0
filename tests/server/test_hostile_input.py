# Hostile input (issue 18, acceptance 4): 1,000 seeded fuzzed requests (truncated bodies, every
# field with every wrong type, numbers past int64 and double, invalid UTF-8, nesting 100,000 deep,
# 50 MB bodies, random bytes, broken HTTP) each get a 4xx: never a 5xx, never a dropped connection.
# Then the server still answers a normal request, and (conftest) exits 0 with no sanitizer report.
import json
import random
import select
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from cera_server import MODEL_ID

N_REQUESTS = 1000
SEED = 18
ROUTES = ["/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"]

VALID = {
    "/v1/chat/completions": {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
                             "temperature": 0},
    "/v1/completions": {"model": MODEL_ID, "prompt": "Hi", "max_tokens": 1, "temperature": 0},
    "/tokenize": {"content": "Hi"},
    "/detokenize": {"tokens": [1, 2]},
}

# The JSON types each field accepts (besides null, which means "not given"); every other type
# must be refused.
FIELDS = {
    "/v1/chat/completions": {
        "model": {str}, "messages": {list}, "max_tokens": {int}, "max_completion_tokens": {int},
        "temperature": {int, float}, "top_p": {int, float}, "n": {int}, "seed": {int}, "stop": {str, list},
        "stream": {bool}, "stream_options": {dict}, "logprobs": {bool}, "top_logprobs": {int},
        "presence_penalty": {int, float}, "frequency_penalty": {int, float}, "logit_bias": {dict},
        "top_k": {int}, "min_p": {int, float}, "repeat_penalty": {int, float}, "ignore_eos": {bool},
        "cache_salt": {str},
    },
    "/v1/completions": {
        "model": {str}, "prompt": {str, list}, "max_tokens": {int}, "temperature": {int, float}, "n": {int},
        "seed": {int}, "stop": {str, list}, "stream": {bool}, "logprobs": {int}, "logit_bias": {dict},
        "top_p": {int, float},
    },
    "/tokenize": {"content": {str}, "add_special": {bool}, "parse_special": {bool}},
    "/detokenize": {"tokens": {list}},
}
SAMPLES = {str: ["x", ""], int: [3], float: [0.5], bool: [True, False], list: [[], [{}], [1, "a"]],
           dict: [{}, {"a": [1]}]}
# Numbers no field can take: past int64, past double (the text, since Python cannot dump inf as
# JSON), and negative ones where a count is meant.
HUGE = ["1e400", "-1e400", "99999999999999999999", "-99999999999999999999", "1.7976931348623157e309",
        "123456789012345678901234567890"]
HUGE_FIELDS = {
    "/v1/chat/completions": ["max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "seed",
                             "top_logprobs", "presence_penalty", "frequency_penalty", "top_k", "min_p"],
    "/v1/completions": ["max_tokens", "temperature", "n", "logprobs", "top_p", "seed"],
}


def wrong_value(rng, accepted):
    """A value of a JSON type the field does not take (0.5 counts as wrong where only integers go;
    True as wrong where numbers go, JSON having no bool-int confusion)."""
    kinds = [t for t in SAMPLES if t not in accepted]
    return rng.choice(SAMPLES[rng.choice(kinds)])


def body_with(route, field, raw_value_text):
    """The route's valid body with one field replaced by a JSON text written as is."""
    body = dict(VALID[route])
    body[field] = "@@VALUE@@"
    return json.dumps(body).replace('"@@VALUE@@"', raw_value_text).encode()


def make_cases(rng):
    """[(label, route, raw request bytes or None, body bytes)]: the first kinds are bodies POSTed
    with a correct Content-Length; 'raw' cases are whole hand-written HTTP requests."""
    cases = []

    def add(label, route, body):
        cases.append((label, route, None, body))

    # Every field of every route with every wrong type, twice over with fresh samples.
    for _ in range(2):
        for route, fields in FIELDS.items():
            for field, accepted in fields.items():
                for _ in range(2):
                    add(f"type {field}", route, body_with(route, field, json.dumps(wrong_value(rng, accepted))))
    # Wrong types one level down.
    nested = [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}),
        ("/v1/chat/completions", {"messages": [{"role": ["user"], "content": "x"}]}),
        ("/v1/chat/completions", {"messages": [{"content": "x"}]}),
        ("/v1/chat/completions", {"messages": ["hi"]}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": {}}]}]}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "stop": [1, 2]}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": 1}}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "logit_bias": {"1": "a"}}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "logit_bias": {"-1": 1}}),
        ("/v1/completions", {"prompt": [1, "a"]}),
        ("/v1/completions", {"prompt": [-1]}),
        ("/v1/completions", {"prompt": [1.5]}),
        ("/v1/completions", {"prompt": [[1, 2]]}),
        ("/v1/completions", {"prompt": ["a", "b"]}),
        ("/v1/completions", {"prompt": []}),
        ("/detokenize", {"tokens": [-1]}),
        ("/detokenize", {"tokens": [1 << 40]}),
        ("/detokenize", {"tokens": ["a"]}),
        ("/detokenize", {"tokens": [1.5]}),
        ("/tokenize", {"messages": [{"role": "user", "content": 5}]}),
        ("/tokenize", {}),
    ]
    for route, fields in nested:
        body = dict(fields) if route == "/tokenize" else {**VALID[route], **fields}
        add("nested", route, json.dumps(body).encode())
    # Huge numbers.
    for route, fields in HUGE_FIELDS.items():
        for field in fields:
            for text in HUGE:
                add(f"huge {field}={text}", route, body_with(route, field, text))
    for text in HUGE:
        add("huge token id", "/v1/completions", body_with("/v1/completions", "prompt", f"[{text}]"))
        add("huge token id", "/detokenize", body_with("/detokenize", "tokens", f"[1, {text}]"))
        add("huge bias", "/v1/chat/completions", body_with("/v1/chat/completions", "logit_bias", '{"1": %s}' % text))
        add("huge bias key", "/v1/chat/completions", body_with("/v1/chat/completions", "logit_bias", '{"%s": 1}' % text))
    # Invalid UTF-8 inside strings, and escapes of lone surrogates.
    bad_utf8 = [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"a\x80b", b"\xfe\xfe"]
    for route, field in (("/v1/chat/completions", None), ("/v1/completions", "prompt"), ("/tokenize", "content")):
        for bad in bad_utf8:
            if field is None:
                body = b'{"messages": [{"role": "user", "content": "hi ' + bad + b'"}], "max_tokens": 1}'
            else:
                body = b'{"' + field.encode() + b'": "x' + bad + b'y", "max_tokens": 1}'
            add("utf8", route, body)
        for esc in (b"\\ud800", b"\\udfff", b"\\ud800\\u0041", b"\\uZZZZ", b"\\u12"):
            key = b"messages" if field is None else field.encode()
            inner = b'[{"role": "user", "content": "' + esc + b'"}]' if field is None else b'"' + esc + b'"'
            add("surrogate", route, b'{"' + key + b'": ' + inner + b', "max_tokens": 1}')
    # Deep nesting: 100,000 levels in each place a parser might recurse.
    deep = 100_000
    for route in ROUTES:
        add("deep [", route, b"[" * deep + b"]" * deep)
        add("deep {", route, b'{"a":' * deep + b"1" + b"}" * deep)
        add("deep unclosed", route, b"[" * deep)
    add("deep messages", "/v1/chat/completions",
        b'{"messages": [{"role": "user", "content": ' + b"[" * deep + b"]" * deep + b"}]}")
    add("deep logit_bias", "/v1/chat/completions", b'{"messages": [], "logit_bias": ' + b'{"1":' * deep + b"1" + b"}" * deep + b"}")
    # Strings that are long but under the body limit, in fields that take a bounded string.
    add("long stop", "/v1/chat/completions", body_with("/v1/chat/completions", "stop", json.dumps("s" * 100_000)))
    add("many stops", "/v1/chat/completions", body_with("/v1/chat/completions", "stop", json.dumps(["s"] * 10_000)))
    add("long model", "/v1/chat/completions", body_with("/v1/chat/completions", "model", json.dumps("m" * 1_000_000)))
    # 50 MB bodies (over the default 8 MiB limit): valid JSON, and junk.
    big = 50 * 1024 * 1024
    add("50 MB json", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "' + b"a" * big + b'"}]}')
    add("50 MB junk", "/v1/completions", b"\x00" * big)
    add("50 MB deep", "/tokenize", b"[" * big)
    # Random bytes, and random printable junk, as bodies.
    for i in range(60):
        n = rng.choice([1, 2, 7, 100, 4096, 70_000])
        body = bytes(rng.getrandbits(8) for _ in range(n)) if i % 2 else "".join(
            rng.choice('{}[]":,0123456789.eE-+ tfnaelrsu\\') for _ in range(n)).encode()
        add("random", rng.choice(ROUTES), body)
    # Broken HTTP: the request line, the headers, the length.
    raw = [
        b"GARBAGE\r\n\r\n",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n{}",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n{}",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"h" * 200_000 + b"\r\n\r\n",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(5000)) + b"\r\n",
        b"POST /" + b"p" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
        b"GET /metrics\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /v1/completions HTTP/9.9\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
    ]
    for r in raw:
        cases.append(("raw http", None, r, None))
    # Truncations of valid bodies, the rest of the budget.
    while len(cases) < N_REQUESTS:
        route = rng.choice(["/v1/chat/completions", "/v1/completions", "/tokenize"])
        body = dict(VALID[route])
        body["stop"] = ["\n\n", "END"] if route != "/tokenize" else None
        full = json.dumps(body).encode()
        add("truncated", route, full[:rng.randrange(0, len(full))])
    rng.shuffle(cases)
    return cases[:N_REQUESTS]


def exchange(port, route, raw, body, timeout=60):
    """Sends one request on a fresh connection and reads the status line of the answer; a server
    that answers before the whole body is sent (413 on the Content-Length) is fine, so sending
    stops once the answer has begun. Returns (status or None, what went wrong)."""
    if raw is None:
        raw = (f"POST {route} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.setblocking(False)
        view, sent, got = memoryview(raw), 0, b""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, f"no answer within {timeout} s (sent {sent} of {len(raw)} bytes)"
            want_write = [sock] if sent < len(raw) else []
            readable, writable, _ = select.select([sock], want_write, [], min(left, 1.0))
            if readable:
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    return None, f"connection reset before an answer (sent {sent} of {len(raw)}; got {got[:80]!r})"
                if not chunk:
                    return None, f"connection closed without an answer (sent {sent} of {len(raw)}; got {got[:80]!r})"
                got += chunk
                if b"\r\n" in got:
                    line = got.split(b"\r\n", 1)[0].split()
                    if len(line) >= 2 and line[0].startswith(b"HTTP/") and line[1].isdigit():
                        return int(line[1]), got[:300]
                    return None, f"not an HTTP status line: {got[:120]!r}"
            if writable:
                try:
                    sent += sock.send(view[sent:sent + (1 << 20)])
                except (BrokenPipeError, ConnectionResetError):
                    # The server stopped reading; its answer may still be waiting to be read.
                    sent = len(raw)
    finally:
        sock.close()


@pytest.mark.time_limit(900)
def test_fuzzed_requests_get_4xx(server):
    rng = random.Random(SEED)
    cases = make_cases(rng)
    assert len(cases) == N_REQUESTS
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda c: exchange(server.port, c[1], c[2], c[3]), cases))
    bad = []
    counts = {}
    for (label, route, raw, body), (status, detail) in zip(cases, results):
        counts[status] = counts.get(status, 0) + 1
        if status is None or not 400 <= status < 500:
            shown = (raw if raw is not None else body)[:120]
            bad.append(f"{label} {route}: {status} {detail!r} for {shown!r}")
    summary = f"statuses of {N_REQUESTS} fuzzed requests: {dict(sorted(counts.items(), key=str))}"
    print("\n" + summary)
    assert server.alive(), f"the server died:\n{server.stderr_text()}"
    assert not bad, f"{summary}\n{len(bad)} of {N_REQUESTS} did not get a 4xx, the first ones:\n" + "\n".join(bad[:8])


def test_normal_request_afterwards(server):
    status, _, obj = server.post("/v1/chat/completions", {"model": MODEL_ID, "max_tokens": 4, "temperature": 0,
                                                         "messages": [{"role": "user", "content": "Hello!"}]})
    assert status == 200 and obj["usage"]["completion_tokens"] >= 1, obj
    m = server.wait_idle()
    assert m["cera:kv_blocks_used"] == 0
