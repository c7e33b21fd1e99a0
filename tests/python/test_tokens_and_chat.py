# cera.Engine.tokenize / detokenize / render_chat / chat on SmolLM2: the ids of every string of
# tests/fixtures/real_models/smollm2.inp equal llama.cpp's (smollm2.out), text round-trips, the
# chat template renders ChatML as the C++ facade test expects, and a streamed greedy chat reply
# is the plain reply, which names Paris.
import pytest

import cera
from conftest import REPO

SEP = "\n__ggml_vocab_test__\n"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def fixture_pairs():
    inp = (REPO / "tests/fixtures/real_models/smollm2.inp").read_bytes().decode("utf-8")
    out = (REPO / "tests/fixtures/real_models/smollm2.out").read_text(encoding="utf-8").split("\n")
    texts = inp.split(SEP)
    if texts and texts[-1].endswith("\n__ggml_vocab_test__"):
        texts[-1] = texts[-1][: -len("\n__ggml_vocab_test__")]
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, out)]


def test_ids_equal_llama_cpp(smollm2):
    pairs = fixture_pairs()
    assert len(pairs) >= 40
    for i, (text, want) in enumerate(pairs[:40]):
        assert smollm2.tokenize(text, add_special=False, parse_special=True) == want, f"string {i}: {text!r}"


@pytest.mark.parametrize("text", ["Hello, world!", "ied 4 \u00bd months", "  leading spaces and\ttabs\n",
                                  "\u65e5\u672c\u8a9e\u306e\u6587", "emoji \U0001f600 and more", ""])
def test_round_trip(smollm2, text):
    ids = smollm2.tokenize(text, add_special=False)
    assert smollm2.detokenize(ids) == text


def test_detokenize_refuses_ids_outside_the_vocabulary(smollm2):
    with pytest.raises(cera.Error, match="49152"):
        smollm2.detokenize([1, 49152])
    with pytest.raises(TypeError):
        smollm2.detokenize(["a"])


def test_render_chat_is_chatml(smollm2):
    prompt = smollm2.render_chat(QUESTION)
    assert "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n" in prompt


def test_streamed_chat_is_the_plain_reply(smollm2):
    plain = smollm2.chat(QUESTION, max_tokens=24, temperature=0)
    assert "Paris" in plain.text
    assert plain.finish_reason in ("stop", "length"), plain.finish_reason
    stream = smollm2.chat(QUESTION, max_tokens=24, temperature=0, stream=True)
    pieces = list(stream)
    assert len(pieces) >= 2
    assert "".join(pieces) == plain.text
    assert stream.result.text == plain.text and stream.result.tokens == plain.tokens


def test_chat_message_shapes_are_checked(smollm2):
    with pytest.raises(cera.InvalidArgumentError):  # a missing key is a bad value, not a bad type
        smollm2.chat([{"role": "user"}])
    with pytest.raises(TypeError):
        smollm2.chat("What is the capital of France?")
