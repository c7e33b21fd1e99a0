// The stories260K reference model (shared/models), imported once per test process into a GGUF
// with cera's llama2.c importer. Header-only so any test binary linking cera_format can use it.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "format/gguf_writer.h"
#include "format/llama2c_import.h"
#include "test_paths.h"

namespace cera::test {

inline std::filesystem::path stories_gguf() {
  static const std::filesystem::path path = [] {
    const auto out = temp_dir() / "stories260K.gguf";
    const Status st = format::convert_llama2c({.checkpoint = shared_dir() / "models/stories260K.bin",
                                               .tokenizer = shared_dir() / "models/tok512.bin",
                                               .output = out});
    if (!st.ok()) throw std::runtime_error("cannot import stories260K: " + st.to_string());
    return out;
  }();
  return path;
}

// stories260K cut to its first layer (block_count 1, blk.1..4 dropped). With one layer, a
// token's K/V depend on the token alone, not on the context, so a shifted cache must equal a
// fresh run's exactly (up to RoPE rounding): the model for exact context-shift tests.
inline std::filesystem::path stories_one_layer_gguf() {
  static const std::filesystem::path path = [] {
    auto f = format::GgufFile::open(stories_gguf());
    if (!f.ok()) throw std::runtime_error(f.status().to_string());
    format::GgufWriter w;
    for (const auto& kv : f->metadata()) w.set(kv.key, kv.value);
    w.set_u32("llama.block_count", 1);
    for (const auto& t : f->tensors()) {
      if (t.name.rfind("blk.", 0) == 0 && t.name.rfind("blk.0.", 0) != 0) continue;
      if (!w.add_tensor_view({t.name, t.dtype, t.shape}, f->tensor_data(t)).ok()) throw std::runtime_error(t.name);
    }
    const auto out = temp_dir() / "stories260K-1layer.gguf";
    if (!w.write(out).ok()) throw std::runtime_error("cannot write " + out.string());
    return out;
  }();
  return path;
}

inline std::string stories_reference_text() {
  std::ifstream in(shared_dir() / "models/stories260K.greedy-256.txt", std::ios::binary);
  if (!in) throw std::runtime_error("missing shared/models/stories260K.greedy-256.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace cera::test
