// A Backend that hands every call to another one: tests derive from it to count or observe the
// calls a model or session makes (overriding only those) while the real work runs on the inner
// backend. Header-only, like the other test helpers here.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>

#include "ops/backend.h"

namespace cera::test {

class ForwardingBackend : public ops::Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<ops::Backend> inner) : inner_(std::move(inner)) {}

  Device device() const override { return inner_->device(); }
  std::string name() const override { return inner_->name(); }
  Result<std::unique_ptr<ops::Buffer>> allocate(uint64_t bytes) override { return inner_->allocate(bytes); }
  Result<TensorView> import_weight(const TensorView& host, std::unique_ptr<ops::Buffer>& keep) override {
    return inner_->import_weight(host, keep);
  }
  void upload(const TensorView& dst, const void* src) override { inner_->upload(dst, src); }
  void copy(const TensorView& dst, const TensorView& src) override { inner_->copy(dst, src); }
  void download(void* dst, const TensorView& src) override { inner_->download(dst, src); }
  ops::Readback download_async(void* dst, const TensorView& src) override { return inner_->download_async(dst, src); }
  void wait(ops::Readback r) override { inner_->wait(r); }
  bool overlaps_host() const override { return inner_->overlaps_host(); }
  void synchronize() override { inner_->synchronize(); }
  bool supports_weight(DType t) const override { return inner_->supports_weight(t); }

  void embed(const TensorView& o, const TensorView& t, std::span<const int32_t> k, float s) override {
    inner_->embed(o, t, k, s);
  }
  void embed_ids(const TensorView& o, const TensorView& t, const TensorView& ids, float s) override {
    inner_->embed_ids(o, t, ids, s);
  }
  void matmul(const TensorView& o, const TensorView& w, const TensorView& x, const TensorView* b) override {
    inner_->matmul(o, w, x, b);
  }
  void rms_norm(const TensorView& o, const TensorView& x, const TensorView& w, float e) override {
    inner_->rms_norm(o, x, w, e);
  }
  void layer_norm(const TensorView& o, const TensorView& x, const TensorView& w, const TensorView& b,
                  float e) override {
    inner_->layer_norm(o, x, w, b, e);
  }
  void activation(const TensorView& o, const TensorView& x, ops::Activation a) override { inner_->activation(o, x, a); }
  void rope(const TensorView& x, std::span<const int32_t> p, const ops::RopeParams& r) override { inner_->rope(x, p, r); }
  void gated_activation(const TensorView& o, const TensorView& g, const TensorView& u, ops::Activation a) override {
    inner_->gated_activation(o, g, u, a);
  }
  void add_scaled(const TensorView& o, const TensorView& a, const TensorView& b, float s) override {
    inner_->add_scaled(o, a, b, s);
  }
  void scale(const TensorView& x, float s) override { inner_->scale(x, s); }
  void kv_store(const ops::KvLayer& l, const TensorView& k, const TensorView& v, std::span<const int32_t> s) override {
    inner_->kv_store(l, k, v, s);
  }
  void attention(const TensorView& o, const TensorView& q, const ops::KvLayer& l, const ops::AttentionBatch& b,
                 const ops::AttentionParams& p) override {
    inner_->attention(o, q, l, b, p);
  }
  void kv_copy(const ops::KvLayer& l, std::span<const int32_t> s, std::span<const int32_t> d) override {
    inner_->kv_copy(l, s, d);
  }
  void kv_rerotate(const ops::KvLayer& l, std::span<const int32_t> s, int32_t d, int32_t h,
                   const ops::RopeParams& p) override {
    inner_->kv_rerotate(l, s, d, h, p);
  }
  void top_k(const TensorView& i, const TensorView& v, const TensorView& l, const TensorView& x,
             const ops::TopKParams& p) override {
    inner_->top_k(i, v, l, x, p);
  }
  bool supports(ops::Feature f) const override { return inner_->supports(f); }
  void short_conv(const TensorView& o, const TensorView& bcx, const TensorView& k, const TensorView& s) override {
    inner_->short_conv(o, bcx, k, s);
  }
  void moe_route(const TensorView& i, const TensorView& w, const TensorView& l, const ops::RouterParams& p) override {
    inner_->moe_route(i, w, l, p);
  }
  void matmul_experts(const TensorView& o, const TensorView& e, const TensorView& x, const TensorView& i) override {
    inner_->matmul_experts(o, e, x, i);
  }
  void moe_combine(const TensorView& o, const TensorView& e, const TensorView& w) override {
    inner_->moe_combine(o, e, w);
  }

 protected:
  ops::Backend& inner() const { return *inner_; }

 private:
  std::unique_ptr<ops::Backend> inner_;
};

}  // namespace cera::test
