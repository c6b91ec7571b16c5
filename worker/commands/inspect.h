// `vigil-worker inspect MODEL`: prints a GGUF file's metadata and tensor inventory.
#pragma once

#include <cstdio>
#include <string>

namespace vigil {

// Throws GgufError for malformed files.
void inspect_model(const std::string& path, std::FILE* out);

}  // namespace vigil
