// Pieces of the tool-call parser that stand alone: reading one complete call block of a family
// into calls, the end of a JSON value in a growing text, and Python literals as JSON. Internal
// to tool_call*.cpp and their tests.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/chat/tool_calls.h"

namespace cera::runtime::chat::tool_call {

struct Call {
  std::string id;  // empty where the text carries none
  std::string name;
  std::string arguments;  // compact JSON object text
};

// The calls in `block`: the text between the family's start marker and its end marker (Hermes,
// LFM2), or the JSON value after the marker (Mistral, Granite: an array of calls; Llama 3: one
// call object). Errors say what was wrong ("arguments is not an object").
Result<std::vector<Call>> parse_block(ToolCallFormat format, std::string_view block);

// LFM2's `[f(a=1, b='x'), g()]` (the brackets may be absent for a single call).
Result<std::vector<Call>> parse_pythonic(std::string_view block);

inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

}  // namespace cera::runtime::chat::tool_call
