"""The 100 JSON Schemas of the mask tests and benchmark (schema_masks.py), with a seeded generator
of valid instances. Every object states additionalProperties explicitly: cera reads an absent one
as false (OpenAI strict mode), JSON Schema (and llguidance) as true, and the point here is to
compare the engines on the same meaning. Property order is the schema's (both engines emit
properties in that order). Instances are serialized compactly, raw UTF-8, as cera's
JsonWhitespace::kCompact requires.
"""

import copy
import json
import random


def dumps(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def obj(props, required=(), additional=False, **kw):
    s = {"type": "object", "properties": props, "required": list(required), "additionalProperties": additional}
    s.update(kw)
    return s


S, I, N, B = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}

# name -> (schema, sample strings for patterns: {json pointer of the pattern schema: [strings]})
HANDWRITTEN = {
    "s_string": (S, {}),
    "s_integer": (I, {}),
    "s_number": (N, {}),
    "s_boolean": (B, {}),
    "s_null": ({"type": "null"}, {}),
    "s_string_or_null": ({"type": ["string", "null"]}, {}),
    "s_int_range_small": ({"type": "integer", "minimum": 0, "maximum": 9}, {}),
    "s_int_range_neg": ({"type": "integer", "minimum": -250, "maximum": 1200}, {}),
    "s_int_min_only": ({"type": "integer", "minimum": 18}, {}),
    "s_int_exclusive": ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100}, {}),
    "s_int_max_only": ({"type": "integer", "maximum": -3}, {}),
    "s_enum_colors": ({"enum": ["red", "green", "blue", "cyan", "magenta"]}, {}),
    "s_enum_mixed": ({"enum": [1, "one", None, True, 2.5]}, {}),
    "s_enum_unicode": ({"enum": ["café", "naïve", "日本語", "Ελληνικά", "emoji 😀"]}, {}),
    "s_const_string": ({"const": "fixed value"}, {}),
    "s_const_unicode": ({"const": "über straße"}, {}),
    "s_const_object": ({"const": {"a": [1, 2], "b": "c"}}, {}),
    "s_strlen": ({"type": "string", "minLength": 2, "maxLength": 6}, {}),
    "s_strlen_min": ({"type": "string", "minLength": 5}, {}),
    "s_strlen_max": ({"type": "string", "maxLength": 3}, {}),
    "s_date": ({"type": "string", "format": "date"}, {}),
    "s_time": ({"type": "string", "format": "time"}, {}),
    "s_datetime": ({"type": "string", "format": "date-time"}, {}),
    "s_uuid": ({"type": "string", "format": "uuid"}, {}),
    "s_email": ({"type": "string", "format": "email"}, {}),
    "s_pattern_lower": ({"type": "string", "pattern": "^[a-z]+$"}, {"": ["hello", "abc", "zzzzzzzz"]}),
    "s_pattern_phone": ({"type": "string", "pattern": "^\\d{3}-\\d{4}$"}, {"": ["555-1234", "012-9876"]}),
    "s_pattern_alt": ({"type": "string", "pattern": "^(foo|bar)+baz?$"}, {"": ["foobarba", "barbaz", "fooba"]}),
    "s_pattern_words": ({"type": "string", "pattern": "^[A-Z][a-z]*( [A-Z][a-z]*)*$"},
                        {"": ["Hello World", "A", "New York City"]}),
    "s_pattern_unicode": ({"type": "string", "pattern": "^(α|β|γ|ω){2,5}-é$"}, {"": ["αβγ-é", "ωω-é"]}),
    "s_pattern_code": ({"type": "string", "pattern": "^[A-Z]{2}[0-9]{2}(-[A-Z0-9]{3})?$"},
                       {"": ["AB12", "XY99-Z9Q"]}),
    "s_pattern_search": ({"type": "string", "pattern": "ab+c"}, {"": ["xxabbc", "abc", "zabcz"]}),
    "s_array_ints": ({"type": "array", "items": I}, {}),
    "s_array_minmax": ({"type": "array", "items": S, "minItems": 1, "maxItems": 3}, {}),
    "s_array_exact": ({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99},
                       "minItems": 4, "maxItems": 4}, {}),
    "s_array_enum": ({"type": "array", "items": {"enum": ["x", "y", "z"]}, "maxItems": 5}, {}),
    "s_prefix_closed": ({"type": "array", "prefixItems": [S, I, B], "items": False}, {}),
    "s_prefix_open": ({"type": "array", "prefixItems": [{"const": "head"}], "items": N}, {}),
    "s_prefix_min": ({"type": "array", "prefixItems": [S, I], "minItems": 1, "items": False}, {}),
    "s_array_nested": ({"type": "array", "items": {"type": "array", "items": I, "maxItems": 3}, "maxItems": 3}, {}),
    "s_obj_person": (obj({"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 150},
                          "email": {"type": "string", "format": "email"}}, ["name", "age"]), {}),
    "s_obj_all_optional": (obj({"a": I, "b": S, "c": B}), {}),
    "s_obj_middle_required": (obj({"a": I, "b": S, "c": B, "d": N}, ["c"]), {}),
    "s_obj_additional_true": (obj({"x": N}, ["x"], True), {}),
    "s_obj_additional_schema": (obj({"id": I}, ["id"], {"type": "string", "maxLength": 8}), {}),
    "s_obj_map": ({"type": "object", "additionalProperties": {"type": "integer"}}, {}),
    "s_obj_empty_closed": ({"type": "object", "properties": {}, "additionalProperties": False}, {}),
    "s_obj_nested": (obj({"user": obj({"id": {"type": "string", "format": "uuid"},
                                        "profile": obj({"first": S, "last": S, "born": {"type": "string", "format": "date"}},
                                                       ["first"])}, ["id", "profile"]),
                          "active": B}, ["user"]), {}),
    "s_obj_unicode_keys": (obj({"名前": S, "größe": {"type": "integer", "minimum": 1, "maximum": 300},
                                "ключ": {"enum": ["да", "нет"]}}, ["名前"]), {}),
    "s_obj_escaped_key": (obj({"a\"b": I, "c\\d": S, "tab\tkey": B}, ["a\"b"]), {}),
    "s_anyof_scalar": ({"anyOf": [I, {"type": "string", "maxLength": 4}, {"type": "null"}]}, {}),
    "s_oneof_objects": ({"oneOf": [obj({"kind": {"const": "circle"}, "r": N}, ["kind", "r"]),
                                   obj({"kind": {"const": "rect"}, "w": N, "h": N}, ["kind", "w", "h"])]}, {}),
    # allOf: cera merges object branches whose additionalProperties is false; in JSON Schema
    # that is only the same meaning when every branch lists every property (else a branch's
    # false refuses the others' properties), so the branches here list the same keys.
    "s_allof_merge": ({"allOf": [obj({"id": I, "name": S, "tags": {"type": "array", "items": S}}, ["id"]),
                                 obj({"id": I, "name": S, "tags": {"type": "array", "items": S}}, ["name"])]}, {}),
    "s_anyof_arrays": ({"anyOf": [{"type": "array", "items": I, "maxItems": 2},
                                  {"type": "array", "items": B, "minItems": 1, "maxItems": 2}]}, {}),
    "s_ref_simple": ({"$defs": {"point": obj({"x": N, "y": N}, ["x", "y"])},
                      "type": "object", "properties": {"from": {"$ref": "#/$defs/point"}, "to": {"$ref": "#/$defs/point"}},
                      "required": ["from", "to"], "additionalProperties": False}, {}),
    "s_ref_tree": ({"$defs": {"node": obj({"value": I, "children": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                                                    "maxItems": 3}}, ["value"])},
                    "$ref": "#/$defs/node"}, {}),
    "s_ref_linked_list": ({"$defs": {"cell": obj({"head": S, "tail": {"anyOf": [{"$ref": "#/$defs/cell"}, {"type": "null"}]}},
                                                 ["head", "tail"])}, "$ref": "#/$defs/cell"}, {}),
    "s_ref_root_recursion": (obj({"name": S, "sub": {"$ref": "#"}}, ["name"]), {}),
    "s_definitions": ({"definitions": {"color": {"enum": ["r", "g", "b"]}},
                       "type": "array", "items": {"$ref": "#/definitions/color"}, "maxItems": 4}, {}),
    "s_type_array_multi": ({"type": ["integer", "boolean", "null"]}, {}),
    "s_obj_many_optional": (obj({k: I for k in "abcdefgh"}, ["e"]), {}),
    "s_event": (obj({"title": {"type": "string", "minLength": 1, "maxLength": 40},
                     "start": {"type": "string", "format": "date-time"},
                     "end": {"type": "string", "format": "date-time"},
                     "attendees": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 3},
                     "room": {"type": "string", "pattern": "^[A-Z]-[0-9]{3}$"}}, ["title", "start"]),
                {"/properties/room": ["B-101", "Z-999"]}),
    "s_invoice": (obj({"number": {"type": "string", "pattern": "^INV-[0-9]{6}$"},
                       "date": {"type": "string", "format": "date"},
                       "lines": {"type": "array", "minItems": 1, "maxItems": 4,
                                 "items": obj({"sku": {"type": "string", "pattern": "^[A-Z]{3}[0-9]{3}$"},
                                               "qty": {"type": "integer", "minimum": 1, "maximum": 999},
                                               "price": N}, ["sku", "qty", "price"])},
                       "currency": {"enum": ["EUR", "USD", "JPY", "£"]}}, ["number", "lines"]),
                  {"/properties/number": ["INV-000123", "INV-987654"],
                   "/properties/lines/items/properties/sku": ["ABC123", "XYZ999"]}),
    "s_tool_call": ({"oneOf": [obj({"name": {"const": "get_weather"},
                                    "arguments": obj({"city": S, "unit": {"enum": ["celsius", "fahrenheit"]}}, ["city"])},
                                   ["name", "arguments"]),
                               obj({"name": {"const": "search"},
                                    "arguments": obj({"query": S, "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
                                                     ["query"])}, ["name", "arguments"])]}, {}),
    "s_time_window": (obj({"tz": {"enum": ["UTC", "Europe/Zürich", "Asia/東京"]}, "open": {"type": "string", "format": "time"},
                           "close": {"type": "string", "format": "time"}}, ["open", "close"]), {}),
    "s_matrix": ({"type": "array", "minItems": 2, "maxItems": 2,
                  "items": {"type": "array", "minItems": 2, "maxItems": 2, "items": N}}, {}),
    "s_config": (obj({"version": {"const": 2}, "debug": B,
                      "servers": {"type": "array", "items": obj({"host": S, "port": {"type": "integer", "minimum": 1, "maximum": 65535}},
                                                                ["host", "port"]), "maxItems": 3},
                      "env": {"type": "object", "additionalProperties": S}}, ["version"]), {}),
    "s_geo": (obj({"type": {"const": "Point"}, "coordinates": {"type": "array", "prefixItems": [N, N], "items": False,
                                                               "minItems": 2}}, ["type", "coordinates"]), {}),
    "s_product": (obj({"id": {"type": "string", "format": "uuid"}, "name": {"type": "string", "maxLength": 30},
                       "price": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 10},
                                                            "maxItems": 4},
                       "stock": {"type": "integer", "minimum": 0}}, ["id", "name", "price"]), {}),
    "s_review": (obj({"rating": {"type": "integer", "minimum": 1, "maximum": 5},
                      "text": {"type": "string", "minLength": 10, "maxLength": 80},
                      "lang": {"enum": ["en", "fr", "de", "ja", "zh"]}}, ["rating", "text"]), {}),
    "s_choice_list": ({"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"const": "n/a"}]},
                       "minItems": 2, "maxItems": 6}, {}),
    "s_nullable_fields": (obj({"a": {"type": ["string", "null"]}, "b": {"anyOf": [I, {"type": "null"}]},
                               "c": {"type": ["boolean", "null"]}}, ["a", "b", "c"]), {}),
    "s_allof_three": ({"allOf": [obj({"a": I, "b": S, "c": {"enum": [1, 2, 3]}}, ["a"]),
                                 obj({"a": I, "b": S, "c": {"enum": [1, 2, 3]}}, []),
                                 obj({"a": I, "b": S, "c": {"enum": [1, 2, 3]}}, ["c"])]}, {}),
    "s_ref_defs_chain": ({"$defs": {"name": {"type": "string", "minLength": 1, "maxLength": 12},
                                    "person": obj({"first": {"$ref": "#/$defs/name"}, "last": {"$ref": "#/$defs/name"}}, ["first"]),
                                    "team": obj({"lead": {"$ref": "#/$defs/person"},
                                                 "members": {"type": "array", "items": {"$ref": "#/$defs/person"}, "maxItems": 3}},
                                                ["lead"])},
                          "$ref": "#/$defs/team"}, {}),
    "s_expr_tree": ({"$defs": {"expr": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 999},
                                                  obj({"op": {"enum": ["+", "-", "*", "/"]},
                                                       "args": {"type": "array", "items": {"$ref": "#/$defs/expr"},
                                                                "minItems": 2, "maxItems": 2}}, ["op", "args"])]}},
                     "$ref": "#/$defs/expr"}, {}),
    "s_unicode_pattern_key": (obj({"città": {"type": "string", "pattern": "^([A-Z]|Å)([a-z]|ü|ö|é)+$"}}, ["città"]),
                              {"/properties/città": ["Zürich", "Ålesund", "Malmö"]}),
    "s_string_escapes": ({"enum": ["a\"quote", "back\\slash", "new\nline", "tab\t", "ctl\u0001"]}, {}),
}

FIELD_TYPES = [
    S, I, N, B, {"type": "null"}, {"type": "string", "maxLength": 8}, {"type": "string", "minLength": 1, "maxLength": 3},
    {"type": "integer", "minimum": -5, "maximum": 5}, {"type": "integer", "minimum": 100, "maximum": 100000},
    {"type": "string", "format": "date"}, {"type": "string", "format": "uuid"}, {"type": "string", "format": "time"},
    {"type": "string", "format": "date-time"}, {"enum": ["alpha", "beta", "gamma", "δέλτα"]}, {"const": "k"},
    {"type": "array", "items": I, "maxItems": 3}, {"type": "array", "items": S, "minItems": 1, "maxItems": 2},
    {"type": ["string", "integer"]}, {"anyOf": [B, {"type": "string", "maxLength": 2}]},
]
KEYS = ["id", "name", "count", "value", "kind", "tags", "note", "when", "flag", "size", "código", "uid", "meta", "x", "y"]


def generated(seed):
    """Seeded objects of 2-6 properties of FIELD_TYPES, some nested, with every additionalProperties form."""
    rng = random.Random(seed)
    out = {}
    for n in range(100 - len(HANDWRITTEN)):
        def make(depth):
            keys = rng.sample(KEYS, rng.randint(2, 6 - 2 * depth))
            props = {}
            for k in keys:
                if depth == 0 and rng.random() < 0.2:
                    props[k] = make(depth + 1)
                else:
                    props[k] = copy.deepcopy(rng.choice(FIELD_TYPES))
            req = [k for k in keys if rng.random() < 0.5]
            add = rng.choice([False, False, True, {"type": "integer"}])
            return obj(props, req, add)
        s = make(0)
        if rng.random() < 0.2:
            s = {"type": "array", "items": s, "minItems": rng.randint(0, 1), "maxItems": rng.randint(2, 3)}
        out["s_gen_%02d" % n] = (s, {})
    return out


def schema_corpus(seed=20):
    out = dict(HANDWRITTEN)
    out.update(generated(seed))
    return out


# ---- valid instances ----------------------------------------------------------------------

WORDS = ["alpha", "beta", "río", "naïve", "x", "hello world", "日本", "quote\"d", "a\\b", "Ω", "tab\tin", "42"]


def resolve(root, ref):
    if ref == "#":
        return root
    node = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


class Gen:
    def __init__(self, root, samples, rng):
        self.root, self.samples, self.rng = root, samples, rng

    def string(self, s, ptr):
        r = self.rng
        f = s.get("format")
        if f == "date":
            return "%04d-%02d-%02d" % (r.randint(1900, 2099), r.randint(1, 12), r.randint(1, 28))
        if f == "time":
            tz = r.choice(["Z", "+02:00", "-05:30", "z"])
            frac = r.choice(["", ".5", ".123"])
            return "%02d:%02d:%02d%s%s" % (r.randint(0, 23), r.randint(0, 59), r.randint(0, 59), frac, tz)
        if f == "date-time":
            return self.string({"format": "date"}, ptr) + r.choice("T") + self.string({"format": "time"}, ptr)
        if f == "uuid":
            h = "%032x" % r.getrandbits(128)
            return "-".join([h[:8], h[8:12], h[12:16], h[16:20], h[20:]])
        if f == "email":
            return r.choice(["ann", "bob.smith", "x_y+z"]) + "@" + r.choice(["example.com", "mail.co.uk", "host"])
        if "pattern" in s:
            return r.choice(self.samples[ptr])
        lo, hi = s.get("minLength", 0), s.get("maxLength", lo_hi_default(s))
        while True:
            w = r.choice(WORDS)
            text = w
            while len(text) < lo:
                text += " " + r.choice(WORDS)
            if len(text) > hi:
                text = text[:hi]
            if lo <= len(text) <= hi:
                return text

    def value(self, s, ptr, depth=0):
        r = self.rng
        if s is True or s == {}:
            return r.choice([1, "v", None])
        if "$ref" in s:
            target = s["$ref"]
            return self.value(resolve(self.root, target), target[1:], depth + 1)
        if "const" in s:
            return s["const"]
        if "enum" in s:
            return r.choice(s["enum"])
        for key in ("anyOf", "oneOf"):
            if key in s:
                i = r.randrange(len(s[key]))
                if depth > 2:  # prefer a branch without $ref
                    flat = [k for k, b in enumerate(s[key]) if "$ref" not in json.dumps(b)]
                    i = flat[0] if flat else i
                return self.value(s[key][i], "%s/%s/%d" % (ptr, key, i), depth)
        if "allOf" in s:
            merged = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
            for b in s["allOf"]:
                merged["properties"].update(b.get("properties", {}))
                merged["required"] += b.get("required", [])
            return self.value(merged, ptr, depth)
        t = s.get("type")
        if isinstance(t, list):
            t = r.choice(t)
        if t is None:
            t = "object" if "properties" in s else "array" if "items" in s or "prefixItems" in s else "string"
        if t == "string":
            return self.string(s, ptr)
        if t == "integer":
            lo = s.get("minimum", s.get("exclusiveMinimum", -1000 - 1) + 1)
            hi = s.get("maximum", s.get("exclusiveMaximum", lo + 100001) - 1)
            return r.choice([lo, hi, r.randint(lo, hi)])
        if t == "number":
            return r.choice([0, -1, 3.25, 12.5, -0.75, 100, 2.0e-3, 6.02e23, r.randint(-99, 99) / 4])
        if t == "boolean":
            return r.random() < 0.5
        if t == "null":
            return None
        if t == "array":
            prefix = s.get("prefixItems", [])
            items = s.get("items", True)
            lo = s.get("minItems", 0)
            hi = s.get("maxItems", len(prefix) if items is False else len(prefix) + 3)
            if depth > 2:
                hi = min(hi, max(lo, len(prefix) if items is False else 0))
            n = r.randint(lo, hi)
            out = []
            for i in range(n):
                if i < len(prefix):
                    out.append(self.value(prefix[i], "%s/prefixItems/%d" % (ptr, i), depth + 1))
                else:
                    out.append(self.value(items, ptr + "/items", depth + 1))
            return out
        if t == "object":
            out = {}
            req = set(s.get("required", []))
            for k, sub in s.get("properties", {}).items():
                if k in req or (depth <= 2 and r.random() < 0.6):
                    out[k] = self.value(sub, ptr + "/properties/" + k, depth + 1)
            add = s.get("additionalProperties", False)
            if add is not False and r.random() < 0.7:
                for extra in r.sample(["zz", "extra_key", "ключ2", "n"], r.randint(1, 2)):
                    if extra not in s.get("properties", {}):
                        out[extra] = self.value(add, ptr + "/additionalProperties", depth + 1)
            return out
        raise ValueError("no generator for %r" % (s,))


def lo_hi_default(s):
    return 24


def instances(schema, samples, rng, count):
    g = Gen(schema, samples, rng)
    return [dumps(g.value(schema, "")) for _ in range(count)]
