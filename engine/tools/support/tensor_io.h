// Moving tensors between files and a session: .npy in the source model's layout, images
// pre-processed per the model's metadata, and the NCHW<->NHWC bridge the metadata asks for.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nn/image/preprocess.h"
#include "nn/ir/model.h"
#include "nn/status.h"
#include "npy.h"

namespace nn::tools {

// NHWC <-> NCHW for a 4-D float/int buffer of `element_size` bytes per element.
void nchw_to_nhwc(const uint8_t* src, uint8_t* dst, const Dims& nhwc_dims, size_t element_size);
void nhwc_to_nchw(const uint8_t* src, uint8_t* dst, const Dims& nhwc_dims, size_t element_size);

// The dims a user sees for IR operand `operand` given its source layout ("NCHW" -> permuted).
Dims source_dims(const Operand& operand, const std::string& source_layout);

// Fills `dst` (operand.byte_size() bytes, IR layout) from an array in the source layout.
// Checks dtype and shape and names the mismatch.
Status npy_to_input(const NpyArray& array, const Operand& operand, const std::string& source_layout,
                    void* dst);
// Wraps an IR-layout output as an array in the source layout (float32 outputs as f4,
// int32 as i4, bool8 as b1).
NpyArray output_to_npy(const Operand& operand, const std::string& source_layout, const void* src);

// Loads an image with OpenCV and writes it into a [1,H,W,3] input (float32 or quant8) with
// nn::image's front end: resampled to the model's H x W with `sampling` (unset: the
// model's own, nn::image::default_sampling), colour order and normalisation from the
// metadata (nn/image/preprocess.h has the rule).
Status image_to_input(const std::string& path, const Model& model, size_t input_index, void* dst,
                      std::optional<image::Sampling> sampling = std::nullopt);

// Deterministic random input in [-1, 1] (or [0, 1] for image models).
void random_input(const Operand& operand, uint32_t seed, void* dst);

}  // namespace nn::tools
