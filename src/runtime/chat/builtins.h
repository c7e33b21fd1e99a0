// The library a template can call: filters (`x | name`), tests (`x is name`), methods of
// strings/dicts (`s.strip()`), and the global functions HF provides (range, namespace, dict,
// raise_exception, strftime_now). Unknown names are errors that say which name.
#pragma once

#include <ctime>
#include <string_view>

#include "runtime/chat/value.h"

namespace cera::runtime::chat {

Result<Value> apply_filter(std::string_view name, const Value& input, const CallArgs& args);
Result<bool> apply_test(std::string_view name, const Value& input, const CallArgs& args);
// True when `name` is a method of `object`'s type that call_method() implements.
bool has_method(const Value& object, std::string_view name);
Result<Value> call_method(const Value& object, std::string_view name, const CallArgs& args);
// Global functions; `now` is the local time strftime_now() formats.
Object make_globals(const std::tm& now);

// Python's iteration of a value: list items, dict keys, string characters; undefined is empty.
Result<Array> iterate(const Value& v);

}  // namespace cera::runtime::chat

namespace cera::runtime::chat {

// For the parse-time check that every filter and test a template names exists.
bool is_filter_name(std::string_view name);
bool is_test_name(std::string_view name);

}  // namespace cera::runtime::chat
