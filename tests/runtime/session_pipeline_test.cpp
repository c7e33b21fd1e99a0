// Pipelined greedy decode (SessionOptions::pipeline) on the CPU backend, where every step
// completes at once but the bookkeeping is the one the CUDA backend runs: the reference greedy
// text of stories260K byte for byte, and the same tokens, text, stop reason, stats and session
// state as the plain loop after every kind of stop, context shifts and a following turn.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

#include "api/engine.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "ops/cpu/cpu_backend.h"
#include "forwarding_backend.h"
#include "stories_engine_test.h"
#include "stories_model.h"

namespace cera::runtime {
namespace {

class PipelineTest : public test::StoriesEngineTest {};

GenerateOptions greedy(int32_t max_tokens) {
  GenerateOptions g;
  g.max_tokens = max_tokens;
  g.sampling.temperature = 0.0f;
  return g;
}

// Everything a caller can see of one generate() and of the session after it.
struct Outcome {
  StopReason reason = StopReason::kMaxTokens;
  int32_t n_generated = 0;
  std::string text, streamed;
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  int64_t n_generated_total = 0, n_prompt_total = 0, n_shifts = 0;

  bool operator==(const Outcome&) const = default;
};

Outcome generate(Session& s, const GenerateOptions& gen, std::function<void()> on_piece = {}) {
  Outcome o;
  auto r = s.generate(gen, [&](std::string_view p) {
    o.streamed += p;
    if (on_piece) on_piece();
  });
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return o;
  o.reason = r->reason;
  o.n_generated = r->n_generated;
  o.text = r->text;
  o.tokens = s.tokens();
  const auto l = s.last_logits();
  o.logits.assign(l.begin(), l.end());
  o.n_generated_total = s.stats().n_generated_tokens;
  o.n_prompt_total = s.stats().n_prompt_tokens;
  o.n_shifts = s.stats().n_context_shifts;
  return o;
}

// The same turns on a plain and on a pipelined session: a prompt, a generate, a follow-up
// append and a second generate; every outcome must be equal.
struct Turns {
  SessionOptions options;
  std::string prompt = "Once upon a time";
  GenerateOptions first = greedy(60), second = greedy(30);
  std::string follow_up = " The end. One day";
};

void expect_same_turns(const Turns& t, const std::function<std::unique_ptr<Session>(SessionOptions)>& make,
                       StopReason expected_first) {
  std::vector<Outcome> got[2];
  for (const DecodePipeline p : {DecodePipeline::kOff, DecodePipeline::kOn}) {
    SessionOptions o = t.options;
    o.pipeline = p;
    auto s = make(o);
    ASSERT_TRUE(s->append_text(t.prompt, true).ok());
    std::vector<Outcome>& out = got[p == DecodePipeline::kOn];
    out.push_back(generate(*s, t.first));
    ASSERT_TRUE(s->append_text(t.follow_up, false).ok());
    Outcome appended;
    appended.tokens = s->tokens();
    const auto l = s->last_logits();
    appended.logits.assign(l.begin(), l.end());
    appended.n_prompt_total = s->stats().n_prompt_tokens;
    out.push_back(appended);
    out.push_back(generate(*s, t.second));
  }
  ASSERT_EQ(got[0].size(), 3u);
  EXPECT_EQ(got[0][0].reason, expected_first);
  for (size_t i = 0; i < got[0].size(); ++i) {
    EXPECT_EQ(got[0][i].reason, got[1][i].reason) << "outcome " << i;
    EXPECT_EQ(got[0][i].n_generated, got[1][i].n_generated) << "outcome " << i;
    EXPECT_EQ(got[0][i].text, got[1][i].text) << "outcome " << i;
    EXPECT_EQ(got[0][i].streamed, got[1][i].text) << "outcome " << i;
    EXPECT_EQ(got[1][i].streamed, got[1][i].text) << "outcome " << i;
    EXPECT_EQ(got[0][i].tokens, got[1][i].tokens) << "outcome " << i;
    EXPECT_EQ(got[0][i].logits, got[1][i].logits) << "outcome " << i;  // bit-identical on the CPU
    EXPECT_EQ(got[0][i].n_generated_total, got[1][i].n_generated_total) << "outcome " << i;
    EXPECT_EQ(got[0][i].n_prompt_total, got[1][i].n_prompt_total) << "outcome " << i;
    EXPECT_EQ(got[0][i].n_shifts, got[1][i].n_shifts) << "outcome " << i;
  }
}

TEST_F(PipelineTest, ReproducesTheReferenceGreedyText) {
  for (const DecodePipeline p : {DecodePipeline::kOn, DecodePipeline::kAuto}) {
    auto s = session({.n_ctx = 512, .pipeline = p});
    const int32_t bos = engine_->tokenizer().bos();
    ASSERT_TRUE(s->append_tokens(std::span(&bos, 1)).ok());
    auto r = s->generate(greedy(256), nullptr);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->text + "\n", test::stories_reference_text()) << "pipeline " << int(p);
  }
}

TEST_F(PipelineTest, SameAsThePlainLoopAtTheTokenLimit) {
  // max_tokens: the last token stays pending; the follow-up append evaluates it first.
  expect_same_turns({.options = {.n_ctx = 256}}, session, StopReason::kMaxTokens);
  // A second generate right after a limit continues from the pending token.
  std::vector<Outcome> got[2];
  for (const DecodePipeline p : {DecodePipeline::kOff, DecodePipeline::kOn}) {
    auto s = session({.n_ctx = 256, .pipeline = p});
    ASSERT_TRUE(s->append_text("One day, a girl", true).ok());
    got[p == DecodePipeline::kOn].push_back(generate(*s, greedy(1)));
    got[p == DecodePipeline::kOn].push_back(generate(*s, greedy(17)));
    got[p == DecodePipeline::kOn].push_back(generate(*s, greedy(2)));
  }
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(got[0][1].n_generated, 17);
}

// stories260K's greedy text never reaches its end-of-sequence token: a copy of the model whose
// eos_token_id names an ordinary token that greedy decoding reaches does.
std::filesystem::path stories_with_eos(int32_t eos) {
  auto f = format::GgufFile::open(test::stories_gguf());
  if (!f.ok()) throw std::runtime_error(f.status().to_string());
  format::GgufWriter w;
  for (const auto& kv : f->metadata()) w.set(kv.key, kv.value);
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  for (const auto& t : f->tensors()) {
    if (!w.add_tensor_view({t.name, t.dtype, t.shape}, f->tensor_data(t)).ok()) throw std::runtime_error(t.name);
  }
  const auto out = test::temp_dir() / ("stories260K-eos" + std::to_string(eos) + ".gguf");
  if (!w.write(out).ok()) throw std::runtime_error("cannot write " + out.string());
  return out;
}

TEST_F(PipelineTest, SameAsThePlainLoopAtTheEndOfGeneration) {
  // The 25th token greedy decoding generates after the prompt becomes the end of generation.
  auto plain = session({.n_ctx = 256});
  ASSERT_TRUE(plain->append_text("Once upon a time", true).ok());
  const size_t prompt = plain->tokens().size();
  ASSERT_TRUE(plain->generate(greedy(30), nullptr).ok());
  const int32_t eos = plain->tokens().at(prompt + 24);
  auto engine = api::Engine::load({.model_path = stories_with_eos(eos), .device = api::DeviceChoice::kCpu});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  ASSERT_TRUE((*engine)->tokenizer().is_end_of_generation(eos));
  auto make = [&](SessionOptions o) { return std::move((*engine)->new_session(o)).value(); };
  expect_same_turns({.options = {.n_ctx = 256}, .first = greedy(200)}, make, StopReason::kEndOfGeneration);
}

TEST_F(PipelineTest, SameAsThePlainLoopAtAStopString) {
  Turns t{.options = {.n_ctx = 256}, .first = greedy(200)};
  t.first.stop = {"Lily"};
  expect_same_turns(t, session, StopReason::kStopString);
  // A stop string that ends inside a token's text, and one split over tokens.
  t.first.stop = {"zzz", "t kno"};
  expect_same_turns(t, session, StopReason::kStopString);
}

TEST_F(PipelineTest, SameAsThePlainLoopThroughContextShifts) {
  Turns t{.options = {.n_ctx = 48, .n_keep = 10}, .first = greedy(150), .second = greedy(70)};
  t.first.stop_at_end_of_generation = t.second.stop_at_end_of_generation = false;
  expect_same_turns(t, session, StopReason::kMaxTokens);
  // Without context shift a full cache stops generation; the token is left pending.
  t.options.context_shift = false;
  t.follow_up = "";
  t.first = greedy(100);
  t.first.stop_at_end_of_generation = false;
  t.options.n_ctx = 40;
  std::vector<Outcome> got[2];
  for (const DecodePipeline p : {DecodePipeline::kOff, DecodePipeline::kOn}) {
    auto s = session({.n_ctx = 40, .context_shift = false, .pipeline = p});
    ASSERT_TRUE(s->append_text(t.prompt, true).ok());
    got[p == DecodePipeline::kOn].push_back(generate(*s, t.first));
  }
  EXPECT_EQ(got[0][0].reason, StopReason::kContextFull);
  EXPECT_EQ(got[0], got[1]);
}

TEST_F(PipelineTest, SameAsThePlainLoopWhenCancelled) {
  std::vector<Outcome> got[2];
  for (const DecodePipeline p : {DecodePipeline::kOff, DecodePipeline::kOn}) {
    auto s = session({.n_ctx = 256, .pipeline = p});
    ASSERT_TRUE(s->append_text("Once upon a time", true).ok());
    int pieces = 0;
    Session* raw = s.get();
    GenerateOptions gen = greedy(200);
    gen.stop_at_end_of_generation = false;
    got[p == DecodePipeline::kOn].push_back(generate(*s, gen, [&] {
      if (++pieces == 7) raw->cancel();
    }));
    got[p == DecodePipeline::kOn].push_back(generate(*s, greedy(10)));
  }
  EXPECT_EQ(got[0][0].reason, StopReason::kCancelled);
  EXPECT_EQ(got[0], got[1]);
}

// A CPU backend that counts embed_ids and download_async: proves kOn really feeds ids on the
// device (and kOff never does), since equal outcomes alone would not tell the paths apart.
class CountingBackend final : public test::ForwardingBackend {
 public:
  CountingBackend() : ForwardingBackend(ops::make_cpu_backend({.n_threads = 1})) {}
  int embed_ids_calls = 0, async_calls = 0;

  std::string name() const override { return "counting " + inner().name(); }
  ops::Readback download_async(void* dst, const TensorView& src) override {
    ++async_calls;
    return ForwardingBackend::download_async(dst, src);
  }
  void embed_ids(const TensorView& o, const TensorView& t, const TensorView& ids, float s) override {
    ++embed_ids_calls;
    ForwardingBackend::embed_ids(o, t, ids, s);
  }
};

TEST(PipelineCounting, OnlyThePipelinedLoopFeedsIdsOnTheDevice) {
  auto file = format::GgufFile::open(test::stories_gguf());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok());
  std::string texts[3];
  for (const DecodePipeline p : {DecodePipeline::kOff, DecodePipeline::kAuto, DecodePipeline::kOn}) {
    CountingBackend backend;
    auto m = model::load_model(*file, backend);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto s = Session::create(**m, *tok, {.n_ctx = 128, .pipeline = p});
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    ASSERT_TRUE((*s)->append_text("Once upon a time", true).ok());
    GenerateOptions gen = greedy(20);
    gen.stop_at_end_of_generation = false;
    auto r = (*s)->generate(gen, nullptr);
    ASSERT_TRUE(r.ok());
    texts[int(p)] = r->text;
    // kAuto is off on the CPU (no overlap to gain). kOn: every token but the last is evaluated
    // by a step queued ahead, and each step's argmax read back asynchronously.
    const bool on = p == DecodePipeline::kOn;
    EXPECT_EQ(backend.embed_ids_calls, on ? 19 : 0) << int(p);
    EXPECT_EQ(backend.async_calls, on ? 20 : 0) << int(p);
    // Sampling other than greedy never pipelines.
    backend.embed_ids_calls = 0;
    gen.sampling = {.temperature = 0.7f, .seed = 5};
    ASSERT_TRUE((*s)->generate(gen, nullptr).ok());
    EXPECT_EQ(backend.embed_ids_calls, 0);
  }
  EXPECT_EQ(texts[0], texts[1]);
  EXPECT_EQ(texts[0], texts[2]);
}

// The default bodies: embed_ids equals embed of the same ids, and download_async has the bytes
// by wait() (several outstanding, waited out of order).
TEST(BackendDefaults, EmbedIdsAndDownloadAsync) {
  auto cpu = ops::make_cpu_backend({.n_threads = 1});
  const int64_t n_embd = 7, n_vocab = 11;
  std::vector<float> table(n_embd * n_vocab);
  for (size_t i = 0; i < table.size(); ++i) table[i] = 0.25f * float(i % 13) - 1.0f + 0.01f * float(i);
  const TensorView t = make_view(table.data(), DType::kF32, {n_embd, n_vocab, 1, 1}, Device::kCpu);
  std::vector<int32_t> ids = {3, 10, 0, 3};
  const TensorView idv = make_view(ids.data(), DType::kI32, {4, 1, 1, 1}, Device::kCpu);
  std::vector<float> a(n_embd * 4, -7.0f), b(n_embd * 4, 9.0f);
  cpu->embed(make_view(a.data(), DType::kF32, {n_embd, 4, 1, 1}, Device::kCpu), t, ids, 0.5f);
  cpu->embed_ids(make_view(b.data(), DType::kF32, {n_embd, 4, 1, 1}, Device::kCpu), t, idv, 0.5f);
  EXPECT_EQ(a, b);
  for (int64_t j = 0; j < n_embd; ++j) EXPECT_EQ(b[n_embd + j], 0.5f * table[10 * n_embd + j]);

  int32_t got[3] = {-1, -1, -1};
  ops::Readback r[3];
  for (int i = 0; i < 3; ++i) r[i] = cpu->download_async(&got[i], make_view(&ids[i], DType::kI32, {1, 1, 1, 1}, Device::kCpu));
  EXPECT_FALSE(cpu->overlaps_host());
  for (int i : {2, 0, 1}) {
    cpu->wait(r[i]);
    EXPECT_EQ(got[i], ids[i]);
  }
}

}  // namespace
}  // namespace cera::runtime
