// Status and Result<T>: errors as values at the boundaries (files, requests, allocations).
// A Status carries a closed ErrorCode for control flow and a message for people; messages name
// the thing that was wrong, what was expected and what was found.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace cera {

enum class ErrorCode {
  kOk,
  kInvalidArgument,  // caller passed something malformed
  kNotFound,         // a key, tensor or file that does not exist
  kCorrupt,          // a file that breaks its format's rules
  kUnsupported,      // well-formed but not something cera handles (yet)
  kIo,               // the operating system said no
  kOutOfRange,       // a size or index beyond a limit
  kCancelled,
  kUnavailable,      // cannot be done now, may be later (a full queue): try again
  kInternal,
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return {}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corrupt: tensor 'blk.0.attn_q.weight': ..." for logs and the CLI.
  std::string to_string() const;

  // Prefix the message with context, e.g. the file name, keeping the code.
  Status with_context(std::string_view context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status ok_status() { return {}; }
inline Status invalid_argument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status corrupt(std::string m) { return {ErrorCode::kCorrupt, std::move(m)}; }
inline Status unsupported(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
inline Status io_error(std::string m) { return {ErrorCode::kIo, std::move(m)}; }
inline Status out_of_range(std::string m) { return {ErrorCode::kOutOfRange, std::move(m)}; }
inline Status unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }

// A value or the Status that explains why there is none. Never holds an ok Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                      // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  const Status& status() const& {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  // On a temporary Result the Status is returned by value: a reference into the temporary would
  // dangle once the full expression ends (`auto&& st = make().status();`).
  Status status() && { return ok() ? Status{} : std::get<Status>(std::move(v_)); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const { return ok() ? std::get<T>(v_) : std::move(fallback); }

 private:
  std::variant<T, Status> v_;
};

inline const Status& status_of(const Status& s) { return s; }
template <class T>
const Status& status_of(const Result<T>& r) {
  return r.status();
}

}  // namespace cera

// Propagate a failed Status (or the Status of a failed Result) to the caller.
#define CERA_RETURN_IF_ERROR(expr)                       \
  do {                                                   \
    auto&& cera_status_ = (expr);                        \
    if (!cera_status_.ok()) return ::cera::status_of(cera_status_); \
  } while (0)

#define CERA_CONCAT_INNER_(a, b) a##b
#define CERA_CONCAT_(a, b) CERA_CONCAT_INNER_(a, b)
// `CERA_ASSIGN_OR_RETURN(auto x, make_x());` unwraps a Result or returns its Status.
#define CERA_ASSIGN_OR_RETURN(lhs, expr) \
  CERA_ASSIGN_OR_RETURN_IMPL_(CERA_CONCAT_(cera_result_, __COUNTER__), lhs, expr)
#define CERA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
