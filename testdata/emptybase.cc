// emptybase: classes without data passed by value: std::less<int>, whose
// operator() makes uftrace take it for one byte (less{...}), and a plain
// empty struct, shown as empty{}.
#include <functional>

struct empty {};

__attribute__((noinline)) int pick(std::less<int> cmp, empty e, int a, int b) { return cmp(a, b) ? a : b; }

int main() { return pick(std::less<int>(), empty(), 3, 4) - 3; }
