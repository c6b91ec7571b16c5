// USDT probes of provider `vigil` (the agent's contract, documented in docs/probes.md).
//
// Each probe has a semaphore: a tracer attaching to it increments the counter, so when nothing is
// attached a probe site costs one predictable branch and its arguments are never computed.
#pragma once

#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#define VIGIL_PROBE_LIST(X)   \
  X(request_arrive)           \
  X(request_first_token)      \
  X(request_finish)           \
  X(request_preempt)          \
  X(scheduler_step)           \
  X(step_budget)              \
  X(alloc_segment_alloc)      \
  X(alloc_segment_free)       \
  X(alloc_block_alloc)        \
  X(alloc_block_free)         \
  X(alloc_snapshot)           \
  X(cuda_graph_capture)       \
  X(cuda_graph_instantiate)   \
  X(cuda_graph_launch)        \
  X(collective_begin)         \
  X(collective_end)

#define VIGIL_DECLARE_SEMAPHORE(name) extern "C" unsigned short vigil_##name##_semaphore;
VIGIL_PROBE_LIST(VIGIL_DECLARE_SEMAPHORE)
#undef VIGIL_DECLARE_SEMAPHORE

// VIGIL_PROBE(name, args...): fires probe vigil:name when a tracer is attached.
#define VIGIL_PROBE(name, ...)                                     \
  do {                                                             \
    if (__builtin_expect(vigil_##name##_semaphore != 0, 0)) {      \
      DTRACE_PROBE_VIGIL(name, __VA_ARGS__);                       \
    }                                                              \
  } while (0)

// Picks STAP_PROBEn by argument count (1 to 7 arguments).
#define VIGIL_PROBE_N(_1, _2, _3, _4, _5, _6, _7, N, ...) N
#define DTRACE_PROBE_VIGIL(name, ...)                                                                     \
  VIGIL_PROBE_N(__VA_ARGS__, STAP_PROBE7, STAP_PROBE6, STAP_PROBE5, STAP_PROBE4, STAP_PROBE3, STAP_PROBE2, \
                STAP_PROBE1, )(vigil, name, __VA_ARGS__)
