#include "export/exposition.h"

#include <prometheus/text_serializer.h>

#include <sstream>

#include "collectors/label_value.h"

namespace vigil::agent {

std::string render_exposition(std::vector<prometheus::MetricFamily>& families) {
  for (auto& family : families)
    for (auto& metric : family.metric)
      for (auto& label : metric.label) label.value = valid_utf8(label.value);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace vigil::agent
