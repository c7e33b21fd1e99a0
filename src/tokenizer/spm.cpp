// SPM merge loop over a linked list of symbols with a max-heap of candidate bigrams. Every merged
// symbol is a vocabulary token by construction (a bigram is queued only if its text is one), so
// unlike llama.cpp no reverse-merge map is kept: a symbol's id is known the moment it forms.
#include "tokenizer/spm.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "tokenizer/unicode/unicode.h"

namespace cera::tokenizer {
namespace {

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // U+2581

struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t offset;  // into the escaped text
  uint32_t length;  // bytes; 0 once merged into its left neighbour
  int32_t id;       // kNoToken for a single character that is not a token
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t length;  // left + right length when queued; a mismatch later means it is stale
  int32_t id;
};

// Heap order: highest score first, then the leftmost pair (the reference's tie rule).
bool lower_priority(const Bigram& a, const Bigram& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

struct SpmEncoder::Scratch {
  std::string escaped;
  std::vector<Symbol> symbols;
  std::vector<Bigram> heap;
};

namespace {

// True when a U+2581 starts at `at` and the character before it (if any) is not one.
bool starts_space_run(std::string_view s, size_t at) {
  if (s.compare(at, kEscapedSpace.size(), kEscapedSpace) != 0) return false;
  return at == 0 || at < kEscapedSpace.size() ||
         s.compare(at - kEscapedSpace.size(), kEscapedSpace.size(), kEscapedSpace) != 0;
}

}  // namespace

SpmEncoder::SpmEncoder(const Vocab& vocab) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    int32_t id = vocab.find(hex);
    const char raw = static_cast<char>(b);
    if (id == kNoToken) id = vocab.find(std::string_view(&raw, 1));
    if (id == kNoToken) id = vocab.special().unk;
    byte_token_[static_cast<size_t>(b)] = id;
  }
  split_at_spaces_ = true;
  for (int32_t id = 0; id < vocab.n_tokens() && split_at_spaces_; ++id) {
    const std::string_view t = vocab.text(id);
    for (size_t at = t.find(kEscapedSpace, 1); at != std::string_view::npos;
         at = t.find(kEscapedSpace, at + 1)) {
      if (starts_space_run(t, at)) {
        split_at_spaces_ = false;
        break;
      }
    }
  }
}

void SpmEncoder::encode(const Vocab& vocab, std::string_view text, bool space_prefix,
                        std::vector<int32_t>& out) const {
  Scratch scratch;
  std::string& escaped = scratch.escaped;
  escaped.reserve((text.size() + 1) * 3);
  if (space_prefix) escaped.append(kEscapedSpace);
  for (char c : text) {
    if (c == ' ') {
      escaped.append(kEscapedSpace);
    } else {
      escaped.push_back(c);
    }
  }
  const std::string_view s = escaped;
  if (!split_at_spaces_) {
    encode_chunk(vocab, s, scratch, out);
    return;
  }
  size_t chunk = 0;
  for (size_t at = s.find(kEscapedSpace, 1); at != std::string_view::npos;
       at = s.find(kEscapedSpace, at + 1)) {
    if (!starts_space_run(s, at)) continue;
    encode_chunk(vocab, s.substr(chunk, at - chunk), scratch, out);
    chunk = at;
  }
  encode_chunk(vocab, s.substr(chunk), scratch, out);
}

void SpmEncoder::encode_chunk(const Vocab& vocab, std::string_view s, Scratch& scratch,
                              std::vector<int32_t>& out) const {
  if (s.empty()) return;
  std::vector<Symbol>& symbols = scratch.symbols;
  std::vector<Bigram>& heap = scratch.heap;
  symbols.clear();
  heap.clear();
  // One symbol per character. An invalid byte is a symbol of its own (llama.cpp trusts the lead
  // byte instead and can swallow the next character, even an escaped space, into a bad one).
  for (size_t at = 0; at < s.size();) {
    size_t end = at;
    unicode::decode_utf8(s, end);
    const size_t len = end - at;
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, at + len == s.size() ? -1 : index + 1, static_cast<uint32_t>(at),
                       static_cast<uint32_t>(len), vocab.find(s.substr(at, len))});
    at += len;
  }

  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const uint32_t length = l.length + r.length;
    const int32_t id = vocab.find(s.substr(l.offset, length));
    if (id == kNoToken) return;
    heap.push_back({vocab.score(id), left, right, length, id});
    std::push_heap(heap.begin(), heap.end(), lower_priority);
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    const Bigram top = heap.back();
    heap.pop_back();
    Symbol& l = symbols[static_cast<size_t>(top.left)];
    Symbol& r = symbols[static_cast<size_t>(top.right)];
    // Stale: one side was merged away, or the right side grew since this pair was queued.
    if (l.length == 0 || r.length == 0 || l.length + r.length != top.length) continue;
    l.length += r.length;
    l.id = top.id;
    r.length = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = top.left;
    try_add(l.prev, top.left);
    try_add(top.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& sym = symbols[static_cast<size_t>(i)];
    if (sym.id != kNoToken) {
      out.push_back(sym.id);
      continue;
    }
    for (uint32_t k = 0; k < sym.length; ++k) {
      const int32_t id = byte_token_[static_cast<unsigned char>(s[sym.offset + k])];
      if (id != kNoToken) out.push_back(id);
    }
  }
}

}  // namespace cera::tokenizer
