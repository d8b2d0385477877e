/* clonevm: a child made with clone(CLONE_VM) without CLONE_THREAD, which
 * ptrace reports as a fork but which shares its parent's memory and TLS,
 * computes what its parent computes, at the same time. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

__attribute__((noinline)) long leaf(long x) { return x * 3 + 1; }
__attribute__((noinline)) long mid(long x) { return leaf(x) + leaf(x + 1); }

__attribute__((noinline)) long loop(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += mid(i);
	return s;
}

static volatile long childres;

static int child(void *arg)
{
	childres = loop(20000);
	return 0;
}

int main(void)
{
	char *stack = malloc(1 << 20);
	pid_t p = clone(child, stack + (1 << 20), CLONE_VM | SIGCHLD, NULL);
	long r = loop(20000);
	int st;
	waitpid(p, &st, 0);
	printf("parent %ld child %ld\n", r, childres);
	return r != childres;
}
