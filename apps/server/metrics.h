// Metrics: the server's counters and latency histograms, rendered in Prometheus' text format
// (0.0.4) with vLLM-style names under a `cera:` prefix. The one decision: gauges (running and
// waiting requests, KV blocks) are read from the engine loop when /metrics is scraped, while
// latencies are observed where they happen, on the loop's thread inside the request's sinks, so
// they are what a streaming client sees without an HTTP thread's wake-up in them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine/engine_loop.h"

namespace cera::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {}
  void observe(double value);
  // The `name_bucket{le=...}`, `name_sum` and `name_count` lines.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;  // ascending; +Inf is implied
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // [bounds + 1], not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> generation_tokens{0};
  std::atomic<uint64_t> requests_stop{0};
  std::atomic<uint64_t> requests_length{0};
  std::atomic<uint64_t> requests_cancelled{0};
  std::atomic<uint64_t> requests_failed{0};
  Histogram time_to_first_token;
  Histogram inter_token_latency;
  Histogram e2e_latency;

  void count_http_response(int status);
  // The whole exposition; `loop` null while the model loads (gauges are then 0).
  std::string render(const runtime::EngineLoop* loop) const;

 private:
  mutable std::mutex http_mu_;
  std::map<int, uint64_t> http_responses_;  // status -> count
};

}  // namespace cera::server
