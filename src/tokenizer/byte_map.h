// GPT-2's reversible byte <-> character mapping used by byte-level BPE vocabularies: printable
// Latin-1 bytes map to themselves, the other 68 bytes to U+0100.. in byte order, so every byte
// string becomes printable text without spaces. Tables are built once at compile time.
#pragma once

#include <cstdint>
#include <string_view>

namespace cera::tokenizer {

// The code point that stands for `byte` in vocabulary texts (e.g. ' ' -> U+0120 'Ġ').
uint32_t byte_to_codepoint(uint8_t byte);
// The same character as UTF-8 (one or two bytes), a view of a static table.
std::string_view byte_to_utf8(uint8_t byte);
// The byte a code point stands for, or -1 when the code point is not in the mapping.
int codepoint_to_byte(uint32_t cp);

}  // namespace cera::tokenizer
