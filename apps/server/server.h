// HttpServer: cera's OpenAI-compatible HTTP front end over one engine loop. Built on
// cpp-httplib (Debian's libcpp-httplib-dev), chosen over Boost.Beast because the server needs
// nothing Beast adds: a thread per connection from a bounded pool suits a server whose work is
// the engine loop's, and httplib brings what the limits need (body size -> 413, read / write /
// keep-alive timeouts), chunked responses for SSE and a pre-routing hook for auth and CORS, in a
// fraction of the code an asio server takes. The engine loop is never blocked by a socket: its
// sinks only fill a queue per request (CompletionRun) that the connection's thread drains.
// The server listens before the model has loaded (/health says 503 "loading" until set_model).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "metrics.h"
#include "served_model.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace cera::server {

struct ApiError;
// The refusal as the response: status, Retry-After when it has one, {"error": ...} body.
void write_error(httplib::Response& res, const ApiError& error);

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless the operator says otherwise
  int port = 8080;                 // 0: any free port (bound_port() tells)
  std::string api_key;             // non-empty: every route but /health and the page needs "Authorization: Bearer KEY"
  std::string cors_origin;         // non-empty: the origin allowed to call from a browser ("*": any); empty: CORS off
  size_t max_body_bytes = size_t{8} << 20;
  int max_json_depth = 64;
  int idle_timeout_seconds = 30;  // a connection idle (or a client silent mid-request) this long is closed
  int http_threads = 64;          // connections served at once; more wait for a thread
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the socket and starts serving on a thread of its own. Errors: the address or port
  // cannot be bound (naming them).
  Status start();
  int bound_port() const { return port_; }
  // The model is loaded: generation routes answer from now on. `model` must outlive the server
  // (or stop() must come first).
  void set_model(const ServedModel* model);
  // Stops accepting, closes connections and joins the serving thread. Idempotent.
  void stop();
  Metrics& metrics() { return metrics_; }

 private:
  void install_routes();
  // Shared by the routes: the loaded model or a 503 written to res.
  const ServedModel* model_or_503(httplib::Response& res) const;

  // The handlers (routes.cpp).
  void completions(const httplib::Request& req, httplib::Response& res, bool chat);
  void tokenize(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
  void embeddings(const httplib::Request& req, httplib::Response& res);  // embeddings_route.cpp
  void models(httplib::Response& res);

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
  int listen_fd_ = -1;  // the listening socket (start())
  std::atomic<const ServedModel*> model_{nullptr};
  Metrics metrics_;
};

}  // namespace cera::server
