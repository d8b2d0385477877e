/* chain: a call chain main -> a -> b -> c -> d, twice, with stdout and stderr output. */
#include <stdio.h>

int d(int x) { return x * 2; }
int c(int x) { return d(x) + 1; }
int b(int x) { return c(x) + c(x + 1); }
int a(int x) { return b(x) - 1; }

int main(void)
{
	int r = a(1) + a(2);
	printf("chain %d\n", r);
	fprintf(stderr, "chain done\n");
	return r % 7;
}
