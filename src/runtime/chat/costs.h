// Step prices of the evaluator's work budget (TemplateLimits::max_steps), shared by the files
// that implement the Evaluator. Set so that a step costs at most ~50 ns in a Release build
// whatever the template does (measured on a loop of each kind of operation).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "runtime/chat/value.h"

namespace cera::runtime::chat::cost {

// Bytes built or read, dict and frame entries compared, byte comparisons of a substring search
// (builtins.h), and the fixed overheads of a loop iteration, a `loop` object and a call.
constexpr uint64_t kBytesPerStep = 16;
constexpr uint64_t kEntriesPerStep = 8;
constexpr uint64_t kSearchBytesPerStep = 512;
constexpr uint64_t kIterationSteps = 2;
constexpr uint64_t kLoopObjectSteps = 24;
constexpr uint64_t kCallSteps = 4;

inline uint64_t saturating_mul(uint64_t a, uint64_t b) {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

// What building `v` allocated: its own characters or elements, not the values it shares.
inline uint64_t build_steps(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kString:
      return v.as_string().size() / kBytesPerStep;
    case ValueKind::kArray:
      return v.as_array().size() * sizeof(Value) / kBytesPerStep;
    case ValueKind::kObject:
      return v.as_object().entries.size() * sizeof(std::pair<std::string, Value>) / kBytesPerStep;
    default:
      return 0;
  }
}

// What reading `v` through (printing, comparing, scanning it) visits.
inline uint64_t read_steps(const Value& v) {
  const ValueSize s = v.size();
  return (saturating_mul(s.items, sizeof(Value)) / kBytesPerStep) + s.bytes / kBytesPerStep;
}

}  // namespace cera::runtime::chat::cost
