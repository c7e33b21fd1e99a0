// Between the public facade's types (include/cera/engine.h) and the runtime's: errors, sampling
// options, constraints and finish reasons, each checked on the way in so that a bad option fails
// with a message naming it instead of reaching the engine loop.
#pragma once

#include <memory>

#include "cera/engine.h"
#include "core/status.h"
#include "runtime/embed/pooling.h"
#include "runtime/engine/request.h"
#include "runtime/grammar/vocab_index.h"

namespace cera::api {

Error to_error(const Status& status);
// The error a Result failed with (never an ok Status).
template <class T>
Error to_error(const Result<T>& result) {
  return to_error(result.status());
}

// The options' checks: max_tokens >= 0 and each sampling field in the CLI's ranges (naming the
// field, its range and what turns it off).
Status check_generate_options(const GenerateOptions& options);
runtime::SamplingParams to_sampling(const SamplingOptions& options);

// The constraint's tables for the vocabulary (null for none); errors name the syntax and the place.
Result<std::shared_ptr<const runtime::grammar::TokenTables>> prepare_constraint(
    const Constraint& constraint, const std::shared_ptr<const runtime::grammar::VocabIndex>& vocab);

FinishReason to_finish_reason(runtime::FinishReason reason);  // precondition: not kError
// The facade's Pooling and the runtime's (kModelDefault: nullopt, the embedder's default).
std::optional<runtime::embed::Pooling> from_pooling(Pooling pooling);
Pooling to_pooling(runtime::embed::Pooling pooling);

}  // namespace cera::api
