// resjump: jumps out of a resource call (fclose of a fopencookie stream,
// whose close function jumps out) must not silence the thread: the
// allocations after each are reported. The first is a longjmp (rtrace
// hooks it), the second a __builtin_longjmp (no libc call: rtrace cannot
// follow it, and the call's frame stays on its shadow stack). It prints
// the addresses of the blocks it leaks after the jumps.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static jmp_buf out;
static void *builtin_out[5];
static void *volatile last;

static int jump_out(void *cookie) {
	(void)cookie;
	longjmp(out, 1);
}

static int builtin_jump_out(void *cookie) {
	(void)cookie;
	__builtin_longjmp(builtin_out, 1);
}

__attribute__((noinline)) static void *after_jump(void) {
	last = malloc(123); // LINE:after
	return last;
}

__attribute__((noinline)) static void *after_builtin_jump(void) {
	last = malloc(321); // LINE:afterbuiltin
	return last;
}

__attribute__((noinline)) static void close_builtin(void) {
	cookie_io_functions_t io = {.close = builtin_jump_out};
	FILE *f = fopencookie(NULL, "w", io);
	if (__builtin_setjmp(builtin_out) == 0)
		fclose(f); // never returns
}

int main(void) {
	cookie_io_functions_t io = {.close = jump_out};
	FILE *f = fopencookie(NULL, "w", io);
	if (!setjmp(out))
		fclose(f); // never returns
	void *p = after_jump();
	close_builtin();
	void *q = after_builtin_jump();
	char line[64];
	int n = snprintf(line, sizeof line, "leaked %p %p\n", p, q);
	write(1, line, n);
	return 0;
}
