# cera.Engine.embed. References: on stories260K (a decoder), the last token's hidden state times
# the classifier of llama2.c's own checkpoint (shared/models/stories260K.bin, tied to the token
# embedding) picks the token greedy generation picks next, as the C++ facade_embed test checks;
# all-MiniLM-L6-v2 (converted by `cera convert`) gives sentence-transformers' encode() vectors
# (tests/fixtures/embeddings/all-minilm-l6-v2.json) at cosine >= 0.9999. Also shapes, unit
# norms, determinism, numpy output and refusals.
import json
import math
import struct
import subprocess

import pytest

import cera
from conftest import REPO, model_cache, shared_dir

TEXTS = ["Once upon a time", "The little dog ran to the", "Lily and Tom"]


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))


@pytest.fixture(scope="module")
def classifier():
    """llama2.c's checkpoint: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
    seq_len), then the token embedding, vocab_size rows of dim float32 (the classifier too)."""
    data = (shared_dir() / "models" / "stories260K.bin").read_bytes()
    dim, _, _, _, _, vocab, _ = struct.unpack_from("<7i", data)
    floats = struct.unpack_from(f"<{vocab * dim}f", data, 28)
    return [floats[v * dim : (v + 1) * dim] for v in range(vocab)]


def test_last_hidden_state_picks_the_greedy_token(stories, classifier):
    assert stories.info.default_pooling == "last"
    for text in TEXTS:
        h = stories.embed(text, pooling="last", normalize=False)
        assert len(h) == stories.info.n_embd == len(classifier[0])
        logits = [sum(w * x for w, x in zip(row, h)) for row in classifier]
        next_token = stories.generate(text, max_tokens=1, temperature=0).tokens
        assert next_token == [max(range(len(logits)), key=logits.__getitem__)], text


def test_shapes_norms_and_determinism(stories):
    n_embd = stories.info.n_embd
    one = stories.embed(TEXTS[0])
    assert isinstance(one, list) and len(one) == n_embd and all(isinstance(x, float) for x in one)
    assert norm(one) == pytest.approx(1.0, abs=1e-5)
    many = stories.embed(TEXTS)
    assert len(many) == 3 and all(len(v) == n_embd for v in many)
    assert stories.embed(TEXTS[0]) == one  # the same call, the same vector, bit for bit
    assert stories.embed(TEXTS) == many
    # In a batch the text's rows go through the matrix kernels beside others': the same vector up
    # to float32 rounding (the facade promises no more).
    assert many[0] == pytest.approx(one, abs=1e-6)
    raw = stories.embed(TEXTS[0], normalize=False)
    assert norm(raw) != pytest.approx(1.0, abs=1e-3)
    assert [x / norm(raw) for x in raw] == pytest.approx(one, abs=1e-6)
    for pooling in ("mean", "cls", "last"):
        assert len(stories.embed(TEXTS[1], pooling=pooling)) == n_embd


def test_pooling_none_gives_every_token(stories):
    text = TEXTS[0]
    rows = stories.embed(text, pooling="none")
    assert len(rows) == len(stories.tokenize(text))
    assert all(len(r) == stories.info.n_embd and norm(r) == pytest.approx(1.0, abs=1e-5) for r in rows)
    assert rows[-1] == stories.embed(text, pooling="last")  # the last row is the last token's
    batch = stories.embed(TEXTS, pooling="none")
    assert [len(r) for r in batch] == [len(stories.tokenize(t)) for t in TEXTS]


def test_numpy_arrays_equal_the_lists(stories):
    numpy = pytest.importorskip("numpy")
    one = stories.embed(TEXTS[0], as_numpy=True)
    assert one.dtype == numpy.float32 and one.shape == (stories.info.n_embd,)
    assert one.tolist() == stories.embed(TEXTS[0])
    many = stories.embed(TEXTS, as_numpy=True)
    assert many.shape == (3, stories.info.n_embd)
    assert many.tolist() == stories.embed(TEXTS)
    rows = stories.embed(TEXTS[0], pooling="none", as_numpy=True)
    assert rows.shape == (len(stories.tokenize(TEXTS[0])), stories.info.n_embd)


def test_refusals_name_the_input(stories):
    with pytest.raises(cera.InvalidArgumentError, match="^input 1 is empty: there is nothing to embed$"):
        stories.embed(["fine", ""])
    with pytest.raises(cera.OutOfRangeError, match="input 2 is .*max_batch_tokens"):
        stories.embed(["fine", "also fine", "dog " * 600])
    with pytest.raises(cera.InvalidArgumentError, match="pooling 'max' is not one of 'none', 'mean', 'cls', 'last'"):
        stories.embed("x", pooling="max")
    with pytest.raises(TypeError):
        stories.embed(["x", 3])


@pytest.fixture(scope="module")
def minilm(cera_bin, tmp_path_factory):
    checkpoint = model_cache() / "all-MiniLM-L6-v2"
    if not (checkpoint / "model.safetensors").is_file():
        pytest.skip(f"{checkpoint} is missing: run `make models`")
    gguf = tmp_path_factory.mktemp("minilm") / "all-MiniLM-L6-v2.gguf"
    done = subprocess.run([cera_bin, "convert", str(checkpoint), "-o", str(gguf), "--type", "f32"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with cera.Engine(gguf, device="cpu") as engine:
        yield engine


def test_minilm_equals_sentence_transformers(minilm):
    ref = json.loads((REPO / "tests" / "fixtures" / "embeddings" / "all-minilm-l6-v2.json").read_text(encoding="utf-8"))
    assert not minilm.info.generates
    got = minilm.embed(ref["sentences"])
    assert len(got) == len(ref["embeddings"]) == 50
    for i, (g, want) in enumerate(zip(got, ref["embeddings"])):
        assert len(g) == len(want) == 384
        assert cosine(g, want) >= 0.9999, f"sentence {i} {ref['sentences'][i]!r}"
        assert norm(g) == pytest.approx(1.0, abs=1e-5)
    assert [minilm.tokenize(s) for s in ref["sentences"][:10]] == ref["token_ids"][:10]
    with pytest.raises(cera.Error):
        minilm.generate("an encoder does not generate", max_tokens=4)
