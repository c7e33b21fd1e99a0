#include "api/facade_stream.h"

#include "api/facade_convert.h"

namespace cera {

void Stream::State::attach(runtime::RequestParams& params, TextCallback on_text) {
  params.on_text = [s = shared, cb = std::move(on_text)](std::string_view text) {
    if (cb) cb(text);
    {
      std::lock_guard lock(s->mu);
      s->pending.append(text);
    }
    s->cv.notify_all();
  };
  params.on_finish = [s = shared](const runtime::RequestResult&) {
    {
      std::lock_guard lock(s->mu);
      s->ended = true;
    }
    s->cv.notify_all();
  };
}

Stream::Stream(std::unique_ptr<State> state) : state_(std::move(state)) {}

Stream::~Stream() {
  if (state_ && !state_->handle.done()) state_->handle.cancel();
}

Stream::Chunk Stream::next(std::chrono::milliseconds timeout) {
  State::Shared& s = *state_->shared;
  std::unique_lock lock(s.mu);
  auto ready = [&] { return !s.pending.empty() || s.ended; };
  if (timeout == std::chrono::milliseconds::max()) {
    s.cv.wait(lock, ready);
  } else {
    s.cv.wait_for(lock, timeout, ready);
  }
  Chunk chunk;
  chunk.text = std::move(s.pending);
  s.pending.clear();
  chunk.done = s.ended;
  if (chunk.done) state_->taken_end = true;
  return chunk;
}

void Stream::cancel() { state_->handle.cancel(); }

Expected<Completion> Stream::result() {
  const runtime::RequestResult r = state_->handle.wait();
  if (r.reason == runtime::FinishReason::kError) return api::to_error(r.status);
  return Completion{.text = r.text,
                    .finish_reason = api::to_finish_reason(r.reason),
                    .tokens = r.tokens,
                    .n_prompt_tokens = r.n_prompt,
                    .seconds_to_first_token = r.seconds_to_first_token,
                    .seconds_generating = r.seconds_generating};
}

}  // namespace cera
