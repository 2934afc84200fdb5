#pragma once
// Numeric constants used across the runtime.

namespace fvi {

constexpr double kLog2Pi = 1.8378770664093454835606594728112;  // log(2 pi)
constexpr double kSqrt2 = 1.4142135623730950488016887242097;
constexpr double kPi = 3.14159265358979323846264338327950;

}  // namespace fvi
