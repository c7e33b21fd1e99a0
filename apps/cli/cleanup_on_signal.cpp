#include "cleanup_on_signal.h"

#include <csignal>

#include "core/output_file.h"

namespace cera::cli {
namespace {

void on_signal(int sig) {
  remove_pending_outputs_from_signal_handler();
  // Die of the same signal so the shell sees it (exit status 128 + sig).
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void remove_partial_outputs_on_signal() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGHUP, on_signal);
}

}  // namespace cera::cli
