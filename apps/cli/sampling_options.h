// The sampling options of the commands that generate text (run, chat), each range-checked as
// runtime/sampler.h defines it, and --seed: -1 (as in llama.cpp) draws a random seed, which is
// printed on stderr so the run can be repeated.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "runtime/sampler.h"

namespace cera::cli {

struct SamplingOptions {
  runtime::SamplingParams params;
  std::string seed;  // as given: empty (the default seed), "-1" (random) or 0 .. 2^64-1
};

void add_sampling_options(CLI::App* cmd, SamplingOptions& o);

// The parameters with the seed decided; a random one is announced as "cera COMMAND: seed N".
runtime::SamplingParams resolve_sampling(const char* command, const SamplingOptions& o);

}  // namespace cera::cli
