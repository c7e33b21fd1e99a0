// Default bodies of the optional verbs: a backend that lacks one says so at the call, but models
// check Backend::supports() at load time, so reaching these is a programming error.
#include "ops/backend.h"

namespace cera::ops {
namespace {
[[noreturn]] void missing(const Backend& b, const char* verb) {
  check_failed("backend supports the verb", std::string(verb) + " is not implemented by " + b.name(), __FILE__,
               __LINE__);
}
}  // namespace

void Backend::short_conv(const TensorView&, const TensorView&, const TensorView&, const TensorView&) {
  missing(*this, "short_conv");
}
void Backend::moe_route(const TensorView&, const TensorView&, const TensorView&, const RouterParams&) {
  missing(*this, "moe_route");
}
void Backend::matmul_experts(const TensorView&, const TensorView&, const TensorView&, const TensorView&) {
  missing(*this, "matmul_experts");
}
void Backend::moe_combine(const TensorView&, const TensorView&, const TensorView&) { missing(*this, "moe_combine"); }

}  // namespace cera::ops
