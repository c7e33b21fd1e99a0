// Bounded integers as exact digit rules: a range of equal-length digit strings splits at the
// first differing digit into at most three parts, so the expression is O(digits^2) in size.
#include <string>

#include "runtime/grammar/json_schema_parts.h"

namespace cera::runtime::grammar {
namespace {

std::string digit_class(char a, char b) {
  if (a == b) return std::string("\"") + a + "\"";
  return std::string("[") + a + "-" + b + "]";
}

std::string any_digits(std::size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

// lo and hi: digit strings of one length, lo <= hi.
std::string fixed_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  std::size_t rest = lo.size() - 1;
  if (lo[0] == hi[0]) return join(std::string("\"") + lo[0] + "\"", fixed_range(lo.substr(1), hi.substr(1)));
  bool lo_min = lo.substr(1) == std::string(rest, '0');
  bool hi_max = hi.substr(1) == std::string(rest, '9');
  std::string out;
  auto alt = [&](const std::string& s) { out += out.empty() ? s : " | " + s; };
  char first = lo[0], last = hi[0];
  if (!lo_min) {
    alt(join(std::string("\"") + lo[0] + "\"", fixed_range(lo.substr(1), std::string(rest, '9'))));
    ++first;
  }
  if (!hi_max) --last;
  if (first <= last) alt(join(digit_class(first, last), any_digits(rest)));
  if (!hi_max) {
    alt(join(std::string("\"") + hi[0] + "\"", fixed_range(std::string(rest, '0'), hi.substr(1))));
  }
  return "(" + out + ")";
}

// Non-negative magnitudes in [lo, hi] (hi absent: unbounded), canonical decimal.
std::string nonneg_range(uint64_t lo, std::optional<uint64_t> hi) {
  std::string out;
  auto alt = [&](const std::string& s) { out += out.empty() ? s : " | " + s; };
  std::string ls = std::to_string(lo);
  std::size_t max_len = hi ? std::to_string(*hi).size() : ls.size();
  for (std::size_t len = ls.size(); len <= max_len; ++len) {
    std::string a = len == ls.size() ? ls : "1" + std::string(len - 1, '0');
    std::string b = std::string(len, '9');
    if (hi && len == max_len) b = std::to_string(*hi);
    alt(fixed_range(a, b));
  }
  if (!hi) alt("[1-9] [0-9]{" + std::to_string(ls.size()) + ",}");
  return out.find(" | ") == std::string::npos ? out : "(" + out + ")";
}

uint64_t magnitude(int64_t v) { return v < 0 ? uint64_t(-(v + 1)) + 1 : uint64_t(v); }

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::string out;
  auto alt = [&](const std::string& s) { out += out.empty() ? s : " | " + s; };
  // Negative part: values <= -1 within [lo, hi], as "-" magnitude.
  if (!lo || *lo < 0) {
    uint64_t mag_lo = (hi && *hi < 0) ? magnitude(*hi) : 1;
    std::optional<uint64_t> mag_hi;
    if (lo) mag_hi = magnitude(*lo);
    alt("\"-\" " + nonneg_range(mag_lo, mag_hi));
  }
  if (!hi || *hi >= 0) {
    uint64_t a = (lo && *lo > 0) ? uint64_t(*lo) : 0;
    std::optional<uint64_t> b;
    if (hi) b = uint64_t(*hi);
    alt(nonneg_range(a, b));
  }
  return "(" + out + ")";
}

std::string gbnf_literal(std::string_view bytes) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

}  // namespace cera::runtime::grammar
