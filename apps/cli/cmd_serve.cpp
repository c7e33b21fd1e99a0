// `cera serve`: the OpenAI-compatible HTTP server (apps/server) over one engine loop. The socket
// is bound before the model loads, so /health answers 503 "loading" meanwhile and a port clash is
// reported at once. The one decision: SIGINT / SIGTERM are taken by a thread of their own
// (sigwait, with the signals blocked everywhere else), so stopping is ordinary code: cancel every
// request in the loop (blocked handlers wake with their results), then close the HTTP server.
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <thread>

#include "arg_checks.h"
#include "model_options.h"
#include "runtime/chat/chat_template.h"
#include "runtime/embed/embed_service.h"
#include "text_input.h"
#include "server.h"

namespace cera::cli {
namespace {

struct ServeOptions {
  ModelOptions model;
  server::ServerOptions http;
  int parallel = 16;
  double kv_memory_gib = 0;  // 0: --parallel full contexts
  int max_queue = 256;
  int max_body_mib = 8;
  int max_tokens = 0;  // 0: the context
  int http_threads = 0;  // 0: --parallel + --max-queue + 16
  std::string alias;
  bool allow_special = false;
  std::string chat_template_file;  // replaces the file's tokenizer.chat_template
};

inline constexpr int kDefaultServeContext = 4096;

std::string model_id(const ServeOptions& o) {
  if (!o.alias.empty()) return o.alias;
  std::string name = std::filesystem::path(o.model.model).filename().string();
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

// The engine loop every generation goes through, its KV pool sized from the options; null for
// an encoder, which only embeds (and then needs no pool).
struct ServeLoop {
  std::unique_ptr<runtime::EngineLoop> loop;
  int32_t n_ctx = 0;
  int64_t kv_tokens = 0;
  double kv_gib = 0;
};

ServeLoop make_loop(const ServeOptions& o, api::Engine* engine) {
  ServeLoop out;
  if (!engine->model().causal()) return out;
  const int32_t n_ctx_train = engine->model().hparams().n_ctx_train;
  const int32_t n_ctx = o.model.ctx > 0 ? o.model.ctx : std::min(n_ctx_train > 0 ? n_ctx_train : kDefaultServeContext, kDefaultServeContext);
  const runtime::SessionOptions sized{.n_ctx = n_ctx, .n_batch = o.model.batch};
  const double bytes_per_token = static_cast<double>(engine->kv_cache_bytes(sized, /*paged_sliding=*/true)) / n_ctx;
  const int64_t kv_tokens = o.kv_memory_gib > 0 ? static_cast<int64_t>(o.kv_memory_gib * (1ull << 30) / bytes_per_token)
                                                : int64_t{o.parallel} * n_ctx;
  if (kv_tokens < n_ctx) {
    fail("serve", out_of_range(fmt::format("--kv-memory {} GiB holds {} tokens of KV cache, less than one context of {} "
                                           "tokens (-c): give more memory or a smaller -c",
                                           o.kv_memory_gib, kv_tokens, n_ctx)));
  }
  if (kv_tokens > kInt32Max) fail("serve", out_of_range(fmt::format("a KV pool of {} tokens is too large: lower --kv-memory or --parallel", kv_tokens)));
  const double kv_gib = kv_tokens * bytes_per_token / (1ull << 30);
  const uint64_t memory = physical_memory_bytes();
  if (engine->backend().device() == Device::kCpu && memory > 0 && kv_tokens * bytes_per_token > static_cast<double>(memory)) {
    fail("serve", out_of_range(fmt::format("a KV pool of {} tokens ({} requests of {} tokens) needs {:.1f} GiB, more than "
                                           "this machine's {:.1f} GiB: lower --parallel, -c or --kv-memory",
                                           kv_tokens, o.parallel, n_ctx, kv_gib, memory / double(1ull << 30))));
  }
  auto loop = runtime::EngineLoop::create(engine->model(), engine->tokenizer(),
                                          {.n_ctx = n_ctx,
                                           .max_batch_tokens = o.model.batch,
                                           .max_running = o.parallel,
                                           .max_waiting = o.max_queue,
                                           .kv_tokens = static_cast<int32_t>(kv_tokens),
                                           .kv_type = engine->kv_type()});
  if (!loop.ok()) fail("serve", loop.status());
  out.loop = std::move(loop).value();
  out.n_ctx = n_ctx;
  out.kv_tokens = kv_tokens;
  out.kv_gib = kv_gib;
  return out;
}

void serve(ServeOptions o) {
  // Before any thread exists: every thread inherits the mask, so only sigwait sees the signals;
  // a peer closing its socket must not kill the process (writes then just fail).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  o.http.max_body_bytes = static_cast<size_t>(o.max_body_mib) << 20;
  o.http.http_threads = o.http_threads > 0 ? o.http_threads : o.parallel + o.max_queue + 16;
  server::HttpServer http(o.http);
  if (Status st = http.start(); !st.ok()) fail("serve", st);
  fmt::print(stderr, "cera serve: listening on http://{}:{}\n", o.http.host, http.bound_port());

  std::mutex mu;
  std::condition_variable stop_cv;
  bool stop = false, ready = false;
  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::unique_lock lock(mu);
    if (!ready) {  // loading: nothing to drain
      fmt::print(stderr, "cera serve: {} while loading the model; stopped\n", sig == SIGINT ? "interrupted" : "terminated");
      std::_Exit(0);
    }
    stop = true;
    stop_cv.notify_all();
  });

  std::unique_ptr<api::Engine> engine = load_engine_or_exit("serve", o.model);
  ServeLoop sl = make_loop(o, engine.get());
  runtime::embed::EmbedService embeddings(engine->model(), engine->tokenizer(), sl.loop.get(),
                                          {.max_batch_tokens = o.model.batch, .kv_type = engine->kv_type()});
  const int32_t n_ctx = sl.n_ctx;

  server::ServedModel served{.engine = engine.get(),
                             .loop = sl.loop.get(),
                             .embeddings = &embeddings,
                             .special = runtime::chat::special_token_texts(engine->tokenizer()),
                             .id = model_id(o),
                             .created = std::chrono::duration_cast<std::chrono::seconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count(),
                             .n_ctx = n_ctx,
                             .max_tokens = o.max_tokens > 0 ? std::min(o.max_tokens, n_ctx) : n_ctx,
                             .allow_special = o.allow_special,
                             .vocab = runtime::grammar::VocabIndex::from_tokenizer(engine->tokenizer())};
  if (!o.chat_template_file.empty()) {
    auto source = read_text_input("serve", o.chat_template_file, kDefaultMaxInputMiB);
    if (!source.ok()) fail("serve", source.status());
    auto tmpl = runtime::chat::ChatTemplate::parse(*source);
    if (!tmpl.ok()) fail("serve", tmpl.status().with_context("--chat-template-file " + o.chat_template_file));
    served.chat_template = std::move(tmpl).value();
  } else if (auto tmpl = runtime::chat::chat_template_from_gguf(engine->file()); tmpl.ok()) {
    served.chat_template = std::move(tmpl).value();
  } else {
    served.chat_template_error = tmpl.status().message();
    fmt::print(stderr, "cera serve: warning: no chat template ({}): /v1/chat/completions refuses requests\n",
               served.chat_template_error);
  }
  {
    std::lock_guard lock(mu);
    http.set_model(&served);
    ready = true;
  }
  if (sl.loop) {
    fmt::print(stderr,
               "cera serve: ready: {} on {}, {} requests at once of up to {} tokens, KV pool {} tokens ({:.2f} GiB), "
               "queue {}\n",
               served.id, engine->device_name(), o.parallel, n_ctx, sl.kv_tokens, sl.kv_gib, o.max_queue);
  } else {
    fmt::print(stderr, "cera serve: ready: {} on {}, an encoder: POST /v1/embeddings only, texts of up to {} tokens\n",
               served.id, engine->device_name(), o.model.batch);
  }

  {
    std::unique_lock lock(mu);
    stop_cv.wait(lock, [&] { return stop; });
  }
  fmt::print(stderr, "cera serve: stopping\n");
  if (sl.loop) sl.loop->shutdown(runtime::ShutdownMode::kCancel);
  http.stop();
  signals.join();
}

}  // namespace

void register_serve(CLI::App& app) {
  auto opts = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "an OpenAI-compatible HTTP server with a web chat page");
  add_model_options(cmd, opts->model);
  cmd->get_option("-c")->description(fmt::format("tokens per request, prompt and reply (0: the model's training "
                                                 "context, at most {})",
                                                 kDefaultServeContext));
  cmd->add_option("--host", opts->http.host, "address to listen on (127.0.0.1: this machine only)");
  cmd->add_option("--port", opts->http.port, "port to listen on (0: any free port)")->check(int_range(0, 65535));
  cmd->add_option("--api-key", opts->http.api_key, "require 'Authorization: Bearer KEY' on every route but /health and the page");
  cmd->add_option("--cors-origin", opts->http.cors_origin, "let browser pages from this origin call the API ('*': any); CORS is off without it");
  cmd->add_option("--parallel", opts->parallel, "requests generated at once (the engine loop's running set)")
      ->check(int_range(1, 4096));
  cmd->add_option("--kv-memory", opts->kv_memory_gib, "GiB of KV cache shared by all requests (0: --parallel full contexts)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--max-queue", opts->max_queue, "requests that may wait for a place; more get 429 with Retry-After")
      ->check(int_range(1, 1 << 20));
  cmd->add_option("--max-body-mb", opts->max_body_mib, "largest request body in MiB; larger ones get 413")
      ->check(int_range(1, 4096));
  cmd->add_option("--max-json-depth", opts->http.max_json_depth, "deepest JSON nesting a body may have")
      ->check(int_range(2, 10000));
  cmd->add_option("--max-tokens", opts->max_tokens, "most tokens one request may generate (0: the context)")
      ->check(int_range(0, kInt32Max));
  cmd->add_option("--timeout", opts->http.idle_timeout_seconds, "seconds an idle or silent connection is kept")
      ->check(int_range(1, 86400));
  cmd->add_option("--http-threads", opts->http_threads, "connections served at once (0: --parallel + --max-queue + 16)")
      ->check(int_range(0, 65536));
  cmd->add_option("--alias", opts->alias, "the model's name in the API (default: the file name without .gguf)");
  cmd->add_flag("--allow-special", opts->allow_special,
                "control-token texts inside messages become control tokens (off: they stay text, so a message "
                "cannot forge another role's turn)");
  cmd->add_option("--chat-template-file", opts->chat_template_file,
                  "a Jinja chat template to use instead of the model file's (tokenizer.chat_template)");
  cmd->callback([opts] { serve(*opts); });
}

}  // namespace cera::cli
