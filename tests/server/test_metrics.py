# GET /metrics (issue 18, acceptance 5): Prometheus text that prometheus_client's own parser
# reads, with the contract's names and types, and counters that move by exactly what the requests
# did (their usage says how many tokens; one malformed request is one 400).
from prometheus_client.parser import text_string_to_metric_families

from cera_server import MODEL_ID

GAUGES = ["cera:num_requests_running", "cera:num_requests_waiting", "cera:kv_blocks_used", "cera:kv_blocks_total",
          "cera:kv_cache_usage_perc"]
COUNTERS = ["cera:prefix_cache_queries", "cera:prefix_cache_hits", "cera:prompt_tokens", "cera:generation_tokens",
            "cera:request_success", "cera:requests_cancelled", "cera:http_requests"]
HISTOGRAMS = ["cera:time_to_first_token_seconds", "cera:inter_token_latency_seconds", "cera:e2e_request_latency_seconds"]


def families(server):
    status, headers, data = server.request("GET", "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain"), headers
    assert "version=0.0.4" in headers["content-type"], headers
    return {f.name: f for f in text_string_to_metric_families(data.decode())}


def delta(after, before, key):
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_names_and_types(server):
    # One request first, so labelled counters have their series.
    server.post("/v1/completions", {"prompt": "Hi", "max_tokens": 2})
    fams = families(server)
    for name in GAUGES:
        assert name in fams and fams[name].type == "gauge", (name, fams.get(name))
    for name in COUNTERS:
        assert name in fams and fams[name].type == "counter", (name, fams.get(name))
        assert all(s.name in (name + "_total", name + "_created") for s in fams[name].samples), fams[name].samples
    for name in HISTOGRAMS:
        assert name in fams and fams[name].type == "histogram", (name, fams.get(name))
        samples = fams[name].samples
        buckets = [s for s in samples if s.name == name + "_bucket"]
        assert buckets, samples
        bounds = [float(s.labels["le"]) for s in buckets]
        assert bounds == sorted(bounds) and bounds[-1] == float("inf"), bounds
        counts = [s.value for s in buckets]
        assert counts == sorted(counts), f"{name}: buckets are not cumulative: {counts}"
        count = next(s.value for s in samples if s.name == name + "_count")
        assert counts[-1] == count, (name, counts[-1], count)
    m = server.wait_idle()
    assert m["cera:kv_blocks_total"] > 0
    assert m["cera:kv_blocks_used"] == 0 and m["cera:kv_cache_usage_perc"] == 0


def test_counters_move_by_what_requests_did(server):
    client = server.openai()
    server.wait_idle()
    before = server.metrics()
    r = client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Name a fruit."}],
                                       max_completion_tokens=9, temperature=0.9, seed=3, extra_body={"ignore_eos": True})
    c = client.completions.create(model=MODEL_ID, prompt="Ten facts about owls:", max_tokens=30, temperature=0)
    streamed = 0
    for chunk in client.completions.create(model=MODEL_ID, prompt="Ten facts about owls:", max_tokens=5,
                                           temperature=0, stream=True, stream_options={"include_usage": True},
                                           extra_body={"ignore_eos": True}):
        if chunk.usage:
            streamed = chunk.usage
    status, _, _ = server.request("POST", "/v1/completions", b"{oops", {"Content-Type": "application/json"})
    assert status == 400
    status, _, _ = server.request("GET", "/no/such/route")
    assert status == 404
    after = server.wait_idle()

    prompt = r.usage.prompt_tokens + c.usage.prompt_tokens + streamed.prompt_tokens
    generated = r.usage.completion_tokens + c.usage.completion_tokens + streamed.completion_tokens
    assert delta(after, before, "cera:prompt_tokens_total") == prompt
    assert delta(after, before, "cera:generation_tokens_total") == generated
    reasons = {"length": 2, "stop": 0}
    reasons[c.choices[0].finish_reason] += 1
    for reason, n in reasons.items():
        key = f'cera:request_success_total{{finished_reason="{reason}"}}'
        assert delta(after, before, key) == n, (key, delta(after, before, key), n)
    assert delta(after, before, 'cera:http_requests_total{code="400"}') == 1
    assert delta(after, before, 'cera:http_requests_total{code="404"}') == 1
    # Three answered 200, plus the /metrics scrapes in between (wait_idle's, counted or not yet).
    assert delta(after, before, 'cera:http_requests_total{code="200"}') >= 3
    for name in HISTOGRAMS[0], HISTOGRAMS[2]:
        assert delta(after, before, name + "_count") == 3, name
        assert delta(after, before, name + "_sum") > 0, name
    # One inter-token gap per generated token after the first of each request.
    itl = delta(after, before, HISTOGRAMS[1] + "_count")
    assert itl == generated - 3, (itl, generated)
    assert delta(after, before, "cera:requests_cancelled_total") == 0
    # The prefix-cache query counter counts prompt tokens looked up: at least one look-up each.
    assert delta(after, before, "cera:prefix_cache_queries_total") >= 3


def test_prefix_cache_hits(server):
    text = "A long shared preamble about the history of astronomy and the stars. " * 12
    first = server.post("/v1/completions", {"prompt": text, "max_tokens": 1, "temperature": 0})
    assert first[0] == 200, first
    before = server.wait_idle()
    second = server.post("/v1/completions", {"prompt": text, "max_tokens": 1, "temperature": 0})
    assert second[0] == 200, second
    after = server.wait_idle()
    n_prompt = second[2]["usage"]["prompt_tokens"]
    hits = delta(after, before, "cera:prefix_cache_hits_total")
    queries = delta(after, before, "cera:prefix_cache_queries_total")
    assert 0 < hits <= queries, (hits, queries)
    assert hits >= n_prompt // 2, f"the same {n_prompt}-token prompt again hit only {hits} tokens"
    assert after["cera:kv_blocks_used"] == 0, "blocks held only by the prefix cache count as free"
