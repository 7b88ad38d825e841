/* ctor_main — links against libctorlib.so and runs its sequence from every
 * hook a program has: .preinit_array (before any library constructor),
 * main, an atexit handler and a destructor.  Output must not change when
 * the interposer is loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void ctorlib_ops(const char *tag);

static void pre(void)
{
	ctorlib_ops("main-preinit");
}
__attribute__((section(".preinit_array"), used)) static void (*preinit)(void) = pre;

static void at_exit(void)
{
	ctorlib_ops("main-atexit");
}

__attribute__((destructor)) static void main_dtor(void)
{
	ctorlib_ops("main-dtor");
}

int main(void)
{
	alarm(60); /* default action: terminate */
	atexit(at_exit);
	ctorlib_ops("main");
	return 0;
}
