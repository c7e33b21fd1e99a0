// Lexer: template source -> tokens. Whitespace control is applied here, exactly as jinja2's lexer
// does it with trim_blocks=True and lstrip_blocks=True (how transformers renders chat templates),
// so the parser never sees the whitespace that HF would not print.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace cera::runtime::chat {

enum class TokenKind {
  kText,       // raw template text between tags
  kExprBegin,  // {{
  kExprEnd,    // }}
  kStmtBegin,  // {%
  kStmtEnd,    // %}
  kName,
  kString,  // text holds the unescaped value
  kInt,
  kFloat,
  kOperator,  // text holds the operator: + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } , . : |
  kEnd,
};

struct SourcePos {
  int line = 1;
  int column = 1;
};
std::string to_string(SourcePos pos);  // "3:14"

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;
  SourcePos pos;
};

Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace cera::runtime::chat
