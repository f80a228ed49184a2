// `launch --help` lists every endpoint the server registers: the routes are read from
// src/http/server.cc itself, so a route added there without a line in kLaunchEndpoints
// (launch/launch_options.cc) fails here rather than going unannounced.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "launch/launch_options.h"
#include "test_paths.h"

namespace rocket {
namespace {

std::set<std::string> registered_routes() {
  std::ifstream f(test::source_dir() + "/src/http/server.cc");
  std::stringstream text;
  text << f.rdbuf();
  const std::string s = text.str();
  std::set<std::string> routes;
  const std::regex route(R"re(server\.(Get|Post)\(\s*"([^"]+)")re");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), route); it != std::sregex_iterator(); ++it) {
    std::string path = (*it)[2];
    // A parameter captured by a pattern ("/v1/models/(.+)") is written as the help writes it.
    if (const size_t at = path.find("(.+)"); at != std::string::npos) path.replace(at, 4, "{id}");
    routes.insert(path);
  }
  return routes;
}

TEST(LaunchHelp, ListsEveryRegisteredEndpoint) {
  const std::set<std::string> routes = registered_routes();
  // The routes of the two APIs, the models, health, metrics, stats and the front's handshake at least.
  ASSERT_GE(routes.size(), 10u) << "the route pattern no longer matches src/http/server.cc";
  for (const char* must : {"/v1/responses", "/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions"})
    EXPECT_TRUE(routes.contains(must)) << must;
  const std::string help = kLaunchEndpoints;
  for (const std::string& r : routes) EXPECT_NE(help.find(r), std::string::npos) << r << " is missing from launch --help";
  // The routes registered in a loop (/prefix + each completion path) are listed too.
  EXPECT_NE(help.find("/prefix/v1/"), std::string::npos);
}

TEST(LaunchHelp, TheHelpOfLaunchEndsWithTheEndpoints) {
  CLI::App cmd("launch", "rocket launch");
  LaunchOptions o;
  add_launch_options(cmd, o);
  EXPECT_NE(cmd.help().find("POST /v1/messages"), std::string::npos) << cmd.help();
}

}  // namespace
}  // namespace rocket
