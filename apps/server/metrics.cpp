#include "metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace cera::server {
namespace {

// vLLM's bucket edges for the same three histograms (seconds).
std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> itl_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> e2e_buckets() {
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void sample(std::string& out, const char* name, double value) { out += fmt::format("{} {}\n", name, value); }

}  // namespace

void Histogram::observe(double value) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  std::lock_guard lock(mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  std::lock_guard lock(mu_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

Metrics::Metrics()
    : time_to_first_token(ttft_buckets()), inter_token_latency(itl_buckets()), e2e_latency(e2e_buckets()) {}

void Metrics::count_http_response(int status) {
  std::lock_guard lock(http_mu_);
  ++http_responses_[status];
}

std::string Metrics::render(const runtime::EngineLoop* loop) const {
  const runtime::EngineLoopStats s = loop != nullptr ? loop->stats() : runtime::EngineLoopStats{};
  const int32_t used = s.n_kv_blocks - s.n_kv_blocks_free;
  std::string out;
  header(out, "cera:num_requests_running", "gauge", "Requests holding KV blocks in the engine loop.");
  sample(out, "cera:num_requests_running", s.n_running);
  header(out, "cera:num_requests_waiting", "gauge", "Requests queued for admission.");
  sample(out, "cera:num_requests_waiting", s.n_waiting);
  header(out, "cera:kv_blocks_total", "gauge", "KV cache blocks in the pool.");
  sample(out, "cera:kv_blocks_total", s.n_kv_blocks);
  header(out, "cera:kv_blocks_used", "gauge", "KV cache blocks held by requests (blocks only the prefix cache holds are free).");
  sample(out, "cera:kv_blocks_used", used);
  header(out, "cera:kv_cache_usage_perc", "gauge", "KV cache usage: 1 means every block is held.");
  sample(out, "cera:kv_cache_usage_perc", s.n_kv_blocks > 0 ? static_cast<double>(used) / s.n_kv_blocks : 0.0);
  header(out, "cera:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.");
  sample(out, "cera:prefix_cache_queries_total", static_cast<double>(s.n_prefix_query_tokens));
  header(out, "cera:prefix_cache_hits_total", "counter", "Prompt tokens taken from the prefix cache.");
  sample(out, "cera:prefix_cache_hits_total", static_cast<double>(s.n_prompt_tokens_cached));
  header(out, "cera:num_preemptions_total", "counter", "Requests whose KV was freed for older ones and recomputed.");
  sample(out, "cera:num_preemptions_total", static_cast<double>(s.n_preemptions));
  header(out, "cera:prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
  sample(out, "cera:prompt_tokens_total", static_cast<double>(prompt_tokens.load()));
  header(out, "cera:generation_tokens_total", "counter", "Generated tokens.");
  sample(out, "cera:generation_tokens_total", static_cast<double>(generation_tokens.load()));
  header(out, "cera:request_success_total", "counter", "Requests that finished, by finish reason.");
  out += fmt::format("cera:request_success_total{{finished_reason=\"stop\"}} {}\n", requests_stop.load());
  out += fmt::format("cera:request_success_total{{finished_reason=\"length\"}} {}\n", requests_length.load());
  header(out, "cera:requests_cancelled_total", "counter", "Requests cancelled, most by a client that disconnected.");
  sample(out, "cera:requests_cancelled_total", static_cast<double>(requests_cancelled.load()));
  header(out, "cera:requests_failed_total", "counter", "Requests the engine failed.");
  sample(out, "cera:requests_failed_total", static_cast<double>(requests_failed.load()));
  header(out, "cera:http_requests_total", "counter", "HTTP responses, by status code.");
  {
    std::lock_guard lock(http_mu_);
    for (const auto& [code, n] : http_responses_) out += fmt::format("cera:http_requests_total{{code=\"{}\"}} {}\n", code, n);
  }
  header(out, "cera:time_to_first_token_seconds", "histogram", "Seconds from a request's arrival to its first token.");
  time_to_first_token.render("cera:time_to_first_token_seconds", out);
  header(out, "cera:inter_token_latency_seconds", "histogram", "Seconds between a request's consecutive tokens.");
  inter_token_latency.render("cera:inter_token_latency_seconds", out);
  header(out, "cera:e2e_request_latency_seconds", "histogram", "Seconds from a request's arrival to its end.");
  e2e_latency.render("cera:e2e_request_latency_seconds", out);
  return out;
}

}  // namespace cera::server
