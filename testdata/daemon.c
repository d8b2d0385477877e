/* daemon: daemon() forks; the parent exits inside it (its main() and
 * daemon() never return), the child returns from daemon() and goes on. */
#include <stdlib.h>
#include <unistd.h>

int c(void) { return getpid() % 100000; }
int b(void) { return c() + 1; }
int a(void) { return b() - 1; }

int main(void)
{
	if (daemon(0, 0) < 0)
		return 1;
	return a() ? 0 : 1;
}
