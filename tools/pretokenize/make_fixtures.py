#!/usr/bin/env python3
r"""Writes tests/fixtures/tokenizer/pretokenize/<name>.txt: the expected pre-tokenizer splits,
computed by Python's `regex` module running the same regexes in the same sequence as
llama.cpp's llama-vocab.cpp (with tokenizer.json's original regex where llama.cpp rewrote it).

Inputs: every test string of $CERA_SHARED_DIR/tokenizer-fixtures/*.inp (default ../shared),
hand-written hard cases, and seeded random strings drawn from pools of characters chosen to
exercise every branch of every regex.

Fixture format (UTF-8, lines end in LF):
  lines starting with '#' are comments;
  a case line is '>' followed, for each piece, by a TAB and the escaped piece; the input is the
  concatenation of the pieces (so an empty input is the line '>').
  Escapes inside a piece: \\ \t \n \r, and \u{HEX} for other control characters (C0, DEL),
  U+0085, U+2028 and U+2029.

Requirements: pip install regex (2026.x = Unicode 17.0.0, as src/tokenizer/unicode/generated).
"""
import glob
import os
import random
import sys

import regex

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
OUT_DIR = os.path.join(ROOT, 'tests/fixtures/tokenizer/pretokenize')
SHARED = os.environ.get('CERA_SHARED_DIR', os.path.join(ROOT, '..', 'shared'))

CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
GPT2_HF = GPT2 + r"|\s+"
TAIL = r"\s*[\r\n]+|\s+(?!\S)|\s+"
LLAMA3 = CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + TAIL
QWEN2 = CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + TAIL
QWEN35 = (CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"
          + TAIL)
SEED_CODER = CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|" + TAIL
MINICPM5 = CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|" + TAIL
UPPER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
LOWER = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
PREFIX = r"[^\r\n\p{L}\p{N}]?"
TEKKEN = (PREFIX + UPPER + '*' + LOWER + '+|' + PREFIX + UPPER + '+' + LOWER + '*|'
          + r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|" + TAIL)
GPT4O = (PREFIX + UPPER + '*' + LOWER + '+' + CONTRACTIONS + '?|'
         + PREFIX + UPPER + '+' + LOWER + '*' + CONTRACTIONS + '?|'
         + r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|" + TAIL)
DEEPSEEK_V3 = (r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|"""
               r" ?[\p{P}\p{S}]+[\r\n]*|" + TAIL)
# The letter set of the DeepSeek LLM regex as code point ranges (the regex text holds
# characters such as U+1F7D and U+212A that Unicode normalization would silently change).
DEEPSEEK_LLM_RANGES = [
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA),
    (0x1BC, 0x1BF), (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377),
    (0x37B, 0x37D), (0x37F, 0x37F), (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C),
    (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F), (0x531, 0x556),
    (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF),
    (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B),
    (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE),
    (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC),
    (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113),
    (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128),
    (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149),
    (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE),
    (0x2CF2, 0x2CF3), (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787),
    (0xA78B, 0xA78E), (0xAB70, 0xABBF), (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A),
    (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3), (0x104D8, 0x104FB),
    (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
]
DEEPSEEK_LLM_LETTERS = (r"\s?[" + ''.join(r"\U%08X-\U%08X" % r for r in DEEPSEEK_LLM_RANGES)
                        + "]+")
PORO = r" ?[^(\s|.,!?…。，、।۔،)]+"
NEWLINE_RUNS = r"[^\n]+|[\n]+"
CJK_HANGUL = r"[一-龥ࠀ-一가-퟿]+"

# Keys are pre_tokenizer_name() values; each is the sequence of regexes applied in order.
RULES = {
    'default': [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
    'gpt2': [GPT2_HF],
    'llama3': [LLAMA3],
    'qwen2': [QWEN2],
    'qwen35': [QWEN35],
    'starcoder': [r"\p{N}", GPT2],
    'deepseek-coder': [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", CJK_HANGUL, r"\p{N}"],
    'deepseek-llm': [r"[\r\n]", DEEPSEEK_LLM_LETTERS, r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$",
                     CJK_HANGUL, r"\p{N}+"],
    'deepseek-v3': [r"\p{N}{1,3}", r"[一-龥぀-ゟ゠-ヿ]+", DEEPSEEK_V3],
    'falcon': [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
    'poro': [PORO],
    'viking': [PORO, r"\p{N}"],
    'tekken': [TEKKEN],
    'gpt4o': [GPT4O],
    'seed-coder': [SEED_CODER],
    'minicpm5': [r"\p{N}{1,3}", MINICPM5],
    'newline-runs': [NEWLINE_RUNS],
    'laguna': [NEWLINE_RUNS, QWEN2],
    'whitespace': [r"\S+"],
}


def split(patterns, text):
    """llama.cpp / HF Split(Isolated) composition: each regex re-splits every piece, and the
    text between matches stays as pieces of its own."""
    pieces = [text] if text else []
    for pat in patterns:
        rx = regex.compile(pat)
        out = []
        for p in pieces:
            last = 0
            for m in rx.finditer(p):
                if m.start() == m.end():
                    continue
                if m.start() > last:
                    out.append(p[last:m.start()])
                out.append(m.group())
                last = m.end()
            if last < len(p):
                out.append(p[last:])
        pieces = out
    assert ''.join(pieces) == text
    return pieces


def read_inp(path):
    with open(path, encoding='utf-8', newline='') as f:
        data = f.read()
    parts = data.split('\n__ggml_vocab_test__\n')
    if parts and parts[-1] == '':
        parts.pop()
    return parts


HARD_CASES = [
    '', ' ', '  ', '\t', '\n', '\r\n', ' \r\n', '\r\n\r\n', 'a\r\nb', '\n\n\nx', 'x\n\n\n',
    'trailing spaces   ', '   leading', ' a', ' 1', ' !', ' é', '  a', '  1', '  !',
    '\t\tx', '\t x', 'x \t', 'a \u00a0b', '\u00a0\u00a0x', 'a\u3000b', '\u3000\u3000', '\u3000x',
    'x\u000b\u000cy', 'x\u0085y', 'x\u2028y\u2029z', '\u001c\u001d\u001e\u001f', '\u0000a\u0001',
    "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "'Re 'rE 'lL 'Ll 'x '", "it's I'm we'll",
    "DON'T YOU'VE HE'D", "' s", "''s", "'\u017f", "x'\u017f", "a'sb", "don't!", "l'amour 'ss'",
    "Hello's WORLD'S 1's 's's", "naïve'll café'd", " 's", "\n's",
    '1', '12', '123', '1234', '12345', '123456', '1234567', '12345678', '123456789',
    'a1b22c333d4444', '１２３４', '١٢٣٤', '½²Ⅷx', '3.14159 2,718', '$100 +5 <=> ^~|`',
    'x = y + z; // ok?', '((a))[b]{c}', '你好世界', '你好 abc 世界123', 'こんにちはカタカナ',
    '한국어 테스트', 'नमस्ते दुनिया', 'កាន់តែពិសេស', 'สวัสดีครับ',
    '\u0301', ' \u0301', 'a\u0301', 'e\u0301\u0302x', 'A\u0301B', '1\u0301', '!\u0301', '\u0301\u0301a',
    '\U0001f468\u200d\U0001f469\u200d\U0001f467', '\U0001f44d\U0001f3fd', '\u2764\ufe0f x',
    '\U0001f1fa\U0001f1f8', 'HelloWorld', 'HELLOworld', 'helloWORLD', 'iPhone', 'McDONALD',
    'Xǅy ǅǆ', 'abʰcd ʰʰ', 'Été éTÉ', 'Αθηνά ΚΑΛΗ', 'a/b/c\n/d', 'x!!\n\ny', '...\r\n',
    'path/to/file.txt', 'http://example.com/a?b=c', '<|endoftext|>', '  \n  \n', 'a \n b',
    'a  \n\n  b', 'Алексей Петров', 'São Paulo', '\u00b5m \u212b \u2126 \u212a \u1f7d', 'ﬀﬁ Ａｂｃ', 'ࠀࠁ 一', 'アイ ぁあ',
    '、。，！', '‘quoted’ “double” …', '।۔،', 'ab(cd|ef).gh', '\ufffd\ufffd', 'ééé', 'ABC DEF',
    'a\u200bb', 'x\u00adx', '𐐀𐐨', '𞤀𞤢', '  \t\n\u000b\u000c\r x', 'x  ', 'x \n', '\r\r\n\n\r',
]

POOLS = [
    'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'stdmlrve', 'SLRVTDM', "''''",
    '0123456789', '          ', '\t\n\r\u000b\u000c', '\n\n\r', '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~',
    '\u00a0\u3000\u2003\u0085\u2028', 'éÉüßñÇſµ', 'αΒγΔǅʰʱ', '一你好龥\u9fa6㐀ࠀ', 'ぁんアンー',
    '가한ㄱ', 'नमस्तेि', 'កាំែ', 'สัดี', '\u0301\u0302\u0308\u20dd',
    '\U0001f468\u200d\U0001f469\ufe0f\U0001f3fd', '½²Ⅷ１١', '‘’“”…、。，！।', '¬±∑€©',
    '\u0000\u0001\u001f\u007f\u200b\u00ad\ufffd',
]


def random_cases(n, seed):
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        k = rng.randint(1, 28)
        pools = rng.sample(POOLS, rng.randint(2, 5))
        cases.append(''.join(rng.choice(rng.choice(pools)) for _ in range(k)))
    return cases


ESCAPES = {'\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r'}


def escape(piece):
    out = []
    for ch in piece:
        c = ord(ch)
        if ch in ESCAPES:
            out.append(ESCAPES[ch])
        elif c < 0x20 or c == 0x7F or c in (0x85, 0x2028, 0x2029):
            out.append('\\u{%X}' % c)
        else:
            out.append(ch)
    return ''.join(out)


def main():
    inputs = []
    for path in sorted(glob.glob(os.path.join(SHARED, 'tokenizer-fixtures', '*.inp'))):
        inputs.extend(read_inp(path))
    if not inputs:
        sys.exit(f'no .inp files under {SHARED}/tokenizer-fixtures')
    inputs += HARD_CASES + random_cases(160, 20260807)
    unique = list(dict.fromkeys(inputs))
    os.makedirs(OUT_DIR, exist_ok=True)
    total = 0
    for name, patterns in RULES.items():
        lines = [f'# pre-tokenizer {name}: expected splits from Python regex {regex.__version__}',
                 '# generated by tools/pretokenize/make_fixtures.py; regexes applied in order:']
        lines += ['#   ' + escape(p) for p in patterns]
        for s in unique:
            lines.append('>' + ''.join('\t' + escape(p) for p in split(patterns, s)))
        path = os.path.join(OUT_DIR, f'{name}.txt')
        with open(path, 'w', encoding='utf-8', newline='\n') as f:
            f.write('\n'.join(lines) + '\n')
        total += os.path.getsize(path)
    print(f'{len(unique)} inputs x {len(RULES)} pre-tokenizers, {total} bytes in {OUT_DIR}')


if __name__ == '__main__':
    main()
