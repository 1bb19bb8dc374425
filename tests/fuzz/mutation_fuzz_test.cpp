// Mutation fuzzing of every model reader: .nnapi (load_nnapi_buffer), TFLite
// (import_tflite_buffer) and ONNX (import_onnx_buffer). Each mutated file must either
// load into a model that validates, or be refused with a non-ok Status and a message —
// never a crash, a sanitizer report or a hang. Built with -DNN_SANITIZE=ON by
// scripts/run-sanitized-fuzz.sh, where ASan/UBSan turn silent memory errors into failures.
//
// Seeds: the real models in assets/models when present (selfie_segmentation.tflite,
// mobilenet_v2.onnx, and the .nnapi the TFLite one converts to), plus tiny models built
// here, whose bytes are mostly structure. Mutations aim at structure rather than weight
// bytes (a flipped weight still loads; a flipped offset is what finds bugs), and mutated
// .nnapi files are usually re-sealed (file size and checksum fixed) so they get past the
// checksum to the parsers behind it.
//
// NN_FUZZ_ITERATIONS (default 1000) sets the files per format (the .nnapi and .tflite runs
// add half as many again on their tiny seeds);
// NN_FUZZ_SEED the random seed. A file that fails is saved under <build>/fuzz-failures/.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <onnx/onnx_pb.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <span>

#include "format/nnapi_format.h"
#include "import/tflite/tflite_schema_generated.h"
#include "nn/format/nnapi_file.h"
#include "nn/import/import.h"
#include "nn/ops/registry.h"
#include "test_support.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace {

using Bytes = std::vector<uint8_t>;
using Loader = std::function<nn::Result<std::shared_ptr<nn::Model>>(const Bytes&)>;
namespace fmt = nn::nnapi_format;

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return static_cast<size_t>(std::strtoull(v, nullptr, 10));
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

struct Seed {
  std::string name;
  Bytes bytes;
  // [begin, end) ranges holding bulk data (weights): mutations mostly avoid them.
  std::vector<std::pair<size_t, size_t>> bulk;
  size_t iterations = 0;
  // Bytes that hold a meaning-bearing scalar (a shape entry, an index, an option): set to
  // extreme values they keep the file well-formed for its parser and test the importer.
  struct Field {
    size_t offset;
    int width;
  };
  std::vector<Field> fields;
};

// ---- seeds ----------------------------------------------------------------------------

nn::Model tiny_ir_model() {
  nn::Model m;
  using T = nn::OperandType;
  uint32_t in = m.add_tensor(T::TENSOR_FLOAT32, {1, 4, 4, 3}, "in");
  const float bias[3] = {0.1f, 0.2f, 0.3f};
  uint32_t sum = m.add_tensor(T::TENSOR_FLOAT32, {}, "sum");
  m.add_operation(nn::OperationType::ADD, {in, m.add_constant_f32({3}, bias, "bias"), m.add_scalar_i32(1)},
                  {sum});
  uint32_t relu = m.add_tensor(T::TENSOR_FLOAT32, {}, "relu");
  m.add_operation(nn::OperationType::RELU, {sum}, {relu});
  uint32_t out = m.add_tensor(T::TENSOR_FLOAT32, {}, "out");
  m.add_operation(nn::OperationType::MUL,
                  {relu, m.add_constant_f32({1}, std::vector<float>{2.f}), m.add_scalar_i32(0)}, {out});
  const uint8_t q[4] = {1, 2, 3, 4};
  uint32_t qc = m.add_constant(T::TENSOR_QUANT8_SYMM_PER_CHANNEL, {2, 2}, q, 4, "pc");
  m.operands[qc].channel_quant = {0, {0.5f, 0.25f}};
  m.inputs = {in};
  m.outputs = {out};
  m.metadata.task = "fuzz";
  m.metadata.input_mean = {1, 2, 3};
  m.metadata.input_source_layouts = {"NHWC"};
  m.metadata.extra = {{"k", "v"}};
  return m;
}

Seed nnapi_seed(const std::string& name, const nn::Model& model, size_t iterations) {
  Seed s{name, fmt::encode_model(model), {}, iterations, {}};
  auto info = nn::read_nnapi_file_info(s.bytes);
  if (info.is_ok())
    for (const auto& sec : info->sections)
      if (sec.type == fmt::kSectionConstants) s.bulk.push_back({sec.offset, sec.offset + sec.length});
  return s;
}

Bytes tiny_tflite() {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<float> bias = {0.1f, 0.2f, 0.3f};
  std::vector<flatbuffers::Offset<tflite::Buffer>> buffers = {
      tflite::CreateBuffer(fbb),
      tflite::CreateBuffer(fbb, fbb.CreateVector(reinterpret_cast<const uint8_t*>(bias.data()), 12))};
  auto tensor = [&](std::vector<int32_t> shape, uint32_t buffer, const char* name) {
    return tflite::CreateTensor(fbb, fbb.CreateVector(shape), tflite::TensorType_FLOAT32, buffer,
                                fbb.CreateString(name));
  };
  std::vector<flatbuffers::Offset<tflite::Tensor>> tensors = {
      tensor({1, 4, 4, 3}, 0, "input"), tensor({3}, 1, "bias"), tensor({1, 4, 4, 3}, 0, "sum"),
      tensor({1, 4, 4, 3}, 0, "output")};
  std::vector<flatbuffers::Offset<tflite::OperatorCode>> codes = {
      tflite::CreateOperatorCode(fbb, tflite::BuiltinOperator_ADD, 0, 1, tflite::BuiltinOperator_ADD),
      tflite::CreateOperatorCode(fbb, tflite::BuiltinOperator_LOGISTIC, 0, 1,
                                 tflite::BuiltinOperator_LOGISTIC)};
  std::vector<flatbuffers::Offset<tflite::Operator>> ops = {
      tflite::CreateOperator(fbb, 0, fbb.CreateVector<int32_t>({0, 1}), fbb.CreateVector<int32_t>({2}),
                             tflite::BuiltinOptions_AddOptions,
                             tflite::CreateAddOptions(fbb, tflite::ActivationFunctionType_RELU).Union()),
      tflite::CreateOperator(fbb, 1, fbb.CreateVector<int32_t>({2}), fbb.CreateVector<int32_t>({3}))};
  auto subgraph =
      tflite::CreateSubGraph(fbb, fbb.CreateVector(tensors), fbb.CreateVector<int32_t>({0}),
                             fbb.CreateVector<int32_t>({3}), fbb.CreateVector(ops), fbb.CreateString("main"));
  auto model = tflite::CreateModel(fbb, 3, fbb.CreateVector(codes), fbb.CreateVector(&subgraph, 1),
                                   fbb.CreateString("tiny"), fbb.CreateVector(buffers));
  tflite::FinishModelBuffer(fbb, model);
  return Bytes(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

// Where a flatbuffer table's fields sit: tables are read through their vtable, as the
// flatbuffers runtime does (generated tables inherit flatbuffers::Table privately).
struct FieldCollector {
  const uint8_t* base;
  std::vector<Seed::Field>& out;
  void at(const void* p, int width) {
    if (p) out.push_back({static_cast<size_t>(static_cast<const uint8_t*>(p) - base), width});
  }
  template <typename T>
  void vec(const flatbuffers::Vector<T>* v) {
    if (v)
      for (size_t i = 0; i < v->size() && i < 64; ++i) at(v->data() + i * sizeof(T), sizeof(T));
  }
  void field(const void* table, flatbuffers::voffset_t vt, int width) {
    if (table) at(reinterpret_cast<const flatbuffers::Table*>(table)->GetAddressOf(vt), width);
  }
  // Every present field of a table whose layout we do not spell out (builtin options):
  // its first byte, which is the low byte of a scalar.
  void all_fields(const void* table) {
    if (!table) return;
    const uint8_t* t = static_cast<const uint8_t*>(table);
    const uint8_t* vtable = t - flatbuffers::ReadScalar<flatbuffers::soffset_t>(t);
    const auto vsize = flatbuffers::ReadScalar<flatbuffers::voffset_t>(vtable);
    for (flatbuffers::voffset_t off = 4; off + 2 <= vsize; off += 2) {
      auto fo = flatbuffers::ReadScalar<flatbuffers::voffset_t>(vtable + off);
      if (fo) at(t + fo, 1);
    }
  }
};

Seed tflite_seed(const std::string& name, Bytes bytes, size_t iterations) {
  Seed s{name, std::move(bytes), {}, iterations, {}};
  const tflite::Model* m = tflite::GetModel(s.bytes.data());
  FieldCollector c{s.bytes.data(), s.fields};
  c.field(m, tflite::Model::VT_VERSION, 4);
  if (m->operator_codes())
    for (const tflite::OperatorCode* oc : *m->operator_codes()) {
      c.field(oc, tflite::OperatorCode::VT_DEPRECATED_BUILTIN_CODE, 1);
      c.field(oc, tflite::OperatorCode::VT_BUILTIN_CODE, 4);
      c.field(oc, tflite::OperatorCode::VT_VERSION, 4);
    }
  if (m->subgraphs())
    for (const tflite::SubGraph* g : *m->subgraphs()) {
      c.vec(g->inputs());
      c.vec(g->outputs());
      if (g->tensors())
        for (const tflite::Tensor* t : *g->tensors()) {
          c.vec(t->shape());
          c.vec(t->shape_signature());
          c.field(t, tflite::Tensor::VT_TYPE, 1);
          c.field(t, tflite::Tensor::VT_BUFFER, 4);
          if (const tflite::QuantizationParameters* q = t->quantization()) {
            c.vec(q->scale());
            c.vec(q->zero_point());
            c.field(q, tflite::QuantizationParameters::VT_QUANTIZED_DIMENSION, 4);
          }
        }
      if (g->operators())
        for (const tflite::Operator* op : *g->operators()) {
          c.field(op, tflite::Operator::VT_OPCODE_INDEX, 4);
          c.field(op, tflite::Operator::VT_BUILTIN_OPTIONS_TYPE, 1);
          c.vec(op->inputs());
          c.vec(op->outputs());
          c.all_fields(op->builtin_options());
        }
    }
  if (m->buffers())
    for (const tflite::Buffer* b : *m->buffers())
      if (b && b->data() && b->data()->size() >= 64) {
        size_t begin = static_cast<size_t>(b->data()->data() - s.bytes.data());
        s.bulk.push_back({begin, begin + b->data()->size()});
      }
  return s;
}

Bytes tiny_onnx() {
  onnx::ModelProto model;
  model.set_ir_version(7);
  model.add_opset_import()->set_version(13);
  model.set_producer_name("nnpipe-fuzz");
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("tiny");
  auto value_info = [](onnx::ValueInfoProto* v, const char* name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value_info(g->add_input(), "x", {1, 3, 8, 8});
  value_info(g->add_output(), "y", {1, 4, 8, 8});
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {4, 3, 3, 3}) w->add_dims(d);
  std::vector<float> weights = nn_test::random_floats(4 * 3 * 3 * 3, 1);
  w->set_raw_data(weights.data(), weights.size() * 4);
  onnx::TensorProto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(4);
  for (float v : {0.1f, -0.2f, 0.3f, 0.f}) b->add_float_data(v);
  onnx::NodeProto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->set_name("conv");
  conv->add_input("x");
  conv->add_input("w");
  conv->add_input("b");
  conv->add_output("c");
  onnx::AttributeProto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  onnx::NodeProto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("c");
  relu->add_output("y");
  std::string out;
  model.SerializeToString(&out);
  return Bytes(out.begin(), out.end());
}

Seed onnx_seed(const std::string& name, Bytes bytes, size_t iterations) {
  Seed s{name, std::move(bytes), {}, iterations, {}};
  onnx::ModelProto model;
  if (!model.ParseFromArray(s.bytes.data(), static_cast<int>(s.bytes.size()))) return s;
  // raw_data payloads appear in the serialized bytes in initializer order.
  auto cursor = s.bytes.begin();
  for (const onnx::TensorProto& t : model.graph().initializer()) {
    const std::string& raw = t.raw_data();
    if (raw.size() < 64) continue;
    auto it = std::search(cursor, s.bytes.end(), raw.begin(), raw.begin() + 64);
    if (it == s.bytes.end()) continue;
    size_t begin = static_cast<size_t>(it - s.bytes.begin());
    s.bulk.push_back({begin, begin + raw.size()});
    cursor = it + static_cast<ptrdiff_t>(raw.size());
  }
  return s;
}

// ---- mutation -------------------------------------------------------------------------

class Mutator {
 public:
  Mutator(const Seed& seed, uint64_t rng_seed) : seed_(seed), rng_(rng_seed) {
    std::vector<std::pair<size_t, size_t>> bulk = seed.bulk;
    std::sort(bulk.begin(), bulk.end());
    size_t at = 0;
    for (auto [b, e] : bulk) {
      if (b > at) structure_.push_back({at, b});
      at = std::max(at, e);
    }
    if (at < seed.bytes.size()) structure_.push_back({at, seed.bytes.size()});
    for (auto [b, e] : structure_) structure_bytes_ += e - b;
  }

  Bytes mutate(const std::function<void(Bytes&, std::mt19937_64&)>& post = nullptr) {
    Bytes b = seed_.bytes;
    const int n = 1 + static_cast<int>(pick(4));
    for (int i = 0; i < n && !b.empty(); ++i) mutate_once(b);
    if (post) post(b, rng_);
    return b;
  }

 private:
  size_t pick(size_t n) { return n ? std::uniform_int_distribution<size_t>(0, n - 1)(rng_) : 0; }

  // Mostly a structure byte (as positioned in the seed), sometimes any byte.
  size_t position(const Bytes& b) {
    size_t p;
    if (structure_bytes_ && pick(100) < 85) {
      size_t k = pick(structure_bytes_);
      p = 0;
      for (auto [s, e] : structure_) {
        if (k < e - s) {
          p = s + k;
          break;
        }
        k -= e - s;
      }
    } else {
      p = pick(b.size());
    }
    return std::min(p, b.size() - 1);
  }

  uint32_t interesting32(const Bytes& b) {
    static const uint32_t kValues[] = {0,     1,        2,          3,          4,          7,         8,
                                       16,    63,       64,         255,        256,        0x7fff,    0xffff,
                                       65536, 1u << 24, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff};
    switch (pick(4)) {
      case 0:
        return static_cast<uint32_t>(b.size());
      case 1:
        return static_cast<uint32_t>(rng_());
      default:
        return kValues[pick(std::size(kValues))];
    }
  }

  void mutate_field(Bytes& b) {
    const Seed::Field& f = seed_.fields[pick(seed_.fields.size())];
    if (f.offset + static_cast<size_t>(f.width) > b.size()) return;
    uint8_t* p = b.data() + f.offset;
    switch (f.width) {
      case 1: {
        static const uint8_t kBytes[] = {0, 1, 2, 3, 4, 0x7f, 0x80, 0xfe, 0xff};
        *p = pick(4) == 0 ? static_cast<uint8_t>(rng_()) : kBytes[pick(std::size(kBytes))];
        break;
      }
      case 4: {
        uint32_t v = pick(3) == 0 ? fmt::load_u32(p) + static_cast<uint32_t>(pick(5)) - 2 : interesting32(b);
        fmt::store_u32(p, v);
        break;
      }
      default: {
        static const uint64_t kValues[] = {0, 1, 0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull};
        fmt::store_u64(p, kValues[pick(std::size(kValues))]);
        break;
      }
    }
  }

  void mutate_once(Bytes& b) {
    if (!seed_.fields.empty() && b.size() == seed_.bytes.size() && pick(2)) return mutate_field(b);
    switch (pick(9)) {
      case 0: {  // flip one bit
        b[position(b)] ^= static_cast<uint8_t>(1u << pick(8));
        break;
      }
      case 1: {  // an interesting byte
        static const uint8_t kBytes[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x40, 0x20};
        b[position(b)] = kBytes[pick(std::size(kBytes))];
        break;
      }
      case 2:
      case 3: {  // an interesting 32-bit word, often 4-byte aligned (counts, indices, lengths)
        size_t p = position(b);
        if (pick(2)) p &= ~size_t{3};
        if (p + 4 > b.size()) break;
        uint32_t v = interesting32(b);
        if (pick(4) == 0) v = fmt::load_u32(b.data() + p) + static_cast<uint32_t>(pick(17)) - 8;  // nudge
        fmt::store_u32(b.data() + p, v);
        break;
      }
      case 4: {  // a 64-bit word (offsets)
        size_t p = position(b) & ~size_t{7};
        if (p + 8 > b.size()) break;
        static const uint64_t kValues[] = {0, 64, 0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull};
        uint64_t v = pick(3) == 0 ? b.size() + pick(128) : kValues[pick(std::size(kValues))];
        fmt::store_u64(b.data() + p, v);
        break;
      }
      case 5: {  // truncate
        b.resize(pick(3) == 0 ? pick(std::min<size_t>(b.size(), 256)) : pick(b.size()));
        break;
      }
      case 6: {  // delete a chunk
        size_t p = position(b);
        size_t n = std::min(b.size() - p, 1 + pick(64));
        b.erase(b.begin() + static_cast<ptrdiff_t>(p), b.begin() + static_cast<ptrdiff_t>(p + n));
        break;
      }
      case 7: {  // duplicate a chunk elsewhere
        size_t from = position(b);
        size_t n = std::min(b.size() - from, 1 + pick(64));
        Bytes chunk(b.begin() + static_cast<ptrdiff_t>(from), b.begin() + static_cast<ptrdiff_t>(from + n));
        size_t to = position(b);
        b.insert(b.begin() + static_cast<ptrdiff_t>(to), chunk.begin(), chunk.end());
        break;
      }
      case 8: {  // overwrite a chunk with bytes from elsewhere in the file
        size_t from = position(b), to = position(b);
        size_t n = std::min({b.size() - from, b.size() - to, 1 + pick(32)});
        std::memmove(b.data() + to, b.data() + from, n);
        break;
      }
    }
  }

  const Seed& seed_;
  std::mt19937_64 rng_;
  std::vector<std::pair<size_t, size_t>> structure_;
  size_t structure_bytes_ = 0;
};

// Structure-aware ONNX mutations: byte flips mostly break the protobuf encoding (and are
// refused by the parser); these edit the parsed model and re-serialize it, so the
// importer sees well-formed protobufs that describe hostile graphs.
class OnnxMutator {
 public:
  OnnxMutator(const Bytes& bytes, uint64_t rng_seed) : rng_(rng_seed) {
    parsed_ = base_.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  }
  bool usable() const { return parsed_ && base_.graph().node_size() > 0; }

  Bytes mutate() {
    onnx::ModelProto m = base_;
    const int n = 1 + static_cast<int>(pick(3));
    for (int i = 0; i < n; ++i) mutate_once(m);
    std::string out;
    m.SerializeToString(&out);
    return Bytes(out.begin(), out.end());
  }

 private:
  size_t pick(size_t n) { return n ? std::uniform_int_distribution<size_t>(0, n - 1)(rng_) : 0; }
  int64_t interesting64() {
    static const int64_t kValues[] = {
        0, 1, 2, 3, -1, -2, 7, 64, 1 << 20, 0x7fffffff, -0x80000000ll, 0x100000000ll, INT64_MAX, INT64_MIN};
    return kValues[pick(std::size(kValues))];
  }
  std::string some_name(const onnx::GraphProto& g) {
    switch (pick(4)) {
      case 0:
        return "";
      case 1:
        return "no_such_tensor";
      case 2:
        return g.input(static_cast<int>(pick(g.input_size()))).name();
      default: {
        const onnx::NodeProto& n = g.node(static_cast<int>(pick(g.node_size())));
        return n.output_size() ? n.output(0) : "x";
      }
    }
  }

  void mutate_once(onnx::ModelProto& m) {
    onnx::GraphProto* g = m.mutable_graph();
    if (g->node_size() == 0) return;
    onnx::NodeProto* node = g->mutable_node(static_cast<int>(pick(g->node_size())));
    switch (pick(12)) {
      case 0: {
        static const char* kOps[] = {"Conv",    "Relu",      "Add",     "Mul",      "Gemm",
                                     "Reshape", "Flatten",   "Concat",  "Resize",   "GlobalAveragePool",
                                     "Clip",    "Transpose", "Sigmoid", "Gather",   "Slice",
                                     "Split",   "Pad",       "GRU",     "NoSuchOp", ""};
        node->set_op_type(kOps[pick(std::size(kOps))]);
        break;
      }
      case 1:
        if (node->input_size()) node->set_input(static_cast<int>(pick(node->input_size())), some_name(*g));
        break;
      case 2:
        if (node->input_size() && pick(2))
          node->mutable_input()->RemoveLast();
        else
          node->add_input(some_name(*g));
        break;
      case 3:
        if (node->output_size()) node->set_output(static_cast<int>(pick(node->output_size())), some_name(*g));
        break;
      case 4:
      case 5: {  // an attribute value
        if (!node->attribute_size()) break;
        onnx::AttributeProto* a = node->mutable_attribute(static_cast<int>(pick(node->attribute_size())));
        switch (pick(6)) {
          case 0:
            a->set_i(interesting64());
            break;
          case 1: {
            static const float kFloats[] = {0.f, -1.f, 1e30f, -1e30f, NAN, INFINITY};
            a->set_f(kFloats[pick(std::size(kFloats))]);
            break;
          }
          case 2:
            if (a->ints_size()) a->set_ints(static_cast<int>(pick(a->ints_size())), interesting64());
            break;
          case 3:
            if (a->ints_size() && pick(2))
              a->mutable_ints()->RemoveLast();
            else
              a->add_ints(interesting64());
            break;
          case 4:
            a->set_type(static_cast<onnx::AttributeProto::AttributeType>(pick(15)));
            break;
          default:
            a->set_name(pick(2) ? "" : "kernel_shape");
            break;
        }
        break;
      }
      case 6: {  // an initializer's dims
        if (!g->initializer_size()) break;
        onnx::TensorProto* t = g->mutable_initializer(static_cast<int>(pick(g->initializer_size())));
        if (t->dims_size() && pick(3))
          t->set_dims(static_cast<int>(pick(t->dims_size())), interesting64());
        else if (t->dims_size() && pick(2))
          t->mutable_dims()->RemoveLast();
        else
          t->add_dims(interesting64());
        break;
      }
      case 7: {  // an initializer's type or data
        if (!g->initializer_size()) break;
        onnx::TensorProto* t = g->mutable_initializer(static_cast<int>(pick(g->initializer_size())));
        switch (pick(4)) {
          case 0:
            t->set_data_type(static_cast<int32_t>(pick(20)));
            break;
          case 1:
            t->mutable_raw_data()->resize(t->raw_data().size() / 2);
            break;
          case 2:
            t->clear_raw_data();
            break;
          default:
            t->add_float_data(1.f);
            break;
        }
        break;
      }
      case 8: {  // a graph input's shape or type
        if (!g->input_size()) break;
        auto* tt =
            g->mutable_input(static_cast<int>(pick(g->input_size())))->mutable_type()->mutable_tensor_type();
        auto* shape = tt->mutable_shape();
        if (pick(4) == 0)
          tt->set_elem_type(static_cast<int32_t>(pick(20)));
        else if (shape->dim_size() && pick(3))
          shape->mutable_dim(static_cast<int>(pick(shape->dim_size())))->set_dim_value(interesting64());
        else if (shape->dim_size() && pick(2))
          shape->mutable_dim()->RemoveLast();
        else
          shape->add_dim()->set_dim_param("N");
        break;
      }
      case 9: {  // reorder, drop or repeat nodes
        int a = static_cast<int>(pick(g->node_size())), b = static_cast<int>(pick(g->node_size()));
        switch (pick(3)) {
          case 0:
            g->mutable_node()->SwapElements(a, b);
            break;
          case 1:
            g->mutable_node()->DeleteSubrange(a, 1);
            break;
          default:
            *g->add_node() = g->node(a);
            break;
        }
        break;
      }
      case 10:
        if (g->output_size()) g->mutable_output(0)->set_name(some_name(*g));
        break;
      default: {
        static const int64_t kOpsets[] = {1, 7, 9, 11, 13, 17, 99, -1};
        if (m.opset_import_size()) m.mutable_opset_import(0)->set_version(kOpsets[pick(std::size(kOpsets))]);
        break;
      }
    }
  }

  onnx::ModelProto base_;
  bool parsed_ = false;
  std::mt19937_64 rng_;
};

// Makes a mutated .nnapi file self-consistent again (size field and checksum) most of
// the time, so the mutation is judged by the parsers, not just by the checksum.
void reseal_usually(Bytes& b, std::mt19937_64& rng) {
  if (b.size() < fmt::kHeaderSize || rng() % 100 >= 85) return;
  fmt::store_u64(b.data() + fmt::kOffFileSize, b.size());
  fmt::store_u32(b.data() + fmt::kOffChecksum, fmt::file_checksum(b));
}

// ---- the run --------------------------------------------------------------------------

struct Tally {
  size_t files = 0, accepted = 0, rejected = 0, crashed = 0;
  std::map<std::string, size_t> by_code;
  std::map<std::string, size_t> reasons;  // message with digits squeezed, first 60 chars
  double seconds = 0, slowest = 0;
};

std::string reason_key(const std::string& message) {
  std::string k;
  for (char c : message) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (k.empty() || k.back() != '#') k += '#';
    } else {
      k += c;
    }
    if (k.size() >= 60) break;
  }
  return k;
}

// The input being loaded, written out if the process dies on it (a crash or a sanitizer
// report), as fuzz-failures/crash.<ext>: `nninspect` on that file reproduces it.
const uint8_t* g_current = nullptr;
size_t g_current_size = 0;
char g_crash_path[1024] = {0};

void dump_current() {
  if (!g_current || !g_crash_path[0]) return;
  int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  while (done < g_current_size) {
    ssize_t n = ::write(fd, g_current + done, g_current_size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  static const char kMsg[] = "\n[fuzz] the input that crashed was saved to ";
  [[maybe_unused]] ssize_t r = ::write(2, kMsg, sizeof kMsg - 1);
  r = ::write(2, g_crash_path, std::strlen(g_crash_path));
  r = ::write(2, "\n", 1);
}

void on_fatal_signal(int sig) {
  dump_current();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void arm_crash_dump(const std::string& extension) {
  std::filesystem::path dir = std::filesystem::path(NN_BINARY_DIR) / "fuzz-failures";
  std::filesystem::create_directories(dir);
  std::snprintf(g_crash_path, sizeof g_crash_path, "%s/crash%s", dir.c_str(), extension.c_str());
  static bool installed = false;
  if (installed) return;
  installed = true;
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_set_death_callback(dump_current);
#endif
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, on_fatal_signal);
}

// Saves a failing input as <build>/fuzz-failures/<seed>-<iteration>.<format> (at most 20 a run).
void save_failure(const std::string& format, const std::string& seed_name, size_t iteration, const Bytes& b) {
  static int saved = 0;
  if (++saved > 20) return;
  std::filesystem::path dir = std::filesystem::path(NN_BINARY_DIR) / "fuzz-failures";
  std::filesystem::create_directories(dir);
  std::filesystem::path p = dir / (std::filesystem::path(seed_name).stem().string() + "-" +
                                   std::to_string(iteration) + "." + format);
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ADD_FAILURE() << "input saved to " << p.string();
}

uint64_t rng_seed(const Seed& seed) {
  return env_size("NN_FUZZ_SEED", 20240601) ^ std::hash<std::string>{}(seed.name);
}

// What one load did. With NN_FUZZ_FORK=1 each load runs in a child process, so one crash
// is reported with its input and the run goes on to find the others (a child that dies,
// hangs past NN_FUZZ_TIMEOUT seconds or trips a sanitizer counts as a crash). Off by
// default: under ASan a fork costs ~0.2 s, and inline the first crash still leaves its
// input in fuzz-failures/crash.<format>.
struct Outcome {
  bool crashed = false;
  std::string crash;  // "signal 11", "exit 1 (sanitizer report above)", "hang"
  bool accepted = false;
  bool validates = false;
  nn::StatusCode code = nn::StatusCode::kOk;
  std::string message;
};

Outcome load_inline(const Loader& load, const Bytes& b) {
  Outcome o;
  auto result = load(b);
  if (result.is_ok()) {
    o.accepted = true;
    if (result.value()) {
      // What loaded must be a model that validates (again, on a copy).
      nn::Model copy = *result.value();
      nn::Status s = copy.validate_and_infer_shapes();
      o.validates = s.is_ok();
      o.message = s.message();
    }
  } else {
    o.code = result.status().code();
    o.message = result.status().message();
  }
  return o;
}

Outcome load_isolated(const Loader& load, const Bytes& b) {
  int fds[2];
  if (::pipe(fds) != 0) return load_inline(load, b);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return load_inline(load, b);
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(static_cast<unsigned>(env_size("NN_FUZZ_TIMEOUT", 60)));
    Outcome o = load_inline(load, b);
    std::string rec;
    rec += static_cast<char>(o.accepted);
    rec += static_cast<char>(o.validates);
    rec += static_cast<char>(o.code);
    rec += o.message;
    size_t done = 0;
    while (done < rec.size()) {
      ssize_t n = ::write(fds[1], rec.data() + done, rec.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::_exit(0);  // no atexit handlers, no gtest teardown in the child
  }
  ::close(fds[1]);
  std::string rec;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    rec.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  Outcome o;
  if (WIFSIGNALED(wstatus)) {
    o.crashed = true;
    o.crash = WTERMSIG(wstatus) == SIGALRM ? "hang" : "signal " + std::to_string(WTERMSIG(wstatus));
  } else if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0 || rec.size() < 3) {
    o.crashed = true;
    o.crash = "exit " + std::to_string(WEXITSTATUS(wstatus)) + " (sanitizer report above)";
  } else {
    o.accepted = rec[0] != 0;
    o.validates = rec[1] != 0;
    o.code = static_cast<nn::StatusCode>(rec[2]);
    o.message = rec.substr(3);
  }
  return o;
}

void run_seed(const std::string& format, const Seed& seed, const Loader& load, Tally& tally,
              const std::function<void(Bytes&, std::mt19937_64&)>& post = nullptr,
              const std::function<Bytes(size_t)>& alternate = nullptr) {
  const bool isolate = env_size("NN_FUZZ_FORK", 0) != 0;
  Mutator mutator(seed, rng_seed(seed));
  arm_crash_dump("." + format);
  for (size_t i = 0; i < seed.iterations; ++i) {
    // Every other file from the alternate (structure-aware) mutator, when there is one.
    Bytes b = alternate && i % 2 ? alternate(i) : mutator.mutate(post);
    g_current = b.data();
    g_current_size = b.size();
    auto start = std::chrono::steady_clock::now();
    Outcome o = isolate ? load_isolated(load, b) : load_inline(load, b);
    g_current = nullptr;
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tally.seconds += dt;
    tally.slowest = std::max(tally.slowest, dt);
    ++tally.files;
    const std::string where = seed.name + " mutation " + std::to_string(i);
    if (o.crashed) {
      ++tally.crashed;
      ADD_FAILURE() << where << ": the loader crashed (" << o.crash << ")";
      save_failure(format, seed.name, i, b);
    } else if (o.accepted) {
      ++tally.accepted;
      if (!o.validates) {
        ADD_FAILURE() << where << " loaded but does not validate: " << o.message;
        save_failure(format, seed.name, i, b);
      }
    } else {
      ++tally.rejected;
      ++tally.by_code[nn::status_code_name(o.code)];
      ++tally.reasons[reason_key(o.message)];
      if (o.code == nn::StatusCode::kOk || o.message.empty()) {
        ADD_FAILURE() << where << ": refused without a code and message";
        save_failure(format, seed.name, i, b);
      }
    }
  }
}

void report(const std::string& format, const std::vector<Seed>& seeds, const Tally& t) {
  std::string names;
  for (const Seed& s : seeds)
    names += (names.empty() ? "" : ", ") + s.name + " x" + std::to_string(s.iterations);
  std::printf("[fuzz] %-6s %zu mutated files (%s): %zu accepted, %zu rejected, %zu crashed", format.c_str(),
              t.files, names.c_str(), t.accepted, t.rejected, t.crashed);
  std::string codes;
  for (const auto& [code, n] : t.by_code)
    codes += (codes.empty() ? "" : ", ") + code + " " + std::to_string(n);
  std::printf(" (%s); %.2f s loading, slowest %.1f ms\n", codes.c_str(), t.seconds, t.slowest * 1e3);
  std::vector<std::pair<size_t, std::string>> top;
  for (const auto& [k, n] : t.reasons) top.push_back({n, k});
  std::sort(top.rbegin(), top.rend());
  for (size_t i = 0; i < top.size() && i < 6; ++i)
    std::printf("[fuzz]        %5zu x %s\n", top[i].first, top[i].second.c_str());
  std::fflush(stdout);
}

size_t iterations() {
  return env_size("NN_FUZZ_ITERATIONS", 1000);
}

void expect_seed_loads(const Seed& s, const Loader& load) {
  auto r = load(s.bytes);
  ASSERT_TRUE(r.is_ok()) << "seed " << s.name << " does not load: " << r.status().to_string();
}

void expect_meaningful(const std::string& format, const Tally& t) {
  EXPECT_GE(t.files, iterations()) << format;
  // Both outcomes must occur, or the mutations are not reaching the parser.
  EXPECT_GT(t.accepted, 0u) << format;
  EXPECT_GT(t.rejected, 0u) << format;
}

TEST(MutationFuzz, Nnapi) {
  for (auto t : {nn::OperationType::ADD, nn::OperationType::RELU, nn::OperationType::MUL})
    if (!nn::OpRegistry::instance().find(t))
      GTEST_SKIP() << nn::operation_type_name(t) << " not registered yet";
  std::vector<Seed> seeds;
  seeds.push_back(nnapi_seed("tiny.nnapi", tiny_ir_model(), iterations() / 2));
  std::string tflite = nn_test::asset("models/selfie_segmentation.tflite");
  if (std::filesystem::exists(tflite)) {
    auto real = nn::import_tflite_file(tflite);
    ASSERT_TRUE(real.is_ok()) << real.status().to_string();
    seeds.push_back(nnapi_seed("selfie_segmentation.nnapi", **real, iterations()));
  } else {
    seeds[0].iterations = iterations();
  }
  Loader load = [](const Bytes& b) { return nn::load_nnapi_buffer(b); };
  Tally tally;
  for (const Seed& s : seeds) {
    expect_seed_loads(s, load);
    run_seed("nnapi", s, load, tally, reseal_usually);
  }
  report("nnapi", seeds, tally);
  expect_meaningful("nnapi", tally);
}

TEST(MutationFuzz, Tflite) {
  std::vector<Seed> seeds;
  seeds.push_back(tflite_seed("tiny.tflite", tiny_tflite(), iterations() / 2));
  std::string path = nn_test::asset("models/selfie_segmentation.tflite");
  if (std::filesystem::exists(path))
    seeds.push_back(tflite_seed("selfie_segmentation.tflite", read_file(path), iterations()));
  else
    seeds[0].iterations = iterations();
  Loader load = [](const Bytes& b) { return nn::import_tflite_buffer(b, "fuzz.tflite"); };
  Tally tally;
  for (const Seed& s : seeds) {
    expect_seed_loads(s, load);
    run_seed("tflite", s, load, tally);
  }
  report("tflite", seeds, tally);
  expect_meaningful("tflite", tally);
}

TEST(MutationFuzz, Onnx) {
  // mobilenet_v2 is 14 MB: each load parses all of it (~0.5 s under ASan), so it gets a
  // tenth of the files; the small real model (the GRU denoiser) and the tiny one share the rest.
  std::vector<Seed> seeds;
  seeds.push_back(onnx_seed("tiny.onnx", tiny_onnx(), iterations() * 6 / 10));
  for (auto [name, share] : {std::pair{"gru_denoise.onnx", 3}, std::pair{"mobilenet_v2.onnx", 1}}) {
    std::string path = nn_test::asset(std::string("models/") + name);
    if (std::filesystem::exists(path))
      seeds.push_back(onnx_seed(name, read_file(path), iterations() * share / 10));
    else
      seeds[0].iterations += iterations() * share / 10;
  }
  Loader load = [](const Bytes& b) { return nn::import_onnx_buffer(b, "fuzz.onnx"); };
  Tally tally;
  for (const Seed& s : seeds) {
    expect_seed_loads(s, load);
    OnnxMutator proto(s.bytes, rng_seed(s) + 1);
    ASSERT_TRUE(proto.usable()) << s.name;
    run_seed("onnx", s, load, tally, nullptr, [&](size_t) { return proto.mutate(); });
  }
  report("onnx", seeds, tally);
  expect_meaningful("onnx", tally);
}

// Inputs the libFuzzer campaign (bench/fuzz.sh) found crashing the ONNX importer, rebuilt
// here in their smallest form: each is refused with a message naming the node and the cause.
std::string onnx_model_bytes(const std::function<void(onnx::GraphProto&)>& fill) {
  onnx::ModelProto model;
  model.set_ir_version(7);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto& g = *model.mutable_graph();
  g.set_name("regression");
  onnx::ValueInfoProto& x = *g.add_input();
  x.set_name("x");
  auto* tt = x.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int d : {1, 4}) tt->mutable_shape()->add_dim()->set_dim_value(d);
  fill(g);
  onnx::ValueInfoProto& y = *g.add_output();
  y.set_name("y");
  y.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  std::string bytes;
  model.SerializeToString(&bytes);
  return bytes;
}

std::string onnx_import_error(const std::string& bytes) {
  auto m = nn::import_onnx_buffer(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "regression");
  return m.is_ok() ? std::string("imported") : m.status().message();
}

TEST(FuzzRegressions, OnnxNodeWithoutOutputsIsRefused) {
  // Sub, Div and Gemm named their result after output(0) of an empty list.
  for (const char* op : {"Sub", "Div", "Gemm"}) {
    const std::string msg = onnx_import_error(onnx_model_bytes([&](onnx::GraphProto& g) {
      onnx::NodeProto& n = *g.add_node();
      n.set_op_type(op);
      n.add_input("x");
      n.add_input("x");
      onnx::NodeProto& id = *g.add_node();  // something that does produce the output
      id.set_op_type("Identity");
      id.add_input("x");
      id.add_output("y");
    }));
    EXPECT_NE(msg.find("the node has no outputs"), std::string::npos) << op << ": " << msg;
  }
}

TEST(FuzzRegressions, OnnxHardSigmoidWithoutInputsIsRefused) {
  // HardSigmoid read input(0) before checking there was one.
  const std::string msg = onnx_import_error(onnx_model_bytes([](onnx::GraphProto& g) {
    onnx::NodeProto& n = *g.add_node();
    n.set_op_type("HardSigmoid");
    n.add_output("y");
  }));
  EXPECT_NE(msg.find("expects one input"), std::string::npos) << msg;
}


TEST(FuzzRegressions, OnnxInitializerWithoutItsDataAllocatesNothing) {
  // An initializer whose dims ask for 2^30 floats but whose file holds none: the importer had
  // sized the tensor from the dims first (8 GB of doubles) and only then found no data.
  for (bool raw : {false, true}) {
    rusage before{};
    getrusage(RUSAGE_SELF, &before);
    const std::string msg = onnx_import_error(onnx_model_bytes([&](onnx::GraphProto& g) {
      onnx::TensorProto& w = *g.add_initializer();
      w.set_name("w");
      w.set_data_type(onnx::TensorProto::FLOAT);
      w.add_dims(65536);
      w.add_dims(16384);
      if (raw) w.set_raw_data(std::string(12, '\0'));
      onnx::NodeProto& n = *g.add_node();
      n.set_op_type("Add");
      n.add_input("x");
      n.add_input("w");
      n.add_output("y");
    }));
    rusage after{};
    getrusage(RUSAGE_SELF, &after);
    EXPECT_NE(msg.find(raw ? "raw_data holds 12 bytes" : "float_data holds 0 values"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("w"), std::string::npos) << msg;
    // ru_maxrss is in KiB; the bug touched gigabytes.
    EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256L * 1024) << "peak RSS grew by " << after.ru_maxrss - before.ru_maxrss << " KiB";
  }
}

TEST(FuzzRegressions, ModelInputOverTwoToThe31ElementsIsRefused) {
  // A .nnapi file whose input was [2^20, 2^20, 2^20] (each dim under the 2^24 cap) reaching
  // RESHAPE to [2^20 x 4]: the shape check multiplied past int64 (UBSan in the CI slice).
  // Inputs are now held to the 2^31 elements every op's output is held to.
  auto reshape_model = [](nn::Dims in_dims, std::vector<int32_t> shape) {
    nn::Model m;
    uint32_t in = m.add_tensor(nn::OperandType::TENSOR_FLOAT32, std::move(in_dims), "in");
    uint32_t out = m.add_tensor(nn::OperandType::TENSOR_FLOAT32, {}, "out");
    m.add_operation(nn::OperationType::RESHAPE,
                    {in, m.add_constant_i32({static_cast<uint32_t>(shape.size())}, shape, "shape")}, {out});
    m.inputs = {in};
    m.outputs = {out};
    return m;
  };
  constexpr int32_t k20 = 1 << 20;
  nn::Model big = reshape_model({k20, k20, k20}, {k20, k20, k20, k20});
  nn::Status s = big.validate_and_infer_shapes();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("model input 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("more than 2^31 elements"), std::string::npos) << s.message();
  // At the cap the input is taken, and the reshape's own check refuses the larger shape.
  nn::Model at_cap = reshape_model({1 << 16, 1 << 15}, {1 << 16, 1 << 15, 2});
  s = at_cap.validate_and_infer_shapes();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("holds more elements than the input"), std::string::npos) << s.message();
  nn::Model fits = reshape_model({1 << 16, 1 << 15}, {-1});
  EXPECT_TRUE(fits.validate_and_infer_shapes().is_ok());
  EXPECT_EQ(fits.operands[fits.outputs[0]].dims, (nn::Dims{1u << 31}));
}

TEST(FuzzRegressions, QuantConcatWithATinyOutputScaleStaysInRange) {
  // A quant8 CONCATENATION whose declared output scale is denormal: 0.5 / 1e-40 is inf in
  // float, q * inf - zp * inf is NaN, and NaN was cast to int (UB; every value came out 0).
  // The ratio is now taken in double: above the zero point saturates high, below it low.
  nn::Model m;
  uint32_t a = m.add_tensor(nn::OperandType::TENSOR_QUANT8_ASYMM, {1, 4}, "a");
  uint32_t b = m.add_tensor(nn::OperandType::TENSOR_QUANT8_ASYMM, {1, 4}, "b");
  for (uint32_t i : {a, b}) {
    m.operands[i].scale = 0.5f;
    m.operands[i].zero_point = 3;
  }
  uint32_t y = m.add_tensor(nn::OperandType::TENSOR_QUANT8_ASYMM, {}, "y");
  m.operands[y].scale = 1e-40f;
  m.add_operation(nn::OperationType::CONCATENATION, {a, b, m.add_scalar_i32(1)}, {y});
  m.inputs = {a, b};
  m.outputs = {y};
  ASSERT_TRUE(m.validate_and_infer_shapes().is_ok());
  ASSERT_EQ(m.operands[y].scale, 1e-40f);  // the declared scale is kept, so the inputs requantize
  const uint8_t qa[4] = {0, 3, 4, 255}, qb[4] = {2, 3, 200, 9};
  uint8_t out[8];
  std::fill(std::begin(out), std::end(out), uint8_t{77});
  const void* ins[2] = {qa, qb};
  void* outs[1] = {out};
  ASSERT_TRUE(nn::run_reference(m, ins, outs).is_ok());
  const uint8_t want[8] = {0, 0, 255, 255, 0, 0, 255, 255};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

}  // namespace
