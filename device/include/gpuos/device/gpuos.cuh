// Everything generated operator sources include: the ABI, dtype traits and
// conversions, tensor accessors, the elementwise and reduction loops and the
// custom-operator context, and the stages of stitched programs. Operator code
// in packs can use all of it.
#pragma once

#include "gpuos/device/abi.h"
#include "gpuos/device/dtype_traits.cuh"
#include "gpuos/device/elementwise.cuh"
#include "gpuos/device/matmul.cuh"
#include "gpuos/device/matmul_fused.cuh"
#include "gpuos/device/normalization.cuh"
#include "gpuos/device/op_call.cuh"
#include "gpuos/device/op_context.cuh"
#include "gpuos/device/phase_timing.cuh"
#include "gpuos/device/reduction.cuh"
#include "gpuos/device/row_batch.cuh"
#include "gpuos/device/softmax.cuh"
#include "gpuos/device/stitch.cuh"
#include "gpuos/device/stitch_attention.cuh"
#include "gpuos/device/stitch_attention_mma.cuh"
#include "gpuos/device/stitch_matmul.cuh"
#include "gpuos/device/stitch_rows.cuh"
#include "gpuos/device/tensor.cuh"
