// `vigil-worker serve`: the OpenAI-compatible HTTP server in front of the engine.
#pragma once

namespace vigil {

// argv[0] is "serve". Returns the process exit code: 0 after a drain, 2 for bad flags or config.
int serve_command(int argc, char** argv);

}  // namespace vigil
