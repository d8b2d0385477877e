/* statics: two static functions named helper, one here and one in
 * statics2.c, of different types: -a must give each its own arguments
 * (uftrace finds DWARF's specs by address, not by name). */
#include <stdio.h>

int other(const char *s, double d);

static long helper(long a, long b) { return a * b; }

int main(void)
{
	printf("statics %ld %d\n", helper(6, 7), other("x", 0.5));
	return 0;
}
