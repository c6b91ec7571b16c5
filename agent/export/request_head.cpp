// Request heads are checked by Beast's HTTP/1.1 parser (RFC 9112 syntax: request line, field
// names and values, line endings), not by hand.
#include "export/request_head.h"

#include <limits>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

namespace vigil::agent {

size_t request_head_end(std::string_view bytes, size_t from) {
  // A blank line may end with CRLF or, from sloppy clients, a bare LF: both end the head (the
  // parser then refuses the bare LF with a 400 rather than the client waiting for a deadline).
  for (size_t i = from > 3 ? from - 3 : 0; i < bytes.size(); ++i) {
    if (bytes[i] != '\n') continue;
    if (i >= 1 && bytes[i - 1] == '\n') return i + 1;
    if (i >= 2 && bytes[i - 1] == '\r' && bytes[i - 2] == '\n') return i + 1;
  }
  return std::string_view::npos;
}

RequestHead parse_request_head(std::string_view head) {
  namespace http = boost::beast::http;
  http::request_parser<http::empty_body> parser;
  parser.header_limit(std::numeric_limits<std::uint32_t>::max());  // the caller bounds the head
  parser.eager(false);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(head.data(), head.size()), ec);
  RequestHead out;
  if (ec || !parser.is_header_done()) {
    out.error = ec ? ec.message() : "incomplete request head";
    return out;
  }
  const auto& req = parser.get();
  out.ok = true;
  out.method = std::string(req.method_string());
  std::string_view target(req.target().data(), req.target().size());
  out.path = std::string(target.substr(0, target.find('?')));
  if (auto field = req.find(http::field::authorization); field != req.end())
    out.authorization = std::string(field->value());
  return out;
}

}  // namespace vigil::agent
