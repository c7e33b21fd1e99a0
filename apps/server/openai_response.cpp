#include "openai_response.h"

#include <atomic>
#include <chrono>
#include <random>

#include <fmt/format.h>

namespace cera::server {
namespace {

Json token_bytes(std::string_view piece) {
  Json bytes = Json::array();
  for (const unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

const char* object_name(const CompletionJob& job, bool chunk) {
  if (job.endpoint == Endpoint::kChat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

}  // namespace

ResponseId new_response_id(Endpoint endpoint, const ServedModel& model) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t boot = std::random_device{}();
  const uint64_t n = counter.fetch_add(1);
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return {.id = fmt::format("{}-{:08x}{:08x}", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl",
                            static_cast<uint32_t>(boot), static_cast<uint32_t>(n)),
          .created = now,
          .model = model.id};
}

Json finish_reason_json(runtime::FinishReason reason, bool made_tool_calls) {
  switch (reason) {
    case runtime::FinishReason::kEndOfGeneration:
    case runtime::FinishReason::kStopString: return made_tool_calls ? "tool_calls" : "stop";
    case runtime::FinishReason::kMaxTokens:
    case runtime::FinishReason::kContextFull: return "length";
    default: return nullptr;
  }
}

std::vector<Json> chat_deltas(const std::vector<runtime::chat::OutputDelta>& deltas) {
  using Kind = runtime::chat::OutputDelta::Kind;
  std::vector<Json> out;
  Kind last = Kind::kToolCall;
  for (const runtime::chat::OutputDelta& d : deltas) {
    if (d.kind == Kind::kToolCall) {
      out.push_back({{"tool_calls", Json::array({{{"index", d.tool_index},
                                                   {"id", d.id},
                                                   {"type", "function"},
                                                   {"function", {{"name", d.name}, {"arguments", d.text}}}}})}});
    } else {
      const char* key = d.kind == Kind::kContent ? "content" : "reasoning_content";
      if (!out.empty() && last == d.kind) {
        out.back()[key] = out.back()[key].get<std::string>() + d.text;
      } else {
        out.push_back({{key, d.text}});
      }
    }
    last = d.kind;
  }
  return out;
}

Json usage_json(int32_t n_prompt, int64_t n_completion, int32_t n_cached) {
  return {{"prompt_tokens", n_prompt},
          {"completion_tokens", n_completion},
          {"total_tokens", n_prompt + n_completion},
          {"prompt_tokens_details", {{"cached_tokens", n_cached}}}};
}

Json chat_logprobs(const std::vector<runtime::TokenLogprobs>& logprobs, const tokenizer::Tokenizer& tokenizer) {
  Json content = Json::array();
  for (const runtime::TokenLogprobs& lp : logprobs) {
    const std::string_view piece = tokenizer.token_piece(lp.chosen.token);
    Json top = Json::array();
    for (const runtime::TokenLogprob& alt : lp.top) {
      const std::string_view alt_piece = tokenizer.token_piece(alt.token);
      top.push_back({{"token", std::string(alt_piece)}, {"logprob", alt.logprob}, {"bytes", token_bytes(alt_piece)}});
    }
    content.push_back({{"token", std::string(piece)},
                       {"logprob", lp.chosen.logprob},
                       {"bytes", token_bytes(piece)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

Json completion_logprobs(const std::vector<runtime::TokenLogprobs>& logprobs, const tokenizer::Tokenizer& tokenizer,
                         size_t text_offset) {
  Json tokens = Json::array(), values = Json::array(), tops = Json::array(), offsets = Json::array();
  for (const runtime::TokenLogprobs& lp : logprobs) {
    const std::string_view piece = tokenizer.token_piece(lp.chosen.token);
    tokens.push_back(std::string(piece));
    values.push_back(lp.chosen.logprob);
    Json top = Json::object();
    for (const runtime::TokenLogprob& alt : lp.top) top[std::string(tokenizer.token_piece(alt.token))] = alt.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += piece.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(values)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

Json full_response(const CompletionJob& job, const ResponseId& id, const std::vector<runtime::RequestResult>& results,
                   const tokenizer::Tokenizer& tokenizer) {
  Json choices = Json::array();
  int64_t n_completion = 0;
  int32_t n_cached = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const runtime::RequestResult& r = results[i];
    n_completion += static_cast<int64_t>(r.tokens.size());
    n_cached = std::max(n_cached, r.n_cached_tokens);
    Json logprobs = nullptr;
    if (job.params.logprobs)
      logprobs = job.endpoint == Endpoint::kChat ? chat_logprobs(r.logprobs, tokenizer)
                                                 : completion_logprobs(r.logprobs, tokenizer, 0);
    if (job.endpoint == Endpoint::kChat && job.parses_output()) {
      runtime::chat::OutputParserOptions options = job.output;
      options.id_seed += i;  // as the streamed choice i
      const runtime::chat::ParsedOutput parsed = runtime::chat::parse_output(options, r.text);
      const bool calls = !parsed.tool_calls.empty();
      Json message = {{"role", "assistant"},
                      {"content", parsed.content.empty() && calls ? Json(nullptr) : Json(parsed.content)}};
      if (!parsed.reasoning.empty()) message["reasoning_content"] = parsed.reasoning;
      if (calls) {
        Json list = Json::array();
        for (const runtime::chat::ParsedToolCall& c : parsed.tool_calls) {
          list.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        }
        message["tool_calls"] = std::move(list);
      }
      choices.push_back({{"index", i},
                         {"message", std::move(message)},
                         {"logprobs", std::move(logprobs)},
                         {"finish_reason", finish_reason_json(r.reason, calls)}});
    } else if (job.endpoint == Endpoint::kChat) {
      choices.push_back({{"index", i},
                         {"message", {{"role", "assistant"}, {"content", r.text}}},
                         {"logprobs", std::move(logprobs)},
                         {"finish_reason", finish_reason_json(r.reason)}});
    } else {
      choices.push_back({{"index", i},
                         {"text", r.text},
                         {"logprobs", std::move(logprobs)},
                         {"finish_reason", finish_reason_json(r.reason)}});
    }
  }
  return {{"id", id.id},
          {"object", object_name(job, false)},
          {"created", id.created},
          {"model", id.model},
          {"choices", std::move(choices)},
          {"usage", usage_json(static_cast<int32_t>(job.params.prompt.size()), n_completion, n_cached)}};
}

Json stream_chunk(const CompletionJob& job, const ResponseId& id, const ChunkContent& c,
                  const tokenizer::Tokenizer& tokenizer) {
  Json logprobs = nullptr;
  if (c.logprobs != nullptr && !c.logprobs->empty())
    logprobs = job.endpoint == Endpoint::kChat ? chat_logprobs(*c.logprobs, tokenizer)
                                               : completion_logprobs(*c.logprobs, tokenizer, c.text_offset);
  const Json finish = c.result != nullptr ? finish_reason_json(c.result->reason, c.made_tool_calls) : Json(nullptr);
  Json choice;
  if (job.endpoint == Endpoint::kChat) {
    Json delta = Json::object();
    if (c.first) delta["role"] = "assistant";
    if (c.delta != nullptr) {
      for (const auto& [key, value] : c.delta->items()) delta[key] = value;
    } else if (c.first || !c.text.empty()) {
      delta["content"] = c.text;
    }
    choice = {{"index", c.index}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish}};
  } else {
    choice = {{"index", c.index}, {"text", c.text}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish}};
  }
  Json chunk = {{"id", id.id},
                {"object", object_name(job, true)},
                {"created", id.created},
                {"model", id.model},
                {"choices", Json::array({std::move(choice)})}};
  if (job.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

Json usage_chunk(const CompletionJob& job, const ResponseId& id, int64_t n_completion, int32_t n_cached) {
  return {{"id", id.id},
          {"object", object_name(job, true)},
          {"created", id.created},
          {"model", id.model},
          {"choices", Json::array()},
          {"usage", usage_json(static_cast<int32_t>(job.params.prompt.size()), n_completion, n_cached)}};
}

}  // namespace cera::server
