/* crash: a NULL store three calls deep kills the program with SIGSEGV. */
#include <stdio.h>

int *volatile target; /* NULL, unknown to the optimiser */

int leaf(int x) { return x + 1; }
void crash(int *p) { *p = leaf(1); }
void middle(int *p) { crash(p); }

int main(void)
{
	printf("crash\n");
	fflush(stdout);
	middle(target);
	return 0;
}
