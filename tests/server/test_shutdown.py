# SIGTERM (the contract: stop accepting, cancel what runs, exit 0): the server exits promptly with
# status 0 whatever its clients are doing: an idle keep-alive connection (what every HTTP client
# library leaves open after a request), a stream in the middle of its tokens, a request waiting
# in the queue. "Promptly" is a bound on a hang, not a timing: 10 s, where a step takes milliseconds.
import json
import socket
import time

from cera_server import MODEL_ID

EXIT_SECONDS = 10


def stream(port, max_tokens=3000):
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    body = json.dumps({"model": MODEL_ID, "prompt": "Once upon a time", "max_tokens": max_tokens,
                       "ignore_eos": True, "stream": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return sock


def read_until_ended(sock, timeout):
    """What the server sends until the stream ends ("data: [DONE]" or the connection closed);
    fails if it does neither within `timeout`."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"data: [DONE]" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_sigterm_with_an_idle_keep_alive_connection(start_server):
    s = start_server()
    conn = s.connection()
    conn.request("GET", "/v1/models")
    assert conn.getresponse().read()  # the connection stays open, idle, as clients keep it
    t = time.monotonic()
    s.stop_and_check(timeout=EXIT_SECONDS)
    conn.close()
    assert time.monotonic() - t < EXIT_SECONDS


def test_sigterm_mid_stream_and_in_the_queue(start_server):
    s = start_server("--parallel", "1")
    running = stream(s.port)
    got = b""
    while b"data:" not in got:
        chunk = running.recv(65536)
        assert chunk, got
        got += chunk
    waiting = stream(s.port)
    deadline = time.monotonic() + 30
    while s.metrics().get("cera:num_requests_waiting") != 1:
        assert time.monotonic() < deadline, "the second request never waited"
        time.sleep(0.05)
    s.terminate()
    # Both streams end: the server does not leave them hanging.
    read_until_ended(running, EXIT_SECONDS)
    read_until_ended(waiting, EXIT_SECONDS)
    running.close()
    waiting.close()
    s.stop_and_check(timeout=EXIT_SECONDS)
