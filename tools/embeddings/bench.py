#!/usr/bin/env python3
"""Embedding throughput, cera beside sentence-transformers, on this machine's CPU.

1,000 sentences of about 30 tokens (each made of sentences from tests/fixtures/embeddings/
sentences.txt, joined until the tokenizer counts 28 to 34 tokens with [CLS] and [SEP]; the same
file for both) are embedded with all-MiniLM-L6-v2: by `cera embed -f` on a GGUF that `cera
convert` makes from the checkpoint folder (F32 and F16), and by sentence-transformers'
model.encode() (its default batch of 32, torch limited to the same thread count). Each side runs
--runs times after one warm-up, and the best run is reported, with the cosine agreement of the
two sides' vectors as a check that the same work was done. Prints a markdown table.

    python3 -m venv /tmp/stvenv && /tmp/stvenv/bin/pip install sentence-transformers
    /tmp/stvenv/bin/python tools/embeddings/bench.py --cera build/apps/cli/cera \\
        --checkpoint "$(bash scripts/pull-model.sh minilm)" --threads 2
"""
import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SENTENCES = os.path.join(REPO, "tests", "fixtures", "embeddings", "sentences.txt")


def make_corpus(tokenizer, n, lo=28, hi=34):
    with open(SENTENCES, encoding="utf-8") as f:
        base = [s.strip() for s in f.read().split("\n") if s.strip()]
    out, k = [], 0
    while len(out) < n:
        text, tried = "", 0
        while tried < 12:
            candidate = (text + " " + base[k % len(base)]).strip()
            k += 1
            tried += 1
            count = len(tokenizer(candidate)["input_ids"])
            if count <= hi:
                text = candidate
                if count >= lo:
                    break
        out.append(text)
    return out


def cosine(a, b):
    ab = sum(x * y for x, y in zip(a, b))
    return ab / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def run_cera(cera, gguf, corpus_file, threads, runs):
    best, vectors = None, None
    for r in range(runs + 1):
        out = corpus_file + ".out.json"
        start = time.perf_counter()
        done = subprocess.run([cera, "embed", "-m", gguf, "-f", corpus_file, "-t", str(threads), "--device", "cpu",
                               "-o", out], capture_output=True, text=True)
        seconds = time.perf_counter() - start  # the whole command: load, tokenize, embed, write
        if done.returncode != 0:
            sys.exit(f"cera embed failed: {done.stderr}")
        if r == 0:
            with open(out) as f:
                vectors = [d["embedding"] for d in json.load(f)["data"]]
            continue  # warm-up (page cache)
        best = seconds if best is None else min(best, seconds)
    return best, vectors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cera", required=True)
    ap.add_argument("--checkpoint", required=True, help="the all-MiniLM-L6-v2 folder (scripts/pull-model.sh minilm)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer
    import sentence_transformers

    torch.set_num_threads(args.threads)
    model = SentenceTransformer(args.checkpoint, device="cpu")
    corpus = make_corpus(model.tokenizer, args.sentences)
    n_tokens = sum(len(model.tokenizer(s)["input_ids"]) for s in corpus)

    tmp = tempfile.mkdtemp(prefix="cera-embed-bench-")
    corpus_file = os.path.join(tmp, "corpus.txt")
    with open(corpus_file, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus) + "\n")

    rows = []
    st_best = None
    model.encode(corpus[:64])  # warm-up
    for _ in range(args.runs):
        start = time.perf_counter()
        st_vectors = model.encode(corpus, batch_size=32, convert_to_numpy=True)
        seconds = time.perf_counter() - start
        st_best = seconds if st_best is None else min(st_best, seconds)
    rows.append((f"sentence-transformers {sentence_transformers.__version__} (torch {torch.__version__}, F32, batch 32)",
                 st_best, 1.0))

    for dtype in ("f32", "f16"):
        gguf = os.path.join(tmp, f"minilm-{dtype}.gguf")
        done = subprocess.run([args.cera, "convert", args.checkpoint, "-o", gguf, "--type", dtype],
                              capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"cera convert failed: {done.stderr}")
        seconds, vectors = run_cera(args.cera, gguf, corpus_file, args.threads, args.runs)
        worst = min(cosine(a, b.tolist()) for a, b in zip(vectors, st_vectors))
        rows.append((f"cera embed, {dtype.upper()} GGUF (whole command: load + embed + write JSON)", seconds, worst))

    print(f"{len(corpus)} sentences, {n_tokens} tokens ({n_tokens / len(corpus):.1f} per sentence with [CLS]/[SEP]), "
          f"{args.threads} threads, {platform.processor() or platform.machine()}, best of {args.runs}\n")
    print("| embedder | seconds | sentences/s | tokens/s | worst cosine vs sentence-transformers |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds, worst in rows:
        print(f"| {name} | {seconds:.3f} | {len(corpus) / seconds:.0f} | {n_tokens / seconds:.0f} | {worst:.6f} |")


if __name__ == "__main__":
    main()
