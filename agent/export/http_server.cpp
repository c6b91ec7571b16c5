// Connections are served on one Asio I/O thread: every step is a short non-blocking handler, so a
// slow client costs a socket and a few KiB, never the thread. Each connection has one deadline
// from accept covering its head, its answer and the write. At the connection cap the oldest
// connection still sending its head (or lingering after its answer) is closed to make room: a new
// connection is never refused, so a probe always gets a slot, and the clients that lose theirs
// are those holding one without having asked anything. Slow routes (the scrape) run on a render
// thread of their own, so /healthz is answered while a scrape runs or waits for a lock.
// With a TLS web config the handshake runs inside the same deadline (a client that never finishes
// it is cut like one that never sends its head), and bcrypt runs on an auth thread of its own, one
// check at a time from a short queue: past it a request with credentials the verdict cache does
// not know is answered 503 at once, and a client that hung up while waiting is never checked, so a
// flood of wrong passwords costs neither memory nor the scraper whose verdict is cached.
#include "export/http_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <exception>
#include <list>
#include <optional>
#include <stdexcept>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>

#include "export/request_head.h"

namespace vigil::agent {
namespace {

namespace net = boost::asio;
using net::ip::tcp;
using error_code = boost::system::error_code;
using Bytes = std::shared_ptr<const std::string>;
using Headers = std::vector<std::pair<std::string, std::string>>;
using TlsStream = net::ssl::stream<tcp::socket>;

// After the answer: read what the client still sends, so closing does not reset the connection
// under the answer (a 431 to a client still sending its 1 MiB header), but not for long.
constexpr std::chrono::seconds kLinger{1};
constexpr size_t kLingerBytes = 64 * 1024;
constexpr std::chrono::milliseconds kAcceptRetry{100};  // after EMFILE and the like

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

// `extra`: the web config's headers, on every answer.
Bytes serialize(const HttpResponse& r, const Headers& extra) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) +
                    "\r\nContent-Type: " + r.content_type +
                    "\r\nContent-Length: " + std::to_string(r.body.size()) +
                    (r.status == 405 ? "\r\nAllow: GET" : "");
  for (const auto& [name, value] : extra) out += "\r\n" + name + ": " + value;
  out += "\r\nConnection: close\r\n\r\n";
  out += r.body;
  return std::make_shared<const std::string>(std::move(out));
}

HttpResponse plain(int status, std::string body) { return {status, "text/plain; charset=utf-8", std::move(body)}; }

// What Go's net/http answers a plain request on a TLS port with (server.go, "Client sent an HTTP
// request to an HTTPS server"), so a scraper shows the same reason it shows for Go exporters.
const char kPlainOnTls[] = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";
constexpr unsigned char kTlsHandshakeRecord = 0x16;  // RFC 8446 5.1 ContentType handshake
// Password checks waiting for the auth thread: at ~50 ms of bcrypt each, the last waits 0.2 s.
constexpr size_t kMaxPendingChecks = 4;

class Connection;

// Everything the I/O thread owns; the render thread only runs routes' answers.
class Endpoint {
 public:
  Endpoint(std::vector<HttpRoute> routes, HttpStats& stats, HttpLimits limits, std::shared_ptr<WebConfigWatch> web);
  ~Endpoint();

  void listen(const std::string& host, int port);
  void start() { io_thread_ = std::thread([this] { ioc_.run(); }); }
  int port() const { return port_; }

  // Called by connections, on the I/O thread.
  void route(const std::shared_ptr<Connection>& c, const RequestHead& head);
  Bytes serialize_here(const HttpResponse& r) const { return serialize(r, headers_); }
  std::list<Connection*>::iterator add(Connection* c);
  void remove(std::list<Connection*>::iterator slot);
  net::io_context& ioc() { return ioc_; }
  HttpStats& stats() { return stats_; }
  const HttpLimits& limits() const { return limits_; }

 private:
  struct RenderQueue {
    std::vector<std::weak_ptr<Connection>> running;  // share the answer being rendered
    std::vector<std::weak_ptr<Connection>> next;     // arrived since: share the next one
    bool busy = false;
  };

  void do_accept();
  void on_accept(error_code ec, tcp::socket socket);
  void make_room();
  void dispatch(const std::shared_ptr<Connection>& c, const RequestHead& head);
  void unauthorized(const std::shared_ptr<Connection>& c);
  void run_next_check();
  void start_render(size_t route);
  void rendered(size_t route, const HttpResponse& answer);

  net::io_context ioc_{1};
  tcp::acceptor acceptor_{ioc_};
  net::steady_timer accept_retry_{ioc_};
  std::vector<HttpRoute> routes_;
  HttpStats& stats_;
  HttpLimits limits_;
  int port_ = 0;
  std::list<Connection*> open_;  // oldest first
  std::vector<RenderQueue> renders_;  // one per route
  std::shared_ptr<WebConfigWatch> web_;  // null: plain HTTP, no auth
  Headers headers_;                     // the web config's, as of the last connection accepted
  net::thread_pool render_thread_{1};
  net::thread_pool auth_thread_{1};     // bcrypt, one check at a time (exporter-toolkit's bcryptMtx)
  struct PendingCheck {
    std::weak_ptr<Connection> connection;  // a connection closed meanwhile is not checked
    RequestHead head;
  };
  std::deque<PendingCheck> checks_;  // waiting for the auth thread, at most kMaxPendingChecks
  bool checking_ = false;            // a check is on the auth thread
  std::thread io_thread_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class Stage { kHandshaking, kReadingHead, kAnswering, kWriting, kLingering, kClosed };

  // `web`: the web config this connection is served under (null: plain HTTP, no auth).
  Connection(Endpoint& endpoint, tcp::socket socket, std::shared_ptr<const ActiveWebConfig> web)
      : endpoint_(endpoint), socket_(std::move(socket)), web_(std::move(web)), deadline_(endpoint.ioc()),
        slot_(endpoint.add(this)) {}
  ~Connection() { close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void start() {
    // The timer's handler holds the connection until it is closed: it is what keeps it alive.
    deadline_.expires_after(endpoint_.limits().request_deadline);
    wait_deadline();
    if (web_ && web_->tls) return await_first_byte();
    read_head();
  }

  Stage stage() const { return stage_; }
  // The client closed or reset its end: nobody will read an answer (its request is already read).
  bool peer_gone() {
    pollfd p{lowest().native_handle(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }
  void answering() { stage_ = Stage::kAnswering; }
  const ActiveWebConfig* web() const { return web_.get(); }
  const std::shared_ptr<const ActiveWebConfig>& web_config() const { return web_; }

  void respond(const Bytes& bytes, int status) {
    if (stage_ == Stage::kClosed) return;
    stage_ = Stage::kWriting;
    out_ = bytes;
    status_ = status;
    auto done = [self = shared_from_this()](error_code ec, size_t) { self->on_written(ec); };
    if (tls_) return net::async_write(*tls_, net::buffer(*out_), done);
    net::async_write(socket_, net::buffer(*out_), done);
  }

  void reject(HttpRejection why, int status, std::string body) {
    endpoint_.stats().rejected(why);
    respond(endpoint_.serialize_here(plain(status, std::move(body))), status);
  }

  // Closed to make room at the cap.
  void evict() {
    if (stage_ != Stage::kLingering) endpoint_.stats().rejected(HttpRejection::kCap);
    close();
  }

  void close() {
    if (stage_ == Stage::kClosed) return;
    stage_ = Stage::kClosed;
    error_code ignored;
    lowest().close(ignored);
    deadline_.cancel();
    endpoint_.remove(slot_);
  }

 private:
  tcp::socket& lowest() { return tls_ ? tls_->next_layer() : socket_; }

  // A TLS client's first byte opens a handshake record; anything else is plain HTTP on the TLS
  // port, answered in plain text before any TLS state exists.
  void await_first_byte() {
    stage_ = Stage::kHandshaking;
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
      if (self->stage_ != Stage::kHandshaking) return;
      if (ec) return self->close();
      unsigned char first = 0;
      ssize_t n = ::recv(self->socket_.native_handle(), &first, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return self->close();
      if (n < 0) return self->await_first_byte();
      if (first != kTlsHandshakeRecord) {
        self->endpoint_.stats().rejected(HttpRejection::kNotTls);
        static const Bytes answer = std::make_shared<const std::string>(kPlainOnTls);
        return self->respond(answer, 400);
      }
      self->handshake();
    });
  }

  void handshake() {
    tls_ = std::make_unique<TlsStream>(std::move(socket_), *web_->tls);
    tls_->async_handshake(net::ssl::stream_base::server, [self = shared_from_this()](error_code ec) {
      if (self->stage_ != Stage::kHandshaking) return;
      if (ec) {
        self->endpoint_.stats().rejected(HttpRejection::kTlsHandshake);
        return self->close();
      }
      self->stage_ = Stage::kReadingHead;
      self->read_head();
    });
  }

  void wait_deadline() {
    deadline_.async_wait([self = shared_from_this()](error_code ec) { self->on_deadline(ec); });
  }

  void on_deadline(error_code ec) {
    if (ec == net::error::operation_aborted) return;  // closed, or re-armed for the linger
    if (stage_ == Stage::kReadingHead && !tls_) {
      // The socket is still writable for a small answer: nothing was written to it yet. (Over
      // TLS a record would have to be written; the connection is just closed.)
      Bytes timeout = endpoint_.serialize_here(plain(408, "request head not received in time\n"));
      error_code send_ec;
      socket_.non_blocking(true, send_ec);
      if (socket_.send(net::buffer(*timeout), 0, send_ec) == timeout->size())
        endpoint_.stats().answered(408);
    }
    if (stage_ != Stage::kLingering && stage_ != Stage::kClosed)
      endpoint_.stats().rejected(HttpRejection::kDeadline);
    close();
  }

  void read_head() {
    auto done = [self = shared_from_this()](error_code ec, size_t n) { self->on_read(ec, n); };
    if (tls_) return tls_->async_read_some(net::buffer(chunk_), done);
    socket_.async_read_some(net::buffer(chunk_), done);
  }

  void on_read(error_code ec, size_t n) {
    if (stage_ != Stage::kReadingHead) return;
    if (ec) return close();  // the client gave up before asking anything
    size_t searched = head_.size();
    head_.append(chunk_.data(), n);
    size_t end = request_head_end(head_, searched);
    const size_t limit = endpoint_.limits().max_head_bytes;
    if (end == std::string::npos ? head_.size() > limit : end > limit)
      return reject(HttpRejection::kTooLarge, 431, "request head over " + std::to_string(limit) + " bytes\n");
    if (end == std::string::npos) return read_head();
    RequestHead head = parse_request_head(std::string_view(head_).substr(0, end));
    if (!head.ok) return reject(HttpRejection::kBadRequest, 400, "bad request: " + head.error + "\n");
    endpoint_.route(shared_from_this(), head);
  }

  void on_written(error_code ec) {
    if (stage_ == Stage::kClosed) return;
    if (ec) return close();
    endpoint_.stats().answered(status_);
    stage_ = Stage::kLingering;
    auto linger_end = std::chrono::steady_clock::now() + kLinger;
    if (linger_end < deadline_.expiry()) {
      deadline_.expires_at(linger_end);  // the pending wait ends aborted
      wait_deadline();
    }
    if (tls_) {
      // close_notify, then the client's: TLS's own orderly close, within the linger.
      return tls_->async_shutdown([self = shared_from_this()](error_code) { self->close(); });
    }
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    linger();
  }

  void linger() {
    socket_.async_read_some(net::buffer(chunk_), [self = shared_from_this()](error_code ec, size_t n) {
      if (self->stage_ != Stage::kLingering) return;
      self->lingered_ += n;
      if (ec || self->lingered_ > kLingerBytes) return self->close();
      self->linger();
    });
  }

  Endpoint& endpoint_;
  tcp::socket socket_;               // moved into tls_ at the handshake
  std::unique_ptr<TlsStream> tls_;
  std::shared_ptr<const ActiveWebConfig> web_;
  net::steady_timer deadline_;
  std::list<Connection*>::iterator slot_;  // in the endpoint's open list while not closed
  Stage stage_ = Stage::kReadingHead;
  std::string head_;                        // at most max_head_bytes + one chunk
  std::array<char, 2048> chunk_{};
  Bytes out_;
  int status_ = 0;
  size_t lingered_ = 0;
};

Endpoint::Endpoint(std::vector<HttpRoute> routes, HttpStats& stats, HttpLimits limits,
                   std::shared_ptr<WebConfigWatch> web)
    : routes_(std::move(routes)), stats_(stats), limits_(limits), renders_(routes_.size()), web_(std::move(web)) {}

Endpoint::~Endpoint() {
  ioc_.stop();
  if (io_thread_.joinable()) io_thread_.join();
  render_thread_.stop();
  render_thread_.join();  // waits for a render under way: it uses what the routes capture
  auth_thread_.stop();
  auth_thread_.join();
  // Close every connection now, while this object is whole: the io_context destroys their
  // handlers (and with them the connections) only after the other members are gone.
  while (!open_.empty()) open_.front()->close();
}

void Endpoint::listen(const std::string& host, int port) {
  const std::string where = host + ":" + std::to_string(port);
  error_code ec;
  tcp::resolver resolver(ioc_);
  auto addresses = resolver.resolve(host, std::to_string(port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec) throw std::runtime_error("cannot resolve listen host '" + host + "': " + ec.message());
  for (const auto& entry : addresses) {
    acceptor_.open(entry.endpoint().protocol(), ec);
    if (ec) continue;
    acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!acceptor_.bind(entry.endpoint(), ec) && !acceptor_.listen(net::socket_base::max_listen_connections, ec)) {
      port_ = acceptor_.local_endpoint().port();
      do_accept();
      return;
    }
    error_code ignored;
    acceptor_.close(ignored);
  }
  throw std::runtime_error("cannot listen on " + where + ": " + (ec ? ec.message() : "no address"));
}

void Endpoint::do_accept() {
  acceptor_.async_accept([this](error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
}

void Endpoint::on_accept(error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted) return;
  if (ec == net::error::no_descriptors || ec == net::error::no_buffer_space || ec == net::error::no_memory ||
      ec.value() == ENFILE) {
    // Accepting again at once would spin; the backlog holds connections meanwhile.
    std::fprintf(stderr, "vigil-agent: http accept: %s\n", ec.message().c_str());
    accept_retry_.expires_after(kAcceptRetry);
    accept_retry_.async_wait([this](error_code wait_ec) {
      if (!wait_ec) do_accept();
    });
    return;
  }
  if (!ec) {
    make_room();
    std::shared_ptr<const ActiveWebConfig> web;
    if (web_) {
      web = web_->current();
      headers_ = web->config.headers;
    }
    std::make_shared<Connection>(*this, std::move(socket), std::move(web))->start();
  }
  do_accept();
}

void Endpoint::make_room() {
  if (open_.size() < limits_.max_connections || open_.empty()) return;
  Connection* victim = open_.front();
  for (Connection* c : open_) {
    if (c->stage() == Connection::Stage::kHandshaking || c->stage() == Connection::Stage::kReadingHead ||
        c->stage() == Connection::Stage::kLingering) {
      victim = c;
      break;
    }
  }
  victim->evict();
}

std::list<Connection*>::iterator Endpoint::add(Connection* c) {
  stats_.opened();
  return open_.insert(open_.end(), c);
}

void Endpoint::remove(std::list<Connection*>::iterator slot) {
  open_.erase(slot);
  stats_.closed();
}

void Endpoint::route(const std::shared_ptr<Connection>& c, const RequestHead& head) {
  const ActiveWebConfig* web = c->web();
  if (!web || web->config.users.empty()) return dispatch(c, head);
  for (const auto& r : routes_)
    if (r.answered_inline && r.path == head.path) return dispatch(c, head);
  std::optional<bool> known = web_->basic_auth().cached(web->config.users, head.authorization);
  if (known) return *known ? dispatch(c, head) : unauthorized(c);
  if (checks_.size() >= kMaxPendingChecks) {
    Headers headers = headers_;
    headers.emplace_back("Retry-After", "1");
    stats_.rejected(HttpRejection::kAuthBusy);
    return c->respond(serialize(plain(503, "too many password checks pending; retry later\n"), headers), 503);
  }
  c->answering();
  checks_.push_back({c, head});
  run_next_check();
}

void Endpoint::run_next_check() {
  while (!checking_ && !checks_.empty()) {
    PendingCheck next = std::move(checks_.front());
    checks_.pop_front();
    std::shared_ptr<Connection> c = next.connection.lock();
    if (!c || c->stage() == Connection::Stage::kClosed) continue;
    if (c->peer_gone()) {
      stats_.rejected(HttpRejection::kAuthGone);
      c->close();
      continue;
    }
    checking_ = true;
    // Only the connection's weak reference leaves the I/O thread that owns it; the users are the
    // connection's web config's, immutable.
    std::weak_ptr<Connection> weak = c;
    net::post(auth_thread_, [this, weak, web = c->web_config(), head = std::move(next.head)]() mutable {
      bool ok = web_->basic_auth().check(web->config.users, head.authorization);
      net::post(ioc_, [this, weak, head = std::move(head), ok] {
        checking_ = false;
        if (auto checked = weak.lock(); checked && checked->stage() != Connection::Stage::kClosed)
          ok ? dispatch(checked, head) : unauthorized(checked);
        run_next_check();
      });
    });
  }
}

void Endpoint::unauthorized(const std::shared_ptr<Connection>& c) {
  Headers headers = headers_;
  headers.emplace_back("WWW-Authenticate", "Basic");
  c->respond(serialize(plain(401, "Unauthorized\n"), headers), 401);
}

void Endpoint::dispatch(const std::shared_ptr<Connection>& c, const RequestHead& head) {
  if (head.method != "GET") return c->respond(serialize_here(plain(405, "only GET\n")), 405);
  for (size_t i = 0; i < routes_.size(); ++i) {
    if (routes_[i].path != head.path) continue;
    if (routes_[i].answered_inline) {
      HttpResponse r = routes_[i].answer();
      return c->respond(serialize_here(r), r.status);
    }
    c->answering();
    renders_[i].next.push_back(c);
    if (!renders_[i].busy) start_render(i);
    return;
  }
  std::string paths;
  for (const auto& r : routes_) paths += (paths.empty() ? "" : ", ") + r.path;
  c->respond(serialize_here(plain(404, "not found; try " + paths + "\n")), 404);
}

void Endpoint::start_render(size_t i) {
  RenderQueue& q = renders_[i];
  q.running = std::move(q.next);
  q.next.clear();
  q.busy = true;
  net::post(render_thread_, [this, i] {
    HttpResponse r;
    try {
      r = routes_[i].answer();
    } catch (const std::exception& e) {
      r = plain(503, std::string("cannot answer: ") + e.what() + "\n");
    }
    // Serialized on the I/O thread, which owns the web config's headers.
    net::post(ioc_, [this, i, r = std::move(r)] { rendered(i, r); });
  });
}

void Endpoint::rendered(size_t i, const HttpResponse& r) {
  RenderQueue& q = renders_[i];
  Bytes answer = serialize_here(r);
  for (const auto& waiting : q.running)
    if (auto c = waiting.lock()) c->respond(answer, r.status);
  q.running.clear();
  q.busy = false;
  // A connection closed meanwhile (deadline, cap) needs no render.
  std::erase_if(q.next, [](const std::weak_ptr<Connection>& w) {
    auto c = w.lock();
    return !c || c->stage() == Connection::Stage::kClosed;
  });
  if (!q.next.empty()) start_render(i);
}

}  // namespace

struct HttpServer::Impl {
  Impl(std::vector<HttpRoute> routes, HttpStats& stats, HttpLimits limits, std::shared_ptr<WebConfigWatch> web)
      : endpoint(std::move(routes), stats, limits, std::move(web)) {}
  Endpoint endpoint;
};

HttpServer::HttpServer(const std::string& host, int port, std::vector<HttpRoute> routes, HttpStats& stats,
                       HttpLimits limits, std::shared_ptr<WebConfigWatch> web)
    : impl_(std::make_unique<Impl>(std::move(routes), stats, limits, std::move(web))) {
  impl_->endpoint.listen(host, port);
  impl_->endpoint.start();
}

HttpServer::~HttpServer() = default;

int HttpServer::port() const { return impl_->endpoint.port(); }

}  // namespace vigil::agent
