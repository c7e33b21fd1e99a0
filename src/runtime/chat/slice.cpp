// Python's slice semantics (negative indexes, steps, clamping) on lists and strings; strings
// slice by code point without building one string per code point.
#include <algorithm>

#include "runtime/chat/evaluator.h"

namespace cera::runtime::chat {

namespace {

// The number of indexes start, start + step, ... strictly before stop (step != 0), computed
// without overflow.
uint64_t slice_count(int64_t start, int64_t stop, int64_t step) {
  const bool up = step > 0;
  if (up ? start >= stop : start <= stop) return 0;
  const uint64_t span = up ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)
                           : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
  const uint64_t stride = up ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  return (span - 1) / stride + 1;
}

// The code points of `s` at indexes lo, lo + st, ... (count of them, all in range), walking
// the string once instead of building one string per code point.
std::string slice_string(const std::string& s, int64_t lo, int64_t st, uint64_t count) {
  std::string out;
  if (count == 0) return out;
  if (is_ascii(s)) {
    out.reserve(count);
    for (uint64_t k = 0; k < count; ++k)
      out += s[static_cast<size_t>(static_cast<uint64_t>(lo) + k * static_cast<uint64_t>(st))];
    return out;
  }
  const auto first = static_cast<uint64_t>(lo);
  const uint64_t stride = st > 0 ? static_cast<uint64_t>(st) : 0 - static_cast<uint64_t>(st);
  const uint64_t last = st > 0 ? first + (count - 1) * stride : first - (count - 1) * stride;
  const uint64_t low = std::min(first, last);
  // Calls f on the selected code points in ascending order: `low`, then every stride-th.
  const auto for_each_selected = [&](auto&& f) {
    uint64_t index = 0, want = low, left = count;
    for (size_t i = 0; i < s.size() && left > 0; ++index) {
      const size_t next = utf8_next(s, i);
      if (index == want) {
        f(std::string_view(s).substr(i, next - i));
        --left;
        want += left > 0 ? stride : 0;
      }
      i = next;
    }
  };
  if (st > 0) {
    for_each_selected([&](std::string_view c) { out += c; });
    return out;
  }
  size_t bytes = 0;  // a negative step emits them in reverse: size first, then fill from the end
  for_each_selected([&](std::string_view c) { bytes += c.size(); });
  out.resize(bytes);
  size_t end = bytes;
  for_each_selected([&](std::string_view c) {
    end -= c.size();
    out.replace(end, c.size(), c);
  });
  return out;
}

}  // namespace

Result<Value> slice_value(const Value& v, const Value& start, const Value& stop,
                          const Value& step) {
  const bool is_string = v.is_string();
  if (!is_string && !v.is_array())
    return invalid_argument(std::string("cannot slice a ") + v.type_name());
  const auto n = static_cast<int64_t>(is_string ? utf8_length(v.as_string()) : v.as_array().size());
  for (const Value* b : {&start, &stop, &step})
    if (!b->is_none() && b->kind() != ValueKind::kInt)
      return invalid_argument("slice indices must be integers");
  const int64_t st = step.is_none() ? 1 : step.as_int();
  if (st == 0) return invalid_argument("slice step cannot be zero");
  // Python's PySlice_AdjustIndices.
  const auto adjust = [&](const Value& b, int64_t dflt) {
    if (b.is_none()) return dflt;
    int64_t i = b.as_int();
    if (i < 0) {
      i = i < -n ? -1 : i + n;  // no overflow for INT64_MIN
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t lo = adjust(start, st < 0 ? n - 1 : 0);
  const int64_t hi = adjust(stop, st < 0 ? -1 : n);
  const uint64_t count = slice_count(lo, hi, st);
  if (is_string) return Value(slice_string(v.as_string(), lo, st, count));
  Array a;
  a.reserve(count);
  const Array& items = v.as_array();
  for (uint64_t k = 0; k < count; ++k)
    a.push_back(
        items[static_cast<size_t>(static_cast<uint64_t>(lo) + k * static_cast<uint64_t>(st))]);
  return Value(std::move(a));
}

}  // namespace cera::runtime::chat
