// The reader against a file written by the ecosystem's own writer (the gguf Python package):
// tools/gguf/make_reference_file.py lists the values asserted here.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/half.h"
#include "format/gguf.h"
#include "test_paths.h"

namespace cera::format {
namespace {

std::filesystem::path reference_path() {
  return test::source_dir() / "tests/fixtures/gguf/reference.gguf";
}

TEST(GgufReader, ReadsEveryScalarTypeOfTheReferenceFile) {
  auto f = GgufFile::open(reference_path());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 18u);
  EXPECT_EQ(*f->get<std::string>("general.architecture"), "testarch");
  EXPECT_EQ(*f->get<uint8_t>("t.u8"), 200);
  EXPECT_EQ(*f->get<int8_t>("t.i8"), -100);
  EXPECT_EQ(*f->get<uint16_t>("t.u16"), 60000);
  EXPECT_EQ(*f->get<int16_t>("t.i16"), -30000);
  EXPECT_EQ(*f->get<uint32_t>("t.u32"), 4000000000u);
  EXPECT_EQ(*f->get<int32_t>("t.i32"), -2000000000);
  EXPECT_EQ(*f->get<float>("t.f32"), 0.15625f);
  EXPECT_EQ(*f->get<bool>("t.bool"), true);
  EXPECT_EQ(*f->get<std::string>("t.str"), "h\xC3\xA9llo \xE2\x96\x81w\xC3\xB6rld");
  EXPECT_EQ(*f->get<uint64_t>("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(*f->get<int64_t>("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(*f->get<double>("t.f64"), 2.5e-300);
  EXPECT_EQ(f->find("t.u8")->type(), GgufType::kUint8);
  EXPECT_EQ(f->find("t.f64")->type(), GgufType::kFloat64);
}

TEST(GgufReader, ReadsArraysIncludingNested) {
  auto f = GgufFile::open(reference_path());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*f->get_array<int32_t>("t.arr_i32"), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(*f->get_array<float>("t.arr_f32"), (std::vector<float>{0.5f, -1.25f}));
  EXPECT_EQ(*f->get_array<std::string>("t.arr_str"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(*f->get_array<bool>("t.arr_bool"), (std::vector<bool>{true, false, true}));
  const GgufArray* nested = f->find("t.nested")->array();
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->element_type, GgufType::kArray);
  ASSERT_EQ(nested->size(), 2u);
  const GgufArray* first = nested->values[0].array();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->element_type, GgufType::kInt32);
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ(*first->at(1).as_int(), 2);
  EXPECT_EQ(*nested->values[1].array()->at(0).as_int(), 3);
}

TEST(GgufReader, TypedAccessorsConvertOnlyWhenTheValueFits) {
  auto f = GgufFile::open(reference_path());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->get<int64_t>("t.u32"), 4000000000ll);  // widening is fine
  EXPECT_EQ(*f->get<uint32_t>("t.u8"), 200u);
  EXPECT_EQ(*f->get<double>("t.i32"), -2000000000.0);   // any number as floating point
  auto narrow = f->get<int32_t>("t.u32");
  ASSERT_FALSE(narrow.ok());
  EXPECT_EQ(narrow.status().code(), ErrorCode::kOutOfRange);
  EXPECT_NE(narrow.status().message().find("t.u32"), std::string::npos);
  auto negative = f->get<uint64_t>("t.i8");
  ASSERT_FALSE(negative.ok());
  auto wrong = f->get<std::string>("t.f32");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("expected string, found float32"), std::string::npos);
  auto missing = f->get<uint32_t>("llama.block_count");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("llama.block_count"), std::string::npos);
  EXPECT_EQ(*f->get_or<uint32_t>("llama.block_count", 7u), 7u);
  EXPECT_FALSE(f->get_array<int32_t>("t.u8").ok());  // scalar asked as array
  EXPECT_FALSE(f->get<bool>("t.u8").ok());           // integers are not bools
}

TEST(GgufReader, TensorInfosAndData) {
  auto f = GgufFile::open(reference_path());
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->tensors().size(), 3u);
  const GgufTensorInfo* t = f->find_tensor("plain.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_EQ(t->shape, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(t->n_bytes, 24u);
  // Offsets and bytes as the gguf package reports them (data_offset 736 for this tensor).
  EXPECT_EQ(f->data_offset() + t->offset, 736u);
  auto data = f->tensor_data(*t);
  float first;
  std::memcpy(&first, data.data(), 4);
  uint32_t bits;
  std::memcpy(&bits, &first, 4);
  EXPECT_EQ(bits, 0x3eb0f069u);  // bytes 69 f0 b0 3e
  const GgufTensorInfo* q = f->find_tensor("block.q8_0");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, DType::kQ8_0);
  EXPECT_EQ(q->shape, (std::vector<uint64_t>{32, 2}));
  EXPECT_EQ(q->n_bytes, 68u);
  EXPECT_EQ(f->data_offset() + q->offset, 800u);
  const GgufTensorInfo* h = f->find_tensor("plain.f16");
  ASSERT_NE(h, nullptr);
  uint16_t h0;
  std::memcpy(&h0, f->tensor_data(*h).data(), 2);
  EXPECT_EQ(h0, 0xb84cu);
  EXPECT_EQ(f->find_tensor("missing"), nullptr);
}

TEST(GgufReader, AcceptsVersion2) {
  std::ifstream in(reference_path(), std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  bytes[4] = 2;  // v2 and v3 share the layout (v3 only adds big-endian files)
  auto f = GgufFile::parse(std::as_bytes(std::span(bytes)));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->tensors().size(), 3u);
}

TEST(GgufReader, EveryTruncationIsAnErrorNeverACrash) {
  std::ifstream in(reference_path(), std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  // Cutting anywhere before the last tensor's data ends must fail with a message (the
  // trailing alignment padding after it is optional).
  auto whole = GgufFile::parse(std::as_bytes(std::span(bytes)));
  ASSERT_TRUE(whole.ok());
  uint64_t end = 0;
  for (const auto& t : whole->tensors()) end = std::max(end, whole->data_offset() + t.offset + t.n_bytes);
  ASSERT_EQ(end, 868u);
  for (size_t n = 0; n < end; ++n) {
    auto f = GgufFile::parse(std::as_bytes(std::span(bytes.data(), n)));
    ASSERT_FALSE(f.ok()) << "truncated to " << n << " bytes";
    EXPECT_FALSE(f.status().message().empty());
  }
}

TEST(GgufReader, MissingFileIsAnIoError) {
  auto f = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kIo);
  EXPECT_NE(f.status().message().find("/nonexistent/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace cera::format
