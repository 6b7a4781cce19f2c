/* The kernels every onnxc library shares (see ONNXC_KERNELS_EXTERN in onnxc_gemm.h): compiled
 * once per toolchain and flags by onnxc/kernels.py, linked into each model's library with hidden
 * visibility (one private copy per library: two libraries in one process never share state). */
#define ONNXC_KERNELS_DEFINE 1
#include "onnxc_gemm.h"
#include "onnxc_gemv.h"
#include "onnxc_conv.h"
#include "onnxc_conv_strided.h"
#include "onnxc_winograd.h"
