// One HTTP/1.1 connection (Beast's advanced-server shape): reads requests with header and body
// limits and timeouts, answers through the Api, streams completions as SSE from a bounded queue,
// and cancels the engine request when the client goes away.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/api.h"
#include "server/serve_config.h"
#include "server/server_state.h"

namespace vigil {

// How the listener let a connection in.
enum class Admission {
  kServe,          // a slot of its own: any route, keep-alive
  kProbeOnly,      // past server.max_connections: /health and /ready, anything else 503
  kClientLimited,  // its address at server.max_connections_per_client: /health and /ready, anything else 429
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  // client: the address key (ClientConnections::key); a kServe session counts against it.
  HttpSession(boost::asio::ip::tcp::socket&& socket, Api& api, const ServerConfig& config, ServerState& state,
              Admission admission, std::string client);
  ~HttpSession();
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  void run();
  // From any thread: closes the connection if it is still waiting for a request, or lingering
  // after its last answer (the listener frees its slot at the cap); a request that arrived
  // meanwhile is served.
  void evict();

 private:
  enum class After { kRead, kClose };

  // The key this session is evictable under: its address for a served slot, else its pool's.
  const std::string& pool_key() const;

  void do_read();
  void on_read_header(boost::beast::error_code ec, std::size_t bytes);
  void on_continue(boost::beast::error_code ec, std::size_t bytes);
  void on_read(boost::beast::error_code ec, std::size_t bytes);
  void handle_request();
  // On a parse thread for completions, else on the strand.
  Routed route_request(CompletionJob::Clock::time_point arrival);
  void on_routed(Routed routed);
  void read_failed(boost::beast::error_code ec);

  void send(HttpReply reply);
  void start_job();
  void on_engine_event(const RequestEvent& event);

  void enqueue(std::string bytes);
  void do_write();
  void on_write(boost::beast::error_code ec, std::size_t bytes);
  void on_response_done();
  void continue_after_response();

  void watch_disconnect();
  void on_watch(boost::beast::error_code ec, std::size_t bytes);

  void do_close();
  void do_linger();
  void on_linger(boost::beast::error_code ec, std::size_t bytes);
  void abort_job();
  void fail(boost::beast::error_code ec, const char* what);

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  Api& api_;
  const ServerConfig& config_;
  ServerState& state_;
  const Admission admission_;
  const std::string client_;

  std::optional<uint64_t> idle_ticket_;  // set while waiting for a request head or lingering (evictable)
  bool first_request_ = true;
  bool keep_alive_ = false;
  bool chunked_ = true;  // HTTP/1.1 client: SSE goes out in chunks; HTTP/1.0: close-delimited
  InFlight in_flight_;

  std::unique_ptr<CompletionJob> job_;
  uint64_t request_id_ = 0;
  bool generating_ = false;  // the engine still owes request_id_ events

  std::deque<std::string> queue_;  // serialized bytes waiting for the socket
  bool writing_ = false;
  bool response_complete_ = false;  // every byte of the current response is queued
  After after_ = After::kRead;

  bool watching_ = false;           // a read is pending to notice a disconnect mid-response
  bool resume_after_watch_ = false;
  bool closed_ = false;
  bool lingering_ = false;  // closed for sending, reading until the client closes or the deadline
  size_t lingered_ = 0;
  std::array<char, 4096> scratch_{};  // bytes read only to be discarded (lingering close)
};

}  // namespace vigil
