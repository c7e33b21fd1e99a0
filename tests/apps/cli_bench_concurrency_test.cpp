// `cera bench --concurrency N` (issue 17, deliverable 5) on stories260K: every run's table row
// counts exactly N x G generated tokens and the tokens the loop computed (N x (P + G - 1) with no
// reuse), also when a small KV pool forces preemption; the decode step's bytes, FLOPs and ceiling
// (issue 19) match the model file; bad values are refused with the range in plain numbers.
// Timings are printed, never asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "format/gguf.h"
#include "stories_model.h"

namespace cera::test {
namespace {

// The table's run rows ("| 1 | ..."; the median row too when asked), split into trimmed cells.
std::vector<std::vector<std::string>> table_rows(const std::string& out, bool with_median = false) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| ", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream parts(line.substr(1));
    for (std::string cell; std::getline(parts, cell, '|');) {
      const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? std::string() : cell.substr(b, e - b + 1));
    }
    const bool run = !cells.empty() && !cells[0].empty() && std::isdigit(static_cast<unsigned char>(cells[0][0]));
    if (run || (with_median && !cells.empty() && cells[0] == "median")) rows.push_back(cells);
  }
  return rows;
}

// Columns: run, requests, generated, output t/s, prompt t/s, TTFT p50/p99, ITL p50/p99, E2E p50/p99,
// preemptions, steps, cached, hit %.
constexpr size_t kRequests = 1, kGenerated = 2, kPreempt = 11, kCached = 13, kHitRate = 14, kColumns = 15;

void expect_refused_without_output(const CliResult& r, const std::vector<std::string>& needles,
                                   const std::string& what) {
  EXPECT_NE(r.exit_code, 0) << what << ": " << r.err;
  EXPECT_EQ(r.signal, 0) << what;
  for (const std::string& n : needles)
    EXPECT_NE(r.err.find(n), std::string::npos) << what << ": no '" << n << "' in: " << r.err;
  EXPECT_TRUE(r.out.empty()) << what << ": " << r.out;
}

TEST(CliBenchConcurrency, FourRequestsOfEightTokensCountThirtyTwoGeneratedTokens) {
  const CliResult r =
      run_cera({"bench", "-m", stories_gguf().string(), "--concurrency", "4", "--prompt", "16", "--gen", "8", "-r", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = table_rows(r.out);
  ASSERT_EQ(rows.size(), 1u) << r.out;
  ASSERT_EQ(rows[0].size(), kColumns) << r.out;
  EXPECT_EQ(rows[0][kRequests], "4");
  EXPECT_EQ(rows[0][kGenerated], "32");
  EXPECT_EQ(rows[0][kPreempt], "0") << "the default pool holds every request";
  // Random prompts share nothing: no hit, and every request's prompt and decode tokens are computed.
  EXPECT_EQ(rows[0][kCached], "0");
  EXPECT_EQ(rows[0][kHitRate], "0.0");
  EXPECT_NE(r.out.find("prefix cache: hit rate 0.0 % (0 of 64 tokens looked up, 0 of 4 admissions hit"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("92 tokens computed a run, 4 x (16 + 8 - 1) = 92 without any reuse"), std::string::npos) << r.out;
}

TEST(CliBenchConcurrency, EveryRunAndTheMedianCountTheTokensWithASharedPrefixAndPreemption) {
  // 3 blocks of 16 for 4 requests of 2 blocks each: the loop must preempt, yet every request
  // still generates its 8 tokens.
  const CliResult r = run_cera({"bench", "-m", stories_gguf().string(), "--concurrency", "4", "--prompt", "16", "--gen",
                                "8", "--shared-prefix", "8", "--kv-tokens", "48", "-r", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = table_rows(r.out, /*with_median=*/true);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  EXPECT_EQ(rows.back()[0], "median");
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), kColumns) << r.out;
    EXPECT_EQ(row[kRequests], "4") << r.out;
    EXPECT_EQ(row[kGenerated], "32") << r.out;
  }
  EXPECT_NE(r.out.find("the 8 shared prompt tokens fill 0 whole blocks of 16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KV pool 48 tokens"), std::string::npos) << r.out;
}

// 4 requests of 40 prompt tokens with 32 shared (2 blocks of 16), 16 a step (-b 16): the first
// request's prompt takes 3 steps alone, and each later one is admitted after the blocks before
// it are published, so requests 2-4 each take the 2 shared blocks: 3 x 32 = 96 of the 160 tokens
// looked up (60 %), and 160 + 4 x (8 - 1) - 96 = 92 tokens computed.
TEST(CliBenchConcurrency, ASharedPrefixIsTakenFromThePrefixCache) {
  const CliResult r = run_cera({"bench", "-m", stories_gguf().string(), "--concurrency", "4", "--prompt", "40", "--gen",
                                "8", "--shared-prefix", "32", "-b", "16", "-r", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = table_rows(r.out);
  ASSERT_EQ(rows.size(), 1u) << r.out;
  ASSERT_EQ(rows[0].size(), kColumns) << r.out;
  EXPECT_EQ(rows[0][kGenerated], "32");
  EXPECT_EQ(rows[0][kCached], "96") << r.out;
  EXPECT_EQ(rows[0][kHitRate], "60.0") << r.out;
  EXPECT_NE(r.out.find("(96 of 160 tokens looked up, 3 of 4 admissions hit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("92 tokens computed a run"), std::string::npos) << r.out;
}

// The decode line against references computed here from the GGUF file: the weights one row reads
// (every tensor but an untied embedding table), K/V bytes a token (layers x K and V x kv heads x
// head dim x 4 bytes of F32 on the CPU), the mean context P + G / 2, FLOPs = N x 2 x the weights'
// elements; the ceiling and the share follow from the printed numbers.
TEST(CliBenchConcurrency, TheDecodeStepIsSetAgainstItsCeiling) {
  const CliResult r = run_cera({"bench", "-m", stories_gguf().string(), "--concurrency", "4", "--prompt", "16", "--gen",
                                "8", "-r", "1", "--roofline-gbs", "100", "--roofline-tflops", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex line(
      R"(decode: 4 rows a step in ([0-9.e+-]+) ms = ([0-9]+) tokens/s; a step reads ([0-9.e+-]+) GB of weights \+ )"
      R"(([0-9.e+-]+) GB of K/V \(4 x 20 tokens of context x ([0-9]+) bytes\) and computes ([0-9.e+-]+) TFLOP; )"
      R"(at 100 GB/s and 2 TFLOP/s the step takes at least ([0-9.e+-]+) ms \((bytes|FLOPs)\): a ceiling of ([0-9]+) )"
      R"(tokens/s, ([0-9.]+) % of it reached)");
  std::smatch mt;
  ASSERT_TRUE(std::regex_search(r.out, mt, line)) << r.out;
  auto num = [&](int i) { return std::stod(mt[i].str()); };
  auto f = format::GgufFile::open(stories_gguf());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  double bytes = 0, elements = 0;
  for (const auto& t : f->tensors()) {
    if (t.name == "token_embd.weight" && f->find_tensor("output.weight") != nullptr) continue;
    bytes += double(t.n_bytes);
    elements += double(t.n_elements());
  }
  auto u32 = [&](const char* key) { return double(*f->get_or<uint32_t>(key, 0)); };
  const double kv_per_token =
      u32("llama.block_count") * 2 * u32("llama.attention.head_count_kv") *
      (u32("llama.embedding_length") / u32("llama.attention.head_count")) * 4;
  EXPECT_NEAR(num(3), bytes / 1e9, bytes / 1e9 * 1e-3);
  EXPECT_EQ(num(5), kv_per_token);
  EXPECT_NEAR(num(4), 4 * 20 * kv_per_token / 1e9, 4 * 20 * kv_per_token / 1e9 * 1e-3);
  EXPECT_NEAR(num(6), 4 * 2 * elements / 1e12, 4 * 2 * elements / 1e12 * 1e-3);
  const double bytes_ms = (num(3) + num(4)) / 100 * 1e3, flop_ms = num(6) / 2 * 1e3;
  EXPECT_NEAR(num(7), std::max(bytes_ms, flop_ms), std::max(bytes_ms, flop_ms) * 2e-3);
  EXPECT_EQ(mt[8].str(), bytes_ms >= flop_ms ? "bytes" : "FLOPs");
  EXPECT_NEAR(num(9), 4 / (num(7) * 1e-3), 4 / (num(7) * 1e-3) * 2e-3);
  EXPECT_NEAR(num(10), 100 * num(2) / num(9), 0.1 + 100 * num(2) / num(9) * 1e-2);
  // Without --roofline-gbs the step's bytes and FLOPs are printed, no ceiling.
  const CliResult plain =
      run_cera({"bench", "-m", stories_gguf().string(), "--concurrency", "2", "--prompt", "8", "--gen", "4", "-r", "1"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("decode: 2 rows a step in "), std::string::npos) << plain.out;
  EXPECT_EQ(plain.out.find("a ceiling of"), std::string::npos) << plain.out;
  // --roofline-tflops belongs to the serving bench.
  expect_refused_without_output(
      run_cera({"bench", "-m", stories_gguf().string(), "--roofline-tflops", "790"}),
      {"--roofline-tflops", "--concurrency"}, "--roofline-tflops alone");
}

TEST(CliBenchConcurrency, BadValuesAreRefusedWithTheRangeInPlainNumbers) {
  const std::string model = stories_gguf().string();
  expect_refused_without_output(run_cera({"bench", "-m", model, "--concurrency", "0"}),
                                {"--concurrency", "1", "65536", "got 0"}, "--concurrency 0");
  expect_refused_without_output(
      run_cera({"bench", "-m", model, "--concurrency", "2", "--prompt", "400", "--gen", "200", "-c",
                "512"}),
      {"--prompt 400 + --gen 200 = 600 tokens", "context of 512 tokens", "-c 512", "use -c 600"},
      "P + G over -c");
  // -c 0: stories260K's training context (512) is the limit, and the message says where it came
  // from.
  expect_refused_without_output(
      run_cera({"bench", "-m", model, "--concurrency", "2", "--prompt", "400", "--gen", "200"}),
      {"600 tokens", "context of 512 tokens", "training context"},
      "P + G over the training context");
  expect_refused_without_output(
      run_cera({"bench", "-m", model, "--concurrency", "2", "--prompt", "0"}),
      {"--prompt", "1", "16777216"}, "--prompt 0");
  expect_refused_without_output(
      run_cera({"bench", "-m", model, "--concurrency", "2", "--gen", "0"}),
      {"--gen", "1", "16777216"}, "--gen 0");
  expect_refused_without_output(run_cera({"bench", "-m", model, "--concurrency", "2", "--prompt",
                                          "16", "--shared-prefix", "17"}),
                                {"--shared-prefix 17", "--prompt 16", "at most 16"},
                                "--shared-prefix over --prompt");
  expect_refused_without_output(run_cera({"bench", "-m", model, "--concurrency", "2", "--prompt",
                                          "16", "--gen", "8", "--kv-tokens", "10"}),
                                {"--kv-tokens 10", "16 + --gen 8 = 24", "--kv-tokens 24 or more"},
                                "--kv-tokens below one request");
  expect_refused_without_output(
      run_cera({"bench", "-m", model, "--concurrency", "2", "--kv-tokens", "-1"}),
      {"--kv-tokens", "0", "2147483647"}, "--kv-tokens -1");
  // The serving options need --concurrency; the single-sequence ones are refused beside it.
  expect_refused_without_output(run_cera({"bench", "-m", model, "--prompt", "16"}),
                                {"--prompt", "--concurrency"}, "--prompt alone");
  expect_refused_without_output(run_cera({"bench", "-m", model, "--concurrency", "2", "-p", "16"}),
                                {"--n-prompt", "--concurrency"}, "-p with --concurrency");
}

}  // namespace
}  // namespace cera::test
