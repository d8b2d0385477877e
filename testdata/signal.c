/* signal: a handler runs, nested at the interrupted depth. */
#include <signal.h>
#include <stdio.h>

volatile int hits;

int leaf(int x) { return x + 1; }
void handler(int sig) { hits += leaf(sig); }
int work(void) { raise(SIGUSR1); return leaf(hits); }

int main(void)
{
	signal(SIGUSR1, handler);
	printf("signal %d\n", work());
	return 0;
}
