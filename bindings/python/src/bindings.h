// What the files of the cera._cera module share: the exception that carries a cera::Error out to
// Python (errors.cpp turns it into the cera.Error subclass of its kind), text conversion, and the
// bind_* entry points module.cpp calls. The module binds only the public facade (cera/engine.h).
#pragma once

#include <nanobind/nanobind.h>

#include <exception>
#include <string>
#include <utility>

#include "cera/engine.h"

namespace cera::python {

namespace nb = nanobind;

// Thrown anywhere in the bindings (with or without the GIL); nanobind's translator, registered
// by bind_errors, raises it as cera.<Kind>Error with the facade's message unchanged.
class ErrorException : public std::exception {
 public:
  explicit ErrorException(Error error) : error_(std::move(error)) {}
  const Error& error() const { return error_; }
  const char* what() const noexcept override { return error_.message.c_str(); }

 private:
  Error error_;
};

[[noreturn]] inline void throw_error(Error error) { throw ErrorException(std::move(error)); }
[[noreturn]] inline void throw_error(ErrorKind kind, std::string message) {
  throw ErrorException(Error{.kind = kind, .message = std::move(message)});
}

template <class T>
T value_or_throw(Expected<T>&& e) {
  if (!e) throw_error(e.error());
  return std::move(e).value();
}

// The Python exception class cera raises for `kind` (a borrowed reference, alive as long as the
// module). Valid once bind_errors has run.
PyObject* error_class(ErrorKind kind);

// UTF-8 bytes to a str. The engine hands out whole characters, but detokenize() of arbitrary ids
// can end inside one; those bytes become U+FFFD rather than an exception, as other tokenizers'
// decode() does.
nb::str to_str(const std::string& utf8);

// cera's Pooling as the string the Python side uses ("mean", ...; "default" for kModelDefault).
const char* pooling_name(Pooling p);

void bind_errors(nb::module_& m);
void bind_options(nb::module_& m);
void bind_stream(nb::module_& m);
void bind_engine(nb::module_& m);

}  // namespace cera::python
