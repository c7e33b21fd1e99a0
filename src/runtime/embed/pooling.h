// Pooling: how one text's token vectors (the model's final hidden states) become its embedding,
// and the L2 normalisation applied after it. Closed set, llama.cpp's `--pooling` names.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace cera::runtime::embed {

enum class Pooling : uint8_t {
  kNone,  // every token's vector, token-major: [n_embd * n_tokens]
  kMean,  // the average over all tokens, special tokens included (as sentence-transformers)
  kCls,   // the first token's (BERT's [CLS])
  kLast,  // the last token's (decoder embedding models: the only one that saw the whole text)
};

std::string_view pooling_name(Pooling p);  // "none", "mean", "cls", "last"
std::optional<Pooling> pooling_from_name(std::string_view name);
// llama.cpp's `<arch>.pooling_type` numbering (0 none, 1 mean, 2 cls, 3 last); others: nullopt.
std::optional<Pooling> pooling_from_gguf(int32_t type);

// Rows of one text: hidden [n_tokens][n_embd] -> [n_embd] (kNone: a copy of all rows).
std::vector<float> pool(std::span<const float> hidden, int32_t n_embd, Pooling p);

// Scales each consecutive n_embd-vector of `values` to L2 norm 1 (a zero vector stays zero,
// like torch.nn.functional.normalize's eps).
void l2_normalize(std::span<float> values, int32_t n_embd);

}  // namespace cera::runtime::embed
