#!/usr/bin/env python3
"""Generates src/tokenizer/unicode/generated/unicode_tables.h (category, lowercase, canonical
decomposition and combining-class tables) and the Unicode test fixture
tests/tokenizer/unicode/data/unicode_props.txt.

The Unicode version must equal the one the pre-tokenizer oracle (the `regex` module) was built
with, so the script checks that `unicodedata2` and `regex` agree on the general category of
every code point before writing anything.

Requirements: pip install regex unicodedata2==17.0.1   (regex 2026.x is Unicode 17.0.0)

Lowercase: unicodedata2 has no case mappings, so the simple lowercase mapping comes from
Python's str.lower() (its own, older Unicode database) for code points that database knows,
and from the case-insensitive equivalence of the `regex` module (Unicode 17) for code points
assigned since then. U+0130 (whose full lowercase is two code points) maps to U+0069 as in
UnicodeData.txt.
"""
import os
from importlib import metadata
import random
import sys
import unicodedata

import regex
import unicodedata2 as ud

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
OUT_H = os.path.join(ROOT, 'src/tokenizer/unicode/generated/unicode_tables.h')
OUT_FIXTURE = os.path.join(ROOT, 'tests/tokenizer/unicode/data/unicode_props.txt')

CATS = ['Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd', 'Ps',
        'Pe', 'Pi', 'Pf', 'Po', 'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf', 'Cs',
        'Co', 'Cn']
CAT_INDEX = {c: i for i, c in enumerate(CATS)}
N_CP = 0x110000
BLOCK_SHIFT = 8


def check_versions():
    pats = {c: regex.compile(r'\p{gc=' + c + '}') for c in CATS}
    bad = [cp for cp in range(N_CP) if not pats[ud.category(chr(cp))].match(chr(cp))]
    if bad:
        sys.exit(f'unicodedata2 {ud.unidata_version} and regex {regex.__version__} disagree on '
                 f'{len(bad)} code points (first U+{bad[0]:04X}); install the matching versions')


def whitespace_set():
    ws = [cp for cp in range(N_CP) if regex.match(r'\s', chr(cp))]
    expected = [*range(0x9, 0xE), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028,
                0x2029, 0x202F, 0x205F, 0x3000]
    assert ws == expected, ws  # the C++ is_whitespace() hard-codes this list
    return set(ws)


def simple_lower(cp):
    c = chr(cp)
    if cp == 0x130:
        return 0x69
    if unicodedata.category(c) != 'Cn':  # known to Python's own database
        low = c.lower()
        assert len(low) == 1, hex(cp)
        return ord(low)
    return None


def lowercase_map():
    lower_letters = [cp for cp in range(N_CP) if ud.category(chr(cp)) == 'Ll']
    result = {}
    for cp in range(N_CP):
        cat = ud.category(chr(cp))
        if cat in ('Cn', 'Cs', 'Co'):
            continue
        low = simple_lower(cp)
        if low is None:  # assigned after Python's database: ask regex's case folding
            low = cp
            if cat in ('Lu', 'Lt'):
                pat = regex.compile('(?i)' + regex.escape(chr(cp)))
                cands = [x for x in lower_letters if x != cp and pat.fullmatch(chr(x))]
                if cands:
                    assert len(cands) == 1, (hex(cp), cands)
                    low = cands[0]
        if low != cp:
            result[cp] = low
    return result


def full_decomposition(cp):
    # NFD of a single code point: canonical decomposition applied recursively (the
    # unicodedata normalize() also reorders, which for one code point's expansion is a no-op
    # in Unicode because decompositions are stored in canonical order).
    d = ud.normalize('NFD', chr(cp))
    if d == chr(cp):
        return None
    return [ord(x) for x in d]


def runs(values):
    """[(first, last, value)] for maximal runs of equal value over sorted int keys."""
    out = []
    for cp in sorted(values):
        v = values[cp]
        if out and out[-1][1] == cp - 1 and out[-1][2] == v:
            out[-1][1] = cp
        else:
            out.append([cp, cp, v])
    return out


def lower_runs(lower):
    """Runs (first, count, stride, delta): first + k*stride maps to itself + delta."""
    items = sorted(lower.items())
    out = []
    for cp, low in items:
        delta = low - cp
        if out:
            first, count, stride, d = out[-1]
            last = first + (count - 1) * stride
            if d == delta and count == 1 and cp - first in (1, 2):
                out[-1] = [first, 2, cp - first, d]
                continue
            if d == delta and count > 1 and cp - last == stride:
                out[-1][1] += 1
                continue
        out.append([cp, 1, 1, delta])
    return out


def fmt_array(ctype, name, values, per_line=16):
    lines = [f'inline constexpr {ctype} {name}[{len(values)}] = {{']
    for i in range(0, len(values), per_line):
        lines.append('    ' + ', '.join(str(v) for v in values[i:i + per_line]) + ',')
    lines.append('};')
    return '\n'.join(lines)


def main():
    check_versions()
    whitespace_set()
    cats = [CAT_INDEX[ud.category(chr(cp))] for cp in range(N_CP)]

    # Two-level category table: stage1[cp >> 8] picks a 256-entry block in stage2.
    block = 1 << BLOCK_SHIFT
    blocks, stage1 = {}, []
    for b in range(N_CP >> BLOCK_SHIFT):
        key = tuple(cats[b * block:(b + 1) * block])
        if key not in blocks:
            blocks[key] = len(blocks)
        stage1.append(blocks[key])
    stage2 = [v for key, _ in sorted(blocks.items(), key=lambda kv: kv[1]) for v in key]

    lower = lowercase_map()
    lruns = lower_runs(lower)

    decomp_index, pool = [], []
    for cp in range(N_CP):
        if 0xAC00 <= cp <= 0xD7A3:
            continue  # Hangul syllables are decomposed arithmetically in unicode.cpp
        d = full_decomposition(cp)
        if d:
            decomp_index.append((cp, len(pool), len(d)))
            pool.extend(d)
    assert len(pool) < 65536 and max(n for _, _, n in decomp_index) < 256

    ccc = runs({cp: ud.combining(chr(cp)) for cp in range(N_CP) if ud.combining(chr(cp))})

    h = []
    h.append('// GENERATED by tools/unicode/gen_tables.py -- do not edit.')
    h.append(f'// Unicode {ud.unidata_version} (unicodedata2 {metadata.version("unicodedata2")}; '
             f'checked equal to regex {regex.__version__}).')
    h.append('#pragma once\n\n#include <cstdint>\n')
    h.append('namespace cera::tokenizer::unicode::generated {\n')
    h.append(f'inline constexpr char kUnicodeVersion[] = "{ud.unidata_version}";')
    h.append(f'inline constexpr int kCategoryBlockShift = {BLOCK_SHIFT};')
    h.append('// Category index (enum Category order) of every code point, two levels.')
    h.append(fmt_array('uint16_t', 'kCategoryStage1', stage1, 32))
    h.append(fmt_array('uint8_t', 'kCategoryStage2', stage2, 32))
    h.append('\nstruct LowerRun {\n  uint32_t first;\n  uint16_t count;\n  uint8_t stride;\n'
             '  int32_t delta;\n};')
    h.append('// Simple lowercase: first + k*stride (k < count) maps to itself + delta.')
    h.append(f'inline constexpr LowerRun kLowerRuns[{len(lruns)}] = {{')
    for f, c, s, d in lruns:
        h.append(f'    {{0x{f:X}, {c}, {s}, {d}}},')
    h.append('};')
    h.append('\nstruct Decomposition {\n  uint32_t cp;\n  uint16_t offset;\n  uint8_t length;\n};')
    h.append('// Full canonical decompositions (except Hangul syllables), sorted by cp.')
    h.append(f'inline constexpr Decomposition kDecompositions[{len(decomp_index)}] = {{')
    for cp, off, n in decomp_index:
        h.append(f'    {{0x{cp:X}, {off}, {n}}},')
    h.append('};')
    h.append(fmt_array('uint32_t', 'kDecompositionPool', pool, 12))
    h.append('\nstruct CombiningRun {\n  uint32_t first;\n  uint32_t last;\n  uint8_t ccc;\n};')
    h.append(f'inline constexpr CombiningRun kCombiningRuns[{len(ccc)}] = {{')
    for f, l, v in ccc:
        h.append(f'    {{0x{f:X}, 0x{l:X}, {v}}},')
    h.append('};')
    h.append('\n}  // namespace cera::tokenizer::unicode::generated')
    os.makedirs(os.path.dirname(OUT_H), exist_ok=True)
    with open(OUT_H, 'w') as f:
        f.write('\n'.join(h) + '\n')
    print(f'{OUT_H}: {len(stage1)} stage1, {len(blocks)} blocks, {len(lruns)} lower runs '
          f'({len(lower)} mappings), {len(decomp_index)} decompositions ({len(pool)} cps), '
          f'{len(ccc)} ccc runs')
    write_fixture(cats, lower)


def write_fixture(cats, lower):
    """One line per sampled code point: hex cp, category, whitespace 0/1, lowercase hex,
    ccc, NFD as hex list ('-' for none). All of U+0000..U+02FF, every code point with a
    decomposition or a lowercase mapping in a random sample, and random others."""
    ws = whitespace_set()
    rng = random.Random(1234)
    sample = set(range(0x300))
    sample |= set(ws)
    sample |= {0xAC00, 0xAC01, 0xD7A3, 0xD7A4, 0x1100, 0x0130, 0x212A, 0x2126, 0x1E9E, 0xFFFD,
               0x10FFFF, 0xD800, 0xDFFF, 0xE000, 0x4E00, 0x9FFF, 0x3400, 0x20000, 0x2FA1F}
    sample |= set(rng.sample(sorted(lower), 400))
    decomposable = [cp for cp in range(N_CP) if full_decomposition(cp)]
    sample |= set(rng.sample(decomposable, 400))
    sample |= set(rng.sample(range(0x300, N_CP), 1500))
    sample |= set(rng.sample(range(0x300, 0x30000), 1500))
    lines = [f'# Generated by tools/unicode/gen_tables.py from unicodedata2 {ud.unidata_version}.',
             '# cp category white_space lower ccc nfd(- when none)']
    for cp in sorted(sample):
        d = full_decomposition(cp) if not (0xD800 <= cp <= 0xDFFF) else None
        nfd = ','.join(f'{x:X}' for x in d) if d else '-'
        lines.append(f'{cp:X} {CATS[cats[cp]]} {int(cp in ws)} {lower.get(cp, cp):X} '
                     f'{ud.combining(chr(cp))} {nfd}')
    os.makedirs(os.path.dirname(OUT_FIXTURE), exist_ok=True)
    with open(OUT_FIXTURE, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print(f'{OUT_FIXTURE}: {len(sample)} code points')


if __name__ == '__main__':
    main()
