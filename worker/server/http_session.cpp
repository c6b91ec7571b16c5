// Connection state machine. Everything here runs on the connection's strand, including engine
// events, which the engine thread only posts. The socket is read during a response too, so a
// client that hangs up mid-generation is noticed at once and its engine request cancelled.
#include "server/http_session.h"

#include <cstdio>
#include <sstream>
#include <utility>
#include <variant>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/http.hpp>

namespace vigil {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

// A closing connection reads what the client still sends for this long in all, however it trickles.
constexpr std::chrono::seconds kLingerTimeout{2};
constexpr const char* kServerName = "vigil-worker";
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

std::string serialize(const HttpReply& reply, bool keep_alive) {
  http::response<http::string_body> res{static_cast<http::status>(reply.status), 11};
  res.set(http::field::server, kServerName);
  res.set(http::field::content_type, reply.content_type);
  for (const auto& [name, value] : reply.headers) res.set(name, value);
  res.keep_alive(keep_alive);
  res.body() = reply.body;
  res.prepare_payload();
  std::ostringstream out;
  out << res;
  return std::move(out).str();
}

// HTTP/1.0 has no chunked encoding: its stream simply ends when the connection closes.
std::string sse_header(bool keep_alive, bool chunked) {
  http::response<http::empty_body> res{http::status::ok, 11};
  res.set(http::field::server, kServerName);
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  res.keep_alive(keep_alive && chunked);
  res.chunked(chunked);
  std::ostringstream out;
  out << res.base();
  return std::move(out).str();
}

// One HTTP/1.1 chunk holding `data` (never empty: a zero-size chunk would end the body).
std::string chunk(std::string_view data) {
  char size[20];
  int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out(size, static_cast<size_t>(n));
  out.append(data);
  out.append("\r\n");
  return out;
}

constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket&& socket, Api& api, const ServerConfig& config, ServerState& state,
                         Admission admission, std::string client)
    : stream_(std::move(socket)),
      api_(api),
      config_(config),
      state_(state),
      admission_(admission),
      client_(std::move(client)) {
  (admission_ == Admission::kClientLimited ? state_.limited : state_.connections).fetch_add(1);
  if (admission_ == Admission::kServe) state_.clients.add(client_);
}

HttpSession::~HttpSession() {
  (admission_ == Admission::kClientLimited ? state_.limited : state_.connections).fetch_sub(1);
  if (admission_ == Admission::kServe) state_.clients.remove(client_);
}

void HttpSession::run() {
  // Start on the strand: the socket's executor is this connection's strand.
  net::dispatch(stream_.get_executor(), beast::bind_front_handler(&HttpSession::do_read, shared_from_this()));
}

void HttpSession::evict() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (!self->idle_ticket_ || (self->closed_ && !self->lingering_)) return;
    self->closed_ = true;
    beast::error_code ignored;
    self->stream_.socket().close(ignored);
  });
}

const std::string& HttpSession::pool_key() const {
  switch (admission_) {
    case Admission::kServe: return client_;
    case Admission::kProbeOnly: return kProbePool;
    case Admission::kClientLimited: return kOverSharePool;
  }
  return client_;
}

void HttpSession::do_read() {
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(config_.max_header_bytes));
  parser_->body_limit(config_.max_body_bytes);
  stream_.expires_after(first_request_ ? config_.read_timeout : config_.idle_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          beast::bind_front_handler(&HttpSession::on_read_header, shared_from_this()));
  // A client-limited newcomer waiting for its one request is evictable by the next one over its
  // share only (it holds none of its address's slots, nor a served one); a probe-only one is not.
  if (admission_ != Admission::kProbeOnly) idle_ticket_ = state_.idle.add(weak_from_this(), pool_key());
}

void HttpSession::on_read_header(beast::error_code ec, std::size_t) {
  if (idle_ticket_) state_.idle.remove(*idle_ticket_);
  idle_ticket_.reset();
  if (ec) return read_failed(ec);
  first_request_ = false;
  // A probe-only or limited connection is answered from its head: its body is never read, so a
  // slow one cannot hold the connection for the read timeout.
  if (admission_ != Admission::kServe) return handle_request();
  // A wrong key is refused before the body is read (or 100 Continue sent for it).
  {
    const auto& req = parser_->get();
    const auto target = req.target();
    const auto authorization = req[http::field::authorization];
    if (auto refused = api_.check_key(std::string_view(target.data(), target.size()),
                                      std::string_view(authorization.data(), authorization.size()))) {
      // An unread body would be taken for the next request: only a request without one keeps the
      // connection (the linger drains the body within its deadline).
      const auto length = parser_->content_length();
      keep_alive_ = req.keep_alive() && !parser_->chunked() && (!length || *length == 0);
      in_flight_ = InFlight(state_);
      return send(std::move(*refused));
    }
  }
  stream_.expires_after(config_.read_timeout);
  // curl asks before sending a large body; without this it stalls for a second.
  if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
    net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                     beast::bind_front_handler(&HttpSession::on_continue, shared_from_this()));
    return;
  }
  http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&HttpSession::on_read, shared_from_this()));
}

void HttpSession::on_continue(beast::error_code ec, std::size_t) {
  if (ec) return fail(ec, "write");
  http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&HttpSession::on_read, shared_from_this()));
}

void HttpSession::on_read(beast::error_code ec, std::size_t) {
  if (ec) return read_failed(ec);
  handle_request();
}

void HttpSession::read_failed(beast::error_code ec) {
  if (closed_) return;  // evicted at the connection cap
  if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::connection_reset ||
      ec == net::error::eof) {
    return do_close();
  }
  keep_alive_ = false;
  in_flight_ = InFlight(state_);
  if (ec == http::error::body_limit) {
    return send(error_reply({413, "invalid_request_error",
                             "request body over the limit of " + std::to_string(config_.max_body_bytes) + " bytes",
                             "", "request_too_large"}));
  }
  if (ec == http::error::header_limit) {
    return send(error_reply({431, "invalid_request_error",
                             "request header over the limit of " + std::to_string(config_.max_header_bytes) + " bytes",
                             "", "header_too_large"}));
  }
  if (ec.category() == make_error_code(http::error::bad_method).category())
    return send(error_reply(ApiError::bad_request("malformed HTTP request: " + ec.message(), "")));
  fail(ec, "read");
}

void HttpSession::handle_request() {
  auto& req = parser_->get();
  keep_alive_ = req.keep_alive();
  chunked_ = req.version() >= 11;
  in_flight_ = InFlight(state_);
  const auto arrival = CompletionJob::Clock::now();
  const auto method = req.method_string();
  const auto target = req.target();
  if (admission_ != Admission::kServe) {
    keep_alive_ = false;  // free the slot for the next probe
    std::string_view path(target.data(), target.size());
    path = path.substr(0, path.find('?'));
    if (path != "/health" && path != "/ready") {
      if (admission_ == Admission::kClientLimited)
        return send(api_.too_many_connections(config_.max_connections_per_client));
      return send(error_reply({503, "server_error",
                               "the server is at its connection limit (server.max_connections); retry later", "",
                               "connection_limit"}));
    }
  }
  if (Api::routed_off_io(std::string_view(method.data(), method.size()),
                         std::string_view(target.data(), target.size()))) {
    // The session has no operation pending until the answer is posted back, so the parse thread
    // is the only one touching the request meanwhile.
    const bool posted = api_.post_parse([self = shared_from_this(), arrival] {
      auto routed = std::make_shared<Routed>(self->route_request(arrival));
      net::post(self->stream_.get_executor(), [self, routed] { self->on_routed(std::move(*routed)); });
    });
    if (!posted) return send(api_.parse_queue_full());
    return;
  }
  on_routed(route_request(arrival));
}

Routed HttpSession::route_request(CompletionJob::Clock::time_point arrival) {
  auto& req = parser_->get();
  const auto method = req.method_string();
  const auto target = req.target();
  const auto authorization = req[http::field::authorization];
  return api_.route(std::string_view(method.data(), method.size()), std::string_view(target.data(), target.size()),
                    std::string_view(authorization.data(), authorization.size()), req.body(), arrival);
}

void HttpSession::on_routed(Routed routed) {
  if (!routed.job) return send(std::move(routed.reply));
  job_ = std::move(routed.job);
  start_job();
}

void HttpSession::start_job() {
  auto self = shared_from_this();
  // Runs on the engine thread: copy the event and hop to this connection's strand.
  EventSink sink = [self](const RequestEvent& event) {
    net::post(self->stream_.get_executor(), [self, event] { self->on_engine_event(event); });
  };
  auto submitted = api_.submit(*job_, std::move(sink), client_);
  if (auto* reply = std::get_if<HttpReply>(&submitted)) {
    job_.reset();
    return send(std::move(*reply));
  }
  request_id_ = std::get<uint64_t>(submitted);
  generating_ = true;
  response_complete_ = false;
  if (job_->stream() && !chunked_) keep_alive_ = false;
  after_ = keep_alive_ ? After::kRead : After::kClose;
  stream_.expires_never();  // a queued request may wait long; writes set their own deadline
  if (job_->stream()) enqueue(sse_header(keep_alive_, chunked_));
  watch_disconnect();
}

void HttpSession::on_engine_event(const RequestEvent& event) {
  if (event.finish != FinishReason::kNone) {
    generating_ = false;
    api_.finished(request_id_);
  }
  if (!job_) return;
  std::string out = job_->on_event(event);
  if (closed_) return;  // the client is gone; the job still recorded its metrics
  if (job_->stream()) {
    if (!out.empty()) enqueue(chunked_ ? chunk(out) : std::move(out));
    if (job_->finished()) {
      response_complete_ = true;
      if (chunked_) enqueue(std::string(kLastChunk));
      else if (queue_.empty() && !writing_) on_response_done();
    } else if (queue_.size() > config_.stream_queue_chunks) {
      // The client reads slower than we generate; holding its tokens without bound is worse.
      std::fprintf(stderr, "vigil-worker: client too slow (%zu chunks queued), request %llu cut\n", queue_.size(),
                   static_cast<unsigned long long>(request_id_));
      abort_job();
      beast::error_code ignored;
      stream_.socket().close(ignored);
      closed_ = true;
      in_flight_.release();
    }
    return;
  }
  if (job_->finished()) {
    HttpReply reply{job_->status(), "application/json", std::move(out), {}, false};
    send(std::move(reply));
  }
}

void HttpSession::send(HttpReply reply) {
  if (reply.close || !keep_alive_ || state_.draining.load()) keep_alive_ = false;
  after_ = keep_alive_ ? After::kRead : After::kClose;
  response_complete_ = true;
  enqueue(serialize(reply, keep_alive_));
}

void HttpSession::enqueue(std::string bytes) {
  queue_.push_back(std::move(bytes));
  if (!writing_) do_write();
}

void HttpSession::do_write() {
  writing_ = true;
  stream_.expires_after(config_.write_timeout);
  net::async_write(stream_, net::buffer(queue_.front()),
                   beast::bind_front_handler(&HttpSession::on_write, shared_from_this()));
}

void HttpSession::on_write(beast::error_code ec, std::size_t) {
  writing_ = false;
  if (ec) {
    abort_job();
    if (closed_) return;  // we closed it ourselves (slow reader, disconnect)
    return fail(ec, "write");
  }
  queue_.pop_front();
  if (!queue_.empty()) return do_write();
  if (response_complete_) on_response_done();
}

void HttpSession::on_response_done() {
  response_complete_ = false;
  job_.reset();
  in_flight_.release();
  if (watching_) {
    // The disconnect watch holds the socket's read side; stop it and continue from its handler.
    resume_after_watch_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    return;
  }
  continue_after_response();
}

void HttpSession::continue_after_response() {
  if (after_ == After::kClose) return do_close();
  do_read();
}

void HttpSession::watch_disconnect() {
  // Bytes a pipelining client sends early are kept for the next request; past the limits we stop
  // watching rather than buffer without bound.
  if (buffer_.size() >= config_.max_header_bytes + config_.max_body_bytes) return;
  watching_ = true;
  stream_.socket().async_read_some(buffer_.prepare(4096),
                                   beast::bind_front_handler(&HttpSession::on_watch, shared_from_this()));
}

void HttpSession::on_watch(beast::error_code ec, std::size_t bytes) {
  watching_ = false;
  buffer_.commit(bytes);
  if (resume_after_watch_) {
    resume_after_watch_ = false;
    if (ec && ec != net::error::operation_aborted) return do_close();
    return continue_after_response();
  }
  if (closed_) return;
  if (ec) {
    // EOF or reset while the engine works for this client: nobody will read the answer.
    abort_job();
    beast::error_code ignored;
    stream_.socket().close(ignored);
    closed_ = true;
    in_flight_.release();
    return;
  }
  watch_disconnect();
}

void HttpSession::abort_job() {
  if (generating_) api_.cancel(request_id_);
}

void HttpSession::do_close() {
  if (closed_) return;
  closed_ = true;
  // Nothing of the request is needed any more: the parser's body (up to max_body_bytes) and the
  // read buffer go now, not when the linger ends.
  parser_.reset();
  buffer_.clear();
  buffer_.shrink_to_fit();
  // Half-close, then read until the client closes too: closing with unread request bytes would
  // reset the connection and could destroy the error reply we just sent (e.g. a 413).
  beast::error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  if (ec) {
    stream_.socket().close(ec);
    return;
  }
  lingered_ = 0;
  lingering_ = true;
  // One deadline for the whole linger (the stream keeps it across reads), and the slot may be
  // taken at the cap meanwhile: a client trickling bytes keeps neither the connection nor its slot.
  stream_.expires_after(kLingerTimeout);
  idle_ticket_ = state_.idle.add(weak_from_this(), pool_key());
  do_linger();
}

void HttpSession::do_linger() {
  stream_.async_read_some(net::buffer(scratch_), beast::bind_front_handler(&HttpSession::on_linger, shared_from_this()));
}

void HttpSession::on_linger(beast::error_code ec, std::size_t bytes) {
  lingered_ += bytes;
  if (!ec && lingered_ < 4 * config_.max_body_bytes + config_.max_header_bytes) return do_linger();
  if (idle_ticket_) state_.idle.remove(*idle_ticket_);
  idle_ticket_.reset();
  lingering_ = false;
  beast::error_code ignored;
  stream_.socket().close(ignored);
}

void HttpSession::fail(beast::error_code ec, const char* what) {
  if (ec != net::error::operation_aborted && ec != beast::error::timeout && ec != net::error::broken_pipe &&
      ec != net::error::connection_reset)
    std::fprintf(stderr, "vigil-worker: connection %s: %s\n", what, ec.message().c_str());
  beast::error_code ignored;
  stream_.socket().close(ignored);
  closed_ = true;
  in_flight_.release();
}

}  // namespace vigil
