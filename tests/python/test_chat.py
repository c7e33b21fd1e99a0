# cera.Engine.chat on SmolLM2-135M-Instruct: its ChatML template is applied (the turn text the C++
# facade test checks), a streamed greedy reply is made of pieces that concatenate to the blocking
# greedy reply, which answers "Paris"; messages are checked and refused by index.
import json

import pytest

import cera

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
CHATML_TURN = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


def test_the_chat_template_is_applied(smollm2):
    assert smollm2.info.has_chat_template
    rendered = smollm2.render_chat(QUESTION)
    assert rendered.endswith(CHATML_TURN), rendered
    without = smollm2.render_chat(QUESTION, add_generation_prompt=False)
    assert not without.endswith("<|im_start|>assistant\n")
    with_system = smollm2.render_chat([{"role": "system", "content": "Be brief."}] + QUESTION)
    assert with_system.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
    # The prompt chat() evaluates is the rendered one: its token count says so.
    r = smollm2.chat(QUESTION, max_tokens=1, temperature=0)
    assert r.prompt_tokens == len(smollm2.tokenize(rendered, add_special=False, parse_special=True))


def test_streamed_chat_equals_the_blocking_reply(smollm2):
    whole = smollm2.chat(QUESTION, max_tokens=24, temperature=0)
    assert "Paris" in whole.text
    stream = smollm2.chat(QUESTION, max_tokens=24, temperature=0, stream=True)
    pieces = list(stream)
    assert len(pieces) > 1
    assert "".join(pieces) == whole.text == stream.result.text
    assert stream.result.finish_reason == whole.finish_reason
    assert stream.result.tokens == whole.tokens
    # ChatMessage objects and dicts are the same messages.
    again = smollm2.chat([cera.ChatMessage("user", "What is the capital of France?")], max_tokens=24, temperature=0)
    assert again.text == whole.text


def test_template_kwargs_and_stop(smollm2):
    whole = smollm2.chat(QUESTION, max_tokens=24, temperature=0)
    cut = smollm2.chat(QUESTION, max_tokens=24, temperature=0, stop="Paris", template_kwargs={"unused": True})
    assert cut.finish_reason == "stop_string"
    assert cut.text == whole.text[: whole.text.find("Paris")]


def test_bad_messages_are_named(smollm2):
    with pytest.raises(TypeError, match="messages is a str"):
        smollm2.chat("What is the capital of France?")
    with pytest.raises(TypeError, match=r"messages\[1\] is a tuple"):
        smollm2.chat([QUESTION[0], ("user", "hi")])
    with pytest.raises(cera.InvalidArgumentError, match=r"messages\[0\] has no 'content'"):
        smollm2.chat([{"role": "user"}])
    with pytest.raises(TypeError, match=r"messages\[0\]\['content'\] is a int"):
        smollm2.chat([{"role": "user", "content": 7}])
    with pytest.raises(cera.InvalidArgumentError, match=r"messages\[0\] has 'tool_calls'"):
        smollm2.chat([{"role": "assistant", "content": "", "tool_calls": []}])
    with pytest.raises(cera.InvalidArgumentError, match="template_kwargs"):
        smollm2.chat(QUESTION, template_kwargs="[1, 2]")


def test_json_schema_replies_validate(smollm2):
    # jsonschema judges what the schema constrained (TESTING.md), greedy and sampled.
    jsonschema = pytest.importorskip("jsonschema")
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20},
                       "age": {"type": "integer", "minimum": 0, "maximum": 150}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    ask = [{"role": "user", "content": "Describe a person as JSON with a name and an age."}]
    for seed in (None, 1, 2, 3):
        r = smollm2.chat(ask, max_tokens=64, temperature=0 if seed is None else 1.0, seed=seed, json_schema=schema)
        assert r.finish_reason == "stop", r
        jsonschema.validate(json.loads(r.text), schema)
