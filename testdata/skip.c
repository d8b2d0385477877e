/* skip: odd() starts with jrcxz, which has only a rel8 form and cannot be
 * relocated out of line: rtrace skips it, says so, and traces the rest.
 * loopy() loops back to its third byte, inside where a detour jump would
 * go: it keeps an int3 entry. */
#include <stdio.h>

__asm__(".text\n"
	".globl odd\n"
	".type odd, @function\n"
	"odd:\n"
	"	jrcxz 1f\n"
	"1:	mov %edi, %eax\n"
	"	ret\n"
	".size odd, .-odd\n"
	".globl loopy\n"
	".type loopy, @function\n"
	"loopy:\n"
	"	xor %eax, %eax\n"
	"1:	inc %eax\n"
	"	cmp %edi, %eax\n"
	"	jl 1b\n"
	"	ret\n"
	".size loopy, .-loopy\n");

int odd(int x);
int loopy(int n);
int even(int x) { return odd(x) + loopy(3) - 2; }

int main(void)
{
	printf("skip %d\n", even(41));
	return 0;
}
