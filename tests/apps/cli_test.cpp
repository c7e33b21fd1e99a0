// End-to-end tests of the `cera` command against references: llama2.c's greedy text, the
// tokenizer fixtures' expected ids, and the checkpoint's own header for `inspect`.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_runner.h"
#include "nlohmann_free_json_check.h"
#include "stories_model.h"

namespace cera::test {
namespace {

TEST(CliRun, StoriesGreedyReproducesLlama2c) {
  for (const char* threads : {"1", "2"}) {
    const CliResult r = run_cera({"run", "-m", stories_gguf().string(), "-p", "", "-n", "256", "--temp", "0", "-t", threads});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, stories_reference_text()) << "threads " << threads;
    EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << "timings go to stderr";
  }
}

// Tensor parallelism on the CPU (model/tensor_parallel.h): 2 and 4 ranks, each with its KV heads,
// FFN columns and vocabulary rows, give llama2.c's text byte for byte; 3 ranks cannot split the
// 512-row vocabulary and say so.
TEST(CliRun, TensorParallelStoriesGreedyReproducesLlama2c) {
  for (const char* ranks : {"2", "4"}) {
    const CliResult r = run_cera({"run", "-m", stories_gguf().string(), "-p", "", "-n", "256", "--temp", "0",
                                  "--device", "cpu", "--tensor-parallel", ranks});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, stories_reference_text()) << "--tensor-parallel " << ranks;
  }
  const CliResult bad = run_cera({"run", "-m", stories_gguf().string(), "-p", "", "-n", "8", "--device", "cpu",
                                  "--tensor-parallel", "3"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("token_embd.weight' has 512 vocabulary rows, which do not divide among 3"), std::string::npos)
      << bad.err;
  const CliResult devices = run_cera({"run", "-m", stories_gguf().string(), "-p", "", "-n", "8", "--device", "cpu",
                                      "--devices", "0,1"});
  EXPECT_NE(devices.exit_code, 0);
  EXPECT_NE(devices.err.find("--devices names CUDA devices, but the model runs on the CPU"), std::string::npos)
      << devices.err;
}

TEST(CliRun, MissingModelIsAClearError) {
  const CliResult r = run_cera({"run", "-m", "/nonexistent.gguf", "-p", "hi"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent.gguf"), std::string::npos) << r.err;
}

TEST(CliConvert, Llama2cCheckpointToGguf) {
  const auto out = temp_dir() / "cli-stories.gguf";
  const CliResult r = run_cera({"convert", "--llama2c", (shared_dir() / "models/stories260K.bin").string(), "--tokenizer",
                                (shared_dir() / "models/tok512.bin").string(), "-o", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto f = format::GgufFile::open(out);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->tensors().size(), 47u);
}

TEST(CliInspect, StoriesTablesShowHeaderValuesAndParameterCount) {
  const CliResult r = run_cera({"inspect", stories_gguf().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Values from the checkpoint header (dim 64, hidden 172, 5 layers, 8 heads, 4 kv heads).
  EXPECT_NE(r.out.find("llama.embedding_length                  uint32   64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("llama.feed_forward_length               uint32   172"), std::string::npos);
  EXPECT_NE(r.out.find("[string x 512] \"<unk>\", \"<s>\", \"</s>\""), std::string::npos);
  EXPECT_NE(r.out.find("blk.0.ffn_down.weight     F32      [172, 64]"), std::string::npos);
  // 512*64 + 5*(2*64 + 64*64*2 + 64*32*2 + 3*64*172) + 64 parameters, all F32.
  EXPECT_NE(r.out.find("Parameters: 260.0 K (260032)"), std::string::npos);
  const CliResult j = run_cera({"inspect", "--json", stories_gguf().string()});
  ASSERT_EQ(j.exit_code, 0);
  EXPECT_TRUE(looks_like_json_object(j.out));
  EXPECT_NE(j.out.find("\"parameters\": 260032"), std::string::npos);
  EXPECT_NE(j.out.find("\"length\": 512"), std::string::npos);  // long arrays summarised
}

TEST(CliInspect, TokenizerFixtureHasNoTensors) {
  const CliResult r = run_cera({"inspect", (shared_dir() / "tokenizer-fixtures/ggml-vocab-gpt-2.gguf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tokenizer.ggml.merges"), std::string::npos);
  EXPECT_NE(r.out.find("[string x 50000]"), std::string::npos);
  EXPECT_NE(r.out.find("0 tensors"), std::string::npos);
}

TEST(CliInspect, CorruptFileNamesTheProblem) {
  const CliResult r = run_cera({"inspect", (source_dir() / "tests/fixtures/gguf/corrupt/row_not_blocks.gguf").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not a multiple of the Q4_0 block size 32"), std::string::npos) << r.err;
}

TEST(CliTokenize, IdsMatchTheFixture) {
  // "Hello world" from the gpt-2 fixture: expected ids from the model's own tokenizer.
  const auto vocab = shared_dir() / "tokenizer-fixtures/ggml-vocab-gpt-2.gguf";
  const CliResult r = run_cera({"tokenize", "-m", vocab.string(), "-p", "Hello world", "--ids"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "15496 995\n");
  const CliResult table = run_cera({"tokenize", "-m", vocab.string(), "-p", "Hello world"});
  EXPECT_EQ(table.out, "15496\tHello\n995\t world\n");  // pieces are decoded text
}

}  // namespace
}  // namespace cera::test
