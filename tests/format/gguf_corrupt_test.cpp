// Replays the hand-made corrupt corpus (tools/gguf/make_corrupt_corpus.py): every file must be
// rejected with a message that names the problem.
#include <gtest/gtest.h>

#include <fstream>

#include "format/gguf.h"
#include "test_paths.h"

namespace cera::format {
namespace {

TEST(GgufCorruptCorpus, EveryFileGivesTheExpectedError) {
  const auto dir = test::source_dir() / "tests/fixtures/gguf/corrupt";
  std::ifstream expected(dir / "EXPECTED");
  ASSERT_TRUE(expected) << "missing " << dir / "EXPECTED";
  std::string line;
  int checked = 0;
  while (std::getline(expected, line)) {
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    const std::string name = line.substr(0, tab), want = line.substr(tab + 1);
    auto f = GgufFile::open(dir / name);
    ASSERT_FALSE(f.ok()) << name << " was accepted";
    EXPECT_NE(f.status().message().find(want), std::string::npos)
        << name << ": expected an error containing \"" << want << "\", got \"" << f.status().message() << "\"";
    EXPECT_NE(f.status().message().find(name), std::string::npos) << "error does not name the file";
    ++checked;
  }
  EXPECT_GE(checked, 30);
  std::printf("corrupt corpus: %d files, all rejected with the expected error\n", checked);
}

}  // namespace
}  // namespace cera::format
