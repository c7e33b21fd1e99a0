#include "api/facade_convert.h"

#include <cmath>
#include <random>
#include <string>

#include "runtime/grammar/prepare.h"

namespace cera::api {

Error to_error(const Status& status) {
  ErrorKind kind = ErrorKind::kInternal;
  switch (status.code()) {
    case ErrorCode::kOk:  // not an error: a caller's bug, reported rather than hidden
    case ErrorCode::kInternal: kind = ErrorKind::kInternal; break;
    case ErrorCode::kInvalidArgument: kind = ErrorKind::kInvalidArgument; break;
    case ErrorCode::kNotFound: kind = ErrorKind::kNotFound; break;
    case ErrorCode::kCorrupt: kind = ErrorKind::kCorrupt; break;
    case ErrorCode::kUnsupported: kind = ErrorKind::kUnsupported; break;
    case ErrorCode::kIo: kind = ErrorKind::kIo; break;
    case ErrorCode::kOutOfRange: kind = ErrorKind::kOutOfRange; break;
    case ErrorCode::kCancelled: kind = ErrorKind::kCancelled; break;
    case ErrorCode::kUnavailable: kind = ErrorKind::kUnavailable; break;
  }
  return Error{.kind = kind, .message = status.message()};
}

namespace {

// "temperature 120 is outside 0..100 (0: greedy)"
Status check_range(const char* name, double value, double lo, double hi, const char* note, bool lo_open = false) {
  if (std::isfinite(value) && (lo_open ? value > lo : value >= lo) && value <= hi) return {};
  // Shorter numbers than std::to_string's six decimals.
  auto num = [](double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  };
  return invalid_argument(std::string(name) + " " + num(value) + " is outside " + (lo_open ? "(" : "") + num(lo) +
                          (lo_open ? ", " : "..") + num(hi) + (lo_open ? "]" : "") + " (" + note + ")");
}

}  // namespace

Status check_generate_options(const GenerateOptions& o) {
  if (o.max_tokens < 0) {
    return invalid_argument("max_tokens " + std::to_string(o.max_tokens) + " must be 0 or more");
  }
  const SamplingOptions& s = o.sampling;
  CERA_RETURN_IF_ERROR(check_range("temperature", s.temperature, 0, 100, "0: greedy"));
  if (s.top_k < 0) return invalid_argument("top_k " + std::to_string(s.top_k) + " must be 0 (off) or more");
  CERA_RETURN_IF_ERROR(check_range("top_p", s.top_p, 0, 1, "1: off", /*lo_open=*/true));
  CERA_RETURN_IF_ERROR(check_range("min_p", s.min_p, 0, 1, "0: off"));
  CERA_RETURN_IF_ERROR(check_range("repeat_penalty", s.repeat_penalty, 0, 1000, "1: off", /*lo_open=*/true));
  if (s.penalty_last_n < -1) {
    return invalid_argument("penalty_last_n " + std::to_string(s.penalty_last_n) +
                            " must be -1 (the whole history), 0 (penalties off) or more");
  }
  CERA_RETURN_IF_ERROR(check_range("frequency_penalty", s.frequency_penalty, -100, 100, "0: off"));
  CERA_RETURN_IF_ERROR(check_range("presence_penalty", s.presence_penalty, -100, 100, "0: off"));
  for (size_t i = 0; i < o.stop.size(); ++i) {
    if (o.stop[i].empty()) return invalid_argument("stop string " + std::to_string(i) + " is empty");
  }
  if (o.constraint.kind != ConstraintKind::kNone && o.constraint.kind != ConstraintKind::kJsonObject &&
      o.constraint.source.empty()) {
    return invalid_argument(std::string(o.constraint.kind == ConstraintKind::kGbnf ? "the grammar" : "the JSON Schema") +
                            " is empty");
  }
  return {};
}

runtime::SamplingParams to_sampling(const SamplingOptions& o) {
  runtime::SamplingParams p;
  p.temperature = o.temperature;
  p.top_k = o.top_k;
  p.top_p = o.top_p;
  p.min_p = o.min_p;
  p.repeat_penalty = o.repeat_penalty;
  p.penalty_last_n = o.penalty_last_n;
  p.frequency_penalty = o.frequency_penalty;
  p.presence_penalty = o.presence_penalty;
  if (o.seed) {
    p.seed = *o.seed;
  } else {
    std::random_device device;
    p.seed = (uint64_t{device()} << 32) | device();
  }
  return p;
}

Result<std::shared_ptr<const runtime::grammar::TokenTables>> prepare_constraint(
    const Constraint& constraint, const std::shared_ptr<const runtime::grammar::VocabIndex>& vocab) {
  namespace grammar = runtime::grammar;
  grammar::GrammarSyntax syntax = grammar::GrammarSyntax::kGbnf;
  switch (constraint.kind) {
    case ConstraintKind::kNone: return std::shared_ptr<const grammar::TokenTables>();
    case ConstraintKind::kGbnf: syntax = grammar::GrammarSyntax::kGbnf; break;
    case ConstraintKind::kJsonSchema: syntax = grammar::GrammarSyntax::kJsonSchema; break;
    case ConstraintKind::kJsonObject: syntax = grammar::GrammarSyntax::kJsonObject; break;
  }
  CERA_ASSIGN_OR_RETURN(grammar::PreparedGrammar prepared, grammar::prepare_grammar(syntax, constraint.source, vocab));
  return prepared.tables;
}

FinishReason to_finish_reason(runtime::FinishReason reason) {
  switch (reason) {
    case runtime::FinishReason::kEndOfGeneration: return FinishReason::kEndOfGeneration;
    case runtime::FinishReason::kMaxTokens: return FinishReason::kMaxTokens;
    case runtime::FinishReason::kStopString: return FinishReason::kStopString;
    case runtime::FinishReason::kCancelled: return FinishReason::kCancelled;
    case runtime::FinishReason::kContextFull: return FinishReason::kContextFull;
    case runtime::FinishReason::kError: break;
  }
  return FinishReason::kCancelled;
}

std::optional<runtime::embed::Pooling> from_pooling(Pooling pooling) {
  switch (pooling) {
    case Pooling::kModelDefault: return std::nullopt;
    case Pooling::kNone: return runtime::embed::Pooling::kNone;
    case Pooling::kMean: return runtime::embed::Pooling::kMean;
    case Pooling::kCls: return runtime::embed::Pooling::kCls;
    case Pooling::kLast: return runtime::embed::Pooling::kLast;
  }
  return std::nullopt;
}

Pooling to_pooling(runtime::embed::Pooling pooling) {
  switch (pooling) {
    case runtime::embed::Pooling::kNone: return Pooling::kNone;
    case runtime::embed::Pooling::kMean: return Pooling::kMean;
    case runtime::embed::Pooling::kCls: return Pooling::kCls;
    case runtime::embed::Pooling::kLast: return Pooling::kLast;
  }
  return Pooling::kModelDefault;
}

}  // namespace cera::api

namespace cera {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid argument";
    case ErrorKind::kNotFound: return "not found";
    case ErrorKind::kCorrupt: return "corrupt";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kIo: return "i/o error";
    case ErrorKind::kOutOfRange: return "out of range";
    case ErrorKind::kCancelled: return "cancelled";
    case ErrorKind::kUnavailable: return "unavailable";
    case ErrorKind::kInternal: return "internal error";
  }
  return "unknown error";
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEndOfGeneration: return "stop";
    case FinishReason::kMaxTokens: return "length";
    case FinishReason::kStopString: return "stop string";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kContextFull: return "context full";
  }
  return "?";
}

}  // namespace cera
