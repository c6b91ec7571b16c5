// The endpoint's series have fixed label sets (every status code and reason the endpoint can
// produce), exported from the first scrape at 0, so a rate() sees the first cut.
#include "collectors/endpoint_collector.h"

#include <string>

#include "collectors/metric_builder.h"

namespace vigil::agent {

using prometheus::MetricType;

std::vector<prometheus::MetricFamily> EndpointCollector::Collect() const {
  auto open = make_family("vigil_agent_http_connections", "Connections open to the agent's HTTP endpoint.",
                          MetricType::Gauge);
  add_sample(open, {}, static_cast<double>(http_.open_connections()));
  auto answers = make_family("vigil_agent_http_requests_total",
                             "Answers the agent's HTTP endpoint wrote in full, by status code.", MetricType::Counter);
  for (size_t i = 0; i < kHttpStatusCodes.size(); ++i)
    add_sample(answers, {{"code", std::to_string(kHttpStatusCodes[i])}}, static_cast<double>(http_.answers(i)));
  auto rejected = make_family("vigil_agent_http_rejected_total",
                              "Connections the agent's HTTP endpoint cut, by reason: cap (closed to make room), "
                              "deadline (no answer within the request deadline), too_large (431), bad_request (400), "
                              "tls_handshake (TLS handshake failed), not_tls (plain HTTP on the TLS endpoint), auth_busy (503: "
                              "the password checks' queue was full), auth_gone (the client hung up before its "
                              "password was checked).",
                              MetricType::Counter);
  for (HttpRejection r : kHttpRejections)
    add_sample(rejected, {{"reason", rejection_name(r)}}, static_cast<double>(http_.rejections(r)));
  auto since = make_family("vigil_agent_housekeeping_last_tick_age_seconds",
                           "Seconds since the housekeeping loop last completed a tick; /healthz fails past "
                           "vigil_agent_housekeeping_stall_limit_seconds.",
                           MetricType::Gauge);
  add_sample(since, {}, liveness_.seconds_since_run(LoopLiveness::Clock::now()));
  auto limit = make_family("vigil_agent_housekeeping_stall_limit_seconds",
                           "How long the housekeeping loop may go without a tick before /healthz fails.",
                           MetricType::Gauge);
  add_sample(limit, {}, std::chrono::duration<double>(liveness_.stall_limit()).count());
  auto reloads = make_family("vigil_agent_web_config_reloads_total",
                             "Loads of the --web.config.file (the first included), by result; a failed reload "
                             "keeps the last good config.",
                             MetricType::Counter);
  for (bool ok : {true, false})
    add_sample(reloads, {{"result", ok ? "success" : "failure"}}, static_cast<double>(http_.web_config_reloads(ok)));
  auto last_ok = make_family("vigil_agent_web_config_last_reload_successful",
                             "1 when the last load of the --web.config.file worked (1 without one).",
                             MetricType::Gauge);
  add_sample(last_ok, {}, http_.web_config_last_reload_ok() ? 1.0 : 0.0);
  return {open, answers, rejected, since, limit, reloads, last_ok};
}

}  // namespace vigil::agent
