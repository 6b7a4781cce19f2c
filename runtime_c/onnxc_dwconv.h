/* onnxc depthwise and pointwise convolution helpers (templates/c/ops/conv.c.j2).
 *
 * Depthwise: per channel, the zero-padded input plane is split into stride phases (ops/conv.py
 * depthwise_phases) so that every tap reads its input at a constant offset from the "wide"
 * output position q = oh * RW + ow; a vector of consecutive positions then reads consecutive
 * inputs for any stride. Positions with ow >= OW are computed and dropped by the epilogue.
 */
#ifndef ONNXC_DWCONV_H
#define ONNXC_DWCONV_H

#include "onnxc_gemm.h"

#if defined(ONNXC_GEMM_VEC)
#define ONNXC_DW_VL ONNXC_SGEMM_VL
ONNXC_GEMM_INL onnxc_vf onnxc_dw_splat(float a) { return (onnxc_vf){0} + a; }
#endif

#endif
