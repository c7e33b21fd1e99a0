// Parser: tokens -> statement tree. Operator precedence follows jinja2's parser (condexpr < or <
// and < not < compare < +,- < ~ < *,/,//,% < ** < unary < postfix/filters/tests) so expressions
// group the way HF's renderer groups them. Anything outside the subset is an error with line:col.
#pragma once

#include <vector>

#include "runtime/chat/ast.h"
#include "runtime/chat/lexer.h"
#include "runtime/chat/limits.h"

namespace cera::runtime::chat {

// Nesting deeper than limits.max_depth (statement bodies, sub-expressions and each link of an
// operator, filter or postfix chain count one level each) is an error: it bounds the parser's
// recursion and the height of the tree the evaluator later walks recursively.
Result<Body> parse_template(const std::vector<Token>& tokens, const TemplateLimits& limits = {});

}  // namespace cera::runtime::chat
