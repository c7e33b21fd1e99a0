// The facade's Engine: load, info, generation (through the engine loop), chat, tokens.
#include <algorithm>
#include <filesystem>

#include "api/facade_convert.h"
#include "api/facade_impl.h"
#include "api/facade_stream.h"
#include "runtime/chat/value.h"

namespace cera {
namespace {

using api::to_error;
using api::to_pooling;

// EngineConfig::n_ctx's default cap: a model's training context is often 32k-128k tokens, whose
// K/V for every parallel request would take gigabytes before anyone asked for that much.
constexpr int32_t kDefaultCtxCap = 4096;
constexpr int32_t kMaxParallel = 1024;
constexpr int32_t kMaxBatchTokens = 65536;

Error invalid(std::string message) { return Error{.kind = ErrorKind::kInvalidArgument, .message = std::move(message)}; }

std::optional<Error> check_config(const EngineConfig& c) {
  if (c.model_path.empty()) return invalid("model_path is empty: name a GGUF file");
  if (c.n_ctx < 0) return invalid("n_ctx " + std::to_string(c.n_ctx) + " must be 0 (the model's context) or more");
  if (c.max_parallel < 1 || c.max_parallel > kMaxParallel) {
    return invalid("max_parallel " + std::to_string(c.max_parallel) + " must be from 1 to " + std::to_string(kMaxParallel));
  }
  if (c.max_batch_tokens < 1 || c.max_batch_tokens > kMaxBatchTokens) {
    return invalid("max_batch_tokens " + std::to_string(c.max_batch_tokens) + " must be from 1 to " +
                   std::to_string(kMaxBatchTokens));
  }
  if (c.tensor_parallel < 1 || c.tensor_parallel > api::kMaxTensorParallel) {
    return invalid("tensor_parallel " + std::to_string(c.tensor_parallel) + " must be from 1 to " +
                   std::to_string(api::kMaxTensorParallel));
  }
  return std::nullopt;
}

api::DeviceChoice to_device(DeviceChoice d) {
  switch (d) {
    case DeviceChoice::kCpu: return api::DeviceChoice::kCpu;
    case DeviceChoice::kCuda: return api::DeviceChoice::kCuda;
    case DeviceChoice::kAuto: break;
  }
  return api::DeviceChoice::kAuto;
}

api::KvTypeChoice to_kv_type(KvType k) {
  switch (k) {
    case KvType::kF32: return api::KvTypeChoice::kF32;
    case KvType::kF16: return api::KvTypeChoice::kF16;
    case KvType::kAuto: break;
  }
  return api::KvTypeChoice::kAuto;
}

std::string metadata_string(const format::GgufFile& file, std::string_view key) {
  const format::GgufValue* v = file.find(key);
  return v != nullptr && v->string() != nullptr ? *v->string() : std::string();
}

}  // namespace

std::shared_ptr<const runtime::grammar::VocabIndex> Engine::Impl::vocab() {
  std::call_once(vocab_once_, [&] { vocab_ = runtime::grammar::VocabIndex::from_tokenizer(engine->tokenizer()); });
  return vocab_;
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() {
  if (impl_ && impl_->loop) impl_->loop->shutdown(runtime::ShutdownMode::kCancel);
}

Expected<std::unique_ptr<Engine>> Engine::load(const EngineConfig& config) {
  if (auto e = check_config(config)) return *e;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(config.model_path, ec)) {
    return Error{.kind = ErrorKind::kNotFound,
                 .message = "model file '" + config.model_path + "' " +
                            (std::filesystem::exists(config.model_path, ec) ? "is not a regular file" : "does not exist")};
  }
  auto impl = std::make_unique<Impl>();
  auto engine = api::Engine::load({.model_path = config.model_path,
                                   .device = to_device(config.device),
                                   .n_threads = config.n_threads,
                                   .max_batch_tokens = config.max_batch_tokens,
                                   .kv_type = to_kv_type(config.kv_type),
                                   .progress = config.on_load_progress,
                                   .tensor_parallel = config.tensor_parallel});
  if (!engine.ok()) return to_error(engine);
  impl->engine = std::move(engine).value();
  impl->max_batch_tokens = config.max_batch_tokens;
  model::Model& model = impl->engine->model();
  const model::HParams& hp = model.hparams();
  ModelInfo& info = impl->info;
  const format::GgufFile& file = impl->engine->file();
  info.architecture = metadata_string(file, "general.architecture");
  info.name = metadata_string(file, "general.name");
  if (info.name.empty()) info.name = std::filesystem::path(config.model_path).stem().string();
  info.device = impl->engine->device_name();
  info.n_vocab = hp.n_vocab;
  info.n_embd = hp.n_embd;
  info.n_ctx_train = hp.n_ctx_train;
  info.generates = model.causal();
  if (info.generates) {
    int32_t n_ctx = config.n_ctx;
    if (n_ctx == 0) n_ctx = hp.n_ctx_train > 0 ? std::min(hp.n_ctx_train, kDefaultCtxCap) : kDefaultCtxCap;
    auto loop = runtime::EngineLoop::create(model, impl->engine->tokenizer(),
                                            {.n_ctx = n_ctx,
                                             .max_batch_tokens = config.max_batch_tokens,
                                             .max_running = config.max_parallel,
                                             .kv_type = impl->engine->kv_type()});
    if (!loop.ok()) return to_error(loop.status().with_context(config.model_path));
    impl->loop = std::move(loop).value();
    info.n_ctx = impl->loop->n_ctx();
    auto tmpl = runtime::chat::chat_template_from_gguf(file);
    if (tmpl.ok()) {
      impl->chat_template.emplace(std::move(tmpl).value());
    } else {
      impl->chat_template_error = tmpl.status().message();
    }
    impl->special = runtime::chat::special_token_texts(impl->engine->tokenizer());
  }
  info.has_chat_template = impl->chat_template.has_value();
  impl->embeddings = std::make_unique<runtime::embed::EmbedService>(
      model, impl->engine->tokenizer(), impl->loop.get(),
      runtime::embed::EmbedderOptions{.max_batch_tokens = config.max_batch_tokens, .kv_type = impl->engine->kv_type()});
  info.default_pooling = to_pooling(impl->embeddings->default_pooling());
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->info; }

namespace {

// Submits `prompt` with the options; the stream's state is attached to its sinks.
Expected<std::unique_ptr<Stream::State>> submit(Engine::Impl& impl, std::vector<int32_t> prompt,
                                                const GenerateOptions& options) {
  if (!impl.loop) {
    return Error{.kind = ErrorKind::kUnsupported,
                 .message = "the model '" + impl.info.name + "' (" + impl.info.architecture +
                            ") is an encoder: it computes embeddings (embed()) and cannot generate text"};
  }
  if (const Status st = api::check_generate_options(options); !st.ok()) return to_error(st);
  if (prompt.empty()) return invalid("the prompt is empty (no tokens): give some text");
  runtime::RequestParams params;
  params.prompt = std::move(prompt);
  params.sampling = api::to_sampling(options.sampling);
  params.max_tokens = options.max_tokens;
  params.stop = options.stop;
  if (options.constraint.kind != ConstraintKind::kNone) {
    auto tables = api::prepare_constraint(options.constraint, impl.vocab());
    if (!tables.ok()) return to_error(tables);
    params.grammar.tables = std::move(tables).value();
  }
  auto state = std::make_unique<Stream::State>();
  state->attach(params, options.on_text);
  auto handle = impl.loop->submit(std::move(params));
  if (!handle.ok()) return to_error(handle);
  state->handle = std::move(handle).value();
  return state;
}

// The chat template's rendering of `messages` (a JSON object of extra variables in kwargs_json).
Expected<runtime::chat::RenderedPrompt> render(const Engine::Impl& impl, const std::vector<ChatMessage>& messages,
                                               bool add_generation_prompt, std::string_view kwargs_json) {
  namespace chat = runtime::chat;
  if (!impl.chat_template) {
    return Error{.kind = ErrorKind::kUnsupported,
                 .message = "the model '" + impl.info.name + "' has no chat template" +
                            (impl.chat_template_error.empty() ? "" : " (" + impl.chat_template_error + ")") +
                            ": use generate() with a prompt"};
  }
  if (messages.empty()) return invalid("messages is empty: give at least one message");
  chat::Array list;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role.empty()) return invalid("message " + std::to_string(i) + " has no role (system, user, assistant or tool)");
    list.push_back(chat::make_message(role, messages[i].content));
  }
  chat::ChatContext ctx;
  ctx.messages = chat::Value(std::move(list));
  ctx.add_generation_prompt = add_generation_prompt;
  ctx.bos_token = impl.special.bos;
  ctx.eos_token = impl.special.eos;
  if (!kwargs_json.empty()) {
    auto extra = chat::parse_json(kwargs_json);
    if (!extra.ok()) return invalid("template_kwargs is not JSON: " + extra.status().message());
    if (!extra->is_object()) return invalid("template_kwargs must be a JSON object ({\"enable_thinking\": false})");
    ctx.extra = extra->as_object();
  }
  auto prompt = impl.chat_template->render_prompt(ctx, impl.engine->tokenizer());
  if (!prompt.ok()) return invalid("the model's chat template refused the messages: " + prompt.status().message());
  return std::move(prompt).value();
}

}  // namespace

Expected<std::unique_ptr<Stream>> Engine::start(std::string_view prompt, const GenerateOptions& options) {
  std::vector<int32_t> tokens = impl_->engine->tokenizer().encode(
      prompt, {.add_special = options.add_special, .parse_special = options.parse_special});
  auto state = submit(*impl_, std::move(tokens), options);
  if (!state) return state.error();
  return std::unique_ptr<Stream>(new Stream(std::move(state).value()));
}

Expected<Completion> Engine::generate(std::string_view prompt, const GenerateOptions& options) {
  auto stream = start(prompt, options);
  if (!stream) return stream.error();
  return (*stream)->result();
}

Expected<std::unique_ptr<Stream>> Engine::start_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  auto prompt = render(*impl_, messages, /*add_generation_prompt=*/true, options.template_kwargs_json);
  if (!prompt) return prompt.error();
  // As `cera chat` and the server: control tokens come from the template's text only, and no BOS
  // is added (a template that wants one writes bos_token itself).
  std::vector<int32_t> tokens =
      impl_->engine->tokenizer().encode(prompt->text, {.parse_special = true, .plain_ranges = prompt->plain});
  auto state = submit(*impl_, std::move(tokens), options);
  if (!state) return state.error();
  return std::unique_ptr<Stream>(new Stream(std::move(state).value()));
}

Expected<Completion> Engine::chat(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  auto stream = start_chat(messages, options);
  if (!stream) return stream.error();
  return (*stream)->result();
}

Expected<std::string> Engine::render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                          std::string_view template_kwargs_json) const {
  auto prompt = render(*impl_, messages, add_generation_prompt, template_kwargs_json);
  if (!prompt) return prompt.error();
  return std::move(prompt->text);
}

Expected<std::vector<int32_t>> Engine::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  return impl_->engine->tokenizer().encode(text, {.add_special = add_special, .parse_special = parse_special});
}

Expected<std::string> Engine::detokenize(const std::vector<int32_t>& tokens, bool render_special) const {
  const int32_t n_vocab = impl_->engine->tokenizer().n_vocab();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) {
      return Error{.kind = ErrorKind::kOutOfRange,
                   .message = "token " + std::to_string(i) + " is id " + std::to_string(tokens[i]) +
                              ", outside the vocabulary 0.." + std::to_string(n_vocab - 1)};
    }
  }
  return impl_->engine->tokenizer().decode(tokens, {.render_special = render_special});
}

}  // namespace cera
