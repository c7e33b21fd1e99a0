#!/usr/bin/env python3
"""Quality of cera on the real models against a float32 reference (TESTING.md, oracle 4).

  kld    : tokenizes tools/quality/passage.txt with cera, runs `cera logits --dump` on those ids,
           runs transformers (float32, the GGUF dequantized by its GGUF loader) on the same ids and
           prints top-1 agreement and the KL divergence KL(reference || cera) per position, like
           llama.cpp's `perplexity --kl-divergence`.
  tokens : writes tests/fixtures/real_models/<name>.inp/.out (the shared fixtures' format) with the
           reference tokenizer's ids for every .inp string of ../shared/tokenizer-fixtures plus our
           own: transformers' tokenizer from the same GGUF, or llama.cpp's llama-tokenize when
           --llama-tokenize BIN is given (transformers mis-tokenizes Gemma 3's GGUF vocabulary).

Needs transformers 5.17, torch, gguf 0.19 (e.g. the venv of tools/parity). Example:
  python tools/quality/real_models.py kld --cera build/apps/cli/cera --model ~/.cache/cera/models/X.gguf
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("CERA_SHARED_DIR", os.path.join(os.path.dirname(REPO), "shared"))
SEP = "__ggml_vocab_test__"

EXTRA = [
    "The lighthouse keeper had lived on the island for eleven years.",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n",
    "Café naïve façade — “quotes” and ‘apostrophes’ … ellipsis",
    "def f(x):\n    return x ** 2  # square\n",
    "1234567890 3.14159 -42 1e-5 0x1F",
    "日本語のテキストと中文文本",
    "Привет, мир! Здравствуйте.",
    "emoji 🙂🚀 and ZWJ 👩‍👩‍👧",
    "   leading and trailing spaces   ",
    "tabs\tand\nnewlines\r\nmixed",
    "UPPER lower MiXeD CaSe",
]


def read_inp(path):
    text = open(path, encoding="utf-8").read()
    parts = text.split("\n" + SEP + "\n")
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def cera_ids(cera, model, text_path, bos):
    args = [cera, "tokenize", "-m", model, "--file", text_path, "--ids"] + (["--bos"] if bos else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def cmd_kld(a):
    import torch
    from transformers import AutoModelForCausalLM

    ids = cera_ids(a.cera, a.model, os.path.join(HERE, "passage.txt"), bos=True)
    with tempfile.TemporaryDirectory() as tmp:
        ids_path, dump = os.path.join(tmp, "ids.txt"), os.path.join(tmp, "logits.bin")
        open(ids_path, "w").write(" ".join(map(str, ids)))
        run = [a.cera, "logits", "-m", a.model, "--ids-file", ids_path, "--dump", dump, "-c", str(len(ids) + 8),
               "--device", a.device]
        subprocess.run(run, check=True)
        ours = np.fromfile(dump, dtype=np.float32)
    # --ref-cache: the reference logits of these ids, reused across cera builds (the reference
    # does not change; building Gemma 3's tokenizer in transformers takes minutes).
    cache = a.ref_cache
    ref = None
    if cache and os.path.exists(cache):
        z = np.load(cache)
        if z["ids"].tolist() == ids:
            ref = z["logits"]
    if ref is None:
        model = AutoModelForCausalLM.from_pretrained(os.path.dirname(a.model), gguf_file=os.path.basename(a.model),
                                                     torch_dtype=torch.float32)
        model.eval()
        with torch.no_grad():
            ref = model(torch.tensor([ids])).logits[0].float().numpy()
        if cache:
            np.savez(cache, ids=np.array(ids), logits=ref)
    ours = ours.reshape(len(ids), -1)[:, : ref.shape[1]]
    lr, lo = log_softmax(ref), log_softmax(ours)
    kld = (np.exp(lr) * (lr - lo)).sum(axis=-1)
    top1 = (ref.argmax(-1) == ours.argmax(-1)).mean()
    name = os.path.basename(a.model)
    if a.write_top:
        write_top(a.write_top, ids, ref)
    print(f"| {name} | {a.device} | {len(ids)} | {100 * top1:.2f} % | {kld.mean():.3g} | {np.percentile(kld, 99):.3g} | "
          f"{kld.max():.3g} |")


def write_top(path, ids, ref, positions=96, k=4):
    """The reference's k best (id, logit) at the first `positions` positions of the passage, as the
    committed oracle of tests/model/real_models_test.cpp: line 1 the token ids, then one line a position."""
    with open(path, "w") as f:
        f.write(" ".join(map(str, ids[:positions])) + "\n")
        for row in ref[:positions]:
            best = np.argsort(-row, kind="stable")[:k]
            f.write(" ".join(f"{i}:{row[i]:.6f}" for i in best) + "\n")


def cmd_tokens(a):
    strings = []
    for f in sorted(os.listdir(os.path.join(SHARED, "tokenizer-fixtures"))):
        if f.endswith(".inp"):
            strings += [s for s in read_inp(os.path.join(SHARED, "tokenizer-fixtures", f)) if s not in strings]
    strings += EXTRA
    if a.llama_tokenize:
        ids = []
        with tempfile.TemporaryDirectory() as tmp:
            for s in strings:
                if s == "":
                    ids.append([])  # llama-tokenize refuses an empty prompt
                    continue
                path = os.path.join(tmp, "in.txt")
                open(path, "w", encoding="utf-8", newline="").write(s)
                out = subprocess.run([a.llama_tokenize, "-m", a.model, "-f", path, "--ids", "--no-bos", "--log-disable"],
                                     check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
                ids.append([int(x) for x in out.strip("[]").replace(",", " ").split()])
        source = "llama.cpp llama-tokenize (special tokens parsed, no BOS)"
    else:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(os.path.dirname(a.model), gguf_file=os.path.basename(a.model))
        ids = [tok(s, add_special_tokens=False).input_ids for s in strings]
        source = "transformers AutoTokenizer (GGUF loader)"
    out_dir = os.path.join(REPO, "tests", "fixtures", "real_models")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, a.name + ".inp"), "w", encoding="utf-8") as f:
        for s in strings:
            f.write(s + "\n" + SEP + "\n")
    with open(os.path.join(out_dir, a.name + ".out"), "w") as f:
        for row in ids:
            f.write("".join(f" {i}" for i in row) + "\n")
    print(f"wrote {len(strings)} cases for {a.name} from {source}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("kld")
    k.add_argument("--cera", required=True)
    k.add_argument("--model", required=True)
    k.add_argument("--device", default="cpu")
    k.add_argument("--ref-cache", help="an .npz file for the reference logits (written once, then reused)")
    k.add_argument("--write-top", help="write the reference's top logits (a test fixture) to this file")
    t = sub.add_parser("tokens")
    t.add_argument("--model", required=True)
    t.add_argument("--name", required=True)
    t.add_argument("--llama-tokenize")
    a = p.parse_args()
    {"kld": cmd_kld, "tokens": cmd_tokens}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
