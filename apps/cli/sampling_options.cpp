#include "sampling_options.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <limits>
#include <random>

#include "arg_checks.h"

namespace cera::cli {
namespace {

// Decimal digits only: CLI11's unsigned conversion would take "-2" as 2^64 - 2.
bool parse_seed(const std::string& text, uint64_t& seed) {
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, seed);
  return !text.empty() && r.ec == std::errc() && r.ptr == end;
}

CLI::Validator seed_check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t seed = 0;
        if (text == "-1" || parse_seed(text, seed)) return {};
        return fmt::format("must be -1 (a random seed) or an integer from 0 to {}, got {}",
                           std::numeric_limits<uint64_t>::max(), text);
      },
      "-1 | INT in [0, 2^64-1]");
}

}  // namespace

void add_sampling_options(CLI::App* cmd, SamplingOptions& o) {
  runtime::SamplingParams& p = o.params;
  // Finite upper bounds also keep every value finite as a float (the fields' type).
  cmd->add_option("--temp", p.temperature, "temperature (0: greedy)")
      ->check(real_range({.lo = 0, .hi = 100}, "0: greedy"));
  cmd->add_option("--top-k", p.top_k, "top-k (0: off)")->check(int_range(0, kInt32Max, "0: off"));
  cmd->add_option("--top-p", p.top_p, "top-p (1: off)")
      ->check(real_range({.lo = 0, .hi = 1, .lo_open = true}, "1: off"));
  cmd->add_option("--min-p", p.min_p, "min-p (0: off)")
      ->check(real_range({.lo = 0, .hi = 1}, "0: off"));
  cmd->add_option("--repeat-penalty", p.repeat_penalty, "repetition penalty (1: off)")
      ->check(real_range({.lo = 0, .hi = 1000, .lo_open = true}, "1: off"));
  cmd->add_option("--repeat-last-n", p.penalty_last_n,
                  "tokens the penalties look back over (-1: all, 0: off)")
      ->check(int_range(-1, kInt32Max, "-1: the whole history, 0: penalties off"));
  cmd->add_option("--frequency-penalty", p.frequency_penalty, "frequency penalty (0: off)")
      ->check(real_range({.lo = -100, .hi = 100}, "0: off"));
  cmd->add_option("--presence-penalty", p.presence_penalty, "presence penalty (0: off)")
      ->check(real_range({.lo = -100, .hi = 100}, "0: off"));
  cmd->add_option("--seed", o.seed, "random seed (same seed, same text; -1: a random one, printed)")
      ->check(seed_check());
}

runtime::SamplingParams resolve_sampling(const char* command, const SamplingOptions& o) {
  runtime::SamplingParams p = o.params;
  if (o.seed == "-1") {
    std::random_device device;
    p.seed = (uint64_t{device()} << 32) | device();
    fmt::print(stderr, "cera {}: seed {} (--seed {} repeats this run)\n", command, p.seed, p.seed);
  } else if (!o.seed.empty()) {
    parse_seed(o.seed, p.seed);  // checked by seed_check()
  }
  return p;
}

}  // namespace cera::cli
