// DENSIFY of sparse constant weights (TFLite's SparsityParameters: CSR levels, blocks) is
// folded at import: the op reading the weights sees a dense constant equal to the matrix
// the sparse encoding stands for.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "import/tflite/tflite_importer.h"
#include "nn/ir/model.h"
#include "tflite_builder.h"

namespace {

using tflite_test::TinyModel;

nn::tflite_import::ImportOptions graph_only() {
  nn::tflite_import::ImportOptions o;
  o.validate = false;
  return o;
}

flatbuffers::Offset<tflite::DimensionMetadata> dense_level(flatbuffers::FlatBufferBuilder& fbb, int32_t size) {
  return tflite::CreateDimensionMetadata(fbb, tflite::DimensionType_DENSE, size);
}

flatbuffers::Offset<tflite::DimensionMetadata> csr_level(flatbuffers::FlatBufferBuilder& fbb,
                                                        const std::vector<uint8_t>& segments,
                                                        const std::vector<uint8_t>& indices) {
  auto seg = tflite::CreateUint8VectorDirect(fbb, &segments);
  auto idx = tflite::CreateUint8VectorDirect(fbb, &indices);
  return tflite::CreateDimensionMetadata(fbb, tflite::DimensionType_SPARSE_CSR, 0,
                                         tflite::SparseIndexVector_Uint8Vector, seg.Union(),
                                         tflite::SparseIndexVector_Uint8Vector, idx.Union());
}

// x [1, cols] * w, w = DENSIFY(sparse), then the folded w's values.
std::vector<float> folded_weights(TinyModel& t, int sparse, std::vector<int32_t> shape,
                                  tflite::TensorType type = tflite::TensorType_FLOAT32) {
  const int x = t.tensor(shape, tflite::TensorType_FLOAT32, "x");
  const int dense = t.tensor(shape, type, "dense");
  const int y = t.tensor(shape, tflite::TensorType_FLOAT32, "y");
  t.op(t.opcode(tflite::BuiltinOperator_DENSIFY), {sparse}, {dense});
  int w = dense;
  if (type == tflite::TensorType_FLOAT16) {
    w = t.tensor(shape, tflite::TensorType_FLOAT32, "w");
    t.op(t.opcode(tflite::BuiltinOperator_DEQUANTIZE), {dense}, {w});
  }
  t.op(t.opcode(tflite::BuiltinOperator_MUL), {x, w}, {y});
  auto result = nn::tflite_import::import_buffer(t.finish({x}, {y}), "sparse.tflite", graph_only());
  EXPECT_TRUE(result.is_ok()) << result.status().to_string();
  if (!result.is_ok()) return {};
  const nn::Model& m = **result;
  EXPECT_EQ(m.op_summary(), "MUL x 1");
  const nn::Operand& folded = m.operands[m.operations[0].inputs[1]];
  EXPECT_TRUE(folded.is_constant());
  EXPECT_EQ(folded.type, nn::OperandType::TENSOR_FLOAT32);
  const float* v = folded.as<float>();
  return std::vector<float>(v, v + nn::num_elements(folded.dims));
}

TEST(TfliteDensify, CsrRowsBecomeTheDenseMatrix) {
  TinyModel t;
  auto& fbb = t.fbb();
  // [3, 5]: row 0 {1: 1.5, 4: -2}, row 1 empty, row 2 {0: 3, 2: 4, 3: 5}
  const std::vector<float> values = {1.5f, -2.f, 3.f, 4.f, 5.f};
  std::vector<flatbuffers::Offset<tflite::DimensionMetadata>> levels = {
      dense_level(fbb, 3), csr_level(fbb, {0, 2, 2, 5}, {1, 4, 0, 2, 3})};
  const std::vector<int32_t> order = {0, 1};
  auto sp = tflite::CreateSparsityParametersDirect(fbb, &order, nullptr, &levels);
  const int sparse = t.tensor({3, 5}, tflite::TensorType_FLOAT32, "sparse", values.data(),
                              values.size() * sizeof(float), {}, 0, {}, sp);
  const std::vector<float> expected = {0, 1.5f, 0, 0, -2.f, 0, 0, 0, 0, 0, 3.f, 0, 4.f, 5.f, 0};
  EXPECT_EQ(folded_weights(t, sparse, {3, 5}), expected);
}

TEST(TfliteDensify, BlockSparseFp16BehindDequantize) {
  TinyModel t;
  auto& fbb = t.fbb();
  // [2, 4] in 1x2 blocks along dim 1 (block_map {1}): row 0 keeps block 1, row 1 block 0.
  // Traversal: row, column block, offset in block.
  const std::vector<uint16_t> halves = {0x3c00, 0x4000, 0xc200, 0x3800};  // 1, 2, -3, 0.5
  std::vector<flatbuffers::Offset<tflite::DimensionMetadata>> levels = {
      dense_level(fbb, 2), csr_level(fbb, {0, 1, 2}, {1, 0}), dense_level(fbb, 2)};
  const std::vector<int32_t> order = {0, 1, 2}, block_map = {1};
  auto sp = tflite::CreateSparsityParametersDirect(fbb, &order, &block_map, &levels);
  const int sparse = t.tensor({2, 4}, tflite::TensorType_FLOAT16, "sparse", halves.data(),
                              halves.size() * sizeof(uint16_t), {}, 0, {}, sp);
  const std::vector<float> expected = {0, 0, 1.f, 2.f, -3.f, 0.5f, 0, 0};
  EXPECT_EQ(folded_weights(t, sparse, {2, 4}, tflite::TensorType_FLOAT16), expected);
}

// y = x * DENSIFY(w), w a [rows, cols] float CSR matrix storing the one value 1 in row 0 at
// column `index` (dense rows, a CSR level of one segment).
auto import_one_stored_value(int32_t rows, int32_t cols, uint8_t index) {
  TinyModel t;
  auto& fbb = t.fbb();
  const std::vector<float> values = {1.f};
  std::vector<flatbuffers::Offset<tflite::DimensionMetadata>> levels = {dense_level(fbb, rows),
                                                                         csr_level(fbb, {0, 1}, {index})};
  const std::vector<int32_t> order = {0, 1};
  auto sp = tflite::CreateSparsityParametersDirect(fbb, &order, nullptr, &levels);
  const int sparse =
      t.tensor({rows, cols}, tflite::TensorType_FLOAT32, "sparse", values.data(), sizeof(float), {}, 0, {}, sp);
  const int x = t.tensor({rows, cols}, tflite::TensorType_FLOAT32, "x");
  const int dense = t.tensor({rows, cols}, tflite::TensorType_FLOAT32, "dense");
  const int y = t.tensor({rows, cols}, tflite::TensorType_FLOAT32, "y");
  t.op(t.opcode(tflite::BuiltinOperator_DENSIFY), {sparse}, {dense});
  t.op(t.opcode(tflite::BuiltinOperator_MUL), {x, dense}, {y});
  return nn::tflite_import::import_buffer(t.finish({x}, {y}), "sparse.tflite", graph_only());
}

TEST(TfliteDensify, IndexOutsideTheShapeIsAnError) {
  auto result = import_one_stored_value(1, 4, 7);
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("index 7 outside dim 1"), std::string::npos)
      << result.status().to_string();
  EXPECT_NE(result.status().message().find("DENSIFY"), std::string::npos) << result.status().to_string();
}

// A shape of 2^30 floats (4 GiB dense) over one stored value is refused before the dense form
// is allocated; a real pruned weight keeps a fair share of its values.
TEST(TfliteDensify, HugeShapeOverAFewStoredValuesIsRefusedBeforeAllocating) {
  auto result = import_one_stored_value(32768, 32768, 7);
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("4 stored bytes would densify to 4294967296 bytes"), std::string::npos)
      << result.status().to_string();
}

}  // namespace
