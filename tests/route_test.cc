// The replicated front's routing choice (front/route.h): the longest cached prefix wins; without one,
// or between equal ones, the least loaded; equal replicas take turns; replicas out of rotation never.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "front/route.h"

namespace rocket {
namespace {

ReplicaReport up(int64_t cached, int64_t load) { return {.healthy = true, .cached_tokens = cached, .load = load}; }
ReplicaReport down(int64_t cached = 0, int64_t load = 0) { return {.healthy = false, .cached_tokens = cached, .load = load}; }

TEST(Route, LongestCachedPrefixWinsOverLoad) {
  const std::vector<ReplicaReport> r = {up(0, 0), up(512, 7), up(256, 0)};
  EXPECT_EQ(choose_replica(r), 1u);
  EXPECT_EQ(choose_replica(r, 2), 1u);  // the rotation only breaks ties
}

TEST(Route, NothingCachedGoesToTheLeastLoaded) {
  EXPECT_EQ(choose_replica(std::vector{up(0, 3), up(0, 1), up(0, 2)}), 1u);
  EXPECT_EQ(choose_replica(std::vector{up(0, 3), up(0, 1), up(0, 2)}, 2), 1u);
}

TEST(Route, EqualPrefixesGoToTheLeastLoadedOfThem) {
  EXPECT_EQ(choose_replica(std::vector{up(128, 4), up(0, 0), up(128, 2)}), 2u);
}

TEST(Route, FullTiesTakeTurnsFromTheRotation) {
  const std::vector<ReplicaReport> r = {up(0, 1), up(0, 1), up(0, 1)};
  EXPECT_EQ(choose_replica(r, 0), 0u);
  EXPECT_EQ(choose_replica(r, 1), 1u);
  EXPECT_EQ(choose_replica(r, 2), 2u);
  EXPECT_EQ(choose_replica(r, 3), 0u);
  // A tie only among some: the rotation picks among those, starting from it.
  const std::vector<ReplicaReport> s = {up(0, 1), up(0, 5), up(0, 1)};
  EXPECT_EQ(choose_replica(s, 1), 2u);
  EXPECT_EQ(choose_replica(s, 2), 2u);
  EXPECT_EQ(choose_replica(s, 3), 0u);
}

TEST(Route, TheRoutingKeyBreaksTiesOnThePrefixBeforeLoad) {
  ReplicaReport keyed = up(0, 5);
  keyed.keyed = true;
  EXPECT_EQ(choose_replica(std::vector{up(0, 0), keyed, up(0, 1)}), 1u);  // an agent's next turn goes where its last went
  ReplicaReport keyed_short = up(128, 0);
  keyed_short.keyed = true;
  EXPECT_EQ(choose_replica(std::vector{keyed_short, up(512, 9)}), 1u);  // a longer cached prefix still wins
  ReplicaReport keyed_down = down();
  keyed_down.keyed = true;
  EXPECT_EQ(choose_replica(std::vector{keyed_down, up(0, 3)}), 1u);
}

TEST(Route, RoutingKeyOfEachApi) {
  EXPECT_EQ(routing_key("/v1/responses", R"({"model": "m", "prompt_cache_key": "thread-1", "input": [[[[1]]]]})"), "thread-1");
  EXPECT_EQ(routing_key("/v1/chat/completions", R"({"prompt_cache_key": "k"})"), "k");
  EXPECT_EQ(routing_key("/v1/messages", R"({"metadata": {"user_id": "{\"session_id\":\"s\"}"}, "prompt_cache_key": "x"})"),
            "{\"session_id\":\"s\"}");
  EXPECT_EQ(routing_key("/v1/chat/completions", R"({"model": "m"})"), "");
  EXPECT_EQ(routing_key("/v1/chat/completions", R"({"prompt_cache_key": 5})"), "");
  EXPECT_EQ(routing_key("/v1/responses", "not json"), "");
  EXPECT_EQ(routing_key("/v1/responses", std::string(100000, '[')), "");  // hostile nesting costs no depth
}

TEST(Route, ReplicasOutOfRotationAreNeverChosen) {
  EXPECT_EQ(choose_replica(std::vector{down(4096, 0), up(0, 9)}), 1u);
  EXPECT_EQ(choose_replica(std::vector{up(0, 9), down(0, 0)}, 1), 0u);
  EXPECT_EQ(choose_replica(std::vector{down(), down()}), std::nullopt);
  EXPECT_EQ(choose_replica(std::vector<ReplicaReport>{}), std::nullopt);
}

}  // namespace
}  // namespace rocket
