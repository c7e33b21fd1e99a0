// The Backend interface: the ~20 verbs model code calls, eagerly, on preallocated buffers.
// Each verb validates its views once and picks the kernel from the weight's DType; model code
// never branches on quantization or device. Activations are float32 unless stated.
//
// Shapes use GGUF order (ne[0] contiguous). Glossary: n_embd, n_head, n_head_kv, head_dim,
// n_ff, n_vocab, n_tokens (rows of a batch), n_out/n_in (a Linear's output/input width).
// Threading: a Backend is used by one thread at a time (the runtime's); verbs may be parallel
// inside. Verbs are asynchronous on devices with streams: results are visible to later verbs
// and to download() after synchronize().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace cera::ops {

// An owned allocation on the backend's device, released with the Buffer.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual std::byte* data() = 0;
  virtual uint64_t size() const = 0;
  // A view of the first n_elements of this buffer with the given shape (checked to fit).
  TensorView view(DType dtype, std::array<int64_t, 4> ne, Device device) {
    TensorView v = make_view(data(), dtype, ne, device);
    CERA_CHECK(static_cast<uint64_t>(v.row_bytes() * v.rows()) <= size());
    return v;
  }
};

enum class RopeKind : uint8_t {
  kNorm,  // rotate adjacent pairs (2i, 2i+1): llama, granite (GGUF permutes Q/K rows for it)
  kNeox,  // rotate (i, i + n_rot/2): qwen2, qwen3, gemma3, lfm2
};

struct RopeParams {
  RopeKind kind = RopeKind::kNorm;
  int32_t n_rot = 0;           // rotated dimensions per head (<= head_dim, even)
  float freq_base = 10000.0f;  // theta_i = pos * freq_scale * base^(-2i/n_rot) / factor_i
  float freq_scale = 1.0f;     // linear scaling: 1 / scaling factor
  const float* freq_factors = nullptr;  // [n_rot/2] per-dimension divisors (Llama 3 rope_freqs), host memory
};

enum class Activation : uint8_t {
  kSilu,
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): gemma
  kGeluErf,   // 0.5 x (1 + erf(x / sqrt(2))): BERT's "gelu"
};

// Verbs beyond the dense transformer's, which a backend may not have yet; models that need one
// check supports() at load time so the error comes then, naming the backend.
enum class Feature : uint8_t {
  kShortConv,  // short_conv (lfm2's gated short convolution)
  kMoe,        // moe_route, matmul_experts, moe_combine (qwen3moe, lfm2moe)
};

enum class RouterGating : uint8_t {
  kSoftmax,  // qwen3moe: softmax over all experts, top-k of the probabilities
  kSigmoid,  // lfm2moe: sigmoid scores; an optional bias is added only to choose experts
};

struct RouterParams {
  int32_t n_expert_used = 0;       // k
  RouterGating gating = RouterGating::kSoftmax;
  bool normalize = true;           // divide the chosen weights by their sum
  float scale = 1.0f;              // then multiply them by this
  const TensorView* selection_bias = nullptr;  // [n_expert] F32, added to scores for the choice only
};

// One layer's paged K/V storage. A slot is one token's K (or V) row; slot s of block b is row
// b * block_size + s. The runtime owns the allocation and the block tables. k and v are both F32
// or both F16 (other types and mixes fail the verbs' checks): F16 rows are written rounded to
// nearest even by kv_store / kv_rerotate and read as float by attention, whose math is float32.
struct KvLayer {
  TensorView k;  // [n_head_kv * head_dim, n_slots]
  TensorView v;  // [n_head_kv * head_dim, n_slots]
  int32_t block_size = 16;
};

// Which cache entries each query token sees. Sequence j's logical entry i lives in slot
// block_table[j][i / block_size] * block_size + i % block_size.
struct AttentionBatch {
  std::span<const int32_t> positions;  // [n_tokens] logical index of each query token in its sequence
  std::span<const int32_t> token_seq;  // [n_tokens] which sequence each query token belongs to
  std::span<const int32_t> block_tables;  // all sequences' tables, concatenated
  std::span<const int32_t> table_offset;  // [n_seqs + 1] start of sequence j's table in block_tables
};

struct AttentionParams {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;  // n_head % n_head_kv == 0 (grouped-query attention)
  int32_t head_dim = 0;
  float scale = 0.0f;           // multiplies q·k before softmax
  float softcap = 0.0f;         // 0: none; else logits = softcap * tanh(logits / softcap)
  int32_t sliding_window = 0;   // 0: none; else token at position p sees entries (p - window, p]
  // false (encoders): a token sees every entry of its sequence up to the largest position any
  // token of that sequence has in this batch, so the whole sequence must be in the batch (its
  // K/V stored first); sliding_window must then be 0.
  bool causal = true;
};

// The last cache entry each token of `batch` sees when attention is not causal: the largest
// position of its sequence in the batch. Backends run the causal kernels with these in place of
// the positions, so bidirectional attention needs no kernel of its own.
std::vector<int32_t> bidirectional_last(const AttentionBatch& batch);

// Candidate selection for sampling on the device (a token then costs a few bytes of readback).
struct TopKParams {
  int32_t k = 1;          // 1 <= k <= min(n_vocab, kMaxTopK)
  float softcap = 0.0f;   // 0: none; else logits are first mapped to softcap * tanh(logit / softcap)
  static constexpr int32_t kMaxTopK = 256;
};

// A pending Backend::download_async, redeemed by Backend::wait. id 0: nothing pending.
struct Readback {
  uint64_t id = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;  // "cpu (avx512-vnni, 16 threads)"

  // --- memory ---------------------------------------------------------------------------
  virtual Result<std::unique_ptr<Buffer>> allocate(uint64_t bytes) = 0;
  // A weight usable by the verbs below. `host` points at file bytes (e.g. the GGUF map) that
  // outlive the backend; CPU may return it unchanged (zero copy), devices copy it. `keep` holds
  // any allocation made.
  virtual Result<TensorView> import_weight(const TensorView& host, std::unique_ptr<Buffer>& keep) = 0;
  virtual void upload(const TensorView& dst, const void* src) = 0;    // src: dst.n_elements() packed
  // dst = src on this backend's device (same dtype and shape), ordered with the verbs, without a
  // host round trip where the device can copy itself (the default body goes through the host).
  virtual void copy(const TensorView& dst, const TensorView& src);
  virtual void download(void* dst, const TensorView& src) = 0;        // waits for prior work
  virtual void synchronize() = 0;
  // Readback without waiting: download_async queues the copy of src (after the work already
  // issued) and returns at once; wait(r) blocks until dst holds the bytes. dst is the caller's,
  // must hold src.n_elements() packed, and stay valid and unread until wait(r). Several may be
  // outstanding; each must be waited for exactly once, in any order. The default body copies at
  // once (download) and wait does nothing. Used to keep the host ahead of the device in decode.
  virtual Readback download_async(void* dst, const TensorView& src);
  virtual void wait(Readback readback);
  // Starts the work issued so far without waiting for it (a device that records verbs launches
  // them now rather than at the next download): the engine loop calls it before host work that
  // the device should not wait for. The default does nothing.
  virtual void flush() {}
  // Does work issued to this backend run while the host goes on (a device with a stream)? Only
  // then does issuing the next step before reading this one back (the engine loop's overlapped
  // decode, EngineLoopOptions::pipeline) pay.
  virtual bool overlaps_host() const { return false; }
  // Is there a matmul kernel for this weight type?
  virtual bool supports_weight(DType dtype) const = 0;

  // --- verbs ----------------------------------------------------------------------------
  // out[n_embd, n_tokens] = table[n_embd, n_vocab] rows `tokens`, times `scale`. Any weight type.
  virtual void embed(const TensorView& out, const TensorView& table, std::span<const int32_t> tokens,
                     float scale) = 0;
  // embed() with the token ids in memory of this backend's device: ids [n_tokens] I32 (e.g. what
  // top_k wrote), read when the verb runs, so the host never sees them (pipelined decode). Ids
  // must lie in [0, n_vocab): the host cannot check them; a device writes zero rows for others.
  // The default body downloads the ids and calls embed().
  virtual void embed_ids(const TensorView& out, const TensorView& table, const TensorView& ids, float scale);
  // Tensor parallel: embed() from a table that holds the vocabulary rows [first, first +
  // table.ne[1]) only; a token outside them gets a zero row (another rank holds it, and the sum of
  // the ranks' outputs is the whole embedding). The default body embeds the held tokens through
  // embed() and uploads zeros over the others' rows.
  virtual void embed_slice(const TensorView& out, const TensorView& table, std::span<const int32_t> tokens,
                           int64_t first, float scale);
  // out[n_out, n_tokens] = x[n_in, n_tokens] · weight[n_in, n_out]ᵀ (+ bias[n_out]). The weight is
  // read once per call whatever n_tokens is (prompt processing is matrix-matrix work).
  virtual void matmul(const TensorView& out, const TensorView& weight, const TensorView& x,
                      const TensorView* bias = nullptr) = 0;
  // out = x / rms(x) * weight, per row of ne[0]; out may alias x.
  virtual void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight,
                        float eps) = 0;
  // out = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias, per row of ne[0] (the variance
  // divides by n, as LayerNorm does); weight and bias [ne[0]] F32; out may alias x.
  virtual void layer_norm(const TensorView& out, const TensorView& x, const TensorView& weight,
                          const TensorView& bias, float eps) = 0;
  // out = act(x), elementwise; out may alias x (the non-gated FFN of encoders).
  virtual void activation(const TensorView& out, const TensorView& x, Activation act) = 0;
  // In place on x[head_dim, n_heads, n_tokens]; positions [n_tokens] (host memory).
  virtual void rope(const TensorView& x, std::span<const int32_t> positions, const RopeParams& params) = 0;
  // out = act(gate) * up, elementwise over [n_ff, n_tokens]; out may alias gate or up.
  virtual void gated_activation(const TensorView& out, const TensorView& gate, const TensorView& up,
                                Activation act) = 0;
  // out = a + scale * b, elementwise; out may alias a or b.
  virtual void add_scaled(const TensorView& out, const TensorView& a, const TensorView& b, float scale) = 0;
  // x *= s, elementwise in place.
  virtual void scale(const TensorView& x, float s) = 0;
  // Writes k[n_head_kv*head_dim, n_tokens] and v (same shape) into the cache rows `slots`.
  virtual void kv_store(const KvLayer& layer, const TensorView& k, const TensorView& v,
                        std::span<const int32_t> slots) = 0;
  // out[n_head*head_dim, n_tokens] = softmax(q·Kᵀ·scale)·V over each token's visible cache
  // entries (causal, or the whole sequence: AttentionParams::causal); q is [head_dim, n_head, n_tokens]. The batch's own K/V must already be stored.
  virtual void attention(const TensorView& out, const TensorView& q, const KvLayer& layer,
                         const AttentionBatch& batch, const AttentionParams& params) = 0;
  // Copies cache rows src_slots[i] -> dst_slots[i] (prefix reuse, defragmentation).
  virtual void kv_copy(const KvLayer& layer, std::span<const int32_t> src_slots,
                       std::span<const int32_t> dst_slots) = 0;
  // Re-rotates the K rows `slots` (viewed [head_dim, n_head_kv]) by `delta` positions: used by
  // context shift, since RoPE(p + d) = R(d)·RoPE(p).
  virtual void kv_rerotate(const KvLayer& layer, std::span<const int32_t> slots, int32_t delta,
                           int32_t head_dim, const RopeParams& params) = 0;

  // For each row of logits [n_vocab, n_rows] (F32, after params.softcap): the k largest values in
  // descending order (equal values: lower id first) into values [k, n_rows] F32 and their ids into
  // ids [k, n_rows] I32, and the row's log-sum-exp over the whole vocabulary into lse [1, n_rows]
  // F32 (the normaliser samplers need when no top-k cut applies). The default body downloads the
  // logits and selects on the host, then uploads the results.
  virtual void top_k(const TensorView& ids, const TensorView& values, const TensorView& lse,
                     const TensorView& logits, const TopKParams& params);
  // Forbids tokens before sampling (grammars): for each i, every id of logits [n_vocab, n_rows]
  // (F32) column rows[i] whose bit is clear in masks[i * n_words, (i + 1) * n_words) (bit id % 32
  // of word id / 32, n_words = ceil(n_vocab / 32)) becomes -inf, which top_k's softcap keeps at
  // -inf. masks and rows are host arrays, copied at the call (the caller may reuse them at once).
  // The default body works in place for host memory, else through a download and an upload.
  virtual void mask_logits(const TensorView& logits, std::span<const uint32_t> masks, std::span<const int32_t> rows);

  // --- optional verbs (see Feature) -------------------------------------------------------
  virtual bool supports(Feature) const { return false; }
  // lfm2's gated causal depthwise convolution along the tokens of ONE sequence, in order, in one
  // call for all of them. bcx: [3 * n_channels, n_tokens], each token's row is (B, C, x) (the
  // input projection's output, unsplit); with u = B ⊙ x,
  // out[c, t] = C[c, t] * sum_{j<L} kernel[j, c] * u_ext[c, t + j], where u_ext is the L-1
  // carried state columns followed by u. `state` ([L-1, n_channels]: one row of L-1 per channel,
  // F32) is read first and then replaced by the last L-1 columns of u_ext. out: [n_channels,
  // n_tokens], aliases nothing; kernel: [L, n_channels] F32. The gates ride in the verb so that a
  // device runs the whole mixer in one launch (there is no elementwise-multiply verb).
  // Precondition: supports(Feature::kShortConv).
  virtual void short_conv(const TensorView& out, const TensorView& bcx, const TensorView& kernel,
                          const TensorView& state);
  // For each token: scores from logits[n_expert, n_tokens] per `params`, the k best experts'
  // ids into ids[k, n_tokens] (I32) and their weights into weights[k, n_tokens] (F32).
  virtual void moe_route(const TensorView& ids, const TensorView& weights, const TensorView& logits,
                         const RouterParams& params);
  // out[:, j, t] = experts[ids[j, t]] · x[:, t] (x: [n_in, n_tokens]) or · x[:, j, t] when x is
  // [n_in, k, n_tokens]; experts: [n_in, n_out, n_expert], any matmul weight type.
  virtual void matmul_experts(const TensorView& out, const TensorView& experts, const TensorView& x,
                              const TensorView& ids);
  // out[:, t] = sum_j weights[j, t] * expert_out[:, j, t]; out may alias nothing else.
  virtual void moe_combine(const TensorView& out, const TensorView& expert_out, const TensorView& weights);
};

}  // namespace cera::ops
