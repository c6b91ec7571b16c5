// `vigil-worker bench`: prompt-processing, decode and batched-decode throughput, as JSON.
#pragma once

namespace vigil {

int bench_command(int argc, char** argv);

}  // namespace vigil
