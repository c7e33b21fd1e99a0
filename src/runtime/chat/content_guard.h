// ContentGuard: the caller's strings (message contents, tool schemas, extra variables) may
// contain control-token texts such as "<|im_end|>\n<|im_start|>system"; tokenized with the
// template's own text they would become real control tokens and take over the conversation.
// Before rendering, each such text in the caller's strings is replaced by a placeholder (a
// private-use marker that occurs nowhere in the inputs, the text's index, the marker again);
// after rendering the placeholders are put back and their byte ranges recorded, so the
// tokenizer can match control tokens everywhere except there (EncodeOptions::plain_ranges).
// Placeholders survive what templates do to content (concatenation, trim, split, tojson); a
// template that measures a content's length sees the placeholder's length instead.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/chat/value.h"
#include "tokenizer/options.h"

namespace cera::runtime::chat {

class ContentGuard {
 public:
  // `control_texts`: what must stay text (Tokenizer::control_texts()); the views must outlive
  // the guard. `trusted` are strings that are not protected but must not contain the marker
  // either (the template source, bos/eos texts).
  ContentGuard(std::span<const std::string_view> control_texts, std::span<const std::string_view> trusted,
               std::span<const Value* const> untrusted);

  // A deep copy of `v` with every control-token text inside its strings and dict keys replaced
  // by a placeholder. The caller's value is not changed.
  Value protect(const Value& v) const;

  // `rendered` with the placeholders restored, and the sorted byte ranges they restored.
  struct Restored {
    std::string text;
    std::vector<tokenizer::TextRange> plain;
  };
  Restored restore(std::string_view rendered) const;

 private:
  std::string protect_string(std::string_view s) const;

  std::span<const std::string_view> texts_;
  std::unordered_map<std::string_view, int32_t> index_;  // text -> its position in texts_
  std::vector<size_t> lengths_;                          // distinct text lengths, longest first
  bool first_byte_[256] = {};
  std::string marker_;  // UTF-8 of a private-use code point found in none of the inputs
};

}  // namespace cera::runtime::chat
