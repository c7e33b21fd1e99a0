#include "cli_runner.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "test_paths.h"

namespace cera::test {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Paths {
  std::filesystem::path out, err;
};

Paths next_paths() {
  static int counter = 0;
  const int n = counter++;
  return {temp_dir() / ("cli-out-" + std::to_string(n)),
          temp_dir() / ("cli-err-" + std::to_string(n))};
}

// In the child: stdin from `in_fd`, stdout and stderr to the paths, then exec cera.
[[noreturn]] void exec_cera(const std::vector<std::string>& args, int in_fd,
                            const std::string& out_path, const std::string& err_path,
                            long long file_size_limit) {
  const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (in_fd < 0 || out < 0 || err < 0) _exit(127);
  if (::dup2(in_fd, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) _exit(127);
  std::signal(SIGPIPE, SIG_DFL);  // the test process ignores it (CliProcess); cera gets the default
  if (file_size_limit >= 0) {
    const rlimit limit{static_cast<rlim_t>(file_size_limit), static_cast<rlim_t>(file_size_limit)};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    std::signal(SIGXFSZ, SIG_IGN);  // an ignored signal stays ignored across exec
  }
  const std::string binary = (binary_dir() / "apps/cli/cera").string();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(binary.c_str(), argv.data());
  _exit(127);
}

// Waits for the child, killing it after `timeout`.
void reap(pid_t pid, std::chrono::seconds timeout, CliResult& result) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  rusage usage{};
  while (true) {
    const pid_t r = ::wait4(pid, &status, WNOHANG, &usage);
    if (r == pid) break;
    if (r < 0) return;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &usage);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  result.max_rss_kb = usage.ru_maxrss;
}

}  // namespace

CliResult run_cera(const std::vector<std::string>& args, const CliOptions& options) {
  const Paths paths = next_paths();
  const std::string out_path =
      options.stdout_path.empty() ? paths.out.string() : options.stdout_path;
  const pid_t pid = ::fork();
  if (pid == 0) {
    exec_cera(args, ::open(options.stdin_path.c_str(), O_RDONLY), out_path, paths.err.string(),
              options.file_size_limit);
  }
  CliResult result;
  reap(pid, options.timeout, result);
  if (options.stdout_path.empty()) result.out = slurp(paths.out);
  result.err = slurp(paths.err);
  return result;
}

CliProcess::CliProcess(const std::vector<std::string>& args) {
  const Paths paths = next_paths();
  out_path_ = paths.out;
  err_path_ = paths.err;
  std::signal(SIGPIPE,
              SIG_IGN);  // a write to the stdin of a cera that has ended must not kill the test
  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  pid_ = ::fork();
  if (pid_ == 0) exec_cera(args, fds[0], out_path_.string(), err_path_.string(), -1);
  ::close(fds[0]);
  stdin_fd_ = fds[1];
}

CliProcess::~CliProcess() {
  close_stdin();
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool CliProcess::wait_for_stdout_bytes(size_t bytes, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    if (std::filesystem::file_size(out_path_, ec) >= bytes && !ec) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool CliProcess::wait_for_stderr(const std::string& text, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (stderr_text().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string CliProcess::stdout_text() const {
  return slurp(out_path_);
}
std::string CliProcess::stderr_text() const {
  return slurp(err_path_);
}

void CliProcess::write_stdin(const std::string& text) {
  for (size_t at = 0; stdin_fd_ >= 0 && at < text.size();) {
    const ssize_t n = ::write(stdin_fd_, text.data() + at, text.size() - at);
    if (n <= 0) return;
    at += static_cast<size_t>(n);
  }
}

void CliProcess::close_stdin() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  stdin_fd_ = -1;
}

void CliProcess::send_signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

CliResult CliProcess::wait(std::chrono::seconds timeout) {
  CliResult result;
  close_stdin();
  if (pid_ > 0) reap(pid_, timeout, result);
  pid_ = -1;
  result.out = stdout_text();
  result.err = stderr_text();
  return result;
}

}  // namespace cera::test
