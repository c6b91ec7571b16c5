// `vigil-worker inspect MODEL`: prints a GGUF file's metadata and tensor inventory.
#include "commands/inspect.h"

#include <map>

#include "model/gguf.h"

namespace vigil {
namespace {

std::string value_text(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::UINT8:
    case GgufValueType::UINT16:
    case GgufValueType::UINT32:
    case GgufValueType::UINT64: return std::to_string(v.u);
    case GgufValueType::INT8:
    case GgufValueType::INT16:
    case GgufValueType::INT32:
    case GgufValueType::INT64: return std::to_string(v.i);
    case GgufValueType::FLOAT32:
    case GgufValueType::FLOAT64: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", v.f);
      return buf;
    }
    case GgufValueType::BOOL: return v.u ? "true" : "false";
    case GgufValueType::STRING: {
      std::string s(v.str.substr(0, 80));
      for (char& ch : s)
        if (ch == '\n') ch = ' ';
      return "\"" + s + (v.str.size() > 80 ? "...\"" : "\"");
    }
    case GgufValueType::ARRAY: {
      std::string s = std::string(gguf_value_type_name(v.elem_type)) + "[" + std::to_string(v.count) + "]";
      if (!v.strings.empty()) s += " first: \"" + std::string(v.strings[0].substr(0, 40)) + "\"";
      return s;
    }
  }
  return "?";
}

}  // namespace

void inspect_model(const std::string& path, std::FILE* out) {
  GgufFile f = GgufFile::open(path);
  std::fprintf(out, "file: %s\nversion: %u\nsize: %llu bytes\nalignment: %llu\ndata offset: %llu\n",
               path.c_str(), f.version(), static_cast<unsigned long long>(f.file_size()),
               static_cast<unsigned long long>(f.alignment()),
               static_cast<unsigned long long>(f.data_offset()));
  std::fprintf(out, "\nmetadata (%zu):\n", f.metadata().size());
  for (const auto& [key, value] : f.metadata())
    std::fprintf(out, "  %-44s %-6s %s\n", key.c_str(),
                 std::string(gguf_value_type_name(value.type)).c_str(), value_text(value).c_str());

  std::map<std::string_view, std::pair<unsigned, uint64_t>> by_type;
  uint64_t total = 0;
  std::fprintf(out, "\ntensors (%zu):\n", f.tensors().size());
  for (const auto& t : f.tensors()) {
    auto type = ggml_type_name(t.type);
    std::fprintf(out, "  %-32s %-5s %-16s %12llu bytes\n", t.name.c_str(), std::string(type).c_str(),
                 t.shape_string().c_str(), static_cast<unsigned long long>(t.n_bytes));
    by_type[type].first++;
    by_type[type].second += t.n_bytes;
    total += t.n_bytes;
  }
  std::fprintf(out, "\nby type:\n");
  for (const auto& [type, count_bytes] : by_type)
    std::fprintf(out, "  %-5s %4u tensors %12llu bytes\n", std::string(type).c_str(), count_bytes.first,
                 static_cast<unsigned long long>(count_bytes.second));
  std::fprintf(out, "  total %12llu bytes\n", static_cast<unsigned long long>(total));
}

}  // namespace vigil
