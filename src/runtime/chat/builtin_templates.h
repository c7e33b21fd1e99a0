// Chat templates cera carries for architectures whose GGUF files often lack
// tokenizer.chat_template (e.g. the Gemma 3 270M package): written by us in the family's turn
// format, used only when the file has no template of its own.
#pragma once

#include <optional>
#include <string_view>

namespace cera::runtime::chat {

// The built-in template for a GGUF general.architecture, if cera has one.
std::optional<std::string_view> builtin_template_for_arch(std::string_view arch);

}  // namespace cera::runtime::chat
