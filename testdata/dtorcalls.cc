/* dtorcalls: a destructor run by the unwinder (from a landing pad) calls
 * two functions in turn, the first with a callee: each returns before the
 * next is called, as the call trees show. */
#include <cstdio>

volatile int sink;
__attribute__((noinline)) int g(int x) { sink = x; return x + 1; }
__attribute__((noinline)) int e(int x) { int r = g(x); sink = r; return r + 1; }
__attribute__((noinline)) int f(int x) { sink = x; return x; }
struct Guard {
	~Guard() { sink = e(3) + f(4); }
};
__attribute__((noinline)) void thrower(int x) { if (x) throw 42; }
__attribute__((noinline)) void frame(int x) { Guard gd; thrower(x); sink = 5; }
__attribute__((noinline)) int catcher()
{
	try {
		frame(1);
	} catch (int v) {
		return v + g(1);
	}
	return 0;
}

int main()
{
	int r = catcher();
	printf("dtorcalls %d %d\n", r, e(8));
	return 0;
}
