#pragma once
// NAME-server --status-port P: a read-only web page of the run as it goes on (docs/deployment.md,
// "The status page"): the round, the silos joined and the replies each one missed, messages
// refused, the objective so far with the same charts as `fvic report`, the time left at most,
// and the server's log of joins, rejoins, refusals and dropouts. GET / is the page (self-contained:
// report/status.js with the charting library inlined), GET /status.json the data it polls.
//
// A small HTTP/1.1 responder on its own thread, bound to 127.0.0.1 unless told otherwise: one
// connection at a time, each request read with a 2 s timeout and at most 8 KiB, anything but
// GET of those two paths answered 404 or 405. It never reads the run's data, only what the
// server already prints.
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fvi/program/progress.h"

namespace fvi::net {

class ServerTransport;

class StatusPage final : public program::ProgressObserver {
 public:
  // Listens on host:port (port 0: any free port; port() says which). Throws std::runtime_error
  // naming the address when it cannot.
  StatusPage(const std::string& host, int port, std::string model, std::string method, int silos,
             const ServerTransport& transport);
  ~StatusPage() override;  // stops the thread and closes the socket
  StatusPage(const StatusPage&) = delete;
  StatusPage& operator=(const StatusPage&) = delete;

  int port() const { return port_; }
  // A line the server logged (the transport's sink): kept, the last kMaxEvents of them.
  void event(const std::string& line);

  void report(const program::ProgressReport& report) override;
  void finished(const std::vector<std::pair<std::string, std::string>>& notes) override;

  // status.json as it stands (for the page, and for the tests).
  std::string status_json() const;
  // The answer to one HTTP request's text: status line, headers and body.
  std::string respond(const std::string& request) const;

  static constexpr size_t kMaxEvents = 200;
  static constexpr size_t kMaxRequest = 8192;

 private:
  void serve();

  const std::string model_, method_;
  const int silos_;
  const ServerTransport& transport_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  int listener_ = -1, port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;

  mutable std::mutex mutex_;  // guards what follows; never held while calling the transport
  std::vector<program::ProgressReport> reports_;
  std::deque<std::pair<double, std::string>> events_;  // (seconds since start, line)
  std::vector<std::pair<std::string, std::string>> notes_;
  bool finished_ = false;
};

}  // namespace fvi::net
