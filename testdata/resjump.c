// resjump: jumps out of a resource call (fclose of a fopencookie stream,
// whose close function jumps out) must not silence the thread: the
// allocations after each are reported. The first is a longjmp (rtrace
// hooks it), the second a __builtin_longjmp (no libc call: rtrace cannot
// follow it, and the call's frame stays on its shadow stack). Then a
// call from main and a deeper one: nothing of rtrace's may land in the
// deeper one's frame, where the dead frame's slot was (victim checks).
// Then 5000 such jumps: the dead frames must not fill the shadow stack.
// It prints the addresses of the blocks it leaks after the jumps, and
// exits 1 when a frame's memory changed under it.
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

__attribute__((noinline)) static void *after_many_jumps(void) {
	last = malloc(777); // LINE:aftermany
	return last;
}

__attribute__((noinline)) static void *deep(int n) {
	volatile char pad[64];
	pad[0] = n;
	void *p = malloc(10 + pad[0]);
	__asm__ volatile("" ::: "memory");
	return p;
}

// victim's frame covers the stack a call from main made below it: a
// write of rtrace's there shows in arr.
__attribute__((noinline)) static int victim(void) {
	volatile unsigned long arr[256];
	for (int i = 0; i < 256; i++)
		arr[i] = 0;
	free(deep(1));
	int bad = 0;
	for (int i = 0; i < 256; i++)
		if (arr[i] != 0) {
			char line[64];
			int n = snprintf(line, sizeof line, "arr[%d] = %#lx: corrupted\n", i, arr[i]);
			write(1, line, n);
			bad = 1;
		}
	return bad;
}

int main(void) {
	cookie_io_functions_t io = {.close = jump_out};
	FILE *f = fopencookie(NULL, "w", io);
	if (!setjmp(out))
		fclose(f); // never returns
	void *p = after_jump();
	close_builtin();
	void *q = after_builtin_jump();
	close_builtin();
	void *volatile r = malloc(5);
	free(r);
	int bad = victim();
	for (int i = 0; i < 5000; i++)
		close_builtin();
	void *s = after_many_jumps();
	char line[96];
	int n = snprintf(line, sizeof line, "leaked %p %p %p\n", p, q, s);
	write(1, line, n);
	return bad;
}
