// Output is never lost silently and Ctrl-C ends `run` as shells expect (issue 16, defects 5 and 8):
// every command whose stdout is /dev/full fails with a message naming stdout; `run` interrupted
// exits 130 with the text so far on stdout and the timings on stderr; `chat` interrupted stops
// only the reply; logits --dump checks its writes and its path; inspect --json stays JSON when a
// metadata string is not UTF-8.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli_models.h"
#include "cli_runner.h"
#include "nlohmann_free_json_check.h"
#include "stories_model.h"

namespace cera::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(CliOutput, FullStdoutFailsEveryCommandWithAMessage) {
  const std::string model = stories_gguf().string();
  const auto messages = temp_dir() / "output-messages.txt";
  std::ofstream(messages) << "Once upon a time\n";
  struct Case {
    std::vector<std::string> args;
    std::string stdin_path = "/dev/null";
  };
  const std::vector<Case> cases = {
      {{"run", "-m", model, "-p", "Once", "-n", "20"}},
      {{"run", "-m", model, "-p", "Once", "-n", "1"}},  // little enough to stay in the stdio buffer
      {{"chat", "-m", stories_chat_gguf().string(), "-n", "20"}, messages.string()},
      {{"tokenize", "-m", model, "-p", "Once upon a time"}},
      {{"logits", "-m", model, "-p", "Once"}},
      {{"inspect", model}},
      {{"inspect", "--json", model}},
      {{"bench", "-m", model, "-p", "4", "-n", "4", "-r", "1", "--no-membw"}},
      {{"quant-error", "--n", "256", "--type", "q8_0"}},
      {{"--help"}},
  };
  for (const Case& c : cases) {
    std::string what;
    for (const std::string& a : c.args) what += a + " ";
    const CliResult r = run_cera(c.args, {.stdin_path = c.stdin_path, .stdout_path = "/dev/full"});
    EXPECT_EQ(r.exit_code, 1) << what << ": " << r.err;
    EXPECT_NE(r.err.find("cannot write to stdout: No space left on device"), std::string::npos)
        << what << ": " << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << what << ": " << r.err;
  }
}

TEST(CliOutput, FullStdoutStopsTheGeneration) {
  // -n -1 --ignore-eos never ends by itself: only the failed write can stop it.
  const CliResult r =
      run_cera({"run", "-m", stories_gguf().string(), "-p", "Once", "-n", "-1", "--ignore-eos"},
               {.stdout_path = "/dev/full", .timeout = seconds(60)});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("stdout"), std::string::npos) << r.err;
}

TEST(CliOutput, CtrlCInRunExits130WithTheTextSoFar) {
  // -n large and --ignore-eos: only Ctrl-C ends this run.
  CliProcess p({"run", "-m", stories_gguf().string(), "-p", "Once", "-n", "100000000",
                "--ignore-eos", "--temp", "0"});
  ASSERT_TRUE(p.wait_for_stdout_bytes(200, milliseconds(30000))) << p.stderr_text();
  p.send_signal(SIGINT);
  const CliResult r = p.wait();
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_GE(r.out.size(), 200u);
  // The timings are still printed, and stdout holds exactly the text of the tokens they count:
  // the same greedy run stopped by -n at that count writes the same bytes.
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.err, m, std::regex("for +([0-9]+) tokens .*stopped by cancelled")))
      << r.err;
  const CliResult same = run_cera({"run", "-m", stories_gguf().string(), "-p", "Once", "-n", m[1],
                                   "--ignore-eos", "--temp", "0"});
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(r.out, same.out);
}

TEST(CliOutput, CtrlCInChatStopsTheReplyAndTheChatGoesOn) {
  CliProcess p({"chat", "-m", stories_chat_gguf().string(), "-n", "100000000", "--temp", "0"});
  p.write_stdin("Once upon a time\n");
  ASSERT_TRUE(p.wait_for_stdout_bytes(200, milliseconds(30000))) << p.stderr_text();
  p.send_signal(SIGINT);
  ASSERT_TRUE(p.wait_for_stderr("stopped by cancelled", milliseconds(30000))) << p.stderr_text();
  p.write_stdin("/quit\n");
  const CliResult r = p.wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("[turn 1:"), std::string::npos) << r.err;
}

TEST(CliOutput, CtrlCInBenchEndsItBySigint) {
  CliProcess p({"bench", "-m", stories_gguf().string(), "-p", "0", "-n", "100000", "-r", "100",
                "--no-membw"});
  std::this_thread::sleep_for(
      milliseconds(500));  // loaded and measuring (10 million tokens take minutes)
  p.send_signal(SIGINT);
  const CliResult r = p.wait(seconds(30));
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(r.signal == SIGINT || r.exit_code == 130) << r.exit_code << " " << r.signal;
}

TEST(CliOutput, LogitsDumpWriteErrorsAreReported) {
  const std::string model = stories_gguf().string();
  const auto dump = temp_dir() / "output-logits.bin";
  // A file size limit of 1000 bytes fails the write (EFBIG): for "" (BOS alone: 512 logits, 2048
  // bytes, which a stdio or filebuf buffer holds until the close) and "Once" (2 x 512 x 4 bytes).
  for (const auto& [prompt, positions] : {std::pair<std::string, size_t>{"", 1}, {"Once", 2}}) {
    const CliResult r = run_cera({"logits", "-m", model, "-p", prompt, "--dump", dump.string()},
                                 {.file_size_limit = 1000});
    EXPECT_EQ(r.exit_code, 1) << "'" << prompt << "': " << r.err;
    EXPECT_NE(r.err.find("cannot write '" + dump.string() + "'"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("wrote"), std::string::npos) << r.err;
    // Without the limit the same dump is complete.
    const CliResult ok = run_cera({"logits", "-m", model, "-p", prompt, "--dump", dump.string()});
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_EQ(std::filesystem::file_size(dump), positions * 512u * 4u);
  }
}

TEST(CliOutput, LogitsDumpRefusesDevicesDirectoriesAndTheModel) {
  const std::string model = stories_gguf().string();
  for (const std::string& path : {std::string("/dev/null"), temp_dir().string(), model}) {
    const CliResult r = run_cera({"logits", "-m", model, "-p", "Once", "--dump", path});
    EXPECT_EQ(r.exit_code, 1) << path << ": " << r.err;
    EXPECT_NE(r.err.find("--dump '" + path + "'"), std::string::npos) << r.err;
  }
  EXPECT_EQ(format::GgufFile::open(model).ok(), true) << "the model is untouched";
}

TEST(CliOutput, InspectJsonReplacesBytesThatAreNotUtf8) {
  const CliResult r = run_cera({"inspect", "--json", stories_non_utf8_gguf().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(looks_like_json_object(r.out));
  // Each invalid byte becomes U+FFFD (EF BF BD in UTF-8); the valid text around it is kept.
  EXPECT_NE(r.out.find("\"general.name\": \"bad \xEF\xBF\xBD\xEF\xBF\xBD name\""),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace cera::test
