// The library a template can call: filters (`x | name`), tests (`x is name`), methods of
// strings/dicts (`s.strip()`), and the global functions HF provides (range, namespace, dict,
// raise_exception, strftime_now). Unknown names are errors that say which name.
// Functions that can build a value larger than their inputs (range, join, replace, split,
// indent, tojson, iterating a string) check `limits` before or while building it, so a
// template cannot make them allocate without bound; the evaluator checks every other result.
#pragma once

#include <ctime>
#include <string_view>

#include "runtime/chat/limits.h"
#include "runtime/chat/value.h"

namespace cera::runtime::chat {

Result<Value> apply_filter(std::string_view name, const Value& input, const CallArgs& args,
                           const TemplateLimits& limits);
Result<bool> apply_test(std::string_view name, const Value& input, const CallArgs& args);
// True when `name` is a method of `object`'s type that call_method() implements.
bool has_method(const Value& object, std::string_view name);
Result<Value> call_method(const Value& object, std::string_view name, const CallArgs& args,
                          const TemplateLimits& limits);
// Global functions; `now` is the local time strftime_now() formats.
Object make_globals(const std::tm& now, const TemplateLimits& limits);

// Python's iteration of a value: list items, dict keys, string characters; undefined is empty.
Result<Array> iterate(const Value& v, const TemplateLimits& limits);

// What calls cost, for the evaluator's step budget (max_steps). is_constant_time_filter: the
// filter costs the same whatever the size of `input` (`first`, `default`, a list's `length`);
// the others are charged for reading their input and arguments. *_search_bytes: the byte
// comparisons a call may make beyond that, because a substring search compares up to
// |haystack| x |needle| bytes and map/select apply their filter or test to every element.
bool is_constant_time_filter(std::string_view name, const Value& input);
uint64_t filter_search_bytes(std::string_view name, const Value& input, const CallArgs& args);
uint64_t method_search_bytes(std::string_view name, const Value& object, const CallArgs& args);
uint64_t test_search_bytes(std::string_view name, const Value& input, const CallArgs& args);

}  // namespace cera::runtime::chat

namespace cera::runtime::chat {

// For the parse-time check that every filter and test a template names exists.
bool is_filter_name(std::string_view name);
bool is_test_name(std::string_view name);

}  // namespace cera::runtime::chat
