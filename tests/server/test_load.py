# Load (issue 18, acceptance 3): 256 concurrent streaming clients (AsyncOpenAI, max_tokens 32), all
# complete with zero errors, each with a well-formed stream whose usage agrees with what it got.
# Prints p50/p99 time to first token, aggregate output tokens/s and the server's peak RSS; asserts
# only correctness and a generous memory bound (timings are never asserted, TESTING.md).
import asyncio
import time

import httpx2 as httpx  # the HTTP library of openai 3 (pinned in requirements.txt)
import openai
import pytest

from cera_server import MODEL_ID

CLIENTS = 256
MAX_TOKENS = 32
# Peak RSS (VmHWM) measured at 612 MiB on the 2-core development machine (SmolLM2 Q4_1, the
# default --parallel 16 and its 2.8 GiB KV pool, touched only where used): about twice that.
RSS_BOUND_MIB = 1280


def vm_hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


async def one_client(client, i, t0):
    start = time.monotonic()
    first = None
    text, finish, usage, chunks = "", None, None, 0
    stream = await client.chat.completions.create(
        model=MODEL_ID, messages=[{"role": "user", "content": f"Write a short poem about the number {i}."}],
        max_completion_tokens=MAX_TOKENS, temperature=0.8, seed=i, stream=True,
        stream_options={"include_usage": True})
    async for chunk in stream:
        chunks += 1
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            assert c.index == 0
            if c.delta.content:
                if first is None:
                    first = time.monotonic()
                text += c.delta.content
            if c.finish_reason is not None:
                assert finish is None, f"client {i}: two finish reasons"
                finish = c.finish_reason
    assert finish in ("stop", "length"), f"client {i}: finish_reason {finish}"
    assert usage is not None, f"client {i}: no usage chunk"
    assert 1 <= usage.completion_tokens <= MAX_TOKENS
    if finish == "length":
        assert usage.completion_tokens == MAX_TOKENS
    return {"ttft": (first or time.monotonic()) - start, "tokens": usage.completion_tokens,
            "end": time.monotonic() - t0, "text": text}


async def run_clients(server):
    # A pool that holds every client's connection at once (openai's default keeps fewer).
    limits = httpx.Limits(max_connections=CLIENTS + 16, max_keepalive_connections=CLIENTS + 16)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(300.0)) as http:
        client = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="none", max_retries=0, http_client=http)
        t0 = time.monotonic()
        results = await asyncio.gather(*(one_client(client, i, t0) for i in range(CLIENTS)), return_exceptions=True)
        return results, time.monotonic() - t0


@pytest.mark.time_limit(600)
def test_256_concurrent_streams(server):
    # This file's own server (conftest's is per module): its peak RSS is this load's.
    s = server
    results, wall = asyncio.run(run_clients(s))
    errors = [r for r in results if isinstance(r, BaseException)]
    done = [r for r in results if not isinstance(r, BaseException)]
    rss = vm_hwm_mib(s.proc.pid)
    if done:
        ttft = [r["ttft"] for r in done]
        tokens = sum(r["tokens"] for r in done)
        print(f"\n{len(done)} of {CLIENTS} streaming clients done, max_tokens {MAX_TOKENS}: TTFT p50 "
              f"{percentile(ttft, 50):.2f} s, p99 {percentile(ttft, 99):.2f} s; {tokens} tokens in {wall:.1f} s = "
              f"{tokens / wall:.1f} tokens/s aggregate; server peak RSS (VmHWM) {rss:.0f} MiB")
    if errors:
        causes = {}
        for e in errors:
            c = e
            while c.__cause__ is not None or c.__context__ is not None:
                c = c.__cause__ or c.__context__
            causes[repr(c)[:160]] = causes.get(repr(c)[:160], 0) + 1
        raise AssertionError(f"{len(errors)} of {CLIENTS} clients failed: {errors[0]!r}; root causes {causes}\n"
                             f"{s.stderr_text(20)}")
    m = s.wait_idle(60)
    assert m["cera:kv_blocks_used"] == 0 and m["cera:num_requests_running"] == 0
    assert m["cera:num_requests_waiting"] == 0
    assert m.get('cera:http_requests_total{code="429"}', 0) == 0
    assert m.get('cera:http_requests_total{code="500"}', 0) == 0
    assert m.get("cera:generation_tokens_total") == tokens
    assert rss < RSS_BOUND_MIB, f"peak RSS {rss:.0f} MiB over the {RSS_BOUND_MIB} MiB bound"
