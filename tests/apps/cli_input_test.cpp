// Text inputs are bounded and typed (issue 16, defect 4, the command-line half): /dev/zero as a
// prompt file or as chat's stdin ends in an error naming the limit and --max-input-mb, with
// bounded memory; a directory is refused by name; pipes, FIFOs and /dev/stdin are read, and a
// FIFO with no writer yet is waited for with a note on stderr instead of silently.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <thread>

#include "cli_models.h"
#include "cli_runner.h"
#include "stories_model.h"

namespace cera::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr long kMemoryBoundKb = 1024 * 1024;  // 1 GiB: generous beside the 64 MiB read limit

TEST(CliInput, DevZeroAsATextFileStopsAtTheLimit) {
  const std::string model = stories_gguf().string();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "-m", model, "-f", "/dev/zero"},
        std::vector<std::string>{"tokenize", "-m", model, "--file", "/dev/zero"},
        std::vector<std::string>{"logits", "-m", model, "--ids-file", "/dev/zero"}}) {
    const CliResult r = run_cera(args, {.timeout = seconds(120)});
    EXPECT_FALSE(r.timed_out) << args[0];
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("'/dev/zero' is longer than the limit of 64 MiB"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("--max-input-mb"), std::string::npos) << r.err;
    EXPECT_LT(r.max_rss_kb, kMemoryBoundKb) << args[0];
  }
}

TEST(CliInput, ChatStdinFromDevZeroStopsAtTheLimit) {
  const CliResult r = run_cera({"chat", "-m", stories_chat_gguf().string(), "--max-input-mb", "1"},
                               {.stdin_path = "/dev/zero", .timeout = seconds(120)});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("a message on stdin is longer than the limit of 1 MiB"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--max-input-mb"), std::string::npos) << r.err;
  EXPECT_LT(r.max_rss_kb, kMemoryBoundKb);
}

TEST(CliInput, MaxInputMbRaisesTheLimit) {
  const std::string model = stories_gguf().string();
  const auto big = temp_dir() / "input-2mib.txt";
  std::ofstream(big) << std::string((2u << 20) + 1, 'a');
  const CliResult small =
      run_cera({"tokenize", "-m", model, "--file", big.string(), "--ids", "--max-input-mb", "2"});
  EXPECT_EQ(small.exit_code, 1) << small.err;
  EXPECT_NE(
      small.err.find("'" + big.string() + "' (2097153 bytes) is longer than the limit of 2 MiB"),
      std::string::npos)
      << small.err;
  const CliResult raised =
      run_cera({"tokenize", "-m", model, "--file", big.string(), "--ids", "--max-input-mb", "3"});
  EXPECT_EQ(raised.exit_code, 0) << raised.err;
  EXPECT_FALSE(raised.out.empty());
}

TEST(CliInput, DirectoryIsRefusedByName) {
  const std::string model = stories_gguf().string();
  const std::string dir = temp_dir().string();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"tokenize", "-m", model, "--file", dir},
        std::vector<std::string>{"run", "-m", model, "-f", dir},
        std::vector<std::string>{"logits", "-m", model, "--ids-file", dir}}) {
    const CliResult r = run_cera(args);
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("'" + dir + "' is a directory"), std::string::npos)
        << args[0] << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(CliInput, StdinAsThePromptFileIsRead) {
  const auto prompt = temp_dir() / "input-prompt.txt";
  std::ofstream(prompt) << "Hello world";
  const auto vocab = shared_dir() / "tokenizer-fixtures/ggml-vocab-gpt-2.gguf";
  const CliResult r = run_cera({"tokenize", "-m", vocab.string(), "--file", "/dev/stdin", "--ids"},
                               {.stdin_path = prompt.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "15496 995\n");  // the fixture's ids for "Hello world"
}

TEST(CliInput, FifoWithoutAWriterIsWaitedForWithANote) {
  const auto fifo = temp_dir() / "input-fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto vocab = shared_dir() / "tokenizer-fixtures/ggml-vocab-gpt-2.gguf";
  CliProcess p({"tokenize", "-m", vocab.string(), "--file", fifo.string(), "--ids"});
  const bool noted = p.wait_for_stderr(
      "waiting for input from the pipe or FIFO '" + fifo.string() + "'", milliseconds(10000));
  EXPECT_TRUE(noted) << "no note on stderr: " << p.stderr_text();
  std::ofstream(fifo) << "Hello world";  // the writer comes: the read completes
  const CliResult r = p.wait(seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "15496 995\n");
}

}  // namespace
}  // namespace cera::test
