// The safetensors reader on files built byte by byte here (values known), on a parity fixture
// written by the safetensors package, and on corrupt variants that must fail with clear errors.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "convert/safetensors.h"
#include "core/half.h"
#include "parity_fixture.h"
#include "test_paths.h"

namespace cera::convert {
namespace {

std::vector<std::byte> make_file(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<std::byte> out(8);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  for (uint8_t d : data) out.push_back(static_cast<std::byte>(d));
  return out;
}

std::vector<uint8_t> le_bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return {b, b + n};
}

TEST(Safetensors, ReadsEveryDtype) {
  const float f[3] = {1.5f, -2.0f, 0.25f};
  const uint16_t h[2] = {float_to_half(3.0f), float_to_half(-0.5f)};
  const uint16_t bf[2] = {float_to_bf16(7.0f), float_to_bf16(-1.0f)};
  std::vector<uint8_t> data = le_bytes(f, 12);
  for (auto x : le_bytes(h, 4)) data.push_back(x);
  for (auto x : le_bytes(bf, 4)) data.push_back(x);
  const auto bytes = make_file(
      R"({"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},)"
      R"("b": {"dtype": "F16", "shape": [1, 2], "data_offsets": [12, 16]}, "c": {"dtype": "BF16", "shape": [2], "data_offsets": [16, 20]}})",
      data);
  auto f_or = SafetensorsFile::parse(bytes, "mem");
  ASSERT_TRUE(f_or.ok()) << f_or.status().to_string();
  ASSERT_EQ(f_or->tensors().size(), 3u);
  float out[3];
  const StTensor& a = f_or->tensors()[0];
  a.read_f32(0, 3, out);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[2], 0.25f);
  const StTensor& b = f_or->tensors()[1];
  EXPECT_EQ(b.dtype, StDType::kF16);
  EXPECT_EQ(b.shape, (std::vector<uint64_t>{1, 2}));
  b.read_f32(0, 2, out);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1], -0.5f);
  const StTensor& c = f_or->tensors()[2];
  c.read_f32(1, 1, out);
  EXPECT_EQ(out[0], -1.0f);
}

// I64 index buffers (BERT's embeddings.position_ids) are read; values here are known.
TEST(Safetensors, ReadsI64Buffers) {
  const int64_t ids[3] = {0, 1, 511};
  const auto bytes = make_file(R"({"p": {"dtype": "I64", "shape": [1, 3], "data_offsets": [0, 24]}})", le_bytes(ids, 24));
  auto f = SafetensorsFile::parse(bytes, "mem");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const StTensor& p = f->tensors()[0];
  EXPECT_EQ(p.dtype, StDType::kI64);
  float out[3];
  p.read_f32(0, 3, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[2], 511.0f);
}

struct Corrupt {
  std::string header;
  size_t data_bytes;
  const char* message_part;
};

TEST(Safetensors, RejectsCorruptHeaders) {
  const Corrupt cases[] = {
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}})", 16, "shape and dtype need 16"},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8, "past the data section"},
      {R"({"a": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]}})", 1, "dtype 'I8'"},
      {R"({"a": {"dtype": "I64", "shape": [2], "data_offsets": [0, 8]}})", 8, "shape and dtype need 16"},
      {R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, "shape entries"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4, "begin <= end"},
      {R"({"a": {"dtype": "F32", "shape": [1]}})", 4, "data_offsets"},
      {R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", 4, "dtype"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
       8, "overlap"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
       8, "duplicate"},
      {R"(["not", "an", "object"])", 0, "not a JSON object"},
      {R"({"a": )", 0, "JSON"},
  };
  for (const Corrupt& c : cases) {
    const auto bytes = make_file(c.header, std::vector<uint8_t>(c.data_bytes, 0));
    auto f = SafetensorsFile::parse(bytes, "bad.safetensors");
    ASSERT_FALSE(f.ok()) << c.header;
    EXPECT_NE(f.status().message().find(c.message_part), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find("bad.safetensors"), std::string::npos);
  }
}

TEST(Safetensors, RejectsBadHeaderLength) {
  std::vector<std::byte> tiny(5);
  EXPECT_FALSE(SafetensorsFile::parse(tiny, "t").ok());
  auto bytes = make_file("{}", {});
  const uint64_t huge = 1000;
  std::memcpy(bytes.data(), &huge, 8);
  auto f = SafetensorsFile::parse(bytes, "t");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("header length 1000"), std::string::npos);
}

TEST(Safetensors, OpensAFixtureCheckpoint) {
  auto c = SafetensorsCheckpoint::open_dir(test::parity_fixture_dir("qwen2"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const StTensor* q = c->find("model.layers.0.self_attn.q_proj.bias");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape, (std::vector<uint64_t>{64}));
  const StTensor* e = c->find("model.embed_tokens.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->shape, (std::vector<uint64_t>{384, 64}));
  EXPECT_EQ(c->find("lm_head.weight"), nullptr);  // tied
}

TEST(Safetensors, ShardedCheckpointFollowsTheIndex) {
  const auto dir = test::temp_dir() / "sharded";
  std::filesystem::create_directories(dir);
  const float one = 1.0f, two = 2.0f;
  auto write = [&](const std::string& name, const std::string& tensor, float v) {
    const auto b = make_file(R"({")" + tensor + R"(": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", le_bytes(&v, 4));
    std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
  };
  write("model-00001-of-00002.safetensors", "x", one);
  write("model-00002-of-00002.safetensors", "y", two);
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}})";
  auto c = SafetensorsCheckpoint::open_dir(dir);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  float v;
  c->find("y")->read_f32(0, 1, &v);
  EXPECT_EQ(v, 2.0f);
  // An index naming a tensor that no shard has is an error naming it.
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map": {"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors", "z": "model-00002-of-00002.safetensors"}})";
  auto bad = SafetensorsCheckpoint::open_dir(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'z'"), std::string::npos);
}

}  // namespace
}  // namespace cera::convert
