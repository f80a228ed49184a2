// The replicated front's /metrics (front/exposition.h): every replica's series labelled with its
// index, counters and histograms summed without the label, gauges per replica only, one HELP and TYPE
// per family, label values with braces, commas and escaped quotes kept intact.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "front/exposition.h"

namespace rocket {
namespace {

const char* kReplica0 =
    "# HELP rocket_requests_total Requests answered.\n"
    "# TYPE rocket_requests_total counter\n"
    "rocket_requests_total{reason=\"stop\"} 3\n"
    "rocket_requests_total{reason=\"length\"} 1\n"
    "# HELP rocket_running Streams running.\n"
    "# TYPE rocket_running gauge\n"
    "rocket_running 2\n"
    "# HELP rocket_ttft_seconds Time to first token.\n"
    "# TYPE rocket_ttft_seconds histogram\n"
    "rocket_ttft_seconds_bucket{le=\"0.1\"} 1\n"
    "rocket_ttft_seconds_bucket{le=\"+Inf\"} 4\n"
    "rocket_ttft_seconds_sum 0.75\n"
    "rocket_ttft_seconds_count 4\n"
    "# TYPE rocket_info gauge\n"
    "rocket_info{fingerprint=\"a,b} \\\"c\\\"\"} 1\n";

const char* kReplica1 =
    "# HELP rocket_requests_total Requests answered.\n"
    "# TYPE rocket_requests_total counter\n"
    "rocket_requests_total{reason=\"stop\"} 10\n"
    "rocket_requests_total{reason=\"length\"} 0\n"
    "# HELP rocket_running Streams running.\n"
    "# TYPE rocket_running gauge\n"
    "rocket_running 5\n"
    "# HELP rocket_ttft_seconds Time to first token.\n"
    "# TYPE rocket_ttft_seconds histogram\n"
    "rocket_ttft_seconds_bucket{le=\"0.1\"} 2\n"
    "rocket_ttft_seconds_bucket{le=\"+Inf\"} 2\n"
    "rocket_ttft_seconds_sum 0.5\n"
    "rocket_ttft_seconds_count 2\n";

const std::string kExpected =
    "# HELP rocket_requests_total Requests answered.\n"
    "# TYPE rocket_requests_total counter\n"
    "rocket_requests_total{replica=\"0\",reason=\"stop\"} 3\n"
    "rocket_requests_total{replica=\"0\",reason=\"length\"} 1\n"
    "rocket_requests_total{replica=\"1\",reason=\"stop\"} 10\n"
    "rocket_requests_total{replica=\"1\",reason=\"length\"} 0\n"
    "rocket_requests_total{reason=\"stop\"} 13\n"
    "rocket_requests_total{reason=\"length\"} 1\n"
    "# HELP rocket_running Streams running.\n"
    "# TYPE rocket_running gauge\n"
    "rocket_running{replica=\"0\"} 2\n"
    "rocket_running{replica=\"1\"} 5\n"
    "# HELP rocket_ttft_seconds Time to first token.\n"
    "# TYPE rocket_ttft_seconds histogram\n"
    "rocket_ttft_seconds_bucket{replica=\"0\",le=\"0.1\"} 1\n"
    "rocket_ttft_seconds_bucket{replica=\"0\",le=\"+Inf\"} 4\n"
    "rocket_ttft_seconds_sum{replica=\"0\"} 0.75\n"
    "rocket_ttft_seconds_count{replica=\"0\"} 4\n"
    "rocket_ttft_seconds_bucket{replica=\"1\",le=\"0.1\"} 2\n"
    "rocket_ttft_seconds_bucket{replica=\"1\",le=\"+Inf\"} 2\n"
    "rocket_ttft_seconds_sum{replica=\"1\"} 0.5\n"
    "rocket_ttft_seconds_count{replica=\"1\"} 2\n"
    "rocket_ttft_seconds_bucket{le=\"0.1\"} 3\n"
    "rocket_ttft_seconds_bucket{le=\"+Inf\"} 6\n"
    "rocket_ttft_seconds_sum 1.25\n"
    "rocket_ttft_seconds_count 6\n"
    "# TYPE rocket_info gauge\n"
    "rocket_info{replica=\"0\",fingerprint=\"a,b} \\\"c\\\"\"} 1\n";

TEST(Exposition, LabelsEveryReplicaAndSumsCountersAndHistograms) {
  const std::vector<std::string> scrapes = {kReplica0, kReplica1};
  EXPECT_EQ(merge_expositions(scrapes), kExpected);
}

TEST(Exposition, AReplicaThatCouldNotBeScrapedIsLeftOutOfTheSums) {
  const std::vector<std::string> scrapes = {"", kReplica1};
  const std::string out = merge_expositions(scrapes);
  EXPECT_EQ(out.find("replica=\"0\""), std::string::npos);
  EXPECT_NE(out.find("rocket_requests_total{replica=\"1\",reason=\"stop\"} 10\n"), std::string::npos);
  EXPECT_NE(out.find("rocket_requests_total{reason=\"stop\"} 10\n"), std::string::npos);
  EXPECT_NE(out.find("rocket_ttft_seconds_sum 0.5\n"), std::string::npos);
}

}  // namespace
}  // namespace rocket
