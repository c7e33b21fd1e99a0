#!/usr/bin/env python3
"""Mask-cost benchmark: cera (build/bench_grammar_masks), llguidance and, where it imports,
XGrammar on the same 200 grammars (100 GBNF of corpus.gbnf, 100 JSON Schemas of
schema_corpus.jsonl), the same vocabularies (SmolLM2 49k, Gemma 3 262k) and the same token walks;
single thread; prints one markdown table (docs/benchmarks/grammar_masks.md).

Walks: on SmolLM2 those of the committed fixtures (llguidance_masks.txt: seeded random walks of
the GBNF grammars; llguidance_schema_masks.txt: valid instances of the schemas token by token).
On Gemma the same generators run on Gemma's vocabulary (llguidance chooses among its allowed
tokens, seeded). Per token = accept the previous token + compute the next mask.

  python3 tools/grammar/bench_masks.py [--bench build/bench_grammar_masks] [--vocab smollm2,gemma3]
With XGrammar: run it with a python that has xgrammar (README: /tmp/xgr-venv).
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_masks as rm  # noqa: E402

FIX = os.path.join(rm.REPO, "tests", "fixtures", "grammar")


def load_corpus():
    out, name = {}, None
    with open(os.path.join(FIX, "corpus.gbnf")) as fh:
        for line in fh:
            if line.startswith("### "):
                name = line[4:].rstrip("\n")
                out[name] = ""
            elif name is not None:
                out[name] += line
    return out


def load_schemas():
    with open(os.path.join(FIX, "schema_corpus.jsonl")) as fh:
        return {j["name"]: j["schema"] for j in map(json.loads, fh) if j}


def fixture_walks(path):
    walks = []
    with open(path) as fh:
        for line in fh:
            if line.startswith("walk "):
                _, name, toks, _ = line.split()
                walks.append((name, [] if toks == "-" else [int(t) for t in toks.split(",")]))
    return walks


def llg_grammar(kind, text):
    import llguidance
    import schema_masks
    if kind == "schema":
        return schema_masks.llg_grammar(json.loads(text))
    return llguidance.grammar_from("gbnf", text)


def generated_walks(tok, pieces, eog, grammars, seed):
    """Gemma: the fixtures' walk generators on this vocabulary (random walks for GBNF, valid
    instances for schemas), driven by llguidance's masks."""
    import llguidance
    import schema_masks
    from schema_corpus import schema_corpus, instances
    n_vocab = len(pieces)
    rng = random.Random(seed)
    tokw = rm.Tok(pieces, [], eog)
    walks = []
    corpus = schema_corpus(20)
    for name, (kind, text) in grammars.items():
        try:
            g = llg_grammar(kind, text)
        except ValueError:
            continue
        if kind == "schema":
            for inst in instances(corpus[name][0], corpus[name][1], rng, 2):
                m = llguidance.LLMatcher(tok, g, log_level=0)
                schema_masks._pieces[:] = pieces
                try:
                    ids = schema_masks.walk_instance(m, inst.encode("utf-8"), tokw.by_bytes, tokw.max_len, eog, n_vocab,
                                                     rng, lambda: rm.allowed_ids(m.compute_bitmask(), n_vocab))
                except ValueError:
                    continue
                walks.append((name, ids))
            continue
        for _ in range(3):
            m = llguidance.LLMatcher(tok, g, log_level=0)
            if m.is_error():
                break
            chosen = []
            for _step in range(24):
                ids = rm.allowed_ids(m.compute_bitmask(), n_vocab)
                text_ids = [i for i in ids if i not in eog]
                if not ids:
                    break
                if len(text_ids) < len(ids) and (not text_ids or rng.random() < 0.3):
                    t = [i for i in ids if i in eog][0]
                else:
                    pool = [i for i in text_ids if rm.structural(pieces[i])] if rng.random() < 0.6 else []
                    t = rng.choice(pool or text_ids)
                chosen.append(t)
                m.consume_token(t)
                if t in eog:
                    break
            walks.append((name, chosen))
    return walks


def pct(v):
    v = sorted(v)
    return {"n": len(v), "p50": v[len(v) // 2], "p99": v[min(len(v) - 1, len(v) * 99 // 100)], "max": v[-1]}


def time_llguidance(tok, grammars, walks, n_vocab, repeats):
    import llguidance
    import numpy as np
    buf = np.zeros((n_vocab + 31) // 32, dtype=np.uint32)
    prepare, per_token = [], []
    compiled = {}
    for name in sorted({w[0] for w in walks}):
        t0 = time.perf_counter()
        g = llg_grammar(*grammars[name])
        m = llguidance.LLMatcher(tok, g, log_level=0)
        m.unsafe_compute_mask_ptr(buf.ctypes.data, buf.nbytes)  # llguidance builds lazily: count the first mask
        prepare.append((time.perf_counter() - t0) * 1e3)
        compiled[name] = g
    for _ in range(repeats):
        for name, toks in walks:
            m = llguidance.LLMatcher(tok, compiled[name], log_level=0)
            for i in range(len(toks) + 1):
                t0 = time.perf_counter()
                if i > 0 and not m.consume_token(toks[i - 1]):
                    raise SystemExit("llguidance refused a walk token in %s" % name)
                if m.is_stopped():
                    break
                m.unsafe_compute_mask_ptr(buf.ctypes.data, buf.nbytes)
                per_token.append((time.perf_counter() - t0) * 1e6)
    return pct(per_token), pct(prepare), 0


def time_xgrammar(pieces, eog, grammars, walks, n_vocab, repeats):
    import numpy as np
    import torch
    import xgrammar as xgr
    torch.set_num_threads(1)
    info = xgr.TokenizerInfo(pieces, xgr.VocabType.RAW, vocab_size=n_vocab, stop_token_ids=eog)
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    buf = np.zeros((1, (n_vocab + 31) // 32), dtype=np.int32)
    prepare, per_token, compiled, refused = [], [], {}, []
    for name in sorted({w[0] for w in walks}):
        kind, text = grammars[name]
        t0 = time.perf_counter()
        try:
            if kind == "schema":
                c = compiler.compile_json_schema(text, any_whitespace=False, separators=(",", ":"))
            else:
                c = compiler.compile_grammar(text)
        except Exception as e:  # noqa: BLE001 (XGrammar raises several kinds)
            refused.append("%s: %s" % (name, str(e).splitlines()[0][:80]))
            continue
        prepare.append((time.perf_counter() - t0) * 1e3)
        compiled[name] = c
    walk_refusals = 0
    for rep in range(repeats):
        for name, toks in walks:
            if name not in compiled:
                continue
            m = xgr.GrammarMatcher(compiled[name])
            for i in range(len(toks) + 1):
                t0 = time.perf_counter()
                if i > 0 and not m.accept_token(toks[i - 1]):
                    walk_refusals += rep == 0
                    break
                if m.is_terminated():
                    break
                m.fill_next_token_bitmask(buf)
                per_token.append((time.perf_counter() - t0) * 1e6)
    return pct(per_token), pct(prepare), (refused, walk_refusals)


def run_cera(bench, model, grammars, walks, repeats):
    with tempfile.NamedTemporaryFile("wb", suffix=".walks", delete=False) as fh:
        for name in sorted({w[0] for w in walks}):
            kind, text = grammars[name]
            data = text.encode("utf-8")
            fh.write(b"grammar %s %s %d\n" % (name.encode(), kind.encode(), len(data)) + data + b"\n")
        for name, toks in walks:
            fh.write(("walk %s %s\n" % (name, ",".join(map(str, toks)) or "-")).encode())
        path = fh.name
    out = subprocess.run([bench, model, path, str(repeats)], capture_output=True, text=True)
    os.unlink(path)
    if out.returncode != 0:
        raise SystemExit("bench_grammar_masks failed: " + out.stderr)
    return json.loads([line for line in out.stdout.splitlines() if line.startswith("RESULT ")][0][7:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default=os.path.join(rm.REPO, "build", "bench_grammar_masks"))
    ap.add_argument("--vocab", default="smollm2,gemma3")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-xgrammar", action="store_true")
    args = ap.parse_args()
    try:
        import llguidance  # noqa: F401
    except ImportError:
        rm.ensure_venv()
    import llguidance
    have_xgr = False
    if not args.no_xgrammar:
        try:
            import xgrammar  # noqa: F401
            have_xgr = True
        except ImportError as e:
            print("XGrammar not measured: %s" % e, file=sys.stderr)

    grammars = {n: ("gbnf", t) for n, t in load_corpus().items()}
    grammars.update({n: ("schema", json.dumps(s, ensure_ascii=False)) for n, s in load_schemas().items()})
    rows, notes = [], []
    for vocab_name in args.vocab.split(","):
        model = subprocess.check_output(["bash", os.path.join(rm.REPO, "scripts", "pull-model.sh"), vocab_name],
                                        text=True).strip()
        pieces, special, eog = rm.load_vocab(model)
        n_vocab = len(pieces)
        tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(rm.Tok(pieces, special, eog)), eos_token=eog)
        if vocab_name == "smollm2":
            walks = fixture_walks(os.path.join(FIX, "llguidance_masks.txt")) + \
                fixture_walks(os.path.join(FIX, "llguidance_schema_masks.txt"))
        else:
            walks = generated_walks(tok, pieces, eog, grammars, 20)
        n_gbnf = len({w[0] for w in walks if grammars[w[0]][0] == "gbnf"})
        n_schema = len({w[0] for w in walks if grammars[w[0]][0] == "schema"})
        label = "%s (%d tokens)" % (vocab_name, n_vocab)
        notes.append("%s: %d GBNF grammars + %d schemas, %d walks, %d tokens" %
                     (label, n_gbnf, n_schema, len(walks), sum(len(w[1]) for w in walks)))
        c = run_cera(args.bench, model, grammars, walks, args.repeats)
        rows.append(("cera", label, c["warm_us"], c["prepare_ms"]))
        rows.append(("cera, tables built lazily", label, c["lazy_us"], None))
        notes.append("cera slowest steps on %s: %s; slowest to prepare: %s" % (
            vocab_name, ", ".join("%s %.0f us" % (n, t) for n, t in c["slowest_steps"][:3]),
            ", ".join("%s %.0f ms" % (n, t) for n, t in c["slowest_prepare"][:3])))
        tok_s, prep, _ = time_llguidance(tok, grammars, walks, n_vocab, args.repeats)
        rows.append(("llguidance %s" % getattr(llguidance, "__version__", ""), label, tok_s, prep))
        if have_xgr:
            import xgrammar
            xpieces = [p if i not in set(special) else b"" for i, p in enumerate(pieces)]
            tok_s, prep, (refused, walk_refusals) = time_xgrammar(xpieces, eog, grammars, walks, n_vocab, args.repeats)
            rows.append(("XGrammar %s" % getattr(xgrammar, "__version__", "0.2.9"), label, tok_s, prep))
            notes.append("XGrammar on %s: %d grammars refused (%s), %d walks stopped at a refused token" % (
                vocab_name, len(refused), "; ".join(refused[:4]), walk_refusals))

    print("| engine | vocabulary | tokens timed | accept + mask p50 (us) | p99 (us) | max (us) "
          "| grammars | prepare p50 (ms) | p99 (ms) | max (ms) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for engine, label, t, p in rows:
        prep = ("%d | %.1f | %.1f | %.1f" % (p["n"], p["p50"], p["p99"], p["max"])) if p else "- | - | - | -"
        print("| %s | %s | %d | %.1f | %.1f | %.1f | %s |" % (engine, label, t["n"], t["p50"], t["p99"], t["max"], prep))
    print()
    for n in notes:
        print("- " + n)


if __name__ == "__main__":
    main()
