// The sampler chain, in llama.cpp's default order: penalties -> top-k -> top-p -> min-p ->
// temperature -> draw. temperature <= 0 means greedy (argmax after penalties), always.
// Draws use a seeded 64-bit Mersenne Twister and our own float conversion, so a seed gives the
// same text on every platform.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace cera::runtime {

struct SamplingParams {
  float temperature = 0.8f;
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off; keeps tokens with p >= min_p * p_max
  float repeat_penalty = 1.0f;  // 1: off; divides positive logits, multiplies negative ones
  int32_t penalty_last_n = 64;  // how many recent tokens the penalties look at (-1: all)
  float frequency_penalty = 0.0f;  // minus count * f
  float presence_penalty = 0.0f;   // minus p if present
  uint64_t seed = 0xC0FFEE;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks the next token from `logits` ([n_vocab]); `history` is the sequence so far (prompt
  // and generated), read by the penalties.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  // Sampling from the device's best candidates (Backend::top_k) instead of every logit:
  // how many candidates the chain needs for a vocabulary of n_vocab, 0 when it needs every
  // logit (penalties, or no cut at all: plain temperature sampling).
  int32_t candidates_needed(int32_t n_vocab) const;
  // The token from the candidates (ids/values descending, `lse` the log-sum-exp of the whole
  // row), or nullopt when they cannot decide: top-k off and the top-p / min-p cut falls beyond
  // them. With top-k on, the result is the one sample() gives on the full row.
  std::optional<int32_t> sample_candidates(std::span<const int32_t> ids, std::span<const float> values, float lse);
  // The token is exactly the argmax of the raw logits (Backend::top_k with k = 1) and drawing it
  // reads and changes no host state (greedy, no penalties): the device alone can pick it, so a
  // decode step may consume it before the host has seen it (the engine loop's overlapped decode).
  bool argmax_only() const { return params_.temperature <= 0.0f && !penalties_active(); }

  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  void apply_penalties(std::span<const int32_t> history);
  bool penalties_active() const;
  // top-p, min-p, temperature and the draw over cand_ (descending, p at temperature 1 set);
  // `complete`: cand_ holds every token the cuts may keep.
  std::optional<int32_t> cut_and_draw(bool complete);
  double uniform();  // [0, 1)

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> cand_;
  std::vector<float> work_;  // logits after penalties, [n_vocab]
};

}  // namespace cera::runtime
