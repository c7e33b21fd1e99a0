// cera's errors as Python exceptions: cera.Error and one subclass per ErrorKind, each also
// deriving from the builtin a Python caller would catch for that failure (a missing model file is
// a FileNotFoundError, a bad value a ValueError), so `except FileNotFoundError` works unchanged.
// The classes are made here, in C++, so that the same objects are raised by the C++ side and
// re-exported by the pure-Python package.
#include <array>
#include <string>

#include "bindings.h"

namespace cera::python {
namespace {

struct KindClass {
  ErrorKind kind;
  const char* name;     // the class name inside the module `cera`
  PyObject* const* builtin;  // the builtin exception it also derives from, or nullptr
  const char* doc;
};

// Every ErrorKind of include/cera/engine.h, in its order (values 1..9).
const std::array<KindClass, 9>& kind_classes() {
  static const std::array<KindClass, 9> table = {{
      {ErrorKind::kInvalidArgument, "InvalidArgumentError", &PyExc_ValueError,
       "Something passed is malformed or outside its range; the message names it and its range."},
      {ErrorKind::kNotFound, "NotFoundError", &PyExc_FileNotFoundError,
       "A file (the model), key or tensor that does not exist; the message names it."},
      {ErrorKind::kCorrupt, "CorruptError", &PyExc_ValueError, "A file that breaks its format's rules."},
      {ErrorKind::kUnsupported, "UnsupportedError", nullptr, "Well-formed, but not something cera handles."},
      {ErrorKind::kIo, "IoError", &PyExc_OSError, "The operating system refused (reading the model, ...)."},
      {ErrorKind::kOutOfRange, "OutOfRangeError", &PyExc_ValueError,
       "A size beyond a limit: a prompt longer than the context, a token id outside the vocabulary."},
      {ErrorKind::kCancelled, "CancelledError", nullptr, "The request was cancelled."},
      {ErrorKind::kUnavailable, "UnavailableError", nullptr,
       "Cannot be done now: a full queue, an engine shutting down or closed."},
      {ErrorKind::kInternal, "InternalError", &PyExc_RuntimeError, "A bug in cera: please report it with the message."},
  }};
  return table;
}

PyObject* g_error = nullptr;                   // cera.Error
std::array<PyObject*, 10> g_by_kind = {};      // indexed by ErrorKind's value

// A new exception class `cera.<name>` with `bases`, a class attribute `kind` (cera's name of the
// ErrorKind, or None on cera.Error) and `doc`. Returns a new reference.
nb::object make_class(const char* name, nb::handle bases, nb::handle kind, const char* doc) {
  nb::dict attrs;
  attrs["kind"] = kind;
  const std::string qualified = std::string("cera.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), attrs.ptr());
  if (cls == nullptr) throw nb::python_error();
  return nb::steal(cls);
}

}  // namespace

PyObject* error_class(ErrorKind kind) {
  const int i = static_cast<int>(kind);
  if (i >= 1 && i < static_cast<int>(g_by_kind.size()) && g_by_kind[i] != nullptr) return g_by_kind[i];
  return g_error;
}

nb::str to_str(const std::string& utf8) {
  PyObject* s = PyUnicode_DecodeUTF8(utf8.data(), static_cast<Py_ssize_t>(utf8.size()), "replace");
  if (s == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(s);
}

void bind_errors(nb::module_& m) {
  nb::object base = make_class("Error", PyExc_Exception, nb::none(),
                               "Base of every error cera raises. str(e) is cera's message: it names the input, "
                               "the limit and what to change. `kind` is cera's name of the error kind.");
  m.attr("Error") = base;
  // The module keeps a reference to every class for as long as it lives; the globals borrow them.
  g_error = base.ptr();
  for (const KindClass& k : kind_classes()) {
    nb::object bases = k.builtin != nullptr ? nb::object(nb::make_tuple(base, nb::handle(*k.builtin)))
                                            : nb::object(nb::make_tuple(base));
    nb::object cls = make_class(k.name, bases, nb::str(error_kind_name(k.kind)), k.doc);
    m.attr(k.name) = cls;
    g_by_kind[static_cast<int>(k.kind)] = cls.ptr();
  }

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ErrorException& e) {
      PyErr_SetString(error_class(e.error().kind), e.error().message.c_str());
    }
  });
}

}  // namespace cera::python
