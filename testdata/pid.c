/* pid: prints its pid, as a daemon writes its pid file (--keep-pid). */
#include <stdio.h>
#include <unistd.h>

int leaf(int x) { return x + 1; }

int main(void)
{
	printf("pid %d\n", (int)getpid());
	return leaf(2);
}
