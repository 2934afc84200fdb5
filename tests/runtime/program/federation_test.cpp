// What fails in a silo of NAME-sim names the silo, with the exception's type kept for the
// server's catches (fvi/program/federation.h, rethrow_naming_silo).
#include "fvi/program/federation.h"

#include <functional>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "fvi/data/dataset.h"
#include "fvi/engine/bound_factor.h"

namespace {

// A silo whose every request throws what `fail` throws.
class FailingSilo : public fvi::program::SiloEndpoint {
 public:
  explicit FailingSilo(std::function<void()> fail) : fail_(std::move(fail)) {}
  fvi::program::Message handle(uint32_t, fvi::program::Phase, const fvi::program::Message&) override {
    fail_();
    return {};
  }

 private:
  std::function<void()> fail_;
};

class AnsweringSilo : public fvi::program::SiloEndpoint {
 public:
  fvi::program::Message handle(uint32_t, fvi::program::Phase, const fvi::program::Message&) override { return {1.0}; }
};

// The message of what one exchange with silo 1 answering and silo 2 failing by `fail` throws, as
// caught by type E (empty: it threw no E).
template <class E>
std::string failure_caught_as(std::function<void()> fail) {
  AnsweringSilo first;
  FailingSilo second(std::move(fail));
  fvi::program::InProcessTransport transport({&first, &second});
  fvi::program::Exchange x;
  x.request = [](int) { return fvi::program::Message{0.0}; };
  x.reply = [](int, fvi::program::Message&) { return std::string(); };
  try {
    transport.exchange(x);
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a silo's failure in NAME-sim names the silo and keeps its type", "[program][federation]") {
  using fvi::engine::ModelError;
  CHECK(failure_caught_as<ModelError>([] { throw ModelError("likelihood_y (forward): index 5 outside 1..4"); }) ==
        "silo 2: likelihood_y (forward): index 5 outside 1..4");
  CHECK(failure_caught_as<fvi::data::DataError>([] { throw fvi::data::DataError("'g' is short"); }) ==
        "silo 2: 'g' is short");
  CHECK(failure_caught_as<std::invalid_argument>([] { throw std::invalid_argument("a request of 3 values"); }) ==
        "silo 2: a request of 3 values");
  // Any other exception becomes a runtime_error, named; a message that names the silo already is
  // not named twice.
  CHECK(failure_caught_as<std::runtime_error>([] { throw std::out_of_range("row 9"); }) == "silo 2: row 9");
  CHECK(failure_caught_as<ModelError>([] { throw ModelError("silo 2: its data hold inf in x"); }) ==
        "silo 2: its data hold inf in x");
  // Silo 1's own failure is silo 1's.
  AnsweringSilo second;
  FailingSilo first([] { throw ModelError("prior_a (forward): not finite"); });
  fvi::program::InProcessTransport transport({&first, &second});
  fvi::program::Exchange x;
  x.request = [](int) { return fvi::program::Message{0.0}; };
  x.reply = [](int, fvi::program::Message&) { return std::string(); };
  CHECK_THROWS_WITH(transport.exchange(x), "silo 1: prior_a (forward): not finite");
}
