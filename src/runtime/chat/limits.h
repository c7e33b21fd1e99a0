// Resource limits of the chat-template engine. Templates come from model files written by
// strangers, so parsing and rendering are bounded in stack depth, memory and time; reaching a
// bound is an error that names the limit, its value and the template position, never a crash.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "runtime/chat/lexer.h"

namespace cera::runtime::chat {

// The defaults sit far above what real templates use (the fixtures under
// tests/fixtures/chat/templates render in under 4,000 steps, nest at most 19 levels and print
// kilobytes) and far below what hurts the host: a render that reaches any of them ends in
// about half a second (Release build) and a few hundred MB. Raise them only for trusted templates.
struct TemplateLimits {
  // The template's source, checked before lexing (tokens and tree take ~10x its size). Real
  // chat templates are under 20 KB.
  uint64_t max_source_bytes = uint64_t{1} << 20;
  // Nesting of statements and expressions, checked while parsing and again while rendering
  // (where a macro call nests its body inside the caller). It bounds the parser's and the
  // evaluator's recursion, and so their stack: at 256 levels they need under 1 MB of stack in a
  // Release build and under 4 MB in the AddressSanitizer Debug build (measured; the tests run
  // the deepest templates on smaller stacks). Real templates nest fewer than 20 levels.
  int max_depth = 256;
  // The rendered prompt. 16 MiB is about 4 million tokens, beyond any model's context.
  uint64_t max_output_bytes = uint64_t{16} << 20;
  // One value: a string, or all the strings (and dict keys) inside one list or dict, counted
  // every time they occur. Checked before a value that would exceed it is built.
  uint64_t max_value_bytes = uint64_t{16} << 20;
  // One value: the elements of a list or dict, nested elements included (about 100 MB of
  // memory at the limit). A long conversation with tools is tens of thousands.
  uint64_t max_value_items = uint64_t{1} << 20;
  // Loop iterations over the whole render, loop filters included. Real templates loop over
  // the messages, tools and content parts: tens of thousands at most even for a full context.
  uint64_t max_loop_iterations = 1'000'000;
  // Work over the whole render: one step per statement or expression evaluated, plus one per
  // 16 bytes of every value an operation builds or reads through (strings scanned, lists
  // compared or printed) and a few for each loop iteration, call and name lookup. It bounds
  // the time (well under a second at the limit in a Release build) and the memory a render can
  // allocate in all (16 bytes a step: 160 MB). The fixtures' renders take under 4,000 steps,
  // and 1.4 million with their conversations repeated 1,000 times (thousands of messages).
  uint64_t max_steps = 10'000'000;
};

// An out-of-range error that names the limit, its value and where it was reached:
// "chat template 3:14: nesting deeper than the limit of 256 levels (TemplateLimits::max_depth)"
// from ("nesting deeper", 256, "levels", "max_depth"). `what` ends in a comparative.
Status limit_error(SourcePos pos, std::string_view what, uint64_t limit, std::string_view unit,
                   std::string_view field);
// The same without a position, for library functions; the evaluator prefixes the position.
Status limit_error(std::string_view what, uint64_t limit, std::string_view unit,
                   std::string_view field);

// True when `size + extra <= max`, without overflow.
inline bool fits(uint64_t size, uint64_t extra, uint64_t max) {
  return extra <= max && size <= max - extra;
}

}  // namespace cera::runtime::chat
