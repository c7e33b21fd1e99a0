// cera.Stream: a generation in flight as a Python iterator of text pieces, and the one wait every
// blocking call of the module goes through (generate() and chat() are a Stream read to its end),
// so that Ctrl-C cancels the request and raises KeyboardInterrupt wherever Python waits on cera.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "bindings.h"

namespace cera::python {

class PyStream {
 public:
  // `engine` is kept alive while the stream is, so Engine.close() (or losing the last reference
  // to the Engine) never frees the loop under a stream still being read.
  PyStream(std::shared_ptr<Engine> engine, std::unique_ptr<Stream> stream);
  PyStream(PyStream&&) = delete;

  // __next__: the next non-empty piece of text, waiting for it with the GIL released. At the end
  // nb::stop_iteration, or the generation's error (once). A pending signal cancels the request
  // and raises its exception (KeyboardInterrupt). Called with the GIL held, from one thread at a
  // time (a second reader gets RuntimeError).
  nb::str next();
  // Waits for the end as next() does, dropping the text (it is in the result), and returns the
  // result or raises the generation's error.
  Completion result();
  // From any Python thread; the stream then ends soon with finish_reason "cancelled".
  void cancel();
  // Cancels an unfinished generation, waits for its end (so `result` stays readable) and lets the
  // request and the engine reference go. Idempotent.
  void close();
  bool finished() const { return finished_; }

 private:
  class Reading;  // the one-reader guard
  std::shared_ptr<Stream> live();  // the stream, or nb::stop_iteration once closed
  void finish(Stream& stream);      // records the end's result or error (GIL held)

  std::shared_ptr<Engine> engine_;
  // Shared so that close() on one thread cannot free it under a next() on another (which holds a
  // copy while its GIL is released).
  std::shared_ptr<Stream> stream_;
  std::atomic<bool> reading_ = false;
  bool finished_ = false;
  std::optional<Completion> completion_;
  std::optional<Error> error_;
  bool error_raised_ = false;  // next() raised error_ already; it stops iterating from then on
};

}  // namespace cera::python
