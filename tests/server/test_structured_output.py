# response_format under sampling (issue 20): random JSON Schemas (tools/grammar/constrained_run.py's
# seeded generator) sent to SmolLM2 at temperature 1, and every output that ends with "stop" must
# parse and validate with the jsonschema package (Draft 2020-12, formats checked): the judge is a
# validator the project did not write. json_object outputs must parse as JSON objects; a streamed
# constrained answer must be the same text as the plain one with the same seed; schemas cera cannot
# enforce, and a json_schema without a name, are refused with OpenAI's error shape.
# The CI-sized version of tools/grammar/constrained_run.py (500 requests per model).
import concurrent.futures
import json
import os
import sys

import pytest

from cera_server import MODEL_ID, CeraServer, assert_error

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "grammar"))
import constrained_run  # noqa: E402

SEED = 20
N_SCHEMAS = 40
MAX_TOKENS = 240


@pytest.fixture(scope="module")
def server(cera_bin, model):
    """More requests at once than the default server, so the random-schema batch runs together."""
    s = CeraServer(cera_bin, model, ["--parallel", "40", "-c", "1024"])
    s.start()
    yield s
    s.stop_and_check()


def schema_format(schema, name="answer"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def chat(server, body, timeout=300):
    status, _, obj = server.post("/v1/chat/completions", {"model": MODEL_ID, **body}, timeout=timeout)
    assert status == 200, f"{status}: {obj}"
    choice = obj["choices"][0]
    return choice["message"]["content"] or "", choice["finish_reason"]


@pytest.mark.time_limit(300)
def test_random_schemas_at_temperature_1_validate(server):
    schemas = constrained_run.random_schemas(SEED, N_SCHEMAS)
    model_id = MODEL_ID

    def one(i):
        body = constrained_run.request_body("chat", model_id, schemas[i], i, SEED * 1000 + i, MAX_TOKENS)
        return chat(server, body)

    with concurrent.futures.ThreadPoolExecutor(N_SCHEMAS) as pool:
        results = list(pool.map(one, range(N_SCHEMAS)))
    finished = [r[1] for r in results]
    assert set(finished) <= {"stop", "length"}, f"finish reasons: {finished}"
    failures = []
    for i, (text, finish) in enumerate(results):
        if finish != "stop":
            continue
        verdict, why = constrained_run.judge(schemas[i], text)
        if verdict != "valid":
            failures.append(f"schema {i} {constrained_run.dumps(schemas[i])}\n  output {text!r}\n  {verdict}: {why}")
    assert not failures, "\n".join(failures)
    # Most outputs must be complete, or the check above proved little.
    stops = finished.count("stop")
    assert stops >= N_SCHEMAS * 3 // 4, f"only {stops} of {N_SCHEMAS} outputs ended with stop: {finished}"


@pytest.mark.time_limit(240)
def test_json_object_outputs_are_json_objects(server):
    prompts = ["Describe a cat as JSON.", "Give me a JSON object with a name and an age.",
               "Return the weather in Paris as JSON.", "Any JSON object, please."]

    def one(i):
        return chat(server, {"messages": [{"role": "user", "content": prompts[i]}], "temperature": 1.0,
                             "seed": 700 + i, "max_tokens": MAX_TOKENS, "response_format": {"type": "json_object"}})

    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        results = list(pool.map(one, range(len(prompts))))
    stops = 0
    for text, finish in results:
        assert finish in ("stop", "length"), finish
        if finish == "stop":
            stops += 1
            value = json.loads(text)
            assert isinstance(value, dict), f"not a JSON object: {text!r}"
            assert text == constrained_run.dumps(value), f"not compact: {text!r}"
        else:
            # Cut by max_tokens: still the start of an object.
            assert text.startswith("{"), text
    assert stops >= 2, results


@pytest.mark.time_limit(240)
def test_stream_concatenation_validates_and_equals_the_plain_answer(server):
    client = server.openai()
    schemas = constrained_run.random_schemas(SEED + 1, 3)

    def kwargs(i):
        return dict(model=MODEL_ID, temperature=1.0, seed=900 + i, max_tokens=MAX_TOKENS,
                    response_format=schema_format(schemas[i]),
                    messages=[{"role": "user", "content": "Reply with JSON for: " + constrained_run.dumps(schemas[i])}])

    def streamed(i):
        text, finish = "", None
        for chunk in client.chat.completions.create(stream=True, **kwargs(i)):
            for c in chunk.choices:
                assert finish is None, "a chunk after the finish_reason"
                text += c.delta.content or ""
                finish = c.finish_reason
        return text, finish

    def plain(i):
        c = client.chat.completions.create(**kwargs(i)).choices[0]
        return c.message.content or "", c.finish_reason

    # All six at once: the same seed must give the same text whatever the neighbours in the batch.
    with concurrent.futures.ThreadPoolExecutor(2 * len(schemas)) as pool:
        s_futures = [pool.submit(streamed, i) for i in range(len(schemas))]
        p_futures = [pool.submit(plain, i) for i in range(len(schemas))]
        pairs = [(s.result(), p.result()) for s, p in zip(s_futures, p_futures)]
    for i, ((text, finish), (plain_text, plain_finish)) in enumerate(pairs):
        assert text == plain_text, f"schema {i}: stream {text!r} != plain {plain_text!r}"
        assert finish == plain_finish and finish in ("stop", "length"), (finish, plain_finish)
        if finish == "stop":
            verdict, why = constrained_run.judge(schemas[i], text)
            assert verdict == "valid", f"schema {constrained_run.dumps(schemas[i])}\noutput {text!r}\n{verdict}: {why}"
    assert any(p[0][1] == "stop" for p in pairs), pairs


@pytest.mark.time_limit(240)
def test_completions_route_is_constrained_too(server):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                               "population": {"type": "integer", "minimum": 0, "maximum": 99999999},
                                               "capital": {"type": "boolean"}},
              "required": ["city", "population", "capital"], "additionalProperties": False}
    for seed in (1, 2):
        status, _, obj = server.post("/v1/completions", {
            "model": MODEL_ID, "prompt": "A city as JSON:", "temperature": 1.0, "seed": seed, "max_tokens": MAX_TOKENS,
            "response_format": schema_format(schema)}, timeout=300)
        assert status == 200, obj
        choice = obj["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        verdict, why = constrained_run.judge(schema, choice["text"])
        assert verdict == "valid", f"{choice['text']!r}: {verdict}: {why}"


UNSUPPORTED = [
    {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
    {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}, "additionalProperties": False},
    {"type": "string", "format": "hostname"},
    {"type": "string", "pattern": "^(?=a)b$"},
    {"type": "number", "minimum": 0},
]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
@pytest.mark.parametrize("schema", UNSUPPORTED, ids=lambda s: constrained_run.dumps(s)[:40])
def test_a_schema_that_cannot_be_enforced_is_refused(server, path, schema):
    body = {"model": MODEL_ID, "max_tokens": 8, "response_format": schema_format(schema)}
    body.update({"messages": [{"role": "user", "content": "hi"}]} if "chat" in path else {"prompt": "hi"})
    status, _, obj = server.post(path, body)
    assert_error(status, obj, 400, want_type="invalid_request_error", want_code="invalid_json_schema",
                 want_param="response_format.json_schema.schema")


@pytest.mark.parametrize("json_schema", [{"schema": {"type": "object"}}, {"name": "", "schema": {"type": "object"}}],
                         ids=["absent", "empty"])
def test_a_json_schema_without_a_name_is_refused(server, json_schema):
    status, _, obj = server.post("/v1/chat/completions", {
        "model": MODEL_ID, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_schema", "json_schema": json_schema}})
    assert_error(status, obj, 400, want_type="invalid_request_error", want_param="response_format.json_schema.name")


def test_the_refusal_names_the_keyword(server):
    status, _, obj = server.post("/v1/chat/completions", {
        "model": MODEL_ID, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}],
        "response_format": schema_format(UNSUPPORTED[1])})
    err = assert_error(status, obj, 400, want_code="invalid_json_schema")
    assert "uniqueItems" in err["message"] and "/properties/tags" in err["message"], err
