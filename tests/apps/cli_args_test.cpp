// Bad command-line arguments end in a non-zero exit and a message naming the option and the
// allowed range in plain numbers (issue 16, defect 6): thread counts, batch and context sizes,
// every sampling option of run and chat, --seed -1 (a random seed, printed so it can be reused),
// an unknown command, -f with -p, and logits' prompt against the context.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "cli_models.h"
#include "cli_runner.h"
#include "core/thread_pool.h"
#include "stories_model.h"

namespace cera::test {
namespace {

// No CLI11-style unbounded limit printed in full (DBL_MAX has 309 digits).
bool has_huge_number(const std::string& s) {
  return std::regex_search(s, std::regex("[0-9]{25,}"));
}

void expect_refused(const CliResult& r, const std::vector<std::string>& needles,
                    const std::string& what) {
  EXPECT_NE(r.exit_code, 0) << what << ": " << r.err;
  EXPECT_EQ(r.signal, 0) << what << " ended by signal " << r.signal << ": " << r.err;
  for (const std::string& n : needles)
    EXPECT_NE(r.err.find(n), std::string::npos) << what << ": no '" << n << "' in: " << r.err;
  EXPECT_FALSE(has_huge_number(r.err)) << what << ": " << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << what;
}

int max_threads() {
  return std::min(1024, 4 * available_cores());
}

TEST(CliArgs, ThreadCountsBeyondTheLimitAreRefusedWithTheRange) {
  const std::string model = stories_gguf().string();
  const std::string max = std::to_string(max_threads());
  for (const std::string& t :
       {std::string("40000"), std::to_string(max_threads() + 1), std::string("-1")}) {
    const CliResult r = run_cera({"run", "-m", model, "-p", "Once", "-n", "2", "-t", t});
    expect_refused(r, {"--threads", t, "0", max, std::to_string(available_cores())}, "-t " + t);
  }
}

TEST(CliArgs, ConvertAndSynthThreadCountsAreRangeChecked) {
  const std::string max = std::to_string(max_threads());
  const auto out = (temp_dir() / "args-threads.gguf").string();
  const CliResult synth = run_cera({"synth", "--shape", "tiny", "-o", out, "-t", "40000"});
  expect_refused(synth, {"--threads", "40000", "0", max}, "synth -t 40000");
  const CliResult convert =
      run_cera({"convert", "--llama2c", (shared_dir() / "models/stories260K.bin").string(), "--tokenizer",
                (shared_dir() / "models/tok512.bin").string(), "-o", out, "-t", "40000"});
  expect_refused(convert, {"--threads", "40000", "0", max}, "convert -t 40000");
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(CliArgs, MoreThreadsThanCoresWarnsAndRuns) {
  const std::string t = std::to_string(available_cores() + 1);
  const CliResult r = run_cera(
      {"run", "-m", stories_gguf().string(), "-p", "Once", "-n", "2", "--temp", "0", "-t", t});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: --threads " + t), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::to_string(available_cores()) + " cores"), std::string::npos) << r.err;
}

TEST(CliArgs, BatchAndContextSizesOutOfRangeNameTheRange) {
  const std::string model = stories_gguf().string();
  for (const char* b : {"0", "-1", "65537"}) {
    expect_refused(run_cera({"run", "-m", model, "-p", "Once", "-b", b}),
                   {"--batch-size", b, "1", "65536"}, std::string("-b ") + b);
  }
  expect_refused(run_cera({"run", "-m", model, "-p", "Once", "-c", "-1"}),
                 {"--ctx-size", "-1", "0", "2147483647"}, "-c -1");
  expect_refused(run_cera({"bench", "-m", model, "-r", "0"}), {"--repetitions", "1", "100000"},
                 "bench -r 0");
  expect_refused(run_cera({"bench", "-m", model, "-p", "-1"}), {"--n-prompt", "0", "16777216"},
                 "bench -p -1");
}

TEST(CliArgs, AbsurdContextNamesTheContextTheTrainingContextAndTheMemory) {
  // stories260K: 5 layers x 2 x 32 floats of K/V per token, 1280 bytes: 2^31 tokens need 2.5 TiB.
  const CliResult r =
      run_cera({"run", "-m", stories_gguf().string(), "-p", "Once", "-c", "2147483647"});
  expect_refused(r, {"-c", "2147483647 tokens", "trained with 512", "2560.0 GiB", "memory"},
                 "-c 2147483647");
  EXPECT_EQ(r.err.find("-2147483"), std::string::npos) << "no wrapped 32-bit count: " << r.err;
}

struct BadValue {
  std::string option, value;
  std::vector<std::string> range;  // the bounds the message must state
};

const std::vector<BadValue>& bad_sampling_values() {
  static const std::vector<BadValue> v = {
      {"--temp", "nan", {"0", "100"}},
      {"--temp", "-1", {"0", "100"}},
      {"--temp", "inf", {"0", "100"}},
      {"--top-p", "2", {"greater than 0", "at most 1"}},
      {"--top-p", "0", {"greater than 0", "at most 1"}},
      {"--top-p", "nan", {"greater than 0", "at most 1"}},
      {"--min-p", "1.5", {"from 0 to 1"}},
      {"--min-p", "-0.5", {"from 0 to 1"}},
      {"--top-k", "-1", {"from 0 to 2147483647"}},
      {"--repeat-penalty", "0", {"greater than 0", "at most 1000"}},
      {"--repeat-penalty", "-1", {"greater than 0", "at most 1000"}},
      {"--repeat-penalty", "nan", {"greater than 0", "at most 1000"}},
      {"--repeat-last-n", "-2", {"from -1 to 2147483647"}},
      {"--frequency-penalty", "inf", {"from -100 to 100"}},
      {"--presence-penalty", "nan", {"from -100 to 100"}},
      {"--seed", "-2", {"-1", "from 0 to 18446744073709551615"}},
      {"--seed", "1.5", {"-1", "from 0 to 18446744073709551615"}},
  };
  return v;
}

TEST(CliArgs, SamplingOptionsOutOfRangeAreRefusedByRunAndChat) {
  const std::string model = stories_gguf().string();
  for (const char* command : {"run", "chat"}) {
    for (const BadValue& b : bad_sampling_values()) {
      const CliResult r =
          run_cera({command, "-m", model, "-p", "Once", "-n", "2", b.option, b.value});
      std::vector<std::string> needles = b.range;
      needles.push_back(b.option);
      needles.push_back("got " + b.value);
      expect_refused(r, needles, std::string(command) + " " + b.option + " " + b.value);
    }
  }
}

TEST(CliArgs, TokenCountsOutOfRangeAreRefused) {
  const std::string model = stories_gguf().string();
  expect_refused(run_cera({"run", "-m", model, "-p", "Once", "-n", "-2"}),
                 {"--n-predict", "-1", "2147483647"}, "run -n -2");
  expect_refused(run_cera({"chat", "-m", model, "-n", "0"}),
                 {"--n-predict", "1", "2147483647", "-1"}, "chat -n 0");
  expect_refused(run_cera({"run", "-m", model, "-p", "Once", "--n-keep", "-2"}),
                 {"--n-keep", "-1", "2147483647"}, "--n-keep -2");
  // The session keeps at most half the context on a shift (512 / 2 for stories260K).
  expect_refused(run_cera({"run", "-m", model, "-p", "Once", "--n-keep", "300"}),
                 {"--n-keep 300", "-1", "256", "512"}, "--n-keep 300");
}

TEST(CliArgs, SeedMinusOneIsRandomAndPrintedSoTheRunRepeats) {
  const std::string model = stories_gguf().string();
  auto sample = [&](const std::string& seed) {
    return run_cera({"run", "-m", model, "-p", "Once", "-n", "40", "--temp", "1", "--top-k", "0",
                     "--top-p", "1", "--min-p", "0", "--seed", seed});
  };
  const CliResult a = sample("-1");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(a.err, m, std::regex("seed ([0-9]+)"))) << a.err;
  const std::string seed = m[1];
  EXPECT_NE(seed, "18446744073709551615") << "-1 is not 2^64 - 1";
  const CliResult again = sample(seed);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, a.out) << "the printed seed repeats the run";
  const CliResult b = sample("-1");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_TRUE(std::regex_search(b.err, m, std::regex("seed ([0-9]+)"))) << b.err;
  EXPECT_NE(std::string(m[1]), seed) << "two random seeds (a 2^-64 chance of a false failure)";
}

TEST(CliArgs, UnknownCommandIsNamedWithTheCommandList) {
  const CliResult r = run_cera({"frobnicate"});
  expect_refused(r, {"frobnicate", "run", "chat", "tokenize", "inspect"}, "frobnicate");
  const CliResult none = run_cera({});
  expect_refused(none, {"run", "chat", "tokenize"}, "no command");
}

TEST(CliArgs, PromptFileAndPromptTogetherAreRefused) {
  const auto file = temp_dir() / "args-prompt.txt";
  std::ofstream(file) << "Once upon a time";
  const CliResult r =
      run_cera({"run", "-m", stories_gguf().string(), "-f", file.string(), "-p", "Lily"});
  expect_refused(r, {"--prompt", "--file"}, "-f with -p");
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliArgs, LogitsPromptLongerThanTheContextIsRefused) {
  const std::string model = stories_gguf().string();
  // -c is honoured: 7 tokens (BOS + 6) do not fit in 4.
  const CliResult r =
      run_cera({"logits", "-m", model, "-p", "Once upon a time there was", "-c", "4"});
  expect_refused(r, {"7 tokens", "holds 4", "-c 7"}, "logits -c 4");
  EXPECT_TRUE(r.out.empty()) << r.out;
  // Without -c the limit is the training context (512).
  const auto ids = temp_dir() / "args-600-ids.txt";
  {
    std::ofstream out(ids);
    for (int i = 0; i < 600; ++i) out << (i % 500) + 3 << ' ';
  }
  const CliResult train = run_cera({"logits", "-m", model, "--ids-file", ids.string()});
  expect_refused(train, {"600 tokens", "holds 512", "training context", "-c 600"},
                 "logits 600 tokens");
  const CliResult longer =
      run_cera({"logits", "-m", model, "--ids-file", ids.string(), "-c", "600", "--top", "1"});
  ASSERT_EQ(longer.exit_code, 0) << longer.err;
  EXPECT_EQ(std::count(longer.out.begin(), longer.out.end(), '\n'), 600);
}

}  // namespace
}  // namespace cera::test
