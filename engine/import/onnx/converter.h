// The ONNX -> IR converter's internals, shared by the op translator files.
//
// Every ONNX value is tracked as a Value: either a host constant (initializers, Constant
// nodes, folded shape arithmetic) or a runtime IR operand plus the permutation that relates
// the IR operand's axes to the ONNX axes (perm[i] = the ONNX axis stored as IR axis i).
// Convs, pools and resizes want NHWC (perm {0,2,3,1}); reshapes want ONNX order
// (identity); elementwise ops take whatever their inputs have; Transpose just composes
// permutations. A TRANSPOSE (or a RESHAPE, when only unit dimensions move) is emitted
// only where an op needs a layout its input does not have, and each relayout is made once.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "import/onnx/onnx_tensor.h"
#include "nn/import/import.h"
#include "nn/ir/model.h"
#include "nn/status.h"
#include "onnx/onnx_pb.h"

namespace nn::onnx_import {

using Perm = std::vector<int>;
using Shape = std::vector<int64_t>;

Perm identity_perm(size_t rank);
inline const Perm kNhwc = {0, 2, 3, 1};
bool is_identity(const Perm& p);
Perm inverse(const Perm& p);
Shape permute(const Shape& dims, const Perm& p);  // out[i] = dims[p[i]]

// How a DequantizeLinear'd constant was stored: per tensor (one entry) or per axis.
struct QuantConst {
  std::vector<double> scales;
  std::vector<int64_t> zero_points;
  int axis = 0;          // ONNX axis of the per-axis parameters
  int32_t onnx_type = 3;  // INT8 = 3, UINT8 = 2, INT32 = 6
};

struct Value;

struct Value {
  bool is_const = false;
  // A float value made by DequantizeLinear keeps what it dequantized, so an op reading it
  // whose result goes to QuantizeLinear can run on the integers instead:
  std::shared_ptr<const Value> qview;          // runtime: the quantized IR value
  std::shared_ptr<const QuantConst> qconst;    // constant: the stored integers' parameters
  HostTensor host;        // when is_const
  Shape dims;             // ONNX-order dims (== host.dims for constants)
  int32_t onnx_type = 1;  // TensorProto data type
  // Runtime values: the IR operand per layout it exists in (perm -> operand). The first
  // entry made is the value's home layout.
  std::map<Perm, uint32_t> operands;
  Perm home;  // the layout the producing op wrote
  size_t rank() const { return dims.size(); }
};

class Converter;
using Translator = Status (*)(Converter&);

// A translator that reads an input the node lacks (a hostile or broken file) must not
// dereference null: this unwinds to translate_node, which turns it into a Status. The
// exception never leaves the importer.
struct MissingInput {
  size_t index;
};

class Converter {
 public:
  Converter(const onnx::ModelProto& proto, std::string source_name);
  Result<std::shared_ptr<Model>> run();

  // --- the node being translated ---
  const onnx::NodeProto& node() const { return *node_; }
  int opset() const { return opset_; }
  size_t num_inputs() const { return static_cast<size_t>(node_->input_size()); }
  size_t num_outputs() const { return static_cast<size_t>(node_->output_size()); }
  bool has_input(size_t i) const;   // present and not ""
  bool has_output(size_t i) const;  // present and not ""
  Value& in(size_t i);              // call after has_input; inputs are resolved before dispatch
  bool in_const(size_t i) const;    // present and a host constant
  // A required constant input, e.g. Reshape's shape. Errors name the input and the node.
  Result<const HostTensor*> const_in(size_t i, const char* what);

  bool has_attr(const char* name) const;
  int64_t attr_i(const char* name, int64_t def) const;
  float attr_f(const char* name, float def) const;
  std::string attr_s(const char* name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const char* name) const;
  std::vector<float> attr_floats(const char* name) const;
  Result<HostTensor> attr_tensor(const char* name) const;

  // --- results ---
  void set_out(size_t i, Value v);
  void set_out_const(size_t i, HostTensor h);
  // A runtime value for an IR operand holding ONNX dims `dims` in layout `perm`.
  Value runtime(uint32_t operand, Shape dims, Perm perm, int32_t onnx_type);

  // --- building the IR ---
  Model& model() { return *model_; }
  // The IR operand holding v with its axes in `perm` order (emits TRANSPOSE/RESHAPE once).
  Result<uint32_t> operand(Value& v, const Perm& perm);
  Result<uint32_t> onnx_order(Value& v) { return operand(v, identity_perm(v.rank())); }
  // Constant operand of IR type `type` from host data, dims as given.
  uint32_t constant(const HostTensor& h, OperandType type);
  uint32_t const_f32(const Shape& dims, const std::vector<float>& values);
  uint32_t const_i32(const Shape& dims, const std::vector<int32_t>& values);
  // Adds an op writing one new tensor operand of ir_dims; returns that operand.
  uint32_t emit(OperationType type, std::vector<uint32_t> inputs, OperandType out_type, const Shape& ir_dims,
                const std::string& name = {});
  uint32_t add_tensor(OperandType type, const Shape& ir_dims, const std::string& name);
  // The layout a runtime value lives in (its home), identity for constants.
  Perm layout_of(const Value& v) const;
  OperandType ir_type(const Value& v) const;

  // --- quantized graphs (ops_quant.cpp) ---
  struct QParams {
    float scale = 0.f;
    int32_t zero_point = 0;
    OperandType type = OperandType::TENSOR_QUANT8_ASYMM;
  };
  // Translates `node` (the current node, or a float stand-in for a QLinear op) with the
  // regular float translator over the quantized inputs `ins`, then turns the op it emitted
  // into the quantized op writing `result` with parameters `out`. Returns false, with
  // everything emitted rolled back, when the op has no quantized form under those
  // parameters (the caller then goes the DEQUANTIZE -> float -> QUANTIZE way).
  bool fold_quantized(const onnx::NodeProto& node, std::vector<Value*> ins, const std::string& result,
                      const QParams& out);
  // An IR operand holding runtime value v's bytes read with parameters p (the operand
  // itself, or a RESHAPE copy relabelled when the bytes are shared under other parameters).
  Result<Value> with_qparams(const Value& v, const QParams& p);
  // A float value: DEQUANTIZE of the quantized runtime value q, remembering q.
  Value dequantized(const Value& q);

  // The value seen through ONNX Transpose(perm t): no op, only the layout bookkeeping.
  Value transposed(const Value& v, const Perm& t);
  // The value with new ONNX dims and the same row-major element order (RESHAPE).
  Result<Value> reshaped(Value& v, const Shape& dims);

  // Brings inputs to a common rank and layout for a broadcasting elementwise op. Returns
  // the operands; sets the output's ONNX dims and layout.
  Result<std::vector<uint32_t>> broadcast(const std::vector<Value*>& ins, Shape* out_dims, Perm* out_perm);

  // --- fusion helpers ---
  // If the only reader of value `name` is a Relu / Clip(0,6) / Clip(-1,1) / Clip(0,inf) node
  // (and `name` is not a graph output), absorbs that node and returns its FuseCode; *out_name
  // becomes the name its result must be bound to. Otherwise returns 0 and leaves *out_name.
  int32_t absorb_activation(const std::string& name, std::string* out_name);
  // The node index reading `name` when exactly one node reads it and it is no graph output.
  std::optional<int> sole_consumer(const std::string& name) const;
  const onnx::NodeProto& node_at(int index) const { return proto_.graph().node(index); }
  // Marks node `index` as translated as part of the current one.
  void absorb(int index) { absorbed_.insert(index); }
  // A constant value by name (initializer, Constant node or folded), or nullptr.
  const Value* find_value(const std::string& name) const;
  void bind(const std::string& name, Value v) { values_[name] = std::move(v); }

  // Errors naming the node: "node 12 '/conv1/Conv' (Conv): <why>".
  Status unsupported(const std::string& why) const;
  Status invalid(const std::string& why) const;
  std::string where() const;

 private:
  bool try_fold_qdq(Status* status);
  Status load_graph();
  Status translate_node(int index);
  Status finish_outputs();
  void prune();
  void fill_metadata();

  const onnx::ModelProto& proto_;
  std::string source_name_;
  std::shared_ptr<Model> model_;
  int opset_ = 13;
  const onnx::NodeProto* node_ = nullptr;
  int node_index_ = -1;
  std::unordered_map<std::string, Value> values_;
  std::unordered_map<std::string, std::vector<int>> consumers_;
  std::unordered_set<std::string> graph_outputs_;
  std::unordered_set<int> absorbed_;
  std::vector<Value*> node_inputs_;
  bool folding_ = false;  // translating over quantized inputs: ir_type() reports them as float
  std::unordered_set<uint32_t> quant_inputs_labelled_;  // model inputs whose scale a DQ has set
};

// Op tables, one per translator file.
void register_nn_translators(std::unordered_map<std::string, Translator>& t);
void register_elementwise_translators(std::unordered_map<std::string, Translator>& t);
void register_shape_translators(std::unordered_map<std::string, Translator>& t);
void register_quant_translators(std::unordered_map<std::string, Translator>& t);
const std::unordered_map<std::string, Translator>& translator_table();
// Host evaluation of ops whose inputs are all constants (shape arithmetic, Constant...).
// Returns false when the op has no folding rule (it is then translated as usual).
bool fold_constant_node(Converter& c, Status* status);

// Ops that want their 4-D input in NHWC (used to pick model input layouts).
bool wants_nhwc_input(const std::string& op_type);

}  // namespace nn::onnx_import
