// altframe: the alternate signal stack is a buffer in main's frame, on the
// thread's own stack above the frames of the calls main makes. Inside an
// audited call (slow), a signal's handler runs on it and allocates: the
// frames below, slow's included, are live, not left by a jump, and slow
// returns through rtrace's code. It prints how many handlers ran.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile int hits;

static void handler(int sig) {
	(void)sig;
	void *volatile p = malloc(48);
	free(p);
	hits++;
}

__attribute__((noinline)) long slow(long n) {
	volatile long s = n;
	raise(SIGUSR2); // the handler runs before raise returns (not SIGUSR1: rtrace's toggle)
	return s;
}

__attribute__((noinline)) static void work(void) {
	for (int i = 0; i < 100; i++)
		slow(i);
}

int main(void) {
	char alt[1 << 16];
	stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
	if (sigaltstack(&ss, 0))
		return 2;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR2, &sa, 0);
	work();
	printf("hits %d\n", hits);
	return 0;
}
