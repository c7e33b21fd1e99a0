#!/usr/bin/env python3
r"""Reference token masks for cera's JSON-Schema grammars, from llguidance given the same schemas.

For each of the 100 schemas of schema_corpus.py, a few seeded valid instances (compact, raw
UTF-8; checked with the jsonschema package) are walked token by token on SmolLM2's vocabulary:
at each step llguidance's allowed set is recorded, then the next token is an allowed token whose
bytes are a prefix of the rest of the instance (the longest one, or with probability 0.3 a
shorter one, so that prefixes end inside tokens too); after the instance, the end token.
llguidance compiles the JSON Schema itself, with compact separators and no whitespace
(x-guidance options whitespace_flexible false, separators "," and ":"), coerce_one_of (cera
treats oneOf as anyOf) and json_allow_general_unicode_escapes (cera allows any \uXXXX; llguidance
cannot be told to allow \/, which cera and JSON do). Writes
  tests/fixtures/grammar/schema_corpus.jsonl          {"name", "schema"} per line
  tests/fixtures/grammar/llguidance_schema_masks.txt  walks and masks (format of llguidance_masks.txt)

  python3 tools/grammar/schema_masks.py [--model PATH]

Deterministic (seeded). Uses reference_masks.py's venv and vocabulary loader.
"""

import argparse
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_masks as rm  # noqa: E402

LLG_OPTIONS = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":", "coerce_one_of": True,
               "json_allow_general_unicode_escapes": True}


def llg_grammar(schema):
    import llguidance
    return llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=LLG_OPTIONS)


def prefix_tokens(by_bytes, max_len, rest):
    """Token ids whose bytes are a prefix of `rest`, longest first."""
    out = []
    for n in range(min(max_len, len(rest)), 0, -1):
        t = by_bytes.get(rest[:n])
        if t is not None:
            out.append(t)
    return out


def walk_instance(m, text, by_bytes, max_len, eog, n_vocab, rng, on_mask):
    """Walks `text` (bytes) through llguidance matcher m; on_mask(ids) before each token.
    Returns the token ids or raises ValueError naming where llguidance refused."""
    chosen, pos = [], 0
    while True:
        ids = on_mask()
        allowed = set(ids)
        if pos == len(text):
            t = next((e for e in eog if e in allowed), None)
            if t is None:
                raise ValueError("no end token allowed after the whole instance")
        else:
            cands = [t for t in prefix_tokens(by_bytes, max_len, text[pos:]) if t in allowed]
            if not cands:
                raise ValueError("no allowed token continues the instance at byte %d: %r" % (pos, text[:pos]))
            t = cands[0] if len(cands) == 1 or rng.random() >= 0.3 else rng.choice(cands[1:])
        if not m.consume_token(t):
            raise ValueError("llguidance refused its own allowed token %d: %s" % (t, m.get_error()))
        chosen.append(t)
        if pos == len(text):
            return chosen
        pos += len(rm_piece(t))


_pieces = []


def rm_piece(t):
    return _pieces[t]


def main():
    rm.ensure_venv()
    import jsonschema
    import llguidance
    from schema_corpus import schema_corpus, instances

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="SmolLM2 GGUF (default: scripts/pull-model.sh smollm2)")
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20)
    args = ap.parse_args()
    model = args.model or subprocess.check_output(
        ["bash", os.path.join(rm.REPO, "scripts", "pull-model.sh"), "smollm2"], text=True).strip()
    pieces, special, eog = rm.load_vocab(model)
    _pieces.extend(pieces)
    n_vocab = len(pieces)
    tokw = rm.Tok(pieces, special, eog)
    tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(tokw), eos_token=eog)

    corpus = schema_corpus(args.seed)
    out_dir = os.path.join(rm.REPO, "tests", "fixtures", "grammar")
    with open(os.path.join(out_dir, "schema_corpus.jsonl"), "w") as fh:
        for name, (schema, _) in corpus.items():
            fh.write(json.dumps({"name": name, "schema": schema}, ensure_ascii=False) + "\n")

    rng = random.Random(args.seed)
    masks, mask_index, lines, failed = [], {}, [], []
    for name, (schema, samples) in corpus.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        grammar = llg_grammar(schema)
        for text in instances(schema, samples, rng, args.instances):
            errors = list(validator.iter_errors(json.loads(text)))
            if errors:
                sys.exit("%s: generated instance %s is invalid: %s" % (name, text, errors[0].message))
            m = llguidance.LLMatcher(tok, grammar, log_level=0)
            if m.is_error():
                failed.append("%s: %s" % (name, m.get_error()))
                break
            refs = []

            def on_mask():
                ids = rm.allowed_ids(m.compute_bitmask(), n_vocab)
                key = tuple(ids)
                if key not in mask_index:
                    mask_index[key] = len(masks)
                    masks.append(rm.encode_set(ids, n_vocab))
                refs.append(mask_index[key])
                return ids
            try:
                chosen = walk_instance(m, text.encode("utf-8"), tokw.by_bytes, tokw.max_len, eog, n_vocab, rng, on_mask)
            except ValueError as e:
                failed.append("%s %s: %s" % (name, text, e))
                continue
            lines.append("walk %s %s %s" % (name, ",".join(map(str, chosen)), ",".join(map(str, refs))))

    path = os.path.join(out_dir, "llguidance_schema_masks.txt")
    with open(path, "w") as fh:
        fh.write("# tools/grammar/schema_masks.py: llguidance %s JSON Schema %s on SmolLM2 (seed %d, %d instances)\n"
                 % (getattr(llguidance, "__version__", "1.9.1"), json.dumps(LLG_OPTIONS), args.seed, args.instances))
        fh.write("# walk NAME TOKENS MASKS: the mask before each token (the last token is the end token)\n")
        fh.write("vocab %d\n" % n_vocab)
        fh.write("eog %s\n" % " ".join(map(str, eog)))
        for i, s in enumerate(masks):
            fh.write("mask %d %s\n" % (i, s))
        for line in lines:
            fh.write(line + "\n")
    print("llguidance schema masks: %d walks over %d schemas, %d distinct masks, fixture %.1f KB"
          % (len(lines), len(corpus), len(masks), os.path.getsize(path) / 1024))
    for f in failed:
        print("not in the fixture:", f)


if __name__ == "__main__":
    main()
