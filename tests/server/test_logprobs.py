# logprobs and top_logprobs (issue 18, acceptance 1) against `cera logits` on the same token
# prefix: the binary's evaluation path (a Session, not the serving loop) dumps every raw logit as
# float32, and the log-softmax is computed here. The contract says the values are the raw
# distribution's, before logit_bias, penalties and temperature, so a biased, hot sampled request
# must report the same numbers as a greedy one would at that prefix.
import array
import math
import subprocess

import pytest

from cera_server import MODEL_ID

TOLERANCE = 1e-4
MESSAGES = [{"role": "user", "content": "Name three colours of the rainbow."}]
PROMPT = "Once upon a time, in a small village by the sea,"


@pytest.fixture(scope="module")
def client(server):
    return server.openai()


def token_id(server, text, cache):
    """The id of one vocabulary token from its text: /tokenize must give exactly one id, whose
    /detokenize is the text again; None when the text is not one token on its own."""
    if text in cache:
        return cache[text]
    ids = server.tokenize(content=text, add_special=False, parse_special=False)
    found = ids[0] if len(ids) == 1 and server.detokenize(ids) == text else None
    cache[text] = found
    return found


def reference_log_softmax(cera_bin, model, tmp_path, ids, rows):
    """log-softmax rows of `cera logits` over `ids` (no BOS added: the ids are the exact prefix)."""
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text(" ".join(map(str, ids)) + "\n")
    dump = tmp_path / "logits.f32"
    run = subprocess.run([cera_bin, "logits", "-m", model, "--ids-file", str(ids_file), "--dump", str(dump), "-t", "2"],
                         capture_output=True, timeout=300)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    logits = array.array("f")
    with open(dump, "rb") as f:
        logits.frombytes(f.read())
    n_vocab = len(logits) // len(ids)
    assert n_vocab * len(ids) == len(logits)
    out = {}
    for r in rows:
        row = logits[r * n_vocab:(r + 1) * n_vocab]
        m = max(row)
        lse = m + math.log(math.fsum(math.exp(x - m) for x in row))
        out[r] = [x - lse for x in row]
    return out


def top_values(row, k):
    return sorted(row, reverse=True)[:k]


def check_position(where, ref, chosen_id, chosen_logprob, top):
    """`top`: [(id or None, logprob)] as the server listed them, best first."""
    assert abs(chosen_logprob - ref[chosen_id]) <= TOLERANCE, (
        f"{where}: logprob {chosen_logprob} but log-softmax of `cera logits` is {ref[chosen_id]}")
    want = top_values(ref, len(top))
    got = [lp for _, lp in top]
    assert got == sorted(got, reverse=True), f"{where}: top_logprobs not best first: {got}"
    for g, w in zip(got, want):
        assert abs(g - w) <= TOLERANCE, f"{where}: top_logprobs {got} but the reference's best are {want}"
    for tid, lp in top:
        if tid is not None:
            assert abs(lp - ref[tid]) <= TOLERANCE, f"{where}: candidate {tid} has {lp}, the reference {ref[tid]}"


def chat_case(server, client, cera_bin, model, tmp_path, greedy, **kw):
    r = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, max_completion_tokens=12, logprobs=True,
                                       top_logprobs=5, **kw)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    prompt_ids = server.tokenize(messages=MESSAGES)
    cache = {}
    gen_ids = []
    for i, entry in enumerate(content):
        assert entry.bytes == list(entry.token.encode()), f"token {i}: bytes {entry.bytes} != {entry.token!r}"
        tid = token_id(server, entry.token, cache)
        assert tid is not None, f"generated token {i} {entry.token!r} cannot be told apart by /tokenize"
        gen_ids.append(tid)
        assert len(entry.top_logprobs) == 5
    assert server.detokenize(gen_ids) == r.choices[0].message.content
    p = len(prompt_ids)
    refs = reference_log_softmax(cera_bin, model, tmp_path, prompt_ids + gen_ids, range(p - 1, p - 1 + len(gen_ids)))
    for j, entry in enumerate(content):
        ref = refs[p - 1 + j]
        top = [(token_id(server, t.token, cache), t.logprob) for t in entry.top_logprobs]
        check_position(f"chat token {j} {entry.token!r}", ref, gen_ids[j], entry.logprob, top)
        if greedy:
            best = max(range(len(ref)), key=ref.__getitem__)
            assert gen_ids[j] == best, f"greedy token {j} is {gen_ids[j]}, the reference's argmax {best}"
    return gen_ids


@pytest.mark.time_limit(300)
def test_chat_logprobs_greedy(server, client, cera_bin, model, tmp_path):
    chat_case(server, client, cera_bin, model, tmp_path, greedy=True, temperature=0)


@pytest.mark.time_limit(300)
def test_chat_logprobs_are_raw_under_bias_and_temperature(server, client, cera_bin, model, tmp_path):
    # " the" pushed by +8 and a hot temperature: the sampled tokens follow the bias, the reported
    # values must not.
    the = server.tokenize(content=" the", add_special=False, parse_special=False)
    assert len(the) == 1
    ids = chat_case(server, client, cera_bin, model, tmp_path, greedy=False, temperature=1.3, seed=5,
                    logit_bias={str(the[0]): 8}, presence_penalty=0.5)
    assert the[0] in ids, "the bias had no effect: the test would not tell raw from biased values"


def test_chat_logprobs_without_top(client):
    r = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, temperature=0, max_completion_tokens=4,
                                       logprobs=True)
    assert all(e.top_logprobs == [] for e in r.choices[0].logprobs.content)
    r = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, temperature=0, max_completion_tokens=4)
    assert r.choices[0].logprobs is None


@pytest.mark.time_limit(300)
def test_chat_logprobs_streamed_equal_plain(client):
    kw = dict(model=MODEL_ID, messages=MESSAGES, temperature=0, max_completion_tokens=8, logprobs=True, top_logprobs=3)
    plain = client.chat.completions.create(**kw).choices[0].logprobs.content
    streamed = []
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            if c.logprobs and c.logprobs.content:
                streamed.extend(c.logprobs.content)
    assert [(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs]) for e in streamed] == \
        [(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs]) for e in plain]


@pytest.mark.time_limit(300)
def test_completions_logprobs(server, client, cera_bin, model, tmp_path):
    prompt_ids = server.tokenize(content=PROMPT, add_special=True)
    r = client.completions.create(model=MODEL_ID, prompt=prompt_ids, temperature=0, max_tokens=10, logprobs=3)
    lp = r.choices[0].logprobs
    n = r.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
    assert "".join(lp.tokens) == r.choices[0].text
    for i in range(1, n):
        assert lp.text_offset[i] - lp.text_offset[i - 1] == len(lp.tokens[i - 1]), lp.text_offset
    cache = {}
    gen_ids = [token_id(server, t, cache) for t in lp.tokens]
    assert None not in gen_ids, lp.tokens
    p = len(prompt_ids)
    refs = reference_log_softmax(cera_bin, model, tmp_path, prompt_ids + gen_ids, range(p - 1, p - 1 + n))
    for j in range(n):
        ref = refs[p - 1 + j]
        top = sorted(((token_id(server, t, cache), v) for t, v in lp.top_logprobs[j].items()), key=lambda x: -x[1])
        # Two candidates with one text share a key of the dict; the rest must be the best three.
        assert 1 <= len(top) <= 3
        assert abs(lp.token_logprobs[j] - ref[gen_ids[j]]) <= TOLERANCE, (j, lp.token_logprobs[j], ref[gen_ids[j]])
        if len(top) == 3:
            check_position(f"completion token {j}", ref, gen_ids[j], lp.token_logprobs[j], top)
        best = max(range(len(ref)), key=ref.__getitem__)
        assert gen_ids[j] == best
