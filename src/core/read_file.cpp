#include "core/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cera {

const char* file_type_name(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Result<std::string> read_file(const std::filesystem::path& path, uint64_t max_bytes,
                              std::string_view what_to_raise) {
  // O_NONBLOCK so that a FIFO without a writer is refused below instead of blocking the open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return io_error("cannot open '" + path.string() + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_error("cannot stat '" + path.string() + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    return invalid_argument("'" + path.string() + "' is " + file_type_name(st.st_mode) + ", not a regular file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    std::string msg = "'" + path.string() + "' is " + std::to_string(size) + " bytes, over the limit of " +
                      std::to_string(max_bytes) + " bytes";
    if (!what_to_raise.empty()) msg += " (" + std::string(what_to_raise) + ")";
    return out_of_range(std::move(msg));
  }
  std::string out(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("reading '" + path.string() + "' failed: " + std::strerror(errno));
    if (n == 0) break;  // the file shrank while we read it: return what is there
    done += static_cast<uint64_t>(n);
  }
  out.resize(done);
  return out;
}

}  // namespace cera
