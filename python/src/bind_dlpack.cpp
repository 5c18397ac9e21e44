// DLPack interop for the Python package: what an imported DLPack tensor (a __dlpack__ object or a capsule it
// returned; nanobind's ndarray caster reads both, and buffer-protocol objects) holds, and kiln device memory handed
// out as a DLPack object that torch.from_dlpack, jax.dlpack.from_dlpack, cupy.from_dlpack and numpy read.
#include <nanobind/ndarray.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <vector>

#include "bind_common.h"

namespace kiln::python {
namespace {

// Holds an imported DLPack tensor: while it lives, so does the producer's memory.
struct DlpackHold {
  nb::ndarray<nb::ro> array;
};

}  // namespace

void BindDlpack(nb::module_& m) {
  nb::class_<DlpackHold>(m, "DlpackHold", "Keeps an imported DLPack tensor (and its producer's memory) alive");
  m.def(
      "dlpack_view",
      [](nb::ndarray<nb::ro> a) {
        std::vector<int64_t> shape, strides;
        for (size_t i = 0; i < a.ndim(); ++i) {
          shape.push_back(static_cast<int64_t>(a.shape(i)));
          strides.push_back(a.stride(i));
        }
        const nb::dlpack::dtype t = a.dtype();
        // The last element keeps the imported tensor (and so the producer's memory) alive: hold it until the work
        // that reads the address is done.
        nb::object keep = nb::cast(DlpackHold{a});
        return nb::make_tuple(reinterpret_cast<uintptr_t>(a.data()), shape, strides, int(t.code), int(t.bits),
                              int(t.lanes), a.device_type(), a.device_id(), keep);
      },
      nb::arg("array"),
      "(address, shape, strides in elements, DLPack dtype code, bits, lanes, DLPack device type, device id, owner) "
      "of a DLPack or buffer-protocol object. The address stays valid while `owner` lives.");
  m.def(
      "dlpack_export",
      [](nb::handle owner, uintptr_t ptr, const std::vector<int64_t>& shape, int code, int bits, int device_type,
         int device_id) {
        std::vector<size_t> dims(shape.begin(), shape.end());
        nb::dlpack::dtype t{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
        return nb::ndarray<nb::array_api>(reinterpret_cast<void*>(ptr), dims.size(), dims.data(), owner, nullptr, t, device_type,
                             device_id);
      },
      nb::arg("owner"), nb::arg("address"), nb::arg("shape"), nb::arg("code"), nb::arg("bits"),
      nb::arg("device_type"), nb::arg("device_id"),
      "A DLPack object (with __dlpack__ and __dlpack_device__) over `address`, contiguous, keeping `owner` alive.");
}

}  // namespace kiln::python
