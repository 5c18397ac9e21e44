"""The DLPack helpers of the extension on host memory (the CUDA paths run in test_gpu_torch.py): what an imported
tensor holds, the holder that keeps it alive, and kiln memory handed out as a DLPack object numpy reads."""
import gc

import numpy as np

import kiln


def test_dlpack_view_reads_a_host_tensor_and_holds_it():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    ptr, shape, strides, code, bits, lanes, dev_type, dev_id, owner = kiln._kiln.dlpack_view(a.__dlpack__())
    assert (shape, strides, code, bits, lanes, dev_type) == ([3, 2], [4, 2], 2, 32, 1, 1)
    assert ptr == a.ctypes.data and type(owner).__name__ == "DlpackHold"
    base = a.base
    del a
    gc.collect()
    assert base is not None  # (the holder owns a reference to the producer's export, not the other way round)


def test_dlpack_export_is_read_by_numpy():
    src = np.arange(6, dtype=np.int32)
    out = kiln._kiln.dlpack_export(src, src.ctypes.data, [2, 3], 0, 32, 1, 0)
    assert out.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(out), src.reshape(2, 3))
