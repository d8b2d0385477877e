/* detour: functions whose entry a 5-byte jump cannot replace. tiny is 4
 * bytes long; countdown's loop jumps back to its second instruction, inside
 * the bytes a jump would overwrite. Written in assembly so that the
 * compiler cannot change their shape. */
#include <stdio.h>

int tiny(int);
int countdown(int);

asm(".text\n"
    ".globl tiny\n.type tiny,@function\n"
    "tiny:\n\tlea 1(%rdi),%eax\n\tret\n"
    ".size tiny,.-tiny\n"
    ".globl countdown\n.type countdown,@function\n"
    "countdown:\n\tpush %rbx\n1:\tmov %edi,%ebx\n\tdec %edi\n\tjnz 1b\n"
    "\tmov %ebx,%eax\n\tpop %rbx\n\tret\n"
    ".size countdown,.-countdown\n");

int main(void)
{
	int s = 0;
	for (int i = 0; i < 5; i++)
		s += tiny(i);
	s += countdown(10);
	printf("detour %d\n", s);
	return 0;
}
