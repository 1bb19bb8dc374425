// DENSIFY of a sparse constant (TFLite's sparse weight format, e.g. MediaPipe's
// face_detection_full_range_sparse.tflite): folded at import into a dense constant, so
// no IR op and no delegate ever sees a sparse tensor.
//
// The format (TFLite's SparsityParameters): the tensor's n dims, some split into blocks
// (block_map names the dims, one extra traversal dim per block), are walked in
// traversal_order; dim_metadata[l] says how level l is stored: DENSE (dense_size entries)
// or SPARSE_CSR (entries array_segments[p] .. array_segments[p + 1] of array_indices, p the
// position reached at the level above). The leaves, in walk order, are the stored values.
#include <cstring>

#include "import/tflite/tflite_converter.h"

namespace nn::tflite_import {

namespace {

Status bad(const std::string& what) {
  return Status(StatusCode::kInvalidModel, what);
}

// One SparseIndexVector's values as int64 (absent: empty).
std::vector<int64_t> index_values(tflite::SparseIndexVector type, const void* table) {
  std::vector<int64_t> v;
  if (!table) return v;
  auto copy = [&](const auto* values) {
    if (values) v.assign(values->begin(), values->end());
  };
  switch (type) {
    case tflite::SparseIndexVector_Int32Vector:
      copy(static_cast<const tflite::Int32Vector*>(table)->values());
      break;
    case tflite::SparseIndexVector_Uint16Vector:
      copy(static_cast<const tflite::Uint16Vector*>(table)->values());
      break;
    case tflite::SparseIndexVector_Uint8Vector:
      copy(static_cast<const tflite::Uint8Vector*>(table)->values());
      break;
    default:
      break;
  }
  return v;
}

struct Level {
  bool sparse = false;
  int64_t dense_size = 0;
  std::vector<int64_t> segments, indices;
};

}  // namespace

Result<std::vector<uint8_t>> densify_tensor(const tflite::SparsityParameters& sp, const Dims& dims,
                                            size_t element_bytes, std::span<const uint8_t> values) {
  const size_t n = dims.size();
  const auto* order = sp.traversal_order();
  const auto* meta = sp.dim_metadata();
  const size_t k = sp.block_map() ? sp.block_map()->size() : 0;
  if (!order || !meta || order->size() != n + k || meta->size() != n + k)
    return bad("sparsity: traversal_order and dim_metadata need " + std::to_string(n + k) + " entries");
  std::vector<Level> levels(n + k);
  std::vector<bool> seen(n + k, false);
  for (size_t l = 0; l < n + k; ++l) {
    const int32_t d = order->Get(static_cast<uint32_t>(l));
    if (d < 0 || size_t(d) >= n + k || seen[d]) return bad("sparsity: traversal_order is not a permutation");
    seen[d] = true;
    const tflite::DimensionMetadata* m = meta->Get(static_cast<uint32_t>(l));
    if (!m) return bad("sparsity: dim_metadata " + std::to_string(l) + " missing");
    Level& lv = levels[l];
    lv.sparse = m->format() == tflite::DimensionType_SPARSE_CSR;
    lv.dense_size = m->dense_size();
    if (lv.sparse) {
      lv.segments = index_values(m->array_segments_type(), m->array_segments());
      lv.indices = index_values(m->array_indices_type(), m->array_indices());
      if (lv.segments.empty()) return bad("sparsity: level " + std::to_string(l) + " has no array_segments");
    } else if (lv.dense_size <= 0) {
      return bad("sparsity: dense level " + std::to_string(l) + " of size " + std::to_string(lv.dense_size));
    }
  }
  // Traversal dim t < n is original dim t (in blocks when blocked); t = n + j is the offset
  // inside a block of dim block_map[j], whose size is that level's dense_size.
  std::vector<int64_t> block_size(n, 1);
  for (size_t j = 0; j < k; ++j) {
    const int32_t d = sp.block_map()->Get(static_cast<uint32_t>(j));
    if (d < 0 || size_t(d) >= n) return bad("sparsity: block_map names dim " + std::to_string(d));
    for (size_t l = 0; l < n + k; ++l)
      if (size_t(order->Get(static_cast<uint32_t>(l))) == n + j) block_size[d] = levels[l].dense_size;
    if (block_size[d] <= 0 || dims[d] % block_size[d])
      return bad("sparsity: block of " + std::to_string(block_size[d]) + " does not divide dim " +
                 std::to_string(d) + " of " + dims_to_string(dims));
  }
  const size_t count = num_elements(dims);
  // The dense form is allocated from the shape alone. A real pruned weight keeps a fair share
  // of its values; a corrupt file can claim gigabytes for a few stored bytes.
  const size_t dense_bytes = count * element_bytes;
  if (dense_bytes > (size_t(1) << 29) && dense_bytes / 1024 > values.size())
    return bad("sparsity: " + std::to_string(values.size()) + " stored bytes would densify to " +
               std::to_string(dense_bytes) + " bytes for " + dims_to_string(dims));
  std::vector<uint8_t> dense(dense_bytes, 0);
  std::vector<int64_t> coord(n + k, 0);  // per traversal dim
  std::vector<size_t> stride(n, 1);
  for (size_t d = n; d-- > 1;) stride[d - 1] = stride[d] * dims[d];
  const size_t stored = values.size() / element_bytes;
  // Depth-first walk; p is the position reached at the level above.
  Status status = Status::ok();
  auto walk = [&](auto&& self, size_t l, int64_t p) -> void {
    if (!status.is_ok()) return;
    if (l == n + k) {
      if (p < 0 || size_t(p) >= stored) {
        status = bad("sparsity: value " + std::to_string(p) + " of " + std::to_string(stored));
        return;
      }
      size_t offset = 0;
      for (size_t d = 0; d < n; ++d) {
        int64_t c = coord[d] * block_size[d];
        for (size_t j = 0; j < k; ++j)
          if (size_t(sp.block_map()->Get(static_cast<uint32_t>(j))) == d) c += coord[n + j];
        if (c < 0 || c >= int64_t(dims[d])) {
          status = bad("sparsity: index " + std::to_string(c) + " outside dim " + std::to_string(d) + " of " +
                       dims_to_string(dims));
          return;
        }
        offset += size_t(c) * stride[d];
      }
      std::memcpy(dense.data() + offset * element_bytes, values.data() + size_t(p) * element_bytes,
                  element_bytes);
      return;
    }
    const Level& lv = levels[l];
    const size_t dim = size_t(order->Get(static_cast<uint32_t>(l)));
    if (!lv.sparse) {
      for (int64_t i = 0; i < lv.dense_size; ++i) {
        coord[dim] = i;
        self(self, l + 1, p * lv.dense_size + i);
      }
      return;
    }
    if (p < 0 || size_t(p) + 1 >= lv.segments.size()) {
      status = bad("sparsity: level " + std::to_string(l) + " has no segment " + std::to_string(p));
      return;
    }
    const int64_t begin = lv.segments[p], end = lv.segments[p + 1];
    if (begin > end || begin < 0 || size_t(end) > lv.indices.size()) {
      status = bad("sparsity: level " + std::to_string(l) + " segment " + std::to_string(p) + " is [" +
                   std::to_string(begin) + ", " + std::to_string(end) + ") of " +
                   std::to_string(lv.indices.size()) + " indices");
      return;
    }
    for (int64_t j = begin; j < end; ++j) {
      coord[dim] = lv.indices[j];
      self(self, l + 1, j);
    }
  };
  walk(walk, 0, 0);
  NN_RETURN_IF_ERROR(status);
  return dense;
}

Result<bool> Converter::try_fold_densify(int32_t in, int32_t out) {
  NN_RETURN_IF_ERROR(check_tensor_index(in));
  NN_RETURN_IF_ERROR(check_tensor_index(out));
  const tflite::Tensor& ts = tensor(in);
  NN_ASSIGN_OR_RETURN(auto bytes, constant_bytes(in));
  if (!bytes || !ts.sparsity()) return false;
  if (tensor(out).type() != ts.type())
    return bad("DENSIFY " + tensor_label(in) + " -> " + tensor_label(out) + ": types differ");
  if (map_[out] >= 0 || densified_.count(out)) return bad(tensor_label(out) + " is written by more than one op");
  NN_ASSIGN_OR_RETURN(Dims dims, tensor_dims(in));
  NN_ASSIGN_OR_RETURN(Dims out_dims, tensor_dims(out));
  if (out_dims != dims)
    return bad("DENSIFY " + tensor_label(in) + " " + dims_to_string(dims) + " -> " + dims_to_string(out_dims));
  NN_ASSIGN_OR_RETURN(OperandType type, ir_type(out));
  const size_t element = element_size(type);
  if (element == 0 || bytes->size() % element)
    return bad(tensor_label(in) + ": " + std::to_string(bytes->size()) + " bytes of " + tflite::EnumNameTensorType(ts.type()));
  auto dense = densify_tensor(*ts.sparsity(), dims, element, *bytes);
  if (!dense.is_ok()) return dense.status().with_context(tensor_label(in));
  densified_[out] = std::move(dense.value());
  return true;
}

}  // namespace nn::tflite_import
