// The _kiln extension module: kiln's C++ API (include/kiln) for the Python package in python/kiln, which puts the
// TensorRT-shaped names and the numpy / DLPack conveniences on top.
#include "bind_common.h"


NB_MODULE(_kiln, m) {
  using namespace kiln::python;
  m.doc() = "kiln's C++ API; use the kiln package (import kiln), which wraps it";
  // A raw, never released reference: the type outlives the module (a static nb::object would be released after the
  // interpreter finalized).
  static PyObject* error_type = PyErr_NewExceptionWithDoc(
      "kiln._kiln.KilnError", "A kiln call failed; the message is kiln's, `code` names the kind of failure.",
      PyExc_RuntimeError, nullptr);
  m.attr("KilnError") = nb::borrow(error_type);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const KilnError& e) {
      nb::object exc = nb::handle(error_type)(nb::str(e.what()));
      exc.attr("code") = nb::str(kiln::StatusCodeName(e.code));  // "InvalidArgument", "NotFound", ...
      PyErr_SetObject(error_type, exc.ptr());
    }
  });
  BindTypes(m);
  BindBuild(m);
  BindRuntime(m);
  BindDlpack(m);
}
