// What the agent's HTTP endpoint counts about itself: connections open, answers by status code,
// and connections it cut (at the connection cap, at the deadline, for an oversized or malformed
// request head, a failed TLS handshake, a password check it could not queue or no longer needed),
// and the web config's reloads. Written by the I/O thread, read at scrape time: atomics, no lock.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace vigil::agent {

// Why the endpoint cut a connection before or instead of a normal answer.
enum class HttpRejection : size_t {
  kCap,         // closed to make room for a new connection at the cap
  kDeadline,    // no answer written within the request deadline (408 while still reading)
  kTooLarge,    // request head over its size limit (431)
  kBadRequest,  // request head that is not HTTP/1.x (400)
  kTlsHandshake,  // TLS handshake failed (no or unverified client certificate, no common version)
  kNotTls,        // plain HTTP sent to the TLS endpoint (400, as Go's servers answer it)
  kAuthBusy,      // credentials not in the verdict cache while the password checks' queue was full (503)
  kAuthGone,      // the client hung up while its password check waited: closed, never checked
};
inline constexpr std::array<HttpRejection, 8> kHttpRejections = {
    HttpRejection::kCap,        HttpRejection::kDeadline,     HttpRejection::kTooLarge,
    HttpRejection::kBadRequest, HttpRejection::kTlsHandshake, HttpRejection::kNotTls,
    HttpRejection::kAuthBusy,   HttpRejection::kAuthGone};

inline const char* rejection_name(HttpRejection r) {
  switch (r) {
    case HttpRejection::kCap: return "cap";
    case HttpRejection::kDeadline: return "deadline";
    case HttpRejection::kTooLarge: return "too_large";
    case HttpRejection::kBadRequest: return "bad_request";
    case HttpRejection::kTlsHandshake: return "tls_handshake";
    case HttpRejection::kNotTls: return "not_tls";
    case HttpRejection::kAuthBusy: return "auth_busy";
    case HttpRejection::kAuthGone: return "auth_gone";
  }
  return "unknown";
}

// Every status the endpoint can answer with: a fixed label set.
inline constexpr std::array<int, 8> kHttpStatusCodes = {200, 400, 401, 404, 405, 408, 431, 503};

class HttpStats {
 public:
  void opened() { open_.fetch_add(1, std::memory_order_relaxed); }
  void closed() { open_.fetch_sub(1, std::memory_order_relaxed); }
  void answered(int status) {
    for (size_t i = 0; i < kHttpStatusCodes.size(); ++i)
      if (kHttpStatusCodes[i] == status) answers_[i].fetch_add(1, std::memory_order_relaxed);
  }
  void rejected(HttpRejection r) { rejections_[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed); }
  void web_config_reloaded(bool ok) {
    (ok ? reloads_ok_ : reloads_failed_).fetch_add(1, std::memory_order_relaxed);
    last_reload_ok_.store(ok, std::memory_order_relaxed);
  }

  int64_t open_connections() const { return open_.load(std::memory_order_relaxed); }
  uint64_t answers(size_t code_index) const { return answers_[code_index].load(std::memory_order_relaxed); }
  uint64_t rejections(HttpRejection r) const {
    return rejections_[static_cast<size_t>(r)].load(std::memory_order_relaxed);
  }
  uint64_t web_config_reloads(bool ok) const { return (ok ? reloads_ok_ : reloads_failed_).load(std::memory_order_relaxed); }
  bool web_config_last_reload_ok() const { return last_reload_ok_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> open_{0};
  std::array<std::atomic<uint64_t>, kHttpStatusCodes.size()> answers_{};
  std::array<std::atomic<uint64_t>, kHttpRejections.size()> rejections_{};
  std::atomic<uint64_t> reloads_ok_{0};  // web config loads, the first included
  std::atomic<uint64_t> reloads_failed_{0};
  std::atomic<bool> last_reload_ok_{true};
};

}  // namespace vigil::agent
