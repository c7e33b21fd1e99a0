#include "text_input.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "arg_checks.h"
#include "core/read_file.h"

namespace cera::cli {
namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

// Closes the descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// A FIFO opened O_NONBLOCK (which never blocks) is waited on with poll until a writer has
// written or closed: Linux reports neither POLLIN nor POLLHUP before a writer has come.
Status wait_for_writer(const char* command, const std::string& path, int fd) {
  bool noted = false;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, noted ? -1 : 1000);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(fmt::format("cannot wait on FIFO '{}': {}", path, errno_text(errno)));
    }
    if (n > 0) break;
    fmt::print(stderr, "cera {}: waiting for input from the pipe or FIFO '{}' (Ctrl-C to stop)\n",
               command, path);
    noted = true;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    return io_error(fmt::format("cannot read FIFO '{}': {}", path, errno_text(errno)));
  }
  return {};
}

}  // namespace

void add_max_input_option(CLI::App* cmd, int64_t& mib) {
  cmd->add_option(
         "--max-input-mb", mib,
         fmt::format("most MiB read from a text input file (default {})", kDefaultMaxInputMiB))
      ->check(int_range(1, kMaxMaxInputMiB));
}

Status input_too_long(std::string_view what, int64_t max_mib) {
  return out_of_range(
      fmt::format("{} is longer than the limit of {} MiB on text inputs: raise it with "
                  "--max-input-mb",
                  what, max_mib));
}

Result<std::string> read_text_input(const char* command, const std::string& path, int64_t max_mib) {
  const uint64_t limit = static_cast<uint64_t>(max_mib) << 20;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return io_error(fmt::format("cannot read '{}': {}", path, errno_text(errno)));
  const bool fifo = S_ISFIFO(st.st_mode);
  if (!S_ISREG(st.st_mode) && !fifo && !S_ISCHR(st.st_mode)) {
    return invalid_argument(
        fmt::format("'{}' is {}, not a text file", path, file_type_name(st.st_mode)));
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > limit) {
    return input_too_long(fmt::format("'{}' ({} bytes)", path, st.st_size), max_mib);
  }
  Fd in;
  in.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0));
  if (in.fd < 0) return io_error(fmt::format("cannot read '{}': {}", path, errno_text(errno)));
  if (fifo) CERA_RETURN_IF_ERROR(wait_for_writer(command, path, in.fd));
  std::string text;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(in.fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(fmt::format("cannot read '{}': {}", path, errno_text(errno)));
    }
    if (text.size() + static_cast<uint64_t>(n) > limit)
      return input_too_long(fmt::format("'{}'", path), max_mib);
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace cera::cli
