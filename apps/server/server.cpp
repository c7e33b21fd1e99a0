#include "server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>

#include "api_error.h"
#include "web_assets.h"

namespace cera::server {
namespace {

// Constant-time in the key's bytes: the time a wrong key takes must not tell how much of it was
// right (its length may show).
bool same_secret(std::string_view given, std::string_view key) {
  if (given.size() != key.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

bool is_public_path(const std::string& path) {
  if (path == "/health") return true;
  for (const WebAsset& a : web_assets())
    if (path == a.path) return true;
  return false;
}

}  // namespace

void write_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  if (error.retry_after_seconds > 0) res.set_header("Retry-After", std::to_string(error.retry_after_seconds));
  res.set_content(error_body(error), "application/json");
}

HttpServer::HttpServer(ServerOptions options) : options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::set_model(const ServedModel* model) { model_.store(model); }

const ServedModel* HttpServer::model_or_503(httplib::Response& res) const {
  const ServedModel* model = model_.load();
  if (model == nullptr) {
    write_error(res, {.status = 503,
                      .message = "the model is still loading: retry when GET /health says ok",
                      .type = "server_error",
                      .code = "loading",
                      .retry_after_seconds = 1});
  }
  return model;
}

Status HttpServer::start() {
  httplib::Server& s = *http_;
  const int n_threads = std::max(options_.http_threads, 1);
  s.new_task_queue = [n_threads] { return new httplib::ThreadPool(static_cast<size_t>(n_threads)); };
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_read_timeout(options_.idle_timeout_seconds, 0);
  s.set_write_timeout(options_.idle_timeout_seconds, 0);
  // An idle keep-alive connection is kept at most 5 s: httplib's stop() waits for every
  // connection's thread, and an idle one notices only when its keep-alive wait ends.
  s.set_keep_alive_timeout(std::min(options_.idle_timeout_seconds, 5));
  s.set_keep_alive_max_count(1000);  // httplib closes a connection after 5 requests by default
  // Each SSE event is a small write: without TCP_NODELAY, Nagle holds the next one back until the
  // client ACKs the last, and a delayed ACK makes that ~40 ms (measured: TTFT 42.8 ms against the
  // loop's 2.5 ms on a tiny model).
  s.set_tcp_nodelay(true);

  // Before any route: CORS (only when asked for) and the API key.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!options_.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", options_.cors_origin);
      if (options_.cors_origin != "*") res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {  // a preflight: answered here, before the key check (browsers send none)
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        res.set_header("Access-Control-Max-Age", "600");
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (!options_.api_key.empty() && !is_public_path(req.path)) {
      const std::string auth = req.get_header_value("Authorization");
      const std::string_view prefix = "Bearer ";
      const bool ok = auth.size() > prefix.size() && auth.compare(0, prefix.size(), prefix) == 0 &&
                      same_secret(std::string_view(auth).substr(prefix.size()), options_.api_key);
      if (!ok) {
        write_error(res, {.status = 401,
                          .message = auth.empty() ? "no API key: send the header 'Authorization: Bearer KEY' with the "
                                                    "key the server was started with (--api-key)"
                                                  : "the API key is wrong",
                          .type = "authentication_error",
                          .code = "invalid_api_key"});
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Statuses httplib sets itself (no route 404, body too large 413, ...) get OpenAI's shape too.
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    write_error(res, error_for_http_status(res.status, options_.max_body_bytes));
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    write_error(res, {.status = 500, .message = "internal error: " + what, .type = "server_error", .code = "internal_error"});
  });
  s.set_logger([this](const httplib::Request&, const httplib::Response& res) { metrics_.count_http_response(res.status); });

  // Debian's httplib listens with a backlog of 5, compiled into the library: 256 clients that
  // connect at once overflow it and get resets. The listening socket passes through here before
  // its bind; once bound it listens again with the system's maximum (Linux lets a listening socket
  // change its backlog). SO_REUSEADDR only, not httplib's SO_REUSEPORT: a port another server
  // holds must be refused, not shared.
  s.set_socket_options([this](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (listen_fd_ < 0) listen_fd_ = sock;
  });

  install_routes();

  port_ = options_.port == 0 ? s.bind_to_any_port(options_.host) : (s.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ <= 0) {
    return io_error(fmt::format("cannot listen on {}:{} (is the port taken, or the address not this machine's?): "
                                "choose another with --host / --port",
                                options_.host, options_.port));
  }
  if (listen_fd_ < 0 || ::listen(listen_fd_, SOMAXCONN) != 0) {
    return io_error(fmt::format("cannot raise the listen backlog of {}:{} to {}", options_.host, port_, SOMAXCONN));
  }
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return {};
}

void HttpServer::stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpServer::install_routes() {
  httplib::Server& s = *http_;
  for (const WebAsset& a : web_assets()) {
    s.Get(std::string(a.path), [a](const httplib::Request&, httplib::Response& res) {
      res.set_content(a.body.data(), a.body.size(), std::string(a.content_type).c_str());
      res.set_header("Cache-Control", "no-cache");
    });
  }
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = model_.load() != nullptr;
    res.status = ready ? 200 : 503;
    res.set_content(ready ? R"({"status":"ok"})" : R"({"status":"loading"})", "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const ServedModel* model = model_.load();
    res.set_content(metrics_.render(model != nullptr ? model->loop : nullptr), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { models(res); });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { completions(req, res, true); });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { completions(req, res, false); });
  s.Post("/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) { embeddings(req, res); });
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); });
}

}  // namespace cera::server
