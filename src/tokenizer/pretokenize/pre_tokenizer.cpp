// GGUF name table, the regex sequence of each PreTokenizer, and the driver that runs a
// sequence. Each stage does the leftmost-first search of its regex inside every piece of the
// previous stage and keeps the unmatched gaps as pieces (HF Split "Isolated" / llama.cpp).
#include "tokenizer/pretokenize/pre_tokenizer.h"

#include <array>
#include <span>

#include "tokenizer/pretokenize/cp_text.h"
#include "tokenizer/pretokenize/matchers.h"

namespace cera::tokenizer {
namespace {

using pretok::CpText;
using pretok::Span;
using pretok::Stage;
namespace m = pretok;

struct NameEntry {
  std::string_view name;
  PreTokenizer kind;
};

// GGUF tokenizer.ggml.pre values, grouped as llama-vocab.cpp groups them by regex set.
constexpr NameEntry kNames[] = {
    {"default", PreTokenizer::kDefault},
    {"llama3", PreTokenizer::kLlama3},
    {"llama-v3", PreTokenizer::kLlama3},
    {"llama-bpe", PreTokenizer::kLlama3},
    {"falcon3", PreTokenizer::kLlama3},
    {"falcon-h1", PreTokenizer::kLlama3},
    {"pixtral", PreTokenizer::kLlama3},
    {"midm-2.0", PreTokenizer::kLlama3},
    {"lfm2", PreTokenizer::kLlama3},
    {"jina-v5-nano", PreTokenizer::kLlama3},
    {"dbrx", PreTokenizer::kLlama3},
    {"smaug-bpe", PreTokenizer::kLlama3},
    {"glm4", PreTokenizer::kLlama3},
    {"chatglm-bpe", PreTokenizer::kLlama3},
    {"gpt-2", PreTokenizer::kGpt2},
    {"phi-2", PreTokenizer::kGpt2},
    {"jina-es", PreTokenizer::kGpt2},
    {"jina-de", PreTokenizer::kGpt2},
    {"gigachat", PreTokenizer::kGpt2},
    {"jina-v2-es", PreTokenizer::kGpt2},
    {"jina-v2-de", PreTokenizer::kGpt2},
    {"a.x-4.0", PreTokenizer::kGpt2},
    {"mellum", PreTokenizer::kGpt2},
    {"modern-bert", PreTokenizer::kGpt2},
    {"jina-v1-en", PreTokenizer::kGpt2},
    {"jina-v2-code", PreTokenizer::kGpt2},
    {"roberta-bpe", PreTokenizer::kGpt2},
    {"mpt", PreTokenizer::kGpt2},
    {"olmo", PreTokenizer::kGpt2},
    {"jais", PreTokenizer::kGpt2},
    {"exaone4", PreTokenizer::kGpt2},
    {"trillion", PreTokenizer::kGpt2},
    {"granite-docling", PreTokenizer::kGpt2},
    {"qwen2", PreTokenizer::kQwen2},
    {"deepseek-r1-qwen", PreTokenizer::kQwen2},
    {"kormo", PreTokenizer::kQwen2},
    {"f2llmv2", PreTokenizer::kQwen2},
    {"megrez", PreTokenizer::kQwen2},
    {"stablelm2", PreTokenizer::kQwen2},
    {"hunyuan", PreTokenizer::kQwen2},
    {"solar-open", PreTokenizer::kQwen2},
    {"grok-2", PreTokenizer::kQwen2},
    // bailingmoe's tokenizer.json regex uses possessive quantifiers and `\s*[\r\n]`; neither
    // changes any split (nothing after them could use backtracking), so it is the Qwen 2 set.
    {"bailingmoe", PreTokenizer::kQwen2},
    {"bailingmoe2", PreTokenizer::kQwen2},
    {"llada-moe", PreTokenizer::kQwen2},
    {"qwen35", PreTokenizer::kQwen35},
    {"starcoder", PreTokenizer::kStarcoder},
    {"refact", PreTokenizer::kStarcoder},
    {"command-r", PreTokenizer::kStarcoder},
    {"smollm", PreTokenizer::kStarcoder},
    {"codeshell", PreTokenizer::kStarcoder},
    {"exaone", PreTokenizer::kStarcoder},
    {"minerva-7b", PreTokenizer::kStarcoder},
    {"mellum2", PreTokenizer::kStarcoder},
    {"deepseek-coder", PreTokenizer::kDeepseekCoder},
    {"deepseek-llm", PreTokenizer::kDeepseekLlm},
    {"deepseek-v3", PreTokenizer::kDeepseekV3},
    {"hunyuan-dense", PreTokenizer::kDeepseekV3},
    {"joyai-llm", PreTokenizer::kDeepseekV3},
    {"falcon", PreTokenizer::kFalcon},
    {"poro-chat", PreTokenizer::kPoro},
    {"bloom", PreTokenizer::kPoro},
    {"gpt3-finnish", PreTokenizer::kPoro},
    {"viking", PreTokenizer::kViking},
    {"tekken", PreTokenizer::kTekken},
    {"gpt-4o", PreTokenizer::kGpt4o},
    {"llama4", PreTokenizer::kGpt4o},
    {"kanana2", PreTokenizer::kGpt4o},
    {"talkie", PreTokenizer::kGpt4o},
    {"minimax-m2", PreTokenizer::kGpt4o},
    {"seed-coder", PreTokenizer::kSeedCoder},
    {"minicpm5", PreTokenizer::kMinicpm5},
    {"gemma4", PreTokenizer::kNewlineRuns},
    {"granite-embed-multi-311m", PreTokenizer::kNewlineRuns},
    {"sarvam-moe", PreTokenizer::kNewlineRuns},
    {"laguna", PreTokenizer::kLaguna},
    {"whitespace", PreTokenizer::kWhitespace},
};

// The regex sequences (llama-vocab.cpp's regex_exprs, with tokenizer.json's original
// single-regex forms where llama.cpp rewrote them; see matchers.h for each regex).
constexpr Stage kDefaultStages[] = {m::stage_punct_run_default, m::stage_gpt2, m::stage_numbers,
                                    m::stage_ascii_digit_triple};
constexpr Stage kGpt2Stages[] = {m::stage_gpt2};
constexpr Stage kLlama3Stages[] = {m::stage_llama3};
constexpr Stage kQwen2Stages[] = {m::stage_qwen2};
constexpr Stage kQwen35Stages[] = {m::stage_qwen35};
constexpr Stage kStarcoderStages[] = {m::stage_number, m::stage_gpt2};
constexpr Stage kDeepseekCoderStages[] = {m::stage_cr_or_lf, m::stage_space_letters,
                                          m::stage_space_punct, m::stage_cjk_hangul_run,
                                          m::stage_number};
constexpr Stage kDeepseekLlmStages[] = {m::stage_cr_or_lf,       m::stage_deepseek_letters,
                                        m::stage_deepseek_punct, m::stage_trailing_space,
                                        m::stage_cjk_hangul_run, m::stage_numbers};
constexpr Stage kDeepseekV3Stages[] = {m::stage_numbers_1_3, m::stage_cjk_kana_run,
                                       m::stage_deepseek_v3};
constexpr Stage kFalconStages[] = {m::stage_punct_run_falcon, m::stage_gpt2,
                                   m::stage_ascii_digit_triple};
constexpr Stage kPoroStages[] = {m::stage_poro};
constexpr Stage kVikingStages[] = {m::stage_poro, m::stage_number};
constexpr Stage kTekkenStages[] = {m::stage_tekken};
constexpr Stage kGpt4oStages[] = {m::stage_gpt4o};
constexpr Stage kSeedCoderStages[] = {m::stage_seed_coder};
constexpr Stage kMinicpm5Stages[] = {m::stage_numbers_1_3, m::stage_minicpm5};
constexpr Stage kNewlineRunsStages[] = {m::stage_newline_runs};
constexpr Stage kLagunaStages[] = {m::stage_newline_runs, m::stage_qwen2};
constexpr Stage kWhitespaceStages[] = {m::stage_non_space_run};

std::span<const Stage> stages(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::kDefault:
      return kDefaultStages;
    case PreTokenizer::kGpt2:
      return kGpt2Stages;
    case PreTokenizer::kLlama3:
      return kLlama3Stages;
    case PreTokenizer::kQwen2:
      return kQwen2Stages;
    case PreTokenizer::kQwen35:
      return kQwen35Stages;
    case PreTokenizer::kStarcoder:
      return kStarcoderStages;
    case PreTokenizer::kDeepseekCoder:
      return kDeepseekCoderStages;
    case PreTokenizer::kDeepseekLlm:
      return kDeepseekLlmStages;
    case PreTokenizer::kDeepseekV3:
      return kDeepseekV3Stages;
    case PreTokenizer::kFalcon:
      return kFalconStages;
    case PreTokenizer::kPoro:
      return kPoroStages;
    case PreTokenizer::kViking:
      return kVikingStages;
    case PreTokenizer::kTekken:
      return kTekkenStages;
    case PreTokenizer::kGpt4o:
      return kGpt4oStages;
    case PreTokenizer::kSeedCoder:
      return kSeedCoderStages;
    case PreTokenizer::kMinicpm5:
      return kMinicpm5Stages;
    case PreTokenizer::kNewlineRuns:
      return kNewlineRunsStages;
    case PreTokenizer::kLaguna:
      return kLagunaStages;
    case PreTokenizer::kWhitespace:
      return kWhitespaceStages;
  }
  return kGpt2Stages;  // unreachable for valid enum values
}

struct Scratch {
  CpText text;
  std::vector<Span> a;
  std::vector<Span> b;
};

}  // namespace

std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view gguf_pre) {
  for (const NameEntry& e : kNames) {
    if (e.name == gguf_pre) return e.kind;
  }
  return std::nullopt;
}

std::string_view pre_tokenizer_name(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::kDefault:
      return "default";
    case PreTokenizer::kGpt2:
      return "gpt2";
    case PreTokenizer::kLlama3:
      return "llama3";
    case PreTokenizer::kQwen2:
      return "qwen2";
    case PreTokenizer::kQwen35:
      return "qwen35";
    case PreTokenizer::kStarcoder:
      return "starcoder";
    case PreTokenizer::kDeepseekCoder:
      return "deepseek-coder";
    case PreTokenizer::kDeepseekLlm:
      return "deepseek-llm";
    case PreTokenizer::kDeepseekV3:
      return "deepseek-v3";
    case PreTokenizer::kFalcon:
      return "falcon";
    case PreTokenizer::kPoro:
      return "poro";
    case PreTokenizer::kViking:
      return "viking";
    case PreTokenizer::kTekken:
      return "tekken";
    case PreTokenizer::kGpt4o:
      return "gpt4o";
    case PreTokenizer::kSeedCoder:
      return "seed-coder";
    case PreTokenizer::kMinicpm5:
      return "minicpm5";
    case PreTokenizer::kNewlineRuns:
      return "newline-runs";
    case PreTokenizer::kLaguna:
      return "laguna";
    case PreTokenizer::kWhitespace:
      return "whitespace";
  }
  return "unknown";
}

void pre_tokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& words) {
  words.clear();
  if (text.empty()) return;
  thread_local Scratch scratch;
  CpText& t = scratch.text;
  t.assign(text);

  // Each stage re-splits every piece of the previous one (ping-pong between two buffers).
  std::vector<Span>* in = &scratch.a;
  std::vector<Span>* out = &scratch.b;
  in->assign(1, Span{0, t.size()});
  for (const Stage stage : stages(kind)) {
    out->clear();
    stage(t, *in, *out);
    std::swap(in, out);
  }
  words.reserve(in->size());
  for (const Span s : *in) {
    words.emplace_back(text.data() + t.off[s.begin], t.off[s.end] - t.off[s.begin]);
  }
}

}  // namespace cera::tokenizer
