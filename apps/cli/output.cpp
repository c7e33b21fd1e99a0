#include "output.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace cera::cli {
namespace {

bool g_failed = false;

// Reports the first failure; `err` is the errno of the failing call (0: unknown, e.g. an error
// flag set by an earlier buffered write whose errno is gone).
void report(int err) {
  if (g_failed) return;
  g_failed = true;
  std::fprintf(stderr, "cera: cannot write to stdout: %s\n",
               err != 0 ? std::strerror(err) : "write error");
}

}  // namespace

bool stdout_write(std::string_view text, bool flush) {
  if (g_failed) return false;
  errno = 0;
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) {
    report(errno);
    return false;
  }
  if (flush) return stdout_flush();
  if (std::ferror(stdout)) {
    report(errno);
    return false;
  }
  return true;
}

bool stdout_flush() {
  if (g_failed) return false;
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    report(errno);
    return false;
  }
  return true;
}

bool stdout_ok() {
  return !g_failed;
}

void fail_if_stdout_failed() {
  if (g_failed) throw CLI::RuntimeError(1);
}

int finish_stdout(int status) {
  // CLI11's --help and error texts go to std::cout, which shares stdout's buffer
  // (sync_with_stdio), so this flush covers them too.
  const bool flushed = stdout_flush();
  errno = 0;
  const bool closed = std::fclose(stdout) == 0;  // a close can report a deferred error (NFS)
  if (flushed && !closed) report(errno);
  return g_failed && status == 0 ? 1 : status;
}

}  // namespace cera::cli
