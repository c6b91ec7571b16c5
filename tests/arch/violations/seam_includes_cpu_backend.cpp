// Deliberately wrong: the backend seam reaching down into one backend beneath it. Must not build.
#include "backend/cpu/cpu_backend.h"  // layer violation
