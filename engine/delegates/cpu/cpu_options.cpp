// CpuOptions::from_environment: the one place the CPU delegate's switches are read from
// the environment (for nnrun, nnbench and the bench scripts' A/B runs).
#include <cstdlib>
#include <cstring>

#include "nn/runtime/session.h"

namespace nn {

CpuOptions CpuOptions::from_environment() {
  CpuOptions o;
  auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v && std::strcmp(v, "0") != 0;
  };
  o.native_kernels = !set("NN_NO_NATIVE_CONV");
  o.native_data_ops = !set("NN_NO_NATIVE_DATA");
  o.avx512 = !set("NN_NO_AVX512");
  if (const char* v = std::getenv("NN_AVX512_HALF_WIDTH"); v && *v)
    o.avx512_half_width = std::strcmp(v, "0") != 0 ? HalfWidth::kOn : HalfWidth::kOff;
  o.depthwise_two_rows = !set("NN_NO_TWO_ROWS");
  o.depthwise_pixel_pairs = !set("NN_NO_PIXEL_PAIRS");
  o.avx2_8_columns = !set("NN_NO_AVX2_8_COLUMNS");
  o.k_blocks = !set("NN_NO_K_BLOCKS");
  o.avx2_k_blocks = !set("NN_NO_AVX2_K_BLOCKS");
  o.small_image_im2col = !set("NN_NO_SMALL_IMAGE_IM2COL");
  o.fold_reshapes = !set("NN_NO_FOLD_RESHAPE");
  o.concat_affine = !set("NN_NO_CONCAT_AFFINE");
  o.transpose_tiles = !set("NN_NO_TRANSPOSE_TILES");
  o.small_image_rows = !set("NN_NO_SMALL_IMAGE_ROWS");
  o.k_block_rows = !set("NN_NO_K_BLOCK_ROWS");
  o.gated_rows = !set("NN_NO_GATED_ROWS");
  o.serial_row_tiles = !set("NN_NO_SERIAL_ROW_TILES");
  o.edge_taps = !set("NN_NO_EDGE_TAPS");
  o.conv_before_resize = !set("NN_NO_CONV_BEFORE_RESIZE");
  o.add_mean = !set("NN_NO_ADD_MEAN");
  o.native_mean = !set("NN_NO_NATIVE_MEAN");
  o.se_fusion = !set("NN_NO_SE_FUSION");
  o.expand_depthwise = !set("NN_NO_EXPAND_DEPTHWISE");
  o.depthwise_project = !set("NN_NO_DEPTHWISE_PROJECT");
  o.expand_depthwise_pairs = !set("NN_NO_EXPAND_DEPTHWISE_PAIRS");
  o.swish_epilogue = !set("NN_NO_SWISH_EPILOGUE");
  o.gelu_epilogue = !set("NN_NO_GELU_EPILOGUE");
  o.channel_scale_fold = !set("NN_NO_SCALE_FOLD");
  o.layer_norm = !set("NN_NO_LAYER_NORM");
  o.drop_dead_taps = !set("NN_NO_DEAD_TAPS");
  o.winograd = !set("NN_NO_WINOGRAD");
  o.winograd_panel_split = !set("NN_NO_WINOGRAD_SPLIT");
  o.winograd_f2 = !set("NN_NO_WINOGRAD_F2");
  o.dilated_winograd = !set("NN_NO_DILATED_WINOGRAD");
  o.native_int8 = !set("NN_NO_NATIVE_INT8");
  o.avx_vnni = !set("NN_NO_AVX_VNNI");
  o.amx = !set("NN_NO_AMX");
  o.amx_in_place_tail = !set("NN_NO_AMX_IN_PLACE_TAIL");
  o.int8_fp32_requant = !set("NN_NO_INT8_FP32_REQUANT");
  o.native_int8_add = set("NN_NATIVE_INT8_ADD");
  o.native_int8_add_table = !set("NN_NO_NATIVE_INT8_ADD_TABLE");
  o.native_int8_add_avx2 = !set("NN_NO_NATIVE_INT8_ADD_AVX2");
  o.native_int8_residual = set("NN_NATIVE_INT8_RESIDUAL");
  o.native_int8_residual_table = !set("NN_NO_NATIVE_INT8_RESIDUAL_TABLE");
  o.native_int8_logistic = !set("NN_NO_NATIVE_INT8_LOGISTIC");
  o.native_int8_pool = !set("NN_NO_NATIVE_INT8_POOL");
  o.native_int8_table_avx2 = !set("NN_NO_NATIVE_INT8_TABLE_AVX2");
  o.native_int8_resize_twice_w = !set("NN_NO_NATIVE_INT8_RESIZE_TWICE_W");
  o.native_int8_resize_quarters = !set("NN_NO_NATIVE_INT8_RESIZE_QUARTERS");
  o.native_int8_resize_reciprocal = !set("NN_NO_NATIVE_INT8_RESIZE_RECIPROCAL");
  o.native_int8_resize_integer = !set("NN_NO_NATIVE_INT8_RESIZE_INTEGER");
  o.native_int8_gate_pairs = !set("NN_NO_NATIVE_INT8_GATE_PAIRS");
  o.native_int8_in_place_tiles = !set("NN_NO_NATIVE_INT8_IN_PLACE_TILES");
  o.native_int8_direct_windows = !set("NN_NO_NATIVE_INT8_DIRECT_WINDOWS");
  o.int8_table_dequantize = !set("NN_NO_INT8_TABLE_DEQUANTIZE");
  o.int8_conv_table = !set("NN_NO_INT8_CONV_TABLE");
  o.int8_expand_depthwise = !set("NN_NO_INT8_EXPAND_DEPTHWISE");
  o.native_fully_connected = !set("NN_NO_NATIVE_FC");
  o.adaptive_threads = !set("NN_NO_ADAPTIVE_THREADS");
  o.flush_denormals = !set("NN_NO_FLUSH_DENORMALS");
  o.native_grouped_conv = !set("NN_NO_NATIVE_GROUPED");
  o.grouped_pairs = !set("NN_NO_GROUPED_PAIRS");
  o.dot_conv = !set("NN_NO_DOT_CONV");
  return o;
}

}  // namespace nn
