// Builds the VocabIndex. Sorting compares bytes as unsigned (std::string_view's order), which is
// the byte order a trie walk visits children in.
#include "runtime/grammar/vocab_index.h"

#include <algorithm>

namespace cera::runtime::grammar {

std::shared_ptr<const VocabIndex> VocabIndex::from_tokenizer(const tokenizer::Tokenizer& tok) {
  const tokenizer::Vocab& vocab = tok.vocab();
  const int32_t n = tok.n_vocab();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<TokenRole> roles(static_cast<size_t>(n), TokenRole::kText);
  for (int32_t id = 0; id < n; ++id) {
    bytes[id] = std::string(tok.token_piece(id));
    const tokenizer::TokenType t = vocab.type(id);
    if (t == tokenizer::TokenType::kControl || t == tokenizer::TokenType::kUnknown ||
        t == tokenizer::TokenType::kUnused) {
      roles[id] = TokenRole::kNever;
    }
  }
  for (int32_t id : vocab.end_of_generation()) {
    if (vocab.valid_id(id)) roles[id] = TokenRole::kEndOfGeneration;
  }
  return from_pieces(std::move(bytes), std::move(roles));
}

std::shared_ptr<const VocabIndex> VocabIndex::from_pieces(std::vector<std::string> bytes,
                                                          std::vector<TokenRole> roles) {
  std::shared_ptr<VocabIndex> v(new VocabIndex());
  v->roles_ = std::move(roles);
  v->offsets_.push_back(0);
  for (size_t id = 0; id < v->roles_.size(); ++id) {
    const std::string& b = id < bytes.size() ? bytes[id] : std::string();
    v->bytes_ += b;
    v->offsets_.push_back(v->bytes_.size());
    if (v->roles_[id] == TokenRole::kText && b.empty()) v->roles_[id] = TokenRole::kNever;
  }
  v->index();
  return v;
}

void VocabIndex::index() {
  for (int32_t id = 0; id < n_vocab(); ++id) {
    if (roles_[id] == TokenRole::kText) sorted_.push_back(id);
    if (roles_[id] == TokenRole::kEndOfGeneration) end_tokens_.push_back(id);
  }
  std::stable_sort(sorted_.begin(), sorted_.end(),
                   [this](int32_t a, int32_t b) { return bytes(a) < bytes(b); });
  lcp_.assign(sorted_.size(), 0);
  for (size_t k = 0; k < sorted_.size(); ++k) {
    const std::string_view b = bytes(sorted_[k]);
    max_len_ = std::max<uint32_t>(max_len_, static_cast<uint32_t>(b.size()));
    if (k == 0) continue;
    const std::string_view a = bytes(sorted_[k - 1]);
    uint32_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
    lcp_[k] = l;
  }
  sorted_offsets_.push_back(0);
  for (int32_t id : sorted_) {
    sorted_bytes_ += bytes(id);
    sorted_offsets_.push_back(sorted_bytes_.size());
  }
  // Next smaller lcp, by a stack of indexes with increasing lcp.
  const uint32_t n = static_cast<uint32_t>(sorted_.size());
  skip_.assign(n, n);
  std::vector<uint32_t> open;
  for (uint32_t k = 0; k < n; ++k) {
    while (!open.empty() && lcp_[k] < lcp_[open.back()]) {
      skip_[open.back()] = k;
      open.pop_back();
    }
    open.push_back(k);
  }
}

}  // namespace cera::runtime::grammar
