#!/usr/bin/env python3
"""Regenerate the quantization fixtures in tests/fixtures/quant/ from the gguf Python package.

The gguf package's gguf/quants.py is the oracle for cera's reference block formats: this script
records its dequantized output for random blocks, and its quantized bytes for random normal
input, so the C++ tests (tests/quant/) check bit-exactness without Python at test time.

Run (from the repository root; the output is deterministic for a given gguf/numpy version):
    python3 -m venv /tmp/quantenv && /tmp/quantenv/bin/pip install gguf==0.19.0 numpy
    /tmp/quantenv/bin/python tools/quant/make_fixtures.py [--out tests/fixtures/quant]

File format (all little-endian), one file per (kind, type):
    dequant_<TYPE>.bin / quant_<TYPE>.bin
    offset 0   char[8]  magic "CERAQFX1"
           8   u32      kind: 1 = dequantize (blocks -> floats), 2 = quantize (floats -> blocks)
           12  u32      GGUF type id
           16  u64      n: element count (a multiple of the block size)
           24  u64      nbytes: bytes of block data (n / block_size * type_size)
           32  u64      n_random: the first n_random elements are the random part (statistics,
                        e.g. RMSE, use only these); the rest are hand-picked edge cases
           40  payload  kind 1: nbytes block bytes, then n float32 = gguf.dequantize(blocks)
                        kind 2: n float32 input, then nbytes block bytes = gguf.quantize(input)

Random blocks are random bytes except the fp16 scale fields, which are drawn log-uniformly from
[1e-6, 1] with a random sign so NaN/Inf never hide a mismatch; the edge blocks put zeros, +-0,
subnormals, the smallest normal, 1.0 and +-65504 into the scale fields with fixed code patterns.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import pathlib
import struct

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

SEED = 20240611
MAGIC = b"CERAQFX1"
KIND_DEQUANT = 1
KIND_QUANT = 2

# Byte offsets of the fp16 scale fields inside one block (FORMATS.md / src/quant/blocks.h).
HALF_FIELDS: dict[T, list[int]] = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0],
}
# Block types whose dequantizer cera must match bit for bit (plain types handled separately).
BLOCK_TYPES = list(HALF_FIELDS)
N_RANDOM_BLOCKS = {32: 256, 256: 96}
# (fp16 bits for every scale field, code byte pattern or None for random bytes)
EDGE_BLOCKS = [(0x0000, None), (0x8000, 0xFF), (0x0001, None), (0x03FF, 0xAA),
               (0x0400, 0x55), (0x7BFF, 0xFF), (0xFBFF, 0x00), (0x3C00, None)]
# Types the gguf package can quantize, among cera's quantizers.
QUANT_TYPES = [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]


def write_fixture(path: pathlib.Path, kind: int, qtype: T, n: int, n_random: int,
                  blocks: np.ndarray, floats: np.ndarray) -> None:
    blocks = np.ascontiguousarray(blocks, dtype=np.uint8).reshape(-1)
    floats = np.ascontiguousarray(floats, dtype="<f4").reshape(-1)
    assert floats.size == n
    header = MAGIC + struct.pack("<IIQQQ", kind, int(qtype), n, blocks.size, n_random)
    payload = [blocks.tobytes(), floats.tobytes()]
    if kind == KIND_QUANT:
        payload.reverse()
    path.write_bytes(header + b"".join(payload))


def random_halves(rng: np.random.Generator, count: int) -> np.ndarray:
    mag = 10.0 ** rng.uniform(-6.0, 0.0, size=count)
    sign = np.where(rng.random(count) < 0.5, -1.0, 1.0)
    return (sign * mag).astype(np.float16).view(np.uint16)


def random_blocks(rng: np.random.Generator, qtype: T) -> tuple[np.ndarray, int]:
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    n_rand = N_RANDOM_BLOCKS[block_size]
    blocks = rng.integers(0, 256, size=(n_rand + len(EDGE_BLOCKS), type_size), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        blocks[:n_rand, off:off + 2] = random_halves(rng, n_rand).view(np.uint8).reshape(-1, 2)
    for i, (half_bits, pattern) in enumerate(EDGE_BLOCKS):
        row = blocks[n_rand + i]
        if pattern is not None:
            row[:] = pattern
        for off in HALF_FIELDS[qtype]:
            row[off:off + 2] = np.array([half_bits], dtype="<u2").view(np.uint8)
    return blocks, n_rand * block_size


def plain_dequant(rng: np.random.Generator, qtype: T) -> tuple[np.ndarray, int]:
    n_rand = 4096
    if qtype == T.F32:
        bits = rng.integers(0, 2**32, size=n_rand, dtype=np.uint32)
        special = np.array([0, 0x80000000, 1, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
                            0x7F800001], dtype=np.uint32)
        return np.concatenate([bits, special]).view(np.uint8), n_rand
    bits = rng.integers(0, 2**16, size=n_rand, dtype=np.uint16)
    special = np.array([0, 0x8000, 1, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01,
                        0xFFFF, 0x3C00], dtype=np.uint16)
    return np.concatenate([bits, special]).view(np.uint8), n_rand


def quant_input(rng: np.random.Generator, qtype: T) -> tuple[np.ndarray, int]:
    normal = rng.standard_normal(256 * 32).astype(np.float32)
    if qtype in (T.F16, T.BF16):
        # Wide dynamic range: subnormal, normal and overflowing results, plus specials and ties.
        wide = (rng.standard_normal(2048) * 10.0 ** rng.uniform(-9, 6, size=2048)).astype(np.float32)
        ties = np.array([1 + 2**-11, 1 + 3 * 2**-11, 65520.0, 65519.0, 2**-25, 3 * 2**-26,
                         1 + 2**-8, 1 + 3 * 2**-8], dtype=np.float32)
        ties = np.concatenate([ties, -ties])
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, -3.4e38],
                           dtype=np.float32)
        edges = np.concatenate([wide, ties, special])
        return np.concatenate([normal, edges]), normal.size
    edge_rows = [
        np.zeros(32),                                   # all zero: d = 0, id = 0
        np.full(32, 0.5),                               # constant
        np.r_[100.0, rng.standard_normal(31)],          # one outlier
        np.r_[-3.0, 3.0, rng.uniform(-3, 3, 30)],       # |max| tie: first element wins
        np.r_[3.0, -3.0, rng.uniform(-3, 3, 30)],
        rng.standard_normal(32) * 1e-30,                # d underflows fp16, 1/d still finite
        rng.standard_normal(32) * 1e6,                  # d overflows fp16 to inf for Q4/Q5
        np.arange(-16, 16) / 8.0,                       # exact grid points: rounding ties
        np.abs(rng.standard_normal(32)) + 1.0,          # all positive (min > 0)
        -np.abs(rng.standard_normal(32)) - 1.0,         # all negative
    ]
    edges = np.concatenate(edge_rows).astype(np.float32)
    return np.concatenate([normal, edges]), normal.size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tests/fixtures/quant", type=pathlib.Path)
    args = parser.parse_args()
    version = importlib.metadata.version("gguf")
    if version != "0.19.0":
        raise SystemExit(f"fixtures are pinned to gguf==0.19.0, found {version}")
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)

    for qtype in [T.F32, T.F16, T.BF16]:
        raw, n_rand = plain_dequant(rng, qtype)
        out = np.asarray(gguf.dequantize(raw, qtype), dtype=np.float32).reshape(-1)
        write_fixture(args.out / f"dequant_{qtype.name}.bin", KIND_DEQUANT, qtype, out.size,
                      n_rand, raw, out)

    for qtype in BLOCK_TYPES:
        blocks, n_rand = random_blocks(rng, qtype)
        out = np.asarray(gguf.dequantize(blocks.reshape(-1), qtype), dtype=np.float32).reshape(-1)
        write_fixture(args.out / f"dequant_{qtype.name}.bin", KIND_DEQUANT, qtype, out.size,
                      n_rand, blocks, out)

    for qtype in QUANT_TYPES:
        x, n_rand = quant_input(rng, qtype)
        with np.errstate(all="ignore"):
            q = np.asarray(gguf.quantize(x.reshape(1, -1), qtype)).view(np.uint8).reshape(-1)
        write_fixture(args.out / f"quant_{qtype.name}.bin", KIND_QUANT, qtype, x.size, n_rand,
                      q, x)

    total = sum(p.stat().st_size for p in args.out.glob("*.bin"))
    print(f"wrote {len(list(args.out.glob('*.bin')))} fixtures, {total / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
