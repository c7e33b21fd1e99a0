// The acceptance oracle: every vocabulary GGUF in shared/tokenizer-fixtures against the ids its
// model's own tokenizer produced (.inp/.out), plus decode(encode(s)) == s on every input string.
// A missing shared/ folder is a failure, never a skip.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "test_paths.h"
#include "tokenizer/fixture_io.h"
#include "tokenizer/tokenizer.h"

namespace cera::tokenizer {
namespace {

namespace fs = std::filesystem;

fs::path fixtures_dir() { return cera::test::shared_dir() / "tokenizer-fixtures"; }

// Vocabularies with expected ids, and those that only have to load and round-trip.
const std::vector<std::string> kWithIds = {"llama-spm", "phi-3",  "gpt-2",
                                           "starcoder", "refact", "deepseek-coder"};
const std::vector<std::string> kRoundTripOnly = {"baichuan", "gpt-neox"};

// WordPiece fixtures made by tools/tokenizer/make_wordpiece_fixture.py (HF `tokenizers` ids);
// WordPiece is lossy (case, accents, spacing), so only their ids are checked.
const std::vector<std::string> kCommittedIdsOnly = {"bert-uncased", "bert-cased"};

fs::path vocab_path(const std::string& name) {
  if (name.rfind("bert-", 0) == 0) {
    return cera::test::source_dir() / "tests" / "fixtures" / "tokenizer" / ("ggml-vocab-" + name + ".gguf");
  }
  return fixtures_dir() / ("ggml-vocab-" + name + ".gguf");
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

// Every .inp string of every vocabulary: the round-trip corpus.
std::vector<std::string> all_inputs() {
  std::vector<std::string> inputs;
  for (const auto& entry : fs::directory_iterator(fixtures_dir())) {
    if (entry.path().extension() != ".inp") continue;
    for (auto& s : cera::test::parse_vocab_inputs(cera::test::read_file_bytes(entry.path()))) {
      inputs.push_back(std::move(s));
    }
  }
  return inputs;
}

struct Row {
  std::string vocab;
  size_t passed = 0;
  size_t total = 0;
  size_t round_trips = 0;
  size_t round_trip_total = 0;
};

Row check_vocab(const std::string& name, bool with_ids, bool round_trip,
                const std::vector<std::string>& corpus) {
  Row row{name};
  SCOPED_TRACE(name);
  auto file = format::GgufFile::open(vocab_path(name));
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return row;
  auto tok = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  if (!tok.ok()) return row;

  const EncodeOptions plain{.add_special = false, .parse_special = false};
  std::vector<std::string> inputs = corpus;
  if (with_ids) {
    const fs::path base = vocab_path(name);
    inputs = cera::test::parse_vocab_inputs(cera::test::read_file_bytes(base.string() + ".inp"));
    const auto expected = cera::test::parse_vocab_outputs(cera::test::read_file_bytes(base.string() + ".out"));
    EXPECT_EQ(inputs.size(), expected.size());
    EXPECT_GE(inputs.size(), 40u);
    row.total = inputs.size();
    for (size_t i = 0; i < inputs.size() && i < expected.size(); ++i) {
      const std::vector<int32_t> ids = tok->encode(inputs[i], plain);
      if (ids == expected[i]) {
        ++row.passed;
      } else {
        ADD_FAILURE() << name << " test " << i << " '" << inputs[i] << "'\n  expected:" << show(expected[i])
                      << "\n  got:     " << show(ids);
      }
    }
  }
  if (!round_trip) return row;
  row.round_trip_total = inputs.size();
  for (const std::string& s : inputs) {
    const std::string back = tok->decode(tok->encode(s, plain));
    if (back == s) {
      ++row.round_trips;
    } else {
      ADD_FAILURE() << name << " round trip of '" << s << "' gave '" << back << "'";
    }
  }
  return row;
}

TEST(TokenizerFixtures, AllVocabulariesMatchReferenceIdsAndRoundTrip) {
  ASSERT_TRUE(fs::is_directory(fixtures_dir()))
      << "tokenizer fixtures not found at " << fixtures_dir() << " (set CERA_SHARED_DIR)";
  const std::vector<std::string> corpus = all_inputs();
  ASSERT_GE(corpus.size(), 300u);

  std::vector<Row> rows;
  for (const auto& name : kWithIds) rows.push_back(check_vocab(name, true, true, corpus));
  for (const auto& name : kRoundTripOnly) rows.push_back(check_vocab(name, false, true, corpus));
  for (const auto& name : kCommittedIdsOnly) rows.push_back(check_vocab(name, true, false, corpus));

  std::printf("\n%-16s %14s %14s\n", "vocab", "tests passed", "round-trips");
  for (const Row& r : rows) {
    const std::string tests =
        r.total ? std::to_string(r.passed) + "/" + std::to_string(r.total) : std::string("-");
    const std::string trips = r.round_trip_total ? std::to_string(r.round_trips) + "/" +
                                                       std::to_string(r.round_trip_total)
                                                 : std::string("(lossy)");
    std::printf("%-16s %14s %14s\n", r.vocab.c_str(), tests.c_str(), trips.c_str());
  }
  std::fflush(stdout);
  for (const Row& r : rows) {
    EXPECT_EQ(r.passed, r.total) << r.vocab;
    EXPECT_GT(r.total + r.round_trip_total, 0u) << r.vocab;
    EXPECT_EQ(r.round_trips, r.round_trip_total) << r.vocab;
  }
}

}  // namespace
}  // namespace cera::tokenizer
