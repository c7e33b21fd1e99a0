// SmolLM2's vocabulary as a VocabIndex for the grammar tests, loaded once per test process
// from the model cache (scripts/pull-model.sh smollm2 installs it). nullptr when not installed:
// the calling test skips with kSmollm2Missing.
#pragma once

#include <filesystem>
#include <memory>

#include "format/gguf.h"
#include "model_cache.h"
#include "runtime/grammar/vocab_index.h"
#include "tokenizer/tokenizer.h"

namespace cera::runtime::grammar::test {

inline constexpr const char* kSmollm2Missing =
    "SmolLM2-135M-Instruct.Q4_1.gguf is not in the model cache: run `bash scripts/pull-model.sh smollm2`";

inline const tokenizer::Tokenizer* smollm2_tokenizer() {
  static const std::unique_ptr<tokenizer::Tokenizer> tok = []() -> std::unique_ptr<tokenizer::Tokenizer> {
    const auto path = cera::test::model_cache() / "SmolLM2-135M-Instruct.Q4_1.gguf";
    if (!std::filesystem::exists(path)) return nullptr;
    auto file = format::GgufFile::open(path);
    if (!file.ok()) return nullptr;
    auto t = tokenizer::Tokenizer::from_gguf(*file);
    if (!t.ok()) return nullptr;
    return std::make_unique<tokenizer::Tokenizer>(std::move(t).value());
  }();
  return tok.get();
}

inline std::shared_ptr<const VocabIndex> smollm2_vocab() {
  static const std::shared_ptr<const VocabIndex> v = []() -> std::shared_ptr<const VocabIndex> {
    const tokenizer::Tokenizer* tok = smollm2_tokenizer();
    return tok == nullptr ? nullptr : VocabIndex::from_tokenizer(*tok);
  }();
  return v;
}

}  // namespace cera::runtime::grammar::test
