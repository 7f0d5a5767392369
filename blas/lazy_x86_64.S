/*
 * lazy_x86_64.S: the first call of a forwarded BLAS function. The
 * trampoline (forward_x86_64.S) found its gb_fwd_table entry NULL and
 * jumped here with the entry's index in %r11 and the caller's arguments
 * untouched. Saves every argument register (the integer ones, %rax for
 * varargs, %xmm0-7), calls gb_fwd_resolve(index) (real.c: loads the CPU
 * BLAS once, looks the name up, fills the entry) and tail-jumps to the
 * function it returns with the registers and stack as the caller left
 * them. x86-64 System V only.
 */
    .text
    .p2align 4
    .globl gb_fwd_lazy
    .hidden gb_fwd_lazy
    .type gb_fwd_lazy, @function
gb_fwd_lazy:
    .cfi_startproc
    pushq %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    movq %rsp, %rbp
    .cfi_def_cfa_register %rbp
    /* entry %rsp was 8 mod 16; after the push 0 mod 16; keep it so */
    subq $192, %rsp
    movq %rdi, 0(%rsp)
    movq %rsi, 8(%rsp)
    movq %rdx, 16(%rsp)
    movq %rcx, 24(%rsp)
    movq %r8, 32(%rsp)
    movq %r9, 40(%rsp)
    movq %rax, 48(%rsp)
    movaps %xmm0, 64(%rsp)
    movaps %xmm1, 80(%rsp)
    movaps %xmm2, 96(%rsp)
    movaps %xmm3, 112(%rsp)
    movaps %xmm4, 128(%rsp)
    movaps %xmm5, 144(%rsp)
    movaps %xmm6, 160(%rsp)
    movaps %xmm7, 176(%rsp)
    movl %r11d, %edi
    call gb_fwd_resolve
    movq %rax, %r11
    movq 0(%rsp), %rdi
    movq 8(%rsp), %rsi
    movq 16(%rsp), %rdx
    movq 24(%rsp), %rcx
    movq 32(%rsp), %r8
    movq 40(%rsp), %r9
    movq 48(%rsp), %rax
    movaps 64(%rsp), %xmm0
    movaps 80(%rsp), %xmm1
    movaps 96(%rsp), %xmm2
    movaps 112(%rsp), %xmm3
    movaps 128(%rsp), %xmm4
    movaps 144(%rsp), %xmm5
    movaps 160(%rsp), %xmm6
    movaps 176(%rsp), %xmm7
    movq %rbp, %rsp
    popq %rbp
    .cfi_def_cfa %rsp, 8
    jmp *%r11
    .cfi_endproc
    .size gb_fwd_lazy, .-gb_fwd_lazy

    .section .note.GNU-stack,"",@progbits
