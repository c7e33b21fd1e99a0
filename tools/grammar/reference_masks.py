#!/usr/bin/env python3
"""Reference token masks for cera's grammar engine, from llguidance on SmolLM2's vocabulary.

For every grammar of corpus.py and a few seeded random walks (each step: llguidance's allowed
set, then one allowed token drawn at random), writes
  tests/fixtures/grammar/corpus.gbnf        the grammars ("### name" before each)
  tests/fixtures/grammar/llguidance_masks.txt  the walks and their masks, deduplicated
and prints llguidance's per-step mask time (p50/p99/max) for the benchmark table.

XGrammar is not used: its wheel requires torch, transformers and triton, and it imports torch
at module import, which is too heavy for this venv. llguidance has no dependencies.

Runs in its own venv, made on first use:
  python3 tools/grammar/reference_masks.py [--model PATH]   (default: scripts/pull-model.sh smollm2)
"""

import argparse
import os
import random
import subprocess
import sys
import time

VENV = os.path.expanduser("~/.cache/cera/grammar-ref-venv")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ["llguidance==1.9.1", "gguf==0.19.0", "numpy", "jsonschema", "rfc3339-validator"]


def ensure_venv():
    try:
        import llguidance  # noqa: F401
        import gguf  # noqa: F401
        import jsonschema  # noqa: F401  (schema_masks.py checks its instances)
        return
    except ImportError:
        pass
    py = os.path.join(VENV, "bin", "python")
    if os.path.abspath(sys.executable) == os.path.abspath(py):
        sys.exit("reference_masks: the venv at %s lacks %s" % (VENV, PACKAGES))
    if not os.path.exists(py):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
    subprocess.check_call([py, "-m", "pip", "install", "-q"] + PACKAGES)
    os.execv(py, [py] + sys.argv)


# Must match cera's tokenizer/vocab.cpp kEndOfGenerationTexts (the C++ test checks the ids).
EOG_TEXTS = ["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
             "<|end_of_text|>", "<EOT>", "<｜end▁of▁sentence｜>", "<|return|>", "<|call|>"]


def gpt2_byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def load_vocab(path):
    """Token bytes as the model emits them, special ids, end-of-generation ids."""
    import gguf
    r = gguf.GGUFReader(path)
    f = r.fields

    def arr(name):
        fl = f[name]
        return [fl.parts[i] for i in fl.data]

    def scalar(name):
        fl = f.get(name)
        return None if fl is None else int(fl.parts[fl.data[0]][0])

    texts = [bytes(x).decode("utf-8") for x in arr("tokenizer.ggml.tokens")]
    types = [int(x[0]) for x in arr("tokenizer.ggml.token_type")]
    model = bytes(f["tokenizer.ggml.model"].parts[f["tokenizer.ggml.model"].data[0]]).decode()
    dec = gpt2_byte_decoder()
    pieces = []
    for t, ty in zip(texts, types):
        if ty in (2, 3, 5):  # unknown, control, unused: emit nothing
            pieces.append(b"")
        elif model == "gpt2" and ty != 4:
            pieces.append(bytes(dec[c] for c in t))
        elif ty == 6 and t.startswith("<0x"):
            pieces.append(bytes([int(t[3:5], 16)]))
        else:
            pieces.append(t.replace("\u2581", " ").encode("utf-8"))
    special = [i for i, ty in enumerate(types) if ty in (2, 3, 5)]
    eog = set()
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        v = scalar(key)
        if v is not None:
            eog.add(v)
    for t in EOG_TEXTS:
        if t in texts:
            eog.add(texts.index(t))
    return pieces, special, sorted(eog)


class Tok:
    """What llguidance.TokenizerWrapper reads. Encoding (only used by llguidance for forced
    tokens, never for masks) is greedy longest match, which is enough for that."""

    def __init__(self, pieces, special, eog):
        self.tokens = [b"\xff" + b"<special_%d>" % i if i in set(special) else p for i, p in enumerate(pieces)]
        self.special_token_ids = special
        self.eos_token_id = eog[0]
        self.bos_token_id = None
        self.by_bytes = {}
        for i, p in enumerate(pieces):
            if p and i not in set(special):
                self.by_bytes.setdefault(p, i)
        self.max_len = max(len(p) for p in pieces)

    def __call__(self, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        out, i = [], 0
        while i < len(data):
            for n in range(min(self.max_len, len(data) - i), 0, -1):
                t = self.by_bytes.get(data[i:i + n])
                if t is not None:
                    out.append(t)
                    i += n
                    break
            else:
                raise ValueError("no token for byte %d" % data[i])
        return out


def allowed_ids(mask_bytes, n_vocab):
    import numpy as np
    bits = np.unpackbits(np.frombuffer(mask_bytes, dtype=np.uint8), bitorder="little")[:n_vocab]
    return np.nonzero(bits)[0].tolist()


def encode_set(ids, n_vocab):
    """'L' + gaps of the allowed ids, or 'C' + gaps of the others, whichever is shorter."""
    s = set(ids)
    comp = [i for i in range(n_vocab) if i not in s] if len(ids) * 2 > n_vocab else None
    kind, lst = ("C", comp) if comp is not None else ("L", ids)
    prev, gaps = -1, []
    for i in lst:
        gaps.append(i - prev - 1)
        prev = i
    return "%s %d %s" % (kind, len(lst), " ".join(map(str, gaps)))


def structural(piece):
    return any(c in piece for c in b'{}[]":,()<>=-#\n0123456789') or len(piece) <= 1


def main():
    ensure_venv()
    import llguidance
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from corpus import corpus

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="SmolLM2 GGUF (default: scripts/pull-model.sh smollm2)")
    ap.add_argument("--walks", type=int, default=3)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--seed", type=int, default=20)
    args = ap.parse_args()
    model = args.model or subprocess.check_output(
        ["bash", os.path.join(REPO, "scripts", "pull-model.sh"), "smollm2"], text=True).strip()
    pieces, special, eog = load_vocab(model)
    n_vocab = len(pieces)
    tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(Tok(pieces, special, eog)), eos_token=eog)

    grammars = corpus(args.seed)
    out_dir = os.path.join(REPO, "tests", "fixtures", "grammar")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "corpus.gbnf"), "w") as fh:
        for name, text in grammars.items():
            fh.write("### %s\n%s" % (name, text))

    rng = random.Random(args.seed)
    masks, mask_index, lines, times, failed, compile_ms = [], {}, [], [], [], []
    for name, text in grammars.items():
        try:
            lark = llguidance.grammar_from("gbnf", text)
        except ValueError as e:
            failed.append("%s: %s" % (name, e))
            continue
        for w in range(args.walks):
            t0 = time.perf_counter()
            m = llguidance.LLMatcher(tok, lark, log_level=0)
            if w == 0:
                compile_ms.append((time.perf_counter() - t0) * 1e3)
            if m.is_error():
                failed.append("%s: %s" % (name, m.get_error()))
                break
            chosen, refs = [], []
            for step in range(args.steps + 1):
                t0 = time.perf_counter()
                mb = m.compute_bitmask()
                times.append(time.perf_counter() - t0)
                ids = allowed_ids(mb, n_vocab)
                key = tuple(ids)
                if key not in mask_index:
                    mask_index[key] = len(masks)
                    masks.append(encode_set(ids, n_vocab))
                refs.append(mask_index[key])
                text_ids = [i for i in ids if i not in eog]
                if step == args.steps or not ids:
                    break
                can_stop = len(text_ids) < len(ids)
                if can_stop and (not text_ids or rng.random() < 0.3):
                    t = [i for i in ids if i in eog][0]
                else:
                    pool = [i for i in text_ids if structural(pieces[i])] if rng.random() < 0.6 else []
                    t = rng.choice(pool or text_ids)
                chosen.append(t)
                if not m.consume_token(t):
                    sys.exit("llguidance refused its own allowed token %d in %s: %s" % (t, name, m.get_error()))
                if t in eog:
                    break
            lines.append("walk %s %s %s" % (name, ",".join(map(str, chosen)) or "-", ",".join(map(str, refs))))

    path = os.path.join(out_dir, "llguidance_masks.txt")
    with open(path, "w") as fh:
        fh.write("# tools/grammar/reference_masks.py: llguidance %s on SmolLM2 (seed %d, %d walks x %d steps)\n"
                 % (llguidance.__version__ if hasattr(llguidance, "__version__") else "1.9.1", args.seed,
                    args.walks, args.steps))
        fh.write("# walk NAME TOKENS MASKS: the mask before each token (and after the last)\n")
        fh.write("vocab %d\n" % n_vocab)
        fh.write("eog %s\n" % " ".join(map(str, eog)))
        for i, s in enumerate(masks):
            fh.write("mask %d %s\n" % (i, s))
        for line in lines:
            fh.write(line + "\n")
    print("llguidance masks: %d steps over %d grammars, %d distinct masks, fixture %.1f KB"
          % (len(times), len(grammars) - len(failed), len(masks), os.path.getsize(path) / 1024))

    def row(what, values):
        v = sorted(values)
        print("| %-38s | %7d | %9.1f | %9.1f | %9.1f |" % (what, len(v), v[len(v) // 2], v[int(len(v) * 0.99)], v[-1]))
    print("| %-38s | %7s | %9s | %9s | %9s |" % ("llguidance %s, SmolLM2" % getattr(llguidance, "__version__", ""),
                                                  "n", "p50", "p99", "max"))
    print("|----------------------------------------|---------|-----------|-----------|-----------|")
    row("mask per token (us, compute_bitmask)", [t * 1e6 for t in times])
    row("matcher creation per grammar (ms)", compile_ms)
    for f in failed:
        print("not in the fixture (llguidance refused it):", f)


if __name__ == "__main__":
    main()
