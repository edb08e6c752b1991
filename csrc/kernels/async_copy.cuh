// cp.async (sm_80+): global → shared copies that bypass the registers and complete in groups,
// so a kernel can keep several k-tiles in flight while it computes on an earlier one.
#pragma once

#include <cuda_runtime.h>

namespace torch_gemm {

// Copies kBytes (4, 8 or 16) from global src to shared dst, or writes kBytes of zeros when
// `valid` is false (the src-size operand is 0: nothing is read from src, which must still be a
// valid address: callers pass the operand's base for elements outside the matrix). 16-byte
// copies take .cg (L2 only: each element is read once per block); smaller ones .ca, so that the
// 4-byte copies of a transposing load, which read a sector in pieces, find it in L1.
template <int kBytes>
__device__ __forceinline__ void cp_async_zfill(void* dst, const void* src, bool valid) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned dst_shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int src_bytes = valid ? kBytes : 0;
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_shared), "l"(src),
                 "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst_shared), "l"(src),
                 "n"(kBytes), "r"(src_bytes));
  }
}

// The same copy, unconditional.
template <int kBytes>
__device__ __forceinline__ void cp_async(void* dst, const void* src) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned dst_shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst_shared), "l"(src));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst_shared), "l"(src),
                 "n"(kBytes));
  }
}

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most kPending of this thread's committed groups are still in flight. Other
// threads' copies become visible only after a barrier that follows the wait.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace torch_gemm
