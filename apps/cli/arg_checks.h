// Range checks for command-line options, as CLI11 validators whose messages name the allowed range
// in plain numbers: "--batch-size: must be an integer from 1 to 65536, got 0". CLI11's own
// Range / PositiveNumber print their unbounded side as DBL_MAX written out (309 digits) and
// accept nan. The one decision: a validator reads the text with CLI11's own conversion
// (detail::lexical_cast), so a value that passes the check is the value the option receives.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>

namespace cera::cli {

inline constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

// An integer in [lo, hi]; `note` (e.g. "0: off") is added to the message in parentheses.
CLI::Validator int_range(int64_t lo, int64_t hi, std::string note = {});

// A finite real number within the bounds; an infinite bound is no bound. lo_open: lo itself is
// refused (top-p's "greater than 0").
struct RealBounds {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
};
CLI::Validator real_range(RealBounds bounds, std::string note = {});

// Threads: 0 (every core) to max_threads().
int cores();        // CPUs this process may run on (core/thread_pool.h's available_cores)
int max_threads();  // 4 x cores(), at most api::kMaxThreads
CLI::Validator threads_range();

}  // namespace cera::cli
