/* plugin: a shared library the dlopen fixture loads at run time, with a
 * USDT probe. */
#include <sys/sdt.h>

int plug_leaf(int x) { return x * 2; }
int plug_run(int x)
{
	DTRACE_PROBE1(plugin, run, x);
	return plug_leaf(x) + 1;
}
