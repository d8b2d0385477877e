/* euid: says its effective uid, from a function of its own: a setuid copy
 * shows whether it ran with its owner's uid, and a trace shows who(). */
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) unsigned who(void)
{
	return geteuid();
}

int main(void)
{
	printf("euid %u\n", who());
	return 0;
}
