// Parser: tokens -> statement tree. Operator precedence follows jinja2's parser (condexpr < or <
// and < not < compare < +,- < ~ < *,/,//,% < ** < unary < postfix/filters/tests) so expressions
// group the way HF's renderer groups them. Anything outside the subset is an error with line:col.
#pragma once

#include <vector>

#include "runtime/chat/ast.h"
#include "runtime/chat/lexer.h"

namespace cera::runtime::chat {

Result<Body> parse_template(const std::vector<Token>& tokens);

}  // namespace cera::runtime::chat
