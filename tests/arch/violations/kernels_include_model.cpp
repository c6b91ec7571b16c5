// Deliberately wrong: a kernel reaching up into the model. Must not build.
#include "model/llama_model.h"  // layer violation
