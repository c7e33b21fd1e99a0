// `cera quant-error [--n N] [--seed S] [--type T]`: round-trip error of every reference quantizer
// on N seeded normal(0, 1) values, as a table (bits/weight, RMSE, max |err|, relative RMSE).
// Self-contained (no model, no gguf): the numbers depend only on N, the seed and the quantizers.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "arg_checks.h"
#include "commands.h"
#include "core/dtype.h"
#include "output.h"
#include "quant/quant.h"

namespace cera::cli {
namespace {

struct QuantErrorOptions {
  int64_t n = int64_t{1} << 20;
  uint64_t seed = 1;
  std::string type;  // empty: every type with a quantizer
};

struct ErrorStats {
  double rmse = 0.0;
  double max_abs = 0.0;
  double rms_input = 0.0;
};

ErrorStats measure(DType type, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(*dtype_row_bytes(type, x.size()));
  std::vector<float> y(x.size());
  quant::quantize_row(type, x.data(), q.data(), n);
  quant::dequantize_row(type, q.data(), y.data(), n);
  double sum_err2 = 0.0;
  double sum_x2 = 0.0;
  ErrorStats s;
  for (size_t i = 0; i < x.size(); ++i) {
    const double err = static_cast<double>(y[i]) - x[i];
    sum_err2 += err * err;
    sum_x2 += static_cast<double>(x[i]) * x[i];
    s.max_abs = std::max(s.max_abs, std::fabs(err));
  }
  s.rmse = std::sqrt(sum_err2 / static_cast<double>(n));
  s.rms_input = std::sqrt(sum_x2 / static_cast<double>(n));
  return s;
}

void run(const QuantErrorOptions& opts) {
  std::vector<DType> types;
  if (!opts.type.empty()) {
    const std::optional<DType> t = dtype_from_name(opts.type);
    if (!t || !quant::has_quantizer(*t)) {
      fmt::print(stderr, "cera quant-error: no quantizer for type '{}'\n", opts.type);
      throw CLI::RuntimeError(1);
    }
    types.push_back(*t);
  } else {
    for (const DTypeTraits* t = dtype_table_begin(); t != dtype_table_end(); ++t) {
      if (quant::has_quantizer(t->dtype)) types.push_back(t->dtype);
    }
  }
  // Cheapest first, so the table reads as a size/quality trade-off.
  std::stable_sort(types.begin(), types.end(), [](DType a, DType b) {
    const DTypeTraits& ta = dtype_traits(a);
    const DTypeTraits& tb = dtype_traits(b);
    return uint64_t{ta.type_size} * tb.block_size < uint64_t{tb.type_size} * ta.block_size;
  });
  // Every block size divides kQK_K; a multiple of it works for all types.
  if (opts.n <= 0 || opts.n % kQK_K != 0) {
    fmt::print(stderr, "cera quant-error: --n must be a positive multiple of {}, got {}\n", kQK_K,
               opts.n);
    throw CLI::RuntimeError(1);
  }

  std::mt19937_64 rng(opts.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(opts.n));
  for (float& v : x) v = normal(rng);

  stdout_print("round-trip error on {} normal(0, 1) values, seed {}\n\n", opts.n, opts.seed);
  stdout_print("{:<6} {:>11} {:>12} {:>12} {:>10}\n", "type", "bits/weight", "RMSE", "max |err|",
             "rel RMSE");
  for (DType type : types) {
    const DTypeTraits& t = dtype_traits(type);
    const ErrorStats s = measure(type, x);
    const double bits = 8.0 * t.type_size / t.block_size;
    stdout_print("{:<6} {:>11.4f} {:>12.4e} {:>12.4e} {:>9.4f}%\n", t.name, bits, s.rmse, s.max_abs,
               100.0 * s.rmse / s.rms_input);
    fail_if_stdout_failed();
  }
}

}  // namespace

void register_quant_error(CLI::App& app) {
  auto opts = std::make_shared<QuantErrorOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quant-error", "Round-trip error of each quantizer on random normal data (a table)");
  cmd->add_option("--n", opts->n, "Number of values, a multiple of 256")
      ->capture_default_str()
      ->check(int_range(kQK_K, int64_t{1} << 30, "a multiple of 256"));
  cmd->add_option("--seed", opts->seed, "Random seed")->capture_default_str();
  cmd->add_option("--type", opts->type, "Only this type (e.g. Q4_K); default: every quantizer");
  cmd->callback([opts] { run(*opts); });
}

}  // namespace cera::cli
