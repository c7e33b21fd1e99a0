#include "runtime/chat/content_guard.h"

#include <algorithm>

namespace cera::runtime::chat {
namespace {

std::string utf8_of(uint32_t cp) {  // a code point of the Basic Multilingual Plane, >= U+0800
  std::string s;
  s += static_cast<char>(0xE0 | (cp >> 12));
  s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  s += static_cast<char>(0x80 | (cp & 0x3F));
  return s;
}

bool contains(const Value& v, std::string_view needle) {
  switch (v.kind()) {
    case ValueKind::kString: return v.as_string().find(needle) != std::string::npos;
    case ValueKind::kArray:
      return std::any_of(v.as_array().begin(), v.as_array().end(), [&](const Value& e) { return contains(e, needle); });
    case ValueKind::kObject:
      for (const auto& [k, e] : v.as_object().entries)
        if (k.find(needle) != std::string::npos || contains(e, needle)) return true;
      return false;
    default: return false;
  }
}

}  // namespace

ContentGuard::ContentGuard(std::span<const std::string_view> control_texts, std::span<const std::string_view> trusted,
                           std::span<const Value* const> untrusted)
    : texts_(control_texts) {
  for (size_t i = 0; i < texts_.size(); ++i) {
    const std::string_view t = texts_[i];
    if (t.empty() || index_.count(t)) continue;
    index_.emplace(t, static_cast<int32_t>(i));
    lengths_.push_back(t.size());
    first_byte_[static_cast<unsigned char>(t[0])] = true;
  }
  std::sort(lengths_.begin(), lengths_.end(), std::greater<>());
  lengths_.erase(std::unique(lengths_.begin(), lengths_.end()), lengths_.end());
  // The private-use area has 6,400 code points; inputs that contain every one of them cannot
  // be protected this way, and then nothing is replaced (marker_ stays empty).
  for (uint32_t cp = 0xE000; cp <= 0xF8FF && marker_.empty(); ++cp) {
    const std::string m = utf8_of(cp);
    bool used = false;
    for (std::string_view s : trusted) used = used || s.find(m) != std::string_view::npos;
    for (const Value* v : untrusted) used = used || contains(*v, m);
    if (!used) marker_ = m;
  }
}

std::string ContentGuard::protect_string(std::string_view s) const {
  std::string out;
  size_t copied = 0;
  for (size_t p = 0; p < s.size();) {
    if (!first_byte_[static_cast<unsigned char>(s[p])]) {
      ++p;
      continue;
    }
    // Longest control text starting here (leftmost-longest: every occurrence in `s` then
    // overlaps a replaced one, so none survives for the tokenizer to match).
    int32_t hit = -1;
    size_t hit_len = 0;
    for (size_t len : lengths_) {
      if (p + len > s.size()) continue;
      if (auto it = index_.find(s.substr(p, len)); it != index_.end()) {
        hit = it->second;
        hit_len = len;
        break;
      }
    }
    if (hit < 0) {
      ++p;
      continue;
    }
    out.append(s.substr(copied, p - copied));
    out += marker_;
    out += std::to_string(hit);
    out += marker_;
    p += hit_len;
    copied = p;
  }
  if (copied == 0) return std::string(s);
  out.append(s.substr(copied));
  return out;
}

Value ContentGuard::protect(const Value& v) const {
  if (marker_.empty() || index_.empty()) return v;
  switch (v.kind()) {
    case ValueKind::kString: return Value(protect_string(v.as_string()));
    case ValueKind::kArray: {
      Array out;
      out.reserve(v.as_array().size());
      for (const Value& e : v.as_array()) out.push_back(protect(e));
      return Value(std::move(out));
    }
    case ValueKind::kObject: {
      Object out;
      out.is_namespace = v.as_object().is_namespace;
      for (const auto& [k, e] : v.as_object().entries) out.entries.emplace_back(protect_string(k), protect(e));
      return Value(std::move(out));
    }
    default: return v;
  }
}

ContentGuard::Restored ContentGuard::restore(std::string_view rendered) const {
  Restored r;
  if (marker_.empty()) {
    r.text = std::string(rendered);
    return r;
  }
  r.text.reserve(rendered.size());
  size_t at = 0;
  for (size_t m = rendered.find(marker_); m != std::string_view::npos; m = rendered.find(marker_, at)) {
    // marker, decimal index, marker; anything else (a template cut a placeholder apart) is
    // copied as it is: a stray private-use character, never a control token.
    const size_t digits = m + marker_.size();
    size_t end = digits;
    while (end < rendered.size() && end - digits < 10 && rendered[end] >= '0' && rendered[end] <= '9') ++end;
    const bool closed = end > digits && rendered.substr(end, marker_.size()) == marker_;
    const size_t index = closed ? std::stoul(std::string(rendered.substr(digits, end - digits))) : texts_.size();
    r.text.append(rendered.substr(at, m - at));
    if (index >= texts_.size()) {
      r.text.append(marker_);
      at = digits;
      continue;
    }
    const std::string_view text = texts_[index];
    r.plain.push_back({static_cast<uint32_t>(r.text.size()), static_cast<uint32_t>(text.size())});
    r.text.append(text);
    at = end + marker_.size();
  }
  r.text.append(rendered.substr(at));
  return r;
}

}  // namespace cera::runtime::chat
