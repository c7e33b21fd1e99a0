#!/usr/bin/env python3
"""Builds the WordPiece ("bert") tokenizer fixtures in tests/fixtures/tokenizer/.

shared/tokenizer-fixtures has no BERT vocabulary, so this script makes one: it trains a small
WordPiece vocabulary with the Hugging Face `tokenizers` package (BertNormalizer +
BertPreTokenizer, the bert-base pipeline), records the ids that tokenizer gives for many test
strings (without special tokens), and writes the vocabulary as a vocab-only GGUF the way
llama.cpp's converter does (word-initial pieces get a U+2581 prefix, "##" continuations lose
it, control tokens stay as they are; bos = [CLS], seperator = [SEP]).

Outputs, per variant (uncased: lowercase + strip accents; cased: neither):
  ggml-vocab-bert-<variant>.gguf, .gguf.inp, .gguf.out  (same formats as shared/tokenizer-fixtures)

Usage: python3 tools/tokenizer/make_wordpiece_fixture.py [--shared ../shared] [--out tests/fixtures/tokenizer]
Needs: pip install tokenizers gguf==0.19.0
"""
import argparse
import pathlib

import gguf
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

SEPARATOR = "\n__ggml_vocab_test__\n"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

TRAINING_TEXT = """
The quick brown fox jumps over the lazy dog. Tokenizers split text into pieces that a model
can read; WordPiece keeps the longest known prefix and continues with ## pieces.
Hello world! Hello, World? HELLO there... It's a test: don't stop, we'll see, they've gone.
Numbers like 1, 12, 123, 1234 and 3.14159 appear in text, as do dates like 2024-05-17.
Café, naïve, résumé, façade, Ångström, São Paulo, Zürich, Kraków, Dvořák, crème brûlée.
Москва, привет мир! Ελληνικά γράμματα. 北京欢迎你。日本語のテキスト。한국어 텍스트.
Punctuation — dashes – quotes “like this” and ‘this’, ellipsis… brackets (a) [b] {c} <d>.
Symbols: $5, 10%, a+b=c, x^2, ~tilde, `code`, pipe|bar, back\\slash, at@sign, #hash, &amp.
Machine learning models generate tokens one at a time; inference engines make that fast.
unbelievable unbreakable understanding misunderstanding internationalization tokenization
"""

EXTRA_TESTS = [
    "Hello World",
    "hello world",
    "HeLLo WoRLD!",
    "Café naïve résumé",
    "CAFÉ NAÏVE",
    "Ångström and Dvořák",
    "e\u0301 decomposed accent",
    "北京欢迎你",
    "日本語のテキスト",
    "mixed北京text",
    "한국어 텍스트",
    "tab\tseparated\tvalues",
    "line one\nline two\r\nline three",
    "non\u00a0breaking\u2003spaces",
    "control\u0007char and zero\u0000byte",
    "zero\u200bwidth space",
    "“quoted” — dashed – ‘single’…",
    "a+b=c; x^2 ~ y | z",
    "price: $5.99 (10% off)",
    "don't won't they'll we've",
    "internationalization",
    "misunderstanding unbelievable",
    "supercalifragilisticexpialidocious",
    "x" * 100,
    "y" * 101,
    "unknownzqxjword",
    "Москва ПРИВЕТ",
    "Ελληνικά",
    "emoji 🦙 here",
    "   leading and trailing   ",
    "",
    " ",
    "\n\n",
    "...",
    "a.b,c!d?e",
    "2024-05-17 12:34:56",
    "3.14159",
    "İstanbul",
    "ﬁne ligature",
    "Ⅻ roman numeral",
    "½ fraction",
]


def make_tokenizer(lowercase: bool):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def phantom(text: str, is_control: bool) -> str:
    if is_control:
        return text
    if text.startswith("##"):
        return text[2:]
    return "\u2581" + text


def build(variant: str, lowercase: bool, tests, corpus, out_dir: pathlib.Path):
    tok = make_tokenizer(lowercase)
    trainer = trainers.WordPieceTrainer(vocab_size=900, min_frequency=1, special_tokens=SPECIALS,
                                        show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    vocab = tok.get_vocab()
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    assert [i for _, i in by_id] == list(range(len(by_id))), "ids must be dense"
    tokens = [phantom(t, t in SPECIALS) for t, _ in by_id]
    types = [gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL for t, _ in by_id]
    assert len(set(tokens)) == len(tokens), "the converted spelling must stay unique"

    name = f"ggml-vocab-bert-{variant}.gguf"
    w = gguf.GGUFWriter(str(out_dir / name), "bert")
    w.add_name(f"wordpiece-fixture-{variant}")
    w.add_tokenizer_model("bert")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_bos_token_id(vocab["[CLS]"])
    w.add_sep_token_id(vocab["[SEP]"])
    w.add_unk_token_id(vocab["[UNK]"])
    w.add_pad_token_id(vocab["[PAD]"])
    w.add_mask_token_id(vocab["[MASK]"])
    w.add_add_bos_token(True)
    w.add_add_sep_token(True)
    w.add_bool("tokenizer.ggml.normalizer.lowercase", lowercase)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    lines = []
    for s in tests:
        ids = tok.encode(s, add_special_tokens=False).ids
        lines.append("".join(f" {i}" for i in ids))
    (out_dir / (name + ".inp")).write_text("".join(s + SEPARATOR for s in tests), encoding="utf-8")
    (out_dir / (name + ".out")).write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    print(f"{name}: {len(tokens)} tokens, {len(tests)} tests")


def main():
    here = pathlib.Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(here.parent / "shared"))
    ap.add_argument("--out", default=str(here / "tests" / "fixtures" / "tokenizer"))
    args = ap.parse_args()
    inp = pathlib.Path(args.shared) / "tokenizer-fixtures" / "ggml-vocab-llama-spm.gguf.inp"
    shared_tests = inp.read_text(encoding="utf-8").split(SEPARATOR)
    if shared_tests and shared_tests[-1] == "":
        shared_tests.pop()
    tests = shared_tests + EXTRA_TESTS
    corpus = TRAINING_TEXT.splitlines() + shared_tests[::2]
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    build("uncased", True, tests, corpus, out_dir)
    build("cased", False, tests, corpus, out_dir)


if __name__ == "__main__":
    main()
