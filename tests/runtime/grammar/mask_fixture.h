// Reads tests/fixtures/grammar/corpus.gbnf (the grammars) and llguidance_masks.txt (walks of
// token ids with llguidance's allowed set before each token), both written by
// tools/grammar/reference_masks.py; llguidance_schema_masks.txt (same format) is written by
// tools/grammar/schema_masks.py. Shared by the fixture tests and the mask benchmarks.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"

namespace cera::runtime::grammar::test {

struct MaskWalk {
  std::string grammar;
  std::vector<int32_t> tokens;
  std::vector<uint32_t> masks;  // masks.size() == tokens.size() + 1 (or == when it ended on EOG)
};

struct MaskFixture {
  int32_t n_vocab = 0;
  std::vector<int32_t> eog;
  std::vector<std::vector<int32_t>> masks;  // allowed ids, ascending
  std::vector<MaskWalk> walks;
  std::map<std::string, std::string> grammars;  // name -> GBNF text
  bool loaded = false;
};

inline std::map<std::string, std::string> load_corpus() {
  std::ifstream in(cera::test::source_dir() / "tests/fixtures/grammar/corpus.gbnf");
  std::map<std::string, std::string> out;
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.rfind("### ", 0) == 0) {
      name = line.substr(4);
      out[name];
    } else if (!name.empty()) {
      out[name] += line + "\n";
    }
  }
  return out;
}

inline std::vector<uint32_t> split_u32(const std::string& s) {
  std::vector<uint32_t> out;
  if (s == "-") return out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(static_cast<uint32_t>(std::stoul(item)));
  return out;
}

// The walks and masks of one fixture file (path relative to the source tree); grammars empty.
inline MaskFixture load_mask_file(const std::string& relative) {
  MaskFixture f;
  std::ifstream in(cera::test::source_dir() / relative);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string tag;
    ss >> tag;
    if (tag == "vocab") {
      ss >> f.n_vocab;
    } else if (tag == "eog") {
      int32_t id;
      while (ss >> id) f.eog.push_back(id);
    } else if (tag == "mask") {
      size_t index, count;
      std::string kind;
      ss >> index >> kind >> count;
      std::vector<int32_t> listed;
      int64_t prev = -1, gap;
      for (size_t i = 0; i < count && (ss >> gap); ++i) listed.push_back(static_cast<int32_t>(prev += gap + 1));
      std::vector<int32_t> ids;
      if (kind == "L") {
        ids = std::move(listed);
      } else {
        size_t j = 0;
        for (int32_t id = 0; id < f.n_vocab; ++id) {
          if (j < listed.size() && listed[j] == id) {
            ++j;
          } else {
            ids.push_back(id);
          }
        }
      }
      f.masks.resize(std::max(f.masks.size(), index + 1));
      f.masks[index] = std::move(ids);
    } else if (tag == "walk") {
      MaskWalk w;
      std::string tokens, masks;
      ss >> w.grammar >> tokens >> masks;
      for (uint32_t t : split_u32(tokens)) w.tokens.push_back(static_cast<int32_t>(t));
      w.masks = split_u32(masks);
      f.walks.push_back(std::move(w));
    }
  }
  f.loaded = f.n_vocab > 0 && !f.walks.empty();
  return f;
}

inline MaskFixture load_mask_fixture() {
  MaskFixture f = load_mask_file("tests/fixtures/grammar/llguidance_masks.txt");
  f.grammars = load_corpus();
  return f;
}

}  // namespace cera::runtime::grammar::test
