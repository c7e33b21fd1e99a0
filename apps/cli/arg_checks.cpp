#include "arg_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "api/engine.h"
#include "core/thread_pool.h"

namespace cera::cli {
namespace {

std::string with_note(std::string message, const std::string& value, const std::string& note) {
  message += ", got " + value;
  if (!note.empty()) message += " (" + note + ")";
  return message;
}

}  // namespace

CLI::Validator int_range(int64_t lo, int64_t hi, std::string note) {
  const std::string allowed = fmt::format("must be an integer from {} to {}", lo, hi);
  return CLI::Validator(
      [lo, hi, allowed, note](std::string& text) -> std::string {
        int64_t v = 0;
        // lexical_cast saturates a value beyond int64 at its limits: still out of [lo, hi].
        if (!CLI::detail::lexical_cast(text, v) || v < lo || v > hi)
          return with_note(allowed, text, note);
        return {};
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator real_range(RealBounds b, std::string note) {
  const bool has_lo = std::isfinite(b.lo), has_hi = std::isfinite(b.hi);
  std::string allowed;
  if (has_lo && has_hi) {
    allowed = b.lo_open ? fmt::format("must be a number greater than {} and at most {}", b.lo, b.hi)
                        : fmt::format("must be a number from {} to {}", b.lo, b.hi);
  } else if (has_lo) {
    allowed = b.lo_open ? fmt::format("must be a number greater than {}", b.lo)
                        : fmt::format("must be a number, {} or more", b.lo);
  } else if (has_hi) {
    allowed = fmt::format("must be a number, at most {}", b.hi);
  } else {
    allowed = "must be a finite number";
  }
  return CLI::Validator(
      [b, allowed, note](std::string& text) -> std::string {
        double v = 0;
        const bool ok = CLI::detail::lexical_cast(text, v) && std::isfinite(v) &&
                        (b.lo_open ? v > b.lo : v >= b.lo) && v <= b.hi;
        return ok ? std::string() : with_note(allowed, text, note);
      },
      fmt::format("NUMBER in {}{}, {}{}", b.lo_open || !has_lo ? "(" : "[", b.lo, b.hi, has_hi ? "]" : ")"));
}

int cores() {
  return available_cores();
}

int max_threads() {
  return std::min(api::kMaxThreads, 4 * cores());
}

CLI::Validator threads_range() {
  return int_range(
      0, max_threads(),
      fmt::format("0: every core; at most 4 threads for each of the {} cores this process may "
                  "use, and never more than {}",
                  cores(), api::kMaxThreads));
}

}  // namespace cera::cli
