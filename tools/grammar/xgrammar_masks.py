#!/usr/bin/env python3
"""XGrammar as a second reference: its masks on the committed SmolLM2 walks (llguidance_masks.txt
for the GBNF corpus, llguidance_schema_masks.txt for the JSON Schemas, compact separators)
against the llguidance masks stored there, which cera's tests compare with cera's own. Prints
how many masks agree and, for those that do not, the first tokens that differ, so a reader can
see which of the explained kinds (GrammarReference / GrammarSchemaReference headers) XGrammar
shares with cera and which with llguidance. Needs a python with xgrammar (README: /tmp/xgr-venv).

  /tmp/xgr-venv/bin/python tools/grammar/xgrammar_masks.py
"""

import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_masks as bm  # noqa: E402
import reference_masks as rm  # noqa: E402


def load_masks(path, n_vocab):
    masks, walks = {}, []
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if parts and parts[0] == "mask":
                idx, kind, count = int(parts[1]), parts[2], int(parts[3])
                ids, prev = [], -1
                for g in parts[4:4 + count]:
                    prev += int(g) + 1
                    ids.append(prev)
                masks[idx] = set(ids) if kind == "L" else set(range(n_vocab)) - set(ids)
            elif parts and parts[0] == "walk":
                toks = [] if parts[2] == "-" else [int(t) for t in parts[2].split(",")]
                walks.append((parts[1], toks, [int(m) for m in parts[3].split(",")]))
    return masks, walks


def main():
    import numpy as np
    import xgrammar as xgr
    model = subprocess.check_output(["bash", os.path.join(rm.REPO, "scripts", "pull-model.sh"), "smollm2"],
                                    text=True).strip()
    pieces, special, eog = rm.load_vocab(model)
    n_vocab = len(pieces)
    info = xgr.TokenizerInfo([b"" if i in set(special) else p for i, p in enumerate(pieces)], xgr.VocabType.RAW,
                             vocab_size=n_vocab, stop_token_ids=eog)
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    grammars = {n: ("gbnf", t) for n, t in bm.load_corpus().items()}
    grammars.update({n: ("schema", json.dumps(s, ensure_ascii=False)) for n, s in bm.load_schemas().items()})
    buf = np.zeros((1, (n_vocab + 31) // 32), dtype=np.int32)
    for fixture in ("llguidance_masks.txt", "llguidance_schema_masks.txt"):
        masks, walks = load_masks(os.path.join(bm.FIX, fixture), n_vocab)
        equal = differ = refused_grammars = stopped = 0
        examples = collections.Counter()
        kinds = collections.Counter()
        compiled = {}
        for name, toks, refs in walks:
            if name not in compiled:
                kind, text = grammars[name]
                try:
                    compiled[name] = (compiler.compile_json_schema(text, any_whitespace=False, separators=(",", ":"))
                                      if kind == "schema" else compiler.compile_grammar(text))
                except Exception:  # noqa: BLE001
                    compiled[name] = None
                    refused_grammars += 1
            if compiled[name] is None:
                continue
            m = xgr.GrammarMatcher(compiled[name])
            prefix = b""
            for i, ref in enumerate(refs):
                m.fill_next_token_bitmask(buf)
                bits = np.unpackbits(buf.view(np.uint8), bitorder="little")[:n_vocab]
                got = set(np.nonzero(bits)[0].tolist())
                want = masks[ref]
                if got == want:
                    equal += 1
                else:
                    differ += 1
                    ex, mi = got - want, want - got
                    kinds[("xgrammar allows more" if not mi else "xgrammar allows fewer" if not ex else "both ways") +
                          (", only tokens holding 0x7F" if ex and not mi and all(b"\x7f" in pieces[t] for t in ex)
                           else ", only prefixes of a single allowed llguidance token" if ex and not mi and len(want) == 1
                           and all(pieces[next(iter(want))].startswith(pieces[t]) for t in ex) else "")] += 1
                    extra = sorted(got - want)[:3]
                    missing = sorted(want - got)[:3]
                    key = "%s: xgrammar +%s -%s after %r" % (name, [pieces[t] for t in extra], [pieces[t] for t in missing],
                                                             prefix[-24:])
                    examples[key] += 1
                if i == len(toks):
                    break
                if not m.accept_token(toks[i]):
                    stopped += 1
                    break
                prefix += pieces[toks[i]]
        print("%s: %d masks equal to llguidance's, %d differ; %d grammars refused by XGrammar, %d walks stopped "
              "at a token XGrammar refuses" % (fixture, equal, differ, refused_grammars, stopped))
        for k, n in kinds.most_common():
            print("    %5d %s" % (n, k))
        for k, _ in examples.most_common(6):
            print("   e.g.", k)


if __name__ == "__main__":
    main()
