#include "cli_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "test_paths.h"

namespace cera::test {
namespace {
std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

CliResult run_cera(const std::vector<std::string>& args) {
  static int counter = 0;
  const auto out_path = temp_dir() / ("cli-out-" + std::to_string(counter));
  const auto err_path = temp_dir() / ("cli-err-" + std::to_string(counter++));
  const std::string binary = (binary_dir() / "apps/cli/cera").string();
  CliResult result;
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* o = std::freopen(out_path.c_str(), "w", stdout);
    FILE* e = std::freopen(err_path.c_str(), "w", stderr);
    if (o == nullptr || e == nullptr) _exit(127);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  return result;
}

}  // namespace cera::test
