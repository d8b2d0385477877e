/* sigswitch: raises SIGUSR1, then SIGUSR2, between its calls. Without
 * rtrace's --signal triggers taking them, SIGUSR1 kills it. */
#include <signal.h>
#include <stdio.h>

int before(int x) { return x + 1; }
int between(int x) { return x * 2; }
int after(int x) { return x - 1; }

int main(void)
{
	int r = before(1);
	raise(SIGUSR1);
	r += between(2);
	raise(SIGUSR2);
	r += after(3);
	printf("sigswitch %d\n", r);
	return 0;
}
