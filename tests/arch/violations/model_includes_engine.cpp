// Deliberately wrong: the model layer reaching up into the engine. Must not build.
#include "engine/engine.h"  // layer violation
