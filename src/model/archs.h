// The architecture files' entry points, one per file, dispatched by registry.cpp.
#pragma once

#include "model/model.h"

namespace cera::model {

Result<std::unique_ptr<Model>> load_llama(const format::GgufFile&, ops::Backend&, const LoadOptions&);
Result<std::unique_ptr<Model>> load_qwen2(const format::GgufFile&, ops::Backend&, const LoadOptions&);
Result<std::unique_ptr<Model>> load_qwen3(const format::GgufFile&, ops::Backend&, const LoadOptions&);
Result<std::unique_ptr<Model>> load_granite(const format::GgufFile&, ops::Backend&, const LoadOptions&);
Result<std::unique_ptr<Model>> load_gemma3(const format::GgufFile&, ops::Backend&, const LoadOptions&);
Result<std::unique_ptr<Model>> load_lfm2(const format::GgufFile&, ops::Backend&, const LoadOptions&);
Result<std::unique_ptr<Model>> load_lfm2moe(const format::GgufFile&, ops::Backend&, const LoadOptions&);
Result<std::unique_ptr<Model>> load_qwen3moe(const format::GgufFile&, ops::Backend&, const LoadOptions&);
Result<std::unique_ptr<Model>> load_bert(const format::GgufFile&, ops::Backend&, const LoadOptions&);

}  // namespace cera::model
