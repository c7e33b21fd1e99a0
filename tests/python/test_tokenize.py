# tokenize/detokenize: SmolLM2's ids equal llama.cpp's (tests/fixtures/real_models/smollm2.*, the
# fixture the C++ facade test uses), detokenize(tokenize(s)) == s on both models, and ids outside
# the vocabulary are refused naming the first one.
import pytest

import cera
from conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "real_models"
SEPARATOR = "\n__ggml_vocab_test__\n"

ROUND_TRIP = [
    "Once upon a time, there was a little girl named Lily.",
    "Hello world",
    " leading space and  two spaces",
    "tabs\tand\nnewlines\n\n",
    "numbers 1234567890 and punctuation !?.,;:'\"()[]{}",
    "caf\u00e9 na\u00efve \u00fcber",
]


def smollm2_cases():
    # Bytes, not read_text(): universal newlines would turn the fixture's "\r\n" into "\n".
    texts = (FIXTURES / "smollm2.inp").read_bytes().decode("utf-8").split(SEPARATOR)
    ids = (FIXTURES / "smollm2.out").read_text(encoding="utf-8").split("\n")
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, ids)]


def test_smollm2_ids_equal_llama_cpps(smollm2):
    cases = smollm2_cases()
    assert len(cases) >= 40
    for i, (text, want) in enumerate(cases):
        assert smollm2.tokenize(text, add_special=False, parse_special=True) == want, f"string {i}: {text!r}"


def test_smollm2_round_trips(smollm2):
    texts = ROUND_TRIP + ["emoji \U0001F600 and CJK \u4e2d\u6587", "\u00a0non-breaking"]
    texts += [t for t, _ in smollm2_cases() if "<|" not in t]
    for text in texts:
        assert smollm2.detokenize(smollm2.tokenize(text, add_special=False)) == text, repr(text)


def test_stories_round_trips(stories):
    for text in ROUND_TRIP:
        ids = stories.tokenize(text, add_special=False)
        assert stories.detokenize(ids) == text, repr(text)  # the decoder drops the dummy prefix
        assert stories.tokenize(text) == [1] + ids  # BOS is id 1 (shared/models/README.md)


def test_ids_outside_the_vocabulary(stories):
    with pytest.raises(cera.OutOfRangeError, match="token 1 is id 99999, outside the vocabulary 0..511") as e:
        stories.detokenize([1, 99999])
    assert isinstance(e.value, ValueError)
    with pytest.raises(TypeError):
        stories.detokenize(["a"])
    with pytest.raises(TypeError):
        stories.tokenize(b"bytes")
