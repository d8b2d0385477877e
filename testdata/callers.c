/* callers: c is called under a -> b and straight from main, e from every
 * level; the caller filter (-C c) keeps main, a, b and c only, hiding c
 * (-H c) lifts d and e a level. */
#include <stdio.h>

int d(int x) { return x * 2; }
int e(int x) { return x + 1; }
int c(int x) { return d(x) + e(x); }
int b(int x) { return c(x) + e(x); }
int a(int x) { return b(x) - e(x); }

int main(void)
{
	int r = a(1) + e(2) + c(3);
	printf("callers %d\n", r);
	return 0;
}
