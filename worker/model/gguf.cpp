// GGUF v2/v3 reader (ggml/docs/gguf.md): metadata and tensor inventory over a memory map, zero-copy.
#include "model/gguf.h"

#include <cstring>

namespace vigil {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 4;
// Larger than any real model's tensor, far below what would overflow the byte counts.
constexpr uint64_t kMaxElements = uint64_t{1} << 40;

// Bounds-checked little-endian cursor; every read names what it was reading when it fails.
class Cursor {
 public:
  Cursor(const GgufFile& file, std::span<const uint8_t> bytes) : file_(file), bytes_(bytes) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  const uint8_t* here() const { return bytes_.data() + pos_; }

  void need(uint64_t n, const char* what) const {
    if (n > remaining())
      file_.fail(std::string("truncated: ") + what + " needs " + std::to_string(n) +
                 " bytes at offset " + std::to_string(pos_) + ", file has " +
                 std::to_string(remaining()) + " left");
  }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, here(), sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string_view read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    need(len, what);
    std::string_view s(reinterpret_cast<const char*>(here()), len);
    pos_ += len;
    return s;
  }

  void skip(uint64_t n, const char* what) {
    need(n, what);
    pos_ += n;
  }

 private:
  const GgufFile& file_;
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

uint64_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL: return 1;
    case GgufValueType::UINT16:
    case GgufValueType::INT16: return 2;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32: return 4;
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
    case GgufValueType::FLOAT64: return 8;
    case GgufValueType::STRING:
    case GgufValueType::ARRAY: return 0;
  }
  return 0;
}

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::FLOAT64); }

void decode_scalar(GgufValueType t, const uint8_t* p, GgufValue& v) {
  switch (t) {
    case GgufValueType::UINT8: v.u = p[0]; break;
    case GgufValueType::INT8: v.i = static_cast<int8_t>(p[0]); break;
    case GgufValueType::BOOL: v.u = p[0] != 0; break;
    case GgufValueType::UINT16: { uint16_t x; std::memcpy(&x, p, 2); v.u = x; break; }
    case GgufValueType::INT16: { int16_t x; std::memcpy(&x, p, 2); v.i = x; break; }
    case GgufValueType::UINT32: { uint32_t x; std::memcpy(&x, p, 4); v.u = x; break; }
    case GgufValueType::INT32: { int32_t x; std::memcpy(&x, p, 4); v.i = x; break; }
    case GgufValueType::FLOAT32: { float x; std::memcpy(&x, p, 4); v.f = x; break; }
    case GgufValueType::UINT64: std::memcpy(&v.u, p, 8); break;
    case GgufValueType::INT64: std::memcpy(&v.i, p, 8); break;
    case GgufValueType::FLOAT64: std::memcpy(&v.f, p, 8); break;
    case GgufValueType::STRING:
    case GgufValueType::ARRAY: break;
  }
}

bool is_unsigned(GgufValueType t) {
  return t == GgufValueType::UINT8 || t == GgufValueType::UINT16 || t == GgufValueType::UINT32 ||
         t == GgufValueType::UINT64;
}
bool is_signed(GgufValueType t) {
  return t == GgufValueType::INT8 || t == GgufValueType::INT16 || t == GgufValueType::INT32 ||
         t == GgufValueType::INT64;
}
bool is_float(GgufValueType t) {
  return t == GgufValueType::FLOAT32 || t == GgufValueType::FLOAT64;
}

// Reads one value of type t (after its type tag); arrays recurse up to kMaxArrayDepth.
GgufValue read_value(Cursor& c, const GgufFile& file, GgufValueType t, std::string_view key,
                     int depth) {
  GgufValue v;
  v.type = t;
  if (t == GgufValueType::STRING) {
    v.str = c.read_string("metadata string");
    return v;
  }
  if (t != GgufValueType::ARRAY) {
    uint64_t n = scalar_size(t);
    c.need(n, "metadata value");
    decode_scalar(t, c.here(), v);
    c.skip(n, "metadata value");
    return v;
  }
  if (depth >= kMaxArrayDepth)
    file.fail("metadata '" + std::string(key) + "': arrays nested deeper than " +
              std::to_string(kMaxArrayDepth));
  uint32_t et = c.read<uint32_t>("array element type");
  if (!known_value_type(et))
    file.fail("metadata '" + std::string(key) + "': unknown array element type " +
              std::to_string(et));
  v.elem_type = static_cast<GgufValueType>(et);
  v.count = c.read<uint64_t>("array length");
  if (v.elem_type == GgufValueType::STRING) {
    // Each string needs at least its 8-byte length: bounds the reservation by the file size.
    if (v.count > c.remaining() / 8)
      file.fail("metadata '" + std::string(key) + "': array of " + std::to_string(v.count) +
                " strings cannot fit in the " + std::to_string(c.remaining()) + " bytes left");
    v.strings.reserve(v.count);
    for (uint64_t k = 0; k < v.count; ++k) v.strings.push_back(c.read_string("array string"));
  } else if (v.elem_type == GgufValueType::ARRAY) {
    if (v.count > c.remaining() / 12)
      file.fail("metadata '" + std::string(key) + "': array of " + std::to_string(v.count) +
                " arrays cannot fit in the file");
    for (uint64_t k = 0; k < v.count; ++k) {
      uint32_t inner = c.read<uint32_t>("nested array type");
      if (inner != static_cast<uint32_t>(GgufValueType::ARRAY))
        file.fail("metadata '" + std::string(key) + "': nested array element has type " +
                  std::to_string(inner));
      read_value(c, file, GgufValueType::ARRAY, key, depth + 1);
    }
  } else {
    uint64_t size = scalar_size(v.elem_type);
    if (v.count > c.remaining() / size)
      file.fail("metadata '" + std::string(key) + "': array of " + std::to_string(v.count) +
                " elements runs past the end of the file");
    v.raw = c.here();
    c.skip(v.count * size, "array elements");
  }
  return v;
}

std::string shape_of(std::initializer_list<uint64_t> shape) {
  std::string s = "[";
  for (auto it = shape.begin(); it != shape.end(); ++it) {
    if (it != shape.begin()) s += ", ";
    s += std::to_string(*it);
  }
  return s + "]";
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
  static constexpr std::string_view names[] = {"u8",  "i8",   "u16",    "i16", "u32",
                                               "i32", "f32",  "bool",   "str", "array",
                                               "u64", "i64",  "f64"};
  auto i = static_cast<uint32_t>(type);
  return i < std::size(names) ? names[i] : "unknown";
}

std::string GgufTensor::shape_string() const {
  std::string s = "[";
  for (uint32_t d = 0; d < n_dims; ++d) {
    if (d) s += ", ";
    s += std::to_string(ne[d]);
  }
  return s + "]";
}

void GgufFile::fail(const std::string& what) const { throw GgufError(name_ + ": " + what); }

GgufFile GgufFile::open(const std::string& path, WeightsPlacement placement) {
  auto map = std::make_shared<MappedFile>(path, placement);
  GgufFile f = parse(map->bytes(), path);
  f.map_ = std::move(map);
  return f;
}

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, const std::string& name) {
  GgufFile f;
  f.bytes_ = bytes;
  f.name_ = name;
  f.parse_all();
  return f;
}

void GgufFile::parse_all() {
  Cursor c(*this, bytes_);
  uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) fail("not a GGUF file (bad magic)");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    fail("unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)");
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key-value pair takes at least 8 + 1 + 4 + 1 bytes, a tensor info at least 8 + 1 + 4 + 4 + 8.
  if (n_kv > c.remaining() / 14)
    fail("metadata count " + std::to_string(n_kv) + " cannot fit in a " +
         std::to_string(bytes_.size()) + "-byte file");
  if (n_tensors > c.remaining() / 25)
    fail("tensor count " + std::to_string(n_tensors) + " cannot fit in a " +
         std::to_string(bytes_.size()) + "-byte file");

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key(c.read_string("metadata key"));
    uint32_t t = c.read<uint32_t>("metadata type");
    if (!known_value_type(t))
      fail("metadata '" + key + "' has unknown value type " + std::to_string(t));
    GgufValue v = read_value(c, *this, static_cast<GgufValueType>(t), key, 0);
    if (!metadata_.emplace(key, std::move(v)).second) fail("metadata key '" + key + "' repeated");
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (!is_unsigned(a->type) || a->u == 0 || (a->u & (a->u - 1)) != 0 || a->u > 65536)
      fail("general.alignment must be a power of two up to 65536");
    alignment_ = a->u;
  }

  tensors_.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = std::string(c.read_string("tensor name"));
    t.n_dims = c.read<uint32_t>("tensor dimension count");
    if (t.n_dims == 0 || t.n_dims > kMaxDims)
      fail("tensor '" + t.name + "' has " + std::to_string(t.n_dims) + " dimensions (1 to 4 allowed)");
    uint64_t n = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      t.ne[d] = c.read<uint64_t>("tensor dimension");
      if (t.ne[d] == 0 || t.ne[d] > kMaxElements || n > kMaxElements / t.ne[d])
        fail("tensor '" + t.name + "' has an absurd shape (dimension " + std::to_string(d) + " = " +
             std::to_string(t.ne[d]) + ")");
      n *= t.ne[d];
    }
    uint32_t type = c.read<uint32_t>("tensor type");
    auto traits = ggml_type_traits(type);
    if (!traits) fail("tensor '" + t.name + "' has unknown type " + std::to_string(type));
    t.type = static_cast<GgmlType>(type);
    if (t.ne[0] % traits->block_size != 0)
      fail("tensor '" + t.name + "' row of " + std::to_string(t.ne[0]) + " is not a multiple of " +
           std::string(traits->name) + "'s block of " + std::to_string(traits->block_size));
    t.n_bytes = n / traits->block_size * traits->type_size;
    t.offset = c.read<uint64_t>("tensor offset");
    if (t.offset % alignment_ != 0)
      fail("tensor '" + t.name + "' offset " + std::to_string(t.offset) + " is not aligned to " +
           std::to_string(alignment_));
    if (tensor_index_.count(t.name)) fail("tensor '" + t.name + "' appears twice");
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (data_offset_ > bytes_.size() && !tensors_.empty())
    fail("data section starts at " + std::to_string(data_offset_) + ", past the end of the file");
  uint64_t data_size = bytes_.size() - std::min<uint64_t>(data_offset_, bytes_.size());
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      fail("tensor '" + t.name + "' data [" + std::to_string(t.offset) + ", " +
           std::to_string(t.offset + t.n_bytes) + ") runs past the end of the data section (" +
           std::to_string(data_size) + " bytes)");
    t.data = bytes_.data() + data_offset_ + t.offset;
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
[[noreturn]] void wrong_type(const GgufFile& f, std::string_view key, GgufValueType got,
                             const char* want) {
  f.fail("metadata '" + std::string(key) + "' is " + std::string(gguf_value_type_name(got)) +
         ", expected " + want);
}
}  // namespace

uint64_t GgufFile::get_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + std::string(key) + "' not found");
  if (is_unsigned(v->type)) return v->u;
  if (is_signed(v->type) && v->i >= 0) return static_cast<uint64_t>(v->i);
  wrong_type(*this, key, v->type, "an unsigned integer");
}

double GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + std::string(key) + "' not found");
  if (!is_float(v->type)) wrong_type(*this, key, v->type, "a float");
  return v->f;
}

bool GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + std::string(key) + "' not found");
  if (v->type != GgufValueType::BOOL) wrong_type(*this, key, v->type, "a bool");
  return v->u != 0;
}

std::string_view GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + std::string(key) + "' not found");
  if (v->type != GgufValueType::STRING) wrong_type(*this, key, v->type, "a string");
  return v->str;
}

std::span<const std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + std::string(key) + "' not found");
  if (v->type != GgufValueType::ARRAY || v->elem_type != GgufValueType::STRING)
    wrong_type(*this, key, v->type, "an array of strings");
  return v->strings;
}

std::vector<int32_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + std::string(key) + "' not found");
  if (v->type != GgufValueType::ARRAY ||
      !(is_signed(v->elem_type) || is_unsigned(v->elem_type)) ||
      scalar_size(v->elem_type) > 4)
    wrong_type(*this, key, v->type, "an array of 8-32 bit integers");
  std::vector<int32_t> out(v->count);
  uint64_t size = scalar_size(v->elem_type);
  for (uint64_t k = 0; k < v->count; ++k) {
    GgufValue e;
    decode_scalar(v->elem_type, v->raw + k * size, e);
    out[k] = is_signed(v->elem_type) ? static_cast<int32_t>(e.i) : static_cast<int32_t>(e.u);
  }
  return out;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail("metadata '" + std::string(key) + "' not found");
  if (v->type != GgufValueType::ARRAY || !is_float(v->elem_type))
    wrong_type(*this, key, v->type, "an array of floats");
  std::vector<float> out(v->count);
  uint64_t size = scalar_size(v->elem_type);
  for (uint64_t k = 0; k < v->count; ++k) {
    GgufValue e;
    decode_scalar(v->elem_type, v->raw + k * size, e);
    out[k] = static_cast<float>(e.f);
  }
  return out;
}

uint64_t GgufFile::get_uint_or(std::string_view key, uint64_t fallback) const {
  return find(key) ? get_uint(key) : fallback;
}
double GgufFile::get_float_or(std::string_view key, double fallback) const {
  return find(key) ? get_float(key) : fallback;
}

const GgufTensor& GgufFile::require_tensor(std::string_view name,
                                           std::initializer_list<uint64_t> shape) const {
  const GgufTensor* t = find_tensor(name);
  if (!t) fail("tensor '" + std::string(name) + "' not found in the model");
  bool ok = shape.size() >= t->n_dims;
  size_t d = 0;
  for (uint64_t want : shape) ok = ok && t->ne[d++] == want;
  if (!ok) fail("tensor '" + std::string(name) + "' has shape " + t->shape_string() + ", expected " + shape_of(shape));
  return *t;
}

}  // namespace vigil
