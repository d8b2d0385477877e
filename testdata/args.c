/* args: arguments and return values of every kind uftrace's argspec
 * covers: integers of each size, chars, strings (NULL, long), floats and
 * doubles, pointers (one called through a pointer), more than six
 * arguments, string and float returns. */
#include <stdio.h>
#include <string.h>

volatile long sink;

int ints(signed char c, short s, int i, long l, unsigned u) { return i + (int)l + u + s + c; }
char chars(char a, char b) { return a > b ? a : b; }
size_t strs(const char *a, const char *b, const char *c) { return strlen(a) + (b ? strlen(b) : 0) + strlen(c); }
double floats(float f, double d, int i, double e) { return f * d + e + i; }
float half(float f) { return f / 2; }
double scale(long x) { return x * 0.75; }
void *ptr(void *p) { return p; }
long many(long a, long b, long c, long d, long e, long f, long g, long h) { return a + b + c + d + e + f + g + h; }
double mixed(int a, double b, int c, double d, int e, int f, int g, int h, double i)
{
	return a + b + c + d + e + f + g + h + i;
}
const char *name(int i) { return i ? "odd" : "even"; }
int neg(int x) { return -x; }

int main(void)
{
	static const char longs[] = "a string of more than ninety-eight characters, which uftrace cuts and ends in three dots...........";
	sink = ints(-3, -300, -70000, -5000000000L, 4000000000U);
	sink = chars('x', 'y');
	sink = strs("hello", NULL, longs);
	sink = (long)floats(1.5f, -2.25, 7, 1e10);
	sink = (long)half(3.0f);
	sink = (long)scale(-6);
	sink = (long)ptr((void *)0x1234);
	void *(*volatile indirect)(void *) = ptr; /* a call the int3 entry of a short ptr sees */
	sink = (long)indirect((void *)0x5678);
	sink = many(1, 2, 3, 4, 5, 6, 7, 8);
	sink = (long)mixed(1, 2.5, 3, 4.5, 5, 6, 7, 8, 9.5);
	printf("args %s %s %d\n", name(1), name(0), neg(5));
	return 0;
}
