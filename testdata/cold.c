/* cold: at -O2, gcc moves the unlikely branch of check() into a separate
 * check.cold symbol that check jumps to and that jumps back: it is not a
 * function that is called, so it must not be traced as one. */
#include <stdio.h>

volatile int sink;

__attribute__((cold)) void report(int x) { fprintf(stderr, "check: %d is too big\n", x); }

int check(int x)
{
	if (x > 100) {
		report(x);
		sink = x;
		x = 100;
	}
	return x * 2;
}

int main(int argc, char **argv)
{
	printf("cold %d %d\n", check(argc), check(argc + 200));
	return 0;
}
