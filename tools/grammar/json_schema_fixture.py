#!/usr/bin/env python3
"""Writes tests/fixtures/grammar/json_schema/cases.jsonl: schemas of our own making, each with
candidate documents (valid ones generated from the schema, invalid mutations) serialized compactly
and labelled by the jsonschema package (draft 2020-12's FORMAT_CHECKER: FormatChecker() of all
drafts would take draft 3's time format; date-time and time need rfc3339-validator installed). The C++ JsonSchema test checks that the
converted grammar accepts exactly the documents jsonschema calls valid.

Run in a venv: python3 -m venv ~/.cache/cera/jsonschema-venv && .../pip install jsonschema rfc3339-validator
"""
import copy
import json
import random
import sys
from pathlib import Path

import jsonschema

OUT = Path(__file__).resolve().parents[2] / "tests/fixtures/grammar/json_schema/cases.jsonl"
rng = random.Random(20)


def dumps(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def obj(props, required=None, **kw):
    s = {"type": "object", "properties": props, "additionalProperties": False}
    if required is not None:
        s["required"] = required
    s.update(kw)
    return s


BASE = [
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
    {"type": "null"}, {"type": ["string", "null"]}, {"type": ["integer", "boolean"]},
    {"enum": ["red", "green", "blue"]}, {"enum": [1, "a", None, True, [1, 2], {"k": "v"}]},
    {"const": "fixed"}, {"const": {"a": [1, 2]}},
    {"type": "string", "minLength": 2, "maxLength": 5}, {"type": "string", "maxLength": 0},
    {"type": "string", "minLength": 3},
    {"type": "string", "format": "date"}, {"type": "string", "format": "time"},
    {"type": "string", "format": "date-time"}, {"type": "string", "format": "uuid"},
    {"type": "string", "format": "email"},
    {"type": "string", "pattern": "^[a-z]+$"}, {"type": "string", "pattern": "^\\d{3}-\\d{4}$"},
    {"type": "string", "pattern": "^(foo|bar)+baz?$"}, {"type": "string", "pattern": "^[A-Z][a-z]*( [A-Z][a-z]*)*$"},
    {"type": "string", "pattern": "^\\w+@\\w+\\.com$"}, {"type": "string", "pattern": "^[^0-9]{2,4}$"},
    {"type": "string", "pattern": "^héllo.?$"}, {"type": "string", "pattern": "^a.c$"},
    {"type": "string", "pattern": "^(?:ab){2}$"}, {"type": "string", "pattern": "^[+-]?[0-9]+(\\.[0-9]+)?$"},
    {"type": "array", "items": {"type": "integer"}},
    {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
    {"type": "array", "prefixItems": [{"type": "boolean"}], "items": {"type": "null"}, "minItems": 2},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "minItems": 1, "items": False},
    obj({"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150}}, ["name"]),
    obj({"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}, []),
    obj({"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}, ["b"]),
    obj({"id": {"type": "string", "format": "uuid"}, "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2}}, ["id", "tags"]),
    obj({"x": {"type": "number"}}, ["x"], additionalProperties={"type": "integer"}),
    obj({"x": {"type": "number"}}, [], additionalProperties=True),
    {"type": "object", "additionalProperties": {"type": "string"}},
    obj({"inner": obj({"deep": obj({"v": {"type": "null"}}, ["v"])}, ["deep"])}, ["inner"]),
    {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 10}]},
    {"oneOf": [obj({"kind": {"const": "a"}, "n": {"type": "integer"}}, ["kind", "n"]),
               obj({"kind": {"const": "b"}, "s": {"type": "string"}}, ["kind", "s"])]},
    {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
               {"properties": {"b": {"type": "string"}}, "required": ["b"]}],
     "title": "merged"},
    {"$defs": {"node": obj({"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, ["v"])},
     "$ref": "#/$defs/node"},
    {"definitions": {"s": {"type": "string", "maxLength": 3}}, "type": "array", "items": {"$ref": "#/definitions/s"}},
    {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}, "v": {"type": "boolean"}},
     "required": ["v", "next"], "additionalProperties": False},
    obj({"text": {"type": "string"}, "emoji": {"const": "☃ 😀"}}, ["text"]),
    obj({"quote\"d": {"type": "string"}, "back\\slash": {"type": "integer"}}, []),
]


def int_schemas():
    out = []
    pts = [-1000, -101, -100, -37, -10, -1, 0, 1, 7, 9, 10, 42, 99, 100, 255, 999, 1000, 65535]
    for _ in range(45):
        a, b = sorted(rng.sample(pts, 2))
        s = {"type": "integer"}
        mode = rng.randrange(5)
        if mode == 0:
            s.update(minimum=a, maximum=b)
        elif mode == 1:
            s.update(exclusiveMinimum=a, maximum=b)
        elif mode == 2:
            s.update(minimum=a, exclusiveMaximum=b)
        elif mode == 3:
            s.update(minimum=a)
        else:
            s.update(maximum=b)
        out.append(s)
    return out


def misc_schemas():
    out = []
    for _ in range(35):
        lo = rng.randrange(0, 4)
        hi = lo + rng.randrange(0, 4)
        out.append({"type": "string", "minLength": lo, "maxLength": hi})
        out.append({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": lo, "maxItems": hi})
    for n in range(1, 15):
        props = {f"k{i}": rng.choice([{"type": "integer"}, {"type": "string", "maxLength": 3}, {"type": "boolean"}, {"enum": [1, 2]}]) for i in range(n)}
        req = [k for k in props if rng.random() < 0.4]
        out.append(obj(props, req))
    return out


def generate(s, root, depth=0):
    """A candidate instance (usually valid; jsonschema decides)."""
    if s is True or s == {}:
        return rng.choice([1, "s", None, [True], {"a": 1}])
    if "$ref" in s:
        ref = s["$ref"]
        node = root
        for part in ref[2:].split("/") if len(ref) > 1 else []:
            node = node[part]
        if depth > 3:
            return None
        return generate(node, root, depth + 1)
    if "const" in s:
        return copy.deepcopy(s["const"])
    if "enum" in s:
        return copy.deepcopy(rng.choice(s["enum"]))
    for k in ("anyOf", "oneOf"):
        if k in s:
            return generate(rng.choice(s[k]), root, depth + 1)
    if "allOf" in s:
        m = {"properties": {}, "required": []}
        for sub in s["allOf"]:
            m["properties"].update(sub.get("properties", {}))
            m["required"] += sub.get("required", [])
        return generate(dict(m, type="object"), root, depth)
    t = s.get("type", "object")
    if isinstance(t, list):
        t = rng.choice(t)
    if t == "null":
        return None
    if t == "boolean":
        return rng.random() < 0.5
    if t == "number":
        return rng.choice([0, -3, 2.5, 1e-3, 12345.678, -0.5])
    if t == "integer":
        lo = s.get("minimum", s.get("exclusiveMinimum", -50) + (1 if "exclusiveMinimum" in s else 0))
        hi = s.get("maximum", s.get("exclusiveMaximum", lo + 100) - (1 if "exclusiveMaximum" in s else 0))
        return rng.randint(lo, max(lo, hi))
    if t == "string":
        f = s.get("format")
        if f == "date":
            return f"20{rng.randrange(10, 99)}-0{rng.randrange(1, 9)}-{rng.randrange(10, 28)}"
        if f == "time":
            return f"{rng.randrange(0, 24):02}:{rng.randrange(0, 60):02}:{rng.randrange(0, 60):02}Z"
        if f == "date-time":
            return f"2024-0{rng.randrange(1, 9)}-1{rng.randrange(0, 9)}T12:3{rng.randrange(0, 9)}:00+02:00"
        if f == "uuid":
            return "%08x-%04x-%04x-%04x-%012x" % tuple(rng.getrandbits(b) for b in (32, 16, 16, 16, 48))
        if f == "email":
            return rng.choice(["a.b@example.com", "x@y.org", "first+tag@mail.co"])
        if "pattern" in s:
            return rng.choice(["abc", "555-1234", "foobarbaz", "Hello World", "me@site.com", "xy", "héllo!", "abc",
                               "abab", "-12.5", "a\"c", "a\nc"])
        lo = s.get("minLength", 0)
        hi = s.get("maxLength", lo + 6)
        alphabet = "abcXYZ09 é☃😀\"\\/\n\t\u0001"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))
    if t == "array":
        pre = [generate(p, root, depth + 1) for p in s.get("prefixItems", [])]
        items = s.get("items", True)
        lo = s.get("minItems", 0)
        hi = s.get("maxItems", lo + 3)
        n = rng.randint(lo, hi)
        rest = [] if items is False or depth > 3 else [generate(items, root, depth + 1) for _ in range(max(0, n - len(pre)))]
        return (pre + rest)[: max(n, 0)] if "maxItems" in s else pre + rest
    out = {}
    req = set(s.get("required", []))
    for k, v in s.get("properties", {}).items():
        if k in req or rng.random() < 0.5:
            out[k] = generate(v, root, depth + 1)
    ap = s.get("additionalProperties", False)
    if ap is not False and rng.random() < 0.5:
        out["extra"] = generate(ap, root, depth + 1)
    return out


def mutations(v):
    out = [12345, "x", None, [], {}, True, 1.5]
    if isinstance(v, dict):
        for k in list(v):
            w = dict(v)
            del w[k]
            out.append(w)
            w = dict(v)
            w[k] = [w[k]]
            out.append(w)
        out.append(dict(v, zz_extra=1))
    if isinstance(v, list):
        out += [v + v[:1], v[:-1], v + ["q"]]
    if isinstance(v, str):
        out += [v + "Z", v[:-1], v * 2, "not-a-" + v]
    if isinstance(v, int) and not isinstance(v, bool):
        out += [v + 1, v - 1, -v, v * 100]
    return out


def main():
    schemas = BASE + int_schemas() + misc_schemas()
    lines = []
    for i, s in enumerate(schemas):
        validator = jsonschema.Draft202012Validator(s, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        docs = {}
        for _ in range(8):
            v = generate(s, s)
            for cand in [v] + mutations(v):
                text = dumps(cand)
                if text not in docs and len(docs) < 40:
                    docs[text] = validator.is_valid(cand)
        lines.append(dumps({"name": f"s{i:03}", "schema": s, "docs": [[d, ok] for d, ok in docs.items()]}))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(schemas)} schemas, {sum(len(json.loads(l)['docs']) for l in lines)} documents -> {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
