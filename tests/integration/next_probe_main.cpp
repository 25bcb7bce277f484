// Prints what RTLD_NEXT finds from library A; must be library B's definition (2) with or without kvremap.
#include <cstdio>

extern "C" int next_probe_value();
extern "C" int probe_b_marker();

int main() {
  std::printf("next probe_value: %d (library B says %d)\n", next_probe_value(), probe_b_marker());
  return next_probe_value() == 2 ? 0 : 1;
}
