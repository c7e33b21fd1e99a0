// Backslash escapes of a Python string literal ("unicode-escape" rules), shared by the Jinja
// lexer (jinja2 applies them to template string literals) and the pythonic tool-call reader
// (LFM2's calls are Python literals).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cera::runtime::chat {

struct PythonEscape {
  enum class Kind : uint8_t {
    kAppended,   // a simple escape, a line continuation (nothing) or an unknown one (kept as written)
    kCodePoint,  // \xHH, \uHHHH or \UHHHHHHHH: code_point is its value, for the caller to encode
    kBadHex,     // too few hex digits, or a non-hex one
  };
  Kind kind = Kind::kAppended;
  uint32_t code_point = 0;
};

// `s[pos]` is the character after a backslash (pos < s.size()); appends what a simple escape
// stands for to `out` and moves `pos` past the escape.
PythonEscape python_escape(std::string_view s, size_t& pos, std::string& out);

}  // namespace cera::runtime::chat
