# POST /v1/embeddings (issue 21) through the official `openai` client's embeddings.create and
# plain HTTP. The oracle is sentence-transformers itself: all-MiniLM-L6-v2, converted here by
# `cera convert` from the checkpoint folder `make models` installs, must give what
# model.encode() gave for the same 50 sentences (tests/fixtures/embeddings/all-minilm-l6-v2.json,
# made by tools/embeddings/make_reference.py), at cosine >= 0.9999, as floats and as base64, for
# text and for the same text as token ids. `dimensions` truncates and normalises again, as
# sentence-transformers' truncate_dim does. A decoder (SmolLM2) embeds too, beside generation.
import base64
import json
import math
import os
import struct
import subprocess

import pytest

from cera_server import CeraServer, assert_error

MODEL_ID = "all-MiniLM-L6-v2"
FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "embeddings", "all-minilm-l6-v2.json")


def cosine(a, b):
    ab = sum(x * y for x, y in zip(a, b))
    return ab / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def norm(v):
    return math.sqrt(sum(x * x for x in v))


@pytest.fixture(scope="module")
def reference():
    with open(FIXTURE, encoding="utf-8") as f:
        ref = json.load(f)
    assert len(ref["sentences"]) == 50
    return ref


@pytest.fixture(scope="module")
def encoder(cera_bin, tmp_path_factory):
    cache = os.environ.get("CERA_CACHE_DIR") or os.path.expanduser("~/.cache/cera")
    checkpoint = os.path.join(cache, "models", "all-MiniLM-L6-v2")
    if not os.path.isfile(os.path.join(checkpoint, "model.safetensors")):
        pytest.fail(f"{checkpoint} is missing: `make models` installs it")
    gguf = str(tmp_path_factory.mktemp("minilm") / f"{MODEL_ID}.gguf")
    done = subprocess.run([cera_bin, "convert", checkpoint, "-o", gguf, "--type", "f32"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    s = CeraServer(cera_bin, gguf)
    s.start()
    yield s
    s.stop_and_check()


def check_against_reference(data, reference, indices):
    assert [d.index for d in data] == list(range(len(indices)))
    worst = 1.0
    for d, i in zip(data, indices):
        want = reference["embeddings"][i]
        assert len(d.embedding) == len(want) == 384
        c = cosine(d.embedding, want)
        worst = min(worst, c)
        assert c >= 0.9999, f"sentence {i} {reference['sentences'][i]!r}: cosine {c}"
    return worst


def test_openai_client_matches_sentence_transformers(encoder, reference):
    client = encoder.openai()
    # The client asks for base64 unless told otherwise and decodes it itself.
    got = client.embeddings.create(model=MODEL_ID, input=reference["sentences"])
    assert got.model == MODEL_ID and got.object == "list"
    worst = check_against_reference(got.data, reference, range(50))
    print(f"worst cosine over 50 sentences (base64): {worst:.7f}")
    n_tokens = sum(len(ids) for ids in reference["token_ids"])
    assert got.usage.prompt_tokens == got.usage.total_tokens == n_tokens, got.usage

    floats = client.embeddings.create(model=MODEL_ID, input=reference["sentences"][:10], encoding_format="float")
    check_against_reference(floats.data, reference, range(10))
    for a, b in zip(floats.data, got.data):
        assert a.embedding == pytest.approx(b.embedding, abs=0), "float and base64 carry the same float32 values"


def test_one_string_and_token_ids(encoder, reference):
    client = encoder.openai()
    one = client.embeddings.create(model=MODEL_ID, input=reference["sentences"][2], encoding_format="float")
    check_against_reference(one.data, reference, [2])
    ids = client.embeddings.create(model=MODEL_ID, input=reference["token_ids"][2], encoding_format="float")
    check_against_reference(ids.data, reference, [2])
    many = client.embeddings.create(model=MODEL_ID, input=reference["token_ids"][:3], encoding_format="float")
    check_against_reference(many.data, reference, [0, 1, 2])


def test_dimensions_truncate_and_renormalise(encoder, reference):
    got = encoder.openai().embeddings.create(model=MODEL_ID, input=reference["sentences"][:5], dimensions=128,
                                             encoding_format="float")
    for d, full in zip(got.data, reference["embeddings"]):
        assert len(d.embedding) == 128
        assert norm(d.embedding) == pytest.approx(1.0, abs=1e-5)
        assert cosine(d.embedding, full[:128]) >= 0.9999


def test_base64_is_little_endian_float32(encoder, reference):
    status, _, obj = encoder.post("/v1/embeddings", {"input": reference["sentences"][0], "encoding_format": "base64"})
    assert status == 200, obj
    raw = base64.b64decode(obj["data"][0]["embedding"])
    assert len(raw) == 384 * 4
    values = struct.unpack("<384f", raw)
    assert cosine(values, reference["embeddings"][0]) >= 0.9999


def test_pooling_and_normalize_fields(encoder, reference):
    # cls pooling, not normalised: the first row of the reference's own hidden states.
    status, _, obj = encoder.post("/v1/embeddings", {"input": reference["sentences"][1], "pooling": "cls",
                                                     "normalize": False})
    assert status == 200, obj
    v = obj["data"][0]["embedding"]
    want = reference["token_embeddings"][1][0]
    assert cosine(v, want) >= 0.9999
    assert norm(v) == pytest.approx(norm(want), rel=1e-3)


@pytest.mark.parametrize("body, param, words", [
    ({"input": ""}, "input", "input 0 is empty"),
    ({"input": ["a", ""]}, "input", "input 1 is empty"),
    ({"input": []}, "input", "empty array"),
    ({"input": [1, 2, 10 ** 9]}, "input", "not a token id"),
    ({"input": ["a", [1, 2]]}, "input", "all strings or all arrays"),
    ({"input": {"text": "a"}}, "input", "must be a string"),
    ({}, "input", "'input' is missing"),
    ({"input": "a", "dimensions": 0}, "dimensions", "dimensions"),
    ({"input": "a", "dimensions": 385}, "dimensions", "dimensions"),
    ({"input": "a", "encoding_format": "int8"}, "encoding_format", "'float' or 'base64'"),
    ({"input": "a", "pooling": "none"}, "pooling", "'none'"),
    ({"input": "a", "pooling": "max"}, "pooling", "'mean', 'cls' or 'last'"),
    ({"input": "word " * 600}, "input", "512"),
])
def test_refusals_name_the_field(encoder, body, param, words):
    status, _, obj = encoder.post("/v1/embeddings", body)
    err = assert_error(status, obj, 400, want_param=param)
    assert words in err["message"], err


def test_model_mismatch_and_generation_on_an_encoder(encoder):
    status, _, obj = encoder.post("/v1/embeddings", {"model": "gpt-4", "input": "a"})
    assert_error(status, obj, 404, want_code="model_not_found", want_param="model")
    status, _, obj = encoder.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
    err = assert_error(status, obj, 400, want_code="model_not_generative")
    assert "/v1/embeddings" in err["message"], err


def test_a_decoder_embeds_beside_generation(server):
    """SmolLM2: last-token pooling by default, unit vectors of its width, the same text the same
    vector whether alone or in a batch, and generation still answering between embeddings."""
    client = server.openai()
    texts = ["The cat sat on the mat.", "A completely different sentence about rockets."]
    batch = client.embeddings.create(model=server.openai().models.list().data[0].id, input=texts, encoding_format="float")
    assert len(batch.data) == 2
    for d in batch.data:
        assert len(d.embedding) == 576
        assert norm(d.embedding) == pytest.approx(1.0, abs=1e-5)
    alone = client.embeddings.create(model=batch.model, input=texts[1], encoding_format="float")
    assert cosine(alone.data[0].embedding, batch.data[1].embedding) >= 0.99999
    assert cosine(batch.data[0].embedding, batch.data[1].embedding) < 0.999
    reply = client.chat.completions.create(model=batch.model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                           temperature=0)
    assert reply.choices[0].message.content
