// ApiError: a refusal as OpenAI's clients expect it, `{"error": {"message", "type", "param",
// "code"}}` with an HTTP status. The one decision: every refusal of the server, including those
// cpp-httplib makes itself (no route, a body over the limit), goes out in this one shape, so a
// client needs a single error path.
#pragma once

#include <string>

#include "core/status.h"

namespace cera::server {

struct ApiError {
  int status = 400;
  std::string message;  // names the input, the limit and what to change
  std::string type = "invalid_request_error";  // OpenAI's: invalid_request_error, authentication_error, ...
  std::string param;    // the request field at fault ("messages[1].content"), "" when none
  std::string code;     // machine-readable reason ("context_length_exceeded"), "" when none
  int retry_after_seconds = 0;  // > 0: sent as a Retry-After header (429, 503)
};

// 400 invalid_request_error naming `param`.
ApiError bad_request(std::string message, std::string param = "", std::string code = "");
// A Status from the engine turned into the response a client should see: kUnavailable (a full
// queue) is 429 with Retry-After, argument errors 400, everything else 500.
ApiError error_from_status(const Status& status, std::string param = "");
// The error cpp-httplib's own status codes mean (404 no such route, 413 body too large, ...), for
// responses it produced without a body.
ApiError error_for_http_status(int status, size_t max_body_bytes);

// {"error": {...}} as compact JSON.
std::string error_body(const ApiError& error);

}  // namespace cera::server
