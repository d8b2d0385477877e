/* fib: recursion. */
#include <stdio.h>
#include <stdlib.h>

int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	printf("fib(%d) = %d\n", n, fib(n));
	return 0;
}
