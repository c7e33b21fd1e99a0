#!/usr/bin/env python3
r"""Constrained output under load (issue 20): `cera serve` on a model, N random JSON Schemas from a
seed, one request per schema at temperature 1 (seeded), and every output that ended with "stop"
parsed (json.loads) and validated with the jsonschema package (Draft 2020-12, formats checked).

The schemas are this file's own generator (random_schema): objects with required and optional
properties (additionalProperties always false: cera reads an absent one as false, JSON Schema as
true), nested objects, arrays with minItems/maxItems, enums (Unicode included), const, integer
ranges, strings with lengths, patterns of cera's regex subset or a format, anyOf, $ref/$defs
(recursive too), booleans, nulls, numbers. Strings are mostly bounded so that few outputs reach
max_tokens; an output that ends with "length" cannot be complete JSON and is only counted.
Failures (an invalid output, an HTTP error) are written to --failures, one JSON file each.

  $(bash scripts/test-venv.sh) tools/grammar/constrained_run.py --cera build/apps/cli/cera \
      --model ~/.cache/cera/models/SmolLM2-135M-Instruct.Q4_1.gguf -n 500

The python needs jsonschema and rfc3339-validator (the test venv has both). Models without a chat
template (Gemma 3's GGUF) are sent to /v1/completions with a prompt: --route auto decides by one
chat request.
"""

import argparse
import concurrent.futures
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

LISTENING = re.compile(r"cera serve: listening on http://127\.0\.0\.1:(\d+)")


def dumps(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


# --- random schemas -------------------------------------------------------------------------------

KEYS = ["id", "name", "age", "tags", "score", "city", "active", "kind", "note", "items", "when", "owner",
        "count", "label", "value", "email", "level", "color", "size", "meta", "名前", "città", "größe",
        "ключ", "emoji_🎉", 'say "hi"', "back\\slash", "x y"]
WORDS = ["red", "green", "blue", "café", "naïve", "日本", "東京", "Ωmega", "ñandú", "🎉party", "привет",
         "a\"quote", "tab\tin", "line\nbreak", "", "x", "Zürich", "😀", "العربية", "e\u0301"]
PATTERNS = [
    r"^[A-Z]{3}-[0-9]{2,4}$",
    r"^\d{3}-\d{4}$",
    r"^(red|green|blue)(-(light|dark))?$",
    r"^[a-z]{1,6}(_[a-z]{1,6}){0,2}$",
    r"^#[0-9a-fA-F]{6}$",
    r"^[^@\s]{1,8}@example\.(com|org)$",
    r"^\w{2,8}$",
    r"^v\d{1,2}\.\d{1,2}\.\d{1,3}$",
    r"^(?:ab|cd){1,3}$",
    r"^[αβγδ]{2,4}$",
    r"^é.{0,5}$",
    r"^[^a-z]{1,4}$",
    r"^\S{1,6}$",
    r"^\D{2}\W?$",
    r"^(\+|-)?[0-9]{1,4}(\.[0-9]{1,2})?$",
    r"^[A-Za-z]{1,8}:[0-9]{1,3}\/x$",
    r"^a[\-\.]b$",
    r"^(yes|no|maybe)$",
    r"^x\\y\t?$",
]
# Without ^ or $ a pattern allows any text around its match: such strings tend to run on to
# max_tokens, so they are drawn less often.
UNANCHORED = [r"[0-9]{2}", r"ok$", r"^(ab)+"]
FORMATS = ["date", "time", "date-time", "uuid", "email"]


class SchemaGen:
    """One schema per call of make(); all randomness from the Random given."""

    def __init__(self, rng, recursive_share=0.2):
        self.rng = rng
        self.recursive_share = recursive_share
        self.defs = {}

    def make(self):
        r = self.rng
        self.defs = {}
        defs = {}
        if r.random() < 0.3:
            for j in range(r.randint(1, 2)):
                name = f"d{j}"
                if r.random() < self.recursive_share:
                    defs[name] = self.recursive(name)
                else:
                    defs[name] = self.value(2)
                self.defs[name] = True
        if r.random() < 0.85:
            root = self.object(0, min_props=1)
        else:
            root = self.value(0)
        if defs:
            root = dict(root)
            root["$defs"] = defs
            if not self._uses_ref(root):  # make sure a definition is used
                if root.get("type") == "object":
                    root["properties"]["ref_" + next(iter(defs))] = {"$ref": "#/$defs/" + next(iter(defs))}
                else:
                    root = {"anyOf": [{k: v for k, v in root.items() if k != "$defs"},
                                      {"$ref": "#/$defs/" + next(iter(defs))}], "$defs": defs}
        return root

    def _uses_ref(self, s):
        return '"$ref"' in json.dumps({k: v for k, v in s.items() if k != "$defs"})

    def recursive(self, name):
        r = self.rng
        return {"type": "object",
                "properties": {"v": {"type": "integer", "minimum": r.randint(-5, 0), "maximum": r.randint(1, 50)},
                               "next": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/" + name}]} if r.random() < 0.5 else
                               {"type": "array", "items": {"$ref": "#/$defs/" + name}, "maxItems": r.randint(1, 2)}},
                "required": ["v"], "additionalProperties": False}

    def keys(self, n):
        return self.rng.sample(KEYS, n)

    def object(self, depth, min_props=0):
        r = self.rng
        n = r.randint(min_props, 4 if depth == 0 else 3)
        props = {k: self.value(depth + 1) for k in self.keys(n)}
        req = [k for k in props if r.random() < 0.6]
        s = {"type": "object", "properties": props, "required": req, "additionalProperties": False}
        if not req and r.random() < 0.5:
            del s["required"]
        if r.random() < 0.15:  # absent: false for cera, true for jsonschema (which is then only looser)
            del s["additionalProperties"]
        return s

    def value(self, depth):
        r = self.rng
        kinds = ["string", "bounded", "pattern", "format", "enum", "const", "integer", "number", "boolean",
                 "null", "nullable"]
        if depth < 3:
            kinds += ["object", "array", "anyOf", "object", "array"]
        if self.defs:
            kinds += ["ref", "ref"]
        k = r.choice(kinds)
        if k == "string":
            return {"type": "string", "maxLength": r.randint(0, 16)} if r.random() < 0.9 else {"type": "string"}
        if k == "bounded":
            lo = r.randint(0, 6)
            return {"type": "string", "minLength": lo, "maxLength": lo + r.randint(0, 10)}
        if k == "pattern":
            return {"type": "string", "pattern": r.choice(UNANCHORED if r.random() < 0.1 else PATTERNS)}
        if k == "format":
            return {"type": "string", "format": r.choice(FORMATS)}
        if k == "enum":
            pool = WORDS + [0, 1, -7, 2.5, True, False, None, {"k": "v"}, [1, "x"]]
            return {"enum": r.sample(pool, r.randint(1, 6))}
        if k == "const":
            return {"const": r.choice(WORDS + [42, -1, 3.25, True, None, {"a": [1, 2]}, ["ü", 0]])}
        if k == "integer":
            s = {"type": "integer"}
            shape = r.randint(0, 4)
            if shape == 0:
                return s
            lo = r.randint(-1000, 1000)
            if shape in (1, 3):
                s["minimum"] = lo
            if shape in (2, 3):
                s["maximum"] = lo + r.randint(0, 5000)
            if shape == 4:
                s["exclusiveMinimum"] = lo
                s["exclusiveMaximum"] = lo + r.randint(2, 300)
            return s
        if k == "number":  # unbounded digits: small models run on in them, so half are integers in a range
            return {"type": "number"} if r.random() < 0.5 else {"type": "integer", "minimum": -99, "maximum": 99}
        if k == "boolean":
            return {"type": "boolean"}
        if k == "null":
            return {"type": "null"}
        if k == "nullable":
            return {"type": r.choice([["string", "null"], ["integer", "null"], ["boolean", "integer"], ["number", "null"]])}
        if k == "object":
            return self.object(depth)
        if k == "array":
            lo = r.randint(0, 2)
            s = {"type": "array", "items": self.value(depth + 1)}
            if r.random() < 0.85:
                s["minItems"] = lo
                s["maxItems"] = lo + r.randint(0, 3)
            elif r.random() < 0.5:
                s["minItems"] = lo
            return s
        if k == "anyOf":
            return {"anyOf": [self.value(depth + 1) for _ in range(r.randint(2, 3))]}
        return {"$ref": "#/$defs/" + r.choice(sorted(self.defs))}


def random_schemas(seed, n, recursive_share=0.2):
    gen = SchemaGen(random.Random(seed), recursive_share)
    return [gen.make() for _ in range(n)]


def validator_for(schema):
    import jsonschema
    cls = jsonschema.Draft202012Validator
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def judge(schema, text):
    """("valid", None) or ("unparsed" | "invalid", why) for a finished output."""
    try:
        value = json.loads(text)
    except ValueError as e:
        return "unparsed", str(e)
    errors = sorted(validator_for(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        return "invalid", "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:5])
    return "valid", None


# --- requests -------------------------------------------------------------------------------------

def request_body(route, model_id, schema, index, seed, max_tokens):
    rf = {"type": "json_schema", "json_schema": {"name": f"schema_{index}", "schema": schema, "strict": True}}
    task = "Reply with one JSON value that matches this JSON Schema, nothing else.\nSchema: " + dumps(schema)
    body = {"model": model_id, "temperature": 1.0, "seed": seed, "max_tokens": max_tokens, "response_format": rf}
    if route == "chat":
        body["messages"] = [{"role": "user", "content": task}]
    else:
        body["prompt"] = task + "\nJSON: "
    return body


def post(base_url, path, body, timeout):
    req = urllib.request.Request(base_url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        data = e.read()
        try:
            return e.code, json.loads(data)
        except ValueError:
            return e.code, {"raw": data.decode("utf-8", "replace")}


def output_text(route, obj):
    c = obj["choices"][0]
    return (c["message"]["content"] if route == "chat" else c["text"]) or "", c["finish_reason"]


class Server:
    """`cera serve` on a free loopback port; stderr kept in memory for a failure report."""

    def __init__(self, cera, model, parallel, threads, ctx):
        args = [cera, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0", "--parallel", str(parallel),
                "--max-queue", "1024"]
        if threads:
            args += ["-t", str(threads)]
        if ctx:
            args += ["-c", str(ctx)]
        self.args = args
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.lines = []
        self.port = None
        got = threading.Event()

        def read():
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.lines.append(line)
                m = LISTENING.search(line)
                if m:
                    self.port = int(m.group(1))
                    got.set()
            got.set()

        threading.Thread(target=read, daemon=True).start()
        if not got.wait(300) or self.port is None:
            self.stop()
            sys.exit("cera serve did not start: " + " ".join(args) + "\n" + "\n".join(self.lines[-30:]))
        self.base_url = f"http://127.0.0.1:{self.port}"
        for _ in range(600):
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.1)

    def model_id(self):
        with urllib.request.urlopen(self.base_url + "/v1/models", timeout=30) as r:
            return json.loads(r.read())["data"][0]["id"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def pick_route(server, model_id, route):
    if route != "auto":
        return route
    status, _ = post(server.base_url, "/v1/chat/completions",
                     {"model": model_id, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}, 120)
    return "chat" if status == 200 else "completions"


def run_model(args, model, failures_dir):
    server = Server(args.cera, model, args.parallel, args.threads, args.ctx)
    try:
        model_id = server.model_id()
        route = pick_route(server, model_id, args.route)
        schemas = random_schemas(args.seed, args.n, args.recursive_share)
        for s in schemas:  # the generator's own check: every schema is a valid Draft 2020-12 schema
            validator_for(s)
        counts = {"requests": 0, "stop": 0, "length": 0, "parsed": 0, "valid": 0, "invalid": 0, "unparsed": 0,
                  "http_error": 0, "tokens": 0}
        lock = threading.Lock()
        truncated = []  # outputs cut by max_tokens: kept (in one file) to see which schemas run long
        path = "/v1/chat/completions" if route == "chat" else "/v1/completions"

        def one(i):
            if args.budget_s and time.monotonic() - t0 > args.budget_s:
                return  # not sent: the run's time budget is spent (the table counts what was sent)
            body = request_body(route, model_id, schemas[i], i, args.seed * 100003 + i, args.max_tokens)
            status, obj = post(server.base_url, path, body, args.request_timeout)
            record = None
            with lock:
                counts["requests"] += 1
                if status != 200:
                    counts["http_error"] += 1
                    record = {"kind": "http_error", "status": status, "response": obj}
                else:
                    text, finish = output_text(route, obj)
                    counts["tokens"] += obj.get("usage", {}).get("completion_tokens", 0)
                    if finish == "length":
                        counts["length"] += 1
                        truncated.append({"index": i, "schema": schemas[i], "output": text})
                    elif finish == "stop":
                        counts["stop"] += 1
                        verdict, why = judge(schemas[i], text)
                        if verdict != "unparsed":
                            counts["parsed"] += 1
                        counts[verdict] += 1
                        if verdict != "valid":
                            record = {"kind": verdict, "why": why, "output": text, "finish_reason": finish,
                                      "response": obj}
                    else:
                        counts["http_error"] += 1
                        record = {"kind": "finish_reason", "output": text, "finish_reason": finish, "response": obj}
            if record is not None:
                record.update({"model": os.path.basename(model), "index": i, "route": path, "schema": schemas[i],
                               "request": body})
                os.makedirs(failures_dir, exist_ok=True)
                name = f"{os.path.basename(model).split('.')[0]}-seed{args.seed}-{i}.json"
                with open(os.path.join(failures_dir, name), "w") as f:
                    json.dump(record, f, ensure_ascii=False, indent=1)
                print(f"  {record['kind']}: request {i} -> {failures_dir}/{name}: {record.get('why', '')}",
                      file=sys.stderr)
            done = counts["requests"]
            if args.progress and done % args.progress == 0:
                print(f"  {os.path.basename(model)}: {done}/{args.n} in {time.monotonic() - t0:.0f} s", file=sys.stderr)

        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
            for f in [pool.submit(one, i) for i in range(args.n)]:
                f.result()
        counts["wall_s"] = time.monotonic() - t0
        try:  # the server's own count of how requests ended (cancelled / failed ones are bugs here)
            with urllib.request.urlopen(server.base_url + "/metrics", timeout=30) as r:
                server.lines += ["/metrics: " + l for l in r.read().decode().splitlines()
                                 if l.startswith(("cera:requests_", "cera:request_success"))]
        except OSError as e:
            server.lines.append(f"/metrics: {e}")
        if truncated:
            os.makedirs(failures_dir, exist_ok=True)
            name = f"{os.path.basename(model).split('.')[0]}-seed{args.seed}-length.jsonl"
            with open(os.path.join(failures_dir, name), "w") as f:
                for t in sorted(truncated, key=lambda t: t["index"]):
                    f.write(json.dumps(t, ensure_ascii=False) + "\n")
        counts["route"] = route
    finally:
        rc = server.stop()
    if rc != 0:
        print(f"cera serve exited with {rc}:\n" + "\n".join(server.lines[-30:]), file=sys.stderr)
        counts["server_rc"] = rc
    if rc != 0 or counts["invalid"] + counts["unparsed"] + counts["http_error"]:
        os.makedirs(failures_dir, exist_ok=True)
        name = f"{os.path.basename(model).split('.')[0]}-seed{args.seed}-server-stderr.txt"
        with open(os.path.join(failures_dir, name), "w") as f:
            f.write(" ".join(server.args) + "\n" + "\n".join(server.lines) + "\n")
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cera", default="build/apps/cli/cera")
    ap.add_argument("--model", action="append", required=True, help="a GGUF file (repeatable)")
    ap.add_argument("-n", type=int, default=500, help="requests (= schemas) per model")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=48, help="requests in flight at once")
    ap.add_argument("--parallel", type=int, default=64, help="cera serve --parallel")
    ap.add_argument("--threads", type=int, default=0, help="cera serve -t (0: its default)")
    ap.add_argument("--ctx", type=int, default=1024, help="cera serve -c")
    ap.add_argument("--max-tokens", type=int, default=320)
    ap.add_argument("--route", choices=["auto", "chat", "completions"], default="auto")
    ap.add_argument("--request-timeout", type=float, default=1800)
    ap.add_argument("--failures", default="/tmp/constrained_failures")
    ap.add_argument("--progress", type=int, default=50, help="print progress every this many requests (0: never)")
    ap.add_argument("--recursive-share", type=float, default=0.2,
                    help="chance that a $defs entry is recursive (recursion makes long outputs)")
    ap.add_argument("--budget-s", type=float, default=0,
                    help="send no new request after this many seconds (0: no limit); the table says how many were sent")
    ap.add_argument("--print-schemas", type=int, default=0, help="print this many schemas and exit")
    args = ap.parse_args()
    if args.print_schemas:
        for s in random_schemas(args.seed, args.print_schemas, args.recursive_share):
            print(dumps(s))
        return 0
    rows = []
    for model in args.model:
        c = run_model(args, model, args.failures)
        rows.append((os.path.basename(model), c))
    head = ["model", "route", "requests", "stop", "length", "parsed", "valid", "invalid", "unparsed", "http errors",
            "wall s", "tokens/s"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    bad = 0
    for name, c in rows:
        bad += c["invalid"] + c["unparsed"] + c["http_error"] + (1 if c.get("server_rc") else 0)
        print(f"| {name} | {c['route']} | {c['requests']} | {c['stop']} | {c['length']} | {c['parsed']} | {c['valid']} | "
              f"{c['invalid']} | {c['unparsed']} | {c['http_error']} | {c['wall_s']:.0f} | {c['tokens'] / c['wall_s']:.1f} |")
    print(f"seed {args.seed}, temperature 1, max_tokens {args.max_tokens}, concurrency {args.concurrency}, "
          f"--parallel {args.parallel}, -c {args.ctx}" + (f", budget {args.budget_s:.0f} s" if args.budget_s else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
