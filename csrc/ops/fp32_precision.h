// The process-wide float32 precision of kernel="auto" beyond torch's own settings: IEEE float32
// (the default, what torch promises under fp32_precision "ieee") or 3xTF32, float32's accuracy
// from the TF32 tensor cores, opted into by torch_gemm.set_fp32_precision("3xtf32").
#pragma once

namespace torch_gemm {

enum class Fp32Precision { kIeee, kThreeTf32 };

Fp32Precision fp32_precision();
void set_fp32_precision(Fp32Precision precision);

}  // namespace torch_gemm
