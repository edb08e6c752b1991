"""Which CUDA work leaves a CUDA context current on a new thread (benchmarks/NOTES.md, issue 25).

The tensor-map encodes of wgmma_sm90 are driver calls and fail with CUDA_ERROR_INVALID_CONTEXT
(201) on a thread with no current context. Each case below starts a fresh thread, does one kind of
torch work there, and asks the driver (cuCtxGetCurrent) whether a context is then current, and
whether a tensor-map encode succeeds. Run: python scripts/context_probe.py
"""

import ctypes
import threading

import torch

LIBCUDA = ctypes.CDLL("libcuda.so.1")
CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9
CU_TENSOR_MAP_SWIZZLE_128B = 3
CU_TENSOR_MAP_L2_PROMOTION_NONE = 0


def context_current() -> bool:
    context = ctypes.c_void_p()
    assert LIBCUDA.cuCtxGetCurrent(ctypes.byref(context)) == 0
    return bool(context.value)


def encode_result(tensor: torch.Tensor) -> int:
    """cuTensorMapEncodeTiled's result for a 2-D bf16 tensor in 64×64 boxes (0: success)."""
    storage = (ctypes.c_uint64 * 24)()  # a CUtensorMap: 128 bytes, 64-byte aligned
    address = (ctypes.addressof(storage) + 63) // 64 * 64
    dims = (ctypes.c_uint64 * 2)(tensor.size(1), tensor.size(0))
    strides = (ctypes.c_uint64 * 1)(tensor.stride(0) * tensor.element_size())
    box = (ctypes.c_uint32 * 2)(64, 64)
    element_strides = (ctypes.c_uint32 * 2)(1, 1)
    return LIBCUDA.cuTensorMapEncodeTiled(
        ctypes.c_void_p(address), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, ctypes.c_uint32(2),
        ctypes.c_void_p(tensor.data_ptr()), dims, strides, box, element_strides, 0,
        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, 0)


def main() -> None:
    x = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    cases = {
        "nothing": lambda: None,
        "torch.cuda.set_device(current)": lambda: torch.cuda.set_device(torch.cuda.current_device()),
        "torch.empty (allocator cache hit)": lambda: torch.empty(256, 256, device="cuda", dtype=torch.bfloat16),
        "a view (x.t())": lambda: x.t(),
        "an elementwise kernel (x + 1)": lambda: x + 1,
        "torch.mm (cuBLAS)": lambda: torch.mm(x, x),
        "torch.cuda.synchronize()": torch.cuda.synchronize,
    }
    for name, work in cases.items():
        seen = {}

        def worker() -> None:
            work()
            seen["context"] = context_current()
            seen["encode"] = encode_result(x)

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        print(f"new thread, then {name:36s} context current: {seen['context']!s:5s}  "
              f"cuTensorMapEncodeTiled: {seen['encode']}")
    print(f"main thread after its work: context current: {context_current()}, encode: {encode_result(x)}")


if __name__ == "__main__":
    main()
