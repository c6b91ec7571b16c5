// Deliberately wrong: a verb calling the CPU kernels itself instead of through a backend.
#include "backend/select/backend_select.h"
#include "kernels/cpu/matmul.h"  // layer violation
