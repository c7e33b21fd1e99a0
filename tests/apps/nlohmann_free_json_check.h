// A tiny structural check that a string is one JSON object (balanced braces and brackets
// outside strings), so app tests need no JSON library.
#pragma once

#include <string_view>

namespace cera::test {

inline bool looks_like_json_object(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  if (s.empty() || s.front() != '{' || s.back() != '}') return false;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') --depth;
    if (depth < 0) return false;
  }
  return depth == 0 && !in_string;
}

}  // namespace cera::test
