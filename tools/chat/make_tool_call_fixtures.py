#!/usr/bin/env python3
"""Golden cases for cera's tool-call output parser (src/runtime/chat/tool_calls.h): for every
chat-template family with tool calls, renders an assistant turn holding 1 and 2 tool calls with
Python's jinja2 (set up exactly as tools/chat/make_fixtures.py sets it up, which is imported),
and keeps the text a model would generate for that turn: after the generation prompt, before
the end-of-turn marker. Writes one JSON case per turn to tests/fixtures/chat/tool_calls/.

    python3 tools/chat/make_tool_call_fixtures.py       # needs: pip install jinja2

Case: {"template", "format", "tools", "text", "content", "reasoning", "calls": [{"id"?, "name",
"arguments"}]}. "arguments" is the JSON object the call carries; "id" only where the format
writes ids into the text (Mistral).

LFM2/LFM2.5 and Granite 3.3 templates render an assistant message's content only (their
tool_calls are not rendered), so for them the content given to the template is the call text
the model card documents (pythonic `<|tool_call_start|>[f(a=1)]<|tool_call_end|>`, Granite's
`<|tool_call|>[{...}]`), written here from the same calls. Llama 3.x templates refuse more than
one call per message, so those families have single-call cases only.
"""
import copy
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402  (our own renderer setup)

OUT = mf.FIXTURES / "tool_calls"

WEATHER = mf.WEATHER
EVENT = {
    "type": "function",
    "function": {
        "name": "create_event",
        "description": "Create a calendar event",
        "parameters": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "attendees": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "email": {"type": ["string", "null"]}},
                    "required": ["name"]}},
                "start": {"type": "object", "properties": {"date": {"type": "string"}, "hour": {"type": "integer"}},
                          "required": ["date", "hour"]},
                "priority": {"type": "number"},
                "public": {"type": "boolean"},
                "notes": {"type": ["string", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["title", "start"],
        },
    },
}
TOOLS = [WEATHER, EVENT]

# Arguments keep each schema's property order (the grammar test feeds these texts to grammars
# whose objects list properties in schema order).
CALL_A = {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}
CALL_B = {"name": "get_weather", "arguments": {"city": "São Paulo \"SP\""}}
CALL_C = {"name": "create_event", "arguments": {
    "title": "Team \"sync\" — 週次, it's on",
    "attendees": [{"name": "Ana", "email": None}, {"name": "Bo\\b", "email": "bo@example.com"}],
    "start": {"date": "2025-03-14", "hour": 9},
    "priority": -2.5,
    "public": False,
    "notes": None,
    "tags": ["a", "b c", "ünï"],
}}
IDS = ["a1B2c3D4e", "Z9y8X7w6v"]

END = {"qwen2.5": "<|im_end|>", "qwen3": "<|im_end|>", "llama3.1": "<|eot_id|>", "llama3.2": "<|eot_id|>",
       "lfm2": "<|im_end|>", "lfm2.5": "<|im_end|>", "mistral-nemo": "</s>", "granite3.3": "<|end_of_text|>"}
FORMAT = {"qwen2.5": "hermes", "qwen3": "hermes", "llama3.1": "llama3", "llama3.2": "llama3", "lfm2": "lfm2",
          "lfm2.5": "lfm2", "mistral-nemo": "mistral", "granite3.3": "granite"}
BOS_EOS = {"qwen2.5": ("", "<|im_end|>"), "qwen3": ("", "<|im_end|>"), "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),
           "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"), "lfm2": ("<|startoftext|>", "<|im_end|>"),
           "lfm2.5": ("<|startoftext|>", "<|im_end|>"), "mistral-nemo": ("<s>", "</s>"),
           "granite3.3": ("", "<|end_of_text|>")}


def py_literal(v, double):
    """A Python literal for a JSON value; strings in double (JSON-style) or repr's quotes."""
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False) if double else repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(py_literal(e, double) for e in v) + "]"
    return "{" + ", ".join(f"{py_literal(k, double)}: {py_literal(e, double)}" for k, e in v.items()) + "}"


def pythonic(calls):
    """Strings in JSON-style double quotes in the first call, in repr's quotes (escapes) after."""
    body = ", ".join(c["name"] + "(" + ", ".join(f"{k}={py_literal(v, i == 0)}" for k, v in c["arguments"].items())
                     + ")" for i, c in enumerate(calls))
    return "<|tool_call_start|>[" + body + "]<|tool_call_end|>"


def granite(calls):
    return "<|tool_call|>" + json.dumps([{"name": c["name"], "arguments": c["arguments"]} for c in calls],
                                        ensure_ascii=False)


def assistant_message(family, content, calls):
    if family in ("lfm2", "lfm2.5"):
        return {"role": "assistant", "content": content + pythonic(calls)}
    if family == "granite3.3":
        return {"role": "assistant", "content": content + granite(calls)}
    tool_calls = [{"id": IDS[i], "type": "function", "function": copy.deepcopy(c)} for i, c in enumerate(calls)]
    return {"role": "assistant", "content": content, "tool_calls": tool_calls}


def turn_text(family, source, messages, tools, extra):
    """The rendered assistant turn: what follows the generation prompt, up to the end marker."""
    bos, eos = BOS_EOS[family]
    prompt = mf.render(source, mf.ctx(messages[:-1], True, tools, bos=bos, eos=eos, **extra))
    full = mf.render(source, mf.ctx(messages, False, tools, bos=bos, eos=eos, **extra))
    assert full.startswith(prompt), f"{family}: the rendering does not extend the prompt"
    rest = full[len(prompt):]
    end = rest.find(END[family])
    assert end >= 0, f"{family}: no end-of-turn marker"
    return rest[:end]


def cases():
    user = {"role": "user", "content": "Weather in Zürich, then book the sync."}
    out = []
    for family in FORMAT:
        source = (mf.FIXTURES / "templates" / f"{family}.jinja").read_text(encoding="utf-8")
        renders_content = family not in ("llama3.1", "llama3.2", "mistral-nemo")
        variants = [("", [CALL_A], "", {})]
        if family not in ("llama3.1", "llama3.2"):
            variants.append(("Let me check both." if renders_content else "", [CALL_B, CALL_C], "", {}))
        else:
            variants.append(("", [CALL_C], "", {}))
        if family == "qwen3":
            variants.append(("On it.", [CALL_C], "The user wants an event.", {}))
        for i, (content, calls, reasoning, extra) in enumerate(variants):
            msg = assistant_message(family, content, calls)
            if reasoning:
                msg["reasoning_content"] = reasoning
            text = turn_text(family, source, [user, msg], TOOLS, extra)
            expected_calls = []
            for k, c in enumerate(calls):
                e = {"name": c["name"], "arguments": c["arguments"]}
                if family == "mistral-nemo":
                    e["id"] = IDS[k]
                expected_calls.append(e)
            out.append((f"{family}-{i:02d}", {
                "template": f"{family}.jinja", "format": FORMAT[family], "tools": TOOLS, "text": text,
                "content": content, "reasoning": reasoning, "calls": expected_calls}))
    return out


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.json"):
        old.unlink()
    all_cases = cases()
    for name, case in all_cases:
        (OUT / f"{name}.json").write_text(json.dumps(case, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(all_cases)} cases to {OUT.relative_to(mf.ROOT)}")


if __name__ == "__main__":
    main()
