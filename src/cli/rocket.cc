// rocket: the one CLI. Subcommands: forge, build, inspect, generate, probe.
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  std::fprintf(stderr, "usage: rocket <forge|build|inspect|generate|probe> [--help]\n");
  return 2;
}
