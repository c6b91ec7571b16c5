// GGML tensor types as stored in GGUF files: ids, names and block layouts (ggml/include/ggml.h).
#include "base/ggml_types.h"

namespace vigil {

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t id) {
  switch (static_cast<GgmlType>(id)) {
    case GgmlType::F32: return GgmlTypeTraits{"F32", 1, 4};
    case GgmlType::F16: return GgmlTypeTraits{"F16", 1, 2};
    case GgmlType::Q4_0: return GgmlTypeTraits{"Q4_0", 32, 18};
    case GgmlType::Q4_1: return GgmlTypeTraits{"Q4_1", 32, 20};
    case GgmlType::Q5_0: return GgmlTypeTraits{"Q5_0", 32, 22};
    case GgmlType::Q5_1: return GgmlTypeTraits{"Q5_1", 32, 24};
    case GgmlType::Q8_0: return GgmlTypeTraits{"Q8_0", 32, 34};
    case GgmlType::Q8_1: return GgmlTypeTraits{"Q8_1", 32, 36};
    case GgmlType::Q2_K: return GgmlTypeTraits{"Q2_K", 256, 84};
    case GgmlType::Q3_K: return GgmlTypeTraits{"Q3_K", 256, 110};
    case GgmlType::Q4_K: return GgmlTypeTraits{"Q4_K", 256, 144};
    case GgmlType::Q5_K: return GgmlTypeTraits{"Q5_K", 256, 176};
    case GgmlType::Q6_K: return GgmlTypeTraits{"Q6_K", 256, 210};
    case GgmlType::Q8_K: return GgmlTypeTraits{"Q8_K", 256, 292};
    case GgmlType::I8: return GgmlTypeTraits{"I8", 1, 1};
    case GgmlType::I16: return GgmlTypeTraits{"I16", 1, 2};
    case GgmlType::I32: return GgmlTypeTraits{"I32", 1, 4};
    case GgmlType::I64: return GgmlTypeTraits{"I64", 1, 8};
    case GgmlType::F64: return GgmlTypeTraits{"F64", 1, 8};
    case GgmlType::BF16: return GgmlTypeTraits{"BF16", 1, 2};
  }
  return std::nullopt;
}

std::string_view ggml_type_name(GgmlType type) {
  auto t = ggml_type_traits(static_cast<uint32_t>(type));
  return t ? t->name : std::string_view("unknown");
}

}  // namespace vigil
