# A client that goes away mid-stream (issue 18, acceptance 2) stops its generation: the server
# logs the cancel line, cera:requests_cancelled_total moves, cera:generation_tokens_total stops
# growing soon after, and the KV pool is whole once idle (no block used, nothing running or
# waiting). Two ways out: a raw socket closed after a few SSE events, and the `openai` package's
# stream (httpx) closed after a few chunks.
import json
import socket
import time

from cera_server import CANCELLED, MODEL_ID

LONG = 1500  # far more tokens than the few seconds the test waits would produce


def counter(m, name):
    return m.get(name, 0.0)


def wait_cancelled(server, from_line, before):
    """The cancel line (request id, tokens) and /metrics once the cancel counter has moved."""
    m = server.wait_for_line(CANCELLED, 30, start=from_line)
    assert m is not None, f"no cancel line on stderr after the disconnect:\n{server.stderr_text(30)}"
    deadline = time.monotonic() + 15
    while True:
        after = server.metrics()
        if counter(after, "cera:requests_cancelled_total") >= counter(before, "cera:requests_cancelled_total") + 1:
            break
        assert time.monotonic() < deadline, "cera:requests_cancelled_total did not move"
        time.sleep(0.1)
    assert counter(after, "cera:requests_cancelled_total") == counter(before, "cera:requests_cancelled_total") + 1
    return int(m.group(2)), after


def check_stopped_and_whole(server):
    """generation_tokens_total holds still over a second, then the pool is whole."""
    time.sleep(0.5)
    first = counter(server.metrics(), "cera:generation_tokens_total")
    time.sleep(1.0)
    second = counter(server.metrics(), "cera:generation_tokens_total")
    assert second == first, f"generation goes on after the cancel: {first} -> {second} tokens"
    m = server.wait_idle()
    assert m["cera:num_requests_running"] == 0 and m["cera:num_requests_waiting"] == 0, m
    assert m["cera:kv_blocks_used"] == 0, f"KV blocks still held after the cancel: {m['cera:kv_blocks_used']}"
    return m


def raw_stream(port, path, body):
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    data = json.dumps(body).encode()
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def read_events(sock, want):
    """Reads until `want` SSE data events have come; returns them."""
    buf, events = b"", []
    while len(events) < want:
        chunk = sock.recv(4096)
        assert chunk, f"the stream ended after {len(events)} events: {buf[:500]!r}"
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if b"data:" in event:
                events.append(event[event.index(b"data:") + 5:].strip())
    return events


def test_raw_socket_disconnect_cancels(server):
    before = server.metrics()
    from_line = len(server.lines)
    sock = raw_stream(server.port, "/v1/chat/completions",
                      {"model": MODEL_ID, "messages": [{"role": "user", "content": "Tell me a very long story."}],
                       "max_tokens": LONG, "ignore_eos": True, "stream": True, "temperature": 0.7, "seed": 1})
    events = read_events(sock, 5)
    assert json.loads(events[0])["object"] == "chat.completion.chunk"
    sock.close()
    tokens, after = wait_cancelled(server, from_line, before)
    assert 1 <= tokens < LONG, tokens
    m = check_stopped_and_whole(server)
    # The cancelled request is not a success.
    succ = sum(v for k, v in m.items() if k.startswith("cera:request_success_total"))
    succ_before = sum(v for k, v in before.items() if k.startswith("cera:request_success_total"))
    assert succ == succ_before, "a cancelled request was counted as a success"


def test_openai_stream_closed_cancels(server):
    client = server.openai()
    before = server.metrics()
    from_line = len(server.lines)
    stream = client.completions.create(model=MODEL_ID, prompt="Once upon a time", max_tokens=LONG, stream=True,
                                       extra_body={"ignore_eos": True})
    seen = 0
    for chunk in stream:
        seen += 1
        if seen == 4:
            break
    stream.close()
    tokens, _ = wait_cancelled(server, from_line, before)
    assert 1 <= tokens < LONG
    check_stopped_and_whole(server)


def test_many_disconnects_and_n2(server):
    # n = 2: both choices stop; and a burst of streams dropped at once leaves the pool whole. The
    # n = 2 stream may count as one cancel or two, so at least 6.
    before = server.metrics()
    from_line = len(server.lines)
    socks = [raw_stream(server.port, "/v1/completions",
                        {"prompt": f"Story number {i}:", "max_tokens": LONG, "ignore_eos": True, "stream": True,
                         "n": 2 if i == 0 else 1, "temperature": 1.0, "seed": i})
             for i in range(6)]
    read_events(socks[0], 3)
    for s in socks[1:]:
        read_events(s, 1)
    for s in socks:
        s.close()
    deadline = time.monotonic() + 60
    while counter(server.metrics(), "cera:requests_cancelled_total") < counter(before, "cera:requests_cancelled_total") + 6:
        assert time.monotonic() < deadline, (
            f"6 dropped streams, cancelled_total moved by "
            f"{counter(server.metrics(), 'cera:requests_cancelled_total') - counter(before, 'cera:requests_cancelled_total')}"
            f"\n{server.stderr_text(30)}")
        time.sleep(0.1)
    assert server.wait_for_line(CANCELLED, 5, start=from_line) is not None
    check_stopped_and_whole(server)
    # And it serves normally afterwards.
    status, _, obj = server.post("/v1/completions", {"prompt": "Hello", "max_tokens": 3, "temperature": 0})
    assert status == 200 and obj["usage"]["completion_tokens"] >= 1, obj


def test_closing_after_done_is_no_cancel(server):
    # A client that closes the moment it has read "data: [DONE]" got the whole answer: no cancel
    # line, no cancel counted. (The close can win the race with the chunked body's last bytes.)
    server.wait_idle()
    before = server.metrics()
    from_line = len(server.lines)
    for i in range(24):
        sock = raw_stream(server.port, "/v1/completions",
                          {"prompt": f"Count: {i}", "max_tokens": 2, "ignore_eos": True, "stream": True})
        data = b""
        while b"data: [DONE]" not in data:
            chunk = sock.recv(65536)
            assert chunk, f"the stream ended before [DONE]: {data[:300]!r}"
            data += chunk
        sock.close()
    after = server.wait_idle()
    assert delta_success(after, before) == 24
    assert counter(after, "cera:requests_cancelled_total") == counter(before, "cera:requests_cancelled_total")
    line = server.wait_for_line(CANCELLED, 1, start=from_line)
    assert line is None, f"a finished stream was logged as cancelled: {line.group(0)}"


def delta_success(after, before):
    return sum(v for k, v in after.items() if k.startswith("cera:request_success_total")) - sum(
        v for k, v in before.items() if k.startswith("cera:request_success_total"))
