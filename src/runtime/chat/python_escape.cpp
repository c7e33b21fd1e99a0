#include "runtime/chat/python_escape.h"

namespace cera::runtime::chat {

PythonEscape python_escape(std::string_view s, size_t& pos, std::string& out) {
  const char e = s[pos++];
  switch (e) {
    case 'n': out += '\n'; break;
    case 't': out += '\t'; break;
    case 'r': out += '\r'; break;
    case 'a': out += '\a'; break;
    case 'b': out += '\b'; break;
    case 'f': out += '\f'; break;
    case 'v': out += '\v'; break;
    case '0': out += '\0'; break;
    case '\\':
    case '\'':
    case '"': out += e; break;
    case '\n': break;  // line continuation
    case 'x':
    case 'u':
    case 'U': {
      const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      if (pos + n > s.size()) return {.kind = PythonEscape::Kind::kBadHex};
      uint32_t cp = 0;
      for (size_t i = 0; i < n; ++i) {
        const char h = s[pos + i];
        const int d = (h >= '0' && h <= '9')   ? h - '0'
                      : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                      : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                               : -1;
        if (d < 0) return {.kind = PythonEscape::Kind::kBadHex};
        cp = cp * 16 + static_cast<uint32_t>(d);
      }
      pos += n;
      return {.kind = PythonEscape::Kind::kCodePoint, .code_point = cp};
    }
    default:  // Python keeps unknown escapes as written
      out += '\\';
      out += e;
  }
  return {};
}

}  // namespace cera::runtime::chat
