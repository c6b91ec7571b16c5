// An error answered to an API client: HTTP status plus the fields of OpenAI's error object.
#pragma once

#include <string>

namespace vigil {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";  // OpenAI's error.type
  std::string message;
  std::string param;  // the offending request field, empty when none
  std::string code;   // machine-readable code, empty when none

  static ApiError bad_request(std::string message, std::string param) {
    return {400, "invalid_request_error", std::move(message), std::move(param), ""};
  }
};

}  // namespace vigil
