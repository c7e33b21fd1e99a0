#include "completion_run.h"

namespace cera::server {

std::variant<std::unique_ptr<CompletionRun>, ApiError> CompletionRun::start(const CompletionJob& job,
                                                                            const ServedModel& model, Metrics& metrics,
                                                                            Clock::time_point arrival) {
  std::unique_ptr<CompletionRun> run(new CompletionRun());
  const std::shared_ptr<Shared> shared = run->shared_;
  shared->pending.resize(job.n);
  shared->n_open = job.n;
  const int32_t n_prompt = static_cast<int32_t>(job.params.prompt.size());
  for (int32_t i = 0; i < job.n; ++i) {
    runtime::RequestParams p = job.params;
    p.sampling.seed = job.params.sampling.seed + static_cast<uint64_t>(i);
    // Loop thread: append and signal, nothing else (the header's decision).
    struct Timing {
      Clock::time_point last;
      bool first = true;
    };
    auto timing = std::make_shared<Timing>();
    p.on_text = [shared, i](std::string_view text) {
      std::lock_guard lock(shared->mu);
      shared->pending[i].text += text;
      shared->cv.notify_one();
    };
    p.on_token = [shared, i, timing, arrival, &metrics](int32_t) {
      const Clock::time_point now = Clock::now();
      if (timing->first) metrics.time_to_first_token.observe(std::chrono::duration<double>(now - arrival).count());
      else metrics.inter_token_latency.observe(std::chrono::duration<double>(now - timing->last).count());
      timing->first = false;
      timing->last = now;
      metrics.generation_tokens.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard lock(shared->mu);
      ++shared->n_tokens;
    };
    if (p.logprobs) {
      p.on_logprobs = [shared, i](const runtime::TokenLogprobs& lp) {
        std::lock_guard lock(shared->mu);
        shared->pending[i].logprobs.push_back(lp);
      };
    }
    p.on_finish = [shared, i, arrival, n_prompt, &metrics](const runtime::RequestResult& result) {
      metrics.e2e_latency.observe(std::chrono::duration<double>(Clock::now() - arrival).count());
      // The prompt is the request's, once, as in its usage, however many choices share it.
      if (i == 0) metrics.prompt_tokens.fetch_add(static_cast<uint64_t>(n_prompt), std::memory_order_relaxed);
      switch (result.reason) {
        case runtime::FinishReason::kEndOfGeneration:
        case runtime::FinishReason::kStopString: metrics.requests_stop.fetch_add(1); break;
        case runtime::FinishReason::kMaxTokens:
        case runtime::FinishReason::kContextFull: metrics.requests_length.fetch_add(1); break;
        case runtime::FinishReason::kCancelled: metrics.requests_cancelled.fetch_add(1); break;
        case runtime::FinishReason::kError: metrics.requests_failed.fetch_add(1); break;
      }
      std::lock_guard lock(shared->mu);
      shared->pending[i].result = result;
      --shared->n_open;
      shared->cv.notify_one();
    };
    auto handle = model.loop->submit(std::move(p));
    if (!handle.ok()) {
      // Choices already queued are cancelled by the destructor; their on_finish still runs.
      return error_from_status(handle.status(), job.endpoint == Endpoint::kChat ? "messages" : "prompt");
    }
    run->handles_.push_back(std::move(handle).value());
  }
  return run;
}

CompletionRun::~CompletionRun() { cancel(); }

void CompletionRun::cancel() {
  for (const runtime::RequestHandle& h : handles_) h.cancel();
}

int64_t CompletionRun::n_tokens_generated() const {
  std::lock_guard lock(shared_->mu);
  return shared_->n_tokens;
}

bool CompletionRun::take(std::vector<ChoiceNews>& news, std::chrono::milliseconds timeout) {
  const auto n = static_cast<int32_t>(handles_.size());
  news.assign(n, ChoiceNews{});
  std::unique_lock lock(shared_->mu);
  const auto has_news = [&] {
    for (const ChoiceNews& c : shared_->pending)
      if (!c.text.empty() || !c.logprobs.empty() || c.result) return true;
    return false;
  };
  if (shared_->n_reported == n) return false;
  shared_->cv.wait_for(lock, timeout, has_news);
  for (int32_t i = 0; i < n; ++i) {
    ChoiceNews& c = shared_->pending[i];
    if (c.result) ++shared_->n_reported;
    news[i] = std::move(c);
    c = ChoiceNews{};
  }
  return true;
}

std::vector<runtime::RequestResult> CompletionRun::wait_all() {
  std::vector<runtime::RequestResult> results;
  for (const runtime::RequestHandle& h : handles_) results.push_back(h.wait());
  return results;
}

}  // namespace cera::server
