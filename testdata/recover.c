/* recover: functions that read return addresses from the stack
 * themselves, through the frame pointers, as uftrace's auto-recover (and
 * -T FUNC@recover) is for: a tracer that hijacks returns must leave the
 * callers' real ones there. */
#include <stdio.h>

static int in_main(void *p);

/* Where its caller returns to: into main. */
__attribute__((noinline)) void *callers_return(void)
{
	return __builtin_return_address(1);
}

__attribute__((noinline)) void *grandcallers_return(void)
{
	return __builtin_return_address(2);
}

__attribute__((noinline)) int check(void)
{
	return in_main(callers_return());
}

__attribute__((noinline)) int deeper(void)
{
	return in_main(grandcallers_return());
}

__attribute__((noinline)) int check2(void)
{
	return deeper();
}

int main(void)
{
	int a = check(), b = check2();
	printf("caller's return %s, grandcaller's %s\n", a ? "in main" : "elsewhere", b ? "in main" : "elsewhere");
	return 0;
}

/* Whether p points into main's code (shorter than 0x200 bytes). */
static int in_main(void *p)
{
	return (char *)p > (char *)main && (char *)p < (char *)main + 0x200;
}
