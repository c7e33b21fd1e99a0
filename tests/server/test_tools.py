# Tool calling through the official openai client: SmolLM2 served with the Qwen 2.5 chat template
# (tests/fixtures/chat/templates/qwen2.5.jinja, the Hermes `<tool_call>` family; SmolLM2's own
# template renders no tools). With tool_choice "required" or a named function the output is
# constrained to well-formed calls, so even this small model must produce calls whose arguments
# validate against the tool's JSON Schema (jsonschema is the reference), streamed and not; the
# client can send the calls and a tool result back; reasoning_content and chat_template_kwargs
# reach the client and the template; refusals name their field.
import json
import os

import jsonschema
import openai
import pytest

from cera_server import MODEL_ID, require_env

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}
EVENT = {
    "type": "function",
    "function": {
        "name": "create_event",
        "parameters": {
            "type": "object",
            "properties": {
                "title": {"type": "string", "maxLength": 40},
                "day": {"type": "integer", "minimum": 1, "maximum": 31},
                "attendees": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3},
            },
            "required": ["title", "day", "attendees"],
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris? Then book a meeting on the 3rd."}]


def template(name):
    return os.path.join(require_env("CERA_SOURCE_DIR"), "tests", "fixtures", "chat", "templates", name)


@pytest.fixture(scope="module")
def qwen_server(cera_bin, model):
    from cera_server import CeraServer

    s = CeraServer(cera_bin, model, ["--chat-template-file", template("qwen2.5.jinja"), "-c", "2048"])
    s.start()
    yield s
    s.stop_and_check()


@pytest.fixture(scope="module")
def client(qwen_server):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{qwen_server.port}/v1", api_key="none", max_retries=0)


def schema_of(name):
    return {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, EVENT)}[name]


def check_calls(calls, allowed):
    assert calls, "no tool calls"
    for c in calls:
        assert c.type == "function"
        assert c.id.startswith("call_") and len(c.id) == 29, c.id
        assert c.function.name in allowed, c.function.name
        jsonschema.validate(json.loads(c.function.arguments), schema_of(c.function.name))


def test_required_gives_valid_calls(client):
    for seed in range(4):
        r = client.chat.completions.create(model=MODEL_ID, messages=ASK, tools=[WEATHER, EVENT], tool_choice="required",
                                           temperature=1.0, seed=seed, max_tokens=200)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        assert choice.message.content is None
        check_calls(choice.message.tool_calls, {"get_weather", "create_event"})


def test_named_function_and_single_call(client):
    r = client.chat.completions.create(model=MODEL_ID, messages=ASK, tools=[WEATHER, EVENT],
                                       tool_choice={"type": "function", "function": {"name": "create_event"}},
                                       parallel_tool_calls=False, temperature=0.8, seed=3, max_tokens=200)
    calls = r.choices[0].message.tool_calls
    check_calls(calls, {"create_event"})
    assert len(calls) == 1


def test_streamed_calls_equal_the_whole_response(client):
    kw = dict(model=MODEL_ID, messages=ASK, tools=[WEATHER, EVENT], tool_choice="required", temperature=0.0,
              max_tokens=200)
    whole = client.chat.completions.create(**kw).choices[0]
    stream = client.chat.completions.create(stream=True, **kw)
    calls, finish, roles = {}, None, 0
    for chunk in stream:
        delta = chunk.choices[0].delta
        roles += delta.role == "assistant"
        for tc in delta.tool_calls or []:
            entry = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += tc.id or ""
            entry["name"] += (tc.function.name or "") if tc.function else ""
            entry["arguments"] += (tc.function.arguments or "") if tc.function else ""
        finish = chunk.choices[0].finish_reason or finish
    assert roles == 1
    assert finish == "tool_calls"
    got = [calls[i] for i in sorted(calls)]
    want = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in whole.message.tool_calls]
    # Ids are drawn per request; names and arguments are the same greedy output.
    assert [(c["name"], json.loads(c["arguments"])) for c in got] == [(c["name"], json.loads(c["arguments"])) for c in want]


def test_calls_and_results_go_back_to_the_model(client, qwen_server):
    first = client.chat.completions.create(model=MODEL_ID, messages=ASK, tools=[WEATHER], tool_choice="required",
                                           parallel_tool_calls=False, temperature=0.0, max_tokens=120)
    call = first.choices[0].message.tool_calls[0]
    messages = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "unit": "celsius"})},
    ]
    second = client.chat.completions.create(model=MODEL_ID, messages=messages, tools=[WEATHER], tool_choice="none",
                                            temperature=0.0, max_tokens=30)
    assert second.choices[0].message.tool_calls is None
    assert second.choices[0].finish_reason in ("stop", "length")
    # The call and the result are in the prompt the template rendered (the Hermes shapes).
    status, _, body = qwen_server.request("POST", "/tokenize", {"messages": messages, "tools": [WEATHER],
                                                               "with_pieces": True})
    assert status == 200, body
    text = "".join(t["piece"] for t in json.loads(body)["tokens"])
    assert "<tool_call>" in text and '"name": "get_weather"' in text and "<tool_response>" in text, text


def test_refusals_name_the_field(client, server):
    bad = [
        (dict(tools=[{"type": "function", "function": {"name": "no spaces allowed"}}]), "tools[0].function.name"),
        (dict(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "other"}}), "tool_choice"),
        (dict(tools=[WEATHER], tool_choice="sometimes"), "tool_choice"),
        (dict(tool_choice="required"), "tool_choice"),
        (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "x": {"type": "array", "uniqueItems": True}}}}}], tool_choice="required"), "tools"),
        (dict(tools=[WEATHER], tool_choice="required", response_format={"type": "json_object"}), "response_format"),
    ]
    for extra, param in bad:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=MODEL_ID, messages=ASK, max_tokens=5, **extra)
        assert e.value.body["param"] == param, (extra, e.value.body)
    # SmolLM2's own template renders no tools: tools are refused there rather than ignored.
    own = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="none", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        own.chat.completions.create(model=MODEL_ID, messages=ASK, tools=[WEATHER], max_tokens=5)
    assert e.value.body["code"] == "tools_unsupported"
    own.chat.completions.create(model=MODEL_ID, messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=2)


def test_reasoning_content_and_template_kwargs(start_server, tmp_path):
    # A Qwen3-style template whose generation prompt opens a <think> block (as thinking models'
    # do), unless enable_thinking is false: then the block is closed empty in the prompt.
    path = tmp_path / "think.jinja"
    path.write_text(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n"
        "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
        "{% else %}<think>\n{% endif %}{% endif %}")
    s = start_server("--chat-template-file", str(path))
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{s.port}/v1", api_key="none", max_retries=0)
    thinking = c.chat.completions.create(model=MODEL_ID, messages=ASK, temperature=0.0, max_tokens=16)
    msg = thinking.choices[0].message
    # SmolLM2 never writes </think>: everything it wrote is reasoning.
    assert msg.model_extra.get("reasoning_content"), msg
    assert not msg.content
    plain = c.chat.completions.create(model=MODEL_ID, messages=ASK, temperature=0.0, max_tokens=16,
                                      extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    msg = plain.choices[0].message
    assert msg.content and not msg.model_extra.get("reasoning_content"), msg
    # Streamed, the reasoning arrives as reasoning_content deltas.
    stream = c.chat.completions.create(model=MODEL_ID, messages=ASK, temperature=0.0, max_tokens=16, stream=True)
    reasoning = "".join((chunk.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for chunk in stream)
    assert reasoning == thinking.choices[0].message.model_extra["reasoning_content"]
