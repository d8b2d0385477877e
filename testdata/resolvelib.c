/* resolvelib: the shared library half of resolve.c. It prints the return
 * address of a call inside the library and the address of a static
 * function, as resolve.c does. */
#include <stdio.h>

static volatile int lib_sink;

__attribute__((noinline, noclone)) static void lib_leaf(void)
{
	printf("ret lib %p\n", __builtin_return_address(0));
	lib_sink++;
}

__attribute__((noinline, noclone)) int lib_entry(int x)
{
	printf("sym lib_leaf %p\n", (void *)lib_leaf);
	printf("ret main-lib %p\n", __builtin_return_address(0));
	lib_leaf(); /* LINE:lib-call */
	return x + lib_sink;
}
