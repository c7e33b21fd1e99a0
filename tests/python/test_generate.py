# cera.Engine.generate on stories260K against llama2.c's greedy text (shared/models): whole,
# streamed, cut at stop strings; seeds reproduce; grammars and JSON Schemas constrain the reply;
# bad options are errors carrying cera's message.
import json

import pytest

import cera
from conftest import stories_reference


def test_greedy_equals_the_reference(stories):
    r = stories.generate("", max_tokens=256, temperature=0)
    assert r.text == stories_reference()
    assert r.finish_reason == "length"
    assert r.prompt_tokens == 1  # BOS
    assert r.completion_tokens == len(r.tokens) == 256
    assert stories.info.architecture == "llama" and stories.info.generates


def test_tensor_parallel_greedy_equals_the_reference(stories_gguf):
    # Split over 2 CPU ranks (each with half the heads, FFN columns and vocabulary): the same text.
    with cera.Engine(stories_gguf, device="cpu", tensor_parallel=2) as split:
        assert "2 tensor-parallel ranks" in split.info.device
        assert split.generate("", max_tokens=256, temperature=0).text == stories_reference()
    with pytest.raises(cera.InvalidArgumentError, match="tensor_parallel 9 must be from 1 to 8"):
        cera.Engine(stories_gguf, device="cpu", tensor_parallel=9)


def test_streamed_pieces_make_up_the_reference(stories):
    stream = stories.generate("", max_tokens=256, temperature=0, stream=True)
    assert isinstance(stream, cera.Stream)
    pieces = list(stream)
    assert len(pieces) > 1 and all(pieces)
    assert "".join(pieces) == stories_reference()
    assert stream.finished
    assert stream.result.text == stories_reference()
    assert list(stream) == []  # exhausted stays exhausted


def test_stop_string_ends_before_it(stories):
    ref = stories_reference()
    r = stories.generate("", max_tokens=256, temperature=0, stop=" the")
    assert r.finish_reason == "stop_string"
    assert r.text == ref[: ref.find(" the")]
    # Several: the reply ends before the first of them to appear.
    r = stories.generate("", max_tokens=256, temperature=0, stop=["zzz", "ball", "park"])
    assert r.text == ref[: ref.find("park")]
    streamed = "".join(stories.generate("", max_tokens=256, temperature=0, stop=["ball"], stream=True))
    assert streamed == ref[: ref.find("ball")]


def test_seeds_reproduce(stories):
    a = stories.generate("Once", max_tokens=64, temperature=1.0, seed=7)
    b = stories.generate("Once", max_tokens=64, temperature=1.0, seed=7)
    c = stories.generate("Once", max_tokens=64, temperature=1.0, seed=8)
    assert a.text == b.text and a.tokens == b.tokens
    assert a.tokens != c.tokens
    # Sampling options reach the sampler: top_k=1 is greedy whatever the temperature.
    k1 = stories.generate("", max_tokens=64, temperature=1.5, top_k=1, seed=3)
    assert k1.text == stories_reference()[: len(k1.text)] and len(k1.tokens) == 64


def test_grammar_constrains_the_reply(stories):
    r = stories.generate("Once upon a time, there was a girl named", max_tokens=32, temperature=0,
                         grammar='root ::= "Lily" | "Tom"')
    assert r.text in ("Lily", "Tom")
    assert r.finish_reason == "stop"


def test_json_schema_constrains_the_reply(stories):
    schema = {"enum": ["Lily", "Tom", "Ben"]}
    for given in (schema, json.dumps(schema)):
        r = stories.generate("Once upon a time, there was a girl named", max_tokens=32, temperature=0,
                             json_schema=given)
        assert json.loads(r.text) in schema["enum"], r.text
        assert r.finish_reason == "stop"


def test_one_constraint_at_a_time(stories):
    with pytest.raises(cera.InvalidArgumentError, match="grammar and json_schema are both given"):
        stories.generate("x", grammar='root ::= "a"', json_schema={"type": "string"})


def test_bad_values_carry_ceras_message(stories):
    with pytest.raises(cera.InvalidArgumentError, match="max_tokens -1") as e:
        stories.generate("x", max_tokens=-1)
    assert isinstance(e.value, ValueError) and isinstance(e.value, cera.Error)
    assert e.value.kind == "invalid argument"
    with pytest.raises(ValueError, match=r"top_p 0 is outside \(0, 1\] \(1: off\)"):
        stories.generate("x", top_p=0)
    with pytest.raises(cera.InvalidArgumentError):
        stories.generate("x", grammar="root ::= ((")
    with pytest.raises(cera.InvalidArgumentError, match="max_tokens 1099511627776 does not fit in 32 bits"):
        stories.generate("x", max_tokens=2**40)
    with pytest.raises(cera.InvalidArgumentError, match="seed -1 must be from 0 to 18446744073709551615"):
        stories.generate("x", seed=-1)


def test_bad_types_are_type_errors(stories):
    with pytest.raises(TypeError, match="max_tokens='ten' is a str: give an int"):
        stories.generate("x", max_tokens="ten")
    with pytest.raises(TypeError, match="temperature"):
        stories.generate("x", temperature="hot")
    with pytest.raises(TypeError, match="stop"):
        stories.generate("x", stop=[1, 2])
    with pytest.raises(TypeError):
        stories.generate(42)
    with pytest.raises(TypeError, match="unexpected keyword argument 'temprature'"):
        stories.generate("x", temprature=0)
    with pytest.raises(TypeError):
        stories.generate("x", 16)  # options are keyword-only
