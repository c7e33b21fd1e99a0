// Stream::State: what a generation in flight shares between the engine loop's sinks (its thread)
// and the caller's thread: the text not yet taken by next(), the end, and the request's handle.
// The sinks only append under one small mutex, so a caller that never reads cannot hold up the loop.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cera/engine.h"
#include "runtime/engine/request.h"

namespace cera {

struct Stream::State {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::string pending;  // text not yet returned by next()
    bool ended = false;   // on_finish ran
  };
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  runtime::RequestHandle handle;
  bool taken_end = false;  // next() reported done

  // Sets the request's on_text / on_finish to feed `shared` (and the caller's callback).
  void attach(runtime::RequestParams& params, TextCallback on_text);
};

}  // namespace cera
