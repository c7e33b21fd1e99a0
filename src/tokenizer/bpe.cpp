// BPE merge loop: one symbol per input byte (the GPT-2 mapping makes every byte one character),
// a doubly linked list, and a min-heap of (rank, left position) candidates; stale candidates are
// detected by length, as a symbol only grows by absorbing its right neighbour.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <string>

#include "tokenizer/byte_map.h"

namespace cera::tokenizer {
namespace {

constexpr std::string_view kKeyMerges = "tokenizer.ggml.merges";
constexpr std::string_view kKeyPre = "tokenizer.ggml.pre";

struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t length;  // bytes of the word; 0 once merged away
  int32_t id;
};

struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t right;
  uint32_t length;
  int32_t id;
};

// Heap order: lowest rank first, then the leftmost pair.
bool lower_priority(const Candidate& a, const Candidate& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

struct BpeEncoder::Scratch {
  std::vector<std::string_view> words;
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::string mapped;
};

Result<BpeEncoder> BpeEncoder::from_gguf(const format::GgufFile& file, const Vocab& vocab) {
  BpeEncoder enc;
  // An absent pre-tokenizer name means llama.cpp's "default" rule set.
  const std::string& pre = vocab.pre();
  const std::optional<PreTokenizer> kind = pre_tokenizer_from_name(pre.empty() ? "default" : pre);
  if (!kind) return unsupported("'" + std::string(kKeyPre) + "' = '" + pre + "': unknown pre-tokenizer");
  enc.pre_ = *kind;
  enc.ignore_merges_ = vocab.flags().ignore_merges;

  for (int b = 0; b < 256; ++b) {
    enc.byte_token_[static_cast<size_t>(b)] = vocab.find(byte_to_utf8(static_cast<uint8_t>(b)));
  }

  if (!file.has(kKeyMerges)) return not_found("'" + std::string(kKeyMerges) + "' is missing (needed by a gpt2 vocabulary)");
  CERA_ASSIGN_OR_RETURN(std::vector<std::string> merges, file.get_array<std::string>(kKeyMerges));
  enc.merges_.reserve(merges.size());
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string_view m = merges[i];
    // The separator is the first space after the first byte, so a left part may itself be " ".
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    auto bad = [&](const std::string& why) {
      return corrupt("'" + std::string(kKeyMerges) + "' entry " + std::to_string(i) + " '" +
                     std::string(m) + "': " + why);
    };
    if (space == std::string_view::npos) return bad("expected two parts separated by a space");
    const std::string_view left = m.substr(0, space);
    const std::string_view right = m.substr(space + 1);
    joined.assign(left).append(right);
    const int32_t l = vocab.find(left);
    const int32_t r = vocab.find(right);
    const int32_t id = vocab.find(joined);
    if (l == kNoToken || r == kNoToken) return bad("a part is not a token");
    if (id == kNoToken) return bad("the merged text is not a token");
    // A later duplicate of a pair never wins against the lower rank already stored.
    enc.merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(i), id});
  }
  Scratch scratch;
  enc.encode_word(vocab, "\xEF\xBF\xBD", scratch, enc.replacement_);
  // A vocabulary without U+FFFD's bytes falls back to its unknown token, if it has one.
  if (enc.replacement_.empty() && vocab.special().unk != kNoToken) enc.replacement_.push_back(vocab.special().unk);
  return enc;
}

void BpeEncoder::encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const {
  Scratch scratch;
  pre_tokenize(pre_, text, scratch.words);
  for (std::string_view word : scratch.words) encode_word(vocab, word, scratch, out);
}

void BpeEncoder::encode_word(const Vocab& vocab, std::string_view word, Scratch& scratch,
                             std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    const int32_t id = byte_token_[static_cast<unsigned char>(word[0])];
    if (id != kNoToken) {
      out.push_back(id);
    } else {
      out.insert(out.end(), replacement_.begin(), replacement_.end());
    }
    return;
  }
  if (ignore_merges_) {
    scratch.mapped.clear();
    for (char c : word) scratch.mapped.append(byte_to_utf8(static_cast<uint8_t>(c)));
    if (const int32_t id = vocab.find(scratch.mapped); id != kNoToken) {
      out.push_back(id);
      return;
    }
  }

  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  symbols.clear();
  heap.clear();
  const auto n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols.push_back({i - 1, i + 1 == n ? -1 : i + 1, 1,
                       byte_token_[static_cast<unsigned char>(word[static_cast<size_t>(i)])]});
  }
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    if (l.id == kNoToken || r.id == kNoToken) return;
    const auto it = merges_.find(pair_key(l.id, r.id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, left, right, l.length + r.length, it->second.id});
    std::push_heap(heap.begin(), heap.end(), lower_priority);
  };
  for (int32_t i = 1; i < n; ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& l = symbols[static_cast<size_t>(top.left)];
    Symbol& r = symbols[static_cast<size_t>(top.right)];
    if (l.length == 0 || r.length == 0 || l.length + r.length != top.length) continue;
    l.length += r.length;
    l.id = top.id;
    r.length = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = top.left;
    try_add(l.prev, top.left);
    try_add(top.left, l.next);
  }

  // A byte whose mapped character is not in the vocabulary (never merged: merges need tokens on
  // both sides) becomes U+FFFD.
  for (int32_t i = 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
    const int32_t id = symbols[static_cast<size_t>(i)].id;
    if (id != kNoToken) {
      out.push_back(id);
    } else {
      out.insert(out.end(), replacement_.begin(), replacement_.end());
    }
  }
}

}  // namespace cera::tokenizer
