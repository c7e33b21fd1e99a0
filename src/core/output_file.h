// OutputFile: writing a file the user named (a converted model, a dump) without ever destroying
// something by accident. The bytes go to a fresh temporary file next to the target, and only a
// complete, flushed file is renamed over it; every failure (a full disk, a refused rename, an
// error of the caller's, an early return) removes the temporary file, so nothing half-written
// is left behind. Targets that exist and are not regular files (devices, FIFOs, directories) and
// targets that are one of the command's own inputs (the same inode) are refused up front.
#pragma once

#include <filesystem>
#include <span>
#include <string_view>

#include "core/status.h"

namespace cera {

// Checks that `path` may be written as an output that reads `inputs`: it does not exist, or it
// is a regular file (or a symbolic link to one) that is none of the inputs. Call it before long
// work so that a bad -o is refused at once; OutputFile::create checks again.
Status check_output_path(const std::filesystem::path& path,
                         std::span<const std::filesystem::path> inputs = {});

class OutputFile {
 public:
  // Checks the path (check_output_path) and creates the temporary file beside the target (in
  // the directory of a symbolic link's target: the link keeps pointing at the new file).
  static Result<OutputFile> create(const std::filesystem::path& path,
                                   std::span<const std::filesystem::path> inputs = {});

  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&&) = delete;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  // Without a successful commit(): closes and removes the temporary file.
  ~OutputFile();

  // Appends all of `bytes` (retrying short writes); the error names the file and the reason.
  Status write(std::span<const std::byte> bytes);
  Status write(std::string_view text) {
    return write(std::as_bytes(std::span(text.data(), text.size())));
  }
  // Flushes to disk, gives the file the permissions a newly created file gets (or the replaced
  // file's), and renames it over the target. After an error the temporary file is gone.
  Status commit();

  const std::filesystem::path& path() const { return target_; }

 private:
  OutputFile(std::filesystem::path target, std::filesystem::path temp, int fd, int replaced_mode);
  void discard();

  std::filesystem::path target_;  // the resolved target (a symbolic link followed)
  std::filesystem::path temp_;
  int fd_ = -1;
  int replaced_mode_ = -1;  // permission bits of the file replaced, or -1 (keep the umask's)
  int slot_ = -1;           // this file's entry for remove_pending_outputs_from_signal_handler
};

// For a signal handler (SIGINT, SIGTERM) that ends the process while outputs are being written:
// unlinks the temporary file of every OutputFile alive now. Async-signal-safe.
void remove_pending_outputs_from_signal_handler();

}  // namespace cera
