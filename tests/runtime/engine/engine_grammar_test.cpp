// Grammars through the engine loop on stories260K (CPU, F32 K/V). The reference for greedy rows
// is computed in the test from the definition: the full logits row Session gives for the same
// tokens, every token the grammar forbids (its own TokenMatcher, whose masks are checked against
// llguidance in tests/runtime/grammar) dropped, then the argmax (lowest id on ties). Sampled
// rows must produce sentences of the grammar (ByteMatcher, the byte-level reference), and every
// request in a batch of mixed grammars and options equals its run alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/engine/engine_loop.h"
#include "runtime/engine/engine_test_helpers.h"
#include "runtime/grammar/grammar.h"
#include "runtime/grammar/prepare.h"
#include "runtime/grammar/token_matcher.h"

namespace cera::runtime {
namespace {

// Sentences the tiny story model can be pushed into: words, a JSON-like record, a choice.
constexpr const char* kWords = R"(root ::= "Once upon a time" ("," | ".") (" " [a-z]+){2,6} ".")";
constexpr const char* kRecord = R"(root ::= "{\"name\": \"" [A-Za-z ]{1,20} "\", \"age\": " [0-9]{1,3} "}")";
constexpr const char* kChoice = R"(root ::= " " ("yes" | "no" | "maybe"))";

class EngineGrammarTest : public test::StoriesEngineTest {
 protected:
  static std::shared_ptr<const grammar::VocabIndex> vocab() {
    static const auto v = grammar::VocabIndex::from_tokenizer(tok());
    return v;
  }
  static std::shared_ptr<const grammar::TokenTables> tables(const char* gbnf) {
    auto p = grammar::prepare_grammar(grammar::GrammarSyntax::kGbnf, gbnf, vocab());
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    return p.ok() ? p->tables : nullptr;
  }

  // Greedy under the grammar, from the definition (header comment). `free_first`: tokens taken
  // unconstrained before the grammar starts (a lazy trigger's prefix). Ends after the grammar
  // accepted an end-of-generation token (not part of the result) or after max_tokens.
  std::vector<int32_t> masked_greedy(const std::vector<int32_t>& prompt, const char* gbnf, int32_t max_tokens,
                                     const std::vector<int32_t>& free_first = {}) {
    auto s = session({.n_ctx = test::kEngineCtx, .context_shift = false});
    EXPECT_TRUE(s->append_tokens(prompt).ok());
    std::vector<int32_t> out = free_first;
    if (!free_first.empty()) { EXPECT_TRUE(s->append_tokens(free_first).ok()); }
    std::unique_ptr<grammar::TokenMatcher> m;
    if (gbnf != nullptr) m = std::make_unique<grammar::TokenMatcher>(tables(gbnf));
    std::vector<uint32_t> mask((tok().n_vocab() + 31) / 32, ~0u);
    while (static_cast<int32_t>(out.size()) < max_tokens) {
      if (m != nullptr) m->fill_mask(mask);
      const auto row = s->last_logits();
      int32_t best = -1;
      for (int32_t id = 0; id < static_cast<int32_t>(row.size()); ++id) {
        if (((mask[id >> 5] >> (id & 31)) & 1u) == 0) continue;
        if (best < 0 || row[id] > row[best]) best = id;
      }
      EXPECT_GE(best, 0) << "the grammar allows no token";
      if (best < 0) break;
      if (m != nullptr) {
        if (!m->accept_token(best) || m->ended()) break;
      } else if (tok().is_end_of_generation(best)) {
        break;
      }
      out.push_back(best);
      EXPECT_TRUE(s->append_tokens(std::span(&out.back(), 1)).ok());
    }
    return out;
  }

  // The generated tokens' bytes, which the grammar constrains (the text may differ: a
  // SentencePiece decoder drops the first token's leading space).
  static std::string token_bytes(const RequestResult& r) {
    std::string out;
    for (int32_t t : r.tokens) out += vocab()->bytes(t);
    return out;
  }
  // The output is a sentence of the grammar (complete when the request ended on it).
  static void expect_sentence(const RequestResult& r, const char* gbnf, const std::string& what) {
    auto g = grammar::compile_gbnf(gbnf);
    ASSERT_TRUE(g.ok());
    grammar::ByteMatcher m(*g);
    const std::string bytes = token_bytes(r);
    EXPECT_TRUE(m.accept(bytes)) << what << ": '" << bytes << "' is not a prefix of a sentence";
    if (r.reason == FinishReason::kEndOfGeneration) { EXPECT_TRUE(m.can_end()) << what << ": '" << bytes << "'"; }
  }
};

RequestParams request(std::vector<int32_t> prompt, SamplingParams sampling, int32_t max_tokens,
                      std::shared_ptr<const grammar::TokenTables> tables = nullptr) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.sampling = sampling;
  p.max_tokens = max_tokens;
  p.grammar.tables = std::move(tables);
  return p;
}

// Greedy rows with three grammars and without one, sampled rows with each sampling path
// (candidates with top-k, top-p from candidates and the log-sum-exp, the whole row), in one batch:
// greedy equals the masked argmax, sampled output is a sentence, each request equals its solo run.
TEST_F(EngineGrammarTest, MixedBatchFollowsEveryGrammar) {
  std::mt19937 rng(20);
  const std::vector<int32_t> prompt = {tok().bos()};
  const char* grammars[] = {kWords, kRecord, kChoice};
  struct Case {
    const char* gbnf;  // null: unconstrained
    SamplingParams sampling;
  };
  std::vector<Case> cases;
  for (const char* g : grammars) cases.push_back({g, {.temperature = 0.0f}});
  cases.push_back({nullptr, {.temperature = 0.0f}});
  uint64_t seed = 1;
  for (const char* g : grammars) {
    cases.push_back({g, {.temperature = 1.0f, .top_k = 40, .top_p = 1.0f, .min_p = 0.0f, .seed = seed++}});
    cases.push_back({g, {.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f, .seed = seed++}});
    cases.push_back({g, {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = seed++}});
  }
  cases.push_back({nullptr, {.temperature = 0.9f, .seed = seed++}});
  constexpr int32_t kMax = 48;
  std::vector<RequestParams> ps;
  for (const Case& c : cases) ps.push_back(request(prompt, c.sampling, kMax, c.gbnf ? tables(c.gbnf) : nullptr));

  int64_t steps_ahead = 0;  // of the last run
  auto run = [&](int32_t max_running, DecodePipeline pipeline = DecodePipeline::kAuto) {
    auto loop = EngineLoop::create(model(), tok(),
                                   {.n_ctx = test::kEngineCtx, .max_running = max_running, .pipeline = pipeline});
    EXPECT_TRUE(loop.ok());
    std::vector<RequestResult> out;
    if (max_running == 1) {
      for (const RequestParams& p : ps) out.push_back((*loop)->submit(p)->wait());
    } else {
      auto handles = (*loop)->submit_all(ps);
      EXPECT_TRUE(handles.ok()) << handles.status().to_string();
      for (const RequestHandle& h : *handles) out.push_back(h.wait());
    }
    (*loop)->shutdown(ShutdownMode::kDrain);
    const EngineLoopStats st = (*loop)->stats();
    EXPECT_TRUE((*loop)->check_pool_after_shutdown().ok());
    EXPECT_GT(st.n_masked_rows, 0);
    steps_ahead = st.n_steps_ahead;
    if (max_running > 1) { EXPECT_GE(st.max_rows_in_step, static_cast<int32_t>(ps.size())); }
    return out;
  };
  const std::vector<RequestResult> batched = run(32);
  const std::vector<RequestResult> solo = run(1);
  // The overlapped decode (forced on the CPU): greedy grammar rows get their masks between the
  // next step's forward and its argmax.
  const std::vector<RequestResult> overlapped = run(1, DecodePipeline::kOn);
  EXPECT_GT(steps_ahead, 100) << "grammar rows took the overlapped decode";
  std::vector<RequestParams> greedy;
  for (size_t i = 0; i < 4; ++i) greedy.push_back(ps[i]);
  std::swap(ps, greedy);
  const std::vector<RequestResult> overlapped_batch = run(4, DecodePipeline::kOn);
  EXPECT_GT(steps_ahead, 10);
  std::swap(ps, greedy);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string what = "case " + std::to_string(i);
    ASSERT_TRUE(batched[i].status.ok()) << what << ": " << batched[i].status.to_string();
    test::expect_same(batched[i], solo[i], i);
    test::expect_same(overlapped[i], solo[i], i);
    if (i < overlapped_batch.size()) test::expect_same(overlapped_batch[i], solo[i], i);
    if (cases[i].gbnf != nullptr) expect_sentence(batched[i], cases[i].gbnf, what);
  }
  // References after the loops (they share the model's thread pool).
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(batched[i].tokens, masked_greedy(prompt, cases[i].gbnf, kMax)) << "greedy under grammar " << i;
    EXPECT_EQ(batched[i].reason, FinishReason::kEndOfGeneration) << "grammar " << i << ": '" << batched[i].text << "'";
  }
  // The choice grammar ends after its word: every run of it ends on the end token.
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].gbnf == kChoice) { EXPECT_EQ(batched[i].reason, FinishReason::kEndOfGeneration) << "case " << i; }
  }
  // Unconstrained greedy is the plain greedy story, not forced into a grammar.
  EXPECT_EQ(batched[3].tokens, masked_greedy(prompt, nullptr, kMax));
}

// A lazy grammar: free until the trigger token is generated, constrained after it.
TEST_F(EngineGrammarTest, TriggerTokenStartsTheGrammar) {
  const std::vector<int32_t> prompt = {tok().bos()};
  const std::vector<int32_t> plain = masked_greedy(prompt, nullptr, 12);
  ASSERT_GE(plain.size(), 4u);
  // The first token whose first occurrence is at index >= 2, so that the free prefix is known.
  size_t at = 2;
  while (at < plain.size() && std::find(plain.begin(), plain.begin() + at, plain[at]) != plain.begin() + at) ++at;
  ASSERT_LT(at, plain.size());
  RequestParams p = request(prompt, {.temperature = 0.0f}, 40, tables(kChoice));
  p.grammar.trigger_tokens = {plain[at]};
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx});
  ASSERT_TRUE(loop.ok());
  const RequestResult r = (*loop)->submit(p)->wait();
  (*loop)->shutdown(ShutdownMode::kDrain);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  const std::vector<int32_t> prefix(plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  EXPECT_EQ(r.tokens, masked_greedy(prompt, kChoice, 40, prefix));
  EXPECT_EQ(r.reason, FinishReason::kEndOfGeneration);
  const std::string bytes = token_bytes(r);
  EXPECT_TRUE(bytes.ends_with(" yes") || bytes.ends_with(" no") || bytes.ends_with(" maybe")) << bytes;
}

// A lazy grammar whose sentences start with the trigger's own text (a tool-call grammar that
// spells out the marker the model wrote as one token): the text is consumed when it starts.
TEST_F(EngineGrammarTest, TriggerTextIsConsumedWhenTheGrammarStarts) {
  const std::vector<int32_t> prompt = {tok().bos()};
  const std::vector<int32_t> plain = masked_greedy(prompt, nullptr, 12);
  size_t at = 2;
  while (at < plain.size() && std::find(plain.begin(), plain.begin() + at, plain[at]) != plain.begin() + at) ++at;
  ASSERT_LT(at, plain.size());
  const std::string trigger(vocab()->bytes(plain[at]));
  std::string literal;
  for (const char c : trigger) literal += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  const std::string gbnf = "root ::= \"" + literal + "\" " + std::string(kChoice).substr(std::string("root ::= ").size());
  auto prepared = grammar::prepare_grammar(grammar::GrammarSyntax::kGbnf, gbnf, vocab());
  ASSERT_TRUE(prepared.ok()) << prepared.status().to_string() << "\n" << gbnf;
  RequestParams p = request(prompt, {.temperature = 0.0f}, 40, prepared->tables);
  p.grammar.trigger_tokens = {plain[at]};
  p.grammar.trigger_text = trigger;
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx});
  ASSERT_TRUE(loop.ok());
  const RequestResult r = (*loop)->submit(p)->wait();
  RequestParams wrong = p;
  wrong.grammar.trigger_text = "not how it starts";
  auto refused = (*loop)->submit(wrong);
  (*loop)->shutdown(ShutdownMode::kDrain);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  const std::vector<int32_t> prefix(plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  EXPECT_EQ(r.tokens, masked_greedy(prompt, kChoice, 40, prefix));
  EXPECT_EQ(r.reason, FinishReason::kEndOfGeneration);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("trigger text"), std::string::npos) << refused.status().to_string();
}

// Log-probabilities under a grammar are those of the distribution over the allowed tokens, and
// the alternatives are allowed tokens only.
TEST_F(EngineGrammarTest, LogprobsAreOverTheAllowedTokens) {
  const std::vector<int32_t> prompt = {tok().bos()};
  RequestParams p = request(prompt, {.temperature = 0.0f}, 40, tables(kRecord));
  p.logprobs = true;
  p.top_logprobs = 5;
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx});
  ASSERT_TRUE(loop.ok());
  const RequestResult r = (*loop)->submit(p)->wait();
  (*loop)->shutdown(ShutdownMode::kDrain);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_EQ(r.logprobs.size(), r.tokens.size());
  auto s = session({.n_ctx = test::kEngineCtx, .context_shift = false});
  ASSERT_TRUE(s->append_tokens(prompt).ok());
  grammar::TokenMatcher m(tables(kRecord));
  std::vector<uint32_t> mask(m.vocab().mask_words());
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    m.fill_mask(mask);
    const auto row = s->last_logits();
    std::vector<std::pair<float, int32_t>> allowed;
    for (int32_t id = 0; id < static_cast<int32_t>(row.size()); ++id) {
      if ((mask[id >> 5] >> (id & 31)) & 1u) allowed.emplace_back(row[id], id);
    }
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (const auto& [v, id] : allowed) mx = std::max<double>(mx, v);
    for (const auto& [v, id] : allowed) sum += std::exp(v - mx);
    const double lse = mx + std::log(sum);
    std::sort(allowed.begin(), allowed.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    const TokenLogprobs& lp = r.logprobs[i];
    EXPECT_NEAR(lp.chosen.logprob, row[r.tokens[i]] - lse, 1e-4) << "token " << i;
    ASSERT_EQ(lp.top.size(), std::min<size_t>(5, allowed.size())) << "token " << i;
    for (size_t j = 0; j < lp.top.size(); ++j) {
      EXPECT_EQ(lp.top[j].token, allowed[j].second) << "token " << i << " alternative " << j;
      EXPECT_NEAR(lp.top[j].logprob, allowed[j].first - lse, 1e-4) << "token " << i << " alternative " << j;
    }
    ASSERT_TRUE(m.accept_token(r.tokens[i]));
    ASSERT_TRUE(s->append_tokens(std::span(&r.tokens[i], 1)).ok());
  }
}

// The end of the grammar ends the request even where end-of-generation tokens would not.
TEST_F(EngineGrammarTest, TheGrammarsEndEndsTheRequest) {
  RequestParams p = request({tok().bos()}, {.temperature = 0.0f}, 40, tables(kChoice));
  p.stop_at_end_of_generation = false;
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx});
  ASSERT_TRUE(loop.ok());
  const RequestResult r = (*loop)->submit(p)->wait();
  (*loop)->shutdown(ShutdownMode::kDrain);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.reason, FinishReason::kEndOfGeneration);
  const std::string bytes = token_bytes(r);
  EXPECT_TRUE(bytes == " yes" || bytes == " no" || bytes == " maybe") << bytes;
}

TEST_F(EngineGrammarTest, SubmitRefusesAGrammarOfAnotherVocabulary) {
  auto other = grammar::VocabIndex::from_pieces({"a", "b", "c"}, std::vector<grammar::TokenRole>(3, grammar::TokenRole::kText));
  auto prepared = grammar::prepare_grammar(grammar::GrammarSyntax::kGbnf, kChoice, other);
  ASSERT_TRUE(prepared.ok()) << prepared.status().to_string();
  auto loop = EngineLoop::create(model(), tok(), {.n_ctx = test::kEngineCtx});
  ASSERT_TRUE(loop.ok());
  auto h = (*loop)->submit(request({tok().bos()}, {.temperature = 0.0f}, 4, prepared->tables));
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("vocabulary of 3 tokens"), std::string::npos) << h.status().to_string();
  RequestParams trigger_only = request({tok().bos()}, {.temperature = 0.0f}, 4);
  trigger_only.grammar.trigger_tokens = {5};
  auto t = (*loop)->submit(trigger_only);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("without a grammar"), std::string::npos) << t.status().to_string();
}

}  // namespace
}  // namespace cera::runtime
