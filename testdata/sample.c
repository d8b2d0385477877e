/* sample: the program `make demo` traces. A small call tree, recursion
 * and a library call, built without -pg: rtrace needs no recompiling. */
#include <stdio.h>

static int square(int x) { return x * x; }

int sum_squares(int n)
{
	int i, s = 0;
	for (i = 1; i <= n; i++)
		s += square(i);
	return s;
}

int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(void)
{
	printf("sum_squares(3) = %d\n", sum_squares(3));
	printf("fib(5) = %d\n", fib(5));
	return 0;
}
