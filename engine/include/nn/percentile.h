// One definition of a latency percentile for every tool, benchmark and element that
// reports one (nnrun, nnbench_quick, bench/nnbench, the plugins' latency windows): the
// p-th percentile with linear interpolation between the two nearest ranks, the same as
// numpy.percentile's default, so numbers from the tools, the elements and bench/*.py agree.
#pragma once

#include <span>
#include <vector>

namespace nn {

// p in [0, 100] (clamped): 0 is the minimum, 50 the median, 100 the maximum.
// 0 when there are no samples.
double percentile(std::span<const double> samples, double p);

}  // namespace nn
