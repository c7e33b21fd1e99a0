// Reading the tokenizer fixture formats: llama.cpp's .inp (tests separated by a line
// "__ggml_vocab_test__") and .out (one line of space-prefixed ids per test).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cera::test {

// The whole file as bytes; empty when it cannot be read (tests assert on existence first).
std::string read_file_bytes(const std::filesystem::path& path);

// The test strings of an .inp file. A missing final separator makes the rest the last test.
std::vector<std::string> parse_vocab_inputs(const std::string& text);

// One id sequence per line of an .out file.
std::vector<std::vector<int32_t>> parse_vocab_outputs(const std::string& text);

}  // namespace cera::test
