#include "fvi/version.h"

#include <string>

#include <catch2/catch.hpp>

TEST_CASE("runtime version string", "[version]") { CHECK(std::string(fvi::version()) == "0.1.0"); }
