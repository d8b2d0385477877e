/* exit: exit() from a nested function, frames still open. */
#include <stdio.h>
#include <stdlib.h>

volatile int sink; /* keeps -O2 from dropping the call to leaf */

int leaf(int x) { return x + 1; }
void deep(int code) { sink = leaf(code); fflush(stdout); exit(code); }
void middle(int code) { deep(code + 1); }

int main(void)
{
	printf("exit\n");
	middle(4);
	return 0;
}
