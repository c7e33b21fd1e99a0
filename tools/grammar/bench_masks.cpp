// bench_grammar_masks: the grammar engine's per-token cost, single thread, over given grammars
// and token walks (tools/grammar/bench_masks.py writes the walks file and prints the table beside
// llguidance's and XGrammar's numbers on the same walks).
//   bench_grammar_masks MODEL.gguf WALKS_FILE [REPEATS]
// WALKS_FILE: "grammar NAME gbnf|schema NBYTES\n" + NBYTES of text + "\n", then
// "walk NAME id,id,..." lines. Per token = accept_token(previous) + fill_mask, warm (tables
// precomputed once per grammar); "lazy" = the first walk of each grammar on fresh tables (what a
// request pays when nothing was precomputed). Prepare = json_schema_to_gbnf (schemas) +
// uncached compile + every table, cold. Prints a markdown table and one "RESULT {json}" line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "runtime/grammar/grammar.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/token_matcher.h"
#include "runtime/grammar/vocab_index.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace cera::runtime::grammar;
using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

struct Source {
  bool schema = false;
  std::string text;
};

struct Walk {
  std::string grammar;
  std::vector<int32_t> tokens;
};

bool read_walks(const char* path, std::map<std::string, Source>& grammars, std::vector<Walk>& walks) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string tag, name;
    ss >> tag >> name;
    if (tag == "grammar") {
      std::string kind;
      size_t n = 0;
      ss >> kind >> n;
      Source s{kind == "schema", std::string(n, '\0')};
      in.read(s.text.data(), static_cast<std::streamsize>(n));
      in.ignore(1);
      grammars[name] = std::move(s);
    } else if (tag == "walk") {
      Walk w{name, {}};
      std::string ids, item;
      ss >> ids;
      std::stringstream is(ids);
      while (std::getline(is, item, ',')) w.tokens.push_back(std::stoi(item));
      walks.push_back(std::move(w));
    }
  }
  return !grammars.empty() && !walks.empty();
}

struct Stats {
  size_t n = 0;
  double p50 = 0, p99 = 0, max = 0;
};

Stats stats(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v.size(), v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)], v.back()};
}

nlohmann::json to_json(const Stats& s) { return {{"n", s.n}, {"p50", s.p50}, {"p99", s.p99}, {"max", s.max}}; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf WALKS_FILE [REPEATS]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  auto file = cera::format::GgufFile::open(argv[1]);
  if (!file.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[1], std::string(file.status().message()).c_str());
    return 1;
  }
  auto tok = cera::tokenizer::Tokenizer::from_gguf(*file);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[1], std::string(tok.status().message()).c_str());
    return 1;
  }
  std::shared_ptr<const VocabIndex> vocab = VocabIndex::from_tokenizer(*tok);
  std::map<std::string, Source> sources;
  std::vector<Walk> walks;
  if (!read_walks(argv[2], sources, walks)) {
    std::fprintf(stderr, "%s: no grammars or walks\n", argv[2]);
    return 1;
  }

  // Prepare, cold, each grammar once.
  std::map<std::string, std::shared_ptr<const TokenTables>> tables;
  std::vector<double> prepare_ms;
  std::vector<std::pair<double, std::string>> slowest;
  for (const auto& [name, src] : sources) {
    const auto t0 = Clock::now();
    std::string gbnf = src.text;
    if (src.schema) {
      auto g = json_schema_to_gbnf(src.text);
      if (!g.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(g.status().message()).c_str());
        return 1;
      }
      gbnf = std::move(g).value();
    }
    auto g = compile_gbnf(gbnf, "root", GrammarLimits{});  // uncached
    if (!g.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(g.status().message()).c_str());
      return 1;
    }
    auto t = std::make_shared<const TokenTables>(*g, vocab);
    t->precompute_all();
    prepare_ms.push_back(us_since(t0) / 1000);
    slowest.push_back({prepare_ms.back(), name});
    tables[name] = t;
  }

  std::vector<uint32_t> mask(vocab->mask_words());
  std::vector<double> warm, lazy;
  std::vector<std::pair<double, std::string>> worst;
  for (int rep = 0; rep < repeats; ++rep) {
    for (const Walk& w : walks) {
      TokenMatcher m(tables.at(w.grammar));
      for (size_t i = 0; i <= w.tokens.size(); ++i) {
        const auto t0 = Clock::now();
        if (i > 0 && !m.accept_token(w.tokens[i - 1])) {
          std::fprintf(stderr, "%s: token %d refused at step %zu\n", w.grammar.c_str(), w.tokens[i - 1], i);
          return 1;
        }
        if (m.ended()) break;  // nothing to mask after the end token
        m.fill_mask(mask);
        warm.push_back(us_since(t0));
        if (rep == 0) worst.push_back({warm.back(), w.grammar + " step " + std::to_string(i)});
      }
    }
  }
  std::map<std::string, bool> seen;
  for (const Walk& w : walks) {
    if (seen[w.grammar]) continue;
    seen[w.grammar] = true;
    TokenMatcher m(std::make_shared<const TokenTables>(tables.at(w.grammar)->grammar_ptr(), vocab));
    for (size_t i = 0; i <= w.tokens.size(); ++i) {
      const auto t0 = Clock::now();
      if (i > 0 && !m.accept_token(w.tokens[i - 1])) return 1;
      if (m.ended()) break;
      m.fill_mask(mask);
      lazy.push_back(us_since(t0));
    }
  }

  const Stats sw = stats(warm), sl = stats(lazy), sp = stats(prepare_ms);
  std::printf("| cera, %d tokens | n | p50 | p99 | max |\n|---|---|---|---|---|\n", vocab->n_vocab());
  std::printf("| accept + mask per token, warm (us) | %zu | %.1f | %.1f | %.1f |\n", sw.n, sw.p50, sw.p99, sw.max);
  std::printf("| accept + mask per token, lazy tables (us) | %zu | %.1f | %.1f | %.1f |\n", sl.n, sl.p50, sl.p99, sl.max);
  std::printf("| compile + all tables per grammar, cold (ms) | %zu | %.1f | %.1f | %.1f |\n", sp.n, sp.p50, sp.p99,
              sp.max);
  std::sort(worst.rbegin(), worst.rend());
  std::sort(slowest.rbegin(), slowest.rend());
  nlohmann::json out = {{"vocab", vocab->n_vocab()}, {"warm_us", to_json(sw)}, {"lazy_us", to_json(sl)},
                        {"prepare_ms", to_json(sp)}, {"slowest_steps", nlohmann::json::array()},
                        {"slowest_prepare", nlohmann::json::array()}};
  for (size_t i = 0; i < 5 && i < worst.size(); ++i) out["slowest_steps"].push_back({worst[i].second, worst[i].first});
  for (size_t i = 0; i < 5 && i < slowest.size(); ++i) {
    out["slowest_prepare"].push_back({slowest[i].second, slowest[i].first});
  }
  std::printf("RESULT %s\n", out.dump().c_str());
  return 0;
}
