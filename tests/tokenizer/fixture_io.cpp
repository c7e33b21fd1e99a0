// See fixture_io.h.
#include "tokenizer/fixture_io.h"

#include <fstream>
#include <sstream>
#include <string_view>

namespace cera::test {

std::string read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> parse_vocab_inputs(const std::string& text) {
  static constexpr std::string_view kSeparator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> tests;
  size_t at = 0;
  while (at < text.size()) {
    const size_t sep = text.find(kSeparator, at);
    if (sep == std::string::npos) {
      tests.push_back(text.substr(at));
      break;
    }
    tests.push_back(text.substr(at, sep - at));
    at = sep + kSeparator.size();
  }
  return tests;
}

std::vector<std::vector<int32_t>> parse_vocab_outputs(const std::string& text) {
  std::vector<std::vector<int32_t>> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int32_t id = 0;
    while (ls >> id) ids.push_back(id);
    lines.push_back(std::move(ids));
  }
  return lines;
}

}  // namespace cera::test
