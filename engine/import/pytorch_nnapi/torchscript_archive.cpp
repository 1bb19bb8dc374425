#include "import/pytorch_nnapi/torchscript_archive.h"

#include <cstring>
#include <fstream>
#include <functional>

namespace nn::torchscript {

ValuePtr Value::attr(const std::string& name) const {
  for (const auto& [k, v] : dict)
    if (k && k->kind == Kind::kString && k->s == name) return v;
  return nullptr;
}

namespace {

uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t u32(const uint8_t* p) { return static_cast<uint32_t>(u16(p)) | static_cast<uint32_t>(u16(p + 2)) << 16; }
uint64_t u64(const uint8_t* p) { return static_cast<uint64_t>(u32(p)) | static_cast<uint64_t>(u32(p + 4)) << 32; }

Status bad(const std::string& path, const std::string& what) {
  return Status(StatusCode::kInvalidModel, path + ": not a TorchScript file we can read: " + what);
}

size_t storage_element_size(const std::string& cls) {
  static const std::map<std::string, size_t> sizes = {
      {"FloatStorage", 4}, {"IntStorage", 4},    {"LongStorage", 8},  {"DoubleStorage", 8}, {"HalfStorage", 2},
      {"ByteStorage", 1},  {"CharStorage", 1},   {"ShortStorage", 2}, {"BoolStorage", 1},   {"QUInt8Storage", 1},
      {"QInt8Storage", 1}, {"QInt32Storage", 4}, {"BFloat16Storage", 2}};
  auto it = sizes.find(cls);
  return it == sizes.end() ? 0 : it->second;
}

}  // namespace

Result<Archive> Archive::open(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(StatusCode::kIoError, path + ": cannot open");
  auto data = std::make_shared<std::vector<uint8_t>>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  const std::vector<uint8_t>& b = *data;
  if (b.size() < 22) return bad(path, "too short for a zip file");
  // End of central directory: the last 0x06054b50 within the final 64 KiB.
  size_t eocd = std::string::npos;
  for (size_t p = b.size() - 22 + 1; p-- > 0 && b.size() - p <= 65557;)
    if (u32(&b[p]) == 0x06054b50) {
      eocd = p;
      break;
    }
  if (eocd == std::string::npos) return bad(path, "no zip end-of-central-directory record");
  uint64_t count = u16(&b[eocd + 10]), cd_size = u32(&b[eocd + 12]), cd_offset = u32(&b[eocd + 16]);
  if (count == 0xFFFF || cd_offset == 0xFFFFFFFF) {  // zip64
    if (eocd < 20 || u32(&b[eocd - 20]) != 0x07064b50) return bad(path, "zip64 locator missing");
    uint64_t z = u64(&b[eocd - 20 + 8]);
    if (z + 56 > b.size() || u32(&b[z]) != 0x06064b50) return bad(path, "zip64 end record out of range");
    count = u64(&b[z + 32]);
    cd_size = u64(&b[z + 40]);
    cd_offset = u64(&b[z + 48]);
  }
  if (cd_offset > b.size() || cd_size > b.size() - cd_offset) return bad(path, "central directory out of range");
  Archive a;
  a.path_ = path;
  size_t p = cd_offset;
  for (uint64_t e = 0; e < count; ++e) {
    if (p + 46 > b.size() || u32(&b[p]) != 0x02014b50) return bad(path, "central directory entry " + std::to_string(e) + " corrupt");
    const uint16_t method = u16(&b[p + 10]);
    // The stored (compressed) size bounds the entry in the file; torch deflates some code/
    // and debug entries, which are never read here.
    uint64_t size = u32(&b[p + 20]);
    const uint16_t name_len = u16(&b[p + 28]), extra_len = u16(&b[p + 30]), comment_len = u16(&b[p + 32]);
    uint64_t local = u32(&b[p + 42]);
    if (p + 46 + name_len + extra_len + comment_len > b.size()) return bad(path, "central directory entry past the end");
    std::string name(reinterpret_cast<const char*>(&b[p + 46]), name_len);
    // Zip64 extra field: the 64-bit sizes/offset for the fields that read 0xFFFFFFFF.
    for (size_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
      const uint16_t id = u16(&b[x]), len = u16(&b[x + 2]);
      size_t q = x + 4;
      if (id == 0x0001) {
        // Zip64 order: uncompressed size, then compressed size, then the local header offset.
        if (u32(&b[p + 24]) == 0xFFFFFFFF && q + 8 <= x + 4 + len) q += 8;
        if (size == 0xFFFFFFFF && q + 8 <= x + 4 + len) size = u64(&b[q]), q += 8;
        if (local == 0xFFFFFFFF && q + 8 <= x + 4 + len) local = u64(&b[q]);
      }
      x += 4 + len;
    }
    if (local + 30 > b.size() || u32(&b[local]) != 0x04034b50) return bad(path, "entry " + name + ": local header out of range");
    const uint64_t data_at = local + 30 + u16(&b[local + 26]) + u16(&b[local + 28]);
    if (data_at > b.size() || size > b.size() - data_at) return bad(path, "entry " + name + " runs past the end of the file");
    a.entries_[name] = {data_at, size, method};
    if (name.size() > 9 && name.compare(name.size() - 9, 9, "/data.pkl") == 0 &&
        name.find('/') == name.size() - 9)
      a.prefix_ = name.substr(0, name.size() - 8);
    p += 46 + name_len + extra_len + comment_len;
  }
  if (a.prefix_.empty()) return bad(path, "no <name>/data.pkl entry (not a TorchScript archive)");
  a.file_ = std::move(data);
  return a;
}

Result<std::vector<uint8_t>> Archive::entry(const std::string& name) const {
  auto it = entries_.find(prefix_ + name);
  if (it == entries_.end()) return bad(path_, "missing entry " + prefix_ + name);
  // torch.jit.save stores data.pkl and tensors uncompressed (only code/ is deflated).
  if (it->second.method != 0)
    return bad(path_, "entry " + prefix_ + name + " is compressed (method " + std::to_string(it->second.method) + ")");
  const uint8_t* p = file_->data() + it->second.offset;
  return std::vector<uint8_t>(p, p + it->second.size);
}

Result<ValuePtr> Archive::load_data_pkl() const {
  NN_ASSIGN_OR_RETURN(std::vector<uint8_t> pkl, entry("data.pkl"));
  using K = Value::Kind;
  auto make = [](K kind) {
    auto v = std::make_shared<Value>();
    v->kind = kind;
    return v;
  };
  std::vector<ValuePtr> stack;
  std::vector<size_t> marks;
  std::map<uint32_t, ValuePtr> memo;
  size_t p = 0;
  const std::string where = path_ + ": data.pkl";
  auto need = [&](size_t n) { return p + n <= pkl.size(); };
  auto pop = [&]() -> ValuePtr {
    if (stack.empty()) return nullptr;
    ValuePtr v = stack.back();
    stack.pop_back();
    return v;
  };
  auto pop_mark = [&](std::vector<ValuePtr>* items) -> bool {
    if (marks.empty() || marks.back() > stack.size()) return false;
    items->assign(stack.begin() + static_cast<std::ptrdiff_t>(marks.back()), stack.end());
    stack.resize(marks.back());
    marks.pop_back();
    return true;
  };
  // Tensors: torch._utils._rebuild_tensor_v2 / _rebuild_qtensor(storage, offset, sizes, strides, ...).
  auto rebuild_tensor = [&](const std::vector<ValuePtr>& args) -> Result<ValuePtr> {
    if (args.size() < 4 || !args[0] || args[0]->kind != K::kStorage || args[2]->kind != K::kTuple ||
        args[3]->kind != K::kTuple)
      return Status(StatusCode::kInvalidModel, where + ": malformed tensor");
    const Value& storage = *args[0];
    auto t = std::make_shared<Tensor>();
    t->dtype = storage.s;
    t->element_size = storage_element_size(storage.s);
    if (!t->element_size) return Status(StatusCode::kInvalidModel, where + ": unknown storage type " + storage.s);
    NN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, entry("data/" + storage.storage_key));
    if (bytes.size() < static_cast<uint64_t>(storage.storage_numel) * t->element_size)
      return Status(StatusCode::kInvalidModel, where + ": storage " + storage.storage_key + " is short");
    std::vector<int64_t> strides;
    for (const auto& s : args[2]->items) t->sizes.push_back(s->i);
    for (const auto& s : args[3]->items) strides.push_back(s->i);
    if (strides.size() != t->sizes.size()) return Status(StatusCode::kInvalidModel, where + ": sizes and strides differ in rank");
    int64_t numel = 1;
    for (int64_t s : t->sizes) {
      if (s < 0 || s > (int64_t{1} << 28)) return Status(StatusCode::kInvalidModel, where + ": tensor size out of range");
      numel *= s;
      if (numel > (int64_t{1} << 28)) return Status(StatusCode::kInvalidModel, where + ": tensor too large");
    }
    t->bytes.resize(static_cast<size_t>(numel) * t->element_size);
    const int64_t offset = args[1]->i;
    std::vector<int64_t> idx(t->sizes.size(), 0);
    for (int64_t e = 0; e < numel; ++e) {
      int64_t src = offset;
      for (size_t d = 0; d < idx.size(); ++d) src += idx[d] * strides[d];
      if (src < 0 || src >= storage.storage_numel)
        return Status(StatusCode::kInvalidModel, where + ": tensor view outside its storage");
      std::memcpy(&t->bytes[static_cast<size_t>(e) * t->element_size], &bytes[static_cast<size_t>(src) * t->element_size],
                  t->element_size);
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < t->sizes[d]) break;
        idx[d] = 0;
      }
    }
    auto v = make(K::kTensor);
    v->tensor = std::move(t);
    return v;
  };
  while (p < pkl.size()) {
    const uint8_t op = pkl[p++];
    switch (op) {
      case 0x80: p += 1; break;  // PROTO
      case '.': {                // STOP
        ValuePtr root = pop();
        if (!root) return Status(StatusCode::kInvalidModel, where + ": empty pickle");
        return root;
      }
      case 'c': {  // GLOBAL "module\nname\n"
        size_t a = p;
        while (p < pkl.size() && pkl[p] != '\n') ++p;
        size_t b = ++p;
        while (p < pkl.size() && pkl[p] != '\n') ++p;
        if (p >= pkl.size()) return Status(StatusCode::kInvalidModel, where + ": truncated GLOBAL");
        auto g = make(K::kGlobal);
        g->s = std::string(pkl.begin() + a, pkl.begin() + b - 1) + "." + std::string(pkl.begin() + b, pkl.begin() + p);
        ++p;
        stack.push_back(g);
        break;
      }
      // Memo: BINPUT / LONG_BINPUT store the top, BINGET / LONG_BINGET push a stored one
      // (an index never stored is malformed, so the stack never holds null).
      case 'q': case 'r': {
        const size_t n = op == 'q' ? 1 : 4;
        if (!need(n)) goto truncated;
        if (stack.empty()) goto malformed;
        memo[op == 'q' ? pkl[p] : u32(&pkl[p])] = stack.back();
        p += n;
        break;
      }
      case 'h': case 'j': {
        const size_t n = op == 'h' ? 1 : 4;
        if (!need(n)) goto truncated;
        auto it = memo.find(op == 'h' ? pkl[p] : u32(&pkl[p]));
        if (it == memo.end()) goto malformed;
        stack.push_back(it->second);
        p += n;
        break;
      }
      case '(': marks.push_back(stack.size()); break;
      case ')': stack.push_back(make(K::kTuple)); break;
      case ']': stack.push_back(make(K::kList)); break;
      case '}': stack.push_back(make(K::kDict)); break;
      case 'N': stack.push_back(make(K::kNone)); break;
      case 0x88: case 0x89: { auto v = make(K::kBool); v->b = op == 0x88; stack.push_back(v); break; }
      case 'K': { if (!need(1)) goto truncated; auto v = make(K::kInt); v->i = pkl[p]; p += 1; stack.push_back(v); break; }
      case 'M': { if (!need(2)) goto truncated; auto v = make(K::kInt); v->i = u16(&pkl[p]); p += 2; stack.push_back(v); break; }
      case 'J': { if (!need(4)) goto truncated; auto v = make(K::kInt); v->i = static_cast<int32_t>(u32(&pkl[p])); p += 4; stack.push_back(v); break; }
      case 0x8a: {  // LONG1: little-endian two's complement of n bytes
        if (!need(1)) goto truncated;
        const uint8_t n = pkl[p++];
        if (!need(n) || n > 8) goto truncated;
        uint64_t u = 0;
        for (uint8_t k = 0; k < n; ++k) u |= static_cast<uint64_t>(pkl[p + k]) << (8 * k);
        if (n && n < 8 && (pkl[p + n - 1] & 0x80)) u |= ~uint64_t{0} << (8 * n);
        p += n;
        auto v = make(K::kInt);
        v->i = static_cast<int64_t>(u);
        stack.push_back(v);
        break;
      }
      case 'G': {  // BINFLOAT, big-endian double
        if (!need(8)) goto truncated;
        uint64_t u = 0;
        for (int k = 0; k < 8; ++k) u = u << 8 | pkl[p + k];
        p += 8;
        auto v = make(K::kFloat);
        std::memcpy(&v->f, &u, 8);
        stack.push_back(v);
        break;
      }
      case 'X': {  // BINUNICODE
        if (!need(4)) goto truncated;
        const uint32_t n = u32(&pkl[p]);
        p += 4;
        if (!need(n)) goto truncated;
        auto v = make(K::kString);
        v->s.assign(reinterpret_cast<const char*>(&pkl[p]), n);
        p += n;
        stack.push_back(v);
        break;
      }
      case 't': case 'l': {  // TUPLE, LIST
        auto v = make(op == 't' ? K::kTuple : K::kList);
        if (!pop_mark(&v->items)) goto malformed;
        stack.push_back(v);
        break;
      }
      case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
        const size_t n = op - 0x84u;
        if (stack.size() < n) goto malformed;
        auto v = make(K::kTuple);
        v->items.assign(stack.end() - static_cast<std::ptrdiff_t>(n), stack.end());
        stack.resize(stack.size() - n);
        stack.push_back(v);
        break;
      }
      case 'a': { ValuePtr x = pop(); if (stack.empty() || !x) goto malformed; stack.back()->items.push_back(x); break; }
      case 'e': {  // APPENDS
        std::vector<ValuePtr> items;
        if (!pop_mark(&items) || stack.empty()) goto malformed;
        stack.back()->items.insert(stack.back()->items.end(), items.begin(), items.end());
        break;
      }
      case 's': {
        ValuePtr v = pop(), k = pop();
        if (!k || stack.empty()) goto malformed;
        stack.back()->dict.emplace_back(k, v);
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<ValuePtr> items;
        if (!pop_mark(&items) || stack.empty() || items.size() % 2) goto malformed;
        for (size_t k = 0; k < items.size(); k += 2) stack.back()->dict.emplace_back(items[k], items[k + 1]);
        break;
      }
      case 'Q': {  // BINPERSID: ('storage', storage class, key, location, numel)
        ValuePtr pid = pop();
        if (!pid || pid->kind != K::kTuple || pid->items.size() < 5 || pid->items[1]->kind != K::kGlobal)
          return Status(StatusCode::kInvalidModel, where + ": unknown persistent id");
        auto v = make(K::kStorage);
        const std::string& cls = pid->items[1]->s;
        v->s = cls.substr(cls.find_last_of('.') + 1);
        v->storage_key = pid->items[2]->s;
        v->storage_numel = pid->items[4]->i;
        stack.push_back(v);
        break;
      }
      case 0x81: {  // NEWOBJ cls args
        ValuePtr args = pop(), cls = pop();
        if (!cls || cls->kind != K::kGlobal) goto malformed;
        auto v = make(K::kObject);
        v->s = cls->s;
        stack.push_back(v);
        break;
      }
      case 'R': {  // REDUCE callable args
        ValuePtr args = pop(), fn = pop();
        if (!fn || !args || fn->kind != K::kGlobal || args->kind != K::kTuple) goto malformed;
        // A quantized tensor (_rebuild_qtensor) has the same leading (storage, offset,
        // sizes, strides); its quantizer parameters are not needed here (the serialized NNAPI
        // model carries each operand's scale and zero point).
        if (fn->s == "torch._utils._rebuild_tensor_v2" || fn->s == "torch._utils._rebuild_qtensor") {
          NN_ASSIGN_OR_RETURN(ValuePtr t, rebuild_tensor(args->items));
          stack.push_back(t);
        } else if (fn->s == "collections.OrderedDict") {
          stack.push_back(make(K::kDict));
        } else if (fn->s.rfind("torch.jit._pickle.build_", 0) == 0 && args->items.size() == 1) {
          stack.push_back(args->items[0]);  // build_tensorlist / intlist / doublelist / boollist
        } else {
          auto v = make(K::kObject);
          v->s = fn->s;
          v->items = args->items;
          stack.push_back(v);
        }
        break;
      }
      case 'b': {  // BUILD obj state
        ValuePtr state = pop();
        if (stack.empty() || !state) goto malformed;
        if (state->kind == K::kDict) stack.back()->dict = state->dict;
        break;
      }
      default:
        return Status(StatusCode::kInvalidModel,
                      where + ": pickle opcode 0x" + [&] { char h[3]; std::snprintf(h, 3, "%02x", op); return std::string(h); }() +
                          " at byte " + std::to_string(p - 1) + " is not supported");
    }
  }
truncated:
  return Status(StatusCode::kInvalidModel, where + ": truncated at byte " + std::to_string(p));
malformed:
  return Status(StatusCode::kInvalidModel, where + ": malformed pickle at byte " + std::to_string(p - 1));
}

}  // namespace nn::torchscript
