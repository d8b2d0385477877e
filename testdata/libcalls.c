/* libcalls: calls into libc from several depths: getpid, malloc/free,
 * printf, a qsort whose comparator (a traced function) libc calls back,
 * and a tail call into the library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

int sorted(void)
{
	int v[3] = {3, 1, 2};
	qsort(v, 3, sizeof v[0], cmp);
	return v[0];
}

char *copy(const char *s)
{
	char *p = malloc(strlen(s) + 1);
	strcpy(p, s);
	return p;
}

/* A tail call at -O2: puts reuses report's return address. */
int report(const char *s) { return puts(s); }

int main(void)
{
	char *p = copy("libcalls");
	int pid = getpid();
	report(p);
	free(p);
	printf("%d %d\n", sorted(), pid > 0);
	return 0;
}
