# Arguments and return values (-A/-R) recorded in the process, included
# by stub.S: a function whose specs need only integer registers gets a
# stub that calls entry_args with its descriptor (fast.Desc: D_FN, D_FLAGS,
# D_NARGS of res.S) instead of entry. docs/FAST-PATH.md, "Arguments and
# return values", describes them; tracer/fast/res.go decodes the records.
#
# An ARGS group goes before the ENTRY it belongs to, a RET group before
# the EXIT: {word of that record, D_ID << 24 | words << 16 | kind << 8 |
# payload records << 4 | RESARGS}, then the registers, two a record: rdi,
# rsi, rdx, rcx, r8, r9 (kind 0, D_NARGS of them), or rax, rdx (kind 1).
# The drain gives them to the function record that follows (a -W cpu
# watch event may come between) when its word is the one the group names,
# with the specs of function D_ID (rtrace's number: one address may be
# different functions in different processes). A FLAGRET frame keeps
# D_ID above its flags (<< 8) for its RET group.
	.set RESARGS, 14
	.set DF_RET,  64      # the return value is recorded: the frame gets FLAGRET

# entry_argroom: entry's wait for room, for the ARGS group, a watch
# event (-W cpu) and the ENTRY; %rsi the marked descriptor, replaced by
# the function's address.
entry_argroom:
	btr $63, %rsi
	movzbl D_NARGS(%rsi), %eax
	inc %eax
	shr $1, %eax
	add $3, %eax
	mov %rax, ROOMNEED(%rdi)
	CALLCLEAR roomn
	mov D_FN(%rsi), %rsi
	jmp entry_fn

# entry_argrec: the frame pushed (%rsi its word), before the ENTRY: the
# frame's FLAGRET, and the ARGS group, when the ring has room for it and
# the ENTRY (a stalled ring: the ENTRY alone). The saved registers are at
# 0x10 more than entry's offsets past the two pushes.
entry_argrec:
	mov (%rsp), %rax
	btr $63, %rax
	testb $DF_RET, D_FLAGS(%rax)
	jz 1f
	mov DEPTH(%rdi), %rcx
	shl $5, %rcx
	mov D_ID(%rax), %edx
	shl $8, %rdx
	or $FLAGRET, %rdx
	mov %rdx, FRAMES-32+24(%rdi,%rcx)
1:	movzbl D_NARGS(%rax), %ecx
	test %ecx, %ecx
	jz entry_time
	mov HEAD(%rdi), %rdx
	sub CTAIL(%rdi), %rdx
	add ROOMNEED(%rdi), %rdx
	cmp $RINGCAP, %rdx
	ja entry_time
	push %rsi               # the ENTRY's word
	push %rcx               # the argument registers
	mov %rcx, %rsi
	shl $16, %rsi           # words
	inc %ecx
	shr $1, %ecx
	shl $4, %rcx
	or %rcx, %rsi           # payload records
	or $RESARGS, %rsi
	mov D_ID(%rax), %eax    # %rax: the descriptor still
	shl $24, %rax
	or %rax, %rsi           # the function's number
	mov 8(%rsp), %r8        # the ENTRY's word
	CALLCLEAR emit
	mov 0x20(%rsp), %r8     # rdi
	mov 0x28(%rsp), %rsi    # rsi
	CALLCLEAR emit
	cmpq $2, (%rsp)
	jbe 2f
	mov 0x30(%rsp), %r8     # rdx
	mov 0x38(%rsp), %rsi    # rcx
	CALLCLEAR emit
	cmpq $4, (%rsp)
	jbe 2f
	mov 0x18(%rsp), %r8     # r8
	mov %r9, %rsi
	CALLCLEAR emit
2:	pop %rcx
	pop %rsi
	jmp entry_time

# exit_ret: the return of a FLAGRET frame (%rcx), %rsi its EXIT's word,
# %r8 its time: the RET group with rax and rdx, then the EXIT, as exit_pop
# writes it (no room for both: the EXIT alone).
exit_ret:
	push %rsi
	push %r8
	mov 24(%rcx), %rax      # the function's number, above the frame's flags
	shr $8, %rax
	shl $24, %rax
	or $(2 << 16 | 1 << 8 | 1 << 4 | RESARGS), %rax
	push %rax
	movq $3, ROOMNEED(%rdi)
	CALLCLEAR roomn
	mov HEAD(%rdi), %rax
	sub CTAIL(%rdi), %rax
	add $3, %rax
	cmp $RINGCAP, %rax
	ja 1f
	mov 0x10(%rsp), %r8     # the EXIT's word
	mov (%rsp), %rsi        # the group's
	CALLCLEAR emit
	mov 0x48(%rsp), %r8     # rax (exit's 0x30, past the pushes)
	mov 0x40(%rsp), %rsi    # rdx
	CALLCLEAR emit
1:	pop %rax
	pop %r8
	pop %rsi
	CALLCLEAR emit
	jmp exit_done
