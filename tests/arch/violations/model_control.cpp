// The control: the model layer including itself and the layer below builds.
#include "base/ggml_types.h"
#include "model/llama_graph.h"
