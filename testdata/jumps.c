/* jumps: jumps rtrace cannot follow, which leave frames on its shadow
 * stack whose slots are dead: __builtin_longjmp (no libc call), and a
 * longjmp to a copy of the jmp_buf setjmp filled (the one rtrace knows is
 * another). The calls after them must run as without rtrace: nothing may
 * be written into the dead slots, now the live code's memory. */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

void *builtin_buf[5];
jmp_buf env, copy;
volatile long sink, doit = 1;

__attribute__((noinline)) void builtin_jump(void) { if (doit) __builtin_longjmp(builtin_buf, 1); }
__attribute__((noinline)) void copy_jump(void)
{
	volatile long a[2];
	a[0] = 1;
	a[1] = 2;
	if (doit)
		longjmp(copy, 1);
	sink = a[0] + a[1];
}
__attribute__((noinline)) long third(long x, long y, long z) { sink = x + y; return z; }

int main(void)
{
	if (__builtin_setjmp(builtin_buf) == 0) {
		builtin_jump();
		puts("not reached: after builtin_jump()");
		return 1;
	}
	long r = third(5, 6, 7);
	if (setjmp(env) == 0) {
		memcpy(copy, env, sizeof env);
		copy_jump();
		puts("not reached: after copy_jump()");
		return 1;
	}
	printf("jumps %ld %ld\n", r, third(5, 6, 7));
	return 0;
}
