// `cera run` with a prompt longer than the context (issue 16, item 7): the outcome does not
// depend on -b. Without --truncate-prompt every batch size fails with the prompt's length, the
// context and both remedies named; with it every batch size prints the same greedy text.
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "stories_model.h"

namespace cera::test {
namespace {

// About 150 tokens of the stories vocabulary, against a 64-token context.
const std::string kLong =
    "Once upon a time, there was a little bird who wanted to fly. The bird had a friend, a big dog "
    "named Max. Max liked to run in the park and play with the ball. One day, the bird saw a tall "
    "tree and wanted to fly to the top.";

TEST(CliLongPrompt, RefusedWithItsLengthTheContextAndTheRemediesWhateverTheBatch) {
  for (const char* batch : {"8", "512"}) {
    const CliResult r = run_cera({"run", "-m", stories_gguf().string(), "-p", kLong, "-c", "64", "-b", batch, "-n", "4"});
    EXPECT_EQ(r.exit_code, 1) << "-b " << batch << ": " << r.err;
    EXPECT_NE(r.err.find("the prompt is "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("context of 64 tokens"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("-c N"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--truncate-prompt"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(CliLongPrompt, TruncatedTheSameWayWhateverTheBatch) {
  std::string first;
  for (const char* batch : {"3", "16", "512"}) {
    const CliResult r = run_cera({"run", "-m", stories_gguf().string(), "-p", kLong, "-c", "64", "-b", batch, "-n", "16",
                                  "--temp", "0", "--truncate-prompt"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("prompt truncated"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("context shifts"), std::string::npos) << "no shift while reading the prompt: " << r.err;
    if (first.empty()) first = r.out;
    EXPECT_EQ(r.out, first) << "-b " << batch;
  }
  EXPECT_FALSE(first.empty());
}

}  // namespace
}  // namespace cera::test
