#include "api_error.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace cera::server {

ApiError bad_request(std::string message, std::string param, std::string code) {
  return {.status = 400, .message = std::move(message), .param = std::move(param), .code = std::move(code)};
}

ApiError error_from_status(const Status& status, std::string param) {
  switch (status.code()) {
    case ErrorCode::kUnavailable:
      return {.status = 429,
              .message = status.message() + ": retry later, or start the server with a larger --max-queue",
              .type = "rate_limit_error",
              .code = "queue_full",
              .retry_after_seconds = 1};
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kOutOfRange:
      return bad_request(status.message(), std::move(param));
    default:
      return {.status = 500, .message = status.to_string(), .type = "server_error", .code = "internal_error"};
  }
}

ApiError error_for_http_status(int status, size_t max_body_bytes) {
  switch (status) {
    case 404:
      return {.status = 404, .message = "no such route: the server answers /v1/chat/completions, /v1/completions, "
                                        "/v1/models, /health, /metrics, /tokenize, /detokenize and /",
              .code = "not_found"};
    case 405:
      return {.status = 405, .message = "this route does not take that method", .code = "method_not_allowed"};
    case 413:
      return {.status = 413,
              .message = fmt::format("the request body is larger than the server's limit of {} bytes "
                                     "(--max-body-mb sets it)",
                                     max_body_bytes),
              .code = "request_too_large"};
    case 414:
      return {.status = 414, .message = "the request line is too long", .code = "uri_too_long"};
    case 400:
      return bad_request("the HTTP request is malformed");
    default:
      return {.status = status, .message = fmt::format("HTTP status {}", status), .type = "server_error"};
  }
}

std::string error_body(const ApiError& error) {
  const auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  const nlohmann::json body = {{"error",
                                {{"message", error.message},
                                 {"type", error.type},
                                 {"param", or_null(error.param)},
                                 {"code", or_null(error.code)}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace cera::server
