// sameslot: f makes a resource call, then calls g from the same place on
// the stack, at the same depth: g's malloc is not nested in the call that
// returned (with -d, resource calls are made at stops). It prints the
// addresses of the blocks it keeps.
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void *g(int n) {
	void *p = malloc(n);
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) void *f(int n) {
	void *volatile q = malloc(5);
	__asm__ volatile("" ::: "memory");
	free(q);
	__asm__ volatile("" ::: "memory");
	void *p = g(n);
	__asm__ volatile("" ::: "memory");
	return p;
}

int main(void) {
	void *volatile a = g(11);
	void *volatile b = f(77);
	printf("%p %p\n", a, b);
	return 0;
}
