// Deliberately wrong: the engine building a concrete backend instead of being handed one. Must not
// build (vigil_engine does not link the CPU backend) and check_layers.py must flag it.
#include "backend/forward_backend.h"
#include "backend/cpu/cpu_backend.h"  // layer violation
