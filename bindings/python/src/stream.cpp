// cera.Stream and cera.Completion. Every wait polls Stream::next with a short timeout and the GIL
// released, then takes the GIL back to run pending signal handlers: Stream::next returns as soon
// as text arrives, so the poll costs nothing while tokens flow and bounds Ctrl-C's latency when
// they do not (a long prompt, a full queue).
#include "stream.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <stdexcept>
#include <utility>

namespace cera::python {
namespace {

// The bound on how long a signal waits to be noticed.
constexpr std::chrono::milliseconds kPoll{50};

// One wait for text, GIL released; then Python's signal handlers run (PyErr_CheckSignals does
// that on the main thread only). A handler that raised (SIGINT: KeyboardInterrupt) cancels the
// request, and its exception propagates.
Stream::Chunk poll(Stream& stream) {
  Stream::Chunk chunk;
  {
    nb::gil_scoped_release unlocked;
    chunk = stream.next(kPoll);
  }
  if (PyErr_CheckSignals() != 0) {
    stream.cancel();
    throw nb::python_error();
  }
  return chunk;
}

// Python spellings of FinishReason (identifiers, unlike finish_reason_name's "stop string").
const char* finish_reason_str(FinishReason r) {
  switch (r) {
    case FinishReason::kEndOfGeneration: return "stop";
    case FinishReason::kMaxTokens: return "length";
    case FinishReason::kStopString: return "stop_string";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kContextFull: return "context_full";
  }
  return "?";
}

}  // namespace

// Only one thread reads a stream at a time: two next() calls racing would split its text
// unpredictably between them, so the second is refused rather than served.
class PyStream::Reading {
 public:
  explicit Reading(std::atomic<bool>& flag) : flag_(flag) {
    if (flag_.exchange(true)) throw std::runtime_error("this cera.Stream is being read by another thread");
  }
  ~Reading() { flag_ = false; }
  Reading(const Reading&) = delete;
  Reading& operator=(const Reading&) = delete;

 private:
  std::atomic<bool>& flag_;
};

PyStream::PyStream(std::shared_ptr<Engine> engine, std::unique_ptr<Stream> stream)
    : engine_(std::move(engine)), stream_(std::move(stream)) {}

std::shared_ptr<Stream> PyStream::live() {
  if (!stream_) throw nb::stop_iteration();  // closed (close() always records the end first)
  return stream_;
}

void PyStream::finish(Stream& stream) {
  if (finished_) return;  // close() on another thread got there first
  Expected<Completion> r = [&] {
    nb::gil_scoped_release unlocked;
    return stream.result();  // immediate: the end has been seen
  }();
  finished_ = true;
  if (r) {
    completion_ = std::move(r).value();
  } else {
    error_ = r.error();
  }
}

nb::str PyStream::next() {
  if (!finished_) {
    const std::shared_ptr<Engine> keep = engine_;  // the engine outlives this wait, whoever closes
    const std::shared_ptr<Stream> s = live();
    Reading reading(reading_);
    for (;;) {
      Stream::Chunk chunk = poll(*s);
      if (chunk.done) finish(*s);
      if (!chunk.text.empty()) return to_str(chunk.text);
      if (chunk.done) break;
    }
  }
  if (error_ && !error_raised_) {
    error_raised_ = true;
    throw_error(*error_);
  }
  throw nb::stop_iteration();
}

Completion PyStream::result() {
  if (!finished_) {
    const std::shared_ptr<Engine> keep = engine_;
    const std::shared_ptr<Stream> s = live();
    Reading reading(reading_);
    while (!finished_) {
      if (poll(*s).done) finish(*s);
    }
  }
  if (error_) throw_error(*error_);
  return *completion_;
}

void PyStream::cancel() {
  if (stream_ && !finished_) stream_->cancel();
}

void PyStream::close() {
  if (!stream_) return;
  if (!finished_) {
    stream_->cancel();
    finish(*stream_);  // a cancelled request ends within a step
  }
  std::shared_ptr<Stream> stream = std::move(stream_);
  std::shared_ptr<Engine> engine = std::move(engine_);
  // The last reference to a closed Engine joins its loop thread: not while holding the GIL.
  nb::gil_scoped_release unlocked;
  stream.reset();
  engine.reset();
}

void bind_stream(nb::module_& m) {
  nb::class_<Completion>(m, "Completion", "A finished generation.")
      .def_prop_ro("text", [](const Completion& c) { return to_str(c.text); }, "The whole reply.")
      .def_prop_ro("finish_reason", [](const Completion& c) { return finish_reason_str(c.finish_reason); },
                   "'stop' (the model's end token or the grammar's end), 'length' (max_tokens), 'stop_string', "
                   "'cancelled' or 'context_full' (prompt + output reached n_ctx).")
      .def_ro("tokens", &Completion::tokens, "The generated token ids, without a final end token.")
      .def_prop_ro("prompt_tokens", [](const Completion& c) { return c.n_prompt_tokens; },
                   "Tokens of the prompt (after the chat template, with BOS).")
      .def_prop_ro("completion_tokens", [](const Completion& c) { return c.tokens.size(); },
                   "Tokens generated: len(tokens).")
      .def_ro("seconds_to_first_token", &Completion::seconds_to_first_token, "Queueing and the prompt.")
      .def_ro("seconds_generating", &Completion::seconds_generating, "From the first token to the end.")
      .def("__repr__", [](const Completion& c) {
        return nb::str("Completion(text={!r}, finish_reason={!r}, prompt_tokens={}, completion_tokens={})")
            .format(to_str(c.text), finish_reason_str(c.finish_reason), c.n_prompt_tokens, c.tokens.size());
      });

  nb::class_<PyStream>(m, "Stream",
                       "A generation in flight: iterate it for the text as it becomes final; `result` is the "
                       "Completion. Leaving a `with` block, close(), or the last reference going away cancels "
                       "an unfinished generation. Ctrl-C while waiting cancels it and raises KeyboardInterrupt.")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", &PyStream::next)
      .def_prop_ro("result", &PyStream::result,
                   "The Completion: waits for the end (the text not yet iterated is in it, not lost).")
      .def_prop_ro("finished", &PyStream::finished, "The generation has ended and its end has been seen.")
      .def("cancel", &PyStream::cancel, "Asks the generation to stop; safe from any thread.")
      .def("close", &PyStream::close, "Cancels it if unfinished, waits for its end and releases it.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PyStream& s, nb::args) { s.close(); });
}

}  // namespace cera::python
