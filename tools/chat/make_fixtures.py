#!/usr/bin/env python3
"""Golden fixtures for cera's chat templates: renders every template in
tests/fixtures/chat/templates with Python's jinja2 configured exactly as Hugging Face
transformers configures it for apply_chat_template, over several conversations per family, and
writes one JSON case per rendering to tests/fixtures/chat/cases/.

    python3 tools/chat/make_fixtures.py            # needs: pip install jinja2

Each case: {"template": NAME, "context": {...}, "expected": TEXT} or, when the template raises,
{"template": NAME, "context": {...}, "error": MESSAGE}. The context holds the variables the
template is rendered with; "now" is the fixed local time strftime_now() formats.
The templates themselves and where they come from: tests/fixtures/chat/README.md.
"""
import copy
import datetime
import json
import pathlib

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "chat"
NOW = datetime.datetime(2025, 3, 14, 9, 26, 53)


# --- the renderer, as transformers builds it (utils/chat_template_utils.py) -----------------
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return NOW.strftime(fmt)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception
ENV.globals["strftime_now"] = strftime_now


def render(source, ctx):
    variables = {
        "messages": ctx["messages"],
        "tools": ctx.get("tools"),
        "documents": None,
        "add_generation_prompt": ctx["add_generation_prompt"],
        "bos_token": ctx["bos_token"],
        "eos_token": ctx["eos_token"],
    }
    variables.update(ctx.get("extra", {}))
    return ENV.from_string(source).render(**variables)


# --- conversations ---------------------------------------------------------------------------
SYSTEM = {"role": "system", "content": "You are a concise assistant. Answer in one sentence."}
U1 = {"role": "user", "content": "What is the capital of France?"}
A1 = {"role": "assistant", "content": "The capital of France is Paris."}
U2 = {"role": "user", "content": "And its population?  \n"}
A2 = {"role": "assistant", "content": "About 2.1 million people live in Paris proper."}
U3 = {"role": "user", "content": "Danke schön! Ünïcödé ✓ and \"quotes\" and 'apostrophes'\nsecond line"}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current time in a time zone",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
    },
}
TOOLS = [WEATHER, TIME]
U_TOOL = {"role": "user", "content": "What's the weather in Paris?"}
CALL = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
A_CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "call12345", "type": "function", "function": CALL}]}
T_RESULT = {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temp\": 18, \"sky\": \"clear\"}"}
A_AFTER = {"role": "assistant", "content": "It is 18 °C and clear in Paris."}


def ctx(messages, gen=True, tools=None, bos="<s>", eos="</s>", **extra):
    c = {"messages": copy.deepcopy(messages), "add_generation_prompt": gen, "bos_token": bos, "eos_token": eos}
    if tools is not None:
        c["tools"] = copy.deepcopy(tools)
    if extra:
        c["extra"] = extra
    return c


def chat_cases(bos, eos, system=True):
    """System + multi-turn, with and without the generation prompt, and odd characters."""
    s = [SYSTEM] if system else []
    return [
        ctx(s + [U1], True, bos=bos, eos=eos),
        ctx(s + [U1, A1, U2], True, bos=bos, eos=eos),
        ctx(s + [U1, A1, U2, A2], False, bos=bos, eos=eos),
        ctx([U1, A1, U3], True, bos=bos, eos=eos),
    ]


def tool_cases(bos, eos):
    return [
        ctx([SYSTEM, U_TOOL], True, TOOLS, bos=bos, eos=eos),
        ctx([U_TOOL, A_CALL, T_RESULT], True, TOOLS, bos=bos, eos=eos),
        ctx([SYSTEM, U_TOOL, A_CALL, T_RESULT, A_AFTER, U2], True, TOOLS, bos=bos, eos=eos),
    ]


def cases():
    out = {}
    out["smollm2"] = chat_cases("<|im_start|>", "<|im_end|>") + [ctx([U1, A1, U2], True, bos="<|im_start|>", eos="<|im_end|>")]

    q_bos, q_eos = "", "<|im_end|>"
    out["qwen2.5"] = chat_cases(q_bos, q_eos) + chat_cases(q_bos, q_eos, system=False)[:1] + tool_cases(q_bos, q_eos) + [
        # two parallel calls, two tool results in a row
        ctx([U_TOOL, {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"type": "function", "function": CALL},
            {"type": "function", "function": {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}}]},
            {"role": "tool", "content": "18 C"}, {"role": "tool", "content": "09:26"}], True, TOOLS, bos=q_bos, eos=q_eos),
    ]
    think = {"role": "assistant", "content": "<think>\nThe user asks about France.\n</think>\n\nParis."}
    reasoning = {"role": "assistant", "content": "Paris.", "reasoning_content": "Capital lookup."}
    out["qwen3"] = chat_cases(q_bos, q_eos) + tool_cases(q_bos, q_eos) + [
        ctx([SYSTEM, U1], True, bos=q_bos, eos=q_eos, enable_thinking=False),
        ctx([SYSTEM, U1], True, bos=q_bos, eos=q_eos, enable_thinking=True),
        ctx([U1, think, U2], True, bos=q_bos, eos=q_eos),
        ctx([U1, think], False, bos=q_bos, eos=q_eos),
        ctx([U1, reasoning, U2, think], False, bos=q_bos, eos=q_eos),
        ctx([U_TOOL, {"role": "assistant", "content": "<think>\nneed weather\n</think>\n\n", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "content": "18 C"}], True, TOOLS, bos=q_bos, eos=q_eos),
    ]

    l_bos, l_eos = "<|begin_of_text|>", "<|eot_id|>"
    llama_tools = tool_cases(l_bos, l_eos)
    out["llama3.1"] = chat_cases(l_bos, l_eos) + llama_tools + [
        ctx([SYSTEM, U1], True, bos=l_bos, eos=l_eos, date_string="01 Jan 2025"),
        ctx([SYSTEM, U_TOOL], True, TOOLS, bos=l_bos, eos=l_eos, tools_in_user_message=False),
        ctx([SYSTEM, {"role": "user", "content": "Search the news"}, {"role": "assistant", "tool_calls": [
            {"type": "function", "function": {"name": "brave_search", "arguments": {"query": "news today"}}}]},
            {"role": "ipython", "content": "headline"}], True, bos=l_bos, eos=l_eos,
            builtin_tools=["brave_search", "wolfram_alpha", "code_interpreter"]),
        ctx([U_TOOL, {"role": "assistant", "tool_calls": [{"function": CALL}, {"function": CALL}]}], True, TOOLS,
            bos=l_bos, eos=l_eos),  # raises: one tool call at a time
    ]
    out["llama3.2"] = chat_cases(l_bos, l_eos) + llama_tools + [
        ctx([{"role": "system", "content": "  Trim me  \n"}, U1], True, bos=l_bos, eos=l_eos),
        ctx([U_TOOL, A_CALL, {"role": "tool", "content": {"temp": 18}}], True, TOOLS, bos=l_bos, eos=l_eos),
    ]

    g_bos, g_eos = "<|end_of_text|>", "<|end_of_text|>"
    out["granite3.3"] = chat_cases(g_bos, g_eos) + chat_cases(g_bos, g_eos, system=False)[:2] + [
        ctx([U_TOOL], True, TOOLS, bos=g_bos, eos=g_eos),
        ctx([SYSTEM, U_TOOL, {"role": "assistant", "content": "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]"},
             {"role": "tool", "content": "18 C"}], True, TOOLS, bos=g_bos, eos=g_eos),
        ctx([U1], True, bos=g_bos, eos=g_eos, thinking=True),
        ctx([U1], True, bos=g_bos, eos=g_eos, controls={"length": "short"}),
        ctx([U1], True, bos=g_bos, eos=g_eos, documents=[{"doc_id": 1, "text": "Paris is in France."},
                                                         {"doc_id": "b", "text": "Lyon too."}],
            controls={"citations": True, "hallucinations": True}),
    ]

    m_bos, m_eos = "<s>", "</s>"
    out["mistral-nemo"] = chat_cases(m_bos, m_eos) + tool_cases(m_bos, m_eos) + [
        ctx([U1, U1], True, bos=m_bos, eos=m_eos),  # raises: roles must alternate
        ctx([U_TOOL, {"role": "assistant", "tool_calls": [{"id": "short", "function": CALL}]}], True, TOOLS,
            bos=m_bos, eos=m_eos),  # raises: tool call ids have 9 characters
    ]

    lf_bos, lf_eos = "<|startoftext|>", "<|im_end|>"
    lfm_think = {"role": "assistant", "content": "<think>hmm</think> Paris."}
    out["lfm2"] = chat_cases(lf_bos, lf_eos) + tool_cases(lf_bos, lf_eos) + [
        ctx([U_TOOL], True, ["plain string tool", WEATHER], bos=lf_bos, eos=lf_eos),
    ]
    out["lfm2.5"] = chat_cases(lf_bos, lf_eos) + tool_cases(lf_bos, lf_eos) + [
        ctx([U1, lfm_think, U2, lfm_think], False, bos=lf_bos, eos=lf_eos),
        ctx([U1, lfm_think, U2, lfm_think], False, bos=lf_bos, eos=lf_eos, keep_past_thinking=True),
    ]

    ge_bos, ge_eos = "<bos>", "<eos>"
    out["gemma2"] = chat_cases(ge_bos, ge_eos, system=False) + [
        ctx([SYSTEM, U1], True, bos=ge_bos, eos=ge_eos),  # raises: no system role
    ]
    parts = {"role": "user", "content": [{"type": "text", "text": "Describe this image. "},
                                         {"type": "image"}, {"type": "text", "text": "  Briefly."}]}
    out["gemma3-style"] = chat_cases(ge_bos, ge_eos) + chat_cases(ge_bos, ge_eos, system=False)[:2] + [
        ctx([{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, parts], True, bos=ge_bos, eos=ge_eos),
        ctx([A1], True, bos=ge_bos, eos=ge_eos),  # raises: must start with user
    ]

    feat = [SYSTEM, U1, A1, {"role": "tool", "content": "ignored"}, U3, A2]
    out["features"] = [
        ctx(feat, True, bos="<s>", eos="</s>"),
        ctx(feat[:2], True, bos="<s>", eos="</s>", user="ada lovelace"),
        ctx([], True, bos="", eos="", user=""),
    ]
    return out


def main():
    out_dir = FIXTURES / "cases"
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.json"):
        old.unlink()
    total = 0
    for name, contexts in cases().items():
        source = (FIXTURES / "templates" / f"{name}.jinja").read_text(encoding="utf-8")
        for i, c in enumerate(contexts):
            c["now"] = NOW.strftime("%Y-%m-%dT%H:%M:%S")
            case = {"template": f"{name}.jinja", "context": c}
            try:
                case["expected"] = render(source, c)
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
            path = out_dir / f"{name}-{i:02d}.json"
            path.write_text(json.dumps(case, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            total += 1
    print(f"wrote {total} cases to {out_dir.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
