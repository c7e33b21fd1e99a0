// The C ABI (include/cera/cera.h) over the C++ facade. Every entry point catches what the C++
// side may throw (only std::bad_alloc by the facade's contract, anything else defensively), so no
// exception crosses into C; failures set this thread's last error and return its status.
#include "cera/cera.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "cera/engine.h"

struct cera_engine {
  std::unique_ptr<cera::Engine> engine;
};

namespace {

thread_local std::string t_last_error;

cera_status fail(cera_status status, std::string message) {
  t_last_error = std::move(message);
  return status;
}
cera_status fail(const cera::Error& e) { return fail(static_cast<cera_status>(e.kind), e.message); }
cera_status succeed() {
  t_last_error.clear();
  return CERA_OK;
}

// Runs body (which returns a cera_status), turning exceptions into statuses.
template <class F>
cera_status guarded(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(CERA_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(CERA_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(CERA_INTERNAL, "internal error: an unknown exception");
  }
}

// A malloc'ed NUL-terminated copy (the C side frees it with cera_string_free / cera_result_free).
char* c_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

}  // namespace

// The callback's link to its request: the C callback may cancel (return false) before start()
// has returned the stream, and must never run once cera_request_free has returned.
struct CallbackLink {
  std::mutex mu;
  cera::Stream* stream = nullptr;  // guarded by mu; null before start() returns and after free
  bool cancel_pending = false;     // the callback said stop before the stream existed
  bool freed = false;              // cera_request_free ran: call nothing more
  cera_text_callback callback = nullptr;
  void* user_data = nullptr;
};

struct cera_request {
  std::unique_ptr<cera::Stream> stream;
  std::shared_ptr<CallbackLink> link;
};

namespace {

cera_status convert_options(const cera_generate_options* in, cera::GenerateOptions& out) {
  const cera_generate_options o = in != nullptr ? *in : cera_generate_options_default();
  out.max_tokens = o.max_tokens;
  out.sampling.temperature = o.temperature;
  out.sampling.top_k = o.top_k;
  out.sampling.top_p = o.top_p;
  out.sampling.min_p = o.min_p;
  out.sampling.repeat_penalty = o.repeat_penalty;
  if (o.has_seed) out.sampling.seed = o.seed;
  if (o.n_stop > 0 && o.stop == nullptr) {
    return fail(CERA_INVALID_ARGUMENT, "options.stop is NULL but options.n_stop is " + std::to_string(o.n_stop));
  }
  for (size_t i = 0; i < o.n_stop; ++i) {
    if (o.stop[i] == nullptr) return fail(CERA_INVALID_ARGUMENT, "options.stop[" + std::to_string(i) + "] is NULL");
    out.stop.emplace_back(o.stop[i]);
  }
  switch (o.constraint) {
    case CERA_CONSTRAINT_NONE: break;
    case CERA_CONSTRAINT_GBNF: out.constraint.kind = cera::ConstraintKind::kGbnf; break;
    case CERA_CONSTRAINT_JSON_SCHEMA: out.constraint.kind = cera::ConstraintKind::kJsonSchema; break;
    case CERA_CONSTRAINT_JSON_OBJECT: out.constraint.kind = cera::ConstraintKind::kJsonObject; break;
    default:
      return fail(CERA_INVALID_ARGUMENT, "options.constraint " + std::to_string(static_cast<int>(o.constraint)) +
                                             " is not a cera_constraint_kind (0..3)");
  }
  if (out.constraint.kind == cera::ConstraintKind::kGbnf || out.constraint.kind == cera::ConstraintKind::kJsonSchema) {
    if (o.constraint_source == nullptr) {
      return fail(CERA_INVALID_ARGUMENT, "options.constraint_source is NULL: a grammar or schema needs its text");
    }
    out.constraint.source = o.constraint_source;
  }
  return CERA_OK;
}

cera_status convert_messages(const cera_chat_message* messages, size_t n, std::vector<cera::ChatMessage>& out) {
  if (n > 0 && messages == nullptr) return fail(CERA_INVALID_ARGUMENT, "messages is NULL but n_messages is " + std::to_string(n));
  for (size_t i = 0; i < n; ++i) {
    if (messages[i].role == nullptr || messages[i].content == nullptr) {
      return fail(CERA_INVALID_ARGUMENT, "messages[" + std::to_string(i) + "] has a NULL role or content");
    }
    out.push_back({messages[i].role, messages[i].content});
  }
  return CERA_OK;
}

// Starts a generation (start(options) -> stream) with the C callback wired to it.
template <class Start>
cera_status start_request(cera_text_callback on_text, void* user_data, cera::GenerateOptions& options, Start&& start,
                          cera_request** out) {
  auto link = std::make_shared<CallbackLink>();
  link->callback = on_text;
  link->user_data = user_data;
  if (on_text != nullptr) {
    options.on_text = [link](std::string_view text) {
      std::lock_guard lock(link->mu);
      if (link->freed || link->callback(text.data(), text.size(), link->user_data)) return;
      if (link->stream != nullptr) {
        link->stream->cancel();
      } else {
        link->cancel_pending = true;
      }
    };
  }
  cera::Expected<std::unique_ptr<cera::Stream>> stream = start(options);
  if (!stream) return fail(stream.error());
  auto request = std::make_unique<cera_request>();
  request->stream = std::move(stream).value();
  request->link = link;
  {
    std::lock_guard lock(link->mu);
    link->stream = request->stream.get();
    if (link->cancel_pending) request->stream->cancel();
  }
  *out = request.release();
  return succeed();
}

cera_status fill_result(cera_request* request, cera_result* out) {
  cera::Expected<cera::Completion> c = request->stream->result();
  if (!c) return fail(c.error());
  out->text = c_string(c->text);
  out->text_length = c->text.size();
  out->finish_reason = static_cast<cera_finish_reason>(c->finish_reason);
  out->n_prompt_tokens = c->n_prompt_tokens;
  out->n_generated_tokens = static_cast<int32_t>(c->tokens.size());
  return succeed();
}

}  // namespace

extern "C" {

const char* cera_last_error(void) { return t_last_error.c_str(); }

const char* cera_status_name(cera_status status) {
  if (status == CERA_OK) return "ok";
  if (status < CERA_INVALID_ARGUMENT || status > CERA_INTERNAL) return "unknown status";
  return cera::error_kind_name(static_cast<cera::ErrorKind>(status));
}

cera_engine_options cera_engine_options_default(void) {
  cera_engine_options o;
  std::memset(&o, 0, sizeof o);
  o.device = CERA_DEVICE_AUTO;
  return o;
}

cera_status cera_engine_load(const char* model_path, const cera_engine_options* options, cera_engine** out) {
  return guarded([&] {
    if (out == nullptr) return fail(CERA_INVALID_ARGUMENT, "out is NULL: pass where the engine goes");
    *out = nullptr;
    if (model_path == nullptr) return fail(CERA_INVALID_ARGUMENT, "model_path is NULL: name a GGUF file");
    const cera_engine_options o = options != nullptr ? *options : cera_engine_options_default();
    cera::EngineConfig config{.model_path = model_path};
    switch (o.device) {
      case CERA_DEVICE_AUTO: config.device = cera::DeviceChoice::kAuto; break;
      case CERA_DEVICE_CPU: config.device = cera::DeviceChoice::kCpu; break;
      case CERA_DEVICE_CUDA: config.device = cera::DeviceChoice::kCuda; break;
      default:
        return fail(CERA_INVALID_ARGUMENT,
                    "options.device " + std::to_string(static_cast<int>(o.device)) + " is not a cera_device (0..2)");
    }
    config.n_ctx = o.n_ctx;
    config.n_threads = o.n_threads;
    if (o.max_parallel != 0) config.max_parallel = o.max_parallel;
    if (o.max_batch_tokens != 0) config.max_batch_tokens = o.max_batch_tokens;
    auto engine = cera::Engine::load(config);
    if (!engine) return fail(engine.error());
    *out = new cera_engine{std::move(engine).value()};
    return succeed();
  });
}

void cera_engine_free(cera_engine* engine) { delete engine; }

cera_status cera_engine_info(const cera_engine* engine, cera_model_info* out) {
  if (engine == nullptr || out == nullptr) return fail(CERA_INVALID_ARGUMENT, "engine or out is NULL");
  const cera::ModelInfo& i = engine->engine->info();
  *out = cera_model_info{.architecture = i.architecture.c_str(),
                         .name = i.name.c_str(),
                         .device = i.device.c_str(),
                         .n_vocab = i.n_vocab,
                         .n_embd = i.n_embd,
                         .n_ctx_train = i.n_ctx_train,
                         .n_ctx = i.n_ctx,
                         .generates = i.generates,
                         .has_chat_template = i.has_chat_template};
  return succeed();
}

cera_generate_options cera_generate_options_default(void) {
  const cera::GenerateOptions d;
  cera_generate_options o;
  std::memset(&o, 0, sizeof o);
  o.max_tokens = d.max_tokens;
  o.temperature = d.sampling.temperature;
  o.top_k = d.sampling.top_k;
  o.top_p = d.sampling.top_p;
  o.min_p = d.sampling.min_p;
  o.repeat_penalty = d.sampling.repeat_penalty;
  o.constraint = CERA_CONSTRAINT_NONE;
  return o;
}

void cera_result_free(cera_result* result) {
  if (result == nullptr) return;
  std::free(result->text);
  result->text = nullptr;
  result->text_length = 0;
}

cera_status cera_generate_start(cera_engine* engine, const char* prompt, const cera_generate_options* options,
                                cera_text_callback on_text, void* user_data, cera_request** out) {
  return guarded([&] {
    if (engine == nullptr || prompt == nullptr || out == nullptr) {
      return fail(CERA_INVALID_ARGUMENT, "engine, prompt or out is NULL");
    }
    *out = nullptr;
    cera::GenerateOptions o;
    if (const cera_status st = convert_options(options, o); st != CERA_OK) return st;
    return start_request(on_text, user_data, o,
                         [&](const cera::GenerateOptions& opts) { return engine->engine->start(prompt, opts); }, out);
  });
}

cera_status cera_chat_start(cera_engine* engine, const cera_chat_message* messages, size_t n_messages,
                            const cera_generate_options* options, cera_text_callback on_text, void* user_data,
                            cera_request** out) {
  return guarded([&] {
    if (engine == nullptr || out == nullptr) return fail(CERA_INVALID_ARGUMENT, "engine or out is NULL");
    *out = nullptr;
    std::vector<cera::ChatMessage> list;
    if (const cera_status st = convert_messages(messages, n_messages, list); st != CERA_OK) return st;
    cera::ChatOptions o;
    if (const cera_status st = convert_options(options, o); st != CERA_OK) return st;
    return start_request(on_text, user_data, o,
                         [&](const cera::GenerateOptions& opts) {
                           cera::ChatOptions chat_options;
                           static_cast<cera::GenerateOptions&>(chat_options) = opts;
                           return engine->engine->start_chat(list, chat_options);
                         },
                         out);
  });
}

void cera_request_cancel(cera_request* request) {
  if (request != nullptr) request->stream->cancel();
}

cera_status cera_request_wait(cera_request* request, cera_result* out) {
  return guarded([&] {
    if (request == nullptr || out == nullptr) return fail(CERA_INVALID_ARGUMENT, "request or out is NULL");
    return fill_result(request, out);
  });
}

void cera_request_free(cera_request* request) {
  if (request == nullptr) return;
  {
    std::lock_guard lock(request->link->mu);  // waits for a callback in progress
    request->link->freed = true;
    request->link->stream = nullptr;
  }
  delete request;  // the stream's destructor cancels an unfinished generation
}

// The blocking forms' end: the started request's result, then the request freed.
static cera_status wait_and_free(cera_status started, cera_request* request, cera_result* out) {
  if (started != CERA_OK) return started;
  const cera_status waited = cera_request_wait(request, out);
  cera_request_free(request);
  return waited;
}

cera_status cera_generate(cera_engine* engine, const char* prompt, const cera_generate_options* options,
                          cera_text_callback on_text, void* user_data, cera_result* out) {
  if (out == nullptr) return fail(CERA_INVALID_ARGUMENT, "out is NULL");
  cera_request* request = nullptr;
  const cera_status started = cera_generate_start(engine, prompt, options, on_text, user_data, &request);
  return wait_and_free(started, request, out);
}

cera_status cera_chat(cera_engine* engine, const cera_chat_message* messages, size_t n_messages,
                      const cera_generate_options* options, cera_text_callback on_text, void* user_data,
                      cera_result* out) {
  if (out == nullptr) return fail(CERA_INVALID_ARGUMENT, "out is NULL");
  cera_request* request = nullptr;
  const cera_status started = cera_chat_start(engine, messages, n_messages, options, on_text, user_data, &request);
  return wait_and_free(started, request, out);
}

cera_status cera_chat_render(const cera_engine* engine, const cera_chat_message* messages, size_t n_messages,
                             bool add_generation_prompt, char** out) {
  return guarded([&] {
    if (engine == nullptr || out == nullptr) return fail(CERA_INVALID_ARGUMENT, "engine or out is NULL");
    *out = nullptr;
    std::vector<cera::ChatMessage> list;
    if (const cera_status st = convert_messages(messages, n_messages, list); st != CERA_OK) return st;
    auto text = engine->engine->render_chat(list, add_generation_prompt);
    if (!text) return fail(text.error());
    *out = c_string(*text);
    return succeed();
  });
}

void cera_string_free(char* text) { std::free(text); }

cera_status cera_tokenize(const cera_engine* engine, const char* text, size_t length, bool add_special,
                          bool parse_special, cera_tokens* out) {
  return guarded([&] {
    if (engine == nullptr || out == nullptr) return fail(CERA_INVALID_ARGUMENT, "engine or out is NULL");
    *out = cera_tokens{nullptr, 0};
    if (text == nullptr && length > 0) return fail(CERA_INVALID_ARGUMENT, "text is NULL but length is " + std::to_string(length));
    auto ids = engine->engine->tokenize(std::string_view(text == nullptr ? "" : text, length), add_special, parse_special);
    if (!ids) return fail(ids.error());
    // malloc(0) may return NULL: keep one slot so that ids is never NULL on success.
    auto* buffer = static_cast<int32_t*>(std::malloc(std::max<size_t>(ids->size(), 1) * sizeof(int32_t)));
    if (buffer == nullptr) throw std::bad_alloc();
    std::copy(ids->begin(), ids->end(), buffer);
    *out = cera_tokens{buffer, ids->size()};
    return succeed();
  });
}

void cera_tokens_free(cera_tokens* tokens) {
  if (tokens == nullptr) return;
  std::free(tokens->ids);
  tokens->ids = nullptr;
  tokens->n = 0;
}

cera_status cera_detokenize(const cera_engine* engine, const int32_t* ids, size_t n, char** out) {
  return guarded([&] {
    if (engine == nullptr || out == nullptr) return fail(CERA_INVALID_ARGUMENT, "engine or out is NULL");
    *out = nullptr;
    if (ids == nullptr && n > 0) return fail(CERA_INVALID_ARGUMENT, "ids is NULL but n is " + std::to_string(n));
    auto text = engine->engine->detokenize(std::vector<int32_t>(ids, ids + n));
    if (!text) return fail(text.error());
    *out = c_string(*text);
    return succeed();
  });
}

cera_status cera_embed(cera_engine* engine, const char* const* texts, size_t n_texts, cera_pooling pooling,
                       bool normalize, cera_embeddings* out) {
  return guarded([&] {
    if (engine == nullptr || out == nullptr) return fail(CERA_INVALID_ARGUMENT, "engine or out is NULL");
    *out = cera_embeddings{nullptr, 0, 0};
    if (n_texts > 0 && texts == nullptr) {
      return fail(CERA_INVALID_ARGUMENT, "texts is NULL but n_texts is " + std::to_string(n_texts));
    }
    cera::EmbedOptions o{.normalize = normalize};
    switch (pooling) {
      case CERA_POOLING_MODEL_DEFAULT: o.pooling = cera::Pooling::kModelDefault; break;
      case CERA_POOLING_MEAN: o.pooling = cera::Pooling::kMean; break;
      case CERA_POOLING_CLS: o.pooling = cera::Pooling::kCls; break;
      case CERA_POOLING_LAST: o.pooling = cera::Pooling::kLast; break;
      case CERA_POOLING_NONE:
        return fail(CERA_UNSUPPORTED, "CERA_POOLING_NONE gives one vector per token, which cera_embed does not return: "
                                      "choose MEAN, CLS, LAST or MODEL_DEFAULT");
      default:
        return fail(CERA_INVALID_ARGUMENT,
                    "pooling " + std::to_string(static_cast<int>(pooling)) + " is not a cera_pooling (0..4)");
    }
    std::vector<std::string> list;
    for (size_t i = 0; i < n_texts; ++i) {
      if (texts[i] == nullptr) return fail(CERA_INVALID_ARGUMENT, "texts[" + std::to_string(i) + "] is NULL");
      list.emplace_back(texts[i]);
    }
    auto vectors = engine->engine->embed(list, o);
    if (!vectors) return fail(vectors.error());
    const size_t n_embd = static_cast<size_t>(engine->engine->info().n_embd);
    auto* values = static_cast<float*>(std::malloc(std::max<size_t>(n_texts * n_embd, 1) * sizeof(float)));
    if (values == nullptr) throw std::bad_alloc();
    for (size_t i = 0; i < vectors->size(); ++i) {
      std::copy((*vectors)[i].values.begin(), (*vectors)[i].values.end(), values + i * n_embd);
    }
    *out = cera_embeddings{values, n_texts, n_embd};
    return succeed();
  });
}

void cera_embeddings_free(cera_embeddings* embeddings) {
  if (embeddings == nullptr) return;
  std::free(embeddings->values);
  embeddings->values = nullptr;
  embeddings->n_texts = 0;
}

}  // extern "C"
