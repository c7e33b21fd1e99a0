// Pieces of the JSON Schema converter that stand alone: integer ranges as digit rules and the
// pattern (regex subset) translator. Internal to json_schema*.cpp and their tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace cera::runtime::grammar {

// A GBNF expression matching exactly the JSON integers (no leading zeros, no "-0") in
// [lo, hi]; an absent bound is unbounded. Precondition: lo <= hi when both are given.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

// GBNF literal for raw bytes: "..." with \" \\ and \xNN for controls.
std::string gbnf_literal(std::string_view bytes);

// A GBNF expression for the JSON-encoded content (between the quotes) of strings matched by
// `pattern`; `jchar` names the rule of one JSON string character. Errors name the feature.
Result<std::string> pattern_to_gbnf(std::string_view pattern, std::string_view jchar,
                                    std::size_t max_repeat);

}  // namespace cera::runtime::grammar
