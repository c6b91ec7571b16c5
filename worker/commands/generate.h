// `vigil-worker generate`: runs one prompt through the model and streams the text to stdout.
#pragma once

namespace vigil {

// Parses its own flags (argv[0] is "generate"); returns the process exit code.
int generate_command(int argc, char** argv);

}  // namespace vigil
