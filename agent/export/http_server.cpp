// Connections are served on one Asio I/O thread: every step is a short non-blocking handler, so a
// slow client costs a socket and a few KiB, never the thread. Each connection has one deadline
// from accept covering its head, its answer and the write. At the connection cap the oldest
// connection still sending its head (or lingering after its answer) is closed to make room: a new
// connection is never refused, so a probe always gets a slot, and the clients that lose theirs
// are those holding one without having asked anything. Slow routes (the scrape) run on a render
// thread of their own, so /healthz is answered while a scrape runs or waits for a lock.
#include "export/http_server.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <list>
#include <stdexcept>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
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

// After the answer: read what the client still sends, so closing does not reset the connection
// under the answer (a 431 to a client still sending its 1 MiB header), but not for long.
constexpr std::chrono::seconds kLinger{1};
constexpr size_t kLingerBytes = 64 * 1024;
constexpr std::chrono::milliseconds kAcceptRetry{100};  // after EMFILE and the like

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

Bytes serialize(const HttpResponse& r) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) +
                    "\r\nContent-Type: " + r.content_type +
                    "\r\nContent-Length: " + std::to_string(r.body.size()) +
                    (r.status == 405 ? "\r\nAllow: GET" : "") + "\r\nConnection: close\r\n\r\n";
  out += r.body;
  return std::make_shared<const std::string>(std::move(out));
}

HttpResponse plain(int status, std::string body) { return {status, "text/plain; charset=utf-8", std::move(body)}; }

class Connection;

// Everything the I/O thread owns; the render thread only runs routes' answers.
class Endpoint {
 public:
  Endpoint(std::vector<HttpRoute> routes, HttpStats& stats, HttpLimits limits);
  ~Endpoint();

  void listen(const std::string& host, int port);
  void start() { io_thread_ = std::thread([this] { ioc_.run(); }); }
  int port() const { return port_; }

  // Called by connections, on the I/O thread.
  void route(const std::shared_ptr<Connection>& c, const RequestHead& head);
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
  void start_render(size_t route);
  void rendered(size_t route, const Bytes& answer, int status);

  net::io_context ioc_{1};
  tcp::acceptor acceptor_{ioc_};
  net::steady_timer accept_retry_{ioc_};
  std::vector<HttpRoute> routes_;
  HttpStats& stats_;
  HttpLimits limits_;
  int port_ = 0;
  std::list<Connection*> open_;  // oldest first
  std::vector<RenderQueue> renders_;  // one per route
  net::thread_pool render_thread_{1};
  std::thread io_thread_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class Stage { kReadingHead, kAnswering, kWriting, kLingering, kClosed };

  Connection(Endpoint& endpoint, tcp::socket socket)
      : endpoint_(endpoint), socket_(std::move(socket)), deadline_(endpoint.ioc()), slot_(endpoint.add(this)) {}
  ~Connection() { close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void start() {
    // The timer's handler holds the connection until it is closed: it is what keeps it alive.
    deadline_.expires_after(endpoint_.limits().request_deadline);
    wait_deadline();
    read_head();
  }

  Stage stage() const { return stage_; }
  void answering() { stage_ = Stage::kAnswering; }

  void respond(const Bytes& bytes, int status) {
    if (stage_ == Stage::kClosed) return;
    stage_ = Stage::kWriting;
    out_ = bytes;
    status_ = status;
    net::async_write(socket_, net::buffer(*out_), [self = shared_from_this()](error_code ec, size_t) {
      self->on_written(ec);
    });
  }

  void reject(HttpRejection why, int status, std::string body) {
    endpoint_.stats().rejected(why);
    respond(serialize(plain(status, std::move(body))), status);
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
    socket_.close(ignored);
    deadline_.cancel();
    endpoint_.remove(slot_);
  }

 private:
  void wait_deadline() {
    deadline_.async_wait([self = shared_from_this()](error_code ec) { self->on_deadline(ec); });
  }

  void on_deadline(error_code ec) {
    if (ec == net::error::operation_aborted) return;  // closed, or re-armed for the linger
    if (stage_ == Stage::kReadingHead) {
      // The socket is still writable for a small answer: nothing was written to it yet.
      Bytes timeout = serialize(plain(408, "request head not received in time\n"));
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
    socket_.async_read_some(net::buffer(chunk_), [self = shared_from_this()](error_code ec, size_t n) {
      self->on_read(ec, n);
    });
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
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    auto linger_end = std::chrono::steady_clock::now() + kLinger;
    if (linger_end < deadline_.expiry()) {
      deadline_.expires_at(linger_end);  // the pending wait ends aborted
      wait_deadline();
    }
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
  tcp::socket socket_;
  net::steady_timer deadline_;
  std::list<Connection*>::iterator slot_;  // in the endpoint's open list while not closed
  Stage stage_ = Stage::kReadingHead;
  std::string head_;                        // at most max_head_bytes + one chunk
  std::array<char, 2048> chunk_{};
  Bytes out_;
  int status_ = 0;
  size_t lingered_ = 0;
};

Endpoint::Endpoint(std::vector<HttpRoute> routes, HttpStats& stats, HttpLimits limits)
    : routes_(std::move(routes)), stats_(stats), limits_(limits), renders_(routes_.size()) {}

Endpoint::~Endpoint() {
  ioc_.stop();
  if (io_thread_.joinable()) io_thread_.join();
  render_thread_.stop();
  render_thread_.join();  // waits for a render under way: it uses what the routes capture
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
    std::make_shared<Connection>(*this, std::move(socket))->start();
  }
  do_accept();
}

void Endpoint::make_room() {
  if (open_.size() < limits_.max_connections || open_.empty()) return;
  Connection* victim = open_.front();
  for (Connection* c : open_) {
    if (c->stage() == Connection::Stage::kReadingHead || c->stage() == Connection::Stage::kLingering) {
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
  if (head.method != "GET") return c->respond(serialize(plain(405, "only GET\n")), 405);
  for (size_t i = 0; i < routes_.size(); ++i) {
    if (routes_[i].path != head.path) continue;
    if (routes_[i].answered_inline) {
      HttpResponse r = routes_[i].answer();
      return c->respond(serialize(r), r.status);
    }
    c->answering();
    renders_[i].next.push_back(c);
    if (!renders_[i].busy) start_render(i);
    return;
  }
  std::string paths;
  for (const auto& r : routes_) paths += (paths.empty() ? "" : ", ") + r.path;
  c->respond(serialize(plain(404, "not found; try " + paths + "\n")), 404);
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
    net::post(ioc_, [this, i, bytes = serialize(r), status = r.status] { rendered(i, bytes, status); });
  });
}

void Endpoint::rendered(size_t i, const Bytes& answer, int status) {
  RenderQueue& q = renders_[i];
  for (const auto& waiting : q.running)
    if (auto c = waiting.lock()) c->respond(answer, status);
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
  Impl(std::vector<HttpRoute> routes, HttpStats& stats, HttpLimits limits)
      : endpoint(std::move(routes), stats, limits) {}
  Endpoint endpoint;
};

HttpServer::HttpServer(const std::string& host, int port, std::vector<HttpRoute> routes, HttpStats& stats,
                       HttpLimits limits)
    : impl_(std::make_unique<Impl>(std::move(routes), stats, limits)) {
  impl_->endpoint.listen(host, port);
  impl_->endpoint.start();
}

HttpServer::~HttpServer() = default;

int HttpServer::port() const { return impl_->endpoint.port(); }

}  // namespace vigil::agent
