// Runs the built `cera` binary with arguments and captures stdout, stderr and the exit code,
// for end-to-end tests of the command line. CliOptions redirect stdin or stdout (to /dev/full),
// cap the size of files the process may write, and bound the run's time; CliProcess runs it in
// the background so a test can feed its stdin, watch its output and send it a signal (Ctrl-C).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace cera::test {

struct CliResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that ended it, 0 when it exited
  bool timed_out = false;
  long max_rss_kb = 0;  // the process's peak resident memory (getrusage of the child)
  std::string out;
  std::string err;
};

struct CliOptions {
  std::string stdin_path = "/dev/null";
  std::string stdout_path;            // empty: captured into CliResult::out
  long long file_size_limit = -1;     // RLIMIT_FSIZE in bytes (SIGXFSZ ignored: writes fail EFBIG)
  std::chrono::seconds timeout{300};  // then SIGKILL and timed_out
};

CliResult run_cera(const std::vector<std::string>& args, const CliOptions& options = {});

// A cera process running in the background; stdin is a pipe the test writes to.
class CliProcess {
 public:
  explicit CliProcess(const std::vector<std::string>& args);
  ~CliProcess();  // kills the process if it still runs
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  // Whether stdout (or stderr) reached at least `bytes` bytes / contains `text` within `timeout`.
  bool wait_for_stdout_bytes(size_t bytes, std::chrono::milliseconds timeout) const;
  bool wait_for_stderr(const std::string& text, std::chrono::milliseconds timeout) const;
  std::string stdout_text() const;
  std::string stderr_text() const;
  void write_stdin(const std::string& text);
  void close_stdin();
  void send_signal(int sig);
  CliResult wait(std::chrono::seconds timeout = std::chrono::seconds(120));

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  std::filesystem::path out_path_, err_path_;
};

}  // namespace cera::test
