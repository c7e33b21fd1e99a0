"""The web chat page (apps/server/web/) in Debian's chromium, driven by playwright, against a real
`cera serve`: a reply streams in, Stop cancels it on the server and keeps the partial text, and the
server's refusals show as readable errors. Playwright's own browsers are never installed.

CERA_WRITE_SCREENSHOT=1 writes docs/images/serve-chat.png (a finished exchange); otherwise the
screenshot goes to pytest's temp dir.
"""
import json
import os
import pathlib
import re
import time

import pytest
from playwright import sync_api
from playwright.sync_api import expect

from cera_server import CANCELLED

REPO = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CERA_CHROMIUM") or "/usr/bin/chromium"  # ctest may pass it empty
API_KEY = "sekret-web-test"
TIMEOUT_MS = 120_000  # a whole reply on a loaded 2-core machine


# ---- fixtures (the server ones, `server` and `start_server`, are conftest.py's) -----------------

@pytest.fixture(scope="module")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"no chromium at {CHROMIUM} (scripts/install-deps.sh installs it; or set CERA_CHROMIUM)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1100, "height": 720}, color_scheme="light")
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.errors = []  # uncaught exceptions in the page fail the test
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    context.close()
    assert page.errors == []


# ---- helpers ------------------------------------------------------------------------------------

def model_id(server, headers=None):
    status, _, obj = server.request("GET", "/v1/models", headers=headers)
    assert status == 200, obj
    return json.loads(obj)["data"][0]["id"]


def cancelled_total(server):
    return server.metrics().get("cera:requests_cancelled_total", 0.0)


def open_page(page, url, *, temperature="0", max_tokens="64", system=""):
    page.goto(url + "/")
    page.fill("#temperature", temperature)
    page.fill("#max-tokens", max_tokens)
    page.fill("#system", system)


def last_reply(page):
    return page.locator(".msg.assistant").last


def watch_reply_lengths(page):
    """Records the last assistant bubble's text length at every change of the conversation."""
    page.evaluate("""() => {
        window.__lengths = [];
        new MutationObserver(() => {
            const texts = document.querySelectorAll('.msg.assistant .text');
            if (texts.length) window.__lengths.push(texts[texts.length - 1].textContent.length);
        }).observe(document.getElementById('log'), {subtree: true, childList: true, characterData: true});
    }""")


def send(page, text):
    """Types text into the message box and presses Enter; returns the request the page made."""
    page.fill("#input", text)
    with page.expect_request("**/v1/chat/completions") as req:
        page.press("#input", "Enter")
    return json.loads(req.value.post_data)


def wait_idle(page):
    expect(page.locator("#send")).to_be_enabled(timeout=TIMEOUT_MS)
    expect(page.locator("#stop")).to_be_disabled()


# ---- tests --------------------------------------------------------------------------------------

def test_static_files(server):
    """The three files are served with their types and name nothing outside this origin."""
    for path, kind in (("/", "text/html"), ("/app.js", "javascript"), ("/style.css", "text/css")):
        status, headers, data = server.request("GET", path)
        assert status == 200, path
        assert kind in headers.get("content-type", ""), (path, headers.get("content-type"))
        assert not re.search(r"(src|href|url)\s*[=(]\s*[\"']?(https?:)?//", data.decode()), path


def test_streams_a_reply_and_keeps_the_conversation(server, page, tmp_path):
    requested = []
    page.on("request", lambda r: requested.append(r.url))
    open_page(page, server.base_url, system="You are a helpful assistant.")
    expect(page.locator("#model")).to_have_text(model_id(server))
    watch_reply_lengths(page)

    first = send(page, "Write a haiku about the sea.")
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert first["temperature"] == 0 and first["max_tokens"] == 64
    assert first["messages"] == [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Write a haiku about the sea."}]
    wait_idle(page)

    # It streamed: the bubble had at least two different non-empty lengths, growing, ending at the reply.
    reply = last_reply(page).locator(".text").text_content()
    lengths = [n for n in page.evaluate("window.__lengths") if n > 0]
    assert reply and len(set(lengths)) >= 2, lengths
    assert lengths == sorted(lengths) and lengths[-1] == len(reply)
    expect(last_reply(page).locator(".meta")).to_have_text(re.compile(r"^\d+ tokens · [\d.]+ tokens/s"))

    # The next turn sends the whole history; Shift+Enter put a newline in the message, not a send.
    page.fill("#input", "Give it a title.")
    page.press("#input", "Shift+Enter")
    page.type("#input", "Three words.")
    expect(page.locator(".msg.user")).to_have_count(1)
    with page.expect_request("**/v1/chat/completions") as req:
        page.press("#input", "Enter")
    second = json.loads(req.value.post_data)
    assert second["messages"] == first["messages"] + [
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "Give it a title.\nThree words."}]
    wait_idle(page)
    expect(page.locator(".msg.assistant")).to_have_count(2)
    assert last_reply(page).locator(".text").text_content()

    shot = (REPO / "docs" / "images" / "serve-chat.png" if os.environ.get("CERA_WRITE_SCREENSHOT") == "1"
            else tmp_path / "serve-chat.png")
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot))
    assert all(u.startswith(server.base_url + "/") for u in requested), requested

    # New chat forgets the conversation (the system prompt stays, it is a setting).
    page.click("#new-chat")
    expect(page.locator(".msg")).to_have_count(0)
    assert send(page, "Hi!")["messages"] == [first["messages"][0], {"role": "user", "content": "Hi!"}]
    wait_idle(page)


def test_stop_cancels_on_the_server_and_keeps_the_partial_reply(server, page):
    cancelled = cancelled_total(server)
    log_from = len(server.lines)
    open_page(page, server.base_url, max_tokens="1000")
    send(page, "Tell me a long story about a dragon who learns to bake bread. Make it very long.")
    page.wait_for_function(
        "() => { const t = document.querySelectorAll('.msg.assistant .text'); return t.length && t[t.length - 1].textContent.length > 20; }",
        timeout=TIMEOUT_MS)
    page.click("#stop")
    wait_idle(page)

    deadline = time.monotonic() + 20
    while cancelled_total(server) <= cancelled:
        assert time.monotonic() < deadline, "the server never counted the cancel"
        time.sleep(0.1)
    assert server.wait_for_line(CANCELLED, 10, start=log_from), "no cancel line on the server's stderr"

    bubble = last_reply(page)
    expect(bubble).to_have_class(re.compile(r"\bstopped\b"))
    expect(bubble.locator(".meta")).to_have_text(re.compile(r"^stopped"))
    partial = bubble.locator(".text").text_content()
    time.sleep(1.0)
    assert partial and len(partial) > 20
    assert bubble.locator(".text").text_content() == partial, "the reply grew after Stop"

    # The partial reply is part of the conversation.
    page.fill("#max-tokens", "8")
    body = send(page, "Thanks.")
    assert body["messages"][-2] == {"role": "assistant", "content": partial}
    wait_idle(page)


def test_a_refused_request_shows_the_servers_error(server, page):
    # max_tokens beyond the context: the server's own words and the status appear on the page.
    request = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 10_000_000,
               "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    status, _, obj = server.post("/v1/chat/completions", request)
    assert status == 400, obj
    message = obj["error"]["message"]

    open_page(page, server.base_url, max_tokens="10000000")
    send(page, "Hello")
    error = page.locator(".msg.error")
    expect(error).to_have_count(1)
    expect(error.locator(".text")).to_have_text(re.compile(r"^HTTP 400\b"))
    expect(error.locator(".text")).to_contain_text(message)
    expect(page.locator(".msg.assistant")).to_have_count(0)
    expect(page.locator("#input")).to_have_value("Hello")  # given back to try again
    wait_idle(page)

    # A network failure is an error too, and the failed turns are not in the next request.
    page.route("**/v1/chat/completions", lambda route: route.abort())
    page.fill("#max-tokens", "8")
    send(page, "Hello")
    expect(error.last.locator(".text")).to_contain_text("Network error")
    page.unroute("**/v1/chat/completions")
    assert send(page, "Hello")["messages"] == [{"role": "user", "content": "Hello"}]
    wait_idle(page)
    expect(last_reply(page).locator(".meta")).to_have_text(re.compile(r"tokens"))


def test_api_key(start_server, page):
    keyed_server = start_server("--api-key", API_KEY)
    status, _, data = keyed_server.request("GET", "/v1/models")
    assert status == 401, data
    message = json.loads(data)["error"]["message"]

    open_page(page, keyed_server.base_url, max_tokens="8")
    expect(page.locator("#model")).to_contain_text("HTTP 401")
    send(page, "Hello")
    expect(page.locator(".msg.error .text")).to_contain_text("HTTP 401")
    expect(page.locator(".msg.error .text")).to_contain_text(message)

    # With the key: the header shows the model, the reply comes, and the key outlives a reload.
    page.fill("#api-key", API_KEY)
    page.dispatch_event("#api-key", "change")
    model = model_id(keyed_server, {"Authorization": "Bearer " + API_KEY})
    expect(page.locator("#model")).to_have_text(model)
    with page.expect_request("**/v1/chat/completions") as req:
        page.press("#input", "Enter")  # the refused message was given back to the input
    assert req.value.headers["authorization"] == "Bearer " + API_KEY
    wait_idle(page)
    assert last_reply(page).locator(".text").text_content()
    page.reload()
    expect(page.locator("#api-key")).to_have_value(API_KEY)
    expect(page.locator("#model")).to_have_text(model)


def test_model_output_is_text_not_html(server, page):
    """Markup in a reply shows as characters (the page never parses model output as HTML). The
    stream is the page's own fake, so that the model need not be talked into writing markup."""
    evil = '<img src=x onerror="window.__pwned=1"><b>bold</b> & done'
    chunks = [evil[:9], evil[9:30], evil[30:]]
    body = "".join(
        "data: " + json.dumps({"object": "chat.completion.chunk",
                               "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}) + "\n\n"
        for c in chunks)
    body += "data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3,
                                                            "total_tokens": 6}}) + "\n\ndata: [DONE]\n\n"
    page.route("**/v1/chat/completions",
               lambda route: route.fulfill(status=200, content_type="text/event-stream", body=body))
    open_page(page, server.base_url)
    send(page, "Say something.")
    wait_idle(page)
    expect(last_reply(page).locator(".text")).to_have_text(evil)
    expect(page.locator(".log img, .log b")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None
    expect(last_reply(page).locator(".meta")).to_have_text(re.compile(r"^3 tokens"))
