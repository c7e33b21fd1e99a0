// Runs the built `cera` binary with arguments and captures stdout, stderr and the exit code,
// for end-to-end tests of the command line.
#pragma once

#include <string>
#include <vector>

namespace cera::test {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CliResult run_cera(const std::vector<std::string>& args);

}  // namespace cera::test
