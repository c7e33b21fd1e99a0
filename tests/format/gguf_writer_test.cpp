// The writer: given the same content as tools/gguf/make_reference_file.py, it must produce the
// byte-identical file the gguf Python package wrote, and everything it writes reads back.
#include <gtest/gtest.h>

#include <fstream>

#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "test_paths.h"

namespace cera::format {
namespace {

std::vector<std::byte> read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

TEST(GgufWriter, ReproducesTheGgufPackagesBytes) {
  const auto reference = read_all(test::source_dir() / "tests/fixtures/gguf/reference.gguf");
  auto ref = GgufFile::parse(reference);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  // Copy every key and tensor through the writer, in file order.
  GgufWriter w;
  for (const GgufKv& kv : ref->metadata()) w.set(kv.key, kv.value);
  for (const GgufTensorInfo& t : ref->tensors()) {
    ASSERT_TRUE(w.add_tensor_view({t.name, t.dtype, t.shape}, ref->tensor_data(t)).ok());
  }
  const std::vector<std::byte> ours = w.to_bytes();
  ASSERT_EQ(ours.size(), reference.size());
  EXPECT_TRUE(ours == reference);
}

TEST(GgufWriter, RoundTripsThroughAFile) {
  GgufWriter w(64);
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_array("tokenizer.ggml.tokens", GgufArray::of_strings({"<s>", "\xE2\x96\x81hi"}));
  const std::vector<float> scores = {0.f, -1.5f};
  w.set_array("tokenizer.ggml.scores", GgufArray::of<float>(scores));
  w.set_u32("llama.block_count", 3);  // replaces, keeps position
  std::vector<std::byte> data(4 * 7 * 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7);
  ASSERT_TRUE(w.add_tensor({"a", DType::kF32, {7, 3}}, data).ok());
  std::vector<std::byte> q(18 * 2, std::byte{1});
  ASSERT_TRUE(w.add_tensor({"b", DType::kQ4_0, {64}}, q).ok());
  const auto path = test::temp_dir() / "roundtrip.gguf";
  std::vector<uint64_t> progress;
  ASSERT_TRUE(w.write(path, [&](uint64_t done, uint64_t) { progress.push_back(done); }).ok());
  EXPECT_FALSE(progress.empty());
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".partial"));

  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->metadata()[0].key, "general.alignment");
  EXPECT_EQ(f->metadata()[2].key, "llama.block_count");
  EXPECT_EQ(*f->get<uint32_t>("llama.block_count"), 3u);
  EXPECT_EQ(*f->get_array<std::string>("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"<s>", "\xE2\x96\x81hi"}));
  EXPECT_EQ(*f->get_array<float>("tokenizer.ggml.scores"), scores);
  const GgufTensorInfo* a = f->find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{7, 3}));
  auto span_a = f->tensor_data(*a);
  EXPECT_TRUE(std::equal(span_a.begin(), span_a.end(), data.begin(), data.end()));
  const GgufTensorInfo* b = f->find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset % 64, 0u);
  EXPECT_EQ(b->n_bytes, 36u);
}

TEST(GgufWriter, RejectsInconsistentTensors) {
  GgufWriter w;
  EXPECT_FALSE(w.add_tensor({"x", DType::kF32, {4}}, std::vector<std::byte>(15)).ok());
  EXPECT_FALSE(w.add_tensor({"y", DType::kQ4_K, {128}}, std::vector<std::byte>(72)).ok());
  ASSERT_TRUE(w.add_tensor({"z", DType::kF16, {2}}, std::vector<std::byte>(4)).ok());
  const Status dup = w.add_tensor({"z", DType::kF16, {2}}, std::vector<std::byte>(4));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.message().find("duplicate tensor 'z'"), std::string::npos);
}

}  // namespace
}  // namespace cera::format

namespace cera::format {
namespace {

TEST(GgufWriter, FillCallbacksProduceDataAtWriteTimeAndFailCleanly) {
  GgufWriter w;
  int calls = 0;
  ASSERT_TRUE(w.add_tensor_fill({"f", DType::kF32, {4}}, [&](std::span<std::byte> out) {
                 ++calls;
                 for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(i);
                 return Status{};
               }).ok());
  EXPECT_EQ(calls, 0);  // nothing is produced before write()
  const auto path = test::temp_dir() / "fill.gguf";
  ASSERT_TRUE(w.write(path).ok());
  EXPECT_EQ(calls, 1);
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok());
  auto data = f->tensor_data(*f->find_tensor("f"));
  ASSERT_EQ(data.size(), 16u);
  EXPECT_EQ(data[15], std::byte{15});

  GgufWriter bad;
  ASSERT_TRUE(bad.add_tensor_fill({"g", DType::kF32, {4}}, [](std::span<std::byte>) { return io_error("source gone"); }).ok());
  const auto bad_path = test::temp_dir() / "bad-fill.gguf";
  const Status st = bad.write(bad_path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tensor 'g': source gone"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(bad_path));
  EXPECT_FALSE(std::filesystem::exists(bad_path.string() + ".partial"));
}

}  // namespace
}  // namespace cera::format
