/* tail: at -O2, tail() ends in a jump to leaf(), not a call; leaf then
 * returns straight to tail's caller. */
#include <stdio.h>

volatile int sink;

int leaf(int x) { sink = x; return x + 1; }
int tail(int x) { return leaf(x * 3); }
int twice(int x) { return tail(x) + tail(x + 1); }

int main(void)
{
	printf("tail %d\n", twice(1));
	return 0;
}
