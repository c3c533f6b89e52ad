// API errors the OpenAI way: an exception that carries the HTTP status and
// the fields of OpenAI's error body {"error": {message, type, param, code}},
// and the helpers that build the common ones. Anything a client sends wrong
// becomes an ApiError with a 4xx status; 5xx is kept for the server's own
// failures (503 when busy or shutting down, 500 for internal errors).
#pragma once

#include <stdexcept>
#include <string>

namespace rf::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type, std::string param = "", std::string code = "")
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // "" -> null
  const std::string& code() const { return code_; }    // "" -> null

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 invalid_request_error, naming the offending parameter when there is one.
ApiError invalid_request(const std::string& message, const std::string& param = "", const std::string& code = "");
// 400 for a known OpenAI parameter this server does not implement.
ApiError unsupported_parameter(const std::string& param, const std::string& detail = "");
ApiError model_not_found(const std::string& model);            // 404
ApiError authentication_failed(const std::string& message);    // 401
ApiError service_unavailable(const std::string& message, const std::string& code);  // 503
ApiError internal_error(const std::string& message);           // 500

// The JSON body {"error": {...}} for an error.
std::string error_body(const ApiError& e);
// Anthropic's shape of the same error: {"type": "error", "error": {"type",
// "message"}}, the type from the status (invalid_request_error,
// authentication_error, permission_error, not_found_error,
// request_too_large, rate_limit_error, api_error, overloaded_error).
std::string anthropic_error_body(const ApiError& e);
const char* anthropic_error_type(int status);
// The body for a bare HTTP status (unknown route, oversized body, ...).
std::string error_body_for_status(int status, const std::string& message);

}  // namespace rf::server
