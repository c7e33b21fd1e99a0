// Reader for the parity fixtures' expected logits (tests/fixtures/parity/<name>/logits.bin,
// written by tools/parity/make_fixtures.py). Header-only so any test binary can include it.
// Format, little-endian: 8 bytes "CERALOGT", u32 version (1), u32 n_vocab, u32 n_seqs, then per
// sequence u32 n_tokens, i32 tokens[n_tokens], f32 logits[n_tokens][n_vocab] (every position).
// logits.bin = transformers on the safetensors; logits_gguf.bin (not for granite, lfm2moe,
// lfm2_conv: see has_gguf_reference) = transformers
// on the GGUF `cera convert --type f32` wrote. Pass criterion (TESTING.md, oracle 3):
// max |delta| / max |expected| < 1e-4 and the same argmax at every position.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/status.h"
#include "test_paths.h"

namespace cera::test {

struct LogitsSequence {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // [n_tokens][n_vocab] row-major, one row per position
};

struct ExpectedLogits {
  uint32_t n_vocab = 0;
  std::vector<LogitsSequence> sequences;
};

// The fixture names, each a Hugging Face folder under tests/fixtures/parity/.
inline std::vector<std::string> parity_fixture_names() {
  return {"llama", "llama3_rope", "mistral", "qwen2", "qwen3", "granite", "lfm2", "lfm2moe", "qwen3moe", "lfm2_conv"};
}
// Whether transformers' GGUF loader could judge the fixture's GGUF (logits_gguf.bin exists): it
// has no granite or lfm2moe, and its lfm2 config needs at least one attention layer.
inline bool has_gguf_reference(const std::string& name) {
  return name != "granite" && name != "lfm2moe" && name != "lfm2_conv";
}
inline std::filesystem::path parity_fixture_dir(const std::string& name) {
  return source_dir() / "tests" / "fixtures" / "parity" / name;
}

inline Result<ExpectedLogits> load_expected_logits(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open '" + path.string() + "'");
  const std::vector<char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t pos = 0;
  auto take = [&](void* dst, size_t n) {
    if (b.size() - pos < n) return false;
    std::memcpy(dst, b.data() + pos, n);
    pos += n;
    return true;
  };
  char magic[8];
  uint32_t version = 0, n_seqs = 0;
  ExpectedLogits out;
  if (!take(magic, 8) || std::memcmp(magic, "CERALOGT", 8) != 0) return corrupt(path.string() + ": bad magic");
  if (!take(&version, 4) || version != 1) return corrupt(path.string() + ": unsupported version");
  if (!take(&out.n_vocab, 4) || !take(&n_seqs, 4) || n_seqs > 1024 || out.n_vocab > (1u << 22)) {
    return corrupt(path.string() + ": bad header");
  }
  for (uint32_t s = 0; s < n_seqs; ++s) {
    uint32_t n = 0;
    if (!take(&n, 4) || n > (1u << 16)) return corrupt(path.string() + ": bad sequence length");
    LogitsSequence seq;
    seq.tokens.resize(n);
    seq.logits.resize(uint64_t{n} * out.n_vocab);
    if (!take(seq.tokens.data(), 4ull * n) || !take(seq.logits.data(), 4 * seq.logits.size())) {
      return corrupt(path.string() + ": truncated at sequence " + std::to_string(s));
    }
    out.sequences.push_back(std::move(seq));
  }
  if (pos != b.size()) return corrupt(path.string() + ": trailing bytes");
  return out;
}

}  // namespace cera::test
