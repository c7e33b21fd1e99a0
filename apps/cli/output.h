// Everything the `cera` command writes to stdout goes through here, so that a write error (a full
// disk, /dev/full, a closed terminal) is never silent: the first failure prints one message to
// stderr naming stdout and the errno text, later writes are dropped, and the process exits 1.
// The one decision: a failed write does not throw (it may happen inside a request's text sink, on
// the engine loop's thread, which must not unwind through library code); callers check
// stdout_ok() and stop their work, run/chat by cancelling the request. main() makes the final check (flush and close) at exit.
#pragma once

#include <fmt/format.h>

#include <string_view>
#include <utility>

namespace cera::cli {

// Writes `text` to stdout and flushes it when `flush` (streamed text must reach a pipe at once).
// Returns false, after reporting the error once on stderr, when this or an earlier write failed.
// Thread: the main thread only (stdout's FILE lock is taken, but the failure flag is plain).
bool stdout_write(std::string_view text, bool flush = false);
bool stdout_flush();
// Whether every write so far succeeded (false after the first failure).
bool stdout_ok();

// fmt::print to stdout, checked: the result of stdout_write.
template <typename... Args>
bool stdout_print(fmt::format_string<Args...> format, Args&&... args) {
  return stdout_write(fmt::format(format, std::forward<Args>(args)...));
}

// Throws CLI::RuntimeError(1) when a write to stdout failed (its message is already printed):
// for commands that check between steps (a table row, a tokenizer line).
void fail_if_stdout_failed();

// At exit: flushes and closes stdout, reporting a failure as stdout_write does. Returns the exit
// status to use: 1 when stdout failed and `status` is 0, else `status` (a Ctrl-C's 130 stays).
int finish_stdout(int status);

}  // namespace cera::cli
