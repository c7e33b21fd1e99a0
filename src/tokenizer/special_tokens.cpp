// Special-token partition (see special_tokens.h). Each candidate costs one pass of
// string_view::find over the remaining text; a candidate whose first byte never occurs in the
// input is skipped outright, which makes vocabularies with hundreds of added tokens cheap.
#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <bitset>

namespace cera::tokenizer {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) {
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    if (!vocab.is_special(id) || vocab.text(id).empty()) continue;
    all_.push_back(id);
    if (vocab.type(id) == TokenType::kUserDefined) user_defined_.push_back(id);
  }
  // Longest first; equal lengths by id so the order never depends on the sort implementation.
  auto longer = [&](int32_t a, int32_t b) {
    const size_t la = vocab.text(a).size();
    const size_t lb = vocab.text(b).size();
    return la != lb ? la > lb : a < b;
  };
  std::sort(all_.begin(), all_.end(), longer);
  std::sort(user_defined_.begin(), user_defined_.end(), longer);
}

namespace {

// Whether bytes [begin, begin + n) overlap one of the sorted, disjoint ranges.
bool overlaps(std::span<const TextRange> ranges, size_t begin, size_t n) {
  // The first range that ends after `begin`.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                             [](size_t pos, const TextRange& r) { return pos < size_t{r.offset} + r.length; });
  return it != ranges.end() && it->offset < begin + n;
}

}  // namespace

void SpecialTokenMatcher::partition(const Vocab& vocab, std::string_view text, bool parse_special,
                                    std::span<const TextRange> plain, std::vector<Fragment>& out) const {
  out.clear();
  if (text.empty()) return;
  out.push_back({kNoToken, 0, static_cast<uint32_t>(text.size())});
  const std::vector<int32_t>& candidates = parse_special ? all_ : user_defined_;
  if (candidates.empty()) return;

  std::bitset<256> present;
  for (char c : text) present.set(static_cast<unsigned char>(c));

  std::vector<Fragment> next;
  for (int32_t id : candidates) {
    const std::string_view needle = vocab.text(id);
    const bool guarded = !plain.empty() && vocab.type(id) != TokenType::kUserDefined;
    if (!present.test(static_cast<unsigned char>(needle[0])) || needle.size() > text.size()) continue;
    bool found_any = false;
    next.clear();
    for (const Fragment& f : out) {
      if (f.token != kNoToken || f.length < needle.size()) {
        next.push_back(f);
        continue;
      }
      const std::string_view body = text.substr(f.offset, f.length);
      size_t at = 0;  // start of the text not yet emitted
      for (size_t hit = body.find(needle); hit != std::string_view::npos; hit = body.find(needle, hit + 1)) {
        if (guarded && overlaps(plain, f.offset + hit, needle.size())) continue;
        found_any = true;
        if (hit > at) next.push_back({kNoToken, f.offset + static_cast<uint32_t>(at), static_cast<uint32_t>(hit - at)});
        next.push_back({id, 0, 0});
        at = hit + needle.size();
        hit = at - 1;  // the next search starts after this match
      }
      if (at < body.size()) {
        next.push_back({kNoToken, f.offset + static_cast<uint32_t>(at), static_cast<uint32_t>(body.size() - at)});
      }
    }
    if (found_any) out.swap(next);
  }
}

}  // namespace cera::tokenizer
