// Session helpers shared by the context-shift tests: sampled generation that runs past the end of
// generation, so that a small context shifts several times.
#pragma once

#include "runtime/session.h"

namespace cera::test {

inline Result<runtime::GenerateResult> generate_through_shifts(runtime::Session& session, int32_t max_tokens = 100) {
  runtime::GenerateOptions gen;
  gen.max_tokens = max_tokens;
  gen.sampling = {.temperature = 0.9f, .seed = 3};
  gen.stop_at_end_of_generation = false;
  return session.generate(gen, nullptr);
}

}  // namespace cera::test
