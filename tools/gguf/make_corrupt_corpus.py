#!/usr/bin/env python3
"""Writes the hand-made corrupt GGUF corpus: tests/fixtures/gguf/corrupt/*.gguf plus EXPECTED,
one line per file: `<file>\t<substring the reader's error must contain>`.

Each file breaks exactly one rule of the format, built byte by byte with struct so the corruption
is deliberate and readable here. The test suite replays every file (tests/format/), and the
libFuzzer target uses the folder as its seed corpus. Run: python3 tools/gguf/make_corrupt_corpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "gguf", "corrupt")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def header(n_tensors, n_kv, version=3, magic=b"GGUF"):
    return magic + struct.pack("<IQQ", version, n_tensors, n_kv)


def kv_u32(key, v):
    return s(key) + struct.pack("<II", U32, v)


def tensor_info(name, shape, type_id, offset):
    return s(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape) + \
        struct.pack("<IQ", type_id, offset)


def pad(b, a=32):
    return b + b"\0" * (-len(b) % a)


def one_tensor(shape, type_id, offset=0, data_bytes=0, extra_kv=b"", n_kv=0):
    body = header(1, n_kv) + extra_kv + tensor_info("w", shape, type_id, offset)
    return pad(body) + b"\x11" * data_bytes


CASES = {
    "empty.gguf": (b"", "file ends inside the magic number"),
    "bad_magic.gguf": (header(0, 0, magic=b"GGML"), "not a GGUF file: magic is 'GGML'"),
    "version1.gguf": (header(0, 0, version=1), "GGUF version 1 is not supported"),
    "version7.gguf": (header(0, 0, version=7), "GGUF version 7, expected 2 or 3"),
    "truncated_counts.gguf": (b"GGUF" + struct.pack("<I", 3) + b"\1\0\0", "file ends inside the tensor count"),
    "huge_kv_count.gguf": (header(0, 1 << 60), "metadata count 1152921504606846976 cannot fit"),
    "huge_tensor_count.gguf": (header(1 << 40, 0), "tensor count 1099511627776 cannot fit"),
    "key_length_past_end.gguf": (header(0, 1) + struct.pack("<Q", 1 << 40) + b"abc" + b"\0" * 16,
                                 "metadata key #0: string length 1099511627776 exceeds"),
    "unknown_value_type.gguf": (header(0, 1) + s("general.x") + struct.pack("<I", 13) + b"\0" * 8,
                                "key 'general.x': unknown value type id 13"),
    "string_value_past_end.gguf": (header(0, 1) + s("general.name") + struct.pack("<IQ", STR, 500) + b"abc",
                                   "key 'general.name': string length 500 exceeds"),
    "array_length_past_end.gguf": (header(0, 1) + s("tokenizer.ggml.scores") +
                                   struct.pack("<IIQ", ARR, F32, 1 << 50) + b"\0" * 16,
                                   "key 'tokenizer.ggml.scores': array length 1125899906842624 of float32"),
    "string_array_past_end.gguf": (header(0, 1) + s("tokenizer.ggml.tokens") +
                                   struct.pack("<IIQ", ARR, STR, 3) + s("a") + s("b"),
                                   "key 'tokenizer.ggml.tokens': array length 3 of string"),
    "unknown_array_type.gguf": (header(0, 1) + s("a") + struct.pack("<IIQ", ARR, 99, 1) + b"\0" * 8,
                                "key 'a': unknown array element type id 99"),
    "bad_bool.gguf": (header(0, 1) + s("tokenizer.ggml.add_bos_token") + struct.pack("<IB", BOOL, 2),
                      "key 'tokenizer.ggml.add_bos_token': bool byte is 2"),
    "duplicate_key.gguf": (header(0, 2) + kv_u32("llama.block_count", 1) + kv_u32("llama.block_count", 2),
                           "duplicate metadata key 'llama.block_count'"),
    "nested_too_deep.gguf": (header(0, 1) + s("deep") + struct.pack("<I", ARR) +
                             struct.pack("<IQ", ARR, 1) * 10 + struct.pack("<IQ", U8, 0),
                             "arrays nested deeper than 8"),
    "alignment_zero.gguf": (header(0, 1) + kv_u32("general.alignment", 0),
                            "key 'general.alignment': 0 is not a power of two"),
    "alignment_three.gguf": (header(0, 1) + kv_u32("general.alignment", 3),
                             "key 'general.alignment': 3 is not a power of two"),
    "alignment_string.gguf": (header(0, 1) + s("general.alignment") + struct.pack("<I", STR) + s("32"),
                              "key 'general.alignment': expected uint32, found string"),
    "zero_dims.gguf": (header(1, 0) + tensor_info("w", [], 0, 0), "tensor 'w': dimension count 0, expected 1..4"),
    "five_dims.gguf": (header(1, 0) + tensor_info("w", [1, 1, 1, 1, 1], 0, 0),
                       "tensor 'w': dimension count 5, expected 1..4"),
    "zero_dimension.gguf": (one_tensor([4, 0], 0), "tensor 'w': dimension 1 is 0"),
    "removed_type.gguf": (one_tensor([32], 4, data_bytes=32), "tensor 'w': unknown tensor type id 4"),
    "unknown_type.gguf": (one_tensor([32], 1000, data_bytes=32), "tensor 'w': unknown tensor type id 1000"),
    "element_overflow.gguf": (one_tensor([1 << 32, 1 << 32], 0), "tensor 'w': element count overflows"),
    "byte_size_overflow.gguf": (one_tensor([1 << 62], 0), "tensor 'w': byte size overflows"),
    "row_not_blocks.gguf": (one_tensor([33, 2], 2, data_bytes=64),
                            "tensor 'w': row of 33 elements is not a multiple of the Q4_0 block size 32"),
    "kquant_row.gguf": (one_tensor([128], 12, data_bytes=144),
                        "tensor 'w': row of 128 elements is not a multiple of the Q4_K block size 256"),
    "misaligned_offset.gguf": (one_tensor([4], 0, offset=4, data_bytes=64),
                               "tensor 'w': data offset 4 is not a multiple of the alignment 32"),
    "data_past_end.gguf": (one_tensor([64, 64], 0, data_bytes=100), "tensor 'w': data [0, +16384) runs past"),
    "offset_past_end.gguf": (one_tensor([4], 0, offset=1 << 40, data_bytes=16), "tensor 'w': data [1099511627776"),
    "duplicate_tensor.gguf": (pad(header(2, 0) + tensor_info("w", [4], 0, 0) + tensor_info("w", [4], 0, 32)) +
                              b"\0" * 64, "duplicate tensor 'w'"),
    "truncated_tensor_info.gguf": (header(1, 0) + s("w") + struct.pack("<IQ", 1, 4) + struct.pack("<I", 0),
                                   "file ends inside tensor 'w' offset"),
    "no_data_section.gguf": (header(1, 0) + tensor_info("w", [4], 0, 0) + b"\0",
                             "before the tensor data section"),
    "v2_truncated_kv.gguf": (header(0, 2, version=2) + kv_u32("a", 1) + s("b") + struct.pack("<I", U64) + b"\1\2",
                             "file ends inside key 'b'"),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    lines = []
    for name, (data, expected) in sorted(CASES.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        lines.append(f"{name}\t{expected}\n")
    with open(os.path.join(OUT, "EXPECTED"), "w") as f:
        f.writelines(lines)
    print(f"wrote {len(CASES)} corrupt files to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
