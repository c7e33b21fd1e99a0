#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "core/read_file.h"

namespace cera {
namespace {

namespace fs = std::filesystem;

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// Temporary files a signal handler may have to remove. A fixed table of plain character arrays,
// because the handler may neither allocate nor lock; a file written while all slots are taken
// is simply not covered (a process writes one or two outputs at a time).
struct PendingSlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 holds a path
  char path[4096] = {};
};
std::array<PendingSlot, 8> g_pending;

int register_pending(const fs::path& temp) {
  const std::string& s = temp.native();
  if (s.size() >= sizeof(PendingSlot::path)) return -1;
  for (size_t i = 0; i < g_pending.size(); ++i) {
    int expected = 0;
    if (!g_pending[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_pending[i].path, s.c_str(), s.size() + 1);
    g_pending[i].state.store(2);
    return static_cast<int>(i);
  }
  return -1;
}

void unregister_pending(int slot) {
  if (slot >= 0) g_pending[static_cast<size_t>(slot)].state.store(0);
}

// The target to write: `path`, or what a symbolic link at `path` points at (so the link keeps
// working and names the new file, as `cp` does).
Result<fs::path> resolve_target(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return path;
    return io_error("cannot stat output " + quoted(path) + ": " + std::strerror(errno));
  }
  if (!S_ISLNK(st.st_mode)) return path;
  std::error_code ec;
  fs::path target = fs::canonical(path, ec);
  if (ec) {
    return invalid_argument("output " + quoted(path) + " is a symbolic link to a missing or unreachable file (" +
                            ec.message() + "); name the file itself");
  }
  return target;
}

std::string temp_name_for(const fs::path& target, uint64_t nonce) {
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".partial-%012llx", static_cast<unsigned long long>(nonce & 0xffffffffffffull));
  return target.string() + suffix;
}

}  // namespace

Status check_output_path(const fs::path& path, std::span<const fs::path> inputs) {
  if (path.empty()) return invalid_argument("the output path is empty");
  CERA_ASSIGN_OR_RETURN(fs::path target, resolve_target(path));
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return io_error("cannot stat output " + quoted(path) + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_argument("output " + quoted(path) + " exists and is " + file_type_name(st.st_mode) +
                            "; only a regular file is replaced: choose another output path");
  }
  for (const fs::path& input : inputs) {
    struct stat in {};
    if (::stat(input.c_str(), &in) != 0) continue;  // an input that does not exist is not this file
    if (in.st_dev == st.st_dev && in.st_ino == st.st_ino) {
      return invalid_argument("output " + quoted(path) + " is the input " + quoted(input) +
                              "; writing it would destroy the input: choose another output path");
    }
  }
  return {};
}

Result<OutputFile> OutputFile::create(const fs::path& path, std::span<const fs::path> inputs) {
  CERA_RETURN_IF_ERROR(check_output_path(path, inputs));
  CERA_ASSIGN_OR_RETURN(fs::path target, resolve_target(path));
  int replaced_mode = -1;
  if (struct stat st {}; ::stat(target.c_str(), &st) == 0) replaced_mode = static_cast<int>(st.st_mode & 07777);

  // A fresh name each time (O_EXCL): never truncate a file that happens to carry the name.
  std::random_device rd;
  std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(::getpid()));
  for (int attempt = 0; attempt < 16; ++attempt) {
    fs::path temp = temp_name_for(target, rng());
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return OutputFile(std::move(target), std::move(temp), fd, replaced_mode);
    if (errno != EEXIST) {
      return io_error("cannot create " + quoted(temp) + " (the temporary file for " + quoted(path) +
                      "): " + std::strerror(errno));
    }
  }
  return io_error("cannot create a temporary file next to " + quoted(path) + ": every name tried exists");
}

OutputFile::OutputFile(fs::path target, fs::path temp, int fd, int replaced_mode)
    : target_(std::move(target)), temp_(std::move(temp)), fd_(fd), replaced_mode_(replaced_mode) {
  slot_ = register_pending(temp_);
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : target_(std::move(other.target_)),
      temp_(std::move(other.temp_)),
      fd_(std::exchange(other.fd_, -1)),
      replaced_mode_(other.replaced_mode_),
      slot_(std::exchange(other.slot_, -1)) {
  other.temp_.clear();
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    temp_.clear();
  }
  unregister_pending(std::exchange(slot_, -1));
}

Status OutputFile::write(std::span<const std::byte> bytes) {
  if (fd_ < 0) return io_error("writing " + quoted(target_) + ": the file is already closed");
  const auto* p = reinterpret_cast<const char*>(bytes.data());
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      const std::string why = err == ENOSPC ? "no space left on the device" : std::strerror(err);
      discard();
      return io_error("writing " + quoted(target_) + " failed: " + why + "; nothing was written there");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return {};
}

Status OutputFile::commit() {
  if (fd_ < 0) return io_error("writing " + quoted(target_) + ": the file is already closed");
  auto fail = [&](const std::string& what, int err) {
    discard();
    return io_error(what + " " + quoted(target_) + " failed: " + std::strerror(err) + "; nothing was written there");
  };
  if (replaced_mode_ >= 0 && ::fchmod(fd_, static_cast<mode_t>(replaced_mode_)) != 0) return fail("setting the mode of", errno);
  if (::fsync(fd_) != 0) return fail("flushing", errno);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return fail("closing", errno);
  // The target may have changed since create() (another program put a FIFO there): check again.
  if (Status st = check_output_path(target_); !st.ok()) {
    discard();
    return st;
  }
  if (::rename(temp_.c_str(), target_.c_str()) != 0) return fail("renaming the temporary file to", errno);
  temp_.clear();
  unregister_pending(std::exchange(slot_, -1));
  return {};
}

void remove_pending_outputs_from_signal_handler() {
  for (PendingSlot& slot : g_pending) {
    if (slot.state.load() == 2) ::unlink(slot.path);
  }
}

}  // namespace cera
