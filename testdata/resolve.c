/* resolve: a call chain whose return addresses and function addresses the
 * program prints, with its executable mappings, for the resolver tests.
 * Marker comments (LINE:name) name the lines the tests expect. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

#ifdef WITH_LIB
int lib_entry(int x);
#endif

static volatile int sink;

/* leaf prints the return address into its caller, tagged by who called. */
NOINLINE static void leaf(const char *tag)
{
	printf("ret %s %p\n", tag, __builtin_return_address(0));
	sink++;
}

NOINLINE int mid(int x)
{
	leaf("mid"); /* LINE:mid-call */
	return x + sink;
}

/* twice is always inlined: the return address of its call to leaf lies in
 * top's code but within the inlined body. */
static inline __attribute__((always_inline)) int twice(int x)
{
	leaf("inlined"); /* LINE:inlined-call */
	return 2 * x + sink;
}

NOINLINE int top(int x)
{
	int r = mid(x); /* LINE:top-call */
	r += twice(r); /* LINE:twice-site */
	leaf("top"); /* LINE:top-leaf */
	return r + sink;
}

/* cmp is called back from the C library: its return address is there. */
static int cmp(const void *a, const void *b)
{
	static int once;
	if (!once++)
		printf("ret libc %p\n", __builtin_return_address(0));
	return *(const int *)a - *(const int *)b;
}

static void maps(void)
{
	char line[4096];
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return;
	while (fgets(line, sizeof line, f))
		if (strstr(line, " r-xp "))
			printf("map %s", line);
	fclose(f);
}

int main(void)
{
	printf("sym mid %p\nsym top %p\nsym leaf %p\nsym main %p\n",
	       (void *)mid, (void *)top, (void *)leaf, (void *)main);
	int v[] = {3, 1, 2};
	qsort(v, 3, sizeof v[0], cmp);
	int r = top(1);
	leaf("main"); /* LINE:main-leaf */
#ifdef WITH_LIB
	r += lib_entry(r); /* LINE:main-lib */
#endif
	maps();
	return r == 12345;
}
