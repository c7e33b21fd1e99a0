#!/usr/bin/env python3
"""Writes tests/fixtures/gguf/reference.gguf with the `gguf` Python package (pip gguf==0.19.0),
the ecosystem's own writer: every metadata value type, arrays of each, a nested array, and a few
tensors of plain and block types. tests/format/ reads it back (values listed here are asserted
there) and checks that cera's writer, given the same content, produces the identical bytes.
Run: python3 tools/gguf/make_reference_file.py
"""
import os

import gguf
import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "gguf", "reference.gguf")
GT = gguf.GGUFValueType


def main():
    w = gguf.GGUFWriter(OUT, arch="testarch")
    w.add_key_value("t.u8", 200, GT.UINT8)
    w.add_key_value("t.i8", -100, GT.INT8)
    w.add_key_value("t.u16", 60000, GT.UINT16)
    w.add_key_value("t.i16", -30000, GT.INT16)
    w.add_key_value("t.u32", 4000000000, GT.UINT32)
    w.add_key_value("t.i32", -2000000000, GT.INT32)
    w.add_key_value("t.f32", 0.15625, GT.FLOAT32)
    w.add_key_value("t.bool", True, GT.BOOL)
    w.add_key_value("t.str", "héllo ▁wörld", GT.STRING)
    w.add_key_value("t.u64", 18000000000000000000, GT.UINT64)
    w.add_key_value("t.i64", -9000000000000000000, GT.INT64)
    w.add_key_value("t.f64", 2.5e-300, GT.FLOAT64)
    w.add_key_value("t.arr_i32", [1, -2, 3], GT.ARRAY, sub_type=GT.INT32)
    w.add_key_value("t.arr_f32", [0.5, -1.25], GT.ARRAY, sub_type=GT.FLOAT32)
    w.add_key_value("t.arr_str", ["a", "", "ccc"], GT.ARRAY, sub_type=GT.STRING)
    w.add_key_value("t.arr_bool", [True, False, True], GT.ARRAY, sub_type=GT.BOOL)
    w.add_key_value("t.nested", [[1, 2], [3]], GT.ARRAY)
    rng = np.random.default_rng(1)
    w.add_tensor("plain.f32", rng.standard_normal((2, 3)).astype(np.float32))
    w.add_tensor("plain.f16", rng.standard_normal(5).astype(np.float16))
    q8 = rng.integers(0, 256, size=(2, 34), dtype=np.uint8)
    q8[:, 1] = 0x3c  # keep the fp16 scales finite
    w.add_tensor("block.q8_0", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", os.path.normpath(OUT))


if __name__ == "__main__":
    main()
