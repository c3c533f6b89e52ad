// Builders for the OpenAI error body and the common API errors.
#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include "server/protocol.h"

namespace rf::server {

ApiError invalid_request(const std::string& message, const std::string& param, const std::string& code) {
  return ApiError(400, message, "invalid_request_error", param, code);
}

ApiError unsupported_parameter(const std::string& param, const std::string& detail) {
  std::string msg = "'" + param + "' is not supported by this server";
  if (!detail.empty()) msg += ": " + detail;
  return ApiError(400, msg, "invalid_request_error", param, "unsupported_parameter");
}

ApiError model_not_found(const std::string& model) {
  return ApiError(404, "The model '" + model + "' does not exist", "invalid_request_error", "model",
                  "model_not_found");
}

ApiError authentication_failed(const std::string& message) {
  return ApiError(401, message, "invalid_request_error", "", "invalid_api_key");
}

ApiError service_unavailable(const std::string& message, const std::string& code) {
  return ApiError(503, message, "server_error", "", code);
}

ApiError internal_error(const std::string& message) { return ApiError(500, message, "server_error"); }

std::string error_body(const ApiError& e) {
  Json err = {{"message", e.what()}, {"type", e.type()}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param().empty()) err["param"] = e.param();
  if (!e.code().empty()) err["code"] = e.code();
  return wire_json(Json{{"error", std::move(err)}});
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

std::string anthropic_error_body(const ApiError& e) {
  const Json body = {{"type", "error"}, {"error", {{"type", anthropic_error_type(e.status())}, {"message", e.what()}}}};
  return wire_json(body);
}

std::string error_body_for_status(int status, const std::string& message) {
  std::string type = status >= 500 ? "server_error" : "invalid_request_error";
  std::string code;
  switch (status) {
    case 404: code = "not_found"; break;
    case 405: code = "method_not_allowed"; break;
    case 408: code = "request_timeout"; break;
    case 413: code = "payload_too_large"; break;
    case 414: code = "uri_too_long"; break;
    case 417: code = "expectation_failed"; break;
    case 431: code = "request_header_fields_too_large"; break;
    case 501: code = "not_implemented"; break;
    case 503: code = "unavailable"; break;
    default: break;
  }
  return error_body(ApiError(status, message, type, "", code));
}

}  // namespace rf::server
