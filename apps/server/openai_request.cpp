#include "openai_request.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <mutex>
#include <random>

#include "response_format.h"

namespace cera::server {
namespace {

namespace chat = runtime::chat;

// A message's content: a string, or an array of parts of which only text parts are supported
// (joined with newlines, as vLLM joins them). Errors go to `r`.
std::optional<std::string> message_content(const Json& message, FieldReader& r, const std::string& where) {
  const auto it = message.find("content");
  if (it == message.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    r.fail(bad_request(fmt::format("'{}content' must be a string or an array of content parts, not {}", where,
                                   json_type_name(*it)),
                       where + "content"));
    return std::nullopt;
  }
  std::string text;
  for (size_t j = 0; j < it->size(); ++j) {
    const Json& part = (*it)[j];
    const std::string name = fmt::format("{}content[{}]", where, j);
    if (!part.is_object()) {
      r.fail(bad_request(fmt::format("'{}' must be a content part object, not {}", name, json_type_name(part)), name));
      return std::nullopt;
    }
    FieldReader pr(part, name + ".");
    const std::optional<std::string> type = pr.string("type");
    if (pr.ok() && type != "text") {
      pr.fail("type", type ? fmt::format("'{}.type' is '{}': this server reads text parts only ({{\"type\": "
                                         "\"text\", \"text\": ...}})",
                                         name, *type)
                           : fmt::format("'{}.type' is missing: it must be \"text\"", name));
    }
    const std::optional<std::string> part_text = pr.string("text");
    if (pr.ok() && !part_text) pr.fail("text", fmt::format("'{}.text' is missing", name));
    if (!pr.ok()) {
      r.fail(*pr.error());
      return std::nullopt;
    }
    if (!text.empty()) text += '\n';
    text += *part_text;
  }
  return text;
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t random_seed() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mu);
  return rng();
}

// stop: a string or an array of strings.
void read_stop(FieldReader& r, std::vector<std::string>& stop) {
  const Json* v = r.get("stop");
  if (v == nullptr) return;
  const auto add = [&](const Json& s, const std::string& name) {
    if (!s.is_string()) {
      r.fail("stop", fmt::format("'{}' must be a string, not {}", name, json_type_name(s)));
      return;
    }
    const auto& text = s.get_ref<const std::string&>();
    if (text.empty() || text.size() > kMaxStopBytes) {
      r.fail("stop", fmt::format("'{}' is {} bytes: a stop string must be 1 to {} bytes", name, text.size(), kMaxStopBytes));
      return;
    }
    stop.push_back(text);
  };
  if (v->is_string()) {
    add(*v, "stop");
  } else if (v->is_array()) {
    if (v->size() > static_cast<size_t>(kMaxStopStrings)) {
      r.fail("stop", fmt::format("'stop' has {} strings, more than the {} allowed", v->size(), kMaxStopStrings));
      return;
    }
    for (size_t i = 0; i < v->size(); ++i) add((*v)[i], fmt::format("stop[{}]", i));
  } else {
    r.fail("stop", fmt::format("'stop' must be a string or an array of strings, not {}", json_type_name(*v)));
  }
}

// logit_bias: {"token id": bias in [-100, 100]}.
void read_logit_bias(FieldReader& r, const ServedModel& model, std::map<int32_t, float>& bias) {
  const Json* v = r.get("logit_bias");
  if (v == nullptr) return;
  if (!v->is_object()) {
    r.fail("logit_bias", fmt::format("'logit_bias' must be an object of token id -> bias, not {}", json_type_name(*v)));
    return;
  }
  const int32_t n_vocab = model.tokenizer().n_vocab();
  for (const auto& [key, value] : v->items()) {
    int64_t id = -1;
    const auto res = std::from_chars(key.data(), key.data() + key.size(), id);
    if (res.ec != std::errc() || res.ptr != key.data() + key.size() || id < 0 || id >= n_vocab) {
      r.fail("logit_bias", fmt::format("'logit_bias' key '{}' is not a token id of this model (0 to {})",
                                       key.substr(0, 40), n_vocab - 1));
      return;
    }
    if (!value.is_number() || !std::isfinite(value.get<double>()) || std::fabs(value.get<double>()) > 100) {
      r.fail("logit_bias", fmt::format("'logit_bias' of token {} must be a number from -100 to 100, not {}", id,
                                       value.is_number() ? value.dump() : json_type_name(value)));
      return;
    }
    bias[static_cast<int32_t>(id)] = value.get<float>();
  }
}

// The prompt of /v1/completions: a string, an array of one string, or an array of token ids.
std::vector<int32_t> completion_prompt(FieldReader& r, const ServedModel& model) {
  const Json* v = r.get("prompt");
  if (v == nullptr) {
    r.fail("prompt", "'prompt' is missing: give the text to complete");
    return {};
  }
  const tokenizer::EncodeOptions enc{.add_special = true, .parse_special = true};
  if (v->is_string()) return model.tokenizer().encode(v->get_ref<const std::string&>(), enc);
  if (v->is_array() && v->size() == 1 && (*v)[0].is_string())
    return model.tokenizer().encode((*v)[0].get_ref<const std::string&>(), enc);
  if (v->is_array() && !v->empty() && (*v)[0].is_number()) {
    std::vector<int32_t> ids;
    const int32_t n_vocab = model.tokenizer().n_vocab();
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& t = (*v)[i];
      if (!t.is_number_integer() && !t.is_number_unsigned()) {
        r.fail("prompt", fmt::format("'prompt[{}]' must be a token id (an integer), not {}", i, json_type_name(t)));
        return {};
      }
      const int64_t id = t.is_number_unsigned() && t.get<uint64_t>() > INT64_MAX ? -1 : t.get<int64_t>();
      if (id < 0 || id >= n_vocab) {
        r.fail("prompt", fmt::format("'prompt[{}]' is {}: not a token id of this model (0 to {})", i, t.dump(), n_vocab - 1));
        return {};
      }
      ids.push_back(static_cast<int32_t>(id));
    }
    return ids;
  }
  if (v->is_array() && v->size() > 1) {
    r.fail("prompt", fmt::format("'prompt' holds {} prompts: this server completes one prompt a request (send one "
                                 "request each)",
                                 v->size()));
  } else {
    r.fail("prompt", fmt::format("'prompt' must be a string or an array of token ids, not {}", json_type_name(*v)));
  }
  return {};
}

}  // namespace

std::vector<int32_t> chat_prompt_tokens(const Json& messages, const ServedModel& model, FieldReader& r,
                                        const ChatTools& tools, std::string* prompt_text) {
  if (!messages.is_array() || messages.empty()) {
    r.fail("messages", messages.is_array() ? "'messages' is empty: give at least one message"
                                           : fmt::format("'messages' must be an array of messages, not {}",
                                                         json_type_name(messages)));
    return {};
  }
  if (!model.chat_template) {
    r.fail(bad_request("this model has no chat template (" + model.chat_template_error +
                           "): use /v1/completions with a prompt instead",
                       "messages", "no_chat_template"));
    return {};
  }
  chat::Array rendered_messages;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string where = fmt::format("messages[{}].", i);
    if (!m.is_object()) {
      r.fail(bad_request(fmt::format("'messages[{}]' must be an object, not {}", i, json_type_name(m)),
                         fmt::format("messages[{}]", i)));
      return {};
    }
    FieldReader mr(m, where);
    std::optional<std::string> role = mr.string("role");
    if (mr.ok() && !role) mr.fail("role", fmt::format("'{}role' is missing", where));
    if (mr.ok() && *role != "system" && *role != "developer" && *role != "user" && *role != "assistant" &&
        *role != "tool") {
      mr.fail("role", fmt::format("'{}role' is '{}': it must be system, developer, user, assistant or tool", where,
                                  role->substr(0, 40)));
    }
    if (!mr.ok()) {
      r.fail(*mr.error());
      return {};
    }
    const std::optional<std::string> content = message_content(m, r, where);
    if (!content) return {};
    // OpenAI's developer role is the system role of newer models; templates know "system".
    chat::Value message = chat::make_message(*role == "developer" ? "system" : *role, *content);
    chat::Object& fields = message.as_object();
    if (*role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null() &&
        !(m["tool_calls"].is_array() && m["tool_calls"].empty())) {
      auto calls = template_tool_calls(m["tool_calls"], where + "tool_calls", r);
      if (!calls) return {};
      fields.set("tool_calls", std::move(*calls));
    }
    if (*role == "tool") {
      const std::optional<std::string> call_id = mr.string("tool_call_id");
      const std::optional<std::string> name = mr.string("name");
      if (!mr.ok()) {
        r.fail(*mr.error());
        return {};
      }
      if (call_id) fields.set("tool_call_id", chat::Value(*call_id));
      if (name) fields.set("name", chat::Value(*name));
    }
    rendered_messages.push_back(std::move(message));
  }
  chat::ChatContext ctx;
  ctx.messages = chat::Value(std::move(rendered_messages));
  ctx.add_generation_prompt = true;
  ctx.bos_token = model.special.bos;
  ctx.eos_token = model.special.eos;
  ctx.special_tokens_in_content = model.allow_special;
  ctx.tools = tools.for_template;
  ctx.extra = tools.template_kwargs;
  auto prompt = model.chat_template->render_prompt(ctx, model.tokenizer());
  if (!prompt.ok()) {
    r.fail(bad_request("the model's chat template refused the messages: " + prompt.status().message(), "messages",
                       "chat_template_error"));
    return {};
  }
  if (prompt_text != nullptr) *prompt_text = prompt->text;
  // As `cera chat`: control tokens come from the template's text only; no BOS is added (a
  // template that wants one writes bos_token itself).
  return model.tokenizer().encode(prompt->text, {.parse_special = true, .plain_ranges = prompt->plain});
}

std::variant<CompletionJob, ApiError> read_completion_job(Endpoint endpoint, const Json& body, const ServedModel& model) {
  FieldReader r(body);
  CompletionJob job{.endpoint = endpoint};
  runtime::RequestParams& p = job.params;

  if (const auto name = r.string("model"); name && *name != model.id) {
    return ApiError{.status = 404,
                    .message = fmt::format("the model '{}' does not exist: this server serves '{}' (GET /v1/models)",
                                           name->substr(0, 200), model.id),
                    .param = "model",
                    .code = "model_not_found"};
  }
  // Unsupported OpenAI features are refused rather than ignored: ignoring them would silently
  // change what the client asked for.
  ChatTools tools;
  if (endpoint == Endpoint::kChat) {
    auto read = read_chat_tools(body, model);
    if (auto* e = std::get_if<ApiError>(&read)) return *e;
    tools = std::move(std::get<ChatTools>(read));
  } else if (const Json* t = r.get("tools"); t != nullptr && !(t->is_array() && t->empty())) {
    r.fail(bad_request("'tools' needs /v1/chat/completions (a completion has no template to render them)", "tools"));
  }
  if (endpoint == Endpoint::kCompletion) {
    if (r.boolean("echo").value_or(false)) r.fail(bad_request("'echo' is not supported", "echo", "unsupported"));
    if (r.string("suffix").value_or("").size() > 0) r.fail(bad_request("'suffix' is not supported", "suffix", "unsupported"));
    if (const auto best_of = r.integer("best_of", 1, kMaxChoices); best_of && *best_of > 1)
      r.fail(bad_request("'best_of' above 1 is not supported", "best_of", "unsupported"));
  }

  // The prompt.
  std::string prompt_text;
  if (endpoint == Endpoint::kChat) {
    const Json* messages = r.get("messages");
    if (messages == nullptr) r.fail("messages", "'messages' is missing: give the conversation");
    else p.prompt = chat_prompt_tokens(*messages, model, r, tools, &prompt_text);
  } else {
    p.prompt = completion_prompt(r, model);
  }
  if (!r.ok()) return *r.error();
  if (p.prompt.empty()) return bad_request("the prompt is empty after tokenization: give some text", endpoint == Endpoint::kChat ? "messages" : "prompt");

  // Sampling: OpenAI's defaults (temperature 1, top_p 1, no other cut), not the CLI's.
  runtime::SamplingParams& s = p.sampling;
  s.temperature = static_cast<float>(r.number("temperature", 0, 2).value_or(1.0));
  s.top_p = static_cast<float>(r.number("top_p", 0, 1).value_or(1.0));
  s.top_k = static_cast<int32_t>(r.integer("top_k", -1, model.tokenizer().n_vocab()).value_or(0));
  s.min_p = static_cast<float>(r.number("min_p", 0, 1).value_or(0.0));
  s.repeat_penalty = static_cast<float>(r.number("repeat_penalty", 0.01, 10).value_or(1.0));
  s.presence_penalty = static_cast<float>(r.number("presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = static_cast<float>(r.number("frequency_penalty", -2, 2).value_or(0.0));
  if (const Json* seed = r.get("seed"); seed != nullptr) {
    if (seed->is_number_integer()) s.seed = static_cast<uint64_t>(seed->get<int64_t>());
    else if (seed->is_number_unsigned()) s.seed = seed->get<uint64_t>();
    else r.fail("seed", fmt::format("'seed' must be an integer, not {}", json_type_name(*seed)));
  } else {
    s.seed = random_seed();
  }
  job.n = static_cast<int32_t>(r.integer("n", 1, kMaxChoices).value_or(1));
  read_stop(r, p.stop);
  read_logit_bias(r, model, p.logit_bias);
  p.stop_at_end_of_generation = !r.boolean("ignore_eos").value_or(false);
  if (const auto salt = r.string("cache_salt", 4096)) p.cache_salt = fnv1a(*salt);

  // Log-probabilities: chat has logprobs (bool) + top_logprobs; completions logprobs (int).
  if (endpoint == Endpoint::kChat) {
    p.logprobs = r.boolean("logprobs").value_or(false);
    p.top_logprobs = static_cast<int32_t>(r.integer("top_logprobs", 0, runtime::kMaxTopLogprobs).value_or(0));
    if (r.ok() && p.top_logprobs > 0 && !p.logprobs)
      r.fail("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  } else if (const auto lp = r.integer("logprobs", 0, runtime::kMaxTopLogprobs)) {
    p.logprobs = true;
    p.top_logprobs = static_cast<int32_t>(*lp);
  }

  job.stream = r.boolean("stream").value_or(false);
  if (const Json* so = r.get("stream_options"); so != nullptr) {
    if (!so->is_object()) {
      r.fail("stream_options", fmt::format("'stream_options' must be an object, not {}", json_type_name(*so)));
    } else {
      FieldReader sr(*so, "stream_options.");
      job.include_usage = sr.boolean("include_usage").value_or(false);
      if (!sr.ok()) r.fail(*sr.error());
      if (r.ok() && !job.stream) r.fail("stream_options", "'stream_options' is only allowed with 'stream': true");
    }
  }

  // Lengths: the prompt must leave room for a token; an explicit max_tokens must fit too (never
  // a silent cut), else generation runs to the context's end.
  const int32_t n_prompt = static_cast<int32_t>(p.prompt.size());
  const std::string prompt_field = endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (n_prompt >= model.n_ctx) {
    return bad_request(fmt::format("the prompt is {} tokens, but the context holds {} tokens per request (prompt and "
                                   "completion; the server's --ctx-size): shorten the prompt or start the server "
                                   "with a larger --ctx-size",
                                   n_prompt, model.n_ctx),
                       prompt_field, "context_length_exceeded");
  }
  std::optional<int64_t> max_tokens = r.integer("max_completion_tokens", 0, INT32_MAX);
  const char* max_name = "max_completion_tokens";
  if (!max_tokens) {
    max_tokens = r.integer("max_tokens", 0, INT32_MAX);
    max_name = "max_tokens";
  }
  if (!r.ok()) return *r.error();
  if (max_tokens) {
    if (*max_tokens > model.max_tokens) {
      return bad_request(fmt::format("'{}' is {}, more than the {} tokens this server generates for one request "
                                     "(its --max-tokens)",
                                     max_name, *max_tokens, model.max_tokens),
                         max_name);
    }
    if (n_prompt + *max_tokens > model.n_ctx) {
      return bad_request(fmt::format("the prompt is {} tokens and '{}' asks for {} more, {} in all, but the context "
                                     "holds {} tokens per request (the server's --ctx-size): shorten the prompt, ask "
                                     "for fewer tokens or start the server with a larger --ctx-size",
                                     n_prompt, max_name, *max_tokens, n_prompt + *max_tokens, model.n_ctx),
                         max_name, "context_length_exceeded");
    }
    p.max_tokens = static_cast<int32_t>(*max_tokens);
  } else {
    p.max_tokens = std::min(model.n_ctx - n_prompt, model.max_tokens);
  }
  // Last of the checks: compiling a schema's grammar is the costliest.
  auto format = read_response_format(body, model.vocab);
  if (auto* e = std::get_if<ApiError>(&format)) return *e;
  p.grammar.tables = std::get<std::shared_ptr<const runtime::grammar::TokenTables>>(std::move(format));
  if (endpoint == Endpoint::kChat) {
    job.output.id_seed = s.seed;
    if (auto e = prepare_tool_output(tools, model, prompt_text, p, job.output)) return *e;
  }
  return job;
}

}  // namespace cera::server
