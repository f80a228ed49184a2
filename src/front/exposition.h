// GET /metrics of the replicated front: the replicas' Prometheus text expositions (format 0.0.4)
// merged into one. Every replica's series keep their names and gain a `replica="i"` label; the
// counters and histograms (monotonic sums, so adding them is meaningful) appear once more without
// that label, summed over the replicas, so a dashboard written against one engine reads the whole
// arrangement from the same series. Gauges (load, memory, info) stay per replica: a sum of free
// memory or of a fingerprint means nothing. Families keep their HELP and TYPE once, in the order
// they first appear.
#pragma once

#include <span>
#include <string>

namespace rocket {

// `scrapes[i]`: replica i's exposition; empty when it could not be scraped (its series are missing,
// and the sums are over the others). Lines that are neither comments nor samples are dropped.
std::string merge_expositions(std::span<const std::string> scrapes);

}  // namespace rocket
