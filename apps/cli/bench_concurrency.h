// `cera bench --concurrency N`: N requests submitted at once to the engine loop (the serving
// path), each with P random prompt tokens and exactly G greedy tokens, timed in the loop's token
// callbacks. The one decision: every time is taken on the loop's thread when a token is handed
// out (steady_clock), so TTFT, inter-token and end-to-end latency are what a client streaming
// from the loop would see, without the main thread's wake-up latency in them.
#pragma once

#include <cstdint>

#include "grammar_options.h"
#include "model_options.h"

namespace cera::cli {

struct ConcurrencyBenchOptions {
  int32_t concurrency = 0;    // N requests in flight; 0: the single-sequence bench runs instead
  int32_t n_prompt = 128;     // P tokens a prompt
  int32_t n_gen = 128;        // G generated tokens a request (no stop at end of generation)
  int32_t shared_prefix = 0;  // K <= P leading prompt tokens common to every request of a run
  int32_t kv_tokens = 0;      // the KV pool; 0: enough for N * (P + G), so nothing is preempted
  int32_t reps = 5;           // measured runs, after one warm-up run of the same workload
  // > 0: the decode step's ceiling at this bandwidth (GB/s) and, if also > 0, matrix throughput
  // (TFLOP/s), and the run's share of it.
  double roofline_gbs = 0;
  double roofline_tflops = 0;
  // --grammar / --json-schema: every request is constrained by it (its sentences must be long
  // enough for --gen tokens: a request that ends early fails the bench).
  GrammarOptions grammar;
};

// -c (0: the model's training context) must hold P + G; -b is the loop's tokens per step.
// Prints the header, a table row per run and a median row; fails the command on an error.
void bench_concurrency(const ModelOptions& model, const ConcurrencyBenchOptions& options);

}  // namespace cera::cli
