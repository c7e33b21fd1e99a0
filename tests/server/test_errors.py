# Every refusal of `cera serve` (issue 18, acceptance 2), each in OpenAI's shape
# {"error": {"message", "type", "param", "code"}}: malformed JSON, wrong types and ranges naming the
# field, a prompt longer than the context, API keys, unknown models and routes, a body over the
# limit and a full queue. Raw http.client so the exact status and headers are seen; the `openai`
# package where its exception classes are the point.
import json
import re
import socket
import time

import openai
import pytest

from cera_server import MODEL_ID, assert_error

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MESSAGES = [{"role": "user", "content": "Say hello."}]


def chat_body(**fields):
    body = {"model": MODEL_ID, "messages": MESSAGES, "max_tokens": 2, "temperature": 0}
    body.update(fields)
    return body


def test_malformed_json(server):
    for body in (b'{"messages": [', b"{,}", b'{"a": 1,}', b"", b"nul", b'{"messages": "\\x"}'):
        status, _, obj = server.post(CHAT, body, headers={"Content-Type": "application/json"})
        err = assert_error(status, obj, 400, "invalid_request_error")
        if body:
            assert re.search(r"line|column|byte|position|offset", err["message"]), f"{body!r}: no place in {err}"
    status, _, obj = server.post(CHAT, b"[1, 2]", headers={"Content-Type": "application/json"})
    assert_error(status, obj, 400, "invalid_request_error")


WRONG_TYPES = [
    # (endpoint, field, wrong value, the param the error must name)
    (CHAT, "messages", "hi", "messages"),
    (CHAT, "messages", [1], "messages[0]"),
    (CHAT, "messages", [{"role": "user", "content": 5}], "messages[0].content"),
    (CHAT, "messages", [{"role": 5, "content": "x"}], "messages[0].role"),
    (CHAT, "messages", [{"role": "user", "content": [{"type": "text", "text": 3}]}], "messages[0].content[0].text"),
    (CHAT, "model", 5, "model"),
    (CHAT, "max_tokens", "10", "max_tokens"),
    (CHAT, "max_completion_tokens", 2.5, "max_completion_tokens"),
    (CHAT, "temperature", "hot", "temperature"),
    (CHAT, "top_p", [], "top_p"),
    (CHAT, "n", True, "n"),
    (CHAT, "seed", "x", "seed"),
    (CHAT, "seed", 1.5, "seed"),
    (CHAT, "stop", 5, "stop"),
    (CHAT, "stream", "yes", "stream"),
    (CHAT, "stream_options", 3, "stream_options"),
    (CHAT, "logprobs", "yes", "logprobs"),
    (CHAT, "top_logprobs", "5", "top_logprobs"),
    (CHAT, "presence_penalty", {}, "presence_penalty"),
    (CHAT, "frequency_penalty", "0", "frequency_penalty"),
    (CHAT, "logit_bias", [1], "logit_bias"),
    (CHAT, "logit_bias", {"12": "x"}, "logit_bias"),
    (CHAT, "top_k", "4", "top_k"),
    (CHAT, "min_p", False, "min_p"),
    (CHAT, "ignore_eos", 1, "ignore_eos"),
    (COMPLETIONS, "prompt", 5, "prompt"),
    (COMPLETIONS, "prompt", {"text": "x"}, "prompt"),
    (COMPLETIONS, "logprobs", True, "logprobs"),
    (COMPLETIONS, "max_tokens", [3], "max_tokens"),
]


@pytest.mark.parametrize("path,field,value,param", WRONG_TYPES, ids=lambda v: str(v)[:40])
def test_wrong_type_names_the_field(server, path, field, value, param):
    body = chat_body(**{field: value}) if path == CHAT else {"prompt": "Hi", "max_tokens": 2, field: value}
    status, _, obj = server.post(path, body)
    err = assert_error(status, obj, 400, "invalid_request_error", want_param=param)
    assert param.split("[")[0] in err["message"], err


OUT_OF_RANGE = [
    ("n", 0), ("n", 17), ("temperature", -0.5), ("temperature", 2.5), ("top_p", 1.5), ("top_logprobs", 21),
    ("max_tokens", -1), ("presence_penalty", 2.5), ("frequency_penalty", -3), ("logit_bias", {"12": 101}),
    ("logit_bias", {"999999": 1}), ("logit_bias", {"x": 1}), ("stop", ["a"] * 17), ("stop", [""]),
    ("messages", []), ("messages", [{"role": "wizard", "content": "x"}]),
]


@pytest.mark.parametrize("field,value", OUT_OF_RANGE, ids=lambda v: str(v)[:30])
def test_out_of_range_names_the_field(server, field, value):
    status, _, obj = server.post(CHAT, chat_body(**{field: value, **({"logprobs": True} if field == "top_logprobs" else {})}))
    err = assert_error(status, obj, 400, "invalid_request_error")
    assert err["param"] is not None and err["param"].split("[")[0] == field, err


def test_missing_fields(server):
    status, _, obj = server.post(CHAT, {"model": MODEL_ID})
    assert_error(status, obj, 400, "invalid_request_error", want_param="messages")
    status, _, obj = server.post(COMPLETIONS, {"model": MODEL_ID})
    assert_error(status, obj, 400, "invalid_request_error", want_param="prompt")
    status, _, obj = server.post(COMPLETIONS, {"prompt": [99999999], "max_tokens": 1})
    assert_error(status, obj, 400, "invalid_request_error", want_param="prompt")


def test_openai_client_raises_bad_request(server):
    client = server.openai()
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, temperature=9)
    assert e.value.status_code == 400 and e.value.body["param"] == "temperature"


def test_unknown_model_404(server):
    status, _, obj = server.post(CHAT, chat_body(model="gpt-4o"))
    err = assert_error(status, obj, 404, "invalid_request_error", "model_not_found", "model")
    assert "gpt-4o" in err["message"] and MODEL_ID in err["message"]
    status, _, obj = server.post(COMPLETIONS, {"model": "nope", "prompt": "x"})
    assert_error(status, obj, 404, "invalid_request_error", "model_not_found", "model")
    with pytest.raises(openai.NotFoundError):
        server.openai().chat.completions.create(model="gpt-4o", messages=MESSAGES, max_tokens=2)


def test_unknown_route_404(server):
    for method, path in (("GET", "/v2/nothing"), ("POST", "/v1/embeddings_typo")):
        status, _, data = server.request(method, path, body=b"{}" if method == "POST" else None)
        assert_error(status, json.loads(data), 404)


def test_prompt_longer_than_context(start_server):
    s = start_server("--ctx-size", "256")
    text = "The quick brown fox jumps over the lazy dog. " * 40
    n_prompt = len(s.tokenize(content=text, add_special=True))
    assert n_prompt > 256
    status, _, obj = s.post(COMPLETIONS, {"prompt": text, "max_tokens": 4})
    err = assert_error(status, obj, 400, "invalid_request_error", "context_length_exceeded", "prompt")
    numbers = set(re.findall(r"\d+", err["message"]))
    assert str(n_prompt) in numbers and "256" in numbers, err
    messages = [{"role": "user", "content": text}]
    n_chat = len(s.tokenize(messages=messages))
    status, _, obj = s.post(CHAT, {"messages": messages, "max_tokens": 4})
    err = assert_error(status, obj, 400, "invalid_request_error", "context_length_exceeded", "messages")
    numbers = set(re.findall(r"\d+", err["message"]))
    assert str(n_chat) in numbers and "256" in numbers, err
    # A prompt that fits but whose max_tokens does not: refused too, never silently cut.
    short = "Hello there. " * 10
    n_short = len(s.tokenize(content=short, add_special=True))
    status, _, obj = s.post(COMPLETIONS, {"prompt": short, "max_tokens": 256})
    err = assert_error(status, obj, 400, "invalid_request_error", "context_length_exceeded")
    assert str(n_short) in err["message"] and "256" in err["message"], err
    # And the server still serves what fits.
    status, _, obj = s.post(COMPLETIONS, {"prompt": short, "max_tokens": 4})
    assert status == 200, obj


def test_api_key(start_server):
    s = start_server("--api-key", "sekret")
    body = chat_body()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "sekret"}, {"Authorization": "Bearer "}):
        status, _, obj = s.post(CHAT, body, headers=headers)
        assert_error(status, obj, 401, "authentication_error", "invalid_api_key")
        status, _, data = s.request("GET", "/v1/models", headers=headers)
        assert_error(status, json.loads(data), 401, "authentication_error", "invalid_api_key")
    status, _, obj = s.post(CHAT, body, headers={"Authorization": "Bearer sekret"})
    assert status == 200, obj
    # The contract keeps /health and the page open: probes and browsers have no key.
    assert s.request("GET", "/health")[0] == 200
    assert s.request("GET", "/")[0] == 200
    with pytest.raises(openai.AuthenticationError):
        s.openai(api_key="wrong").chat.completions.create(model=MODEL_ID, messages=MESSAGES, max_tokens=2)
    r = s.openai(api_key="sekret").chat.completions.create(model=MODEL_ID, messages=MESSAGES, max_tokens=2)
    assert r.usage.completion_tokens >= 1


def test_body_over_the_limit_413(start_server):
    s = start_server("--max-body-mb", "1", "--timeout", "3")
    pad = "x" * (1024 * 1024 + 10)
    status, _, obj = s.post(COMPLETIONS, {"prompt": "Hi", "max_tokens": 1, "user": pad})
    assert_error(status, obj, 413, "invalid_request_error", "request_too_large")
    # Just under the limit: served (the padding is an ignored field).
    status, _, obj = s.post(COMPLETIONS, {"prompt": "Hi", "max_tokens": 1, "user": "x" * (1000 * 1000)})
    assert status == 200, obj
    # A Content-Length over the limit: the server reads and drops the declared body before it
    # answers, so that a client that does send it reads the 413 instead of a connection reset; a
    # body that never comes is bounded by the idle timeout (--timeout 3 here), then refused.
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 52428800\r\n\r\n{\"prompt\": \"")
        head = read_response(sock)
    assert head.startswith(b"HTTP/1.1 413"), head[:200]
    body = json.loads(head.split(b"\r\n\r\n", 1)[1])
    assert_error(413, body, 413, "invalid_request_error", "request_too_large")


def read_response(sock):
    """One whole HTTP response with a Content-Length from a raw socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    m = re.search(rb"(?i)content-length:\s*(\d+)", head)
    want = int(m.group(1)) if m else 0
    while len(rest) < want:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head + b"\r\n\r\n" + rest


def open_stream(port, body):
    """A raw streaming request; returns the socket once the first SSE bytes have come back."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    data = json.dumps(body).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return sock


@pytest.mark.time_limit(300)
def test_queue_full_429(start_server):
    s = start_server("--parallel", "1", "--max-queue", "1")
    long = {"prompt": "Count to a thousand:", "max_tokens": 400, "ignore_eos": True, "stream": True}
    running = open_stream(s.port, long)
    assert running.recv(4096).startswith(b"HTTP/1.1 200"), "the first request must run"
    deadline = time.monotonic() + 30
    while s.metrics().get("cera:num_requests_running") != 1:
        assert time.monotonic() < deadline, "the first request never showed as running"
        time.sleep(0.05)
    # The second waits (the queue holds one); its answer is not read.
    waiting = open_stream(s.port, long)
    while s.metrics().get("cera:num_requests_waiting") != 1:
        assert time.monotonic() < deadline, "the second request never showed as waiting"
        time.sleep(0.05)
    try:
        status, headers, obj = s.post(COMPLETIONS, {"prompt": "Hi", "max_tokens": 2})
        assert_error(status, obj, 429, "rate_limit_error", "queue_full")
        assert "retry-after" in headers, headers
        assert int(headers["retry-after"]) >= 1, headers
        status, headers, obj = s.post(CHAT, chat_body())
        assert_error(status, obj, 429, "rate_limit_error", "queue_full")
        with pytest.raises(openai.RateLimitError):
            s.openai().completions.create(model=MODEL_ID, prompt="Hi", max_tokens=2)
    finally:
        running.close()
        waiting.close()
    # Once the two are gone the server serves again.
    deadline = time.monotonic() + 60
    while True:
        status, _, obj = s.post(COMPLETIONS, {"prompt": "Hi", "max_tokens": 2})
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 200, obj
    m = s.wait_idle()
    assert m["cera:kv_blocks_used"] == 0 and m["cera:num_requests_running"] == 0 and m["cera:num_requests_waiting"] == 0
