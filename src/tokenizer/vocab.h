// The vocabulary of a GGUF file (tokenizer.ggml.* keys): token texts, scores, types, special ids
// and flags, validated once. Token texts live in one contiguous buffer; the piece->id map stores
// ids only and compares against that buffer, so lookups by string_view never allocate.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"
#include "tokenizer/piece_map.h"

namespace cera::tokenizer {

inline constexpr int32_t kNoToken = -1;

// tokenizer.ggml.model: which encoding algorithm the vocabulary was made for.
enum class ModelKind {
  kSpm,        // "llama": SentencePiece-style score merges with byte fallback
  kBpe,        // "gpt2": byte-level BPE with ranked merges
  kWordPiece,  // "bert": BERT basic tokenization + greedy longest match
};
std::string_view model_kind_name(ModelKind kind);

// tokenizer.ggml.token_type; the numbers are the file's.
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct SpecialIds {
  int32_t bos = kNoToken;
  int32_t eos = kNoToken;
  int32_t eot = kNoToken;
  int32_t eom = kNoToken;
  int32_t unk = kNoToken;
  int32_t pad = kNoToken;
  int32_t sep = kNoToken;
  int32_t cls = kNoToken;
  int32_t mask = kNoToken;
};

struct VocabFlags {
  bool add_bos = false;
  bool add_eos = false;
  bool add_sep = false;           // WordPiece: [SEP] after the text
  bool add_space_prefix = false;  // SPM: one space before the text and after each special token
  bool ignore_merges = false;     // BPE: a whole pre-token found in the vocab is taken as is
  bool lowercase = false;         // WordPiece normalizer
  bool strip_accents = false;     // WordPiece normalizer
};

class Vocab {
 public:
  // Reads and validates every tokenizer.ggml.* key; an inconsistency is an error naming the key.
  static Result<Vocab> from_gguf(const format::GgufFile& file);

  // Movable (the piece map holds ids only; texts are looked up through text()).
  Vocab(Vocab&&) = default;
  Vocab& operator=(Vocab&&) = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  ModelKind kind() const { return kind_; }
  const std::string& pre() const { return pre_; }  // tokenizer.ggml.pre ("" when absent)
  int32_t n_tokens() const { return static_cast<int32_t>(types_.size()); }
  bool valid_id(int32_t id) const { return id >= 0 && id < n_tokens(); }

  // Preconditions for the accessors taking an id: valid_id(id).
  std::string_view text(int32_t id) const {
    return {texts_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]};
  }
  float score(int32_t id) const { return scores_.empty() ? 0.0f : scores_[id]; }
  TokenType type(int32_t id) const { return types_[id]; }
  // Control, unknown and user-defined tokens: the ones text is partitioned on before encoding.
  bool is_special(int32_t id) const {
    const TokenType t = types_[id];
    return t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUserDefined;
  }
  // The id whose text is exactly `piece`, or kNoToken (empty tokens are never found).
  int32_t find(std::string_view piece) const {
    return piece_to_id_.find(piece, [this](int32_t id) { return text(id); });
  }
  size_t max_token_bytes() const { return max_token_bytes_; }

  const SpecialIds& special() const { return special_; }
  const VocabFlags& flags() const { return flags_; }
  // Ids that end generation: eos, eot, eom and tokens known by their text (<|im_end|> ...).
  const std::vector<int32_t>& end_of_generation() const { return eog_; }

 private:
  Vocab() = default;
  Status load_tokens(const format::GgufFile& file);
  Status load_special(const format::GgufFile& file);
  Status load_flags(const format::GgufFile& file);
  void find_end_of_generation();

  ModelKind kind_ = ModelKind::kSpm;
  std::string pre_;
  std::vector<char> texts_;       // every token's text, back to back
  std::vector<size_t> offsets_;   // n_tokens + 1 offsets into texts_
  std::vector<float> scores_;     // empty when the file has none
  std::vector<TokenType> types_;  // one per token
  PieceMap piece_to_id_;
  size_t max_token_bytes_ = 0;
  SpecialIds special_;
  VocabFlags flags_;
  std::vector<int32_t> eog_;
};

}  // namespace cera::tokenizer
