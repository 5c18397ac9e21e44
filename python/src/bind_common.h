// Shared helpers of the Python bindings (_kiln): kiln's Status/Result turned into the Python exception KilnError,
// which carries the kiln message and the status code's name.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/trampoline.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "kiln/kiln.h"

namespace kiln::python {

namespace nb = nanobind;

// Thrown for a failed Status; nanobind turns it into _kiln.KilnError (module.cpp registers the translation).
struct KilnError : std::runtime_error {
  KilnError(StatusCode c, const std::string& message) : std::runtime_error(message), code(c) {}
  StatusCode code;
};

inline void Check(const Status& s) {
  if (!s.ok()) throw KilnError(s.code(), s.message());
}

template <typename T>
T Take(Result<T>&& r) {
  if (!r.ok()) throw KilnError(r.status().code(), r.status().message());
  return std::move(*r);
}

// Calls the Python override `name` of a trampoline's object (pure: a missing override raises). The caller holds the
// GIL.
template <typename... A>
nb::object CallOverride(const nb::detail::trampoline& t, const char* name, A&&... args) {
  nb::detail::ticket ticket(t, name, nb::detail::str_hash(name), true);
  return t.base().attr(ticket.key)(std::forward<A>(args)...);
}

// Runs `f` (which calls Python) from a noexcept C++ virtual: takes the GIL; a Python exception is printed with its
// traceback rather than propagated, and `fallback` is returned.
template <typename F, typename R>
R GuardedCall(const char* what, R fallback, F&& f) noexcept {
  nb::gil_scoped_acquire gil;
  try {
    return f();
  } catch (nb::python_error& e) {
    e.restore();
    PyErr_Print();
  } catch (const std::exception& e) {
    PySys_WriteStderr("[kiln] %s failed: %s\n", what, e.what());
  } catch (...) {
  }
  return fallback;
}

void BindTypes(nb::module_& m);    // bind_types.cpp: enums, loggers, profilers, backends and device memory
void BindBuild(nb::module_& m);    // bind_build.cpp: network, ONNX parser, builder config, builder, calibrators
void BindDlpack(nb::module_& m);   // bind_dlpack.cpp: DLPack tensors in and out
void BindRuntime(nb::module_& m);  // bind_runtime.cpp: runtime, engine, execution context

}  // namespace kiln::python
