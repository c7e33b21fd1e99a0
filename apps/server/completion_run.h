// CompletionRun: the n choices of one request, each a request of the engine loop, and the queue
// between the loop's sinks (its thread) and the HTTP thread that streams them. The one decision:
// the sinks only append to this queue and signal it, under one small mutex, so a slow or dead
// socket can never hold up the loop; a client that goes away cancels its requests, which leave
// the batch at the loop's next step.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "api_error.h"
#include "metrics.h"
#include "openai_request.h"
#include "runtime/engine/request.h"
#include "served_model.h"

namespace cera::server {

// What one choice produced since the last take().
struct ChoiceNews {
  std::string text;
  std::vector<runtime::TokenLogprobs> logprobs;
  std::optional<runtime::RequestResult> result;  // once, when the choice ended
};

class CompletionRun {
 public:
  using Clock = std::chrono::steady_clock;

  // Submits every choice (choice i with seed + i). On an error nothing stays submitted.
  static std::variant<std::unique_ptr<CompletionRun>, ApiError> start(const CompletionJob& job, const ServedModel& model,
                                                                      Metrics& metrics, Clock::time_point arrival);
  ~CompletionRun();  // cancels what has not finished
  CompletionRun(const CompletionRun&) = delete;
  CompletionRun& operator=(const CompletionRun&) = delete;

  // Waits up to `timeout` for news of any choice, then moves all of it into `news` ([n]).
  // Returns false once every choice has ended and its news was taken.
  bool take(std::vector<ChoiceNews>& news, std::chrono::milliseconds timeout);
  // Every choice's result, waiting for the ends (non-streamed responses).
  std::vector<runtime::RequestResult> wait_all();
  void cancel();
  int32_t n_choices() const { return static_cast<int32_t>(handles_.size()); }
  runtime::RequestId first_id() const { return handles_.empty() ? 0 : handles_[0].id(); }
  int64_t n_tokens_generated() const;  // over every choice, so far

 private:
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<ChoiceNews> pending;  // [n]
    int32_t n_open = 0;               // choices not yet ended
    int32_t n_reported = 0;           // ended choices whose result was taken
    int64_t n_tokens = 0;
  };
  CompletionRun() = default;

  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::vector<runtime::RequestHandle> handles_;
};

}  // namespace cera::server
