/* longjmp: a longjmp out of three traced frames back to the function that
 * called setjmp, which then calls more functions. */
#include <setjmp.h>
#include <stdio.h>

static jmp_buf env;
volatile int sink;

int leaf(int x) { return x + 1; }
void third(int x) { sink = leaf(x); longjmp(env, x); }
void second(int x) { third(x + 1); sink = 0; }
void first(int x) { second(x + 1); sink = 0; }

int catcher(void)
{
	int r = setjmp(env);
	if (r == 0) {
		first(1);
		return -1;
	}
	return leaf(r);
}

int main(void)
{
	int r = catcher();
	printf("longjmp %d %d\n", r, leaf(r));
	return 0;
}
