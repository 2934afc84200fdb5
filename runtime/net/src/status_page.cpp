#include "fvi/net/status_page.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "fvi/net/server_transport.h"
#include "fvi/report/html_page.h"

namespace fvi::net {

namespace {

// The reports kept: past this many, every other one is dropped (the charts stay whole).
constexpr size_t kMaxReports = 4000;

nlohmann::ordered_json number(double x) { return std::isfinite(x) ? nlohmann::ordered_json(x) : nullptr; }

std::string http_response(int code, const char* reason, const char* type, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n" + body;
}

void send_all(int fd, const std::string& text) {
  size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;  // the browser went away, or the 2 s timeout: nothing to do
    sent += size_t(n);
  }
}

}  // namespace

StatusPage::StatusPage(const std::string& host, int port, std::string model, std::string method, int silos,
                       const ServerTransport& transport)
    : model_(std::move(model)), method_(std::move(method)), silos_(silos), transport_(transport) {
  if (port < 0 || port > 65535) throw std::runtime_error("--status-port must be between 0 and 65535");
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  const std::string where = host + ":" + std::to_string(port);
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    throw std::runtime_error("the status page cannot listen on " + where + ": unknown host");
  listener_ = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  const int on = 1;
  const bool bound = listener_ >= 0 && ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0 &&
                     ::bind(listener_, found->ai_addr, found->ai_addrlen) == 0 && ::listen(listener_, 8) == 0;
  const int error = errno;
  freeaddrinfo(found);
  if (!bound) {
    if (listener_ >= 0) ::close(listener_);
    throw std::runtime_error("the status page cannot listen on " + where + ": " + std::strerror(error));
  }
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = address.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  thread_ = std::thread([this] { serve(); });
}

StatusPage::~StatusPage() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (listener_ >= 0) ::close(listener_);
}

void StatusPage::event(const std::string& line) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::lock_guard<std::mutex> lock(mutex_);
  events_.emplace_back(seconds, line);
  if (events_.size() > kMaxEvents) events_.pop_front();
}

void StatusPage::report(const program::ProgressReport& report) {
  std::lock_guard<std::mutex> lock(mutex_);
  reports_.push_back(report);
  if (reports_.size() > kMaxReports) {
    std::vector<program::ProgressReport> thinned;
    for (size_t i = 0; i < reports_.size(); i += 2) thinned.push_back(std::move(reports_[i]));
    if (thinned.back().step != report.step) thinned.push_back(report);
    reports_ = std::move(thinned);
  }
}

void StatusPage::finished(const std::vector<std::pair<std::string, std::string>>& notes) {
  std::lock_guard<std::mutex> lock(mutex_);
  notes_ = notes;
  finished_ = true;
}

std::string StatusPage::status_json() const {
  // The transport's figures first: its lock is never taken while this page's is held.
  const std::vector<std::string> joined = transport_.silo_descriptions();
  const long refused = transport_.refused();
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::ordered_json j;
  j["model"] = model_;
  j["method"] = method_;
  j["silos"] = silos_;
  int joined_count = 0;
  for (const std::string& d : joined) joined_count += !d.empty();
  j["state"] = finished_ ? "finished" : reports_.empty() ? (joined_count < silos_ ? "waiting for the silos" : "running")
                                                         : "running";
  j["seconds"] = now;
  nlohmann::ordered_json reports = nlohmann::ordered_json::array();
  for (size_t i = 0; i < reports_.size(); ++i)
    reports.push_back({{"report", i + 1}, {"step", reports_[i].step}, {"objective", number(reports_[i].objective)},
                       {"seconds", reports_[i].seconds}});
  j["reports"] = reports;
  const program::ProgressReport* last = reports_.empty() ? nullptr : &reports_.back();
  const program::ProgressReport* before = reports_.size() > 1 ? &reports_[reports_.size() - 2] : nullptr;
  if (last) {
    j["step"] = last->step;
    j["max_steps"] = last->max_steps;
    j["position"] = last->position;
    j["unit"] = last->unit;
    // The most the run can still take, at its pace so far (the stopping rule may end it sooner).
    j["eta_seconds"] = finished_ || last->step <= 0 ? nlohmann::ordered_json(nullptr)
                                                     : number(double(last->max_steps - last->step) * last->seconds /
                                                              double(last->step));
  }
  nlohmann::ordered_json table = nlohmann::ordered_json::array();
  for (int k = 0; k < silos_; ++k) {
    const bool has = last && size_t(k) < last->silos.size();
    const program::SiloTraffic t = has ? last->silos[size_t(k)] : program::SiloTraffic{};
    const long missed_before = before && size_t(k) < before->silos.size() ? before->silos[size_t(k)].missing : 0;
    table.push_back({{"silo", k + 1},
                     {"joined", size_t(k) < joined.size() && !joined[size_t(k)].empty()},
                     {"description", size_t(k) < joined.size() ? joined[size_t(k)] : ""},
                     {"bytes_sent", t.sent},
                     {"bytes_received", t.received},
                     {"missing_replies", t.missing},
                     {"missed_last_report", has && t.missing > missed_before}});
  }
  j["silo_table"] = table;
  j["refused"] = refused;
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (const auto& [seconds, text] : events_) events.push_back({{"seconds", seconds}, {"text", text}});
  j["events"] = events;
  nlohmann::ordered_json notes = nlohmann::ordered_json::array();
  for (const auto& [level, text] : notes_) notes.push_back({{"level", level}, {"text", text}});
  j["notes"] = notes;
  return j.dump();
}

std::string StatusPage::respond(const std::string& request) const {
  const size_t end_of_line = request.find("\r\n");
  if (end_of_line == std::string::npos)
    return http_response(400, "Bad Request", "text/plain; charset=utf-8", "not an HTTP request\n");
  const std::string line = request.substr(0, end_of_line);
  const size_t space = line.find(' '), second = line.find(' ', space == std::string::npos ? 0 : space + 1);
  if (space == std::string::npos || second == std::string::npos)
    return http_response(400, "Bad Request", "text/plain; charset=utf-8", "not an HTTP request\n");
  const std::string method = line.substr(0, space);
  std::string path = line.substr(space + 1, second - space - 1);
  path = path.substr(0, path.find('?'));
  if (method != "GET")
    return http_response(405, "Method Not Allowed", "text/plain; charset=utf-8", "the status page is read-only\n");
  if (path == "/status.json") return http_response(200, "OK", "application/json", status_json());
  if (path == "/" || path == "/index.html") {
    try {
      return http_response(200, "OK", "text/html; charset=utf-8",
                           report::html_page(model_ + ": status", status_json(), "status.js"));
    } catch (const std::exception& e) {
      return http_response(500, "Internal Server Error", "text/plain; charset=utf-8", std::string(e.what()) + "\n");
    }
  }
  return http_response(404, "Not Found", "text/plain; charset=utf-8", "GET / or /status.json\n");
}

void StatusPage::serve() {
  while (!stopping_) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int fd = ::accept(listener_, nullptr, nullptr);
    if (fd < 0) continue;
    const timeval timeout{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    std::string request;
    char buffer[2048];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() <= kMaxRequest) {
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      request.append(buffer, size_t(n));
    }
    if (request.size() > kMaxRequest)
      send_all(fd, http_response(431, "Request Header Fields Too Large", "text/plain; charset=utf-8",
                                 "requests are at most 8 KiB\n"));
    else if (!request.empty())
      send_all(fd, respond(request));
    ::close(fd);
  }
}

}  // namespace fvi::net
