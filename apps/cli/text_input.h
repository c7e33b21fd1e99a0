// Reading a text input the user names (run -f, tokenize --file, logits --ids-file): the one place
// the `cera` command reads a user's file as text, so every such read has the same rules. Regular
// files, pipes and FIFOs (`-f <(cmd)`, `-f /dev/stdin`) and character devices are read; anything
// else (a directory, a socket, a block device) is refused by name. At most --max-input-mb MiB are
// read (default 64): /dev/zero or a runaway pipe ends in an error naming the limit, not in
// exhausted memory. The decision about FIFOs: a named FIFO with no writer yet is waited for, as
// `cat` does (a writer that comes later is normal Unix use), but after a second of waiting a note
// on stderr says what is being waited for, so it is never a silent hang. (Model files are mapped,
// not read: src/core/mapped_file.cpp refuses FIFOs there.)
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace cera::cli {

inline constexpr int64_t kDefaultMaxInputMiB = 64;
inline constexpr int64_t kMaxMaxInputMiB = 1 << 20;  // 1 TiB: the option's own upper bound

// Registers --max-input-mb on `cmd`, bound to `mib` (which holds the default on entry).
void add_max_input_option(CLI::App* cmd, int64_t& mib);

// The bytes of `path`, at most max_mib MiB. Errors name the path and what it is (a directory...),
// or the limit and --max-input-mb when the input is longer. `command` names the caller in the
// FIFO note ("cera run: waiting for ...").
Result<std::string> read_text_input(const char* command, const std::string& path, int64_t max_mib);

// Bytes already read from a stream (chat's stdin) against the same limit: the message for a
// message longer than max_mib MiB, naming `what` ("a message on stdin").
Status input_too_long(std::string_view what, int64_t max_mib);

}  // namespace cera::cli
