# Ending requests early from Python: Stream.cancel(), leaving a stream (break, `with`, close()),
# and Ctrl-C, simulated with _thread.interrupt_main() from another thread while the main thread
# waits inside cera (blocking and streamed). Each must end the request, and the engine must then
# still give the reference reply. Also: the GIL is released while cera works, so other Python
# threads run and several threads share one engine.
import _thread
import threading
import time

import pytest

import cera

from conftest import stories_reference

# SmolLM2 counts on greedily; 1500 tokens take ~20 s on 2 cores, so a request that ends within a
# second or two of the interrupt was cancelled, not finished.
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"
LONG = 1500


def interrupt_after(seconds):
    timer = threading.Timer(seconds, _thread.interrupt_main)
    timer.start()
    return timer


def test_cancel_ends_the_generation(stories):
    stream = stories.generate("", max_tokens=256, temperature=0, stream=True)
    stream.cancel()
    r = stream.result
    assert r.finish_reason == "cancelled"
    assert len(r.tokens) < 256
    assert r.text == stories_reference()[: len(r.text)]  # what came before is the reference's


def assert_no_request_left(engine):
    """The smollm2 fixture runs 2 requests at once. With one slot taken by a long request, a short
    one runs at once only if nothing else still holds the other slot: a request that was not
    really cancelled would keep it for the ~20 s of its LONG tokens."""
    with engine.generate(COUNTING, max_tokens=LONG, temperature=0, stream=True) as holder:
        next(holder)
        start = time.monotonic()
        short = engine.generate(COUNTING, max_tokens=8, temperature=0)
        waited = time.monotonic() - start
    assert short.text.startswith(" 11, 12"), short.text
    assert waited < 8, f"a short request waited {waited:.1f} s: a cancelled request is still generating"


def test_leaving_a_stream_cancels_it(smollm2):
    with smollm2.generate(COUNTING, max_tokens=LONG, temperature=0, stream=True) as stream:
        for _ in zip(range(3), stream):
            pass
    assert stream.result.finish_reason == "cancelled"
    assert stream.result.completion_tokens < LONG
    assert_no_request_left(smollm2)
    # Streams dropped mid-way (the for loop's temporary) are cancelled when they go away.
    for _ in range(2):
        for piece in smollm2.generate(COUNTING, max_tokens=LONG, temperature=0, stream=True):
            break
    assert_no_request_left(smollm2)
    stream = smollm2.generate(COUNTING, max_tokens=LONG, temperature=0, stream=True)
    next(stream)
    stream.close()
    assert stream.result.finish_reason == "cancelled"
    assert list(stream) == []
    assert_no_request_left(smollm2)


def test_interrupt_cancels_a_blocking_generate(smollm2):
    reference = smollm2.generate(COUNTING, max_tokens=16, temperature=0).text
    timer = interrupt_after(0.5)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        smollm2.generate(COUNTING, max_tokens=LONG, temperature=0)
    elapsed = time.monotonic() - start
    timer.join()
    assert elapsed < 5, f"the interrupt took {elapsed:.1f} s to end generate()"
    assert smollm2.generate(COUNTING, max_tokens=16, temperature=0).text == reference
    assert_no_request_left(smollm2)


def test_interrupt_cancels_a_blocking_chat(smollm2):
    messages = [{"role": "user", "content": "Count from 1 to 1000, one number per line."}]
    timer = interrupt_after(0.5)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        smollm2.chat(messages, max_tokens=LONG, temperature=0)
    timer.join()
    assert time.monotonic() - start < 5
    assert_no_request_left(smollm2)


def test_interrupt_cancels_a_stream(smollm2):
    pieces = []
    timer = interrupt_after(0.5)
    with pytest.raises(KeyboardInterrupt):
        with smollm2.generate(COUNTING, max_tokens=LONG, temperature=0, stream=True) as stream:
            for piece in stream:
                pieces.append(piece)
    timer.join()
    r = stream.result
    assert r.finish_reason == "cancelled"
    assert r.completion_tokens < LONG
    assert r.text.startswith("".join(pieces))
    assert_no_request_left(smollm2)


def test_other_threads_run_while_cera_works(smollm2):
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        start = time.monotonic()
        smollm2.generate(COUNTING, max_tokens=100, temperature=0)
        end = time.monotonic()
    finally:
        stop.set()
        t.join()
    during = [x for x in ticks if start + 0.2 < x < end - 0.2]
    assert end - start > 0.5 and len(during) > 10, f"{len(during)} ticks in a {end - start:.2f} s generate()"


def test_threads_share_an_engine(stories):
    results = [None] * 4

    def run(i):
        results[i] = stories.generate("", max_tokens=256, temperature=0).text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [stories_reference()] * 4


def test_a_stream_outlives_its_closed_engine(stories_gguf):
    engine = cera.Engine(stories_gguf, device="cpu")
    stream = engine.generate("", max_tokens=256, temperature=0, stream=True)
    engine.close()  # the open stream keeps the model until it is done
    assert engine.closed
    assert "".join(stream) == stories_reference()
    with pytest.raises(cera.UnavailableError, match="is closed: make a new cera.Engine"):
        engine.generate("", max_tokens=1)
    stream.close()


def test_one_reader_at_a_time(smollm2):
    stream = smollm2.generate(COUNTING, max_tokens=LONG, temperature=0, stream=True)
    errors = []
    first = threading.Thread(target=lambda: stream.result)  # reads until the end, in a wait
    first.start()
    time.sleep(0.3)
    try:
        next(stream)
    except RuntimeError as e:
        errors.append(str(e))
    stream.cancel()
    first.join()
    assert errors == ["this cera.Stream is being read by another thread"]
    assert stream.result.finish_reason == "cancelled"
