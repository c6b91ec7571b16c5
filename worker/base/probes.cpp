// Semaphores of the `vigil` USDT probes: tracers find them through the .note.stapsdt entries.
#include "base/probes.h"

extern "C" {
#define VIGIL_DEFINE_SEMAPHORE(name) \
  __attribute__((section(".probes"), used)) unsigned short vigil_##name##_semaphore = 0;
VIGIL_PROBE_LIST(VIGIL_DEFINE_SEMAPHORE)
#undef VIGIL_DEFINE_SEMAPHORE
}
