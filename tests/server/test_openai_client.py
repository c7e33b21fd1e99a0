# The official `openai` package against `cera serve` (issue 18, acceptance 1): chat and legacy
# completions, streamed and not, with usage, n, stop strings, seeds and token limits. The oracles
# are the server's own other paths (a stream must say what the plain response says; the same seed
# must give the same text) and /tokenize for the prompt's length; none of them is a value the
# server chose for itself.
import pytest

from cera_server import MODEL_ID

QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in two sentences."}]
PROMPT = "The three most important inventions of the twentieth century are"


@pytest.fixture(scope="module")
def client(server):
    return server.openai()


def chat_prompt_tokens(server, messages):
    return len(server.tokenize(messages=messages))


def check_usage(usage, prompt_tokens=None):
    assert usage is not None, "a final response has no usage"
    assert usage.prompt_tokens > 0 and usage.completion_tokens >= 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, usage
    if prompt_tokens is not None:
        assert usage.prompt_tokens == prompt_tokens, (usage, prompt_tokens)


def collect_chat_stream(stream):
    """(text per choice index, finish_reason per index, chunks): asserts every chunk is well formed."""
    texts, finish, chunks = {}, {}, []
    for chunk in stream:
        chunks.append(chunk)
        assert chunk.object == "chat.completion.chunk", chunk
        for c in chunk.choices:
            assert c.index not in finish, f"choice {c.index} has a chunk after its finish_reason"
            texts.setdefault(c.index, "")
            if c.delta.content:
                texts[c.index] += c.delta.content
            if c.finish_reason is not None:
                finish[c.index] = c.finish_reason
    return texts, finish, chunks


def collect_completion_stream(stream):
    texts, finish, chunks = {}, {}, []
    for chunk in stream:
        chunks.append(chunk)
        assert chunk.object == "text_completion", chunk
        for c in chunk.choices:
            assert c.index not in finish, f"choice {c.index} has a chunk after its finish_reason"
            texts[c.index] = texts.get(c.index, "") + (c.text or "")
            if c.finish_reason is not None:
                finish[c.index] = c.finish_reason
    return texts, finish, chunks


def test_models_lists_the_one_model(client):
    models = client.models.list().data
    assert [m.id for m in models] == [MODEL_ID]
    assert models[0].object == "model" and models[0].owned_by == "cera"


def test_chat_plain(server, client):
    r = client.chat.completions.create(model=MODEL_ID, messages=QUESTION, temperature=0, max_completion_tokens=24)
    assert r.object == "chat.completion" and r.id and r.model == MODEL_ID
    assert len(r.choices) == 1 and r.choices[0].index == 0
    msg = r.choices[0].message
    assert msg.role == "assistant" and isinstance(msg.content, str) and msg.content
    assert r.choices[0].finish_reason in ("stop", "length")
    check_usage(r.usage, chat_prompt_tokens(server, QUESTION))
    assert 1 <= r.usage.completion_tokens <= 24
    if r.choices[0].finish_reason == "length":
        assert r.usage.completion_tokens == 24


def test_chat_model_may_be_omitted(server):
    # The SDK requires `model`; the contract lets a raw client leave it out.
    status, _, obj = server.post("/v1/chat/completions", {"messages": QUESTION, "max_tokens": 4, "temperature": 0})
    assert status == 200, obj
    assert obj["usage"]["completion_tokens"] >= 1


def test_chat_stream_equals_plain(client):
    kw = dict(model=MODEL_ID, messages=QUESTION, temperature=0, max_completion_tokens=24)
    plain = client.chat.completions.create(**kw)
    texts, finish, chunks = collect_chat_stream(client.chat.completions.create(stream=True, **kw))
    assert texts == {0: plain.choices[0].message.content}
    assert finish == {0: plain.choices[0].finish_reason}
    assert chunks[0].choices[0].delta.role == "assistant", chunks[0]
    assert len({c.id for c in chunks}) == 1, "every chunk of one stream carries the same id"


def test_chat_stream_include_usage(server, client):
    kw = dict(model=MODEL_ID, messages=QUESTION, temperature=0, max_completion_tokens=16)
    plain = client.chat.completions.create(**kw)
    texts, finish, chunks = collect_chat_stream(
        client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    last = chunks[-1]
    assert last.choices == [], f"the usage chunk must have no choices: {last}"
    check_usage(last.usage, chat_prompt_tokens(server, QUESTION))
    assert last.usage.completion_tokens == plain.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1]), "only the last chunk carries usage"
    assert texts[0] == plain.choices[0].message.content


def test_completions_plain_and_stream(server, client):
    kw = dict(model=MODEL_ID, prompt=PROMPT, temperature=0, max_tokens=20)
    plain = client.completions.create(**kw)
    assert plain.object == "text_completion" and len(plain.choices) == 1
    assert plain.choices[0].text and plain.choices[0].finish_reason in ("stop", "length")
    prompt_ids = server.tokenize(content=PROMPT, add_special=True)
    check_usage(plain.usage, len(prompt_ids))
    texts, finish, chunks = collect_completion_stream(
        client.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert texts == {0: plain.choices[0].text}
    assert finish == {0: plain.choices[0].finish_reason}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_completions_prompt_forms_agree(server, client):
    kw = dict(model=MODEL_ID, temperature=0, max_tokens=12)
    text = client.completions.create(prompt=PROMPT, **kw)
    listed = client.completions.create(prompt=[PROMPT], **kw)
    ids = server.tokenize(content=PROMPT, add_special=True)
    by_ids = client.completions.create(prompt=ids, **kw)
    assert listed.choices[0].text == text.choices[0].text
    assert by_ids.choices[0].text == text.choices[0].text
    assert by_ids.usage.prompt_tokens == len(ids)


def test_n2_gives_two_choices(server, client):
    kw = dict(model=MODEL_ID, messages=QUESTION, temperature=0.9, seed=7, max_completion_tokens=12, n=2, logprobs=True)
    r = client.chat.completions.create(**kw)
    assert sorted(c.index for c in r.choices) == [0, 1]
    per_choice = [len(c.logprobs.content) for c in r.choices]
    # OpenAI's usage counts the prompt once and the completion tokens of every choice.
    check_usage(r.usage, chat_prompt_tokens(server, QUESTION))
    assert r.usage.completion_tokens == sum(per_choice), (r.usage, per_choice)
    texts, finish, chunks = collect_chat_stream(
        client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert sorted(texts) == [0, 1] and sorted(finish) == [0, 1]
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens
    # Same seed, same request: the stream's two choices are the plain response's two.
    assert texts == {c.index: c.message.content for c in r.choices}

    c = client.completions.create(model=MODEL_ID, prompt=PROMPT, temperature=0.9, seed=7, max_tokens=8, n=2)
    assert sorted(x.index for x in c.choices) == [0, 1]


STORY = [{"role": "user", "content": "Tell me a story about a dragon who learns to bake bread."}]


def greedy_text(client, **kw):
    r = client.chat.completions.create(model=MODEL_ID, messages=STORY, temperature=0, **kw)
    return r.choices[0].message.content, r


def pick_stop(text, word_index):
    """A stop string the greedy text surely contains: " " + its word_index-th word; the text before
    its first occurrence is what a stop must leave."""
    words = text.split()
    assert len(words) > word_index + 1, f"the greedy text is too short to pick a stop string from: {text!r}"
    stop = " " + words[word_index]
    at = text.find(stop)
    assert at > 0, (text, stop)
    return stop, text[:at]


def test_stop_string(client):
    full, _ = greedy_text(client, max_completion_tokens=40)
    stop, before = pick_stop(full, 4)
    text, r = greedy_text(client, max_completion_tokens=40, stop=stop)
    assert text == before, f"stop {stop!r}: want {before!r}, got {text!r}"
    assert r.choices[0].finish_reason == "stop"
    # A list: the earliest occurrence of any of them ends the text.
    later, before_later = pick_stop(full, 6)
    text, r = greedy_text(client, max_completion_tokens=40, stop=[later, stop])
    assert text == min(before, before_later, key=len) and r.choices[0].finish_reason == "stop"
    # Streamed: no piece of the stop string may leak out before the match is known.
    texts, finish, _ = collect_chat_stream(client.chat.completions.create(
        model=MODEL_ID, messages=STORY, temperature=0, max_completion_tokens=40, stop=stop, stream=True))
    assert texts == {0: before} and finish == {0: "stop"}


def test_stop_string_completions(client):
    kw = dict(model=MODEL_ID, prompt=PROMPT, temperature=0, max_tokens=40)
    full = client.completions.create(**kw).choices[0].text
    stop, before = pick_stop(full, 3)
    r = client.completions.create(stop=stop, **kw)
    assert r.choices[0].text == before and r.choices[0].finish_reason == "stop"
    texts, finish, _ = collect_completion_stream(client.completions.create(stop=stop, stream=True, **kw))
    assert texts == {0: before} and finish == {0: "stop"}


def test_seed_reproducible(client):
    # An open-ended prompt: a factual one ("the capital of France") samples the same words at 0.9
    # whatever the seed, which would prove nothing.
    kw = dict(model=MODEL_ID, messages=STORY, temperature=0.9, max_completion_tokens=24)
    first = client.chat.completions.create(seed=1234, **kw).choices[0].message.content
    again = client.chat.completions.create(seed=1234, **kw).choices[0].message.content
    assert first == again
    texts, _, _ = collect_chat_stream(client.chat.completions.create(seed=1234, stream=True, **kw))
    assert texts[0] == first, "the stream with the same seed must say the same"
    others = [client.chat.completions.create(seed=s, **kw).choices[0].message.content for s in (1, 2, 3, 4)]
    assert any(o != first for o in others), f"four other seeds all gave {first!r}"
    # No seed: a fresh one each time, so repeated requests do not all say the same.
    unseeded = {client.chat.completions.create(**kw).choices[0].message.content for _ in range(3)}
    assert len(unseeded) > 1, f"three unseeded requests at temperature 0.9 all gave {unseeded}"

    ckw = dict(model=MODEL_ID, prompt=PROMPT, temperature=0.9, max_tokens=16)
    a = client.completions.create(seed=99, **ckw).choices[0].text
    b = client.completions.create(seed=99, **ckw).choices[0].text
    assert a == b


def test_max_completion_tokens_is_exact(server, client):
    for n in (1, 7, 33):
        r = client.chat.completions.create(model=MODEL_ID, messages=QUESTION, temperature=0.9, seed=n,
                                           max_completion_tokens=n, extra_body={"ignore_eos": True})
        assert r.choices[0].finish_reason == "length", r
        assert r.usage.completion_tokens == n, r.usage
        check_usage(r.usage, chat_prompt_tokens(server, QUESTION))
    # The older max_tokens means the same on chat.
    r = client.chat.completions.create(model=MODEL_ID, messages=QUESTION, temperature=0, max_tokens=5,
                                       extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 5 and r.choices[0].finish_reason == "length"
    r = client.completions.create(model=MODEL_ID, prompt=PROMPT, temperature=0, max_tokens=9,
                                  extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 9 and r.choices[0].finish_reason == "length"
    # Streamed: the usage chunk counts the same, and the last choice chunk says "length".
    texts, finish, chunks = collect_chat_stream(client.chat.completions.create(
        model=MODEL_ID, messages=QUESTION, temperature=0, max_completion_tokens=11, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    assert finish == {0: "length"} and chunks[-1].usage.completion_tokens == 11


def test_content_parts_equal_string(client):
    kw = dict(model=MODEL_ID, temperature=0, max_completion_tokens=10)
    as_string = client.chat.completions.create(messages=QUESTION, **kw)
    parts = [{"role": "user", "content": [{"type": "text", "text": QUESTION[0]["content"]}]}]
    as_parts = client.chat.completions.create(messages=parts, **kw)
    assert as_parts.choices[0].message.content == as_string.choices[0].message.content
    assert as_parts.usage.prompt_tokens == as_string.usage.prompt_tokens
